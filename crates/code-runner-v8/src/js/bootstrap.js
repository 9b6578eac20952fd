// code-runner's bootstrap: the globals guest code sees (console, timers,
// TextEncoder/TextDecoder, performance, structuredClone, url.js's URL and
// fetch.js's fetch with its classes) and the machinery the
// runtime thread drives (binding namespaces, handlers, turn clean-up).
//
// It runs once, while the startup snapshot is made, inside a function whose
// closures are the only holders of deno_core's `Deno.core` and of our ops.
// The runtime thread takes `globalThis.__code_runner__` and deletes it, with
// `Deno` and `__bootstrap`, before any guest code runs.
//
// What every turn calls (`fn`, `install`, `endTurn`, limits.js's
// `guardShared`, fetch.js's `setBinding`) is written `(function name() {…})`:
// a parenthesized function is V8's hint to compile it eagerly, so it is
// compiled once, here, and its bytecode is in the snapshot. Written plainly,
// V8 would parse and compile each of them again in every booted isolate, a
// tenth of a node one-shot (`node_oneshot`; `--log-function-events` shows
// which functions a one-shot still compiles: only the guest's).
const core = globalThis.Deno.core;
const {
  op_cr_print, op_cr_uncaught, op_cr_call, op_cr_wait, op_cr_cancel, op_cr_now, op_cr_wall, op_cr_tick,
  op_cr_files_write_text, op_cr_files_write_bytes, op_cr_files_size, op_cr_files_read_into,
  op_cr_files_read_text, op_cr_files_list, op_cr_files_remove, op_cr_encode_into,
} = core.ops;
const inspection = makeInspect(core);
const { inspect } = inspection;
const { format, formatThrown, formatUnhandled } = makeFormat(core, inspection);
const {
  getAsyncContext, setAsyncContext, queueUserTimer, cancelTimer, getTimerDepth,
  isAnyArrayBuffer, isArrayBufferView,
} = core;
const coreByteLength = core.byteLength;
const coreDecode = core.decode;
const structuredClone = makeStructuredClone(core);

const ObjectCreate = Object.create;
const ObjectFreeze = Object.freeze;
const ObjectDefineProperty = Object.defineProperty;
const ObjectGetOwnPropertyDescriptor = ownDescriptor;
const ObjectKeys = Object.keys;
const ReflectApply = Reflect.apply;
const ReflectDeleteProperty = Reflect.deleteProperty;
const JSONParse = JSON.parse;
const JSONStringify = JSON.stringify;
const ErrorCtor = Error;
const TypeErrorCtor = TypeError;
const RangeErrorCtor = RangeError;
const ErrorCaptureStackTrace = Error.captureStackTrace;
const NumberCtor = Number;
const StringCtor = String;
const Uint8ArrayCtor = Uint8Array;
const MathMin = Math.min;
const MathFloor = Math.floor;
const MapCtor = Map;
const MapGet = Map.prototype.get;
const MapSet = Map.prototype.set;
const MapHas = Map.prototype.has;
const MapDelete = Map.prototype.delete;
const MapForEach = Map.prototype.forEach;
const MapSizeGet = Object.getOwnPropertyDescriptor(Map.prototype, "size").get;
const StringSlice = String.prototype.slice;
const StringCharCodeAt = String.prototype.charCodeAt;
const StringReplaceAll = String.prototype.replaceAll;
const StringIsWellFormed = String.prototype.isWellFormed;
const StringIncludes = String.prototype.includes;
const ObjectGetPrototypeOf = Object.getPrototypeOf;
const SyntaxErrorPrototype = SyntaxError.prototype;
const NumberToFixed = Number.prototype.toFixed;
const fn = (function fn(f, self, ...args) {
  return ReflectApply(f, self, args);
});

const STDOUT = 1;
const STDERR = 2;
/** Longest piece of text handed to the host at once (UTF-16 units). */
const CHUNK = 1 << 16;
/** Longest error text carried out of the isolate. */
const MAX_ERROR_TEXT = 64 * 1024;
/** Timers one runtime may have pending. */
const MAX_TIMERS = 10000;

// ---- output ----------------------------------------------------------------

