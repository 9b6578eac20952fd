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
/// JSON), `/big?n=` (n bytes), `/pattern?n=` (n bytes of [`pattern`]),
/// `/slow` (answers after 60 s). Its address,
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
            "/pattern",
            get(|Query(q): Query<std::collections::HashMap<String, usize>>| async move {
                pattern(q.get("n").copied().unwrap_or(0))
            }),
        )
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(60)).await;
                "late"
            }),
        )
        .route("/echo-gzip", get(echo_gzip))
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (addr, seen)
}

/// The request's `authorization` and `accept-encoding`, JSON-escaped with
/// `/` as `\/`, gzipped whatever the request asked for: a host that
/// reflects a secret the ways the review found (issue 44, item 3).
async fn echo_gzip(headers: HeaderMap) -> impl axum::response::IntoResponse {
    use std::io::Write;
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned()
    };
    let text = serde_json::to_string(
        &json!({"auth": header("authorization"), "ae": header("accept-encoding")}),
    )
    .unwrap()
    .replace('/', "\\/");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(text.as_bytes()).unwrap();
    (
        [
            ("content-encoding", "gzip"),
            ("content-type", "application/json"),
        ],
        gz.finish().unwrap(),
    )
}

/// `n` bytes that differ from their neighbours: byte `i` is `i % 251`.
fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i % 251) as u8).collect()
}

/// A worker allowed to reach only `addr`, with a 4 KiB response cap, and
/// the secret `TOKEN` bound to `addr` over plain http (the loopback server
/// has no TLS; a secret goes over https only unless its entry says
/// `http://`), its value the worker's own `PATH`, a variable every test
/// process has, so no test writes the environment.
async fn worker(addr: SocketAddr, extra: &str) -> Server {
    Server::with_config(&format!(
        "egress_allow: [\"{addr}\"]\negress_max_response_bytes: 4096\n\
         egress_secrets:\n  TOKEN:\n    env: PATH\n    hosts: [\"http://{addr}\"]\n{extra}"
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
    // A model learns the secret's name and hosts (never its variable) from
    // the run function's description, before writing any code.
    let functions = server.get("/v1/functions").await.body.to_string();
    assert!(
        functions.contains(&format!("secrets, by name: TOKEN (for http://{addr})")),
        "{functions}"
    );
    assert!(!functions.contains("env: PATH") && !functions.contains(&value));
}

/// Issue 44, item 3: a secret's host that reflects it gzipped (asked or not)
/// and JSON-escaped hands the guest the placeholder, never the value, in
/// node's fetch and python's urllib alike; the guest's `Accept-Encoding`
/// never leaves (the worker asks for `identity` and decodes itself).
#[tokio::test(flavor = "multi_thread")]
async fn a_reflected_secret_comes_back_as_its_placeholder() {
    let (addr, _) = loopback().await;
    let server = worker(addr, "").await;
    let value = std::env::var("PATH").expect("the test process has a PATH");
    let node = format!(
        "const res = await fetch('http://{addr}/echo-gzip', {{ headers: {{ authorization: `Bearer ${{iii.secrets.TOKEN}}`, 'accept-encoding': 'gzip' }} }});\n\
         return [res.headers.get('content-encoding'), await res.json(), iii.secrets.TOKEN];"
    );
    let python = format!(
        "import os, json\n\
         from urllib.request import urlopen, Request\n\
         r = urlopen(Request('http://{addr}/echo-gzip', headers={{'Authorization': 'Bearer ' + os.environ['TOKEN'], 'Accept-Encoding': 'gzip'}}))\n\
         result = [r.headers.get('content-encoding'), json.loads(r.read()), os.environ['TOKEN']]"
    );
    for (lang, code) in [("node", node), ("python", python)] {
        let body = server.run_in(lang, &code).await.ok().clone();
        let result = &body["result"];
        assert_eq!(
            result[0],
            Value::Null,
            "{lang}: decoded by the worker: {body}"
        );
        let placeholder = result[2].as_str().unwrap_or_default();
        assert_eq!(
            result[1]["auth"],
            format!("Bearer {placeholder}"),
            "{lang}: {body}"
        );
        assert_eq!(result[1]["ae"], "identity", "{lang}: {body}");
        assert!(
            !body.to_string().contains(&value),
            "{lang}: the answer holds the secret: {body}"
        );
    }
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

/// Issue 30: a body of the whole `egress_max_response_bytes` (8 MiB, the
/// default) reaches JavaScript byte for byte, though a binding's answer
/// into a 128 MiB heap is capped at 8 MiB of JSON (the body comes in
/// pieces), in-process and from a sandbox process.
#[tokio::test(flavor = "multi_thread")]
async fn a_body_of_the_whole_response_cap_reaches_javascript() {
    let (addr, _) = loopback().await;
    let n = 8 << 20;
    let code = format!(
        "const r = await fetch('http://{addr}/pattern?n={n}');\n\
         const b = new Uint8Array(await r.arrayBuffer());\n\
         let bad = -1;\n\
         for (let i = 0; i < b.length; i++) if (b[i] !== i % 251) {{ bad = i; break; }}\n\
         return [b.length, bad];"
    );
    for isolation in ["", "isolation: process\nwarm_pool: 0\n"] {
        let server = Server::with_config(&format!(
            "egress_allow: [\"{addr}\"]\nheap_mb: 128\n{isolation}"
        ))
        .await;
        assert_eq!(
            result(&server, "node", &code).await,
            json!([n, -1]),
            "{isolation}"
        );
    }
}

/// Issue 30: an aborted fetch cancels the host's request at once: the
/// server sees its connection close while the run still goes on (the same
/// run then asks the server whether it has; the server waits up to 30 s for
/// it), in-process and from a sandbox process.
#[tokio::test(flavor = "multi_thread")]
async fn an_aborted_fetch_closes_its_connection_at_once() {
    use std::sync::atomic::{AtomicBool, Ordering};
    /// Set when the `/held` handler's future is dropped (its connection closed).
    struct Closed(Arc<AtomicBool>);
    impl Drop for Closed {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let closed = Arc::new(AtomicBool::new(false));
    let (held, asked) = (closed.clone(), closed.clone());
    let app = axum::Router::new()
        .route(
            "/held",
            get(move || {
                let closed = held.clone();
                async move {
                    let _guard = Closed(closed);
                    tokio::time::sleep(Duration::from_secs(120)).await;
                    "late"
                }
            }),
        )
        .route(
            "/closed",
            get(move || {
                let closed = asked.clone();
                async move {
                    for _ in 0..300 {
                        if closed.load(Ordering::SeqCst) {
                            return "closed";
                        }
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    "open"
                }
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let code = format!(
        "const controller = new AbortController();\n\
         const held = fetch('http://{addr}/held', {{ signal: controller.signal }}).catch((e) => e.name);\n\
         await new Promise((resolve) => setTimeout(resolve, 200));\n\
         controller.abort();\n\
         return [await held, await (await fetch('http://{addr}/closed')).text()];"
    );
    for isolation in ["", "isolation: process\nwarm_pool: 0\n"] {
        closed.store(false, Ordering::SeqCst);
        let server = Server::with_config(&format!(
            "egress_allow: [\"{addr}\"]\negress_timeout_ms: 60000\n{isolation}"
        ))
        .await;
        let body = server
            .run_in_with("node", &code, json!({"timeout_ms": 60_000}))
            .await
            .ok()
            .clone();
        assert_eq!(
            body["result"],
            json!(["AbortError", "closed"]),
            "{isolation}: {body}"
        );
    }
}
