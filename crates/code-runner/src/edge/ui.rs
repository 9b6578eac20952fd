//! The console UI and the playground, built from `ui/` (by `build.rs`) and
//! embedded in the binary.
//!
//! - Two console assets, served to an iii console by the content function
//!   `code-runner::ui-content` ([`register`]) through its `console:script` and
//!   `console:style` triggers ([`console_assets`] lists what to register).
//! - The playground at `GET /` ([`routes`]), which loads the same card
//!   renderers plus its own React from `GET /ui/{path}`.
//!
//! With `III_CODE_RUNNER_UI_WATCH=1` the assets are read from `ui/dist/` on
//! every request instead (pair it with `npm run watch` in `ui/`).

use std::borrow::Cow;
use std::sync::Arc;

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use code_runner_core::RunnerError;
use code_runner_core::wire::schema_of;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::bus::names::UI_CONTENT;
use crate::bus::{CallError, Function};

/// Set to `1` to serve the assets from `ui/dist/` on disk (a hot-reload loop).
pub const WATCH_ENV: &str = "III_CODE_RUNNER_UI_WATCH";

/// One embedded asset.
#[derive(Debug)]
pub struct Asset {
    /// Its path, as the console's trigger config and `GET /ui/{path}` name it.
    pub path: &'static str,
    /// The MIME type it is served with.
    pub content_type: &'static str,
    /// The console trigger type that loads it, for the two console assets.
    pub trigger_type: Option<&'static str>,
    embedded: &'static str,
}

macro_rules! dist {
    ($path:literal) => {
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../ui/dist/",
            $path
        ))
    };
}

const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";

static ASSETS: [Asset; 5] = [
    Asset {
        path: "code-runner/page.js",
        content_type: JS,
        trigger_type: Some("console:script"),
        embedded: dist!("code-runner/page.js"),
    },
    Asset {
        path: "code-runner/styles.css",
        content_type: CSS,
        trigger_type: Some("console:style"),
        embedded: dist!("code-runner/styles.css"),
    },
    Asset {
        path: "playground/playground.js",
        content_type: JS,
        trigger_type: None,
        embedded: dist!("playground/playground.js"),
    },
    Asset {
        path: "playground/playground.css",
        content_type: CSS,
        trigger_type: None,
        embedded: dist!("playground/playground.css"),
    },
    Asset {
        path: "playground/index.html",
        content_type: "text/html; charset=utf-8",
        trigger_type: None,
        embedded: dist!("playground/index.html"),
    },
];

impl Asset {
    /// The asset's text: embedded, or read from `ui/dist/` in watch mode.
    pub fn content(&self) -> Cow<'static, str> {
        if !watching() {
            return Cow::Borrowed(self.embedded);
        }
        let file = concat!(env!("CARGO_MANIFEST_DIR"), "/../../ui/dist/");
        match std::fs::read_to_string(format!("{file}{}", self.path)) {
            Ok(text) => Cow::Owned(text),
            Err(err) => {
                tracing::warn!(
                    "{WATCH_ENV}: cannot read {file}{}: {err}; serving the embedded copy",
                    self.path
                );
                Cow::Borrowed(self.embedded)
            }
        }
    }
}

/// Whether assets are read from disk (`III_CODE_RUNNER_UI_WATCH=1`).
pub fn watching() -> bool {
    std::env::var_os(WATCH_ENV).is_some_and(|v| v == "1")
}

/// The two console assets, each with the trigger type (`console:script`,
/// `console:style`) an iii connection registers for it with config
/// `{"path": asset.path}` and function [`UI_CONTENT`].
pub fn console_assets() -> impl Iterator<Item = &'static Asset> {
    ASSETS.iter().filter(|asset| asset.trigger_type.is_some())
}

/// The console asset at `path`, if there is one.
pub fn console_asset(path: &str) -> Option<&'static Asset> {
    console_assets().find(|asset| asset.path == path)
}

/// Input of the content function: the console asks for one asset by path.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(title = "UiContentInput")]
pub struct UiContentInput {
    /// The asset path from the trigger config (e.g. `code-runner/page.js`).
    pub path: String,
}

