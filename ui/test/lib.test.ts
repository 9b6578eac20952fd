// The pure pieces: the tokenizer, the marker parsers, the console entry point.

import { describe, expect, it } from "vitest";
import setup from "../src/page";
import { guessLang, tokenize, type Lang } from "../src/lib/highlight";
import { omission, splitStream } from "../src/lib/markers";

describe("tokenize", () => {
  /// Highlighting must never change the code a reader sees: tokens join back to the source exactly.
  it("loses and adds nothing, whatever the input", () => {
    const pieces = ["def", " ", "handler", "(", '"', "'''", "`", "${", "}", "#", "//", "/*", "*/", "\n", "\\", "0x1f", "1e9", "é", "𝔘", "@", "rt_", "return", "\t", "\0"];
    let seed = 7;
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    for (let round = 0; round < 400; round += 1) {
      let source = "";
      const length = Math.floor(random() * 40);
      for (let i = 0; i < length; i += 1) source += pieces[Math.floor(random() * pieces.length)];
      for (const lang of ["python", "node", "typescript"] as Lang[]) {
        expect(tokenize(source, lang).map((token) => token.text).join("")).toBe(source);
      }
    }
  });

  /// The kinds a reader relies on: keywords, strings, comments, numbers, definitions.
  it("colours python and javascript", () => {
    const python = tokenize('def f(x):\n    # note\n    return "s" + 42\n', "python");
    expect(python).toContainEqual({ kind: "keyword", text: "def" });
    expect(python).toContainEqual({ kind: "function", text: "f" });
    expect(python).toContainEqual({ kind: "comment", text: "# note" });
    expect(python).toContainEqual({ kind: "string", text: '"s"' });
    expect(python).toContainEqual({ kind: "number", text: "42" });
    const node = tokenize("const s = `a ${b}`; // c\nreturn null;", "node");
    expect(node).toContainEqual({ kind: "keyword", text: "const" });
    expect(node).toContainEqual({ kind: "string", text: "`a ${b}`" });
    expect(node).toContainEqual({ kind: "comment", text: "// c" });
    expect(node).toContainEqual({ kind: "literal", text: "null" });
  });

  /// An unterminated string or comment runs to the end instead of breaking the tokenizer.
  it("tolerates unterminated strings and comments", () => {
    expect(tokenize('x = """never closed', "python").at(-1)).toEqual({ kind: "string", text: '"""never closed' });
    expect(tokenize("/* open", "node").at(-1)).toEqual({ kind: "comment", text: "/* open" });
  });

  /// A run on a kept runtime may omit lang; a guess is better than no colour.
  it("guesses the language from typical code", () => {
    expect(guessLang("result = 2 + 2")).toBe("python");
    expect(guessLang("const x = 1;\nreturn x;")).toBe("node");
    expect(guessLang("")).toBeNull();
  });
});

describe("markers", () => {
  /// The worker splices one marker between head and tail.
  it("splits a truncated stream into head, marker and tail", () => {
    expect(splitStream("head\n[…stdout truncated: was ~12 KB; middle omitted]\ntail", "stdout")).toEqual([
      { kind: "text", text: "head" },
      { kind: "truncated", text: "[…stdout truncated: was ~12 KB; middle omitted]", stream: "stdout", kb: 12 },
      { kind: "text", text: "tail" },
    ]);
    expect(splitStream("plain", "stderr")).toEqual([{ kind: "text", text: "plain" }]);
    expect(splitStream("", "stderr")).toEqual([]);
  });

  /// The omission marker names size and shape; anything else is an ordinary string result.
  it("recognises the omission marker and only it", () => {
    const marker = "<omitted: result was ~0 KB (a 50-char string); returning it whole would flood the model context — print a slice>";
    expect(omission(marker)).toEqual({ text: marker, kb: 0, shape: "a 50-char string" });
    expect(omission("<omitted: hand-written>")).toBeNull();
    expect(omission(4)).toBeNull();
  });
});

describe("setup(host)", () => {
  /// The shipped console names the registry functionTriggers, the spec draft functionCalls; both must work, and reload must unregister.
  it("registers one renderer with either registry name and unregisters on teardown", () => {
    for (const name of ["functionTriggers", "functionCalls"]) {
      const registered: unknown[] = [];
      let unregistered = 0;
      const host = { [name]: { register: (renderer: unknown) => (registered.push(renderer), () => (unregistered += 1)) } };
      const teardown = setup(host);
      expect(registered).toHaveLength(1);
      expect((registered[0] as { id: string }).id).toBe("code-runner/page.js#cards");
      teardown();
      expect(unregistered).toBe(1);
    }
  });

  /// An older console with neither registry must not crash the page.
  it("does nothing on a console without a renderer registry", () => {
    expect(() => setup({})()).not.toThrow();
  });
});
