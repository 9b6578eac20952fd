// code-runner's `URL` and `URLSearchParams` (the WHATWG URL standard's parser
// for absolute and relative URLs, with special schemes' hosts lower-cased and
// numeric IPv4 hosts normalised; no IDNA, IPv6 kept as written) and
// `application/x-www-form-urlencoded`, for fetch.js and for guest code. Part
// of the bootstrap: intrinsics are captured before guest code runs, and
// internal lists are walked by index, never by an iterator a guest could replace.
const makeUrl = (core, { encodeUtf8 }) => {
  const coreDecode = core.decode;
  const ReflectApply = Reflect.apply;
  const call = (f, self, ...args) => ReflectApply(f, self, args);
  const ObjectDefineProperty = Object.defineProperty;
  const ObjectKeys = Object.keys;
  const JSONStringify = JSON.stringify;
  const TypeErrorCtor = TypeError;
  const Uint8ArrayCtor = Uint8Array;
  const TypedArraySubarray = Object.getPrototypeOf(Uint8Array.prototype).subarray;
  const ArraySort = Array.prototype.sort;
  const NumberCtor = Number;
  const StringCharCodeAt = String.prototype.charCodeAt;
  const StringCodePointAt = String.prototype.codePointAt;
  const StringSlice = String.prototype.slice;
  const StringIndexOf = String.prototype.indexOf;
  const StringLastIndexOf = String.prototype.lastIndexOf;
  const StringToLowerCase = String.prototype.toLowerCase;
  const StringToWellFormed = String.prototype.toWellFormed;
  const StringSplit = String.prototype.split;
  const StringReplaceAll = String.prototype.replaceAll;
  const RegExpExec = RegExp.prototype.exec;
  const SymbolIterator = Symbol.iterator;
  const SymbolToStringTag = Symbol.toStringTag;
  const push = append;
  const text = (value) => `${value}`;
  const hidden = (object, name, value) =>
    ObjectDefineProperty(object, name, { __proto__: null, value, writable: true, configurable: true, enumerable: false });
  const tag = (Class, name) => ObjectDefineProperty(Class.prototype, SymbolToStringTag, { __proto__: null, value: name, configurable: true });

  // ---- percent-encoding -----------------------------------------------------

  const HEX = "0123456789ABCDEF";
  const hexByte = (b) => `%${HEX[b >> 4]}${HEX[b & 15]}`;
  const hexValue = (c) => (c >= 48 && c <= 57 ? c - 48 : c >= 65 && c <= 70 ? c - 55 : c >= 97 && c <= 102 ? c - 87 : -1);

  /** Percent-encodes the code points of `input` that `encodes(c)` names (every non-ASCII one as UTF-8). */
  function percentEncode(input, encodes, spaceAsPlus = false) {
    input = call(StringToWellFormed, input);
    let out = "";
    let from = 0;
    for (let i = 0; i < input.length; i++) {
      const c = call(StringCharCodeAt, input, i);
      if (c < 0x80 && !encodes(c)) continue;
      out += call(StringSlice, input, from, i);
      if (c === 0x20 && spaceAsPlus) out += "+";
      else if (c < 0x80) out += hexByte(c);
      else {
        const cp = call(StringCodePointAt, input, i);
        if (cp > 0xffff) i++;
        const bytes = encodeUtf8(call(StringSlice, input, cp > 0xffff ? i - 1 : i, i + 1));
        for (let j = 0; j < bytes.length; j++) out += hexByte(bytes[j]);
      }
      from = i + 1;
    }
    return from === 0 ? input : out + call(StringSlice, input, from);
  }

  /** Decodes %XX sequences as UTF-8 (malformed sequences become U+FFFD, a lone % stays). */
  function percentDecode(input) {
    if (call(StringIndexOf, input, "%") === -1) return input;
    const bytes = encodeUtf8(input);
    const out = new Uint8ArrayCtor(bytes.length);
    let o = 0;
    for (let i = 0; i < bytes.length; i++) {
      const hi = i + 2 < bytes.length ? hexValue(bytes[i + 1]) : -1;
      const lo = hi >= 0 ? hexValue(bytes[i + 2]) : -1;
      if (bytes[i] === 37 && lo >= 0) {
        out[o++] = (hi << 4) | lo;
        i += 2;
      } else out[o++] = bytes[i];
    }
    return coreDecode(call(TypedArraySubarray, out, 0, o));
  }

  const c0 = (c) => c < 0x20 || c === 0x7f;
  const fragmentSet = (c) => c0(c) || c === 0x20 || c === 0x22 || c === 0x3c || c === 0x3e || c === 0x60;
  const querySet = (c) => c0(c) || c === 0x20 || c === 0x22 || c === 0x23 || c === 0x3c || c === 0x3e;
  const specialQuerySet = (c) => querySet(c) || c === 0x27;
  const pathSet = (c) => querySet(c) || c === 0x3f || c === 0x60 || c === 0x7b || c === 0x7d;
  const userinfoSet = (c) => pathSet(c) || c === 0x2f || c === 0x3a || c === 0x3b || c === 0x3d || c === 0x40 ||
    (c >= 0x5b && c <= 0x5e) || c === 0x7c;
  const alnum = (c) => (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122);
  const formSet = (c) => !(alnum(c) || c === 0x2a || c === 0x2d || c === 0x2e || c === 0x5f);

  // ---- URLSearchParams ------------------------------------------------------

  let paramsState;
  let isParams;
  class URLSearchParams {
    #list = [];
    /** The URL whose query this is, told of every change. */
    #url = null;
    constructor(init = "") {
      if (typeof init === "object" && init !== null) {
        if (typeof init[SymbolIterator] === "function") {
          for (const pair of init) {
            const items = [];
            for (const item of pair) push(items, item);
            if (items.length !== 2) throw new TypeErrorCtor("URLSearchParams: each pair must have exactly two items");
            push(this.#list, [call(StringToWellFormed, text(items[0])), call(StringToWellFormed, text(items[1]))]);
          }
        } else {
          const keys = ObjectKeys(init);
          for (let i = 0; i < keys.length; i++) push(this.#list, [call(StringToWellFormed, keys[i]), call(StringToWellFormed, text(init[keys[i]]))]);
        }
      } else {
        this.#list = parseForm(text(init));
      }
    }
    get size() {
      return this.#list.length;
    }
    append(name, value) {
      push(this.#list, [call(StringToWellFormed, text(name)), call(StringToWellFormed, text(value))]);
      this.#update();
    }
    delete(name, value = undefined) {
      name = text(name);
      const kept = [];
      for (let i = 0; i < this.#list.length; i++) {
        const [n, v] = this.#list[i];
        if (!(n === name && (value === undefined || v === text(value)))) push(kept, this.#list[i]);
      }
      this.#list = kept;
      this.#update();
    }
    get(name) {
      name = text(name);
      for (let i = 0; i < this.#list.length; i++) if (this.#list[i][0] === name) return this.#list[i][1];
      return null;
    }
    getAll(name) {
      name = text(name);
      const values = [];
      for (let i = 0; i < this.#list.length; i++) if (this.#list[i][0] === name) push(values, this.#list[i][1]);
      return values;
    }
    has(name, value = undefined) {
      name = text(name);
      for (let i = 0; i < this.#list.length; i++) {
        if (this.#list[i][0] === name && (value === undefined || this.#list[i][1] === text(value))) return true;
      }
      return false;
    }
    set(name, value) {
      name = call(StringToWellFormed, text(name));
      value = call(StringToWellFormed, text(value));
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
      this.#update();
    }
    sort() {
      // Stable, by UTF-16 code units, as the standard says.
      call(ArraySort, this.#list, (a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
      this.#update();
    }
    forEach(callback, thisArg = undefined) {
      if (typeof callback !== "function") throw new TypeErrorCtor("URLSearchParams.forEach: callback must be a function");
      for (let i = 0; i < this.#list.length; i++) call(callback, thisArg, this.#list[i][1], this.#list[i][0], this);
    }
    *entries() {
      for (let i = 0; i < this.#list.length; i++) yield [this.#list[i][0], this.#list[i][1]];
    }
    *keys() {
      for (let i = 0; i < this.#list.length; i++) yield this.#list[i][0];
    }
    *values() {
      for (let i = 0; i < this.#list.length; i++) yield this.#list[i][1];
    }
    toString() {
      let out = "";
      for (let i = 0; i < this.#list.length; i++) {
        if (i > 0) out += "&";
        out += `${percentEncode(this.#list[i][0], formSet, true)}=${percentEncode(this.#list[i][1], formSet, true)}`;
      }
      return out;
    }
    #update() {
      if (this.#url !== null) this.#url(this.toString());
    }
    static {
      isParams = (value) => typeof value === "object" && value !== null && #list in value;
      paramsState = (params) => ({
        __proto__: null,
        link: (update) => { params.#url = update; },
        reset: (query) => { params.#list = parseForm(query); },
      });
    }
  }
  hidden(URLSearchParams.prototype, SymbolIterator, URLSearchParams.prototype.entries);
  tag(URLSearchParams, "URLSearchParams");

  function parseForm(input) {
    if (input !== "" && call(StringCharCodeAt, input, 0) === 0x3f) input = call(StringSlice, input, 1);
    const list = [];
    const parts = call(StringSplit, input, "&");
    for (let i = 0; i < parts.length; i++) {
      if (parts[i] === "") continue;
      const part = call(StringReplaceAll, parts[i], "+", " ");
      const eq = call(StringIndexOf, part, "=");
      const name = eq === -1 ? part : call(StringSlice, part, 0, eq);
      const value = eq === -1 ? "" : call(StringSlice, part, eq + 1);
      push(list, [percentDecode(name), percentDecode(value)]);
    }
    return list;
  }

  // ---- URL ------------------------------------------------------------------

  const DEFAULT_PORTS = { __proto__: null, "http:": "80", "https:": "443", "ws:": "80", "wss:": "443", "ftp:": "21", "file:": "" };
  const isSpecial = (scheme) => DEFAULT_PORTS[scheme] !== undefined;
  const SCHEME = /^([A-Za-z][A-Za-z0-9+.-]*):/;
  const invalid = (input) => new TypeErrorCtor(`Invalid URL: ${JSONStringify(call(StringSlice, input, 0, 200))}`);

  /** Parses `input` (against the parsed `base`, or null) into {scheme, username, password, host, port, path, query, fragment, opaque}. */
  function parseURL(input, base) {
    const original = input;
    let start = 0;
    let end = input.length;
    while (start < end && call(StringCharCodeAt, input, start) <= 0x20) start++;
    while (end > start && call(StringCharCodeAt, input, end - 1) <= 0x20) end--;
    input = call(StringSlice, input, start, end);
    input = call(StringReplaceAll, call(StringReplaceAll, call(StringReplaceAll, input, "\t", ""), "\n", ""), "\r", "");
    const match = call(RegExpExec, SCHEME, input);
    const url = { __proto__: null, scheme: "", username: "", password: "", host: null, port: "", path: "", query: null, fragment: null, opaque: false };
    let rest;
    if (match !== null && !(base !== null && call(StringToLowerCase, match[1]) + ":" === base.scheme && isSpecial(base.scheme) && !(slash(input, match[0].length, true) && slash(input, match[0].length + 1, true)))) {
      url.scheme = `${call(StringToLowerCase, match[1])}:`;
      rest = call(StringSlice, input, match[0].length);
      const special = isSpecial(url.scheme);
      if (special || (slash(rest, 0, false) && slash(rest, 1, false))) return authority(url, rest, special, original);
      // An opaque path ("mailto:…", "data:…").
      url.opaque = true;
      return tail(url, rest, false, original);
    }
    if (match !== null) rest = call(StringSlice, input, match[0].length);
    else rest = input;
    if (base === null) throw invalid(original);
    const special = isSpecial(base.scheme);
    url.scheme = base.scheme;
    if (base.opaque) {
      if (match !== null || call(StringCharCodeAt, rest, 0) !== 0x23) throw invalid(original);
      url.opaque = true;
      url.path = base.path;
      url.query = base.query;
      return tail(url, rest, false, original, true);
    }
    if (slash(rest, 0, special) && slash(rest, 1, special)) return authority(url, rest, special, original);
    url.username = base.username;
    url.password = base.password;
    url.host = base.host;
    url.port = base.port;
    if (slash(rest, 0, special)) return tail(url, rest, special, original);
    const first = rest === "" ? -1 : call(StringCharCodeAt, rest, 0);
    url.path = base.path;
    if (first === -1) {
      url.query = base.query;
      return url;
    }
    if (first === 0x3f) return tail(url, rest, special, original, true);
    if (first === 0x23) {
      url.query = base.query;
      return tail(url, rest, special, original, true);
    }
    const dir = call(StringSlice, base.path, 0, call(StringLastIndexOf, base.path, "/") + 1);
    return tail(url, `${dir === "" ? "/" : dir}${rest}`, special, original);
  }

  function slash(input, i, special) {
    const c = i < input.length ? call(StringCharCodeAt, input, i) : -1;
    return c === 0x2f || (special && c === 0x5c);
  }

  /** `rest` starts with the slashes before an authority (a special scheme may have any number). */
  function authority(url, rest, special, original) {
    let i = 0;
    while (slash(rest, i, special)) i++;
    if (!special) i = 2;
    let j = i;
    while (j < rest.length) {
      const c = call(StringCharCodeAt, rest, j);
      if (c === 0x2f || c === 0x3f || c === 0x23 || (special && c === 0x5c)) break;
      j++;
    }
    let auth = call(StringSlice, rest, i, j);
    const at = call(StringLastIndexOf, auth, "@");
    if (at !== -1) {
      const info = call(StringSlice, auth, 0, at);
      const colon = call(StringIndexOf, info, ":");
      url.username = percentEncode(colon === -1 ? info : call(StringSlice, info, 0, colon), userinfoSet);
      url.password = colon === -1 ? "" : percentEncode(call(StringSlice, info, colon + 1), userinfoSet);
      auth = call(StringSlice, auth, at + 1);
    }
    const bracket = call(StringLastIndexOf, auth, "]");
    const colon = call(StringLastIndexOf, auth, ":");
    let host = auth;
    if (colon > bracket) {
      host = call(StringSlice, auth, 0, colon);
      const port = call(StringSlice, auth, colon + 1);
      if (port !== "") {
        for (let k = 0; k < port.length; k++) {
          const c = call(StringCharCodeAt, port, k);
          if (c < 48 || c > 57) throw invalid(original);
        }
        const value = NumberCtor(port);
        if (value > 65535) throw invalid(original);
        url.port = text(value) === DEFAULT_PORTS[url.scheme] ? "" : text(value);
      }
    }
    url.host = parseHost(host, special, url.scheme, original);
    return tail(url, call(StringSlice, rest, j), special, original);
  }

  function parseHost(host, special, scheme, original) {
    if (host === "") {
      if (special && scheme !== "file:") throw invalid(original);
      return "";
    }
    if (call(StringCharCodeAt, host, 0) === 0x5b) {
      const inner = call(StringToLowerCase, call(StringSlice, host, 1, -1));
      if (call(StringCharCodeAt, host, host.length - 1) !== 0x5d || inner === "") throw invalid(original);
      for (let i = 0; i < inner.length; i++) {
        const c = call(StringCharCodeAt, inner, i);
        if (!(hexValue(c) >= 0 || c === 0x3a || c === 0x2e)) throw invalid(original);
      }
      return `[${inner}]`;
    }
    if (special) host = call(StringToLowerCase, percentDecode(host));
    for (let i = 0; i < host.length; i++) {
      const c = call(StringCharCodeAt, host, i);
      // Forbidden host code points (with % too, for a special host, once decoded).
      if (c <= 0x20 || c === 0x7f || c === 0x23 || c === 0x2f || c === 0x3a || c === 0x3c || c === 0x3e ||
          c === 0x3f || c === 0x40 || c === 0x5b || c === 0x5c || c === 0x5d || c === 0x5e || c === 0x7c ||
          (special && c === 0x25)) {
        throw invalid(original);
      }
    }
    return special ? ipv4(host, original) ?? host : percentEncode(host, c0);
  }

  /** An IPv4 part's value (`0x` hex, leading `0` octal, else decimal), or NaN. */
  function ipv4Number(part) {
    let radix = 10;
    if (part.length > 1 && part[0] === "0") {
      radix = part[1] === "x" || part[1] === "X" ? 16 : 8;
      part = call(StringSlice, part, radix === 16 ? 2 : 1);
      if (part === "") return 0;
    }
    if (part === "") return NaN;
    let value = 0;
    for (let i = 0; i < part.length; i++) {
      const d = hexValue(call(StringCharCodeAt, part, i));
      if (d < 0 || d >= radix) return NaN;
      value = value * radix + d;
    }
    return value;
  }

  /** The dotted form of a host that ends in a number (WHATWG's IPv4 parser: `0x7f.1` is 127.0.0.1), or null. */
  function ipv4(host, original) {
    const parts = call(StringSplit, host, ".");
    if (parts.length > 1 && parts[parts.length - 1] === "") parts.length -= 1;
    const last = parts[parts.length - 1];
    let digits = last !== "";
    for (let i = 0; i < last.length; i++) {
      const c = call(StringCharCodeAt, last, i);
      if (c < 48 || c > 57) digits = false;
    }
    const lastValue = ipv4Number(last);
    if (!digits && !(lastValue === lastValue)) return null;
    if (parts.length > 4) throw invalid(original);
    let address = 0;
    for (let i = 0; i < parts.length - 1; i++) {
      const value = ipv4Number(parts[i]);
      if (!(value <= 255)) throw invalid(original);
      address += value * 256 ** (3 - i);
    }
    if (!(lastValue < 256 ** (5 - parts.length))) throw invalid(original);
    address += lastValue;
    return `${(address / 16777216) & 255}.${(address / 65536) & 255}.${(address / 256) & 255}.${address & 255}`;
  }

  /** Path, query and fragment; `keepPath` when `rest` starts at the query or fragment. */
  function tail(url, rest, special, original, keepPath = false) {
    let hash = call(StringIndexOf, rest, "#");
    if (hash !== -1) {
      url.fragment = percentEncode(call(StringSlice, rest, hash + 1), fragmentSet);
      rest = call(StringSlice, rest, 0, hash);
    }
    const question = call(StringIndexOf, rest, "?");
    if (question !== -1) {
      url.query = percentEncode(call(StringSlice, rest, question + 1), special ? specialQuerySet : querySet);
      rest = call(StringSlice, rest, 0, question);
    }
    if (keepPath) return url;
    if (url.opaque) {
      url.path = percentEncode(rest, c0);
      return url;
    }
    url.path = normalizePath(rest, special);
    return url;
  }

  function normalizePath(path, special) {
    if (special) path = call(StringReplaceAll, path, "\\", "/");
    if (path === "") return special ? "/" : "";
    const segments = call(StringSplit, path, "/");
    const out = [];
    for (let i = 1; i < segments.length; i++) {
      const segment = call(StringToLowerCase, segments[i]);
      const last = i === segments.length - 1;
      if (segment === ".." || segment === ".%2e" || segment === "%2e." || segment === "%2e%2e") {
        if (out.length > 0) out.length -= 1;
        if (last) push(out, "");
      } else if (segment === "." || segment === "%2e") {
        if (last) push(out, "");
      } else push(out, percentEncode(segments[i], pathSet));
    }
    let result = "";
    for (let i = 0; i < out.length; i++) result += `/${out[i]}`;
    return result === "" ? "/" : result;
  }

  function serialize(url, withFragment = true) {
    let out = url.scheme;
    if (url.host !== null) {
      out += "//";
      if (url.username !== "" || url.password !== "") out += `${url.username}${url.password !== "" ? `:${url.password}` : ""}@`;
      out += url.host;
      if (url.port !== "") out += `:${url.port}`;
    } else if (!url.opaque && call(StringSlice, url.path, 0, 2) === "//") out += "/.";
    out += url.path;
    if (url.query !== null) out += `?${url.query}`;
    if (withFragment && url.fragment !== null) out += `#${url.fragment}`;
    return out;
  }

  class URL {
    #url;
    #params = null;
    constructor(url, base = undefined) {
      this.#url = parseURL(text(url), base === undefined ? null : parseURL(text(base), null));
    }
    static canParse(url, base = undefined) {
      try {
        parseURL(text(url), base === undefined ? null : parseURL(text(base), null));
        return true;
      } catch {
        return false;
      }
    }
    static parse(url, base = undefined) {
      try {
        return new URL(url, base);
      } catch {
        return null;
      }
    }
    /** Re-parses the URL with one part replaced; an invalid result leaves it as it was, as the standard's setters do. */
    #replace(part, value) {
      const copy = { __proto__: null, ...this.#url };
      copy[part] = value;
      try {
        this.#set(parseURL(serialize(copy), null));
      } catch {
        // ignored, as the standard says
      }
    }
    #set(parsed) {
      this.#url = parsed;
      if (this.#params !== null) paramsState(this.#params).reset(parsed.query ?? "");
    }
    get href() {
      return serialize(this.#url);
    }
    set href(value) {
      this.#set(parseURL(text(value), null));
    }
    get origin() {
      const url = this.#url;
      if (!isSpecial(url.scheme) || url.scheme === "file:") return "null";
      return `${url.scheme}//${url.host}${url.port !== "" ? `:${url.port}` : ""}`;
    }
    get protocol() {
      return this.#url.scheme;
    }
    set protocol(value) {
      value = text(value);
      const colon = call(StringIndexOf, value, ":");
      const scheme = `${call(StringToLowerCase, colon === -1 ? value : call(StringSlice, value, 0, colon))}:`;
      if (isSpecial(scheme) !== isSpecial(this.#url.scheme)) return;
      this.#replace("scheme", scheme);
    }
    get username() {
      return this.#url.username;
    }
    set username(value) {
      if (this.#url.host !== null && this.#url.host !== "") this.#url.username = percentEncode(text(value), userinfoSet);
    }
    get password() {
      return this.#url.password;
    }
    set password(value) {
      if (this.#url.host !== null && this.#url.host !== "") this.#url.password = percentEncode(text(value), userinfoSet);
    }
    get host() {
      const url = this.#url;
      if (url.host === null) return "";
      return url.port === "" ? url.host : `${url.host}:${url.port}`;
    }
    set host(value) {
      const url = this.#url;
      if (url.opaque) return;
      const userinfo = url.username !== "" || url.password !== "" ? `${url.username}${url.password !== "" ? `:${url.password}` : ""}@` : "";
      const rest = serialize({ __proto__: null, ...url, host: null, scheme: "" });
      try {
        this.#set(parseURL(`${url.scheme}//${userinfo}${text(value)}${rest}`, null));
      } catch {
        // ignored, as the standard says
      }
    }
    get hostname() {
      return this.#url.host ?? "";
    }
    set hostname(value) {
      value = text(value);
      if (this.#url.opaque || call(StringIndexOf, value, ":") !== -1 && call(StringCharCodeAt, value, 0) !== 0x5b) return;
      this.#replace("host", value);
    }
    get port() {
      return this.#url.port;
    }
    set port(value) {
      value = text(value);
      if (this.#url.host === null || this.#url.host === "") return;
      let digits = 0;
      while (digits < value.length && call(StringCharCodeAt, value, digits) >= 48 && call(StringCharCodeAt, value, digits) <= 57) digits++;
      if (value === "") this.#url.port = "";
      else if (digits > 0) this.#replace("port", call(StringSlice, value, 0, digits));
    }
    get pathname() {
      return this.#url.path;
    }
    set pathname(value) {
      if (this.#url.opaque) return;
      value = text(value);
      const special = isSpecial(this.#url.scheme);
      if (value !== "" && !slash(value, 0, special)) value = `/${value}`;
      this.#url.path = normalizePath(call(StringReplaceAll, call(StringReplaceAll, value, "?", "%3F"), "#", "%23"), special);
    }
    get search() {
      const query = this.#url.query;
      return query === null || query === "" ? "" : `?${query}`;
    }
    set search(value) {
      value = text(value);
      if (value !== "" && call(StringCharCodeAt, value, 0) === 0x3f) value = call(StringSlice, value, 1);
      this.#url.query = value === "" ? null : percentEncode(value, isSpecial(this.#url.scheme) ? specialQuerySet : querySet);
      if (this.#params !== null) paramsState(this.#params).reset(value);
    }
    get searchParams() {
      if (this.#params === null) {
        this.#params = new URLSearchParams(this.#url.query ?? "");
        paramsState(this.#params).link((query) => {
          this.#url.query = query === "" ? null : query;
        });
      }
      return this.#params;
    }
    get hash() {
      const fragment = this.#url.fragment;
      return fragment === null || fragment === "" ? "" : `#${fragment}`;
    }
    set hash(value) {
      value = text(value);
      if (value !== "" && call(StringCharCodeAt, value, 0) === 0x23) value = call(StringSlice, value, 1);
      this.#url.fragment = value === "" ? null : percentEncode(value, fragmentSet);
    }
    toString() {
      return serialize(this.#url);
    }
    toJSON() {
      return serialize(this.#url);
    }
  }
  tag(URL, "URL");

  return { URL, URLSearchParams, isParams };
};
