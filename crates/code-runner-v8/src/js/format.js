// code-runner's `util.format`, and what Node prints for an uncaught
// exception or an unhandled rejection, over `inspect.js`. Like it, part of
// the bootstrap: every intrinsic is captured before guest code runs.
const makeFormat = (core, { inspect, formatPrimitive, formatNumber, constructorName }) => {
  const ReflectApply = Reflect.apply;
  const call = (fn, self, ...args) => ReflectApply(fn, self, args);
  const StringCtor = String;
  const NumberCtor = Number;
  const NumberParseInt = Number.parseInt;
  const NumberParseFloat = Number.parseFloat;
  const JSONStringify = JSON.stringify;
  const StringPrototypeIncludes = String.prototype.includes;
  const StringPrototypeSlice = String.prototype.slice;
  const SymbolToString = Symbol.prototype.toString;
  const { isNativeError } = core;

  // Node's util.format: printf-like specifiers in a leading string, then the
  // rest of the arguments joined by spaces (strings raw, others inspected).
  function format(args) {
    let first = args[0];
    let out = "";
    let a = 1;
    if (typeof first === "string" && call(StringPrototypeIncludes, first, "%") && args.length > 1) {
      let last = 0;
      for (let i = 0; i < first.length - 1; i++) {
        if (first[i] !== "%") continue;
        const spec = first[i + 1];
        let piece;
        if (spec === "%") { out += call(StringPrototypeSlice, first, last, i) + "%"; last = i + 2; i++; continue; }
        if (a >= args.length) continue;
        const arg = args[a];
        switch (spec) {
          case "s": piece = typeof arg === "string" ? arg : typeof arg === "object" && arg !== null || typeof arg === "function" ? inspect(arg) : formatPrimitive(arg); break;
          case "d": case "i": {
            if (typeof arg === "bigint") piece = `${arg}n`;
            else if (typeof arg === "symbol") piece = "NaN";
            else { const n = spec === "i" ? NumberParseInt(arg) : NumberCtor(arg); piece = formatNumber(n); }
            break;
          }
          case "f": piece = typeof arg === "symbol" ? "NaN" : formatNumber(NumberParseFloat(arg)); break;
          case "j": try { piece = JSONStringify(arg); } catch { piece = "[Circular]"; } break;
          case "o": case "O": piece = inspect(arg); break;
          case "c": piece = ""; break;
          default: continue;
        }
        out += call(StringPrototypeSlice, first, last, i) + piece;
        last = i + 2;
        i++;
        a++;
      }
      out += call(StringPrototypeSlice, first, last);
    } else {
      a = 0;
    }
    for (; a < args.length; a++) {
      const arg = args[a];
      out += (out === "" && a === 0 ? "" : " ") + (typeof arg === "string" ? arg : inspect(arg));
    }
    return out;
  }

  // What Node prints for an uncaught exception: errors inspected (stack and
  // own properties), other values as themselves.
  function formatThrown(value) {
    if (typeof value === "object" && value !== null || typeof value === "function") return inspect(value);
    return typeof value === "string" ? value : formatPrimitive(value);
  }

  function describeReason(value) {
    if (typeof value === "object" && value !== null) {
      const n = constructorName(value);
      return `#<${n === null ? "Object" : n}>`;
    }
    return typeof value === "symbol" ? call(SymbolToString, value) : StringCtor(value);
  }

  // What Node prints for a promise rejected with nobody listening.
  function formatUnhandled(reason) {
    if (isNativeError(reason) || reason instanceof Error) return inspect(reason);
    return "UnhandledPromiseRejection: This error originated either by throwing inside of an async function without a catch block, or by rejecting a promise which was not handled with .catch(). " +
      `The promise rejected with the reason "${describeReason(reason)}".\n    code: 'ERR_UNHANDLED_REJECTION'`;
  }

  return { format, formatThrown, formatUnhandled };
};
