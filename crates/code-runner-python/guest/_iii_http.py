# Python's HTTP clients through the host: urllib.request and http.client send
# their requests with the `iii.fetch` binding. The guest has no network; the
# host checks each request against egress_allow, does TLS (there is no ssl
# module here), follows redirects and hands back the whole response, which
# becomes a real http.client.HTTPResponse. A refused request raises
# urllib.error.URLError with the host's message; a status >= 400 reaches
# urllib's HTTPError as usual, its body readable.
#
# The runner imports this once (into the snapshot) and calls `bind` at the
# start of every turn with that turn's `iii` namespace.
import base64
import http.client
import io
import os
import urllib.error
import urllib.request

_fetch = [None]  # the turn's iii.fetch
_secret_names = set()  # the environment variables the last turn's secrets set


def bind(namespace):
    """The turn's iii.fetch, and iii.secrets' placeholders as environment variables."""
    fetch = namespace["fetch"] if namespace is not None and "fetch" in namespace else None
    secrets = namespace["secrets"] if namespace is not None and "secrets" in namespace else None
    _fetch[0] = fetch
    secrets = secrets if isinstance(secrets, dict) else {}
    for name in _secret_names - secrets.keys():
        os.environ.pop(name, None)
    _secret_names.clear()
    for name, placeholder in secrets.items():
        if isinstance(placeholder, str) and name and "=" not in name and "\0" not in name + placeholder:
            os.environ[name] = placeholder
            _secret_names.add(name)


def _as_bytes(data):
    if isinstance(data, str):
        return data.encode("iso-8859-1")
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    if hasattr(data, "read"):
        chunks = []
        while chunk := data.read(65536):
            chunks.append(_as_bytes(chunk))
        return b"".join(chunks)
    return b"".join(_as_bytes(chunk) for chunk in data)


def _clean(text):
    return str(text).replace("\r", " ").replace("\n", " ")


class _Recorded:
    """What HTTPResponse reads the response from, in place of a socket."""

    def __init__(self, data):
        self._data = data

    def makefile(self, *args, **kwargs):
        return io.BytesIO(self._data)


class HTTPConnection(http.client.HTTPConnection):
    """http.client's connection, each request sent through the host."""

    scheme = "http"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._iii = None  # the request being written: [method, url, headers, body, headers ended]

    def connect(self):
        pass  # the host connects, per request

    def close(self):
        self._iii = None
        super().close()

    def putrequest(self, method, url, skip_host=False, skip_accept_encoding=False):
        if self._iii is not None:
            raise http.client.CannotSendRequest("a request is already being written")
        self._validate_method(method)
        self._validate_path(url)
        self._iii = [method, url, [], [], False]

    def putheader(self, header, *values):
        if self._iii is None or self._iii[4]:
            raise http.client.CannotSendHeader()
        name = header.encode("ascii") if hasattr(header, "encode") else bytes(header)
        if not http.client._is_legal_header_name(name):
            raise ValueError(f"Invalid header name {name!r}")
        parts = []
        for value in values:
            if isinstance(value, int):
                value = str(value)
            value = value.encode("iso-8859-1") if hasattr(value, "encode") else bytes(value)
            if http.client._is_illegal_header_value(value):
                raise ValueError(f"Invalid header value {value!r}")
            parts.append(value.decode("iso-8859-1"))
        self._iii[2].append([name.decode("ascii"), ", ".join(parts)])

    def endheaders(self, message_body=None, *, encode_chunked=False):
        if self._iii is None or self._iii[4]:
            raise http.client.CannotSendHeader()
        self._iii[4] = True
        if message_body is not None:
            self.send(message_body)

    def send(self, data):
        if self._iii is None or not self._iii[4]:
            raise http.client.CannotSendRequest("send() before endheaders()")
        self._iii[3].append(_as_bytes(data))

    def _target(self, url):
        if url.startswith(("http://", "https://")):
            return url
        host = f"[{self.host}]" if ":" in self.host else self.host
        port = "" if self.port == self.default_port else f":{self.port}"
        return f"{self.scheme}://{host}{port}{url if url.startswith('/') else '/' + url}"

    def getresponse(self):
        pending = self._iii
        if pending is None or not pending[4]:
            raise http.client.ResponseNotReady()
        self._iii = None
        method, url, headers, body = pending[0], self._target(pending[1]), pending[2], b"".join(pending[3])
        request = {"method": method, "url": url, "headers": headers}
        if body:
            request["body"] = base64.b64encode(body).decode("ascii")
        fetch = _fetch[0]
        if fetch is None:
            raise urllib.error.URLError(f"fetch to {self.host}: this runtime has no iii.fetch")
        try:
            answer = fetch(request)
            status, content = int(answer["status"]), base64.b64decode(answer.get("body") or "")
        except (MemoryError, RecursionError):
            raise
        except Exception as err:
            raise urllib.error.URLError(getattr(err, "message", None) or str(err)) from None
        reason = answer.get("status_text") or http.client.responses.get(status, "")
        lines = [f"HTTP/1.1 {status} {_clean(reason)}"]
        for name, value in answer.get("headers") or ():
            if name.lower() in ("transfer-encoding", "connection") or (
                    name.lower() == "content-length" and method.upper() != "HEAD"):
                continue
            lines.append(f"{_clean(name)}: {_clean(value)}")
        if method.upper() != "HEAD":
            lines.append(f"Content-Length: {len(content)}")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("iso-8859-1", "replace")
        response = self.response_class(_Recorded(head + content), self.debuglevel, method=method)
        response.begin()
        response.url = response._iii_url = answer.get("url") or url
        return response


class HTTPSConnection(HTTPConnection):
    """The https one: the host does TLS, so `context` is accepted and unused."""

    scheme = "https"
    default_port = http.client.HTTPS_PORT

    def __init__(self, host, port=None, *, context=None, **kwargs):
        super().__init__(host, port, **kwargs)


def _final_url(response):
    # urllib sets the requested URL; the host followed any redirects.
    response.url = getattr(response, "_iii_url", response.url)
    return response


class HTTPHandler(urllib.request.AbstractHTTPHandler):
    def http_open(self, req):
        return _final_url(self.do_open(HTTPConnection, req))

    http_request = urllib.request.AbstractHTTPHandler.do_request_


class HTTPSHandler(urllib.request.AbstractHTTPHandler):
    def __init__(self, debuglevel=None, context=None, check_hostname=None):
        super().__init__(debuglevel)

    def https_open(self, req):
        return _final_url(self.do_open(HTTPSConnection, req))

    https_request = urllib.request.AbstractHTTPHandler.do_request_


# urllib's default opener (build_opener) takes these names at each call.
http.client.HTTPConnection = HTTPConnection
http.client.HTTPSConnection = HTTPSConnection
urllib.request.HTTPHandler = HTTPHandler
urllib.request.HTTPSHandler = HTTPSHandler
urllib.request._opener = None
