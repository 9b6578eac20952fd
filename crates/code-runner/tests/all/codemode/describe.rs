//! `code-runner::describe` over real HTTP: declarations with and without
//! schemas, nested objects, enums, arrays, a `$ref` cycle, the guard on a
//! schema whose refs multiply, the query filter, a clash; the TypeScript
//! declarations pass the worker's own TypeScript mode and the Python stubs
//! compile in the guest's interpreter.

use serde_json::{Value, json};

use super::{DESCRIBE, publish, with_greet};
use crate::helpers::{INVALID_REQUEST, Server};

const ECHO: &str = "def handler(payload):\n    return payload\n";

async fn describe(server: &Server, request: Value) -> Value {
    server.call(DESCRIBE, request).await.ok().clone()
}

fn names(answer: &Value) -> Vec<(String, String)> {
    answer["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["function_id"].as_str().unwrap().to_string(),
                f["name"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// A function with schemas is declared with its types and descriptions, one
/// without with `unknown` / `Any`; the worker's own operations are there
/// too, its internal hooks are not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn declarations_follow_the_schemas_in_both_languages() {
    let server = with_greet().await;
    publish(&server, "my-app::ping", ECHO, json!({})).await;
    let ts = describe(&server, json!({"lang": "typescript"})).await;
    let text = ts["declarations"].as_str().unwrap();
    assert!(text.contains("declare namespace iii.fn.my_app {"), "{text}");
    assert!(text.contains("   * Greets someone by name.\n"), "{text}");
    assert!(
        text.contains("function greet(input: { /** Who to greet. */ name: string; lang?: \"en\" | \"pt\"; }): Promise<string>;"),
        "{text}"
    );
    assert!(
        text.contains("function ping(input?: unknown): Promise<unknown>;"),
        "{text}"
    );
    assert!(
        text.contains("declare namespace iii.fn.code_runner {"),
        "{text}"
    );
    let listed = names(&ts);
    assert!(listed.contains(&("my-app::greet".into(), "my_app.greet".into())));
    assert!(listed.contains(&("code-runner::run".into(), "code_runner.run".into())));
    assert!(
        !listed
            .iter()
            .any(|(id, _)| id == "code-runner::inject-guidance")
    );

    let py = describe(&server, json!({"lang": "python"})).await;
    let text = py["declarations"].as_str().unwrap();
    assert!(text.starts_with("from typing import"), "{text}");
    assert!(
        text.contains("class MyAppGreetInput(TypedDict):\n    name: str\n    \"\"\"Who to greet.\"\"\"\n    lang: NotRequired[Literal[\"en\", \"pt\"]]\n"),
        "{text}"
    );
    assert!(
        text.contains("class _call_my_app_greet(Protocol):\n    @overload\n    def __call__(self, /, **payload: Unpack[MyAppGreetInput]) -> str:\n        \"\"\"Greets someone by name."),
        "{text}"
    );
    assert!(
        text.contains("class _call_my_app_ping(Protocol):\n    def __call__(self, payload: Any = None, /) -> Any:"),
        "{text}"
    );
    assert!(
        text.contains("class _fn:\n")
            && text.contains(
                "class _fn_my_app:\n    greet: _call_my_app_greet\n    ping: _call_my_app_ping\n"
            )
            && text.contains("    my_app: _fn_my_app\n"),
        "{text}"
    );
}

/// Nested objects and arrays are spelled out; a `$ref` cycle ends in
/// `unknown` where it comes round; a schema whose refs double at every level
/// (4 KiB standing for 2^30 nodes) is refused when published (issue 44: its
/// checks would cost as much), and one that doubles 8 times (within the
/// bound) is described promptly and small.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_schemas_ref_cycles_and_multiplying_refs_are_bounded() {
    let server = Server::start().await;
    let tree = json!({
        "$ref": "#/$defs/node",
        "$defs": {"node": {"type": "object", "required": ["label"], "properties": {
            "label": {"type": "string"},
            "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
            "meta": {"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"}}}}
        }}}
    });
    publish(
        &server,
        "shapes::tree",
        ECHO,
        json!({"request_format": tree}),
    )
    .await;
    let doubling = |levels: usize| {
        let mut defs = serde_json::Map::new();
        for level in 0..levels {
            let next = format!("#/definitions/d{}", level + 1);
            defs.insert(
                format!("d{level}"),
                json!({"type": "object", "properties": {"a": {"$ref": next}, "b": {"$ref": next}}}),
            );
        }
        defs.insert(format!("d{levels}"), json!({"type": "string"}));
        json!({"$ref": "#/definitions/d0", "definitions": defs})
    };
    server
        .call(
            crate::helpers::REGISTER,
            json!({"function_id": "shapes::huge", "lang": "python", "source": ECHO,
                "request_format": doubling(30)}),
        )
        .await
        .assert_error(crate::helpers::INVALID_REQUEST, "2000 subschemas");
    publish(
        &server,
        "shapes::big",
        ECHO,
        json!({"request_format": doubling(8)}),
    )
    .await;

    let ts = describe(&server, json!({"lang": "typescript", "query": "shapes"})).await;
    let text = ts["declarations"].as_str().unwrap();
    assert!(
        text.contains("function tree(input: { label: string; children?: Array<unknown>; meta?: { tags?: Array<string>; }; }): Promise<unknown>;"),
        "{text}"
    );
    assert!(text.contains("function big(input"), "{text}");
    assert!(text.len() < 40 * 1024, "{} bytes", text.len());
    let py = describe(&server, json!({"lang": "python", "query": "shapes"})).await;
    let text = py["declarations"].as_str().unwrap();
    assert!(text.contains("class ShapesTreeInput(TypedDict):"), "{text}");
    assert!(
        text.contains("    children: NotRequired[list[Any]]\n"),
        "{text}"
    );
    assert!(
        text.contains("    meta: NotRequired[ShapesTreeInputMeta]\n"),
        "{text}"
    );
    assert!(text.len() < 40 * 1024, "{} bytes", text.len());
}

