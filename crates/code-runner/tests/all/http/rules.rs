//! Who may call (issue 9, item 10): a `POST` must be `application/json`, a
//! browser page of another origin is refused unless allowed (with CORS for
//! the allowed ones), and a `Host` that is not an address of this server is
//! refused (DNS rebinding). Same-origin browser use keeps working.

use code_runner::http::HttpOptions;
use serde_json::Value;

use crate::helpers::{INVALID_REQUEST, RUN, Server, raw_http};

const TWO_PLUS_TWO: &str = r#"{"lang": "python", "code": "result = 2 + 2"}"#;

/// A run posted by hand with `headers` (each `Name: value`), Host included.
async fn post_run(server: &Server, headers: &[&str]) -> (u16, Value) {
    let head = format!("POST /v1/call/{RUN} HTTP/1.1\r\n{}", headers.join("\r\n"));
    let (status, body) = raw_http(&server.addr(), &head, TWO_PLUS_TWO.as_bytes()).await;
    let body = serde_json::from_str(&body)
        .unwrap_or_else(|err| panic!("HTTP {status} answered non-JSON ({err}): {body}"));
    (status, body)
}

#[track_caller]
fn assert_refused(answer: &(u16, Value), status: u16, part: &str) {
    assert_eq!(answer.0, status, "{}", answer.1);
    assert_eq!(answer.1["error"]["code"], INVALID_REQUEST, "{}", answer.1);
    let message = answer.1["error"]["message"].as_str().unwrap_or("");
    assert!(message.contains(part), "{part:?} not in {message:?}");
}

#[track_caller]
fn assert_ran(answer: &(u16, Value)) {
    assert_eq!(answer.0, 200, "{}", answer.1);
    assert_eq!(answer.1["result"], 4, "{}", answer.1);
}

/// A page can post `text/plain` (or a form) anywhere without a CORS
/// preflight; only JSON bodies are accepted, and the refusal says what to send.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_without_application_json_is_415_saying_what_to_send() {
    let server = Server::start().await;
    let host = format!("Host: {}", server.addr());
    for content_type in [
        "Content-Type: text/plain",
        "Content-Type: application/x-www-form-urlencoded",
        "Content-Type: multipart/form-data; boundary=x",
    ] {
        let answer = post_run(&server, &[&host, content_type]).await;
        assert_refused(&answer, 415, "Content-Type: application/json");
    }
    assert_refused(
        &post_run(&server, &[&host]).await,
        415,
        "Content-Type: application/json",
    );
    assert_ran(&post_run(&server, &[&host, "Content-Type: application/json"]).await);
    assert_ran(
        &post_run(
            &server,
            &[&host, "content-type: Application/JSON; charset=utf-8"],
        )
        .await,
    );
}

/// A page of another origin is refused whatever it sends; the server's own
/// pages (the playground at `/`) call it as before, by either loopback name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cross_origin_requests_are_refused_and_same_origin_ones_served() {
    let server = Server::start().await;
    let port = server.addr().rsplit_once(':').unwrap().1.to_string();
    let json = "Content-Type: application/json";
    let host = format!("Host: 127.0.0.1:{port}");
    for origin in [
        "Origin: https://evil.example",
        "Origin: null",
        "Origin: http://127.0.0.1:1",
        "Origin: http://localhost:{port}",
    ] {
        let origin = origin.replace("{port}", &port);
        let answer = post_run(&server, &[&host, json, &origin]).await;
        assert_refused(&answer, 403, "--allow-origin");
    }
    let (status, _) = raw_http(
        &server.addr(),
        &format!("GET /healthz HTTP/1.1\r\n{host}\r\nOrigin: https://evil.example"),
        b"",
    )
    .await;
    assert_eq!(status, 403, "a cross-origin GET is refused too");

    let own = format!("Origin: http://127.0.0.1:{port}");
    assert_ran(&post_run(&server, &[&host, json, &own]).await);
    let localhost = format!("Host: localhost:{port}");
    let own = format!("Origin: http://localhost:{port}");
    assert_ran(&post_run(&server, &[&localhost, json, &own]).await);
    assert_ran(&post_run(&server, &[&host, json]).await);
}

