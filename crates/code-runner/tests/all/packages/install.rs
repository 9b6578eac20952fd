//! `code-runner::install`: packages an agent asks for, added to one kept
//! runtime, each named by the operator's `install_allow`; host authority,
//! never guest code's. Node's come from [`super::registry`] (a real registry
//! on loopback, the real npm), python's from the real PyPI.

use serde_json::{Value, json};

use super::node::node_settled;
use super::registry::Registry;
use crate::helpers::Server;

const INSTALL: &str = "code-runner::install";

/// A node runtime gains a package over HTTP and another over MCP: its next
/// runs import them (subpath exports and dependencies too), a one-shot and
/// another kept runtime do not; a package install_allow does not name, a
/// guest's own call and a missing runtime are refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_runtime_gains_packages_the_operator_allows() {
    let registry = Registry::start().await;
    let yaml = format!(
        "npm_registry: \"{}\"\ninstall_allow: [\"cr-fixture-greet\", \"cr-fixture-cjs\"]\n",
        registry.url
    );
    let server = Server::with_config(&yaml).await;
    node_settled(&server).await;
    let id = server
        .keep_in("node", "globalThis.kept = 1; return 1")
        .await;
    let other = server.keep_in("typescript", "return 1").await;
    let answer = server
        .call(
            INSTALL,
            json!({"runtime_id": id, "requirements": ["cr-fixture-greet@1"]}),
        )
        .await;
    assert_eq!(
        answer.ok()["installed"],
        json!(["cr-fixture-greet@1.0.0"]),
        "{}",
        answer.body
    );
    let program = "import { greet } from 'cr-fixture-greet';\nimport { shout } from 'cr-fixture-greet/loud';\nreturn [greet('x'), shout('y'), kept]";
    let answer = server.run_on(&id, program).await;
    assert_eq!(
        answer.ok()["result"],
        json!(["hello x", "HELLO Y!", 1]),
        "{}",
        answer.body
    );
    for answer in [
        server.run_in("node", program).await,
        server.run_on(&other, program).await,
    ] {
        let stderr = answer.ok()["stderr"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(
            stderr.contains("cannot import \"cr-fixture-greet\""),
            "{stderr}"
        );
    }
    let mut session = crate::mcp_tools::client::Session::open(&server.url).await;
    let tools = serde_json::to_string(&session.tools().await).unwrap();
    assert!(
        tools.contains("The operator allows: cr-fixture-greet, cr-fixture-cjs"),
        "{tools}"
    );
    let called = session
        .call(
            "install",
            json!({"runtime_id": other, "requirements": ["cr-fixture-cjs@1"]}),
        )
        .await;
    assert_eq!(called["isError"], Value::Bool(false), "{called}");
    session.close().await;
    let answer = server
        .run_on(
            &other,
            "import { twice } from 'cr-fixture-cjs';\nreturn twice(21)",
        )
        .await;
    assert_eq!(answer.ok()["result"], 42, "{}", answer.body);

    let answer = server
        .call(
            INSTALL,
            json!({"runtime_id": id, "requirements": ["cr-fixture-words@1"]}),
        )
        .await;
    answer.assert_error(
        "code-runner::invalid_request",
        "install_allow does not name cr-fixture-words",
    );
    let answer = server
        .call(
            INSTALL,
            json!({"runtime_id": "rt_nope", "requirements": ["cr-fixture-cjs@1"]}),
        )
        .await;
    assert!(answer.error_code().is_some(), "{}", answer.body);
    // Guest code cannot install, for itself or another runtime.
    let guest = format!(
        "try {{ await iii.trigger({{ function_id: '{INSTALL}', payload: {{ runtime_id: '{id}', requirements: ['cr-fixture-cjs@1'] }} }}); return 'installed'; }} catch (e) {{ return String(e.message); }}"
    );
    let answer = server.run_on(&id, &guest).await;
    let said = answer.ok()["result"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        said.contains("forbidden") || said.contains("host"),
        "{}",
        answer.body
    );
    let answer = server
        .run_on(
            &id,
            "import { twice } from 'cr-fixture-cjs';\nreturn twice(1)",
        )
        .await;
    assert!(
        answer.ok()["stderr"]
            .as_str()
            .unwrap_or_default()
            .contains("cannot import"),
        "{}",
        answer.body
    );
}

/// Off by default: a worker whose install_allow is empty refuses, saying so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn install_is_off_by_default() {
    let server = Server::start().await;
    let id = server.keep_in("node", "return 1").await;
    let answer = server
        .call(
            INSTALL,
            json!({"runtime_id": id, "requirements": ["zod@3"]}),
        )
        .await;
    answer.assert_error("code-runner::invalid_request", "install is off");
}

/// A python runtime gains a pure package from PyPI: its next run imports
/// it from /work/.packages; a one-shot does not see it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_runtime_gains_a_pure_package() {
    let server = Server::with_config("install_allow: [\"roman\"]\n").await;
    let id = server.keep("x = 41").await;
    let answer = server
        .call(
            INSTALL,
            json!({"runtime_id": id, "requirements": ["roman==4.2"]}),
        )
        .await;
    assert_eq!(
        answer.ok()["installed"],
        json!(["roman==4.2"]),
        "{}",
        answer.body
    );
    let answer = server
        .run_on(
            &id,
            "import roman\nresult = [roman.toRoman(x + 1), roman.__file__]",
        )
        .await;
    assert_eq!(
        answer.ok()["result"],
        json!(["XLII", "/work/.packages/roman.py"]),
        "{}",
        answer.body
    );
    let answer = server.run("import roman").await;
    assert_eq!(answer.ok()["exit_code"], 1, "{}", answer.body);
    let answer = server
        .call(
            INSTALL,
            json!({"runtime_id": id, "requirements": ["humanize==4.9.0"]}),
        )
        .await;
    answer.assert_error(
        "code-runner::invalid_request",
        "install_allow does not name humanize",
    );
}

/// With `isolation: process` the sandbox process reads the worker's install
/// and adds it to the runtime it holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandboxed_node_runtime_gains_packages() {
    let registry = Registry::start().await;
    let yaml = format!(
        "isolation: process\nnpm_registry: \"{}\"\ninstall_allow: [\"*\"]\n",
        registry.url
    );
    let server = Server::process(&yaml).await;
    node_settled(&server).await;
    let id = server.keep_in("node", "return 1").await;
    let answer = server
        .call(
            INSTALL,
            json!({"runtime_id": id, "requirements": ["cr-fixture-greet@1", "cr-fixture-cjs@1"]}),
        )
        .await;
    assert_eq!(
        answer.ok()["installed"],
        json!(["cr-fixture-greet@1.0.0", "cr-fixture-cjs@1.0.0"]),
        "{}",
        answer.body
    );
    let answer = server
        .run_on(&id, "import { greet } from 'cr-fixture-greet';\nimport cjs from 'cr-fixture-cjs';\nreturn [greet('s'), cjs.twice(2)]")
        .await;
    assert_eq!(
        answer.ok()["result"],
        json!(["hello s", 4]),
        "{}",
        answer.body
    );
}
