//! JavaScript's `fetch` through the worker's egress, end to end: node and
//! typescript runs against an HTTP server this test starts on loopback,
//! allowed by its exact `127.0.0.1:PORT`. Nothing here talks to any other
//! address: the refused hosts are refused before a connection is tried.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, Method};
use axum::response::AppendHeaders;
use axum::routing::{any, get};
use serde_json::{Value, json};

use crate::helpers::Server;

/// What the loopback server saw of the last `/echo` request's `authorization`.
type Seen = Arc<Mutex<Option<String>>>;

/// A loopback HTTP server: `/json`, `/echo` (answers the request it got as
/// JSON), `/big?n=` (n bytes), `/slow` (answers after 60 s). Its address,
/// and what it saw.
async fn loopback() -> (SocketAddr, Seen) {
    let seen: Seen = Arc::default();
    let app = Router::new()
        .route("/json", get(|| async { axum::Json(json!({"hello": "world", "n": [1, 2]})) }))
        .route(
            "/echo",
            any(
                |State(seen): State<Seen>, method: Method, headers: HeaderMap, body: Bytes| async move {
                    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
                    *seen.lock().unwrap() = header("authorization");
                    (
                        AppendHeaders([("x-reply", "yes"), ("set-cookie", "a=1"), ("set-cookie", "b=2")]),
                        axum::Json(json!({
                            "method": method.as_str(),
                            "content_type": header("content-type"),
                            "x_custom": header("x-custom"),
                            "body": String::from_utf8_lossy(&body),
                        })),
                    )
                },
            ),
        )
        .route(
            "/big",
            get(|Query(q): Query<std::collections::HashMap<String, usize>>| async move {
                vec![b'x'; q.get("n").copied().unwrap_or(0)]
            }),
        )
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(60)).await;
                "late"
            }),
        )
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (addr, seen)
}

/// A worker allowed to reach only `addr`, with a 4 KiB response cap, and
/// the secret `TOKEN` bound to `addr` (its value: the worker's own `PATH`,
/// a variable every test process has, so no test writes the environment).
async fn worker(addr: SocketAddr, extra: &str) -> Server {
    Server::with_config(&format!(
        "egress_allow: [\"{addr}\"]\negress_max_response_bytes: 4096\n\
         egress_secrets:\n  TOKEN:\n    env: PATH\n    hosts: [\"{addr}\"]\n{extra}"
    ))
    .await
}

/// The program's value, or a panic showing the whole answer.
async fn result(server: &Server, lang: &str, code: &str) -> Value {
    let body = server.run_in(lang, code).await.ok().clone();
    assert_eq!(body["exit_code"], 0, "{lang}: {body}");
    body["result"].clone()
}

/// GET and POST with JSON, headers both ways, and the response's fields, in
/// node and typescript; the run's usage counts the requests.
#[tokio::test(flavor = "multi_thread")]
async fn get_and_post_json_round_trip() {
    let (addr, _) = loopback().await;
    let server = worker(addr, "").await;
    let code = format!(
        "const got = await fetch('http://{addr}/json');\n\
         const posted = await fetch(new URL('/echo', 'http://{addr}/x'), {{\n\
           method: 'POST', headers: new Headers({{ 'X-Custom': 'custom value', 'Content-Type': 'application/json' }}),\n\
           body: JSON.stringify({{ a: 1 }}),\n\
         }});\n\
         const form = await fetch('http://{addr}/echo', {{ method: 'PUT', body: new URLSearchParams({{ q: 'a b' }}) }});\n\
         return [got.status, got.ok, got.headers.get('content-type'), await got.json(),\n\
                 posted.status, posted.headers.get('x-reply'), posted.headers.getSetCookie(), await posted.json(),\n\
                 (await form.json()).content_type, posted.url, posted.redirected];"
    );
    for lang in ["node", "typescript"] {
        let body = server.run_in(lang, &code).await.ok().clone();
        assert_eq!(body["exit_code"], 0, "{lang}: {body}");
        assert_eq!(
            body["result"],
            json!([
                200,
                true,
                "application/json",
                {"hello": "world", "n": [1, 2]},
                200,
                "yes",
                ["a=1", "b=2"],
                {"method": "POST", "content_type": "application/json", "x_custom": "custom value", "body": "{\"a\":1}"},
                "application/x-www-form-urlencoded;charset=UTF-8",
                format!("http://{addr}/echo"),
                false
            ]),
            "{lang}"
        );
        assert_eq!(body["usage"]["egress"]["requests"], 3, "{lang}: {body}");
    }
}

/// A host not in egress_allow, and a loopback port that is not the listed
/// one, reject with a TypeError whose message names the host and the reason;
/// a response past egress_max_response_bytes is an error, not a short body.
#[tokio::test(flavor = "multi_thread")]
async fn refusals_and_the_response_cap_are_type_errors() {
    let (addr, _) = loopback().await;
    let server = worker(addr, "").await;
    let other = SocketAddr::new(
        addr.ip(),
        if addr.port() == 1 { 2 } else { addr.port() - 1 },
    );
    let code = format!(
        "const why = (p) => p.then((r) => `status ${{r.status}}`, (e) => `${{e.name}}: ${{e.message}}`);\n\
         return [await why(fetch('https://refused.example/x')), await why(fetch('http://{other}/json')),\n\
                 await why(fetch('http://{addr}/big?n=5000')), (await (await fetch('http://{addr}/big?n=4000')).text()).length];"
    );
    let result = result(&server, "node", &code).await;
    let texts: Vec<&str> = result.as_array().unwrap()[..3]
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(
        texts[0].starts_with("TypeError: fetch to refused.example")
            && texts[0].contains("not in egress_allow"),
        "{result}"
    );
    assert!(
        texts[1].starts_with("TypeError: fetch to 127.0.0.1"),
        "{result}"
    );
    assert!(
        texts[2].starts_with("TypeError: fetch to 127.0.0.1") && texts[2].contains("4096"),
        "{result}"
    );
    assert_eq!(result[3], 4000, "{result}");
}

