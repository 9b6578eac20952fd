//! Guest code on the bus inside the fault matrix's frame: a nested run
//! answers its result across languages, and a bus error reaches the guest
//! with its code.

use serde_json::json;

use super::{Case, Code, Expect, ensure};

fault_matrix! {
    /// Guest python reaches the bus: a nested `code-runner::run` answers its result.
    trigger_of_code_runner_run_returns_its_result => Case {
        python: Code::Src(include_str!("../../fixtures/trigger_run.py")),
        node: Some(Code::Src(include_str!("../../fixtures/trigger_run_python.js"))),
        timeout_ms: Some(30_000),
        expect: Expect::Response(|body| ensure(body["result"] == 42, "result 42")),
        ..Case::DEFAULT
    };

    /// Guest node reaches python through the bus, and the other way round.
    python_triggers_node_and_gets_its_result => Case {
        python: Code::Src(include_str!("../../fixtures/trigger_run_node.py")),
        node: Some(Code::Src("return (await iii.trigger({ function_id: 'code-runner::run', payload: { lang: 'node', code: 'return 6 * 7' } })).result")),
        timeout_ms: Some(30_000),
        expect: Expect::Response(|body| ensure(body["result"] == 42, "result 42")),
        ..Case::DEFAULT
    };

    /// A bus error reaches the guest as an exception carrying the bus `.code`.
    trigger_bus_error_raises_with_its_code => Case {
        python: Code::Src(include_str!("../../fixtures/trigger_bus_error.py")),
        node: Some(Code::Src(include_str!("../../fixtures/trigger_bus_error.js"))),
        expect: Expect::Response(|body| {
            ensure(
                body["result"] == json!({"raised": true, "code": "function_not_found"}),
                "an exception with .code function_not_found",
            )
        }),
        ..Case::DEFAULT
    };
}
