//! Issue 17, item 1: `iii.namespace` is a string in every runtime, through
//! real HTTP, real V8 and real wasmtime. A plain runtime (a run, one-shot
//! or kept) gets a namespace of its own (`rt-` and 20 random characters,
//! drawn apart from its `runtime_id`), the same in every turn, reserved
//! for it while it lives and free when it ends; guest code written for the
//! seed (`iii.registerFunction(iii.namespace + "::ping", …)`) works in it.
//! Before, a plain runtime's `iii.namespace` was `null` / `None`. Both
//! languages throughout, but for node's `iii.registerFunction`.

use serde_json::{Value, json};

use crate::helpers::lang::{LANGS, returning};
use crate::helpers::{FUNCTION_NOT_FOUND, INVALID_REQUEST, REGISTER, RUN, Server, TEARDOWN};

/// A guest run's budget: room for a loaded machine.
const LONG_MS: u64 = 60_000;

/// `value` as a runtime's own namespace: a string that passes the naming
/// rule (an ASCII letter first; letters, digits, `_`, `-`; at most 64) in
/// the bare form a namespace runtime shows (no `::`), shaped `rt-…`.
#[track_caller]
fn own_namespace(value: &Value) -> String {
    let ns = value
        .as_str()
        .unwrap_or_else(|| panic!("iii.namespace is a string, not {value}"));
    assert!(ns.starts_with("rt-") && ns.len() == 23, "{ns}");
    assert!(ns.len() <= 64 && ns.starts_with(|c: char| c.is_ascii_alphabetic()));
    assert!(
        ns.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'),
        "{ns}"
    );
    ns.to_string()
}

/// Asserts `ns` shares no five characters in a row with the secret part
/// of the runtime id `id` (two independent draws share one with odds of
/// about 1 in 10^5; a namespace derived from the id would).
#[track_caller]
fn assert_not_derived(ns: &str, id: &str) {
    let secret = id.rsplit('_').next().unwrap_or(id).to_ascii_lowercase();
    let body = &ns[3..];
    for start in 0..=body.len() - 5 {
        let part = &body[start..start + 5];
        assert!(!secret.contains(part), "{ns} shares {part:?} with {id}");
    }
}

/// A run of `code` in `lang` (one-shot, or kept with `keep`) with a long budget.
async fn run(server: &Server, lang: &str, code: &str, keep: bool) -> Value {
    let answer = server
        .call(
            RUN,
            json!({"lang": lang, "code": code, "keep": keep, "timeout_ms": LONG_MS}),
        )
        .await;
    let body = answer.ok().clone();
    assert_eq!(body["exit_code"], 0, "{body}");
    body
}

/// A turn of `code` on the kept runtime `id`, with a long budget.
async fn turn(server: &Server, id: &str, code: &str) -> Value {
    let answer = server
        .call(
            RUN,
            json!({"runtime_id": id, "code": code, "timeout_ms": LONG_MS}),
        )
        .await;
    let body = answer.ok().clone();
    assert_eq!(body["exit_code"], 0, "{body}");
    body["result"].clone()
}

/// A host `register_function` of a python handler answering `word`.
async fn host_register(server: &Server, id: &str, word: &str) -> crate::helpers::Answer {
    host_register_in(server, "python", id, word).await
}

/// A host `register_function` of a `lang` handler answering `word`.
async fn host_register_in(
    server: &Server,
    lang: &str,
    id: &str,
    word: &str,
) -> crate::helpers::Answer {
    let source = match lang {
        "python" => format!("def handler(p):\n    return {word:?}\n"),
        _ => format!("export function handler() {{ return {word:?}; }}\n"),
    };
    server
        .call(
            REGISTER,
            json!({"function_id": id, "lang": lang, "source": source}),
        )
        .await
}

