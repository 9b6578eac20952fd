//! Turns: results, console output as Node prints it, thrown errors, persistence.

use code_runner_core::{Completion, TurnEnding};
use serde_json::json;

use crate::{exception, runtime, turn, value};

/// The smallest turn: a returned value and a console line come back.
#[tokio::test(flavor = "multi_thread")]
async fn returned_value_and_console_line_come_back() {
    let (rt, _dir) = runtime().await;
    let out = rt.run(turn("console.log('hi'); return 2 + 2")).await;
    assert_eq!(value(&out), json!(4));
    assert_eq!(out.stdout.render(), "hi\n");
    assert_eq!(out.stderr.render(), "");
    rt.close().await;
}

/// `code` is an async function body: `await` works, and no `return` is no value.
#[tokio::test(flavor = "multi_thread")]
async fn body_is_async_and_no_return_is_no_value() {
    let (rt, _dir) = runtime().await;
    let out = rt
        .run(turn("await new Promise((r) => setTimeout(r, 20)); const x = await Promise.resolve(41); return x + 1"))
        .await;
    assert_eq!(value(&out), json!(42));
    for program in ["const y = 1", "return", "return undefined"] {
        let out = rt.run(turn(program)).await;
        assert!(
            matches!(
                out.ending,
                TurnEnding::Exited {
                    exit_code: 0,
                    completion: Completion::Absent,
                    ..
                }
            ),
            "{program}: {:?}",
            out.ending
        );
    }
    assert_eq!(value(&rt.run(turn("return null")).await), json!(null));
    rt.close().await;
}

/// Console output is Node's: strings raw, other values inspected, arguments
/// joined by spaces, printf specifiers, error and warn on stderr.
#[tokio::test(flavor = "multi_thread")]
async fn console_formats_values_as_node_does() {
    let (rt, _dir) = runtime().await;
    let program = r#"
        console.log('str', 5, -0, 10n, Symbol('s'), undefined, null, true);
        console.log([1, 2, 3], { a: 1, b: 'x', c: [1, { d: 2 }] });
        console.log({ a: { b: { c: { d: 1 } } } });
        console.log(new Map([['a', 1]]), new Set([1, 2]), new Date(0), /x/g, [, 1]);
        console.log(function foo() {}, class A {}, () => {}, Object.create(null));
        const c = { a: 1 }; c.self = c; console.log(c);
        console.log('%s is %d years', 'Bob', 42);
        console.log(Array.from({ length: 30 }, (_, i) => i));
        console.info('info'); console.debug('debug');
        console.error('err', { e: 1 }); console.warn('warn');
    "#;
    let out = rt.run(turn(program)).await;
    let expected_stdout = "str 5 -0 10n Symbol(s) undefined null true\n\
        [ 1, 2, 3 ] { a: 1, b: 'x', c: [ 1, { d: 2 } ] }\n\
        { a: { b: { c: [Object] } } }\n\
        Map(1) { 'a' => 1 } Set(2) { 1, 2 } 1970-01-01T00:00:00.000Z /x/g [ <1 empty item>, 1 ]\n\
        [Function: foo] [class A] [Function (anonymous)] [Object: null prototype] {}\n\
        <ref *1> { a: 1, self: [Circular *1] }\n\
        Bob is 42 years\n\
        [\n   0,  1,  2,  3,  4,  5,  6,  7,  8,\n   9, 10, 11, 12, 13, 14, 15, 16, 17,\n  18, 19, 20, 21, 22, 23, 24, 25, 26,\n  27, 28, 29\n]\n\
        info\ndebug\n";
    assert_eq!(out.stdout.render(), expected_stdout);
    assert_eq!(out.stderr.render(), "err { e: 1 }\nwarn\n");
    rt.close().await;
}

/// A thrown error is a response: exit 1, name, message and stack on stderr.
#[tokio::test(flavor = "multi_thread")]
async fn thrown_error_is_exit_one_with_its_stack() {
    let (rt, _dir) = runtime().await;
    let out = rt
        .run(turn(
            "const f = () => { throw new TypeError('bad input') };\nf()",
        ))
        .await;
    let text = exception(&out);
    assert!(
        text.starts_with("TypeError: bad input\n    at f (run.js:1:25)"),
        "{text}"
    );
    assert_eq!(out.stderr.render(), format!("{text}\n"));
    let out = rt
        .run(turn("const e = new Error('x'); e.code = 'E1'; throw e"))
        .await;
    let text = exception(&out);
    assert!(
        text.starts_with("Error: x\n    at run.js:1:11") && text.ends_with("{\n  code: 'E1'\n}"),
        "{text}"
    );
    rt.close().await;
}

/// A thrown non-Error is shown as Node shows it: strings raw, objects inspected.
#[tokio::test(flavor = "multi_thread")]
async fn thrown_non_errors_are_shown_as_node_shows_them() {
    let (rt, _dir) = runtime().await;
    for (program, shown) in [
        ("throw 'boom'", "boom"),
        ("throw 42", "42"),
        ("throw null", "null"),
        ("throw { a: 1 }", "{ a: 1 }"),
        ("throw [1, 'two']", "[ 1, 'two' ]"),
    ] {
        let out = rt.run(turn(program)).await;
        assert_eq!(exception(&out), shown, "{program}");
    }
    rt.close().await;
}

