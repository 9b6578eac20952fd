//! Python's `urllib.request` and `http.client` through the worker's egress,
//! end to end, in both interpreters (the data stack and the lean one):
//! programs against an HTTP server this test starts on loopback, allowed by
//! its exact `127.0.0.1:PORT`. Nothing here talks to any other address: the
//! refused hosts are refused before a connection is tried.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::Redirect;
use axum::routing::{any, get};
use serde_json::{Value, json};

use crate::helpers::Server;
use crate::helpers::lang::PYTHON_INTERPRETERS;

/// What the loopback server saw of the last `/echo` request's `authorization`.
type Seen = Arc<Mutex<Option<String>>>;

/// A loopback HTTP server: `/json`, `/echo` (answers the request it got as
/// JSON), `/missing` (a 404 with a body), `/moved` (a redirect to `/json`),
/// `/data.csv`, `/big` (5000 bytes). Its address, and what it saw.
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
                        [("x-reply", "yes")],
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
        .route("/missing", get(|| async { (StatusCode::NOT_FOUND, "no such thing") }))
        .route("/moved", get(|| async { Redirect::temporary("/json") }))
        .route("/data.csv", get(|| async { "k,v\na,1\nb,2\na,3\n" }))
        .route("/big", get(|| async { vec![b'x'; 5000] }))
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (addr, seen)
}

/// A worker running `interpreter`, allowed to reach only `addr`, with a
/// 4 KiB response cap and the secret `TOKEN` bound to `addr` (its value: the
/// worker's own `PATH`, a variable every test process has).
async fn worker(addr: SocketAddr, interpreter: &str, extra: &str) -> Server {
    Server::with_config(&format!(
        "{interpreter}egress_allow: [\"{addr}\"]\negress_max_response_bytes: 4096\n\
         egress_secrets:\n  TOKEN:\n    env: PATH\n    hosts: [\"http://{addr}\"]\n{extra}"
    ))
    .await
}

/// The program's value, or a panic showing the whole answer.
async fn result(server: &Server, interpreter: &str, code: &str) -> Value {
    let body = server.run_in("python", code).await.ok().clone();
    assert_eq!(body["exit_code"], 0, "{interpreter}{body}");
    body["result"].clone()
}

/// GET and PUT with JSON through urllib, a POST with http.client itself, and
/// a redirect the host followed, in both interpreters.
#[tokio::test(flavor = "multi_thread")]
async fn urlopen_and_http_client_round_trip() {
    let (addr, _) = loopback().await;
    let port = addr.port();
    let code = format!(
        "import json, http.client\n\
         from urllib.request import urlopen, Request\n\
         got = json.load(urlopen('http://{addr}/json'))\n\
         r = urlopen(Request('http://{addr}/echo', data=json.dumps({{'a': 1}}).encode(),\n\
                             headers={{'Content-Type': 'application/json', 'X-Custom': 'v'}}, method='PUT'))\n\
         put = [r.status, r.headers['x-reply'], json.load(r)]\n\
         c = http.client.HTTPConnection('127.0.0.1', {port})\n\
         c.request('POST', '/echo', body='hi', headers={{'Content-Type': 'text/plain'}})\n\
         resp = c.getresponse()\n\
         posted = [resp.status, resp.reason, json.loads(resp.read())]\n\
         result = [got, put, posted, urlopen('http://{addr}/moved').geturl()]"
    );
    for interpreter in PYTHON_INTERPRETERS {
        let server = worker(addr, interpreter, "").await;
        let body = server.run_in("python", &code).await.ok().clone();
        assert_eq!(body["exit_code"], 0, "{interpreter}{body}");
        assert_eq!(
            body["result"],
            json!([
                {"hello": "world", "n": [1, 2]},
                [200, "yes", {"method": "PUT", "content_type": "application/json", "x_custom": "v", "body": "{\"a\": 1}"}],
                [200, "OK", {"method": "POST", "content_type": "text/plain", "x_custom": null, "body": "hi"}],
                format!("http://{addr}/json")
            ]),
            "{interpreter}"
        );
        assert_eq!(
            body["usage"]["egress"]["requests"], 5,
            "{interpreter}{body}"
        );
    }
}