/// Python guest code registering `{iii.namespace or ns}::{name}` through
/// `iii.trigger` of `code-runner::register_function`; its result is `"ok"`
/// or `[code, message]`.
fn python_registers(ns: Option<&str>, name: &str, word: &str) -> String {
    let ns = ns.map_or_else(|| "iii.namespace".to_string(), |ns| format!("{ns:?}"));
    format!(
        "try:\n    iii.trigger({{'function_id': 'code-runner::register_function', 'payload': {{'function_id': {ns} + '::{name}', 'lang': 'python', 'source': 'def handler(p):\\n    return {word:?}\\n'}}}})\n    result = 'ok'\nexcept IIIError as e:\n    result = [e.code, e.message]\n"
    )
}

/// The same in node (a node handler through `register_function`, not
/// `iii.registerFunction`).
fn node_registers(ns: Option<&str>, name: &str, word: &str) -> String {
    let ns = ns.map_or_else(|| "iii.namespace".to_string(), |ns| format!("{ns:?}"));
    let source = format!("export function handler() {{ return {word:?}; }}");
    format!(
        "try {{ await iii.trigger({{ function_id: 'code-runner::register_function', payload: {{ function_id: {ns} + '::{name}', lang: 'node', source: {source:?} }} }}); return 'ok'; }}\ncatch (e) {{ return [e.code, e.message]; }}"
    )
}

/// `lang` guest code registering through `register_function`.
fn registers(lang: &str, ns: Option<&str>, name: &str, word: &str) -> String {
    match lang {
        "python" => python_registers(ns, name, word),
        _ => node_registers(ns, name, word),
    }
}

#[track_caller]
fn assert_refused(outcome: &Value, ns: &str) {
    assert_eq!(outcome[0], INVALID_REQUEST, "{outcome}");
    let message = outcome[1].as_str().unwrap_or("");
    assert!(
        message.contains(&format!("{ns}::")),
        "{ns} not in {message:?}"
    );
    assert!(message.contains("reserved"), "{message:?}");
}

/// Both languages show a string, one-shot and kept; a kept runtime shows
/// the same one in every turn and in its published functions' calls; every
/// runtime's differs, and none is derived from a runtime id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_plain_runtime_has_a_namespace_string_of_its_own() {
    let server = Server::start().await;
    let node = run(
        &server,
        "node",
        "return [typeof iii.namespace, iii.namespace]",
        false,
    )
    .await;
    assert_eq!(node["result"][0], "string", "{node}");
    let python = run(
        &server,
        "python",
        "result = [type(iii.namespace).__name__, iii.namespace]",
        false,
    )
    .await;
    assert_eq!(python["result"][0], "str", "{python}");
    let mut seen = vec![
        own_namespace(&node["result"][1]),
        own_namespace(&python["result"][1]),
    ];

    for lang in ["node", "python"] {
        let code = if lang == "node" {
            "return iii.namespace"
        } else {
            "result = iii.namespace"
        };
        let kept = run(&server, lang, code, true).await;
        let id = kept["runtime_id"].as_str().expect("runtime_id").to_string();
        let ns = own_namespace(&kept["result"]);
        assert_not_derived(&ns, &id);
        for _ in 0..2 {
            assert_eq!(turn(&server, &id, code).await, json!(ns), "{lang}");
        }
        if lang == "node" {
            turn(
                &server,
                &id,
                "await iii.registerFunction(iii.namespace + '::who', () => iii.namespace)",
            )
            .await;
            let who = server.call(&format!("{ns}::who"), json!({})).await;
            assert_eq!(who.ok(), &json!(ns));
        }
        seen.push(ns);
        server.teardown(&id).await.ok();
    }
    let mut distinct = seen.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), seen.len(), "{seen:?}");
}

/// Node registers `iii.namespace + "::ping"` with `iii.registerFunction`
/// (python has no registrar: its way in is the test after next): a one-shot
/// run's is published
/// and callable (by a nested python run) while it runs and gone after; a
/// kept runtime's is callable until the runtime is torn down. The name is
/// free again once its runtime has ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_registers_under_its_namespace_for_the_runtimes_life() {
    let server = Server::start().await;
    let one_shot = r#"