/// A rejected promise nobody handles ends the turn with exit 1, as Node exits.
#[tokio::test(flavor = "multi_thread")]
async fn unhandled_rejection_fails_the_turn() {
    let (rt, _dir) = runtime().await;
    let out = rt.run(turn("Promise.reject(new RangeError('nobody listens')); await new Promise((r) => setTimeout(r, 10)); return 1")).await;
    let text = exception(&out);
    assert!(text.starts_with("RangeError: nobody listens"), "{text}");
    let out = rt
        .run(turn(
            "Promise.reject('plain'); await null; await null; return 1",
        ))
        .await;
    let text = exception(&out);
    assert!(
        text.contains("The promise rejected with the reason \"plain\""),
        "{text}"
    );
    let out = rt.run(turn("setTimeout(() => { throw new Error('in a timer') }, 1); await new Promise((r) => setTimeout(r, 50)); return 1")).await;
    assert!(exception(&out).starts_with("Error: in a timer"));
    // The runtime goes on.
    assert_eq!(value(&rt.run(turn("return 'fine'")).await), json!("fine"));
    rt.close().await;
}

/// A syntax error is a failed turn pointing at the line, as Node prints it.
#[tokio::test(flavor = "multi_thread")]
async fn syntax_error_points_at_the_line() {
    let (rt, _dir) = runtime().await;
    let out = rt.run(turn("const a = 1;\nconst = 2;")).await;
    let text = exception(&out);
    assert!(
        text.starts_with("run.js:2\nconst = 2;\n      ^\n\nSyntaxError: Unexpected token '='"),
        "{text}"
    );
    rt.close().await;
}

/// A kept runtime keeps its globals between turns; the completion is per turn.
#[tokio::test(flavor = "multi_thread")]
async fn globals_persist_between_turns() {
    let (rt, _dir) = runtime().await;
    assert_eq!(
        value(
            &rt.run(turn("globalThis.count = 41; var local = 1; return 'set'"))
                .await
        ),
        json!("set")
    );
    // The body is a function: `var` is its own, `globalThis` is the runtime's.
    assert_eq!(
        value(
            &rt.run(turn("count += 1; return [count, typeof local]"))
                .await
        ),
        json!([42, "undefined"])
    );
    let out = rt.run(turn("count += 1")).await;
    assert!(matches!(
        out.ending,
        TurnEnding::Exited {
            exit_code: 0,
            completion: Completion::Absent,
            ..
        }
    ));
    rt.close().await;
}

/// Output written after an `await` still belongs to its turn, and a timer a
/// finished turn left behind is cancelled, not run in the next turn.
#[tokio::test(flavor = "multi_thread")]
async fn output_follows_its_turn_and_stray_timers_are_cancelled() {
    let (rt, _dir) = runtime().await;
    let out = rt
        .run(turn(
            "setTimeout(() => console.log('late'), 30); await null; console.log('after await')",
        ))
        .await;
    assert_eq!(out.stdout.render(), "after await\n");
    let out = rt
        .run(turn(
            "await new Promise((r) => setTimeout(r, 100)); return 'waited'",
        ))
        .await;
    assert_eq!(value(&out), json!("waited"));
    assert_eq!(out.stdout.render(), "", "a cancelled timer printed");
    rt.close().await;
}

/// Web globals Node code expects are there; the embedding layer's are not.
#[tokio::test(flavor = "multi_thread")]
async fn web_globals_are_present_and_embedder_globals_are_not() {
    let (rt, _dir) = runtime().await;
    let program = r#"
        const bytes = new TextEncoder().encode('olá');
        return {
            decoded: new TextDecoder().decode(bytes),
            length: bytes.length,
            now: typeof performance.now(),
            clone: structuredClone({ a: [1] }),
            micro: await new Promise((r) => queueMicrotask(() => r('micro'))),
            hidden: ['Deno', '__bootstrap', '__code_runner__', 'WebAssembly'].filter((n) => n in globalThis),
            own: Object.getOwnPropertyNames(globalThis).filter((n) => /deno|bootstrap|code_runner/i.test(n)),
        };
    "#;
    let out = rt.run(turn(program)).await;
    assert_eq!(
        value(&out),
        json!({"decoded": "olá", "length": 4, "now": "number", "clone": {"a": [1]}, "micro": "micro", "hidden": [], "own": []})
    );
    rt.close().await;
}

/// A turn's usage is measured: the isolate thread's CPU for a busy loop, and
/// the heap's peak, which a large array raises even after it is collected.
#[tokio::test(flavor = "multi_thread")]
async fn usage_is_measured() {
    let (rt, _dir) = runtime().await;
    let quiet = rt.run(turn("return 1")).await;
    assert!(quiet.usage.peak_memory_bytes > 0, "{:?}", quiet.usage);
    let busy = rt
        .run(turn(
            "let x = 0; for (let i = 0; i < 60_000_000; i++) { x = (x + i * 7) % 1_000_003; }\n\
             let a = new Array(4_000_000).fill(1.5); const n = a.length; a = null;\n\
             const b = new Uint8Array(32 << 20); return n + b.length",
        ))
        .await;
    assert_eq!(value(&busy), json!(4_000_000 + (32 << 20)));
    // A fixed amount of work, not a wall-clock loop: on a busy machine the
    // thread may get a small share of a core, but the work still costs CPU.
    assert!(
        busy.usage.cpu_ns >= 20_000_000 && busy.usage.cpu_ns > 10 * quiet.usage.cpu_ns,
        "{:?} then {:?}",
        quiet.usage,
        busy.usage
    );
    assert!(
        busy.usage.peak_memory_bytes >= 32 << 20,
        "{:?} then {:?}",
        quiet.usage,
        busy.usage
    );
    rt.close().await;
}

/// The benchmark's floor: the engine's snapshot boots as a bare runtime on
/// the calling thread (ops, bootstrap and all), again and again.
#[test]
fn the_snapshot_boots_bare_on_this_thread() {
    let engine = crate::engine();
    for _ in 0..3 {
        engine
            .boot_snapshot_only()
            .expect("the engine's snapshot boots bare");
    }
}