function write(stream, text) {
  if (text.length <= CHUNK) {
    op_cr_print(stream, text);
    return;
  }
  for (let i = 0; i < text.length;) {
    let end = MathMin(i + CHUNK, text.length);
    const last = fn(StringCharCodeAt, text, end - 1);
    if (end < text.length && last >= 0xd800 && last <= 0xdbff) end--;
    op_cr_print(stream, fn(StringSlice, text, i, end));
    i = end;
  }
}

let groupIndent = "";
function emit(stream, text) {
  if (groupIndent !== "") text = groupIndent + fn(StringReplaceAll, text, "\n", `\n${groupIndent}`);
  write(stream, `${text}\n`);
}

function capText(text) {
  if (text.length <= MAX_ERROR_TEXT) return text;
  return `${fn(StringSlice, text, 0, MAX_ERROR_TEXT)}… [${text.length - MAX_ERROR_TEXT} more characters]`;
}

/** Formats a thrown value; never throws, whatever the value does. */
function describeThrown(value, unhandled) {
  try {
    return capText(unhandled ? formatUnhandled(value) : formatThrown(value));
  } catch {
    try {
      return capText(StringCtor(value));
    } catch {
      return "Uncaught exception (its value cannot be shown)";
    }
  }
}

function reportUncaught(error) {
  op_cr_uncaught(describeThrown(error, false));
}

core.setReportExceptionCallback(reportUncaught);
core.setUnhandledPromiseRejectionHandler((_promise, reason) => {
  op_cr_uncaught(describeThrown(reason, true));
  return true;
});

const counts = new MapCtor();
const timings = new MapCtor();
const millis = (ms) => `${fn(NumberToFixed, ms, 3)}ms`;
const consoleObject = {
  log: (...args) => emit(STDOUT, format(args)),
  info: (...args) => emit(STDOUT, format(args)),
  debug: (...args) => emit(STDOUT, format(args)),
  error: (...args) => emit(STDERR, format(args)),
  warn: (...args) => emit(STDERR, format(args)),
  dir: (value) => emit(STDOUT, inspect(value)),
  dirxml: (...args) => emit(STDOUT, format(args)),
  table: (...args) => emit(STDOUT, format(args)),
  trace: function trace(...args) {
    const holder = { name: "Trace", message: format(args) };
    ErrorCaptureStackTrace(holder, trace);
    emit(STDERR, holder.stack);
  },
  assert: (condition, ...args) => {
    if (!condition) emit(STDERR, args.length > 0 ? `Assertion failed: ${format(args)}` : "Assertion failed");
  },
  count: (label = "default") => {
    label = `${label}`;
    const n = (fn(MapGet, counts, label) ?? 0) + 1;
    fn(MapSet, counts, label, n);
    emit(STDOUT, `${label}: ${n}`);
  },
  countReset: (label = "default") => {
    fn(MapDelete, counts, `${label}`);
  },
  time: (label = "default") => {
    fn(MapSet, timings, `${label}`, op_cr_now());
  },
  timeLog: (label = "default", ...data) => {
    label = `${label}`;
    const start = fn(MapGet, timings, label);
    if (start === undefined) {
      emit(STDERR, `Warning: No such label '${label}' for console.timeLog()`);
      return;
    }
    emit(STDOUT, `${label}: ${millis(op_cr_now() - start)}${data.length > 0 ? ` ${format(data)}` : ""}`);
  },
  timeEnd: (label = "default") => {
    label = `${label}`;
    const start = fn(MapGet, timings, label);
    if (start === undefined) {
      emit(STDERR, `Warning: No such label '${label}' for console.timeEnd()`);
      return;
    }
    fn(MapDelete, timings, label);
    emit(STDOUT, `${label}: ${millis(op_cr_now() - start)}`);
  },
  group: (...label) => {
    if (label.length > 0) emit(STDOUT, format(label));
    groupIndent += "  ";
  },
  groupCollapsed: (...label) => {
    if (label.length > 0) emit(STDOUT, format(label));
    groupIndent += "  ";
  },
  groupEnd: () => {
    groupIndent = fn(StringSlice, groupIndent, 2);
  },
};

