//! The console UI and the playground: `code-runner::ui-content` on the bus,
//! `GET /` and `GET /ui/{path}` over real HTTP.

use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::{FUNCTIONS_INFO, INVALID_REQUEST, Server, client};

const UI_CONTENT: &str = "code-runner::ui-content";

/// The console fetches both assets through the content function; a path it
/// does not know is a clear error, not an empty asset.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ui_content_serves_page_js_and_styles_css_over_the_bus() {
    let server = Server::start().await;
    let page = server
        .call(
            UI_CONTENT,
            json!({"path": "code-runner/page.js", "_caller_worker_id": "w1"}),
        )
        .await;
    let page = page.ok();
    assert_eq!(page["content_type"], "text/javascript; charset=utf-8");
    let source = page["content"].as_str().expect("content");
    assert!(
        source.contains("from \"react\""),
        "React comes from the console's import map"
    );
    assert!(
        source.contains("setup as default"),
        "default export is setup(host)"
    );
    let css = server
        .call(UI_CONTENT, json!({"path": "code-runner/styles.css"}))
        .await;
    assert_eq!(css.ok()["content_type"], "text/css; charset=utf-8");
    assert!(
        css.ok()["content"]
            .as_str()
            .unwrap()
            .contains("data-iii-ui")
    );
    server
        .call(UI_CONTENT, json!({"path": "other/page.js"}))
        .await
        .assert_error(INVALID_REQUEST, "unknown UI asset `other/page.js`");
    server
        .call(UI_CONTENT, json!({}))
        .await
        .assert_error(INVALID_REQUEST, "path");
}

/// Content functions are not for callers: the catalog marks it internal and
/// shows the seed's schemas.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ui_content_is_internal_in_the_function_info() {
    let server = Server::start().await;
    let answer = server
        .call(FUNCTIONS_INFO, json!({"function_ids": [UI_CONTENT]}))
        .await;
    let info = &answer.ok()["functions"][0];
    assert_eq!(info["metadata"]["internal"], true, "{info}");
    assert_eq!(info["request_schema"]["title"], "UiContentInput");
    assert_eq!(info["request_schema"]["required"], json!(["path"]));
    assert_eq!(info["response_schema"]["title"], "UiContentResult");
    assert_eq!(
        info["response_schema"]["required"],
        json!(["content", "content_type"])
    );
}

/// A new user opens the server's root and gets the playground, which loads
/// nothing but this server's own assets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn root_serves_the_playground_with_a_same_origin_policy() {
    let server = Server::start().await;
    let http = client();
    let page = http.get(format!("{}/", server.url)).send().await.unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    let headers = page.headers().clone();
    assert_eq!(headers["content-type"], "text/html; charset=utf-8");
    let csp = headers["content-security-policy"].to_str().unwrap();
    assert!(
        csp.contains("default-src 'none'") && csp.contains("connect-src 'self'"),
        "{csp}"
    );
    let html = page.text().await.unwrap();
    for asset in [
        "/ui/playground/playground.js",
        "/ui/playground/playground.css",
        "/ui/code-runner/styles.css",
    ] {
        assert!(html.contains(asset), "the page loads {asset}");
        let response = http
            .get(format!("{}{asset}", server.url))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{asset}");
        assert_eq!(response.headers()["x-content-type-options"], "nosniff");
        assert!(!response.text().await.unwrap().is_empty(), "{asset}");
    }
    assert!(
        !html.contains("http://") && !html.contains("https://"),
        "no external resource"
    );
    let missing = http
        .get(format!("{}/ui/code-runner/nope.js", server.url))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
}
