//! `code-runner::register_function` and teardown by namespace, through real
//! HTTP and both engines: handlers and the state their namespace keeps,
//! handler errors, redeploys, one registry across languages, the catalog's
//! view of a registration, what a namespace teardown undoes, and node's
//! `iii.registerFunction` (`guest`).

mod durable;
mod guest;
mod handlers;
mod redeploy;
mod teardown;

use crate::helpers::lang::pick;

/// The contract's `my-app::greet` example in `lang`: python's verbatim,
/// node's written as an ES module.
fn greet(lang: &str) -> &'static str {
    pick(
        lang,
        r#"import json

_greetings = {"en": "hello", "pt": "olá"}

def handler(payload):
    return _greetings.get(payload.get("lang", "en"), "hello")
"#,
        r#"const greetings = { en: "hello", pt: "olá" };

export function handler(payload) {
  return greetings[payload.lang ?? "en"] ?? "hello";
}
"#,
    )
}
