//! The code-runtime seam (`CodeRuntime`) over the real python engine: resolve,
//! run, bindings, the failure taxonomy, abort and dispose.

use std::sync::Arc;
use std::time::{Duration, Instant};

use code_runner_core::{
    AbortSignal, BindingError, BindingNamespace, CodeRunRequest, CodeRunResult, CodeRuntime,
    CodeRuntimeOptions, ErrorCode, FailureKind, SandboxMode,
};
use serde_json::{Value, json};

use crate::engine;

fn seam(options: CodeRuntimeOptions) -> CodeRuntime {
    CodeRuntime::new(Arc::new(engine()), options)
}

fn request(program: &str) -> CodeRunRequest {
    CodeRunRequest {
        program: program.into(),
        ..CodeRunRequest::default()
    }
}

async fn run(runtime: &CodeRuntime, request: CodeRunRequest) -> CodeRunResult {
    let spec = runtime.resolve(request).expect("resolve");
    runtime.run(spec).await
}

fn kind(result: &CodeRunResult) -> Option<FailureKind> {
    result.error.as_ref().map(|e| e.kind)
}

/// A completed run carries its value and logs, in each channel's order, and no error.
#[tokio::test(flavor = "multi_thread")]
async fn value_and_logs_come_back() {
    let rt = seam(CodeRuntimeOptions::default());
    let result = run(
        &rt,
        request("print('one')\nprint('two')\nresult = {'n': [1, 2.5, None, 'é']}"),
    )
    .await;
    assert_eq!(result.error, None);
    assert_eq!(result.value, Some(json!({ "n": [1, 2.5, null, "é"] })));
    assert_eq!(result.logs, vec!["one", "two"]);
    let sandbox = result.sandbox.expect("python reports sandbox facts");
    assert_eq!(sandbox.mode, SandboxMode::WorkspaceWrite);
    assert!(!sandbox.denied);
}

/// A raised exception is kind `exception` with the traceback as message; no value.
#[tokio::test(flavor = "multi_thread")]
async fn exception_is_its_own_kind() {
    let rt = seam(CodeRuntimeOptions::default());
    let result = run(&rt, request("result = 1\nraise ValueError('bad input')")).await;
    assert_eq!(kind(&result), Some(FailureKind::Exception));
    assert!(
        result
            .error
            .unwrap()
            .message
            .contains("ValueError: bad input")
    );
    assert_eq!(result.value, None);
}

/// Budget expiry is `timeout`, and the message names the budget.
#[tokio::test(flavor = "multi_thread")]
async fn timeout_names_the_budget() {
    let rt = seam(CodeRuntimeOptions::default());
    let mut req = request("while True: pass");
    req.timeout_ms = Some(200);
    let result = run(&rt, req).await;
    assert_eq!(kind(&result), Some(FailureKind::Timeout));
    assert!(result.error.unwrap().message.contains("200 ms"));
}

/// The abort signal stops a program hard, mid-loop, and is reported as `abort`, not `timeout`.
#[tokio::test(flavor = "multi_thread")]
async fn abort_stops_a_busy_loop() {
    let rt = seam(CodeRuntimeOptions::default());
    let signal = AbortSignal::new();
    let mut req = request("while True: pass");
    req.signal = Some(signal.clone());
    req.timeout_ms = Some(20_000);
    let spec = rt.resolve(req).unwrap();
    let started = Instant::now();
    let trigger = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        signal.abort();
    });
    let result = rt.run(spec).await;
    trigger.await.unwrap();
    assert_eq!(kind(&result), Some(FailureKind::Abort));
    assert!(started.elapsed() < Duration::from_secs(10));
}

/// Memory exhaustion is a substrate death (`worker-exit`), not an exception.
#[tokio::test(flavor = "multi_thread")]
async fn memory_exhaustion_is_worker_exit() {
    let rt = seam(CodeRuntimeOptions {
        memory_mb: 64,
        ..CodeRuntimeOptions::default()
    });
    let result = run(&rt, request("x = bytearray(200 << 20)")).await;
    assert_eq!(kind(&result), Some(FailureKind::WorkerExit));
    assert!(result.error.unwrap().message.contains("64 MiB"));
}

/// Completions JSON cannot carry losslessly fail the run instead of being rewritten.
#[tokio::test(flavor = "multi_thread")]
async fn lossy_completions_are_invalid_output() {
    let rt = seam(CodeRuntimeOptions::default());
    for program in [
        "result = float('nan')",
        "result = [1, float('inf')]",
        "result = {1, 2}",
        "result = []\nresult.append(result)",
        "result = {1: 'int key'}",
        "result = b'bytes'",
    ] {
        let result = run(&rt, request(program)).await;
        assert_eq!(kind(&result), Some(FailureKind::InvalidOutput), "{program}");
        assert_eq!(result.value, None);
    }
}

