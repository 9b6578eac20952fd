# code-runner's guest wrapper: runs inside python.wasm, one turn at a time.
#
# The host writes frames to our fd 0 ("<length>\n<json>"); we answer with one
# fd_write on fd 0 per frame, prefixed by the per-boot token the host sent
# first. The host treats fd 0 writes without the token as noise and answers a
# guest's own read of fd 0 with end-of-file, so guest code that reads stdin or
# writes fd 0/1 by hand cannot break the channel. fd 1 and fd 2 are the guest's
# stdout and stderr, captured (and capped) by the host as they are written.
#
# Boot time is most of a one-shot run, so the wrapper imports only C modules:
# JSON goes through `_json` directly (the `json` package pulls in `re` and
# compiles regexes at import), and `traceback` is imported on the first
# exception. The interpreter runs with -S, so `exit`/`quit` are defined here.
import _json
import builtins as _builtins
import io as _io
import math as _math
import os as _os
import sys as _sys


class _Decoder:
    """The attributes `_json.make_scanner` reads, with json.loads' defaults."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    memo = None

    @staticmethod
    def parse_constant(name):
        raise ValueError(f"non-JSON constant {name}")


_scan = _json.make_scanner(_Decoder())
_encode = _json.make_encoder(None, None, _json.encode_basestring, None, ":", ",", False, False, False)


def _loads(text):
    value, end = _scan(text, 0)
    if text[end:].strip():
        raise ValueError("trailing data after JSON value")
    return value


def _dumps(value):
    return "".join(_encode(value, 0))


class _Quitter:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"Use {self.name}() to exit"

    def __call__(self, code=None):
        raise SystemExit(code)


_builtins.exit = _Quitter("exit")
_builtins.quit = _Quitter("quit")

_MAX_FRAME = 64 * 1024 * 1024

# Snapshots of the builtins `_main` binds as locals, taken before any program runs.
(_len, _min, _int, _str, _float, _bool, _list, _tuple, _dict, _set, _type, _id, _enumerate,
 _memoryview, _object, _sorted, _setattr, _compile, _exec, _super, _isinstance,
 _BaseException, _Exception, _SystemExit, _TypeError, _ValueError, _KeyError, _AttributeError,
 _RecursionError, _UnicodeEncodeError, _EOFError) = (
    len, min, int, str, float, bool, list, tuple, dict, set, type, id, enumerate, memoryview,
    object, sorted, setattr, compile, exec, super, isinstance, BaseException, Exception,
    SystemExit, TypeError, ValueError, KeyError, AttributeError, RecursionError,
    UnicodeEncodeError, EOFError)


def _main():
    # Everything the channel needs is bound here, once: a guest that rebinds
    # os.write or this module's globals cannot reach the wrapper's copies.
    read_fd = 0
    os_read, os_write, loads, dumps = _os.read, _os.write, _loads, _dumps
    sys, builtins, isfinite = _sys, _builtins, _math.isfinite
    # The builtins the wrapper uses, bound as locals for the same reason: a
    # program that rebinds `builtins.len` breaks itself, not the channel.
    (len, min, int, str, float, bool, list, tuple, dict, set, type, id, enumerate, memoryview,
     object, sorted, setattr, compile, exec, super, isinstance, BaseException, Exception,
     SystemExit, TypeError, ValueError, KeyError, AttributeError, RecursionError,
     UnicodeEncodeError, EOFError) = (
        _len, _min, _int, _str, _float, _bool, _list, _tuple, _dict, _set, _type, _id, _enumerate,
        _memoryview, _object, _sorted, _setattr, _compile, _exec, _super, _isinstance,
        _BaseException, _Exception, _SystemExit, _TypeError, _ValueError, _KeyError,
        _AttributeError, _RecursionError, _UnicodeEncodeError, _EOFError)

    def read_exact(n):
        chunks = []
        while n > 0:
            chunk = os_read(read_fd, min(n, 1 << 20))
            if not chunk:
                raise EOFError("host channel closed")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def read_frame():
        header = b""
        while not header.endswith(b"\n"):
            byte = os_read(read_fd, 1)
            if not byte:
                raise EOFError("host channel closed")
            header += byte
        return loads(read_exact(int(header)).decode("utf-8"))

    boot = read_frame()
    token = boot["token"].encode("ascii")

    def send(payload):
        frame = token + payload
        view = memoryview(frame)
        while view:
            written = os_write(0, view)
            view = view[written:]

    class NotJson(Exception):
        pass

    def check(value, path, depth, active):
        kind = type(value)
        if value is None or kind is bool or kind is int:
            return
        if kind is float:
            if not isfinite(value):
                raise NotJson(f"{value!r} at {path} has no JSON form")
            return
        if kind is str:
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise NotJson(f"the string at {path} holds a lone surrogate") from None
            return
        if depth > 200:
            raise NotJson(f"{path} is nested more than 200 levels deep")
        if kind is list or kind is tuple or kind is dict:
            if id(value) in active:
                raise NotJson(f"{path} is a cycle")
            active.add(id(value))
            if kind is dict:
                for key, item in value.items():
                    if type(key) is not str:
                        raise NotJson(f"{path} has a non-string key {key!r}")
                    check(key, path, depth, active)
                    check(item, f"{path}[{key!r}]", depth + 1, active)
            else:
                for index, item in enumerate(value):
                    check(item, f"{path}[{index}]", depth + 1, active)
            active.discard(id(value))
            return
        raise NotJson(f"{path} is a {kind.__name__}, which JSON cannot represent")

    def to_json(value, path):
        check(value, path, 0, set())
        return dumps(value).encode("utf-8")

    def shape(value):
        if isinstance(value, (list, tuple)):
            return ["array", len(value)]
        if isinstance(value, dict):
            return ["object", len(value)]
        if isinstance(value, str):
            return ["string", len(value)]
        return ["scalar", 0]

    class BindingError(Exception):
        def __init__(self, code, message):
            super().__init__(f"{code}: {message}" if code else message)
            self.code = code
            self.message = message

    def make_member(ns_global, member, error_class, member_property):
        def call(*args, **kwargs):
            if args and kwargs or len(args) > 1:
                raise TypeError(f"{ns_global}.{member} takes one argument (a JSON value) or keywords")
            arg = args[0] if args else (kwargs if kwargs else None)
            try:
                body = to_json(arg, "argument")
            except NotJson as err:
                raise TypeError(f"{ns_global}.{member}: {err}") from None
            head = dumps({"t": "call", "ns": ns_global, "fn": member})
            send(head.encode("utf-8")[:-1] + b',"args":' + body + b"}")
            reply = read_frame()
            if "ok" in reply:
                return reply["ok"]
            err = reply.get("err") or {}
            code, message = err.get("code"), err.get("message", "binding call failed")
            if error_class is None:
                raise BindingError(code, message)
            exc = error_class(f"{code}: {message}" if code else message)
            exc.code = code
            exc.message = message
            setattr(exc, member_property, member)
            raise exc
        call.__name__ = call.__qualname__ = member if member.isidentifier() else "binding"
        return call

    class Namespace:
        __slots__ = ("_members", "_values", "_global")

        def __init__(self, ns_global, members, values):
            object.__setattr__(self, "_global", ns_global)
            object.__setattr__(self, "_members", members)
            object.__setattr__(self, "_values", values)

        def __getattr__(self, name):
            values = object.__getattribute__(self, "_values")
            if name in values:
                return values[name]
            members = object.__getattribute__(self, "_members")
            if name in members:
                return members[name]
            raise AttributeError(f"{object.__getattribute__(self, '_global')} has no member {name!r}")

        def __getitem__(self, name):
            members = object.__getattribute__(self, "_members")
            if name in members:
                return members[name]
            values = object.__getattribute__(self, "_values")
            if name in values:
                return values[name]
            raise KeyError(name)

        def __contains__(self, name):
            return name in object.__getattribute__(self, "_members") or name in object.__getattribute__(self, "_values")

        def __dir__(self):
            return sorted(set(object.__getattribute__(self, "_members")) | set(object.__getattribute__(self, "_values")))

        def __setattr__(self, name, value):
            raise AttributeError("binding namespaces are read-only")

        def __repr__(self):
            return f"<bindings {object.__getattribute__(self, '_global')}: {', '.join(self.__dir__())}>"

    def install(env, namespaces):
        for spec in namespaces:
            ns_global = spec["global"]
            error_class = None
            member_property = None
            declared = spec.get("error_class")
            if declared:
                error_class = type(declared["name"], (Exception,), {})
                member_property = declared["member_name_property"]
                env[declared["name"]] = error_class
            members = {name: make_member(ns_global, name, error_class, member_property)
                       for name in spec["functions"]}
            env[ns_global] = Namespace(ns_global, members, dict(spec.get("values") or {}))

    def report_exception(exc):
        tb = exc.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != "<run>":
            tb = tb.tb_next
        try:
            import traceback

            text = "".join(traceback.format_exception(type(exc), exc, tb))
        except BaseException:
            # Under memory pressure the formatter itself can fail; the
            # exception's type and message still reach the caller.
            try:
                text = f"{type(exc).__name__}: {exc}\n"
            except BaseException:
                text = "MemoryError\n"
        try:
            sys.stderr.flush()
        except Exception:
            pass
        data = text.encode("utf-8", "replace")
        while data:
            data = data[os_write(2, data):]
        return text

    # The program's globals are the dict of a fresh module installed as
    # __main__, so `import __main__` and pickle find the program's names.
    main_module = type(sys)("__main__")
    env = main_module.__dict__
    env["__builtins__"] = builtins
    sys.modules["__main__"] = main_module
    sys.argv = [""]
    try:
        _os.chdir("/work")
        _sys.path.insert(0, "/work")
    except OSError:
        pass
    _sys.stdin = _io.StringIO("")
    del boot

    # Handlers of published functions, by key (Task::Define / Task::Invoke).
    handlers = {}

    class HandlerMissing(Exception):
        pass

    def define(key, source):
        env.pop("handler", None)
        exec(compile(source, "<run>", "exec"), env)
        handler = env.get("handler")
        if not callable(handler):
            raise HandlerMissing("the source defines no callable handler(payload): "
                                 "write `def handler(payload): ...` at module level")
        handlers[key] = handler

    def invoke(key, payload):
        handler = handlers.get(key)
        if handler is None:
            raise HandlerMissing(f"no handler is kept under {key!r}")
        env["result"] = handler(payload)

    while True:
        turn = read_frame()
        install(env, turn.get("bindings") or [])
        env.pop("result", None)
        exit_code = 0
        exception = None
        try:
            if "invoke" in turn:
                invoke(turn["invoke"], turn.get("payload"))
            elif "define" in turn:
                define(turn["define"], turn["code"])
            else:
                exec(compile(turn["code"], "<run>", "exec"), env)
        except SystemExit as exc:
            code = exc.code
            if code is None:
                exit_code = 0
            elif type(code) is int:
                exit_code = code
            else:
                try:
                    sys.stderr.write(f"{code}\n")
                except Exception:
                    os_write(2, f"{code}\n".encode("utf-8", "replace"))
                exit_code = 1
        except BaseException as exc:  # noqa: B036 - a guest's KeyboardInterrupt is its own failure
            exit_code = 1
            exception = report_exception(exc)
        del turn
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        head = {"t": "done", "exit_code": exit_code}
        if exception is not None:
            head["exception"] = exception
        value = env.get("result") if exit_code == 0 else None
        body = b""
        if value is not None:
            try:
                encoded = to_json(value, "result")
                if len(encoded) > _MAX_FRAME:
                    head["oversize"] = {"bytes": len(encoded), "shape": shape(value)}
                else:
                    body = b',"result":' + encoded
            except NotJson as err:
                head["not_json"] = str(err)
            except RecursionError:
                head["not_json"] = "the result is nested too deeply"
            except ValueError as err:
                head["not_json"] = f"the result cannot be written as JSON: {err}"
        send(dumps(head).encode("utf-8", "replace")[:-1] + body + b"}")


_main()