/// Output of the content function.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(title = "UiContentResult")]
pub struct UiContentResult {
    /// The asset source, verbatim.
    pub content: String,
    /// MIME type the console should serve the asset with.
    pub content_type: String,
}

/// `code-runner::ui-content`: `{path}` → `{content, content_type}`. Unknown
/// fields (the engine adds `_caller_worker_id`) are ignored.
///
/// # Errors
/// `code-runner::invalid_request` for a payload without `path` or an unknown path.
pub fn ui_content(payload: Value) -> Result<UiContentResult, RunnerError> {
    let input: UiContentInput = crate::bus::payload::parse(payload)?;
    let asset = console_asset(&input.path).ok_or_else(|| {
        let shown: String = input.path.chars().take(120).collect();
        let known: Vec<&str> = console_assets().map(|asset| asset.path).collect();
        RunnerError::invalid(format!(
            "unknown UI asset `{shown}`: code-runner serves {}",
            known.join(" and ")
        ))
    })?;
    Ok(UiContentResult {
        content: asset.content().into_owned(),
        content_type: asset.content_type.to_string(),
    })
}

/// `code-runner::ui-content`, for the composition root to register.
pub fn function() -> (&'static str, Function) {
    (
        UI_CONTENT,
        Function::new(
            "Serve the code-runner worker's injected console UI assets (content function for its console:script / console:style triggers).",
            schema_of::<UiContentInput>(),
            schema_of::<UiContentResult>(),
            Arc::new(|payload, _caller| {
                Box::pin(async move {
                    let result = ui_content(payload).map_err(CallError::from)?;
                    Ok(serde_json::to_value(result).unwrap_or(Value::Null))
                })
            }),
        )
        .internal(),
    )
}

/// The page's policy: its own origin only, so no external resource loads and
/// nothing else can frame it.
const PLAYGROUND_CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// `GET /` (the playground) and `GET /ui/{path}` (every asset).
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/", get(playground))
        .route("/ui/{*path}", get(asset))
}

fn serve(asset: &Asset) -> Response {
    let mut response = (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static(asset.content_type),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
        ],
        asset.content().into_owned(),
    )
        .into_response();
    if asset.content_type.starts_with("text/html") {
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(PLAYGROUND_CSP),
        );
        headers.insert(
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        );
    }
    response
}

async fn playground() -> Response {
    match ASSETS
        .iter()
        .find(|asset| asset.path == "playground/index.html")
    {
        Some(page) => serve(page),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn asset(Path(path): Path<String>) -> Response {
    match ASSETS.iter().find(|asset| asset.path == path) {
        Some(asset) => serve(asset),
        None => (
            StatusCode::NOT_FOUND,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            "no such UI asset\n",
        )
            .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The content function answers the console's two paths, and only them.
    #[test]
    fn ui_content_serves_the_two_console_assets_and_refuses_others() {
        let page = ui_content(json!({"path": "code-runner/page.js", "_caller_worker_id": "w"}))
            .expect("page.js");
        assert_eq!(page.content_type, JS);
        assert!(
            page.content.contains("as default"),
            "an ES module with a default export"
        );
        let css = ui_content(json!({"path": "code-runner/styles.css"})).expect("styles.css");
        assert_eq!(css.content_type, CSS);
        assert!(css.content.contains("data-iii-ui"));
        for path in [
            "playground/playground.js",
            "code-runner/../x",
            "",
            "code-runner/page.jsx",
        ] {
            let err = ui_content(json!({"path": path})).expect_err(path);
            assert_eq!(err.code.as_str(), "code-runner::invalid_request");
            assert!(err.message.contains("unknown UI asset"), "{}", err.message);
        }
        let err = ui_content(json!({})).expect_err("no path");
        assert!(err.message.contains("path"), "{}", err.message);
    }

    /// The connector registers one trigger per console asset, with the right slot.
    #[test]
    fn console_assets_name_their_trigger_types() {
        let slots: Vec<_> = console_assets()
            .map(|asset| (asset.path, asset.trigger_type))
            .collect();
        assert_eq!(
            slots,
            [
                ("code-runner/page.js", Some("console:script")),
                ("code-runner/styles.css", Some("console:style")),
            ]
        );
    }
}
