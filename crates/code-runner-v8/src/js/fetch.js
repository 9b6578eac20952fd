// code-runner's `fetch` and the web classes around it: Headers, Request,
// Response, AbortController/AbortSignal and DOMException (URL and
// URLSearchParams are url.js's). A request leaves the isolate only through
// the worker's `iii.fetch` binding (the egress contract: {method, url,
// headers, body as base64} in, {status, status_text, url, redirected,
// headers, body} out, or body_id and body_bytes for a body past the host's
// piece size, read with `iii.fetch_body`), reached through the namespace name the bootstrap's
// `install` records here, never through the guest-visible `iii`. Part of the
// bootstrap: intrinsics are captured before guest code runs; internal lists
// are walked by index, never by an iterator a guest could replace. No
// streams: bodies are whole bytes.
const makeFetch = (core, { encodeUtf8, setTimer, reportUncaught, opCall, opWait, opCancel, URL, isParams }) => {
  const { isAnyArrayBuffer, isArrayBufferView } = core;
  const coreDecode = core.decode;
  const ReflectApply = Reflect.apply;
  const call = (f, self, ...args) => ReflectApply(f, self, args);
  const ObjectDefineProperty = Object.defineProperty;
  const ObjectKeys = Object.keys;
  const JSONParse = JSON.parse;
  const JSONStringify = JSON.stringify;
  const ErrorCtor = Error;
  const ErrorCaptureStackTrace = Error.captureStackTrace;
  const TypeErrorCtor = TypeError;
  const RangeErrorCtor = RangeError;
  const PromiseCtor = Promise;
  const PromiseThen = Promise.prototype.then;
  const Uint8ArrayCtor = Uint8Array;
  const TypedArraySet = Object.getPrototypeOf(Uint8Array.prototype).set;
  const ArraySort = Array.prototype.sort;
  const NumberCtor = Number;
  const NumberIsInteger = Number.isInteger;
  const StringCharCodeAt = String.prototype.charCodeAt;
  const StringSlice = String.prototype.slice;
  const StringIndexOf = String.prototype.indexOf;
  const StringToLowerCase = String.prototype.toLowerCase;
  const StringToUpperCase = String.prototype.toUpperCase;
  const StringToWellFormed = String.prototype.toWellFormed;
  const SymbolIterator = Symbol.iterator;
  const SymbolToStringTag = Symbol.toStringTag;
  const push = append;
  const text = (value) => `${value}`;
  const hidden = (object, name, value) =>
    ObjectDefineProperty(object, name, { __proto__: null, value, writable: true, configurable: true, enumerable: false });
  const tag = (Class, name) => ObjectDefineProperty(Class.prototype, SymbolToStringTag, { __proto__: null, value: name, configurable: true });
  const alnum = (c) => (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122);
  // ---- bytes ----------------------------------------------------------------

  const B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const B64_CODES = new Uint8ArrayCtor(64);
  const B64_VALUES = new Uint8ArrayCtor(128).fill(255);
  for (let i = 0; i < 64; i++) {
    B64_CODES[i] = call(StringCharCodeAt, B64, i);
    B64_VALUES[B64_CODES[i]] = i;
  }

  /** Base64 of `bytes`, written as ASCII codes and decoded once (no string concatenation). */
  function toBase64(bytes) {
    const n = bytes.length;
    const out = new Uint8ArrayCtor(((n + 2) / 3 | 0) * 4);
    let o = 0;
    for (let i = 0; i < n; i += 3) {
      const rest = n - i;
      const v = (bytes[i] << 16) | (rest > 1 ? bytes[i + 1] << 8 : 0) | (rest > 2 ? bytes[i + 2] : 0);
      out[o++] = B64_CODES[v >> 18];
      out[o++] = B64_CODES[(v >> 12) & 63];
      out[o++] = rest > 1 ? B64_CODES[(v >> 6) & 63] : 61;
      out[o++] = rest > 2 ? B64_CODES[v & 63] : 61;
    }
    return coreDecode(out);
  }

  /** The bytes of the host's base64 (padded, no whitespace). */
  function fromBase64(b64) {
    let n = b64.length;
    while (n > 0 && call(StringCharCodeAt, b64, n - 1) === 61) n--;
    const out = new Uint8ArrayCtor((n * 3) >> 2);
    let o = 0;
    let acc = 0;
    let bits = 0;
    for (let i = 0; i < n; i++) {
      const c = call(StringCharCodeAt, b64, i);
      const v = c < 128 ? B64_VALUES[c] : 255;
      if (v === 255) throw new TypeErrorCtor("fetch: the host's answer has a malformed body");
      acc = ((acc << 6) | v) & 0xffffff;
      bits += 6;
      if (bits >= 8) {
        bits -= 8;
        out[o++] = (acc >> bits) & 255;
      }
    }
    return out;
  }

  /** A fresh copy of the bytes of a buffer or view. */
  function copyBytes(source) {
    const view = isAnyArrayBuffer(source)
      ? new Uint8ArrayCtor(source)
      : new Uint8ArrayCtor(source.buffer, source.byteOffset, source.byteLength);
    const copy = new Uint8ArrayCtor(view.length);
    call(TypedArraySet, copy, view);
    return copy;
  }

  // ---- errors and abort -----------------------------------------------------

  const DOM_CODES = { __proto__: null, AbortError: 20, TimeoutError: 23, NotSupportedError: 9, InvalidStateError: 11 };
  class DOMException extends ErrorCtor {
    #name;
    constructor(message = "", name = "Error") {
      super(text(message));
      this.#name = text(name);
      ErrorCaptureStackTrace(this, DOMException);
    }
    get name() {
      return this.#name;
    }
    get code() {
      return DOM_CODES[this.#name] ?? 0;
    }
  }

  const SIGNAL_KEY = {};
  let signalState;
  let isSignal;
  class AbortSignal {
    #aborted = false;
    #reason = undefined;
    #onabort = null;
    /** Listeners and the runtime's own algorithms, in the order they were added. */
    #listeners = [];
    constructor(key) {
      if (key !== SIGNAL_KEY) throw new TypeErrorCtor("Illegal constructor");
    }
    get aborted() {
      return this.#aborted;
    }
    get reason() {
      return this.#reason;
    }
    get onabort() {
      return this.#onabort;
    }
    set onabort(listener) {
      this.#onabort = typeof listener === "function" ? listener : null;
    }
    throwIfAborted() {
      if (this.#aborted) throw this.#reason;
    }
    addEventListener(type, listener, options = undefined) {
      if (text(type) !== "abort" || (typeof listener !== "function" && typeof listener?.handleEvent !== "function")) return;
      const list = this.#listeners;
      for (let i = 0; i < list.length; i++) if (list[i].listener === listener) return;
      push(list, { __proto__: null, listener, once: typeof options === "object" && options !== null && !!options.once });
    }
    removeEventListener(type, listener) {
      if (text(type) !== "abort") return;
      this.#listeners = without(this.#listeners, listener);
    }
    static abort(reason = undefined) {
      const signal = new AbortSignal(SIGNAL_KEY);
      abortSignal(signal, reason);
      return signal;
    }
    static timeout(ms) {
      ms = NumberCtor(ms);
      if (!(ms >= 0 && ms <= Number.MAX_SAFE_INTEGER)) throw new TypeErrorCtor("AbortSignal.timeout(ms): ms must be a non-negative number");
      const signal = new AbortSignal(SIGNAL_KEY);
      setTimer(false, () => abortSignal(signal, new DOMException("The operation was aborted due to timeout", "TimeoutError")), ms, []);
      return signal;
    }
    static any(signals) {
      const signal = new AbortSignal(SIGNAL_KEY);
      const list = [];
      for (const source of signals) push(list, source);
      for (let i = 0; i < list.length; i++) {
        if (list[i].aborted) {
          abortSignal(signal, list[i].reason);
          return signal;
        }
      }
      for (let i = 0; i < list.length; i++) onAbort(list[i], () => abortSignal(signal, list[i].reason));
      return signal;
    }
    static {
      isSignal = (value) => typeof value === "object" && value !== null && #aborted in value;
      signalState = (signal) => ({
        __proto__: null,
        get: () => signal.#listeners,
        set: (list) => { signal.#listeners = list; },
        fire: (reason) => {
          if (signal.#aborted) return false;
          signal.#aborted = true;
          signal.#reason = reason;
          return true;
        },
        onabort: () => signal.#onabort,
      });
    }
  }
  tag(AbortSignal, "AbortSignal");

  function without(list, listener) {
    const kept = [];
    for (let i = 0; i < list.length; i++) if (list[i].listener !== listener) push(kept, list[i]);
    return kept;
  }

  /** Runs `algorithm` when `signal` aborts (before the guest's listeners see the event). */
  function onAbort(signal, algorithm) {
    const state = signalState(signal);
    push(state.get(), { __proto__: null, listener: algorithm, once: true, internal: true });
    return () => state.set(without(state.get(), algorithm));
  }

  function abortSignal(signal, reason) {
    const state = signalState(signal);
    if (reason === undefined) reason = new DOMException("This operation was aborted", "AbortError");
    if (!state.fire(reason)) return;
    const list = state.get();
    state.set([]);
    const event = { type: "abort", target: signal, currentTarget: signal, defaultPrevented: false };
    const dispatch = (listener) => {
      try {
        if (typeof listener === "function") call(listener, signal, event);
        else listener.handleEvent(event);
      } catch (error) {
        reportUncaught(error);
      }
    };
    for (let i = 0; i < list.length; i++) if (list[i].internal) dispatch(list[i].listener);
    const onabort = state.onabort();
    if (onabort !== null) dispatch(onabort);
    for (let i = 0; i < list.length; i++) if (!list[i].internal) dispatch(list[i].listener);
  }

  class AbortController {
    #signal = new AbortSignal(SIGNAL_KEY);
    get signal() {
      return this.#signal;
    }
    abort(reason = undefined) {
      abortSignal(this.#signal, reason);
    }
  }
  tag(AbortController, "AbortController");

  // ---- Headers --------------------------------------------------------------

  const TOKEN_EXTRA = "!#$%&'*+-.^_`|~";
  function isToken(value) {
    if (value === "") return false;
    for (let i = 0; i < value.length; i++) {
      const c = call(StringCharCodeAt, value, i);
      if (!(alnum(c) || (c < 0x80 && call(StringIndexOf, TOKEN_EXTRA, value[i]) !== -1))) return false;
    }
    return true;
  }

  function headerName(name) {
    name = text(name);
    if (!isToken(name)) throw new TypeErrorCtor(`Headers: ${JSONStringify(name)} is not a valid header name`);
    return call(StringToLowerCase, name);
  }

  const httpSpace = (c) => c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d;
  function headerValue(value) {
    value = text(value);
    let start = 0;
    let end = value.length;
    while (start < end && httpSpace(call(StringCharCodeAt, value, start))) start++;
    while (end > start && httpSpace(call(StringCharCodeAt, value, end - 1))) end--;
    value = call(StringSlice, value, start, end);
    for (let i = 0; i < value.length; i++) {
      const c = call(StringCharCodeAt, value, i);
      if (c === 0 || c === 0x0a || c === 0x0d || c > 0xff) {
        throw new TypeErrorCtor(`Headers: ${JSONStringify(value)} is not a valid header value`);
      }
    }
    return value;
  }

  let headersState;
  class Headers {
    /** [lower-case name, value] pairs, in the order they were added. */
    #list = [];
    #immutable = false;
    constructor(init = undefined) {
      if (init === undefined || init === null) return;
      if (typeof init !== "object" && typeof init !== "function") throw new TypeErrorCtor("Headers: init must be an object, an iterable of pairs or a Headers");
      if (#list in init) {
        const list = init.#list;
        for (let i = 0; i < list.length; i++) push(this.#list, [list[i][0], list[i][1]]);
      } else if (typeof init[SymbolIterator] === "function") {
        for (const pair of init) {
          const items = [];
          for (const item of pair) push(items, item);
          if (items.length !== 2) throw new TypeErrorCtor("Headers: each header must be a [name, value] pair");
          this.append(items[0], items[1]);
        }
      } else {
        const keys = ObjectKeys(init);
        for (let i = 0; i < keys.length; i++) this.append(keys[i], init[keys[i]]);
      }
    }
    #check() {
      if (this.#immutable) throw new TypeErrorCtor("Headers: these headers are immutable");
    }
    append(name, value) {
      name = headerName(name);
      value = headerValue(value);
      this.#check();
      push(this.#list, [name, value]);
    }
    delete(name) {
      name = headerName(name);
      this.#check();
      const kept = [];
      for (let i = 0; i < this.#list.length; i++) if (this.#list[i][0] !== name) push(kept, this.#list[i]);
      this.#list = kept;
    }
    get(name) {
      name = headerName(name);
      let value = null;
      for (let i = 0; i < this.#list.length; i++) {
        if (this.#list[i][0] === name) value = value === null ? this.#list[i][1] : `${value}, ${this.#list[i][1]}`;
      }
      return value;
    }
    getSetCookie() {
      const values = [];
      for (let i = 0; i < this.#list.length; i++) if (this.#list[i][0] === "set-cookie") push(values, this.#list[i][1]);
      return values;
    }
    has(name) {
      name = headerName(name);
      for (let i = 0; i < this.#list.length; i++) if (this.#list[i][0] === name) return true;
      return false;
    }
    set(name, value) {
      name = headerName(name);
      value = headerValue(value);
      this.#check();
      const kept = [];
      let found = false;
      for (let i = 0; i < this.#list.length; i++) {
        if (this.#list[i][0] !== name) push(kept, this.#list[i]);
        else if (!found) {
          found = true;
          push(kept, [name, value]);
        }
      }
      if (!found) push(kept, [name, value]);
      this.#list = kept;
    }
    /** Sorted by name, values of a name joined with ", " (each set-cookie on its own), as the standard iterates. */
    #sorted() {
      const names = [];
      for (let i = 0; i < this.#list.length; i++) {
        const name = this.#list[i][0];
        let seen = false;
        for (let j = 0; j < names.length; j++) if (names[j] === name) seen = true;
        if (!seen) push(names, name);
      }
      call(ArraySort, names, (a, b) => (a < b ? -1 : a > b ? 1 : 0));
      const out = [];
      for (let i = 0; i < names.length; i++) {
        if (names[i] === "set-cookie") {
          const cookies = this.getSetCookie();
          for (let j = 0; j < cookies.length; j++) push(out, ["set-cookie", cookies[j]]);
        } else push(out, [names[i], this.get(names[i])]);
      }
      return out;
    }
    forEach(callback, thisArg = undefined) {
      if (typeof callback !== "function") throw new TypeErrorCtor("Headers.forEach: callback must be a function");
      const list = this.#sorted();
      for (let i = 0; i < list.length; i++) call(callback, thisArg, list[i][1], list[i][0], this);
    }
    *entries() {
      const list = this.#sorted();
      for (let i = 0; i < list.length; i++) yield list[i];
    }
    *keys() {
      const list = this.#sorted();
      for (let i = 0; i < list.length; i++) yield list[i][0];
    }
    *values() {
      const list = this.#sorted();
      for (let i = 0; i < list.length; i++) yield list[i][1];
    }
    static {
      headersState = (headers) => ({
        __proto__: null,
        list: () => headers.#list,
        freeze: () => { headers.#immutable = true; },
      });
    }
  }
  hidden(Headers.prototype, SymbolIterator, Headers.prototype.entries);
  tag(Headers, "Headers");

  // ---- bodies ---------------------------------------------------------------

  /** {bytes, type} of a body init: a string, bytes, URLSearchParams, or anything else as its string. */
  function extractBody(body) {
    if (isAnyArrayBuffer(body) || isArrayBufferView(body)) return { bytes: copyBytes(body), type: null };
    if (isParams(body)) {
      return { bytes: encodeUtf8(body.toString()), type: "application/x-www-form-urlencoded;charset=UTF-8" };
    }
    return { bytes: encodeUtf8(call(StringToWellFormed, text(body))), type: "text/plain;charset=UTF-8" };
  }

  /** The body methods of Request and Response; `state(self)` is the body's {bytes, used}, or throws for a foreign object. */
  function installBody(prototype, state, name) {
    const take = (self) => {
      const body = state(self);
      if (body.used) throw new TypeErrorCtor(`${name}: the body has already been read`);
      if (body.bytes === null) return new Uint8ArrayCtor(0);
      body.used = true;
      const bytes = body.bytes;
      body.bytes = null;
      return bytes;
    };
    const methods = {
      async text() {
        return coreDecode(take(this));
      },
      async json() {
        return JSONParse(coreDecode(take(this)));
      },
      async arrayBuffer() {
        return take(this).buffer;
      },
      async bytes() {
        return take(this);
      },
    };
    const keys = ObjectKeys(methods);
    for (let i = 0; i < keys.length; i++) hidden(prototype, keys[i], methods[keys[i]]);
    ObjectDefineProperty(prototype, "bodyUsed", { __proto__: null, get() { return state(this).used; }, configurable: true });
  }

  const NULL_BODY = [101, 103, 204, 205, 304];
  const isNullBody = (status) => NULL_BODY[0] === status || NULL_BODY[1] === status || NULL_BODY[2] === status ||
    NULL_BODY[3] === status || NULL_BODY[4] === status;

  function cloneBody(body) {
    if (body.used) throw new TypeErrorCtor("clone: the body has already been read");
    return { __proto__: null, bytes: body.bytes === null ? null : copyBytes(body.bytes), used: false };
  }

  // ---- Request --------------------------------------------------------------

  const NORMALIZED = ["DELETE", "GET", "HEAD", "OPTIONS", "POST", "PUT"];
  function method(value) {
    value = text(value);
    if (!isToken(value)) throw new TypeErrorCtor(`Request: ${JSONStringify(value)} is not a valid method`);
    const upper = call(StringToUpperCase, value);
    if (upper === "CONNECT" || upper === "TRACE" || upper === "TRACK") throw new TypeErrorCtor(`Request: the ${upper} method is forbidden`);
    for (let i = 0; i < NORMALIZED.length; i++) if (NORMALIZED[i] === upper) return upper;
    return value;
  }

  let requestBody;
  let requestBytes;
  /** True while `clone` makes its copy: the original keeps its body. */
  let cloning = false;
  class Request {
    #url;
    #method = "GET";
    #headers;
    #body = { __proto__: null, bytes: null, used: false };
    #signal;
    #redirect = "follow";
    constructor(input, init = undefined) {
      init = init ?? {};
      let inherited = null;
      if (typeof input === "object" && input !== null && #url in input) {
        inherited = input;
        this.#url = input.#url;
        this.#method = input.#method;
        this.#redirect = input.#redirect;
        this.#signal = input.#signal;
      } else {
        this.#url = new URL(text(input)).href;
      }
      if (init.method !== undefined) this.#method = method(init.method);
      if (init.redirect !== undefined) this.#redirect = text(init.redirect);
      if (init.signal !== undefined && init.signal !== null) {
        if (!isSignal(init.signal)) throw new TypeErrorCtor("Request: signal must be an AbortSignal");
        this.#signal = init.signal;
      }
      this.#signal ??= new AbortSignal(SIGNAL_KEY);
      this.#headers = new Headers(init.headers !== undefined ? init.headers : inherited?.#headers);
      let body = init.body;
      if (body === undefined && inherited !== null && inherited.#body.bytes !== null && !cloning) {
        this.#body = cloneBody(inherited.#body);
        inherited.#body.used = true;
      }
      if (body !== undefined && body !== null) {
        if (this.#method === "GET" || this.#method === "HEAD") throw new TypeErrorCtor(`Request: a ${this.#method} request cannot have a body`);
        body = extractBody(body);
        this.#body.bytes = body.bytes;
        if (body.type !== null && !this.#headers.has("content-type")) this.#headers.append("content-type", body.type);
      }
    }
    get method() {
      return this.#method;
    }
    get url() {
      return this.#url;
    }
    get headers() {
      return this.#headers;
    }
    get signal() {
      return this.#signal;
    }
    get redirect() {
      return this.#redirect;
    }
    clone() {
      const body = cloneBody(this.#body);
      cloning = true;
      try {
        const copy = new Request(this);
        copy.#body = body;
        return copy;
      } finally {
        cloning = false;
      }
    }
    static {
      requestBody = (request) => request.#body;
      requestBytes = (request) => request.#body.bytes;
    }
  }
  installBody(Request.prototype, (self) => requestBody(self), "Request");
  tag(Request, "Request");

  // ---- Response -------------------------------------------------------------

  let responseBody;
  let makeResponse;
  class Response {
    #status = 200;
    #statusText = "";
    #headers;
    #body = { __proto__: null, bytes: null, used: false };
    #url = "";
    #redirected = false;
    #type = "default";
    constructor(body = null, init = undefined) {
      init = init ?? {};
      const status = init.status === undefined ? 200 : NumberCtor(init.status);
      if (!(NumberIsInteger(status) && status >= 200 && status <= 599)) {
        throw new RangeErrorCtor(`Response: status must be an integer from 200 to 599, not ${text(init.status)}`);
      }
      this.#status = status;
      this.#statusText = init.statusText === undefined ? "" : headerValue(init.statusText);
      this.#headers = new Headers(init.headers);
      if (body !== null && body !== undefined) {
        if (isNullBody(status)) throw new TypeErrorCtor(`Response: a ${status} response cannot have a body`);
        body = extractBody(body);
        this.#body.bytes = body.bytes;
        if (body.type !== null && !this.#headers.has("content-type")) this.#headers.append("content-type", body.type);
      }
    }
    static json(data, init = undefined) {
      const json = JSONStringify(data);
      if (json === undefined) throw new TypeErrorCtor("Response.json: the data is not serializable to JSON");
      const response = new Response(json, init);
      response.#headers.set("content-type", "application/json");
      return response;
    }
    static error() {
      const response = new Response();
      response.#status = 0;
      response.#type = "error";
      headersState(response.#headers).freeze();
      return response;
    }
    static redirect(url, status = 302) {
      if (status !== 301 && status !== 302 && status !== 303 && status !== 307 && status !== 308) {
        throw new RangeErrorCtor(`Response.redirect: ${text(status)} is not a redirect status`);
      }
      const response = new Response(null, { status });
      response.#headers.set("location", new URL(text(url)).href);
      headersState(response.#headers).freeze();
      return response;
    }
    get status() {
      return this.#status;
    }
    get ok() {
      return this.#status >= 200 && this.#status <= 299;
    }
    get statusText() {
      return this.#statusText;
    }
    get headers() {
      return this.#headers;
    }
    get url() {
      return this.#url;
    }
    get redirected() {
      return this.#redirected;
    }
    get type() {
      return this.#type;
    }
    clone() {
      const copy = new Response();
      copy.#status = this.#status;
      copy.#statusText = this.#statusText;
      copy.#headers = new Headers(this.#headers);
      if (this.#type !== "default") headersState(copy.#headers).freeze();
      copy.#body = cloneBody(this.#body);
      copy.#url = this.#url;
      copy.#redirected = this.#redirected;
      copy.#type = this.#type;
      return copy;
    }
    static {
      responseBody = (response) => response.#body;
      makeResponse = (answer, bytes) => {
        const response = new Response();
        response.#status = answer.status;
        response.#statusText = answer.statusText;
        response.#headers = answer.headers;
        headersState(answer.headers).freeze();
        response.#body.bytes = bytes;
        response.#url = answer.url;
        response.#redirected = answer.redirected;
        response.#type = "basic";
        return response;
      };
    }
  }
  installBody(Response.prototype, (self) => responseBody(self), "Response");
  tag(Response, "Response");

  // ---- fetch ----------------------------------------------------------------

  /** The namespace whose `fetch` function carries requests out: set by `install`, per turn. */
  let binding = null;

  /**
   * The answer of binding call `id`, or a rejection with the signal's reason
   * as soon as it aborts: the host's call is then cancelled at once (a
   * request's connection closes), not left to run until the turn ends.
   */
  function untilAborted(id, signal) {
    const promise = opWait(id);
    return new PromiseCtor((resolve, reject) => {
      const forget = onAbort(signal, () => {
        opCancel(id);
        reject(signal.reason);
      });
      call(PromiseThen, promise, (value) => {
        forget();
        resolve(value);
      }, (error) => {
        forget();
        reject(error);
      });
    });
  }

  function failed(message, code) {
    const error = new TypeErrorCtor(message);
    hidden(error, "code", code ?? null);
    return error;
  }

  async function fetch(input, init = undefined) {
    const request = new Request(input, init);
    const signal = request.signal;
    if (signal.aborted) throw signal.reason;
    if (binding === null) throw failed("fetch: this runtime has no network (no egress binding)", null);
    if (request.redirect !== "follow") {
      throw failed(`fetch: redirect: ${JSONStringify(request.redirect)} is not supported (redirects are followed)`, null);
    }
    const headers = [];
    const list = headersState(request.headers).list();
    for (let i = 0; i < list.length; i++) push(headers, [list[i][0], list[i][1]]);
    const bytes = requestBytes(request);
    // Literals only: a setter a guest put on Object.prototype is never called.
    // pieces: a body past the host's piece size comes in pieces (readBody).
    const args = bytes === null
      ? { method: request.method, url: request.url, headers, pieces: true }
      : { method: request.method, url: request.url, headers, body: toBase64(bytes), pieces: true };
    const answer = await untilAborted(opCall(binding, "fetch", args), signal);
    const parsed = JSONParse(call(StringSlice, answer, 1));
    if (answer[0] !== "o") throw failed(text(parsed.message), parsed.code);
    const responseHeaders = new Headers();
    const pairs = parsed.headers;
    for (let i = 0; i < pairs.length; i++) push(headersState(responseHeaders).list(), [text(pairs[i][0]), text(pairs[i][1])]);
    const body = parsed.body_id !== undefined
      ? await readBody(parsed.body_id, parsed.body_bytes, signal)
      : parsed.body ? fromBase64(parsed.body) : new Uint8ArrayCtor(0);
    return makeResponse({
      status: NumberCtor(parsed.status),
      statusText: text(parsed.status_text ?? ""),
      headers: responseHeaders,
      url: text(parsed.url ?? request.url),
      redirected: parsed.redirected === true,
    }, body);
  }

  /** A body the host holds, read piece by piece (each answer stays far below the answer cap). */
  async function readBody(id, size, signal) {
    const total = NumberCtor(size);
    const out = new Uint8ArrayCtor(total);
    let offset = 0;
    while (offset < total) {
      const answer = await untilAborted(opCall(binding, "fetch_body", { id, offset }), signal);
      const parsed = JSONParse(call(StringSlice, answer, 1));
      if (answer[0] !== "o") throw failed(text(parsed.message), parsed.code);
      const piece = fromBase64(text(parsed.piece));
      if (piece.length === 0 || offset + piece.length > total) {
        throw failed("fetch: the host's answer has a malformed body", null);
      }
      call(TypedArraySet, out, piece, offset);
      offset += piece.length;
    }
    return out;
  }

  const globals = { fetch, Headers, Request, Response, AbortController, AbortSignal, DOMException };
  return {
    globals,
    /** Called by `install` with the namespace name holding `fetch` (or null when none does). */
    setBinding: (function setBinding(namespace) {
      binding = namespace;
    }),
  };
};
