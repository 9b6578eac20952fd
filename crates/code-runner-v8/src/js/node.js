// The small Node surface npm packages expect, for `node_packages` and guest
// code alike: `node:buffer`'s Buffer, `node:events`' EventEmitter,
// `node:path` (POSIX), a `node:util` subset and a `process` with `env` and
// `nextTick`. Each module is made on its first import in a runtime (the
// loader's `code-runner:node/<name>` source asks `nodeModule(name)`), so a
// runtime that imports none pays nothing. Any other `node:` module is refused
// by the loader, by name: nothing here half-works.
//
// Written against the globals the bootstrap leaves guests (TextEncoder,
// TextDecoder, queueMicrotask-free: promise jobs) and the bootstrap's own
// `inspect`, `format` and `write` (text to stdout, 1, or stderr, 2), handed in.
function makeNode(inspect, format, write) {
  "use strict";
  const made = { __proto__: null };

  // ---- buffer ------------------------------------------------------------
  function makeBuffer() {
    const B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const B64_INDEX = new Int16Array(128).fill(-1);
    for (let i = 0; i < 64; i++) B64_INDEX[B64.charCodeAt(i)] = i;
    B64_INDEX[45] = 62; // '-' (base64url)
    B64_INDEX[95] = 63; // '_'
    const ENCODINGS = ["utf8", "utf-8", "hex", "base64", "base64url", "latin1", "binary", "ascii", "utf16le", "ucs2", "ucs-2", "utf-16le"];
    const normal = (encoding) => {
      const lower = String(encoding ?? "utf8").toLowerCase();
      if (!ENCODINGS.includes(lower)) throw new TypeError(`Unknown encoding: ${encoding}`);
      if (lower === "utf-8") return "utf8";
      if (lower === "binary") return "latin1";
      if (lower === "ucs2" || lower === "ucs-2" || lower === "utf-16le") return "utf16le";
      return lower;
    };
    const encoder = new TextEncoder();
    const decoder = new TextDecoder();

    function bytesOf(string, encoding) {
      switch (normal(encoding)) {
        case "utf8": return encoder.encode(string);
        case "hex": {
          const out = new Uint8Array(string.length >>> 1);
          let n = 0;
          for (; n < out.length; n++) {
            const byte = parseInt(string.substr(n * 2, 2), 16);
            if (Number.isNaN(byte)) break;
            out[n] = byte;
          }
          return out.subarray(0, n);
        }
        case "base64":
        case "base64url": {
          const out = new Uint8Array((string.length * 3) >>> 2);
          let bits = 0, value = 0, n = 0;
          for (let i = 0; i < string.length; i++) {
            const code = string.charCodeAt(i);
            const digit = code < 128 ? B64_INDEX[code] : -1;
            if (digit < 0) continue;
            value = (value << 6) | digit;
            bits += 6;
            if (bits >= 8) {
              bits -= 8;
              out[n++] = (value >>> bits) & 0xff;
            }
          }
          return out.subarray(0, n);
        }
        case "latin1":
        case "ascii": {
          const out = new Uint8Array(string.length);
          for (let i = 0; i < string.length; i++) out[i] = string.charCodeAt(i) & 0xff;
          return out;
        }
        case "utf16le": {
          const out = new Uint8Array(string.length * 2);
          for (let i = 0; i < string.length; i++) {
            const code = string.charCodeAt(i);
            out[i * 2] = code & 0xff;
            out[i * 2 + 1] = code >>> 8;
          }
          return out;
        }
      }
    }

    function textOf(bytes, encoding) {
      switch (normal(encoding)) {
        case "utf8": return decoder.decode(bytes);
        case "hex": {
          let out = "";
          for (let i = 0; i < bytes.length; i++) out += (bytes[i] < 16 ? "0" : "") + bytes[i].toString(16);
          return out;
        }
        case "base64":
        case "base64url": {
          const url = normal(encoding) === "base64url";
          const alphabet = url ? B64.slice(0, 62) + "-_" : B64;
          let out = "";
          let i = 0;
          for (; i + 2 < bytes.length; i += 3) {
            const v = (bytes[i] << 16) | (bytes[i + 1] << 8) | bytes[i + 2];
            out += alphabet[v >>> 18] + alphabet[(v >>> 12) & 63] + alphabet[(v >>> 6) & 63] + alphabet[v & 63];
          }
          if (i < bytes.length) {
            const v = (bytes[i] << 16) | ((bytes[i + 1] ?? 0) << 8);
            out += alphabet[v >>> 18] + alphabet[(v >>> 12) & 63];
            out += i + 1 < bytes.length ? alphabet[(v >>> 6) & 63] : (url ? "" : "=");
            out += url ? "" : "=";
          }
          return out;
        }
        case "latin1": {
          let out = "";
          for (let i = 0; i < bytes.length; i++) out += String.fromCharCode(bytes[i]);
          return out;
        }
        case "ascii": {
          let out = "";
          for (let i = 0; i < bytes.length; i++) out += String.fromCharCode(bytes[i] & 0x7f);
          return out;
        }
        case "utf16le": {
          let out = "";
          for (let i = 0; i + 1 < bytes.length; i += 2) out += String.fromCharCode(bytes[i] | (bytes[i + 1] << 8));
          return out;
        }
      }
    }

    class Buffer extends Uint8Array {
      static from(value, encodingOrOffset, length) {
        if (typeof value === "string") return Buffer.#wrap(bytesOf(value, encodingOrOffset));
        if (value instanceof ArrayBuffer || value instanceof SharedArrayBuffer) {
          const offset = encodingOrOffset ?? 0;
          return new Buffer(value, offset, length ?? value.byteLength - offset);
        }
        if (ArrayBuffer.isView(value)) {
          const copy = new Buffer(value.byteLength);
          copy.set(new Uint8Array(value.buffer, value.byteOffset, value.byteLength));
          return copy;
        }
        if (value !== null && typeof value === "object") {
          if (value.type === "Buffer" && Array.isArray(value.data)) return Buffer.from(value.data);
          if (typeof value.length === "number") {
            const out = new Buffer(value.length);
            for (let i = 0; i < value.length; i++) out[i] = value[i];
            return out;
          }
        }
        throw new TypeError("The first argument must be of type string, Buffer, ArrayBuffer, Array, or Array-like Object.");
      }
      static #wrap(bytes) {
        return new Buffer(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      }
      static alloc(size, fill, encoding) {
        const out = new Buffer(size);
        if (fill !== undefined && fill !== 0) out.fill(fill, 0, size, encoding);
        return out;
      }
      static allocUnsafe(size) { return new Buffer(size); }
      static allocUnsafeSlow(size) { return new Buffer(size); }
      static isBuffer(value) { return value instanceof Buffer; }
      static isEncoding(encoding) { return typeof encoding === "string" && ENCODINGS.includes(encoding.toLowerCase()); }
      static byteLength(value, encoding) {
        if (typeof value !== "string") return value.byteLength;
        return bytesOf(value, encoding).length;
      }
      static concat(list, totalLength) {
        const total = totalLength ?? list.reduce((sum, item) => sum + item.length, 0);
        const out = Buffer.alloc(total);
        let at = 0;
        for (const item of list) {
          if (at >= total) break;
          const part = item.length > total - at ? item.subarray(0, total - at) : item;
          out.set(part, at);
          at += part.length;
        }
        return out;
      }
      static compare(a, b) { return a.compare(b); }
      fill(value, offset = 0, end = this.length, encoding) {
        if (typeof offset === "string") return this.fill(value, 0, this.length, offset);
        if (typeof value === "string") {
          const bytes = bytesOf(value, encoding);
          if (bytes.length === 0) return super.fill(0, offset, end);
          for (let i = offset, j = 0; i < end; i++, j = (j + 1) % bytes.length) this[i] = bytes[j];
          return this;
        }
        return super.fill(value, offset, end);
      }
      toString(encoding, start = 0, end = this.length) {
        return textOf(this.subarray(start, end), encoding);
      }
      toJSON() { return { type: "Buffer", data: Array.from(this) }; }
      equals(other) { return this.compare(other) === 0; }
      compare(other) {
        const n = Math.min(this.length, other.length);
        for (let i = 0; i < n; i++) if (this[i] !== other[i]) return this[i] < other[i] ? -1 : 1;
        return this.length === other.length ? 0 : this.length < other.length ? -1 : 1;
      }
      slice(start, end) { return this.subarray(start, end); }
      write(string, offset = 0, length, encoding) {
        if (typeof offset === "string") return this.write(string, 0, undefined, offset);
        if (typeof length === "string") return this.write(string, offset, undefined, length);
        const bytes = bytesOf(string, encoding);
        const n = Math.min(bytes.length, length ?? Infinity, this.length - offset);
        this.set(bytes.subarray(0, n), offset);
        return n;
      }
      copy(target, targetStart = 0, start = 0, end = this.length) {
        const part = this.subarray(start, Math.min(end, start + target.length - targetStart));
        target.set(part, targetStart);
        return part.length;
      }
      indexOf(value, from, encoding) {
        if (typeof value === "number") return super.indexOf(value, from);
        const needle = typeof value === "string" ? bytesOf(value, encoding) : value;
        outer: for (let i = from ?? 0; i <= this.length - needle.length; i++) {
          for (let j = 0; j < needle.length; j++) if (this[i + j] !== needle[j]) continue outer;
          return i;
        }
        return -1;
      }
      includes(value, from, encoding) { return this.indexOf(value, from, encoding) !== -1; }
      #view() { return new DataView(this.buffer, this.byteOffset, this.byteLength); }
      readUInt8(o = 0) { return this.#view().getUint8(o); }
      readInt8(o = 0) { return this.#view().getInt8(o); }
      readUInt16LE(o = 0) { return this.#view().getUint16(o, true); }
      readUInt16BE(o = 0) { return this.#view().getUint16(o, false); }
      readInt16LE(o = 0) { return this.#view().getInt16(o, true); }
      readInt16BE(o = 0) { return this.#view().getInt16(o, false); }
      readUInt32LE(o = 0) { return this.#view().getUint32(o, true); }
      readUInt32BE(o = 0) { return this.#view().getUint32(o, false); }
      readInt32LE(o = 0) { return this.#view().getInt32(o, true); }
      readInt32BE(o = 0) { return this.#view().getInt32(o, false); }
      readFloatLE(o = 0) { return this.#view().getFloat32(o, true); }
      readFloatBE(o = 0) { return this.#view().getFloat32(o, false); }
      readDoubleLE(o = 0) { return this.#view().getFloat64(o, true); }
      readDoubleBE(o = 0) { return this.#view().getFloat64(o, false); }
      readBigUInt64LE(o = 0) { return this.#view().getBigUint64(o, true); }
      readBigUInt64BE(o = 0) { return this.#view().getBigUint64(o, false); }
      writeUInt8(v, o = 0) { this.#view().setUint8(o, v); return o + 1; }
      writeInt8(v, o = 0) { this.#view().setInt8(o, v); return o + 1; }
      writeUInt16LE(v, o = 0) { this.#view().setUint16(o, v, true); return o + 2; }
      writeUInt16BE(v, o = 0) { this.#view().setUint16(o, v, false); return o + 2; }
      writeInt16LE(v, o = 0) { this.#view().setInt16(o, v, true); return o + 2; }
      writeInt16BE(v, o = 0) { this.#view().setInt16(o, v, false); return o + 2; }
      writeUInt32LE(v, o = 0) { this.#view().setUint32(o, v, true); return o + 4; }
      writeUInt32BE(v, o = 0) { this.#view().setUint32(o, v, false); return o + 4; }
      writeInt32LE(v, o = 0) { this.#view().setInt32(o, v, true); return o + 4; }
      writeInt32BE(v, o = 0) { this.#view().setInt32(o, v, false); return o + 4; }
      writeFloatLE(v, o = 0) { this.#view().setFloat32(o, v, true); return o + 4; }
      writeFloatBE(v, o = 0) { this.#view().setFloat32(o, v, false); return o + 4; }
      writeDoubleLE(v, o = 0) { this.#view().setFloat64(o, v, true); return o + 8; }
      writeDoubleBE(v, o = 0) { this.#view().setFloat64(o, v, false); return o + 8; }
    }
    Buffer.poolSize = 8192;
    return { Buffer, kMaxLength: 2 ** 32, constants: { MAX_LENGTH: 2 ** 32 } };
  }

  // ---- events ------------------------------------------------------------
  function makeEvents() {
    const LISTENERS = Symbol("listeners");
    class EventEmitter {
      static defaultMaxListeners = 10;
      #map() {
        if (!Object.prototype.hasOwnProperty.call(this, LISTENERS)) {
          Object.defineProperty(this, LISTENERS, { value: new Map(), writable: true, configurable: true });
        }
        return this[LISTENERS];
      }
      #add(name, listener, prepend, once) {
        if (typeof listener !== "function") throw new TypeError('The "listener" argument must be of type function');
        const map = this.#map();
        if (map.has("newListener") && name !== "newListener") this.emit("newListener", name, listener);
        const list = map.get(name) ?? [];
        const entry = { listener, once };
        map.set(name, prepend ? [entry, ...list] : [...list, entry]);
        return this;
      }
      on(name, listener) { return this.#add(name, listener, false, false); }
      addListener(name, listener) { return this.on(name, listener); }
      prependListener(name, listener) { return this.#add(name, listener, true, false); }
      once(name, listener) { return this.#add(name, listener, false, true); }
      prependOnceListener(name, listener) { return this.#add(name, listener, true, true); }
      off(name, listener) {
        const map = this.#map();
        const list = map.get(name);
        if (!list) return this;
        const at = list.findLastIndex((entry) => entry.listener === listener);
        if (at >= 0) {
          const rest = list.filter((_, i) => i !== at);
          if (rest.length) map.set(name, rest); else map.delete(name);
          if (map.has("removeListener")) this.emit("removeListener", name, listener);
        }
        return this;
      }
      removeListener(name, listener) { return this.off(name, listener); }
      removeAllListeners(name) {
        if (name === undefined) this.#map().clear(); else this.#map().delete(name);
        return this;
      }
      emit(name, ...args) {
        const list = this.#map().get(name);
        if (!list || list.length === 0) {
          if (name === "error") throw args[0] instanceof Error ? args[0] : new Error(`Unhandled error. (${inspect(args[0])})`);
          return false;
        }
        for (const entry of list) {
          if (entry.once) this.off(name, entry.listener);
          entry.listener.apply(this, args);
        }
        return true;
      }
      listeners(name) { return (this.#map().get(name) ?? []).map((entry) => entry.listener); }
      rawListeners(name) { return this.listeners(name); }
      listenerCount(name) { return (this.#map().get(name) ?? []).length; }
      eventNames() { return [...this.#map().keys()]; }
      setMaxListeners() { return this; }
      getMaxListeners() { return EventEmitter.defaultMaxListeners; }
    }
    EventEmitter.EventEmitter = EventEmitter;
    const once = (emitter, name) => new Promise((resolve, reject) => {
      const fail = (error) => { emitter.off(name, done); reject(error); };
      const done = (...args) => { if (name !== "error") emitter.off("error", fail); resolve(args); };
      emitter.once(name, done);
      if (name !== "error") emitter.once("error", fail);
    });
    EventEmitter.once = once;
    return { default: EventEmitter, EventEmitter, once };
  }

  // ---- path (POSIX) --------------------------------------------------------
  function makePath() {
    const normalizeParts = (path, absolute) => {
      const out = [];
      for (const part of path.split("/")) {
        if (part === "" || part === ".") continue;
        if (part === "..") {
          if (out.length && out[out.length - 1] !== "..") out.pop();
          else if (!absolute) out.push("..");
        } else out.push(part);
      }
      return out;
    };
    const str = (value, name) => {
      if (typeof value !== "string") throw new TypeError(`The "${name}" argument must be of type string. Received ${inspect(value)}`);
      return value;
    };
    const path = {
      sep: "/",
      delimiter: ":",
      normalize(p) {
        str(p, "path");
        if (p === "") return ".";
        const absolute = p.startsWith("/");
        const trailing = p.endsWith("/");
        let out = normalizeParts(p, absolute).join("/");
        if (out === "" && !absolute) out = ".";
        if (out !== "" && trailing) out += "/";
        return (absolute ? "/" : "") + out;
      },
      join(...parts) {
        const joined = parts.map((part) => str(part, "path")).filter((part) => part !== "").join("/");
        return joined === "" ? "." : path.normalize(joined);
      },
      resolve(...parts) {
        let resolved = "";
        for (let i = parts.length - 1; i >= 0 && !resolved.startsWith("/"); i--) {
          const part = str(parts[i], "paths[" + i + "]");
          if (part !== "") resolved = resolved === "" ? part : `${part}/${resolved}`;
        }
        if (!resolved.startsWith("/")) resolved = `/${resolved}`;
        return "/" + normalizeParts(resolved, true).join("/");
      },
      isAbsolute(p) { return str(p, "path").startsWith("/"); },
      dirname(p) {
        str(p, "path");
        if (p === "") return ".";
        const trimmed = p.replace(/\/+$/, "");
        if (trimmed === "") return "/";
        const at = trimmed.lastIndexOf("/");
        if (at < 0) return ".";
        if (at === 0) return "/";
        return trimmed.slice(0, at).replace(/\/+$/, "") || "/";
      },
      basename(p, ext) {
        str(p, "path");
        const trimmed = p.replace(/\/+$/, "");
        let base = trimmed.slice(trimmed.lastIndexOf("/") + 1);
        if (ext !== undefined && base.endsWith(ext) && base !== ext) base = base.slice(0, -ext.length);
        return base;
      },
      extname(p) {
        const base = path.basename(p);
        const at = base.lastIndexOf(".");
        return at <= 0 ? "" : base.slice(at);
      },
      relative(from, to) {
        const a = normalizeParts(path.resolve(from), true);
        const b = normalizeParts(path.resolve(to), true);
        let i = 0;
        while (i < a.length && i < b.length && a[i] === b[i]) i++;
        return [...a.slice(i).map(() => ".."), ...b.slice(i)].join("/");
      },
      parse(p) {
        const root = str(p, "path").startsWith("/") ? "/" : "";
        const base = path.basename(p);
        const ext = path.extname(p);
        const dir = p.includes("/") ? path.dirname(p) : "";
        return { root, dir, base, ext, name: ext ? base.slice(0, -ext.length) : base };
      },
      format(parts) {
        const base = parts.base ?? `${parts.name ?? ""}${parts.ext ?? ""}`;
        const dir = parts.dir ?? parts.root ?? "";
        if (!dir) return base;
        return dir === parts.root ? `${dir}${base}` : `${dir}/${base}`;
      },
      toNamespacedPath(p) { return p; },
    };
    path.posix = path;
    return { default: path, ...path };
  }

  // ---- process -------------------------------------------------------------
  function makeProcess() {
    const started = performance.now();
    const process = {
      env: {},
      argv: [],
      execArgv: [],
      platform: "linux",
      version: "",
      versions: {},
      pid: 1,
      title: "code-runner",
      browser: false,
      cwd: () => "/",
      nextTick(callback, ...args) {
        Promise.resolve().then(() => callback(...args));
      },
      hrtime: Object.assign((previous) => {
        const ms = performance.now();
        const s = Math.floor(ms / 1000);
        const ns = Math.floor((ms % 1000) * 1e6);
        if (!previous) return [s, ns];
        let ds = s - previous[0], dns = ns - previous[1];
        if (dns < 0) { ds -= 1; dns += 1e9; }
        return [ds, dns];
      }, { bigint: () => BigInt(Math.floor(performance.now() * 1e6)) }),
      uptime: () => (performance.now() - started) / 1000,
      emitWarning: () => {},
      // Text as it is, no newline added: what console.log prints, without the line end.
      stdout: { write: (chunk) => { write(1, typeof chunk === "string" ? chunk : String(chunk)); return true; }, isTTY: false },
      stderr: { write: (chunk) => { write(2, typeof chunk === "string" ? chunk : String(chunk)); return true; }, isTTY: false },
    };
    return { default: process, process, env: process.env, nextTick: process.nextTick, platform: process.platform };
  }

  // ---- util ----------------------------------------------------------------
  function makeUtil() {
    const custom = Symbol.for("nodejs.util.inspect.custom");
    const withCustom = Object.assign((value, options) => inspect(value, options), { custom });
    const promisify = (original) => {
      if (typeof original !== "function") throw new TypeError('The "original" argument must be of type function');
      if (original[promisify.custom]) return original[promisify.custom];
      return function (...args) {
        return new Promise((resolve, reject) => {
          original.call(this, ...args, (error, value) => (error ? reject(error) : resolve(value)));
        });
      };
    };
    promisify.custom = Symbol.for("nodejs.util.promisify.custom");
    const tag = (value) => Object.prototype.toString.call(value);
    const types = {
      isDate: (v) => v instanceof Date,
      isRegExp: (v) => v instanceof RegExp,
      isPromise: (v) => v instanceof Promise,
      isMap: (v) => v instanceof Map,
      isSet: (v) => v instanceof Set,
      isTypedArray: (v) => ArrayBuffer.isView(v) && !(v instanceof DataView),
      isUint8Array: (v) => v instanceof Uint8Array,
      isArrayBuffer: (v) => v instanceof ArrayBuffer,
      isAnyArrayBuffer: (v) => v instanceof ArrayBuffer || v instanceof SharedArrayBuffer,
      isNativeError: (v) => v instanceof Error,
      isAsyncFunction: (v) => tag(v) === "[object AsyncFunction]",
      isGeneratorFunction: (v) => tag(v) === "[object GeneratorFunction]" || tag(v) === "[object AsyncGeneratorFunction]",
    };
    const util = {
      format: (...args) => format(args),
      inspect: withCustom,
      promisify,
      callbackify: (original) => function (...args) {
        const callback = args.pop();
        original.apply(this, args).then((value) => callback(null, value), (error) => callback(error));
      },
      inherits(constructor, superConstructor) {
        Object.setPrototypeOf(constructor.prototype, superConstructor.prototype);
        Object.setPrototypeOf(constructor, superConstructor);
        Object.defineProperty(constructor, "super_", { value: superConstructor, writable: true, configurable: true });
      },
      deprecate: (fn) => fn,
      types,
      isArray: Array.isArray,
      TextEncoder,
      TextDecoder,
    };
    return { default: util, ...util };
  }

  const makers = { buffer: makeBuffer, events: makeEvents, path: makePath, process: makeProcess, util: makeUtil };
  return function nodeModule(name) {
    if (!(name in makers)) throw new TypeError(`node:${name} is not provided`);
    made[name] ??= Object.freeze(makers[name]());
    return made[name];
  };
}