// ---- the ledger --------------------------------------------------------------
// A kept runtime keeps a turn ledger (ledger/mod.rs): from its first turn,
// `Date` and `Math.random` are the ones below, whose readings the host keeps
// (or, in a replay, gives back) and whose stream comes from a seed the host
// draws; timers are numbered. One-shots keep V8's own.

const LEDGER_OFF = 0;
const LEDGER_RECORD = 1;
const LEDGER_REPLAY = 2;
let ledgerMode = LEDGER_OFF;
let timerSeq = 0;
// xoshiro128** state.
let s0 = 0, s1 = 0, s2 = 0, s3 = 0;
const MathImul = Math.imul;
const rotl = (x, k) => (x << k) | (x >>> (32 - k));
function next32() {
  const result = MathImul(rotl(MathImul(s1, 5), 7), 9) >>> 0;
  const t = s1 << 9;
  s2 ^= s0;
  s3 ^= s1;
  s1 ^= s2;
  s0 ^= s3;
  s2 ^= t;
  s3 = rotl(s3, 11);
  return result;
}

const NativeDate = Date;
const DateToString = Date.prototype.toString;
const ReflectConstruct = Reflect.construct;
const methodOf = (value) => ({ __proto__: null, value, writable: true, configurable: true, enumerable: false });

/** Puts the ledger's `Date` and `Math.random` in place (before any guest code of the runtime). */
function installSources() {
  const now = () => op_cr_wall();
  const LedgerDate = function Date(...args) {
    if (new.target === undefined) return fn(DateToString, new NativeDate(now()));
    return ReflectConstruct(NativeDate, args.length === 0 ? [now()] : args, new.target);
  };
  ObjectDefineProperty(LedgerDate, "length", { __proto__: null, value: 7, configurable: true });
  ObjectDefineProperty(LedgerDate, "prototype", { __proto__: null, value: NativeDate.prototype, writable: false, enumerable: false, configurable: false });
  ObjectDefineProperty(NativeDate.prototype, "constructor", methodOf(LedgerDate));
  ObjectDefineProperty(LedgerDate, "now", methodOf({ now() { return now(); } }.now));
  ObjectDefineProperty(LedgerDate, "parse", methodOf(NativeDate.parse));
  ObjectDefineProperty(LedgerDate, "UTC", methodOf(NativeDate.UTC));
  ObjectDefineProperty(globalThis, "Date", methodOf(LedgerDate));
  const random = { random() { return ((next32() >>> 5) * 67108864 + (next32() >>> 6)) / 9007199254740992; } }.random;
  ObjectDefineProperty(Math, "random", methodOf(random));
}

/** The host's `{mode, seed}`: record or replay from now on; a seed reseeds `Math.random`. */
const ledger = (function ledger(specJson) {
  const spec = JSONParse(specJson);
  if (ledgerMode === LEDGER_OFF) installSources();
  ledgerMode = spec.mode === "replay" ? LEDGER_REPLAY : LEDGER_RECORD;
  if (spec.seed !== null) {
    s0 = spec.seed[0] | 0;
    s1 = spec.seed[1] | 0;
    s2 = spec.seed[2] | 0;
    s3 = spec.seed[3] | 0;
  }
});

// ---- timers ----------------------------------------------------------------

/** Pending timer id → the turn marker that set it. */
const timerOwners = new MapCtor();

function setTimer(repeat, callback, delay, args) {
  if (typeof callback !== "function") {
    throw new TypeErrorCtor(`The "callback" argument must be of type function. Received ${inspect(callback)}`);
  }
  if (fn(MapSizeGet, timerOwners) >= MAX_TIMERS) {
    throw new RangeErrorCtor(`at most ${MAX_TIMERS} timers may be pending in one runtime`);
  }
  delay = NumberCtor(delay);
  if (!(delay >= 1 && delay <= 2147483647)) delay = 1;
  const marker = getAsyncContext();
  // With a ledger, each timer has its number and asks before it fires: a
  // replay fires it in its recorded place, polling every millisecond.
  const seq = ledgerMode === LEDGER_OFF ? -1 : timerSeq++;
  const replaying = ledgerMode === LEDGER_REPLAY;
  let id = 0;
  id = queueUserTimer(getTimerDepth() + 1, repeat || replaying, replaying ? 1 : delay, () => {
    if (seq >= 0 && !op_cr_tick(seq)) return;
    if (!repeat) {
      fn(MapDelete, timerOwners, id);
      if (replaying) cancelTimer(id);
    }
    const previous = getAsyncContext();
    setAsyncContext(marker);
    try {
      ReflectApply(callback, undefined, args);
    } catch (error) {
      reportUncaught(error);
    } finally {
      setAsyncContext(previous);
    }
  });
  fn(MapSet, timerOwners, id, marker);
  return id;
}

