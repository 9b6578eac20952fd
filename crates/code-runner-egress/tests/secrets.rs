//! Issue 44, items 3 and 4: a secret's value never comes back to the guest,
//! in any common encoding, however its host reflects it: gzip the worker did
//! not ask for, JSON with `/` escaped, a redirect's unparseable `Location`,
//! an open redirect that passes it percent-encoded to another allowed host;
//! and it goes only where and how its entry says (https unless `http://`,
//! header values unless `in_url`, never on to another origin).
#![allow(missing_docs, reason = "tests")]

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use code_runner_egress::{
    Allow, Egress, EgressError, Gate, Kind, Policy, Request, SecretSpec, Secrets,
};
use tokio::time::Instant;

const VALUE: &str = "tok-9f8e/7d+Zq==";

/// Every request line and header a server saw, to tell whether a value
/// (or any form of it) reached it.
type Seen = Arc<Mutex<Vec<String>>>;

async fn serve() -> (u16, Seen) {
    let seen: Seen = Arc::default();
    let app = Router::new()
        .route("/echo-gzip", get(echo_gzip))
        .route("/echo-json", get(echo_json))
        .route("/bad-location", get(bad_location))
        .route("/bounce", get(bounce))
        .route("/echo", get(echo))
        .layer(axum::middleware::from_fn_with_state(seen.clone(), record))
        .with_state(());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (port, seen)
}

async fn record(
    State(seen): State<Seen>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let mut line = request.uri().to_string();
    for (name, value) in request.headers() {
        line.push_str(&format!("\n{name}: {}", value.to_str().unwrap_or("?")));
    }
    seen.lock().unwrap().push(line);
    next.run(request).await
}