/// Big integers cross the boundary exactly.
#[tokio::test(flavor = "multi_thread")]
async fn big_integers_are_lossless() {
    let rt = seam(CodeRuntimeOptions::default());
    let result = run(&rt, request("result = [2**70, -2**64]")).await;
    let text = serde_json::to_string(&result.value.unwrap()).unwrap();
    assert_eq!(text, "[1180591620717411303424,-18446744073709551616]");
}

/// Over the output cap, logs or value fail as `output-limit`: never truncated silently.
#[tokio::test(flavor = "multi_thread")]
async fn output_over_the_cap_is_an_explicit_failure() {
    let rt = seam(CodeRuntimeOptions {
        max_output_bytes: Some(1000),
        ..CodeRuntimeOptions::default()
    });
    for program in [
        "print('x' * 5000)",
        "result = 'y' * 5000",
        "for i in range(400): print(i)",
    ] {
        let result = run(&rt, request(program)).await;
        assert_eq!(kind(&result), Some(FailureKind::OutputLimit), "{program}");
        assert!(result.logs.is_empty() && result.value.is_none());
    }
    assert_eq!(
        run(&rt, request("print('small')\nresult = 1")).await.error,
        None
    );
}

fn tools() -> BindingNamespace {
    BindingNamespace::new("tools")
        .function("add", |args: Value, _| async move {
            let a = args["a"].as_i64().unwrap_or(0);
            let b = args["b"].as_i64().unwrap_or(0);
            Ok(json!(a + b))
        })
        .function("__proto__", |_, _| async { Ok(json!("own property")) })
        .function("constructor", |_, _| async { Ok(json!("also own")) })
        .function("fail", |_, _| async {
            Err(BindingError {
                code: Some("tools::denied".into()),
                message: "no access".into(),
            })
        })
        .error_class("ToolError", "tool")
}

/// Bindings are globals of callables; arbitrary names are own members.
#[tokio::test(flavor = "multi_thread")]
async fn bindings_are_callable_globals_with_own_members() {
    let rt = seam(CodeRuntimeOptions::default());
    let mut req = request(
        "result = [tools.add({'a': 2, 'b': 3}), tools['__proto__'](), tools.constructor(), tools['add'](a=1, b=1)]",
    );
    req.bindings = vec![tools()];
    let result = run(&rt, req).await;
    assert_eq!(result.error, None, "{:?}", result.logs);
    assert_eq!(
        result.value,
        Some(json!([5, "own property", "also own", 2]))
    );
}

/// A rejected call raises an instance of the declared class carrying the member name.
#[tokio::test(flavor = "multi_thread")]
async fn rejections_are_typed() {
    let rt = seam(CodeRuntimeOptions::default());
    let mut req = request(
        "try:\n    tools.fail({})\nexcept ToolError as e:\n    result = [type(e).__name__, e.tool, e.code, e.message, isinstance(e, Exception)]",
    );
    req.bindings = vec![tools()];
    let result = run(&rt, req).await;
    assert_eq!(
        result.value,
        Some(json!([
            "ToolError",
            "fail",
            "tools::denied",
            "no access",
            true
        ]))
    );
}

/// A non-JSON argument is refused before it leaves the program, with a descriptive error.
#[tokio::test(flavor = "multi_thread")]
async fn non_json_arguments_are_refused() {
    let rt = seam(CodeRuntimeOptions::default());
    let mut req = request(
        "try:\n    tools.add({'a': float('nan')})\nexcept TypeError as e:\n    result = str(e)",
    );
    req.bindings = vec![tools()];
    let result = run(&rt, req).await;
    let message = result.value.unwrap();
    assert!(
        message.as_str().unwrap().contains("no JSON form"),
        "{message}"
    );
}

/// Resolve validates before anything runs: names, policy, directory, budget.
#[tokio::test(flavor = "multi_thread")]
async fn resolve_rejects_what_cannot_be_honoured() {
    let rt = seam(CodeRuntimeOptions {
        max_timeout_ms: 1000,
        ..CodeRuntimeOptions::default()
    });
    let mut bad_global = request("");
    bad_global.bindings = vec![BindingNamespace::new("$tools")];
    assert_eq!(
        rt.resolve(bad_global).unwrap_err().code,
        ErrorCode::InvalidRequest
    );
    let mut keyword = request("");
    keyword.bindings = vec![BindingNamespace::new("function")];
    assert!(
        rt.resolve(keyword).is_err(),
        "a JavaScript reserved word is refused for python too"
    );
    let mut full = request("");
    full.sandbox_policy = Some(SandboxMode::FullAccess);
    assert!(
        rt.resolve(full)
            .unwrap_err()
            .message
            .contains("full-access")
    );
    let mut cwd = request("");
    cwd.cwd = Some("/tmp".into());
    assert!(rt.resolve(cwd).is_err());
    let mut long = request("");
    long.timeout_ms = Some(60_000);
    assert_eq!(rt.resolve(long).unwrap().timeout_ms, 1000);
    let spec = rt.resolve(request("")).unwrap();
    assert_eq!(spec.cwd, "/work");
}

