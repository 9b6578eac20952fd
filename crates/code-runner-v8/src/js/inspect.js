// code-runner's `util.inspect`: how console output and
// uncaught errors are rendered, following Node's rules (strings raw at the top
// level, quoted inside objects; depth 2; 72-column single lines; arrays of
// more than six short entries grouped into columns; at most 100 items).
//
// Part of the bootstrap: `core` is deno_core's, captured before any guest
// code runs; every intrinsic used here is captured too, so a guest that
// rebinds `Object.keys` or `Array.prototype.join` does not change how its
// own output is printed.
const makeInspect = (core) => {
  const ObjectGetPrototypeOf = Object.getPrototypeOf;
  const ObjectGetOwnPropertyNames = Object.getOwnPropertyNames;
  const ObjectGetOwnPropertySymbols = Object.getOwnPropertySymbols;
  const ObjectGetOwnPropertyDescriptor = ownDescriptor;
  const ObjectKeys = Object.keys;
  const ObjectPrototype = Object.prototype;
  const ObjectPrototypeToString = Object.prototype.toString;
  const ObjectIs = Object.is;
  const ArrayIsArray = Array.isArray;
  const ReflectApply = Reflect.apply;
  const JSONStringify = JSON.stringify;
  const MathMax = Math.max;
  const MathMin = Math.min;
  const MathSqrt = Math.sqrt;
  const MathRound = Math.round;
  const MathFloor = Math.floor;
  const NumberParseInt = Number.parseInt;
  const NumberParseFloat = Number.parseFloat;
  const StringCtor = String;
  const call = (fn, self, ...args) => ReflectApply(fn, self, args);
  const FunctionToString = Function.prototype.toString;
  const ErrorToString = Error.prototype.toString;
  const DateToISOString = Date.prototype.toISOString;
  const DateGetTime = Date.prototype.getTime;
  const RegExpToString = RegExp.prototype.toString;
  const SymbolToString = Symbol.prototype.toString;
  const SymbolValueOf = Symbol.prototype.valueOf;
  const NumberValueOf = Number.prototype.valueOf;
  const StringValueOf = String.prototype.valueOf;
  const BooleanValueOf = Boolean.prototype.valueOf;
  const BigIntValueOf = BigInt.prototype.valueOf;
  const MapEntries = Map.prototype.entries;
  const MapGet = Map.prototype.get;
  const MapSet = Map.prototype.set;
  const MapCtor = Map;
  const ArrayPrototypeIncludes = Array.prototype.includes;
  const MapSize = ObjectGetOwnPropertyDescriptor(Map.prototype, "size").get;
  const SetValues = Set.prototype.values;
  const SetSize = ObjectGetOwnPropertyDescriptor(Set.prototype, "size").get;
  const IteratorNext = ObjectGetPrototypeOf(new Map().entries()).next;
  const SetIteratorNext = ObjectGetPrototypeOf(new Set().values()).next;
  const TypedArrayProto = ObjectGetPrototypeOf(Uint8Array.prototype);
  const TypedArrayLength = ObjectGetOwnPropertyDescriptor(TypedArrayProto, "length").get;
  const TypedArrayTag = ObjectGetOwnPropertyDescriptor(TypedArrayProto, Symbol.toStringTag).get;
  const ArrayBufferByteLength = ObjectGetOwnPropertyDescriptor(ArrayBuffer.prototype, "byteLength").get;
  const Uint8ArrayCtor = Uint8Array;
  const StringPrototypeRepeat = String.prototype.repeat;
  const StringPrototypeIncludes = String.prototype.includes;
  const StringPrototypePadStart = String.prototype.padStart;
  const StringPrototypePadEnd = String.prototype.padEnd;
  const StringPrototypeReplace = String.prototype.replace;
  const StringPrototypeSlice = String.prototype.slice;
  const StringPrototypeSplit = String.prototype.split;
  const StringPrototypeCharCodeAt = String.prototype.charCodeAt;
  const NumberToString = Number.prototype.toString;
  const RegExpTest = RegExp.prototype.test;
  const identifier = /^[a-zA-Z_][a-zA-Z_0-9]*$/;
  const classSource = /^class\b/;
  const SymbolToStringTag = Symbol.toStringTag;
  const SymbolIterator = Symbol.iterator;
  const { isProxy, isMap, isSet, isDate, isRegExp, isNativeError, isPromise,
    isTypedArray, isArrayBuffer, isBoxedPrimitive, isNumberObject, isStringObject,
    isBooleanObject, isBigIntObject, isSymbolObject, isAsyncFunction,
    isGeneratorFunction, isWeakMap, isWeakSet, isModuleNamespaceObject,
    getPromiseDetails, getProxyDetails } = core;

  const BREAK_LENGTH = 80;
  const COMPACT = 3;
  const DEPTH = 2;
  const MAX_ARRAY = 100;
  const MAX_STRING = 10000;

  const join = (list, sep) => {
    let out = "";
    for (let i = 0; i < list.length; i++) out += (i === 0 ? "" : sep) + list[i];
    return out;
  };
  const repeat = (s, n) => call(StringPrototypeRepeat, s, n);

  const escapes = { "\n": "\\n", "\t": "\\t", "\r": "\\r", "\b": "\\b", "\f": "\\f", "\v": "\\v", "\\": "\\\\" };
  function quote(str) {
    let q = "'";
    if (call(StringPrototypeIncludes, str, "'")) {
      if (!call(StringPrototypeIncludes, str, '"')) q = '"';
      else if (!call(StringPrototypeIncludes, str, "`") && !call(StringPrototypeIncludes, str, "${")) q = "`";
    }
    let out = "";
    for (let i = 0; i < str.length; i++) {
      const ch = str[i];
      const code = call(StringPrototypeCharCodeAt, str, i);
      if (ch === q) out += "\\" + ch;
      else if (escapes[ch] !== undefined) out += escapes[ch];
      else if (code < 0x20 || code === 0x7f) out += "\\x" + call(StringPrototypePadStart, call(NumberToString, code, 16), 2, "0");
      else out += ch;
    }
    return q + out + q;
  }

  function formatNumber(n) {
    return ObjectIs(n, -0) ? "-0" : `${n}`;
  }

  function formatPrimitive(value) {
    switch (typeof value) {
      case "string": {
        let trailer = "";
        if (value.length > MAX_STRING) {
          trailer = `... ${value.length - MAX_STRING} more character${value.length - MAX_STRING > 1 ? "s" : ""}`;
          value = call(StringPrototypeSlice, value, 0, MAX_STRING);
        }
        return quote(value) + trailer;
      }
      case "number": return formatNumber(value);
      case "bigint": return `${value}n`;
      case "boolean": return `${value}`;
      case "undefined": return "undefined";
      case "symbol": return call(SymbolToString, value);
    }
    return StringCtor(value);
  }

  function keyName(key) {
    if (typeof key === "symbol") return `[${call(SymbolToString, key)}]`;
    if (call(RegExpTest, identifier, key)) return key;
    return quote(key);
  }

  function constructorName(obj) {
    let proto = obj;
    for (let i = 0; i < 1000 && proto !== null; i++) {
      const desc = ObjectGetOwnPropertyDescriptor(proto, "constructor");
      if (desc !== undefined && typeof desc.value === "function" && typeof desc.value.name === "string" && desc.value.name !== "") {
        return desc.value.name;
      }
      proto = ObjectGetPrototypeOf(proto);
    }
    return null;
  }

  function functionBase(fn) {
    let source = "";
    try { source = call(FunctionToString, fn); } catch { /* a revoked proxy */ }
    if (call(RegExpTest, classSource, source)) {
      const name = typeof fn.name === "string" && fn.name ? ` ${fn.name}` : " (anonymous)";
      const sup = ObjectGetPrototypeOf(fn);
      const ext = typeof sup === "function" && sup.name ? ` extends ${sup.name}` : "";
      return `[class${name}${ext}]`;
    }
    let kind = "Function";
    if (isGeneratorFunction(fn)) kind = `${isAsyncFunction(fn) ? "Async" : ""}GeneratorFunction`;
    else if (isAsyncFunction(fn)) kind = "AsyncFunction";
    const name = typeof fn.name === "string" && fn.name ? `: ${fn.name}` : " (anonymous)";
    return `[${kind}${name}]`;
  }

  function errorBase(err) {
    let stack;
    try { stack = err.stack; } catch { stack = undefined; }
    if (typeof stack === "string" && stack !== "") return stack;
    try { return call(ErrorToString, err); } catch { return "[Error]"; }
  }

  // Node's groupArrayElements: short entries of long arrays in columns.
  function groupArrayElements(ctx, output, value) {
    let totalLength = 0;
    let maxLength = 0;
    let outputLength = output.length;
    if (ctx.extra > 0) outputLength--;
    const separatorSpace = 2;
    const dataLen = [];
    for (let i = 0; i < outputLength; i++) {
      const len = output[i].length;
      append(dataLen, len);
      totalLength += len + separatorSpace;
      if (maxLength < len) maxLength = len;
    }
    const actualMax = maxLength + separatorSpace;
    if (actualMax * 3 + ctx.indentationLvl < BREAK_LENGTH &&
        (totalLength / actualMax > 5 || maxLength <= 6)) {
      const averageBias = MathSqrt(actualMax - totalLength / output.length);
      const biasedMax = MathMax(actualMax - 3 - averageBias, 1);
      const columns = MathMin(
        MathRound(MathSqrt(2.5 * biasedMax * outputLength) / biasedMax),
        MathFloor((BREAK_LENGTH - ctx.indentationLvl) / actualMax),
        COMPACT * 4,
        15,
      );
      if (columns <= 1) return output;
      const tmp = [];
      const maxLineLength = [];
      for (let i = 0; i < columns; i++) {
        let lineLength = 0;
        for (let j = i; j < outputLength; j += columns) {
          if (dataLen[j] > lineLength) lineLength = dataLen[j];
        }
        append(maxLineLength, lineLength + separatorSpace);
      }
      let padStart = true;
      if (value !== undefined) {
        for (let i = 0; i < outputLength; i++) {
          if (typeof value[i] !== "number" && typeof value[i] !== "bigint") {
            padStart = false;
            break;
          }
        }
      }
      for (let i = 0; i < outputLength; i += columns) {
        const max = MathMin(i + columns, outputLength);
        let str = "";
        let j = i;
        for (; j < max - 1; j++) {
          const cell = `${output[j]}, `;
          str += padStart
            ? call(StringPrototypePadStart, cell, maxLineLength[j - i], " ")
            : call(StringPrototypePadEnd, cell, maxLineLength[j - i], " ");
        }
        str += padStart
          ? call(StringPrototypePadStart, output[j], maxLineLength[j - i] - separatorSpace, " ")
          : output[j];
        append(tmp, str);
      }
      if (ctx.extra > 0) append(tmp, output[outputLength]);
      return tmp;
    }
    return output;
  }

  function isBelowBreakLength(ctx, output, start, base) {
    let totalLength = output.length + start;
    if (totalLength + output.length > BREAK_LENGTH) return false;
    for (let i = 0; i < output.length; i++) {
      totalLength += output[i].length;
      if (totalLength > BREAK_LENGTH) return false;
    }
    return base === "" || !call(StringPrototypeIncludes, base, "\n");
  }

  function reduceToSingleString(ctx, output, base, braces, isArrayLike, recurseTimes, value) {
    const entries = output.length;
    if (isArrayLike && entries > 6) output = groupArrayElements(ctx, output, value);
    if (ctx.currentDepth - recurseTimes < COMPACT && entries === output.length) {
      const start = output.length + ctx.indentationLvl + braces[0].length + base.length + 10;
      if (isBelowBreakLength(ctx, output, start, base)) {
        const joined = join(output, ", ");
        if (!call(StringPrototypeIncludes, joined, "\n")) {
          return `${base ? `${base} ` : ""}${braces[0]} ${joined} ${braces[1]}`;
        }
      }
    }
    const indentation = `\n${repeat(" ", ctx.indentationLvl)}`;
    return `${base ? `${base} ` : ""}${braces[0]}${indentation}  ${join(output, `,${indentation}  `)}${indentation}${braces[1]}`;
  }

  function formatProperty(ctx, value, recurseTimes, key, desc) {
    let str;
    if (desc.value !== undefined || !("get" in desc || "set" in desc)) {
      ctx.indentationLvl += 2;
      str = formatValue(ctx, desc.value, recurseTimes);
      ctx.indentationLvl -= 2;
    } else if (desc.get !== undefined) {
      str = desc.set !== undefined ? "[Getter/Setter]" : "[Getter]";
    } else {
      str = desc.set !== undefined ? "[Setter]" : "undefined";
    }
    return `${keyName(key)}: ${str}`;
  }

  function ownKeys(value, skipIndices) {
    const names = ObjectGetOwnPropertyNames(value);
    const out = [];
    for (let i = 0; i < names.length; i++) {
      const key = names[i];
      if (skipIndices && `${NumberParseInt(key, 10)}` === key) continue;
      const desc = ObjectGetOwnPropertyDescriptor(value, key);
      if (desc !== undefined && desc.enumerable) append(out, key);
    }
    const symbols = ObjectGetOwnPropertySymbols(value);
    for (let i = 0; i < symbols.length; i++) {
      const desc = ObjectGetOwnPropertyDescriptor(value, symbols[i]);
      if (desc !== undefined && desc.enumerable) append(out, symbols[i]);
    }
    return out;
  }

  function formatValue(ctx, value, recurseTimes, typedArray) {
    if (typeof value !== "object" && typeof value !== "function") return formatPrimitive(value);
    if (value === null) return "null";
    if (isProxy(value)) {
      const details = getProxyDetails(value);
      if (details === null || details[0] === null) return "<Revoked Proxy>";
      return formatValue(ctx, details[0], recurseTimes);
    }
    if (call(ArrayPrototypeIncludes, ctx.seen, value)) {
      let index = call(MapGet, ctx.circular, value);
      if (index === undefined) {
        index = call(MapSize, ctx.circular) + 1;
        call(MapSet, ctx.circular, value, index);
      }
      return `[Circular *${index}]`;
    }
    return formatRaw(ctx, value, recurseTimes, typedArray);
  }

  function formatRaw(ctx, value, recurseTimes) {
    let keys = [];
    let base = "";
    let braces = ["{", "}"];
    let isArrayLike = false;
    let formatter = null;
    const name = constructorName(value);
    const tag = (() => { try { const t = value[SymbolToStringTag]; return typeof t === "string" ? t : ""; } catch { return ""; } })();
    const prefix = (fallback, size) => {
      const n = name === null ? `[${fallback}: null prototype]` : name;
      const t = tag !== "" && tag !== name ? ` [${tag}]` : "";
      return `${n}${size !== undefined ? `(${size})` : ""}${t} `;
    };
    let extra = 0;
    if (ArrayIsArray(value)) {
      keys = ownKeys(value, true);
      braces = [`${name === "Array" ? "" : prefix("Array", value.length)}[`, "]"];
      isArrayLike = true;
      formatter = () => {
        const output = [];
        const len = MathMin(value.length, MAX_ARRAY);
        let holes = 0;
        for (let i = 0; i < len; i++) {
          const desc = ObjectGetOwnPropertyDescriptor(value, i);
          if (desc === undefined) { holes++; continue; }
          if (holes > 0) { append(output, `<${holes} empty item${holes > 1 ? "s" : ""}>`); holes = 0; }
          ctx.indentationLvl += 2;
          append(output, desc.get || desc.set ? formatProperty(ctx, value, recurseTimes, `${i}`, desc) : formatValue(ctx, desc.value, recurseTimes));
          ctx.indentationLvl -= 2;
        }
        if (holes > 0) append(output, `<${holes} empty item${holes > 1 ? "s" : ""}>`);
        if (value.length > MAX_ARRAY) { extra = value.length - MAX_ARRAY; append(output, `... ${extra} more item${extra > 1 ? "s" : ""}`); }
        return output;
      };
    } else if (isTypedArray(value)) {
      const length = call(TypedArrayLength, value);
      keys = ownKeys(value, true);
      braces = [`${prefix(call(TypedArrayTag, value), length)}[`, "]"];
      isArrayLike = true;
      formatter = () => {
        const output = [];
        const len = MathMin(length, MAX_ARRAY);
        for (let i = 0; i < len; i++) append(output, typeof value[i] === "bigint" ? `${value[i]}n` : formatNumber(value[i]));
        if (length > MAX_ARRAY) { extra = length - MAX_ARRAY; append(output, `... ${extra} more item${extra > 1 ? "s" : ""}`); }
        return output;
      };
    } else if (isMap(value)) {
      keys = ownKeys(value, false);
      braces = [`${prefix("Map", call(MapSize, value))}{`, "}"];
      formatter = () => {
        const output = [];
        const it = call(MapEntries, value);
        for (let i = 0; i < MAX_ARRAY; i++) {
          const step = call(IteratorNext, it);
          if (step.done) break;
          ctx.indentationLvl += 2;
          append(output, `${formatValue(ctx, step.value[0], recurseTimes)} => ${formatValue(ctx, step.value[1], recurseTimes)}`);
          ctx.indentationLvl -= 2;
        }
        const size = call(MapSize, value);
        if (size > MAX_ARRAY) append(output, `... ${size - MAX_ARRAY} more item${size - MAX_ARRAY > 1 ? "s" : ""}`);
        return output;
      };
    } else if (isSet(value)) {
      keys = ownKeys(value, false);
      braces = [`${prefix("Set", call(SetSize, value))}{`, "}"];
      formatter = () => {
        const output = [];
        const it = call(SetValues, value);
        for (let i = 0; i < MAX_ARRAY; i++) {
          const step = call(SetIteratorNext, it);
          if (step.done) break;
          ctx.indentationLvl += 2;
          append(output, formatValue(ctx, step.value, recurseTimes));
          ctx.indentationLvl -= 2;
        }
        const size = call(SetSize, value);
        if (size > MAX_ARRAY) append(output, `... ${size - MAX_ARRAY} more item${size - MAX_ARRAY > 1 ? "s" : ""}`);
        return output;
      };
    } else {
      keys = ownKeys(value, false);
      if (typeof value === "function") {
        base = functionBase(value);
        if (keys.length === 0) return base;
      } else if (isNativeError(value) || (value instanceof Error)) {
        base = errorBase(value);
        const kept = [];
        for (let i = 0; i < keys.length; i++) if (keys[i] !== "stack" && keys[i] !== "message") append(kept, keys[i]);
        keys = kept;
        if (keys.length === 0) return base;
        if (ctx.indentationLvl > 0) base = join(call(StringPrototypeSplit, base, "\n"), `\n${repeat(" ", ctx.indentationLvl)}`);
      } else if (isRegExp(value)) {
        base = call(RegExpToString, value);
        if (keys.length === 0) return base;
      } else if (isDate(value)) {
        const time = call(DateGetTime, value);
        base = time !== time ? "Invalid Date" : call(DateToISOString, value);
        if (keys.length === 0) return base;
      } else if (isPromise(value)) {
        const details = getPromiseDetails(value);
        const state = details[0];
        const result = details[1];
        braces = [`${prefix("Promise")}{`, "}"];
        formatter = () => {
          if (state === 0) return ["<pending>"];
          ctx.indentationLvl += 2;
          const shown = formatValue(ctx, result, recurseTimes);
          ctx.indentationLvl -= 2;
          return [state === 2 ? `<rejected> ${shown}` : shown];
        };
      } else if (isWeakMap(value) || isWeakSet(value)) {
        return `${prefix(isWeakMap(value) ? "WeakMap" : "WeakSet")}{ <items unknown> }`;
      } else if (isArrayBuffer(value)) {
        const bytes = new Uint8ArrayCtor(value, 0, MathMin(call(ArrayBufferByteLength, value), 50));
        let hex = "";
        for (let i = 0; i < bytes.length; i++) hex += (i ? " " : "") + call(StringPrototypePadStart, call(NumberToString, bytes[i], 16), 2, "0");
        const more = call(ArrayBufferByteLength, value) > 50 ? ` ... ${call(ArrayBufferByteLength, value) - 50} more bytes` : "";
        return `${prefix("ArrayBuffer")}{ [Uint8Contents]: <${hex}${more}>, byteLength: ${call(ArrayBufferByteLength, value)} }`;
      } else if (isBoxedPrimitive(value)) {
        let inner;
        let kind;
        if (isNumberObject(value)) { kind = "Number"; inner = formatNumber(call(NumberValueOf, value)); }
        else if (isStringObject(value)) { kind = "String"; inner = quote(call(StringValueOf, value)); keys = ownKeys(value, true); }
        else if (isBooleanObject(value)) { kind = "Boolean"; inner = `${call(BooleanValueOf, value)}`; }
        else if (isBigIntObject(value)) { kind = "BigInt"; inner = `${call(BigIntValueOf, value)}n`; }
        else { kind = "Symbol"; inner = call(SymbolToString, call(SymbolValueOf, value)); }
        base = `[${kind}: ${inner}]`;
        if (keys.length === 0) return base;
      } else if (isModuleNamespaceObject(value)) {
        braces = ["[Module: null prototype] {", "}"];
      } else {
        if (name === "Object") {
          if (tag !== "") braces = [`Object [${tag}] {`, "}"];
        } else {
          braces = [`${prefix("Object")}{`, "}"];
        }
        if (keys.length === 0) return `${braces[0]}}`;
      }
    }
    if (recurseTimes > DEPTH) {
      return `[${name === null ? "Object: null prototype" : (ArrayIsArray(value) ? "Array" : name)}]`;
    }
    recurseTimes += 1;
    append(ctx.seen, value);
    ctx.currentDepth = recurseTimes;
    let output;
    const saved = ctx.extra;
    try {
      output = formatter === null ? [] : formatter();
      for (let i = 0; i < keys.length; i++) {
        const desc = ObjectGetOwnPropertyDescriptor(value, keys[i]);
        if (desc !== undefined) append(output, formatProperty(ctx, value, recurseTimes, keys[i], desc));
      }
    } finally {
      ctx.seen.length -= 1;
    }
    ctx.extra = extra;
    let res = reduceToSingleString(ctx, output, base, braces, isArrayLike, recurseTimes, value);
    ctx.extra = saved;
    const index = call(MapGet, ctx.circular, value);
    if (index !== undefined) res = `<ref *${index}> ${res}`;
    return res;
  }

  function inspect(value) {
    const ctx = { seen: [], circular: new MapCtor(), indentationLvl: 0, currentDepth: 0, extra: 0 };
    return formatValue(ctx, value, 0);
  }

  return { inspect, formatPrimitive, formatNumber, constructorName };
};