/// `--allow-origin` lets a front-end elsewhere (a dev server, the iii
/// console) call, with CORS answers and preflights; others stay refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allowed_origin_gets_cors_answers_and_others_stay_refused() {
    let http = HttpOptions {
        allow_origins: vec!["http://localhost:5173/".into()],
        ..HttpOptions::default()
    };
    let server = Server::with_http("", http).await;
    let client = reqwest::Client::new();
    let url = format!("{}/v1/call/{RUN}", server.url);
    let preflight = client
        .request(reqwest::Method::OPTIONS, &url)
        .header("Origin", "http://localhost:5173")
        .header("Access-Control-Request-Method", "POST")
        .header("Access-Control-Request-Headers", "content-type")
        .send()
        .await
        .unwrap();
    assert!(preflight.status().is_success(), "{}", preflight.status());
    let headers = preflight.headers();
    assert_eq!(
        headers["access-control-allow-origin"],
        "http://localhost:5173"
    );
    assert!(
        headers["access-control-allow-methods"]
            .to_str()
            .unwrap()
            .contains("POST")
    );
    let answer = client
        .post(&url)
        .header("Origin", "http://localhost:5173")
        .header("Content-Type", "application/json")
        .body(TWO_PLUS_TWO)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    assert_eq!(
        answer.headers()["access-control-allow-origin"],
        "http://localhost:5173"
    );
    assert_eq!(answer.json::<Value>().await.unwrap()["result"], 4);

    let other = client
        .request(reqwest::Method::OPTIONS, &url)
        .header("Origin", "http://localhost:5174")
        .header("Access-Control-Request-Method", "POST")
        .send()
        .await
        .unwrap();
    assert_eq!(other.status(), 403);
}

/// DNS rebinding: a page on `evil.example` whose name now resolves to this
/// machine sends `Host: evil.example:PORT`; it is refused, while IP
/// addresses, `localhost` and `--allow-host` names are served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_host_names_are_refused_against_dns_rebinding() {
    let http = HttpOptions {
        allow_hosts: vec!["runner.internal".into()],
        ..HttpOptions::default()
    };
    let server = Server::with_http("", http).await;
    let port = server.addr().rsplit_once(':').unwrap().1.to_string();
    let json = "Content-Type: application/json";
    for host in ["evil.example", "localhost.evil.example", "127.0.0.1.nip.io"] {
        let header = format!("Host: {host}:{port}");
        let answer = post_run(&server, &[&header, json]).await;
        assert_refused(&answer, 403, &format!("--allow-host {host}"));
        let (status, _) = raw_http(
            &server.addr(),
            &format!("GET /healthz HTTP/1.1\r\n{header}"),
            b"",
        )
        .await;
        assert_eq!(status, 403, "GET with Host {host}");
    }
    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("LOCALHOST:{port}"),
        format!("[::1]:{port}"),
        format!("10.1.2.3:{port}"),
        format!("runner.internal:{port}"),
        "runner.internal".to_string(),
    ] {
        assert_ran(&post_run(&server, &[&format!("Host: {host}"), json]).await);
    }
}

/// A request with no `Host` at all (HTTP/1.0 needs none) cannot be checked
/// against DNS rebinding, so it is refused, saying what to send; the same
/// HTTP/1.0 request naming the server is served. Before, it skipped the rule
/// and ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_without_host_is_refused() {
    let server = Server::start().await;
    let json = "Content-Type: application/json";
    let head = format!("POST /v1/call/{RUN} HTTP/1.0\r\n{json}");
    let (status, body) = raw_http(&server.addr(), &head, TWO_PLUS_TWO.as_bytes()).await;
    let body: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
    assert_refused(&(status, body), 403, "no Host header");
    let (status, _) = raw_http(&server.addr(), "GET /v1/functions HTTP/1.0", b"").await;
    assert_eq!(status, 403, "GET without Host");
    let host = format!("Host: {}", server.addr());
    let head = format!("POST /v1/call/{RUN} HTTP/1.0\r\n{host}\r\n{json}");
    let (status, body) = raw_http(&server.addr(), &head, TWO_PLUS_TWO.as_bytes()).await;
    assert_eq!(status, 200, "{body}");
}