fn auth(headers: &HeaderMap) -> String {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

/// The request's headers, gzipped whatever it asked for.
async fn echo_gzip(headers: HeaderMap) -> Response {
    let mut text = String::new();
    for (name, value) in &headers {
        text.push_str(&format!("{name}: {}\n", value.to_str().unwrap_or("?")));
    }
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(text.as_bytes()).unwrap();
    ([(header::CONTENT_ENCODING, "gzip")], gz.finish().unwrap()).into_response()
}

/// The Authorization header in JSON, `/` escaped as PHP and others do.
async fn echo_json(headers: HeaderMap) -> Response {
    let escaped = serde_json::to_string(&auth(&headers))
        .unwrap()
        .replace('/', "\\/");
    (
        [(header::CONTENT_TYPE, "application/json")],
        format!("{{\"auth\":{escaped}}}"),
    )
        .into_response()
}

/// A redirect whose Location is not a URL and quotes the credential.
async fn bad_location(headers: HeaderMap) -> Response {
    let location = format!("http://[bad {}", auth(&headers));
    (StatusCode::FOUND, [(header::LOCATION, location)]).into_response()
}

/// An open redirect that passes the credential on, percent-encoded, to `to`.
async fn bounce(headers: HeaderMap, Query(q): Query<Vec<(String, String)>>) -> Response {
    let encoded: String = auth(&headers)
        .bytes()
        .map(|b| format!("%{b:02X}"))
        .collect();
    let location = format!("{}?leak={encoded}", q[0].1);
    (StatusCode::FOUND, [(header::LOCATION, location)]).into_response()
}

async fn echo(uri: Uri, headers: HeaderMap) -> String {
    format!("{uri}\n{}", auth(&headers))
}

fn secrets(hosts: Vec<String>, in_url: bool) -> (Secrets, String) {
    let spec = SecretSpec {
        name: "TOKEN".into(),
        env: "T".into(),
        hosts,
        in_url,
    };
    let secrets = Secrets::load(&[spec], |_| Some(VALUE.into())).unwrap();
    let placeholder = secrets.placeholders().next().unwrap().1.to_string();
    (secrets, placeholder)
}

async fn fetch(
    secrets: Secrets,
    allow: &[String],
    request: Request,
) -> Result<code_runner_egress::Response, EgressError> {
    let policy = Policy {
        allow: Allow::parse(allow).unwrap(),
        secrets,
        ..Policy::default()
    };
    Egress::new(policy)
        .fetch(
            &Gate::new(),
            request,
            Instant::now() + Duration::from_secs(60),
        )
        .await
}

fn bearer(url: String, placeholder: &str) -> Request {
    Request {
        method: "GET".into(),
        url,
        headers: vec![
            ("Authorization".into(), format!("Bearer {placeholder}")),
            ("Accept-Encoding".into(), "gzip".into()),
        ],
        body: Vec::new(),
    }
}

/// No form of the value: plain, percent (either case), JSON-escaped, base64.
#[track_caller]
fn assert_clean(what: &str, text: &str) {
    let lower = text.to_ascii_lowercase();
    for form in ["tok-9f8e", "tok-9f8e%2f7d", "9f8e\\/7d", "dg9rltlmogu"] {
        assert!(
            !lower.contains(form),
            "{what} carries the value as `{form}`: {text}"
        );
    }
}

/// The review's four reflections, each answered with the placeholder, not
/// the value; and the guest's Accept-Encoding never reaches the server.
#[tokio::test]
async fn a_reflected_value_comes_back_as_the_placeholder() {
    let (port, seen) = serve().await;
    let (other, other_seen) = serve().await;
    let allow = vec![format!("127.0.0.1:{port}"), format!("127.0.0.1:{other}")];
    let (secrets, placeholder) = secrets(vec![format!("http://127.0.0.1:{port}")], false);
    let base = format!("http://127.0.0.1:{port}");

    // 1. gzip the worker did not ask for: decoded, then scrubbed.
    let answer = fetch(
        secrets.clone(),
        &allow,
        bearer(format!("{base}/echo-gzip"), &placeholder),
    )
    .await
    .unwrap();
    let text = String::from_utf8(answer.body.clone()).unwrap();
    assert!(text.contains(&placeholder), "{text}");
    assert!(text.contains("accept-encoding: identity"), "{text}");
    assert!(
        !text.contains("gzip"),
        "the guest's Accept-Encoding went out: {text}"
    );
    assert!(
        answer.headers.iter().all(|(n, _)| n != "content-encoding"),
        "{:?}",
        answer.headers
    );
    assert_clean("a gzip echo", &text);

    // 2. JSON with `/` escaped.
    let answer = fetch(
        secrets.clone(),
        &allow,
        bearer(format!("{base}/echo-json"), &placeholder),
    )
    .await
    .unwrap();
    let text = String::from_utf8(answer.body).unwrap();
    assert!(text.contains(&placeholder), "{text}");
    assert_clean("a JSON echo", &text);

    // 3. A redirect whose Location is not a URL: the error quotes it scrubbed.
    let err = fetch(
        secrets.clone(),
        &allow,
        bearer(format!("{base}/bad-location"), &placeholder),
    )
    .await
    .unwrap_err();
    assert_eq!(err.kind, Kind::Invalid, "{err}");
    assert_clean("the redirect error", &err.to_string());

    // 4. An open redirect passing it on, percent-encoded, to another allowed
    // host: the Location is scrubbed to the placeholder, which may not go
    // there, so the hop is refused; the other host never sees a request.
    let to = format!("http://127.0.0.1:{other}/echo");
    let err = fetch(
        secrets.clone(),
        &allow,
        bearer(format!("{base}/bounce?to={to}"), &placeholder),
    )
    .await
    .unwrap_err();
    assert_eq!(err.kind, Kind::Secret, "{err}");
    assert_clean("the open redirect's error", &err.to_string());
    assert!(
        other_seen.lock().unwrap().is_empty(),
        "{:?}",
        other_seen.lock().unwrap()
    );
    // The secret's own host did get the value (in the header only).
    assert!(seen.lock().unwrap().iter().any(|l| l.contains(VALUE)));
}

/// A secret goes over https only, unless its entry says `http://`; and in
/// a header's value only, unless `in_url`.
#[tokio::test]
async fn a_secret_goes_only_where_and_how_its_entry_says() {
    let (port, seen) = serve().await;
    let allow = vec![format!("127.0.0.1:{port}")];
    let url = format!("http://127.0.0.1:{port}/echo");

    // The entry names the host without a scheme: https only, so plain http
    // to port 80's twin (here, the test's port) is refused.
    let (https_only, placeholder) = secrets(vec![format!("127.0.0.1:{port}")], false);
    let err = fetch(https_only, &allow, bearer(url.clone(), &placeholder))
        .await
        .unwrap_err();
    assert_eq!(err.kind, Kind::Secret, "{err}");
    assert!(err.reason.contains("only over https"), "{err}");

    // In the URL: refused unless in_url.
    let (headers_only, placeholder) = secrets(vec![format!("http://127.0.0.1:{port}")], false);
    let in_query = Request {
        method: "GET".into(),
        url: format!("{url}?key={placeholder}"),
        ..Request::default()
    };
    let err = fetch(headers_only, &allow, in_query.clone())
        .await
        .unwrap_err();
    assert_eq!(err.kind, Kind::Secret, "{err}");
    assert!(err.reason.contains("not in the URL"), "{err}");
    let (in_url, placeholder) = secrets(vec![format!("http://127.0.0.1:{port}")], true);
    let in_query = Request {
        url: format!("{url}?key={placeholder}"),
        ..in_query
    };
    let answer = fetch(in_url, &allow, in_query).await.unwrap();
    assert_clean("the echo", &String::from_utf8(answer.body).unwrap());
    assert_eq!(
        seen.lock().unwrap().len(),
        1,
        "the refused requests never left"
    );
}
