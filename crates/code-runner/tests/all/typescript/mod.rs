//! `lang: "typescript"` through the worker: one-shot and kept runs, refused
//! constructs as responses, `register_function` and `iii.registerFunction`,
//! the schemas; and `lang: "node"` still refusing type syntax. The stripper
//! itself (every construct, deep nesting) is tested in the engine's crate.

use serde_json::{Value, json};

use crate::helpers::{FUNCTIONS_INFO, INVALID_REQUEST, RUN, Server};

/// A one-shot typescript run: annotations, generics, `as` and `satisfies`
/// run as JavaScript, `iii` is there, a type error is no error, and a thrown
/// error's stack has the source's line under `run.ts`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_typescript_run_strips_types_and_keeps_lines() {
    let server = Server::start().await;
    let code = "interface P { x: number }\n\
                const p: P = { x: 41 };\n\
                const id = <T,>(v: T): T => v;\n\
                const wrong: string = 5 as unknown as string;\n\
                console.log(typeof iii.trigger);\n\
                return { x: id<number>(p.x) + 1, wrong, ns: typeof iii.namespace } satisfies object;";
    let answer = server.run_in("typescript", code).await;
    let body = answer.ok();
    assert_eq!(
        body["result"],
        json!({"x": 42, "wrong": 5, "ns": "string"}),
        "{body}"
    );
    assert_eq!(body["stdout"], "function\n", "{body}");
    assert!(body["usage"]["cpu_ms"].is_number(), "{body}");

    let code = "type N = number;\nconst n: N = 1;\nthrow new Error(`bad ${n}`);";
    let body = server.run_in("typescript", code).await.ok().clone();
    assert_eq!(body["exit_code"], 1, "{body}");
    let stderr = body["stderr"].as_str().unwrap();
    assert!(stderr.contains("Error: bad 1"), "{body}");
    assert!(stderr.contains("run.ts:3:7"), "{body}");
}

/// A construct that needs a transform is a failing script, not an error:
/// exit 1, nothing ran, and stderr names the construct and its line the way
/// a node `SyntaxError` is reported.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_construct_is_exit_1_with_its_line() {
    let server = Server::start().await;
    let code = "console.log('never');\nenum Color { Red }\nreturn Color.Red;";
    let body = server.run_in("typescript", code).await.ok().clone();
    assert_eq!(body["exit_code"], 1, "{body}");
    assert_eq!(body["success"], false, "{body}");
    assert_eq!(body["stdout"], "", "{body}");
    assert_eq!(body["result"], Value::Null, "{body}");
    let stderr = body["stderr"].as_str().unwrap();
    assert!(
        stderr.starts_with("run.ts:2\nenum Color { Red }\n^"),
        "{body}"
    );
    assert!(
        stderr.contains(
            "SyntaxError [ERR_UNSUPPORTED_TYPESCRIPT_SYNTAX]: TypeScript enum is not supported"
        ),
        "{body}"
    );
    // Deep nesting is the same kind of answer, and the worker goes on.
    let deep = format!("return {}1{}", "(".repeat(100_000), ")".repeat(100_000));
    let body = server.run_in("typescript", &deep).await.ok().clone();
    assert_eq!(body["exit_code"], 1);
    assert!(body["stderr"].as_str().unwrap().contains("nests more than"));
    server.assert_still_serves().await;
}

/// `lang: "node"` is JavaScript: type syntax is V8's SyntaxError, never
/// silently stripped; and `memory_mb` is python's, refused for typescript.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_is_not_stripped_and_typescript_takes_no_memory_mb() {
    let server = Server::start().await;
    let body = server
        .run_in("node", "let x: number = 1;\nreturn x")
        .await
        .ok()
        .clone();
    assert_eq!(body["exit_code"], 1, "{body}");
    let stderr = body["stderr"].as_str().unwrap();
    assert!(stderr.starts_with("run.js:1\n"), "{body}");
    assert!(stderr.contains("SyntaxError"), "{body}");
    server
        .run_in_with("typescript", "return 1", json!({"memory_mb": 64}))
        .await
        .assert_error(INVALID_REQUEST, "memory_mb applies to python");
}

