//! The code-runtime seam over the python engine: a binding, a typed rejection
//! and a timeout, asserted.
//!
//! Run: `cargo run --release -p code-runner-python --example python_seam`

#![allow(clippy::print_stdout, reason = "an example reports to its user")]

use std::sync::Arc;

use code_runner_core::{
    BindingError, BindingNamespace, CodeRunRequest, CodeRuntime, CodeRuntimeOptions, FailureKind,
};
use serde_json::json;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let engine = code_runner_python::PythonEngine::from_default_location()?;
    let runtime = CodeRuntime::new(Arc::new(engine), CodeRuntimeOptions::default());
    let tools = BindingNamespace::new("tools")
        .function("add", |args, _call| async move {
            Ok(json!(args["a"].as_i64().unwrap_or(0) + 1))
        })
        .function("deny", |_, _| async {
            Err(BindingError::message("not allowed"))
        })
        .error_class("ToolError", "tool");

    let spec = runtime.resolve(CodeRunRequest {
        program: "try:\n    tools.deny()\nexcept ToolError as e:\n    print(e.tool)\nresult = tools.add({'a': 41})"
            .into(),
        bindings: vec![tools],
        ..Default::default()
    })?;
    let result = runtime.run(spec).await;
    assert_eq!(result.value, Some(json!(42)));
    assert_eq!(result.logs, vec!["deny"]);

    let spec = runtime.resolve(CodeRunRequest {
        program: "while True: pass".into(),
        timeout_ms: Some(100),
        ..Default::default()
    })?;
    let result = runtime.run(spec).await;
    assert_eq!(result.error.map(|e| e.kind), Some(FailureKind::Timeout));
    runtime.dispose().await;
    println!("seam example: ok");
    Ok(())
}