function clearTimer(id) {
  if (fn(MapHas, timerOwners, id)) {
    fn(MapDelete, timerOwners, id);
    cancelTimer(id);
  }
}

/**
 * Cancels the timers a finished turn left pending. The host calls it after
 * the turn answered: it touches nothing a guest can reach (no array, no
 * prototype, only the captured Map methods and deno_core's op), and the host
 * arms a deadline around it all the same.
 */
const endTurn = (function endTurn(marker) {
  fn(MapForEach, timerOwners, (owner, id) => {
    if (owner === marker) {
      fn(MapDelete, timerOwners, id);
      cancelTimer(id);
    }
  });
});

// ---- web globals -----------------------------------------------------------

class TextEncoder {
  get encoding() {
    return "utf-8";
  }
  encode(input = "") {
    // Allocated here, by the isolate's allocator: the bytes count against external_mb.
    const text = `${input}`;
    const bytes = new Uint8ArrayCtor(coreByteLength(text));
    op_cr_encode_into(text, bytes);
    return bytes;
  }
}

class TextDecoder {
  #label;
  constructor(label = "utf-8") {
    label = `${label}`.toLowerCase();
    if (label !== "utf-8" && label !== "utf8" && label !== "unicode-1-1-utf-8") {
      throw new RangeErrorCtor(`The "${label}" encoding is not supported`);
    }
    this.#label = "utf-8";
  }
  get encoding() {
    return this.#label;
  }
  decode(input) {
    if (input === undefined) return "";
    if (isAnyArrayBuffer(input)) return coreDecode(new Uint8ArrayCtor(input));
    if (isArrayBufferView(input)) return coreDecode(new Uint8ArrayCtor(input.buffer, input.byteOffset, input.byteLength));
    throw new TypeErrorCtor("TextDecoder.decode: input must be an ArrayBuffer or an ArrayBufferView");
  }
}

/** UTF-8 bytes allocated by the isolate's allocator (counted against external_mb), as `TextEncoder` makes them. */
const encodeUtf8 = (text) => {
  const bytes = new Uint8ArrayCtor(coreByteLength(text));
  op_cr_encode_into(text, bytes);
  return bytes;
};
const urls = makeUrl(core, { encodeUtf8 });
/** `fetch` and its classes; `install` points them at the `iii` namespace's `fetch` binding. */
const fetching = makeFetch(core, {
  encodeUtf8,
  setTimer,
  reportUncaught,
  opCall: op_cr_call,
  opWait: op_cr_wait,
  opCancel: op_cr_cancel,
  URL: urls.URL,
  isParams: urls.isParams,
});
/** The namespace whose `fetch` function is the runtime's egress. */
const FETCH_NAMESPACE = "iii";

const globals = {
  ...fetching.globals,
  URL: urls.URL,
  URLSearchParams: urls.URLSearchParams,
  console: consoleObject,
  setTimeout: (callback, delay, ...args) => setTimer(false, callback, delay, args),
  setInterval: (callback, delay, ...args) => setTimer(true, callback, delay, args),
  setImmediate: (callback, ...args) => setTimer(false, callback, 0, args),
  clearTimeout: clearTimer,
  clearInterval: clearTimer,
  clearImmediate: clearTimer,
  TextEncoder,
  TextDecoder,
  // Coarsened to 100 µs, as browsers do: isolates share one address space.
  performance: ObjectFreeze({ now: () => MathFloor(op_cr_now() * 10) / 10 }),
  structuredClone,
};
for (const name of ObjectKeys(globals)) {
  ObjectDefineProperty(globalThis, name, { __proto__: null, value: globals[name], writable: true, configurable: true, enumerable: false });
}

