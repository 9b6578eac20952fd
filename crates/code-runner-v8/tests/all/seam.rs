//! The code-runtime seam (`CodeRuntime`) over the node engine: the same
//! failure taxonomy, lossless policy and typed rejections as python.

use std::sync::Arc;

use code_runner_core::{
    AbortSignal, BindingError, BindingNamespace, CodeRunRequest, CodeRunResult, CodeRuntime,
    CodeRuntimeOptions, FailureKind,
};
use serde_json::json;

use crate::engine;

fn seam() -> CodeRuntime {
    CodeRuntime::new(Arc::new(engine()), CodeRuntimeOptions::default())
}

async fn run(rt: &CodeRuntime, program: &str) -> CodeRunResult {
    let spec = rt
        .resolve(CodeRunRequest {
            program: program.into(),
            ..CodeRunRequest::default()
        })
        .unwrap();
    rt.run(spec).await
}

fn kind(result: &CodeRunResult) -> Option<FailureKind> {
    result.error.as_ref().map(|e| e.kind)
}

/// A completed run carries its value and its logs; a throw is `exception`.
#[tokio::test(flavor = "multi_thread")]
async fn value_logs_and_exceptions() {
    let rt = seam();
    let result = run(
        &rt,
        "console.log('one'); console.log('two'); return { n: [1, 2.5, null, 'é'] }",
    )
    .await;
    assert_eq!(result.error, None);
    assert_eq!(result.value, Some(json!({"n": [1, 2.5, null, "é"]})));
    assert_eq!(result.logs, vec!["one", "two"]);
    let result = run(&rt, "throw new TypeError('bad input')").await;
    assert_eq!(kind(&result), Some(FailureKind::Exception));
    assert!(
        result
            .error
            .unwrap()
            .message
            .starts_with("TypeError: bad input")
    );
}

/// Completions JSON cannot carry losslessly fail the run as `invalid-output`.
#[tokio::test(flavor = "multi_thread")]
async fn non_json_completions_are_invalid_output() {
    let rt = seam();
    for program in [
        "return () => 1",
        "return 1n",
        "return Symbol()",
        "const a = {}; a.a = a; return a",
        "return [NaN]",
    ] {
        let result = run(&rt, program).await;
        assert_eq!(
            kind(&result),
            Some(FailureKind::InvalidOutput),
            "{program}: {result:?}"
        );
    }
    assert_eq!(run(&rt, "return").await.value, None);
}

/// Budget expiry is `timeout`; the abort signal is `abort`, not a timeout.
#[tokio::test(flavor = "multi_thread")]
async fn timeout_and_abort_are_their_own_kinds() {
    let rt = seam();
    let spec = rt
        .resolve(CodeRunRequest {
            program: "while (true) {}".into(),
            timeout_ms: Some(200),
            ..CodeRunRequest::default()
        })
        .unwrap();
    let result = rt.run(spec).await;
    assert_eq!(kind(&result), Some(FailureKind::Timeout));
    assert!(result.error.unwrap().message.contains("200 ms"));
    let signal = AbortSignal::new();
    let spec = rt
        .resolve(CodeRunRequest {
            program: "await new Promise(() => {})".into(),
            signal: Some(signal.clone()),
            ..CodeRunRequest::default()
        })
        .unwrap();
    let fire = tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        signal.abort();
    });
    let result = rt.run(spec).await;
    fire.await.unwrap();
    assert_eq!(kind(&result), Some(FailureKind::Abort));
}

/// The seam's typed rejection works the same for JavaScript as for python.
#[tokio::test(flavor = "multi_thread")]
async fn typed_rejections_through_the_seam() {
    let rt = seam();
    let tools = BindingNamespace::new("tools")
        .function("add", |args, _| async move {
            Ok(json!(args["a"].as_i64().unwrap_or(0) + 1))
        })
        .function("deny", |_, _| async {
            Err(BindingError::message("not allowed"))
        })
        .error_class("ToolError", "tool");
    let spec = rt
        .resolve(CodeRunRequest {
            program: "try { await tools.deny() } catch (e) { console.log(e.tool, e instanceof ToolError) } return tools.add({ a: 41 })".into(),
            bindings: vec![tools],
            ..CodeRunRequest::default()
        })
        .unwrap();
    let result = rt.run(spec).await;
    assert_eq!(result.value, Some(json!(42)));
    assert_eq!(result.logs, vec!["deny true"]);
    rt.dispose().await;
}