/// A read-only sandbox refuses writes and says the failure was a denial.
#[tokio::test(flavor = "multi_thread")]
async fn read_only_sandbox_denies_writes() {
    let rt = seam(CodeRuntimeOptions::default());
    let mut req = request("open('/work/x', 'w').write('no')");
    req.sandbox_policy = Some(SandboxMode::ReadOnly);
    let result = run(&rt, req).await;
    assert_eq!(kind(&result), Some(FailureKind::Exception));
    let sandbox = result.sandbox.unwrap();
    assert_eq!(sandbox.mode, SandboxMode::ReadOnly);
    assert!(sandbox.denied, "{:?}", result.error);
}

/// Denials are what the host observed the sandbox refuse, not words in the
/// program's output: a caught escape still counts, a message that merely says
/// "Permission denied" does not.
#[tokio::test(flavor = "multi_thread")]
async fn denials_are_observed_not_parsed() {
    let rt = seam(CodeRuntimeOptions::default());
    let escaped = run(
        &rt,
        request("try:\n    open('/work/../etc/passwd')\nexcept OSError:\n    pass\nraise RuntimeError('unrelated')"),
    )
    .await;
    assert_eq!(kind(&escaped), Some(FailureKind::Exception));
    assert!(escaped.sandbox.unwrap().denied);
    let words = run(&rt, request("raise RuntimeError('Permission denied')")).await;
    assert!(!words.sandbox.unwrap().denied);
}

/// Runs never see each other's files or globals.
#[tokio::test(flavor = "multi_thread")]
async fn runs_are_isolated() {
    let rt = seam(CodeRuntimeOptions::default());
    let first = run(
        &rt,
        request("secret = 1\nopen('/work/f', 'w').write('x')\nresult = 'ok'"),
    )
    .await;
    assert_eq!(first.value, Some(json!("ok")));
    let second = run(
        &rt,
        request("import os\nresult = [os.listdir('/work'), 'secret' in globals()]"),
    )
    .await;
    assert_eq!(second.value, Some(json!([[], false])));
}

/// A run that dirties its memory in more scattered runs of pages than the pooled
/// slot's reset keeps (16 MiB; wasmtime's scan resumes past its region buffer)
/// and rewrites interpreter state leaves nothing for the runs after it: each
/// fresh run sees the state a fresh run before it saw.
#[tokio::test(flavor = "multi_thread")]
async fn a_scattered_dirty_heap_is_reset_before_the_next_run() {
    let rt = seam(CodeRuntimeOptions::default());
    let probe = "import sys, json, builtins\n\
                 result = [json.dumps.__name__, 'planted' in dir(builtins), \
                 getattr(sys, 'planted', None), len(sys.modules), sum(map(len, sys.modules))]";
    let before = run(&rt, request(probe)).await;
    assert!(before.error.is_none(), "{:?}", before.error);
    let dirty = run(
        &rt,
        request(
            "import sys, json, builtins\n\
             blocks = [bytearray(4096) for _ in range(12_000)]\n\
             for i, b in enumerate(blocks):\n    b[0] = 255; b[-1] = i % 251\n\
             del blocks[::2]\n\
             json.dumps = lambda *a, **k: 'planted'\n\
             builtins.planted = True\nsys.planted = 'x' * 100_000\n\
             import csv, decimal, fractions, statistics\n\
             result = len(blocks)",
        ),
    )
    .await;
    assert_eq!(dirty.value, Some(json!(6_000)), "{:?}", dirty.error);
    for _ in 0..4 {
        let after = run(&rt, request(probe)).await;
        assert_eq!(after.value, before.value);
    }
}

/// Dispose aborts runs in flight, waits for them, and refuses later runs.
#[tokio::test(flavor = "multi_thread")]
async fn dispose_aborts_and_awaits_runs_in_flight() {
    let rt = Arc::new(seam(CodeRuntimeOptions::default()));
    let mut req = request("import time\ntime.sleep(30)");
    req.timeout_ms = Some(25_000);
    let spec = rt.resolve(req).unwrap();
    let running = tokio::spawn({
        let rt = rt.clone();
        async move { rt.run(spec).await }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let started = Instant::now();
    rt.dispose().await;
    assert!(started.elapsed() < Duration::from_secs(10));
    let result = running.await.unwrap();
    assert_eq!(kind(&result), Some(FailureKind::Abort));
    let later = run(&rt, request("result = 1")).await;
    assert_eq!(kind(&later), Some(FailureKind::SandboxUnavailable));
}