/// A kept typescript runtime takes typescript in every turn, keeps its
/// globals and `iii.files` modules (a `.ts` module is stripped on import),
/// and refuses another `lang`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_typescript_runtime_takes_typescript_every_turn() {
    let server = Server::start().await;
    let id = server
        .keep_in(
            "typescript",
            "(globalThis as any).total = 40 as number;\n\
             await iii.files.write('add.ts', 'export const add = (a: number, b: number): number => a + b;\\n');",
        )
        .await;
    let code = "const { add } = await import('./add.ts');\n\
                const t: number = (globalThis as any).total;\n\
                return add(t, 2);";
    let body = server.run_on(&id, code).await.ok().clone();
    assert_eq!(body["result"], 42, "{body}");
    assert_eq!(body["runtime_id"], id.as_str(), "{body}");
    for other in ["node", "python"] {
        server
            .call(
                RUN,
                json!({"runtime_id": id, "lang": other, "code": "return 1"}),
            )
            .await
            .assert_error(INVALID_REQUEST, "which runs typescript");
    }
    let body = server
        .call(
            RUN,
            json!({"runtime_id": id, "lang": "typescript", "code": "return typeof total as string"}),
        )
        .await
        .ok()
        .clone();
    assert_eq!(body["result"], "number", "{body}");
    assert_eq!(server.teardown(&id).await.ok()["torn_down"], true);
}

/// `register_function` with `lang: "typescript"`: the handler's types are
/// stripped, the function answers, `engine::functions::info` says its lang;
/// a handler with an enum is `invalid_request` naming it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn register_function_takes_typescript() {
    let server = Server::start().await;
    let source = "interface Req { name?: string }\n\
                  export function handler(payload: Req): { greeting: string } {\n\
                  \x20 return { greeting: `hello, ${payload.name ?? 'world'}` };\n\
                  }\n";
    server
        .registered("typescript", "tsapp::greet", source)
        .await;
    let answer = server.call("tsapp::greet", json!({"name": "ts"})).await;
    assert_eq!(answer.ok(), &json!({"greeting": "hello, ts"}));
    let info = server
        .call(
            FUNCTIONS_INFO,
            json!({"function_ids": ["tsapp::greet", RUN]}),
        )
        .await;
    let functions = info.ok()["functions"].as_array().unwrap().clone();
    assert_eq!(functions[0]["metadata"]["lang"], "typescript", "{info:?}");
    let langs = &functions[1]["request_schema"]["definitions"]["Lang"]["enum"];
    assert_eq!(langs, &json!(["node", "python", "typescript"]));
    let usage = &functions[1]["response_schema"]["properties"]["usage"];
    assert!(!usage.is_null(), "{}", functions[1]["response_schema"]);
    server
        .register(
            "typescript",
            "tsapp::bad",
            "enum E { A }\nexport function handler() { return E.A; }",
        )
        .await
        .assert_error(INVALID_REQUEST, "enum");
}

/// `iii.registerFunction` from a typescript runtime publishes a function
/// whose handler is that runtime's own (typed) function.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn iii_register_function_works_from_typescript() {
    let server = Server::start().await;
    let id = server
        .keep_in(
            "typescript",
            "await iii.registerFunction(`${iii.namespace}::double`, (p: { n: number }): number => p.n * 2);\n\
             return iii.namespace;",
        )
        .await;
    let namespace = server
        .run_on(&id, "return iii.namespace as string")
        .await
        .ok()["result"]
        .as_str()
        .unwrap()
        .to_string();
    let answer = server
        .call(&format!("{namespace}::double"), json!({"n": 21}))
        .await;
    assert_eq!(answer.ok(), &json!(42));
    server.teardown(&id).await.ok();
}
