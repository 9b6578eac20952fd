// code-runner's `structuredClone`: a walk over the value in JavaScript, so
// the copy lives on the isolate's heap (counted by heap_mb) and strings are
// shared, never copied. V8's serializer writes a string once per reference
// into a buffer outside every cap: 384 references to one 8 MiB string made
// 3 GB of host memory. Part of the bootstrap: intrinsics are captured before
// guest code runs, and results are built with [[DefineOwnProperty]], so a
// setter a guest put on a prototype is never called.
const makeStructuredClone = (core) => {
  const {
    isArrayBuffer, isArrayBufferView, isDataView, isDate, isRegExp, isMap, isSet, isNativeError,
    isBooleanObject, isNumberObject, isStringObject, isBigIntObject, isSymbolObject, isProxy,
    isPromise, isWeakMap, isWeakSet, isTypedArray,
  } = core;
  const ReflectApply = Reflect.apply;
  const call = (fn, self, ...args) => ReflectApply(fn, self, args);
  const ObjectDefineProperty = Object.defineProperty;
  const ObjectKeys = Object.keys;
  const ObjectGetPrototypeOf = Object.getPrototypeOf;
  const ObjectGetOwnPropertyDescriptor = Object.getOwnPropertyDescriptor;
  const ArrayIsArray = Array.isArray;
  const ArrayCtor = Array;
  const ObjectCtor = Object;
  const MapCtor = Map;
  const SetCtor = Set;
  const DateCtor = Date;
  const RegExpCtor = RegExp;
  const BooleanCtor = Boolean;
  const NumberCtor = Number;
  const StringCtor = String;
  const BigIntCtor = BigInt;
  const DataViewCtor = DataView;
  const Uint8ArrayCtor = Uint8Array;
  const ErrorCtor = Error;
  const getter = (proto, name) => ObjectGetOwnPropertyDescriptor(proto, name).get;
  const MapGet = Map.prototype.get;
  const MapSet = Map.prototype.set;
  const MapForEach = Map.prototype.forEach;
  const SetAdd = Set.prototype.add;
  const SetForEach = Set.prototype.forEach;
  const DateGetTime = Date.prototype.getTime;
  const RegExpSource = getter(RegExp.prototype, "source");
  const RegExpFlags = getter(RegExp.prototype, "flags");
  const BooleanValueOf = Boolean.prototype.valueOf;
  const NumberValueOf = Number.prototype.valueOf;
  const StringValueOf = String.prototype.valueOf;
  const BigIntValueOf = BigInt.prototype.valueOf;
  const TypedArrayProto = ObjectGetPrototypeOf(Uint8Array.prototype);
  const TypedArrayBuffer = getter(TypedArrayProto, "buffer");
  const TypedArrayOffset = getter(TypedArrayProto, "byteOffset");
  const TypedArrayLength = getter(TypedArrayProto, "length");
  const TypedArrayTag = getter(TypedArrayProto, Symbol.toStringTag);
  const TypedArraySet = TypedArrayProto.set;
  const ArrayBufferByteLength = getter(ArrayBuffer.prototype, "byteLength");
  const DataViewBuffer = getter(DataView.prototype, "buffer");
  const DataViewOffset = getter(DataView.prototype, "byteOffset");
  const DataViewLength = getter(DataView.prototype, "byteLength");
  const typedArrays = new MapCtor();
  for (const ctor of [Int8Array, Uint8Array, Uint8ClampedArray, Int16Array, Uint16Array, Int32Array,
    Uint32Array, Float32Array, Float64Array, BigInt64Array, BigUint64Array]) {
    call(MapSet, typedArrays, ctor.name, ctor);
  }
  if (typeof Float16Array === "function") call(MapSet, typedArrays, "Float16Array", Float16Array);
  const errors = new MapCtor();
  for (const ctor of [Error, EvalError, RangeError, ReferenceError, SyntaxError, TypeError, URIError]) {
    call(MapSet, errors, ctor.name, ctor);
  }

  const define = (target, key, value) => {
    ObjectDefineProperty(target, key, { __proto__: null, value, writable: true, enumerable: true, configurable: true });
  };

  class DataCloneError extends ErrorCtor {}
  ObjectDefineProperty(DataCloneError.prototype, "name", { __proto__: null, value: "DataCloneError", writable: true, configurable: true });
  const refuse = (what) => new DataCloneError(`${what} could not be cloned.`);

  function copyBuffer(buffer) {
    const length = call(ArrayBufferByteLength, buffer);
    // Allocated by the isolate's allocator: the copy counts against external_mb.
    const copy = new Uint8ArrayCtor(length);
    call(TypedArraySet, copy, new Uint8ArrayCtor(buffer));
    return call(TypedArrayBuffer, copy);
  }

  function structuredClone(value) {
    if (arguments.length === 0) throw new TypeError("structuredClone: 1 argument required, but only 0 present.");
    const memo = new MapCtor();
    const buffers = new MapCtor();
    const bufferOf = (buffer) => {
      let copy = call(MapGet, buffers, buffer);
      if (copy === undefined) {
        copy = copyBuffer(buffer);
        call(MapSet, buffers, buffer, copy);
      }
      return copy;
    };
    const clone = (v) => {
      if (typeof v === "symbol") throw refuse(StringCtor(v));
      if (typeof v === "function") throw refuse(`function ${v.name ?? ""}`);
      if (v === null || typeof v !== "object") return v;
      const known = call(MapGet, memo, v);
      if (known !== undefined) return known;
      if (isProxy(v) || isPromise(v) || isWeakMap(v) || isWeakSet(v) || isSymbolObject(v)) throw refuse("#<Object>");
      let out;
      if (isDate(v)) out = new DateCtor(call(DateGetTime, v));
      else if (isRegExp(v)) out = new RegExpCtor(call(RegExpSource, v), call(RegExpFlags, v));
      else if (isBooleanObject(v)) out = new ObjectCtor(call(BooleanValueOf, v));
      else if (isNumberObject(v)) out = new ObjectCtor(call(NumberValueOf, v));
      else if (isStringObject(v)) out = new ObjectCtor(call(StringValueOf, v));
      else if (isBigIntObject(v)) out = ObjectCtor(call(BigIntValueOf, v));
      else if (isArrayBuffer(v)) out = bufferOf(v);
      else if (isArrayBufferView(v)) {
        if (isDataView(v)) {
          out = new DataViewCtor(bufferOf(call(DataViewBuffer, v)), call(DataViewOffset, v), call(DataViewLength, v));
        } else if (isTypedArray(v)) {
          const ctor = call(MapGet, typedArrays, call(TypedArrayTag, v));
          if (ctor === undefined) throw refuse("#<TypedArray>");
          out = new ctor(bufferOf(call(TypedArrayBuffer, v)), call(TypedArrayOffset, v), call(TypedArrayLength, v));
        } else {
          throw refuse("#<ArrayBufferView>");
        }
      } else if (isMap(v)) {
        out = new MapCtor();
        call(MapSet, memo, v, out);
        const entries = [];
        call(MapForEach, v, (value, key) => {
          define(entries, entries.length, key);
          define(entries, entries.length, value);
        });
        for (let i = 0; i < entries.length; i += 2) call(MapSet, out, clone(entries[i]), clone(entries[i + 1]));
        return out;
      } else if (isSet(v)) {
        out = new SetCtor();
        call(MapSet, memo, v, out);
        const members = [];
        call(SetForEach, v, (member) => define(members, members.length, member));
        for (let i = 0; i < members.length; i++) call(SetAdd, out, clone(members[i]));
        return out;
      } else if (isNativeError(v)) {
        const name = v.name;
        const ctor = call(MapGet, errors, typeof name === "string" ? name : "Error") ?? ErrorCtor;
        const message = v.message;
        out = new ctor(message === undefined ? undefined : StringCtor(message));
        call(MapSet, memo, v, out);
        const stack = v.stack;
        if (typeof stack === "string") {
          ObjectDefineProperty(out, "stack", { __proto__: null, value: stack, writable: true, configurable: true });
        }
        const cause = ObjectGetOwnPropertyDescriptor(v, "cause");
        if (cause !== undefined) {
          ObjectDefineProperty(out, "cause", { __proto__: null, value: clone(v.cause), writable: true, configurable: true });
        }
        return out;
      } else if (ArrayIsArray(v)) {
        out = new ArrayCtor(v.length);
        call(MapSet, memo, v, out);
        const keys = ObjectKeys(v);
        for (let i = 0; i < keys.length; i++) define(out, keys[i], clone(v[keys[i]]));
        return out;
      } else {
        out = {};
        call(MapSet, memo, v, out);
        const keys = ObjectKeys(v);
        for (let i = 0; i < keys.length; i++) define(out, keys[i], clone(v[keys[i]]));
        return out;
      }
      call(MapSet, memo, v, out);
      return out;
    };
    return clone(value);
  }

  return structuredClone;
};