// ---- bindings --------------------------------------------------------------

function rejection(code, message, member, ErrorClass, memberProperty) {
  const text = code ? `${code}: ${message}` : message;
  const error = ErrorClass === null ? new ErrorCtor(text) : new ErrorClass(text);
  ObjectDefineProperty(error, "code", { __proto__: null, value: code ?? null, writable: true, configurable: true, enumerable: true });
  if (ErrorClass !== null) {
    ObjectDefineProperty(error, memberProperty, { __proto__: null, value: member, writable: true, configurable: true, enumerable: true });
  }
  return error;
}

async function callBinding(ns, member, args, ErrorClass, memberProperty) {
  const id = op_cr_call(ns, member, args === undefined ? null : args);
  const answer = await op_cr_wait(id);
  if (answer[0] === "o") return JSONParse(fn(StringSlice, answer, 1));
  const failure = JSONParse(fn(StringSlice, answer, 1));
  const error = rejection(failure.code, failure.message, member, ErrorClass, memberProperty);
  ErrorCaptureStackTrace(error, callBinding);
  throw error;
}

/** Handlers kept by key: `Task::Define`, and the registrars' callables. */
const handlers = new MapCtor();

async function register(ns, member, id, handler, options, ErrorClass, memberProperty) {
  if (typeof id !== "string") throw new TypeErrorCtor(`${ns}.${member}(id, handler, options?): id must be a string`);
  if (typeof handler !== "function") throw new TypeErrorCtor(`${ns}.${member}(id, handler, options?): handler must be a function`);
  const previous = fn(MapGet, handlers, id);
  fn(MapSet, handlers, id, handler);
  try {
    return await callBinding(ns, member, { id, options: options === undefined ? null : options }, ErrorClass, memberProperty);
  } catch (error) {
    if (fn(MapGet, handlers, id) === handler) {
      if (previous === undefined) fn(MapDelete, handlers, id);
      else fn(MapSet, handlers, id, previous);
    }
    throw error;
  }
}

async function filesCall(member, work, ErrorClass, memberProperty) {
  try {
    return work();
  } catch (error) {
    if (error === null || typeof error !== "object" || !("code" in error)) throw error;
    throw rejection(error.code, error.message, member, ErrorClass, memberProperty);
  }
}

/** Longest file path, in UTF-8 bytes (`files::path::MAX_PATH_BYTES` of the core crate). */
const MAX_NAME_BYTES = 1024;

function invalidName(message) {
  const error = new ErrorCtor(message);
  ObjectDefineProperty(error, "code", { __proto__: null, value: "code-runner::invalid_request", writable: true, configurable: true, enumerable: true });
  return error;
}

function checkName(member, name) {
  if (typeof name !== "string") throw new TypeErrorCtor(`iii.files.${member}(name…): name must be a string`);
  // Refused here, before the host copies it (or measures it, which flattens
  // it): a name has at least as many UTF-8 bytes as UTF-16 units.
  // A lone surrogate has no UTF-8 form: converting it would name another file.
  if (!fn(StringIsWellFormed, name)) {
    throw invalidName("iii.files: a name must be well-formed UTF-16 (this one has a lone surrogate)");
  }
  if (name.length > MAX_NAME_BYTES) {
    throw invalidName(`iii.files: a name is at most ${MAX_NAME_BYTES} bytes, this one has ${name.length} characters`);
  }
  return name;
}

