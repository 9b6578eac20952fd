// A small tokenizer for the languages code-runner runs (typescript is node's
// grammar with its type keywords): enough to colour
// keywords, strings, numbers, comments and calls. It never fails: text it does
// not recognise is plain, and it is linear in the length of the source.

export type Lang = "python" | "node" | "typescript";

/** Whether `value` is a wire `lang`. */
export function isLang(value: unknown): value is Lang {
  return value === "python" || value === "node" || value === "typescript";
}

export type TokenKind =
  | "plain"
  | "keyword"
  | "literal"
  | "builtin"
  | "string"
  | "number"
  | "comment"
  | "function"
  | "decorator";

export interface Token {
  kind: TokenKind;
  text: string;
}

const words = (list: string) => new Set(list.split(" "));

const PYTHON = {
  keywords: words(
    "and as assert async await break class continue def del elif else except finally for from global if import in is lambda nonlocal not or pass raise return try while with yield match case",
  ),
  literals: words("True False None"),
  builtins: words(
    "print len range str int float dict list set tuple bool bytes open isinstance enumerate zip map filter sorted sum min max abs any all repr type round iter next super object Exception ValueError TypeError KeyError IndexError RuntimeError MemoryError iii",
  ),
  // comment | triple-quoted string | one-line string | decorator | number | identifier
  pattern:
    /(#[^\n]*)|((?:[rRbBuUfF]{1,2})?(?:"""[^]*?(?:"""|$)|'''[^]*?(?:'''|$)))|((?:[rRbBuUfF]{1,2})?(?:"(?:[^"\\\n]|\\.)*"?|'(?:[^'\\\n]|\\.)*'?))|(@[\p{L}_][\p{L}\p{N}_.]*)|((?:0[xX][\da-fA-F_]+|0[bB][01_]+|0[oO][0-7_]+|(?:\d[\d_]*\.?[\d_]*|\.\d[\d_]*)(?:[eE][+-]?\d+)?[jJ]?))|([\p{L}_][\p{L}\p{N}_]*)/gu,
  definers: words("def class"),
};

const NODE = {
  keywords: words(
    "const let var function return if else for while do break continue new class extends super this typeof instanceof in of async await try catch finally throw import export from default switch case yield void delete static get set with",
  ),
  literals: words("true false null undefined NaN Infinity"),
  builtins: words(
    "console Math JSON Promise Object Array String Number Boolean Date Map Set WeakMap Symbol Error TypeError RangeError RegExp BigInt globalThis iii",
  ),
  // line comment + block comment | string | template literal (placeholders stay string-coloured) | (no decorators) | number | identifier
  pattern:
    /(\/\/[^\n]*|\/\*[^]*?(?:\*\/|$))|(`(?:[^`\\]|\\[^])*`?)|("(?:[^"\\\n]|\\.)*"?|'(?:[^'\\\n]|\\.)*'?)|((?!)x)|((?:0[xX][\da-fA-F_]+|0[bB][01_]+|0[oO][0-7_]+|(?:\d[\d_]*\.?[\d_]*|\.\d[\d_]*)(?:[eE][+-]?\d+)?n?))|([\p{L}_$][\p{L}\p{N}_$]*)/gu,
  definers: words("function class"),
};

const TYPESCRIPT = {
  ...NODE,
  keywords: new Set([
    ...NODE.keywords,
    ..."interface type enum namespace declare abstract implements private protected public readonly keyof satisfies as is infer".split(" "),
  ]),
  builtins: new Set([...NODE.builtins, ..."string number boolean unknown never any object bigint symbol Record Partial Readonly Array".split(" ")]),
  definers: words("function class interface type enum"),
};

/** Splits `source` into coloured tokens; joined, their texts are `source` exactly. */
export function tokenize(source: string, lang: Lang): Token[] {
  const grammar = lang === "python" ? PYTHON : lang === "typescript" ? TYPESCRIPT : NODE;
  const pattern = new RegExp(grammar.pattern.source, grammar.pattern.flags);
  const tokens: Token[] = [];
  const push = (kind: TokenKind, text: string) => {
    const last = tokens[tokens.length - 1];
    if (last && last.kind === kind && kind === "plain") last.text += text;
    else tokens.push({ kind, text });
  };
  let previousWord = "";
  let at = 0;
  for (let match = pattern.exec(source); match; match = pattern.exec(source)) {
    if (match[0] === "") {
      pattern.lastIndex += 1;
      continue;
    }
    if (match.index > at) push("plain", source.slice(at, match.index));
    at = match.index + match[0].length;
    const [text, comment, longString, string, decorator, number, word] = match;
    if (comment !== undefined) push("comment", text);
    else if (longString !== undefined || string !== undefined) push("string", text);
    else if (decorator !== undefined) push("decorator", text);
    else if (number !== undefined) {
      // A number glued to a word (`x1`) is part of that word, not a literal.
      push("number", text);
    } else if (word !== undefined) {
      push(classify(word, source, at, previousWord, grammar), text);
      previousWord = word;
      continue;
    }
    previousWord = "";
  }
  if (at < source.length) push("plain", source.slice(at));
  return tokens;
}

function classify(
  word: string,
  source: string,
  end: number,
  previousWord: string,
  grammar: typeof PYTHON,
): TokenKind {
  if (grammar.keywords.has(word)) return "keyword";
  if (grammar.literals.has(word)) return "literal";
  if (grammar.definers.has(previousWord)) return "function";
  if (/^\s*\(/.test(source.slice(end, end + 32))) return grammar.builtins.has(word) ? "builtin" : "function";
  if (grammar.builtins.has(word)) return "builtin";
  return "plain";
}

/** A guess at the language of `code` when the call did not say (a run on a kept runtime). */
export function guessLang(code: string): Lang | null {
  let python = 0;
  let node = 0;
  if (/^\s*(def|class|import|from)\s/m.test(code)) python += 2;
  if (/^\s*result\s*=/m.test(code)) python += 2;
  if (/\bprint\(|:\s*$|\bNone\b|\bTrue\b|\bFalse\b|\belif\b/m.test(code)) python += 1;
  if (/\b(const|let|var|function)\s|=>|;\s*$|===|\bconsole\.|\bawait\b|\bnull\b/m.test(code)) node += 1;
  if (/^\s*return\b/m.test(code)) node += 2;
  if (python === node) return null;
  if (python > node) return "python";
  // Type annotations, interfaces and `as` casts: typescript, not plain node.
  if (/^\s*(interface|type)\s+\w+|:\s*(string|number|boolean|unknown|any)\b|\bas\s+(const|unknown|any|string|number)\b/m.test(code)) return "typescript";
  return "node";
}