/// An aborted fetch rejects with the signal's AbortError while the server
/// has not answered, and the run ends long before the server would.
#[tokio::test(flavor = "multi_thread")]
async fn abort_ends_a_fetch_the_server_has_not_answered() {
    let (addr, _) = loopback().await;
    let server = worker(addr, "").await;
    let code = format!(
        "const controller = new AbortController();\n\
         setTimeout(() => controller.abort(), 100);\n\
         const aborted = await fetch('http://{addr}/slow', {{ signal: controller.signal }}).catch((e) => [e.name, e instanceof DOMException]);\n\
         const timedOut = await fetch('http://{addr}/slow', {{ signal: AbortSignal.timeout(100) }}).catch((e) => e.name);\n\
         return [aborted, timedOut];"
    );
    let body = server.run_in("node", &code).await.ok().clone();
    assert_eq!(
        body["result"],
        json!([["AbortError", true], "TimeoutError"]),
        "{body}"
    );
}

/// `iii.secrets.TOKEN` is a placeholder the host swaps for the value in a
/// request to the secret's host: the server sees the value, the guest never does.
#[tokio::test(flavor = "multi_thread")]
async fn secrets_are_placeholders_the_host_substitutes() {
    let (addr, seen) = loopback().await;
    let server = worker(addr, "").await;
    let value = std::env::var("PATH").expect("the test process has a PATH");
    let code = format!(
        "const token = iii.secrets.TOKEN;\n\
         const res = await fetch('http://{addr}/echo', {{ headers: {{ authorization: `Bearer ${{token}}` }} }});\n\
         await res.text();\n\
         return [typeof token, token.length > 0, Object.keys(iii.secrets)];"
    );
    let body = server.run_in("node", &code).await.ok().clone();
    assert_eq!(body["result"], json!(["string", true, ["TOKEN"]]), "{body}");
    assert_eq!(*seen.lock().unwrap(), Some(format!("Bearer {value}")));
    assert!(
        !body.to_string().contains(&value),
        "the answer holds the secret: {body}"
    );
}

/// In `isolation: process` the sandbox has no network: the same fetches
/// go through the worker, with the same answers and refusals.
#[tokio::test(flavor = "multi_thread")]
async fn fetch_works_from_a_sandbox_process() {
    let (addr, _) = loopback().await;
    let server = worker(
        addr,
        "isolation: process\nsandbox_processes: 1\nwarm_pool: 0\n",
    )
    .await;
    let code = format!(
        "const res = await fetch('http://{addr}/echo', {{ method: 'POST', body: new Uint8Array([104, 105]) }});\n\
         const refused = await fetch('https://refused.example/').catch((e) => e.name + ': ' + e.message);\n\
         return [(await res.json()).body, refused];"
    );
    for lang in ["node", "typescript"] {
        let result = result(&server, lang, &code).await;
        assert_eq!(result[0], "hi", "{lang}: {result}");
        let refused = result[1].as_str().unwrap();
        assert!(
            refused.starts_with("TypeError: fetch to refused.example")
                && refused.contains("not in egress_allow"),
            "{lang}: {result}"
        );
    }
}

/// `egress_allow` applies to the next call: a kept runtime refused while it
/// is empty reaches the server once the list names it, and is refused again
/// once it no longer does.
#[tokio::test(flavor = "multi_thread")]
async fn a_kept_runtime_follows_live_changes_of_egress_allow() {
    let (addr, _) = loopback().await;
    let server = Server::with_config("").await;
    let first = server
        .call(
            "code-runner::run",
            json!({"lang": "node", "keep": true, "code": "globalThis.n = 0; return 1"}),
        )
        .await
        .ok()
        .clone();
    let id = first["runtime_id"]
        .as_str()
        .expect("a runtime_id")
        .to_string();
    let code = format!(
        "try {{ return (await fetch('http://{addr}/json')).status }} catch (e) {{ return e.message }}"
    );
    let attempt = |code: String| {
        let (server, id) = (&server, id.clone());
        async move {
            server
                .call("code-runner::run", json!({"runtime_id": id, "code": code}))
                .await
                .ok()["result"]
                .clone()
        }
    };
    let refused = attempt(code.clone()).await;
    assert!(
        refused
            .as_str()
            .is_some_and(|m| m.contains("not in egress_allow")),
        "{refused}"
    );
    let server = &server;
    let set = |allow: Value| async move {
        let mut value = server
            .call("configuration::get", json!({"id": "code-runner"}))
            .await
            .ok()["value"]
            .clone();
        value["egress_allow"] = allow;
        server
            .call(
                "configuration::set",
                json!({"id": "code-runner", "value": value}),
            )
            .await
            .ok()
            .clone()
    };
    set(json!([addr.to_string()])).await;
    assert_eq!(attempt(code.clone()).await, json!(200));
    set(json!([])).await;
    let again = attempt(code).await;
    assert!(
        again
            .as_str()
            .is_some_and(|m| m.contains("not in egress_allow")),
        "{again}"
    );
}