/// `query` keeps the functions whose id, name or description holds every
/// word; `function_ids` names them; bounds are refused by name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn query_and_function_ids_filter() {
    let server = with_greet().await;
    publish(&server, "other::ping", ECHO, json!({})).await;
    let found = describe(&server, json!({"lang": "typescript", "query": "GREETS by"})).await;
    assert_eq!(
        names(&found),
        [("my-app::greet".to_string(), "my_app.greet".to_string())]
    );
    let none = describe(&server, json!({"lang": "python", "query": "no-such-word"})).await;
    assert_eq!(none["functions"], json!([]));
    let named = describe(
        &server,
        json!({"lang": "typescript", "function_ids": ["other::ping"]}),
    )
    .await;
    assert_eq!(
        names(&named),
        [("other::ping".to_string(), "other.ping".to_string())]
    );
    server
        .call(
            DESCRIBE,
            json!({"lang": "typescript", "query": "x".repeat(2000)}),
        )
        .await
        .assert_error(INVALID_REQUEST, "query");
    server
        .call(DESCRIBE, json!({"lang": "ruby"}))
        .await
        .assert_error(INVALID_REQUEST, "lang");
}

/// Two ids with one name clash: describe reports them and declares neither.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clash_is_reported_and_not_declared() {
    let server = Server::start().await;
    publish(&server, "clash::say-hi", ECHO, json!({})).await;
    publish(&server, "clash::say_hi", ECHO, json!({})).await;
    let answer = describe(&server, json!({"lang": "typescript", "query": "clash"})).await;
    assert_eq!(
        answer["clashes"],
        json!([{"name": "clash.say_hi", "function_ids": ["clash::say-hi", "clash::say_hi"]}])
    );
    assert_eq!(answer["functions"], json!([]));
}

/// The declarations are real code: the TypeScript ones pass the worker's
/// TypeScript mode (stripped, then run with a call through them), the
/// Python stubs compile and execute in the guest's interpreter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_declarations_are_code_in_their_language() {
    let server = with_greet().await;
    let ts = describe(&server, json!({"lang": "typescript"})).await;
    let code = format!(
        "{}\nconst greeting: string = await iii.fn.my_app.greet({{ name: \"Ada\" }});\nreturn greeting;\n",
        ts["declarations"].as_str().unwrap()
    );
    let run = server.run_in("typescript", &code).await;
    assert_eq!(run.ok()["result"], "hello Ada #1", "{}", run.ok());
    let py = describe(&server, json!({"lang": "python"})).await;
    // A JSON string is a Python string literal.
    let code = format!(
        "stubs = {}\nspace = {{}}\nexec(compile(stubs, '<stubs>', 'exec'), space)\nresult = 'MyAppGreetInput' in space and '_iii' in space\n",
        py["declarations"]
    );
    let run = server.run(&code).await;
    assert_eq!(run.ok()["result"], true, "{}", run.ok());
}