function makeFiles(ErrorClass, memberProperty) {
  const call = (member, work) => filesCall(`files.${member}`, work, ErrorClass, memberProperty);
  const files = {
    write: (name, contents) => call("write", () => {
      checkName("write", name);
      if (typeof contents === "string") return op_cr_files_write_text(name, contents);
      if (isAnyArrayBuffer(contents) || isArrayBufferView(contents)) return op_cr_files_write_bytes(name, contents);
      throw new TypeErrorCtor("iii.files.write(name, contents): contents must be a string, a typed array, a DataView or an ArrayBuffer");
    }),
    read: (name) => call("read", () => {
      // The guest's allocation, so the bytes count against external_mb.
      const bytes = new Uint8ArrayCtor(op_cr_files_size(checkName("read", name)));
      op_cr_files_read_into(name, bytes);
      return bytes;
    }),
    readText: (name) => call("readText", () => op_cr_files_read_text(checkName("readText", name))),
    list: () => call("list", () => op_cr_files_list()),
    remove: (name) => call("remove", () => op_cr_files_remove(checkName("remove", name))),
  };
  const target = ObjectCreate(null);
  for (const name of ObjectKeys(files)) {
    ObjectDefineProperty(target, name, { __proto__: null, value: files[name], enumerable: true });
  }
  return ObjectFreeze(target);
}

/** Most names a path member's path holds (`BindingNamespace::paths`). */
const MAX_PATH_PARTS = 8;
const ProxyCtor = Proxy;

/**
 * A path member (`iii.fn`): each property read gives a longer path, a call
 * calls the binding with `{path, args}`. `then` and `toJSON` (and symbols) read
 * as undefined, so awaiting or printing a path calls nothing; writes fail.
 */
function makePath(global, name, parts, ErrorClass, memberProperty) {
  const refuse = () => false;
  const traps = {
    __proto__: null,
    get(_target, key) {
      if (typeof key !== "string" || key === "then" || key === "toJSON") return undefined;
      if (parts.length >= MAX_PATH_PARTS) {
        throw new TypeErrorCtor(`${global}.${name}: a path is at most ${MAX_PATH_PARTS} names`);
      }
      const next = [];
      for (let i = 0; i < parts.length; i++) append(next, parts[i]);
      append(next, key);
      return makePath(global, name, next, ErrorClass, memberProperty);
    },
    apply(_target, _self, args) {
      const payload = args.length === 0 || args[0] === undefined ? null : args[0];
      return callBinding(global, name, { path: parts, args: payload }, ErrorClass, memberProperty);
    },
    set: refuse,
    defineProperty: refuse,
    deleteProperty: refuse,
    setPrototypeOf: refuse,
  };
  return new ProxyCtor(() => {}, traps);
}

function makeErrorClass(name) {
  const ErrorClass = { [name]: class extends ErrorCtor {} }[name];
  ObjectDefineProperty(ErrorClass.prototype, "name", { __proto__: null, value: name, writable: true, configurable: true, enumerable: false });
  return ErrorClass;
}

/** The globals `install` defined, each with what it replaced (to put back). */
let installed = [];

/** Replaces the binding globals with the namespaces of `specJson`. */
const install = (function install(specJson) {
  const spec = JSONParse(specJson);
  for (let i = installed.length - 1; i >= 0; i--) {
    const name = installed[i][0];
    const replaced = installed[i][1];
    if (replaced === undefined) ReflectDeleteProperty(globalThis, name);
    else ObjectDefineProperty(globalThis, name, replaced);
  }
  installed = [];
  fetching.setBinding(null);
  const define = (name, value) => {
    append(installed, [name, ObjectGetOwnPropertyDescriptor(globalThis, name)]);
    ObjectDefineProperty(globalThis, name, { __proto__: null, value, writable: true, configurable: true, enumerable: false });
  };
  for (let i = 0; i < spec.length; i++) {
    const ns = spec[i];
    const global = ns.global;
    let ErrorClass = null;
    let memberProperty = null;
    if (ns.error_class !== null) {
      ErrorClass = makeErrorClass(ns.error_class.name);
      memberProperty = ns.error_class.member_name_property;
      define(ns.error_class.name, ErrorClass);
    }
    const target = ObjectCreate(null);
    const member = (name, value) => ObjectDefineProperty(target, name, { __proto__: null, value, enumerable: true });
    for (let j = 0; j < ns.functions.length; j++) {
      const name = ns.functions[j];
      member(name, { [name]: (args) => callBinding(global, name, args, ErrorClass, memberProperty) }[name]);
      if (name === "fetch" && global === FETCH_NAMESPACE) fetching.setBinding(global);
    }
    const paths = ns.paths ?? [];
    for (let j = 0; j < paths.length; j++) member(paths[j], makePath(global, paths[j], [], ErrorClass, memberProperty));
    for (let j = 0; j < ns.registrars.length; j++) {
      const name = ns.registrars[j];
      member(name, { [name]: (id, handler, options) => register(global, name, id, handler, options, ErrorClass, memberProperty) }[name]);
    }
    const values = ns.values;
    const keys = ObjectKeys(values);
    for (let j = 0; j < keys.length; j++) member(keys[j], values[keys[j]]);
    if (ns.files) member("files", makeFiles(ErrorClass, memberProperty));
    define(global, ObjectFreeze(target));
  }
});

