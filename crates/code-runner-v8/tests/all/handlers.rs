//! The forms a handler module may take: models write every one of them.

use code_runner_core::{Task, TurnEnding};
use serde_json::json;

use crate::{exception, runtime, task, value};

/// Each form defines a handler that the next invoke calls; one module with
/// none of them fails its definition with the message it always had, and
/// line numbers in a handler's stack trace are the source's.
#[tokio::test(flavor = "multi_thread")]
async fn every_common_handler_form_is_a_handler() {
    let (rt, _dir) = runtime().await;
    let forms = [
        "function handler(p) { return p.n + 1; }",
        "async function handler(p) { await null; return p.n + 1; }",
        "export function handler(p) { return p.n + 1; }",
        "export async function handler(p) { return p.n + 1; }",
        "export const handler = (p) => p.n + 1;",
        "const handler = async (p) => p.n + 1;",
        "export default function (p) { return p.n + 1; }",
        "export default async (p) => p.n + 1;",
        "const helper = (n) => n + 1;\nexport default function handle(p) { return helper(p.n); }",
    ];
    for (i, source) in forms.iter().enumerate() {
        let key = format!("app::f{i}");
        let out = rt
            .run(task(Task::Define {
                key: key.clone(),
                source: (*source).into(),
            }))
            .await;
        assert!(
            matches!(out.ending, TurnEnding::Exited { exit_code: 0, .. }),
            "{source}: {:?} {}",
            out.ending,
            out.stderr.render()
        );
        let out = rt
            .run(task(Task::Invoke {
                key,
                payload: json!({"n": 41}),
            }))
            .await;
        assert_eq!(value(&out), json!(42), "{source}");
    }
    for source in [
        "export const other = 1;",
        "export default 5;",
        "let handler = 3;",
        "",
    ] {
        let thrown = exception(
            &rt.run(task(Task::Define {
                key: "app::none".into(),
                source: source.into(),
            }))
            .await,
        );
        assert!(
            thrown.contains("the module exports no handler function"),
            "{source:?}: {thrown}"
        );
    }
    // A real syntax error is reported as itself; the module body runs once.
    let thrown = exception(
        &rt.run(task(Task::Define {
            key: "app::bad".into(),
            source: "function handler(p) { return p +; }".into(),
        }))
        .await,
    );
    assert!(thrown.contains("SyntaxError"), "{thrown}");
    let out = rt
        .run(task(Task::Define {
            key: "app::once".into(),
            source: "globalThis.evaluated = (globalThis.evaluated ?? 0) + 1;\nexport default () => globalThis.evaluated;".into(),
        }))
        .await;
    assert!(matches!(
        out.ending,
        TurnEnding::Exited { exit_code: 0, .. }
    ));
    let out = rt
        .run(task(Task::Invoke {
            key: "app::once".into(),
            payload: json!(null),
        }))
        .await;
    assert_eq!(value(&out), json!(1));
    let out = rt
        .run(task(Task::Define {
            key: "app::throws".into(),
            source: "\n\nfunction handler(p) {\n  throw new Error('line four');\n}".into(),
        }))
        .await;
    assert!(matches!(
        out.ending,
        TurnEnding::Exited { exit_code: 0, .. }
    ));
    let thrown = exception(
        &rt.run(task(Task::Invoke {
            key: "app::throws".into(),
            payload: json!(null),
        }))
        .await,
    );
    assert!(thrown.contains(":4:"), "{thrown}");
    rt.close().await;
}
