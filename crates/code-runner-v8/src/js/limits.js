// Guards on the built-ins whose memory no cap counts, installed once while
// the startup snapshot is made (the originals are reachable only from these
// closures afterwards):
//
// - ArrayBuffer: a resizable buffer (`maxByteLength`) is reserved and
//   committed by V8 itself, outside the allocator that counts external_mb, so
//   the option is refused. (SharedArrayBuffer and Atomics are removed from
//   the global object at boot, as WebAssembly is.)
// - RegExp: compiling a pattern takes zone memory outside both caps (a 3 MB
//   pattern took 192 MiB), so a pattern compiled from a string is bounded by
//   length wherever a string becomes a pattern: the constructor,
//   `RegExp.prototype.compile`, and `String.prototype.match`, `matchAll` and
//   `search` (which make a pattern of a non-RegExp argument).
const installLimits = (core, globalThis) => {
  const { isRegExp } = core;
  const ReflectApply = Reflect.apply;
  const ReflectConstruct = Reflect.construct;
  const ObjectDefineProperty = Object.defineProperty;
  const ObjectGetOwnPropertyNames = Object.getOwnPropertyNames;
  const ObjectGetOwnPropertySymbols = Object.getOwnPropertySymbols;
  const ObjectGetOwnPropertyDescriptor = Object.getOwnPropertyDescriptor;
  const ObjectSetPrototypeOf = Object.setPrototypeOf;
  const ObjectGetPrototypeOf = Object.getPrototypeOf;
  const RangeErrorCtor = RangeError;
  const TypeErrorCtor = TypeError;
  const StringCtor = String;
  const SymbolMatch = Symbol.match;
  const SymbolMatchAll = Symbol.matchAll;
  const SymbolSearch = Symbol.search;

  const MapCtor = Map;
  const MapGet = Map.prototype.get;
  const MapSet = Map.prototype.set;
  const call = (fn, self, ...args) => ReflectApply(fn, self, args);

  /** Longest pattern compiled from a string, in UTF-16 units. */
  const MAX_PATTERN = 65536;

  // Function.prototype.toString prints each guard (and itself) as the
  // built-in it stands for: code that tells native functions apart, as
  // test suites do, sees what it saw before.
  const FunctionToString = Function.prototype.toString;
  const nativeText = new MapCtor();
  const markNative = (fn, name) => call(MapSet, nativeText, fn, `function ${name}() { [native code] }`);
  const toStringGuard = {
    toString() {
      const text = call(MapGet, nativeText, this);
      return text !== undefined ? text : ReflectApply(FunctionToString, this, []);
    },
  }.toString;
  markNative(toStringGuard, "toString");
  ObjectDefineProperty(Function.prototype, "toString", { __proto__: null, value: toStringGuard, writable: true, enumerable: false, configurable: true });

  // A constructor in place of `original`: same prototype object, same
  // statics, and `original.prototype.constructor` pointing at it.
  const replaceConstructor = (original, replacement, name) => {
    ObjectSetPrototypeOf(replacement, ObjectGetPrototypeOf(original));
    const keys = [...ObjectGetOwnPropertyNames(original), ...ObjectGetOwnPropertySymbols(original)];
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i];
      if (key === "prototype" || key === "length" || key === "name" || key === "arguments" || key === "caller") continue;
      const desc = ObjectGetOwnPropertyDescriptor(original, key);
      ObjectSetPrototypeOf(desc, null);
      ObjectDefineProperty(replacement, key, desc);
    }
    ObjectDefineProperty(replacement, "prototype", { __proto__: null, value: original.prototype, writable: false, enumerable: false, configurable: false });
    ObjectDefineProperty(replacement, "length", { __proto__: null, value: original.length, configurable: true });
    ObjectDefineProperty(replacement, "name", { __proto__: null, value: name, configurable: true });
    markNative(replacement, name);
    ObjectDefineProperty(original.prototype, "constructor", { __proto__: null, value: replacement, writable: true, enumerable: false, configurable: true });
    ObjectDefineProperty(globalThis, name, { __proto__: null, value: replacement, writable: true, enumerable: false, configurable: true });
  };

  // ---- ArrayBuffer -----------------------------------------------------------

  const OriginalArrayBuffer = ArrayBuffer;
  const ArrayBufferGuard = function ArrayBuffer(length, options) {
    if (new.target === undefined) throw new TypeErrorCtor("Constructor ArrayBuffer requires 'new'");
    if (options !== null && typeof options === "object" && options.maxByteLength !== undefined) {
      throw new RangeErrorCtor(
        "resizable ArrayBuffers (maxByteLength) are not available in this sandbox: V8 commits their memory outside external_mb; allocate a fixed length instead",
      );
    }
    return ReflectConstruct(OriginalArrayBuffer, [length], new.target);
  };
  replaceConstructor(OriginalArrayBuffer, ArrayBufferGuard, "ArrayBuffer");

  // ---- RegExp ----------------------------------------------------------------

  const checkPattern = (pattern) => {
    if (pattern.length > MAX_PATTERN) {
      throw new RangeErrorCtor(
        `a regular expression compiled from a string is limited to ${MAX_PATTERN} characters in this sandbox; this pattern has ${pattern.length}`,
      );
    }
    return pattern;
  };
  // The standard's IsRegExp: a `Symbol.match` property decides, else the internal slot.
  const isRegExpLike = (value) => {
    if (value === null || (typeof value !== "object" && typeof value !== "function")) return false;
    const matcher = value[SymbolMatch];
    return matcher !== undefined ? !!matcher : isRegExp(value);
  };
  // A RegExp already exists, so its source was bounded; anything else is
  // made a string here, once, and checked (no second conversion can differ).
  const patternOf = (pattern) => {
    if (pattern === undefined || isRegExp(pattern)) return pattern;
    // ToString, as the standard does it (a Symbol throws a TypeError).
    return checkPattern(`${pattern}`);
  };

  const OriginalRegExp = RegExp;
  // The constructor's steps as the standard has them, with every pattern
  // that is not already a RegExp read once and bounded before V8 compiles it.
  const RegExpGuard = function RegExp(pattern, flags) {
    const likeRegExp = isRegExpLike(pattern);
    if (new.target === undefined && likeRegExp && flags === undefined && pattern.constructor === RegExpGuard) {
      return pattern;
    }
    let source = pattern;
    let finalFlags = flags;
    if (isRegExp(pattern)) {
      // V8 reads a real RegExp's own source.
    } else if (likeRegExp) {
      source = pattern.source;
      if (flags === undefined) finalFlags = pattern.flags;
      source = patternOf(source);
    } else {
      source = patternOf(pattern);
    }
    return ReflectConstruct(OriginalRegExp, [source, finalFlags], new.target === undefined ? RegExpGuard : new.target);
  };
  replaceConstructor(OriginalRegExp, RegExpGuard, "RegExp");

  const OriginalCompile = OriginalRegExp.prototype.compile;
  ObjectDefineProperty(OriginalRegExp.prototype, "compile", {
    __proto__: null,
    value: (() => {
      const compile = { compile(pattern, flags) { return ReflectApply(OriginalCompile, this, [patternOf(pattern), flags]); } }.compile;
      markNative(compile, "compile");
      return compile;
    })(),
    writable: true,
    enumerable: false,
    configurable: true,
  });

  // `String.prototype.match` and its kind, step by step as the standard has
  // them: a matcher the argument carries is called (read once); otherwise
  // the argument becomes a pattern, here bounded.
  const wrapMatcher = (name, symbol) => {
    const original = StringCtor.prototype[name];
    const wrapper = {
      [name](regexp) {
        if (this === undefined || this === null) throw new TypeErrorCtor(`String.prototype.${name} called on null or undefined`);
        if (regexp !== undefined && regexp !== null) {
          const matcher = regexp[symbol];
          if (matcher !== undefined && matcher !== null) {
            if (name === "matchAll" && isRegExp(regexp)) return ReflectApply(original, this, [regexp]);
            return ReflectApply(matcher, regexp, [this]);
          }
        }
        // The receiver becomes a string before the pattern does, as in the standard.
        const string = `${this}`;
        return ReflectApply(original, string, [regexp === undefined ? undefined : checkPattern(`${regexp}`)]);
      },
    }[name];
    markNative(wrapper, name);
    ObjectDefineProperty(StringCtor.prototype, name, { __proto__: null, value: wrapper, writable: true, enumerable: false, configurable: true });
  };
  wrapMatcher("match", SymbolMatch);
  wrapMatcher("matchAll", SymbolMatchAll);
  wrapMatcher("search", SymbolSearch);
};