// ---- turns -----------------------------------------------------------------

/** The name `loader.rs` re-exports a handler module's `handler` binding under. */
const HANDLER_EXPORT = "__code_runner_handler__";

/** `Task::Define`: imports the handler module and keeps its handler. */
async function define(key, named, plain) {
  // `named` re-exports the module's `handler` binding, exported or not
  // (`function handler`, `async function handler`, `export const handler`);
  // a module with no such binding fails to link, before any of it ran, and
  // is imported as it is, for its default export.
  let module;
  let handler;
  try {
    module = await import(named);
    handler = module[HANDLER_EXPORT];
  } catch (error) {
    const unlinked = ObjectGetPrototypeOf(error) === SyntaxErrorPrototype &&
      fn(StringIncludes, `${ObjectGetOwnPropertyDescriptor(error, "message")?.value}`, "'handler'");
    if (!unlinked) throw error;
    module = await import(plain);
  }
  if (typeof handler !== "function") handler = module.handler;
  if (typeof handler !== "function" && typeof module.default === "function") handler = module.default;
  if (typeof handler !== "function") {
    throw new TypeErrorCtor("the module exports no handler function: write `export function handler(payload) { … }`");
  }
  fn(MapSet, handlers, key, handler);
}

/** `Task::Invoke`: calls the handler kept under `key` with the payload. */
async function invoke(key, payloadJson) {
  const handler = fn(MapGet, handlers, key);
  if (handler === undefined) throw new ErrorCtor(`no handler is kept under ${JSONStringify(key)}`);
  return await handler(JSONParse(payloadJson));
}

const { guardShared } = installLimits(core, globalThis);

// node.js's modules, made on first import: the loader's `code-runner:node/<name>`
// sources ask for them under this registered symbol (read-only, not enumerable).
const nodeModule = makeNode(inspect, format, write);
ObjectDefineProperty(globalThis, Symbol.for("code-runner.node"), {
  __proto__: null,
  value: nodeModule,
});
// Node's globals agents' code reaches for (`Buffer.from(…)`, `process.env`,
// `global`): made on first use, then plain writable properties.
function lazyGlobal(name, make) {
  const settle = (value) => ObjectDefineProperty(globalThis, name, { __proto__: null, value, writable: true, configurable: true, enumerable: false });
  ObjectDefineProperty(globalThis, name, {
    __proto__: null,
    configurable: true,
    enumerable: false,
    get() { const value = make(); settle(value); return value; },
    set(value) { settle(value); },
  });
}
lazyGlobal("Buffer", () => nodeModule("buffer").Buffer);
lazyGlobal("process", () => nodeModule("process").process);
lazyGlobal("global", () => globalThis);
// A named `import` in turn code (imports.rs): the export, else the property
// of a CommonJS package's `default`, else V8's link-time SyntaxError.
ObjectDefineProperty(globalThis, Symbol.for("code-runner.binding"), {
  __proto__: null,
  value: (namespace, name, specifier) => {
    if (name in namespace) return namespace[name];
    const fallback = namespace.default;
    if (fallback !== null && (typeof fallback === "object" || typeof fallback === "function") && name in fallback) {
      return fallback[name];
    }
    throw new SyntaxError(`The requested module '${specifier}' does not provide an export named '${name}'`);
  },
});

ObjectDefineProperty(globalThis, "__code_runner__", {
  value: ObjectFreeze({
    install,
    define,
    invoke,
    describeThrown: (value) => describeThrown(value, false),
    endTurn,
    ledger,
    noop: () => {},
    guardShared,
  }),
  configurable: true,
});
