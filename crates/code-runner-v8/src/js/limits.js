// Guards on the built-ins whose memory no cap counts, installed once while
// the startup snapshot is made (the originals are reachable only from these
// closures afterwards):
//
// - ArrayBuffer and SharedArrayBuffer: V8 reserves a resizable buffer's
//   `maxByteLength` itself and commits it as the buffer grows, outside the
//   allocator that counts external_mb, so the constructors charge the whole
//   reservation to external_mb first (`op_cr_reserve`: a RangeError past the
//   budget, before V8 reserves anything). The charge is a token kept beside
//   every buffer that shares the reservation (`transfer` moves it to the
//   new buffer); it comes back when the last of them is collected.
// - RegExp: compiling a pattern takes zone memory outside both caps (a 3 MB
//   pattern took 192 MiB), so a pattern compiled from a string is bounded by
//   length wherever a string becomes a pattern: the constructor,
//   `RegExp.prototype.compile`, and `String.prototype.match`, `matchAll` and
//   `search` (which make a pattern of a non-RegExp argument).
const installLimits = (core, globalThis) => {
  const { isRegExp } = core;
  const { op_cr_reserve } = core.ops;
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

  // ---- ArrayBuffer and SharedArrayBuffer -----------------------------------

  const WeakMapCtor = WeakMap;
  const WeakMapGet = WeakMap.prototype.get;
  const WeakMapSet = WeakMap.prototype.set;
  const MathTrunc = Math.trunc;
  const NumberIsNaN = Number.isNaN;
  const MAX_INDEX = 2 ** 53 - 1;
  /** Each resizable buffer's reservation token (see `op_cr_reserve`). */
  const reservations = new WeakMapCtor();

  // The standard's ToIndex.
  const toIndex = (value) => {
    const number = +value;
    const integer = NumberIsNaN(number) ? 0 : MathTrunc(number);
    if (integer < 0 || integer > MAX_INDEX) throw new RangeErrorCtor("Invalid array buffer length");
    return integer === 0 ? 0 : integer;
  };

  // The constructor's steps as the standard has them (length, then the
  // `maxByteLength` option, each read and converted once); V8 makes the
  // buffer from the converted numbers once the reservation is charged.
  const guardBuffer = (Original, name) => {
    const guard = {
      [name]: function (length, options) {
        if (new.target === undefined) throw new TypeErrorCtor(`Constructor ${name} requires 'new'`);
        const byteLength = toIndex(length);
        const max = options !== null && (typeof options === "object" || typeof options === "function") ? options.maxByteLength : undefined;
        if (max === undefined) return ReflectConstruct(Original, [byteLength], new.target);
        const maxByteLength = toIndex(max);
        const sized = { __proto__: null, maxByteLength };
        // V8's own RangeError, before it reserves anything.
        if (byteLength > maxByteLength) return ReflectConstruct(Original, [byteLength, sized], new.target);
        const token = op_cr_reserve(maxByteLength);
        if (token === null) {
          throw new RangeErrorCtor(
            `${name}: a resizable buffer's maxByteLength (${maxByteLength} bytes) is charged to external_mb when it is made, and that limit is reached`,
          );
        }
        const buffer = ReflectConstruct(Original, [byteLength, sized], new.target);
        call(WeakMapSet, reservations, buffer, token);
        return buffer;
      },
    }[name];
    replaceConstructor(Original, guard, name);
  };
  guardBuffer(ArrayBuffer, "ArrayBuffer");
  // V8 installs SharedArrayBuffer into each context it deserializes, after
  // the snapshot: each booted isolate calls this before guest code runs.
  const guardShared = (function guardShared() {
    const Shared = globalThis.SharedArrayBuffer;
    if (typeof Shared === "function" && call(MapGet, nativeText, Shared) === undefined) guardBuffer(Shared, "SharedArrayBuffer");
  });

  // `transfer()` of a resizable buffer hands its reservation to the new one.
  const ArrayBufferProto = ArrayBuffer.prototype;
  const OriginalTransfer = ArrayBufferProto.transfer;
  const transfer = {
    transfer() {
      const token = call(WeakMapGet, reservations, this);
      const moved = ReflectApply(OriginalTransfer, this, arguments);
      if (token !== undefined) call(WeakMapSet, reservations, moved, token);
      return moved;
    },
  }.transfer;
  markNative(transfer, "transfer");
  ObjectDefineProperty(ArrayBufferProto, "transfer", { __proto__: null, value: transfer, writable: true, enumerable: false, configurable: true });

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
  return { guardShared };
};