await iii.registerFunction(iii.namespace + "::ping", (p) => ["pong", p]);
const nested = await iii.trigger({ function_id: "code-runner::run", payload: { lang: "python",
  code: `result = iii.trigger({'function_id': ${JSON.stringify(iii.namespace + "::ping")}, 'payload': 1})` } });
return [iii.namespace, nested.result];
"#;
    let body = run(&server, "node", one_shot, false).await;
    let ns = own_namespace(&body["result"][0]);
    assert_eq!(body["result"][1], json!(["pong", 1]), "{body}");
    let ping = format!("{ns}::ping");
    server
        .call(&ping, json!({}))
        .await
        .assert_error(FUNCTION_NOT_FOUND, &ping);
    // Released with the run: the name is anyone's now.
    host_register(&server, &ping, "host").await.ok();
    assert_eq!(server.call(&ping, json!({})).await.ok(), "host");

    let kept = run(
        &server,
        "node",
        "globalThis.n = 0; await iii.registerFunction(iii.namespace + '::ping', () => ['pong', ++globalThis.n]); return iii.namespace",
        true,
    )
    .await;
    let id = kept["runtime_id"].as_str().expect("runtime_id").to_string();
    let ns = own_namespace(&kept["result"]);
    let ping = format!("{ns}::ping");
    for n in 1..=2 {
        assert_eq!(
            server.call(&ping, json!({})).await.ok(),
            &json!(["pong", n])
        );
    }
    let torn = server.teardown(&id).await;
    assert_eq!(torn.ok()["unregistered"], json!([ping]));
    server
        .call(&ping, json!({}))
        .await
        .assert_error(FUNCTION_NOT_FOUND, &ping);
}

/// While a runtime lives its namespace is reserved, registered in or not:
/// another runtime's `iii.registerFunction`, another run's
/// `register_function` (node and python guest code) and a host
/// `register_function` are refused with `invalid_request` naming it, and
/// the runtime itself may still register there. Once it is torn down the
/// name is free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtimes_namespace_is_reserved_for_it_while_it_lives() {
    let server = Server::start().await;
    let kept = run(&server, "node", "return iii.namespace", true).await;
    let id = kept["runtime_id"].as_str().expect("runtime_id").to_string();
    let ns = own_namespace(&kept["result"]);
    let steal = format!("{ns}::steal");

    let node_attack = format!(
        r#"
const out = [];
for (const attempt of [
  () => iii.registerFunction({steal:?}, () => "stolen"),
  () => iii.trigger({{ function_id: "code-runner::register_function", payload: {{ function_id: {steal:?}, lang: "node", source: "export function handler() {{ return 'stolen'; }}" }} }}),
]) {{
  try {{ await attempt(); out.push("ok"); }} catch (e) {{ out.push([e.code, e.message]); }}
}}
return out;
"#
    );
    let body = run(&server, "node", &node_attack, false).await;
    assert_refused(&body["result"][0], &ns);
    assert_refused(&body["result"][1], &ns);
    let body = run(
        &server,
        "python",
        &python_registers(Some(&ns), "steal", "stolen"),
        false,
    )
    .await;
    assert_refused(&body["result"], &ns);
    host_register(&server, &steal, "operator")
        .await
        .assert_error(
            INVALID_REQUEST,
            &format!("namespace {ns}:: is the own namespace"),
        );
    server
        .call(&steal, json!({}))
        .await
        .assert_error(FUNCTION_NOT_FOUND, &steal);

    turn(
        &server,
        &id,
        "await iii.registerFunction(iii.namespace + '::ping', () => 'pong')",
    )
    .await;
    assert_eq!(
        server.call(&format!("{ns}::ping"), json!({})).await.ok(),
        "pong"
    );
    // Its name tears nothing down from outside its lineage (its id does).
    server
        .call(TEARDOWN, json!({"namespace": ns}))
        .await
        .assert_error(INVALID_REQUEST, "runtime_id");
    server.teardown(&id).await.ok();
    host_register(&server, &steal, "operator").await.ok();
    assert_eq!(server.call(&steal, json!({})).await.ok(), "operator");
}

