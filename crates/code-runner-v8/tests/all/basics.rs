//! Turns: results, console, errors, persistence.

use serde_json::json;

use crate::{exception, runtime, turn, value};

/// The smallest turn: a returned value and a console line come back.
#[tokio::test(flavor = "multi_thread")]
async fn returned_value_and_console_come_back() {
    let (rt, _dir) = runtime().await;
    let out = rt.run(turn("console.log('hi'); return 2 + 2")).await;
    assert_eq!(value(&out), json!(4));
    assert_eq!(out.stdout.render(), "hi\n");
    let out = rt.run(turn("throw new TypeError('bad')")).await;
    let text = exception(&out);
    assert!(text.starts_with("TypeError: bad\n    at "), "{text}");
    rt.close().await;
}