/// A refused host (http and https: no ssl module stops it), a loopback port
/// that is not the listed one and a response past the cap raise URLError
/// with the host's message; a 404 raises HTTPError with its body readable.
#[tokio::test(flavor = "multi_thread")]
async fn refusals_are_url_errors_and_statuses_http_errors() {
    let (addr, _) = loopback().await;
    let other = SocketAddr::new(
        addr.ip(),
        if addr.port() == 1 { 2 } else { addr.port() - 1 },
    );
    let code = format!(
        "import http.client\n\
         from urllib.request import urlopen\n\
         from urllib.error import URLError, HTTPError\n\
         def why(url):\n\
         \x20   try:\n\
         \x20       return urlopen(url).status\n\
         \x20   except HTTPError as e:\n\
         \x20       return ['HTTPError', e.code, e.read().decode()]\n\
         \x20   except URLError as e:\n\
         \x20       return ['URLError', str(e.reason)]\n\
         c = http.client.HTTPSConnection('refused.example')\n\
         c.request('GET', '/')\n\
         try:\n\
         \x20   c.getresponse()\n\
         \x20   direct = None\n\
         except OSError as e:\n\
         \x20   direct = type(e).__name__\n\
         result = [why('http://refused.example/x'), why('https://refused.example/x'), why('http://{other}/json'),\n\
         \x20         why('http://{addr}/big'), why('http://{addr}/missing'), direct]"
    );
    for interpreter in PYTHON_INTERPRETERS {
        let server = worker(addr, interpreter, "").await;
        let result = result(&server, interpreter, &code).await;
        let reason = |i: usize| {
            assert_eq!(result[i][0], "URLError", "{interpreter}{result}");
            result[i][1].as_str().unwrap().to_owned()
        };
        for i in [0, 1] {
            assert!(
                reason(i).starts_with("fetch to refused.example")
                    && reason(i).contains("not in egress_allow"),
                "{interpreter}{result}"
            );
        }
        assert!(
            reason(2).starts_with("fetch to 127.0.0.1"),
            "{interpreter}{result}"
        );
        assert!(
            reason(3).starts_with("fetch to 127.0.0.1") && reason(3).contains("4096"),
            "{interpreter}{result}"
        );
        assert_eq!(
            result[4],
            json!(["HTTPError", 404, "no such thing"]),
            "{interpreter}"
        );
        assert_eq!(result[5], "URLError", "{interpreter}");
    }
}

/// `os.environ["TOKEN"]` is the secret's placeholder, set at each turn of
/// a kept runtime; the host swaps in the value for the secret's host: the
/// server sees it, the guest and the answer never do.
#[tokio::test(flavor = "multi_thread")]
async fn secrets_are_environment_placeholders() {
    let (addr, seen) = loopback().await;
    let value = std::env::var("PATH").expect("the test process has a PATH");
    let code = format!(
        "import os\n\
         from urllib.request import urlopen, Request\n\
         token = os.environ['TOKEN']\n\
         urlopen(Request('http://{addr}/echo', headers={{'Authorization': 'Bearer ' + token}})).read()\n\
         result = [token == iii.secrets['TOKEN'], token.startswith('III_SECRET_TOKEN_')]"
    );
    for interpreter in PYTHON_INTERPRETERS {
        let server = worker(addr, interpreter, "").await;
        let first = server
            .run_with(&code, json!({"keep": true}))
            .await
            .ok()
            .clone();
        assert_eq!(first["result"], json!([true, true]), "{interpreter}{first}");
        *seen.lock().unwrap() = None;
        let id = first["runtime_id"]
            .as_str()
            .expect("a kept runtime's id")
            .to_owned();
        let again = server.run_on(&id, &code).await.ok().clone();
        assert_eq!(again["result"], json!([true, true]), "{interpreter}{again}");
        assert_eq!(
            *seen.lock().unwrap(),
            Some(format!("Bearer {value}")),
            "{interpreter}"
        );
        for body in [&first, &again] {
            assert!(
                !body.to_string().contains(&value),
                "{interpreter}the answer holds the secret: {body}"
            );
        }
    }
}

/// `pandas.read_csv` of an http URL reads through the host (the data stack).
#[tokio::test(flavor = "multi_thread")]
async fn pandas_reads_csv_over_http() {
    let (addr, _) = loopback().await;
    let server = worker(addr, PYTHON_INTERPRETERS[0], "").await;
    let code = format!(
        "import pandas as pd\n\
         df = pd.read_csv('http://{addr}/data.csv')\n\
         result = df.groupby('k')['v'].sum().to_dict()"
    );
    let result = result(&server, PYTHON_INTERPRETERS[0], &code).await;
    assert_eq!(result, json!({"a": 4, "b": 2}));
}

/// In `isolation: process` the sandbox has no network: urllib's requests go
/// through the worker, with the same answers and refusals.
#[tokio::test(flavor = "multi_thread")]
async fn urlopen_works_from_a_sandbox_process() {
    let (addr, _) = loopback().await;
    let code = format!(
        "import json\n\
         from urllib.request import urlopen\n\
         from urllib.error import URLError\n\
         try:\n\
         \x20   urlopen('https://refused.example/')\n\
         except URLError as e:\n\
         \x20   refused = str(e.reason)\n\
         result = [json.load(urlopen('http://{addr}/echo', data=b'hi'))['body'], refused]"
    );
    for interpreter in PYTHON_INTERPRETERS {
        let server = worker(
            addr,
            interpreter,
            "isolation: process\nsandbox_processes: 1\nwarm_pool: 0\n",
        )
        .await;
        let result = result(&server, interpreter, &code).await;
        assert_eq!(result[0], "hi", "{interpreter}{result}");
        let refused = result[1].as_str().unwrap();
        assert!(
            refused.starts_with("fetch to refused.example")
                && refused.contains("not in egress_allow"),
            "{interpreter}{result}"
        );
    }
}