/// Python's `iii.namespace` is a `str` too, and python, having no
/// registrar, uses it with `code-runner::register_function` through
/// `iii.trigger`, as node guest code may: guest code of the runtime's own
/// lineage may register
/// there (a namespace runtime it creates, which then follows the rules of
/// namespaces guest code registers: it outlives the run); another run's
/// guest code and a host call may not while the runtime lives. After the
/// runtime is torn down its registration still serves, and the namespace
/// belongs to the lineage that created it (a host call, the operator, may
/// write it; another guest may not).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guest_code_registers_into_its_namespace_through_register_function() {
    let server = Server::start().await;
    for lang in LANGS {
        let kept = run(&server, lang, &returning(lang, "iii.namespace"), true).await;
        let id = kept["runtime_id"].as_str().expect("runtime_id").to_string();
        let ns = own_namespace(&kept["result"]);
        let ping = format!("{ns}::ping");

        assert_eq!(
            turn(&server, &id, &registers(lang, None, "ping", "pong")).await,
            "ok"
        );
        assert_eq!(server.call(&ping, json!({})).await.ok(), "pong");
        // The runtime's own lineage may redeploy; others may not.
        assert_eq!(
            turn(&server, &id, &registers(lang, None, "ping", "pong 2")).await,
            "ok"
        );
        let body = run(
            &server,
            lang,
            &registers(lang, Some(&ns), "ping", "stolen"),
            false,
        )
        .await;
        assert_refused(&body["result"], &ns);
        host_register_in(&server, lang, &ping, "operator")
            .await
            .assert_error(INVALID_REQUEST, "reserved");
        assert_eq!(server.call(&ping, json!({})).await.ok(), "pong 2");

        let torn = server.teardown(&id).await;
        assert_eq!(torn.ok()["unregistered"], json!([]), "{}", torn.body);
        assert_eq!(server.call(&ping, json!({})).await.ok(), "pong 2");
        let body = run(
            &server,
            lang,
            &registers(lang, Some(&ns), "ping", "stolen"),
            false,
        )
        .await;
        assert_eq!(body["result"][0], INVALID_REQUEST, "{body}");
        assert!(
            body["result"][1]
                .as_str()
                .unwrap_or("")
                .contains("belongs to the run"),
            "{body}"
        );
        host_register_in(&server, lang, &ping, "operator")
            .await
            .ok();
        assert_eq!(server.call(&ping, json!({})).await.ok(), "operator");
        server.call(TEARDOWN, json!({"namespace": ns})).await.ok();
    }
}

/// A kept runtime the idle sweep reaps releases its namespace with it:
/// what it registered there goes (node's `iii.registerFunction`; python
/// has no registrar), and the name is free again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reaped_runtime_releases_its_namespace() {
    for lang in LANGS {
        // One kept runtime per server, so the sweep reaps just it.
        let server = Server::with_config("idle_ttl_secs: 1").await;
        let code = match lang {
            "python" => "result = iii.namespace",
            _ => {
                "await iii.registerFunction(iii.namespace + '::ping', () => 'pong'); return iii.namespace"
            }
        };
        let kept = run(&server, lang, code, true).await;
        let ns = own_namespace(&kept["result"]);
        let (ping, other) = (format!("{ns}::ping"), format!("{ns}::other"));
        host_register(&server, &other, "operator")
            .await
            .assert_error(INVALID_REQUEST, "reserved");
        // Calls of its function would keep it busy: watch the worker's health instead.
        let started = std::time::Instant::now();
        while server.get("/healthz").await.ok()["runtimes"]["kept"] != 0 {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(15),
                "{lang}: not reaped"
            );
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        server
            .call(&ping, json!({}))
            .await
            .assert_error(FUNCTION_NOT_FOUND, &ping);
        host_register(&server, &other, "operator").await.ok();
        assert_eq!(server.call(&other, json!({})).await.ok(), "operator");
    }
}
