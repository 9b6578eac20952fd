//! Bindings: host functions as null-prototype globals, typed rejections,
//! lossless JSON both ways, registrars, and handlers defined and invoked.

use std::sync::{Arc, Mutex};

use code_runner_core::{
    BindingError, BindingNamespace, Bindings, Runtime, Task, TurnEnding, TurnSpec,
};
use serde_json::{Value, json};

use crate::{exception, runtime, task, turn, value};

fn with_bindings(program: &str, namespaces: Vec<BindingNamespace>) -> TurnSpec {
    let mut spec = turn(program);
    spec.bindings = Bindings::new(namespaces).unwrap();
    spec
}

fn tools() -> BindingNamespace {
    BindingNamespace::new("tools")
        .function("echo", |args, _| async move { Ok(json!({ "got": args })) })
        .function("__proto__", |_, _| async { Ok(json!("own proto")) })
        .function("constructor", |_, _| async { Ok(json!("own constructor")) })
        .function("deny", |_, _| async {
            Err(BindingError {
                code: Some("tools::denied".into()),
                message: "not allowed".into(),
            })
        })
        .value("name", json!("tools-ns"))
        .error_class("ToolError", "tool")
}

/// A binding call crosses to the host and back, losslessly, both ways.
#[tokio::test(flavor = "multi_thread")]
async fn binding_call_round_trips_lossless_json() {
    let (rt, _dir) = runtime().await;
    let program = "return [await tools.echo({ a: 'é😀', n: [1.5, null, { deep: true }], ['__proto__']: 1 }), tools.name, await tools.echo()]";
    let out = rt.run(with_bindings(program, vec![tools()])).await;
    assert_eq!(
        value(&out),
        json!([{ "got": { "a": "é😀", "n": [1.5, null, { "deep": true }], "__proto__": 1 } }, "tools-ns", { "got": null }])
    );
    rt.close().await;
}

/// Namespaces are null-prototype objects: `__proto__` and `constructor` are
/// ordinary members, and nothing is inherited.
#[tokio::test(flavor = "multi_thread")]
async fn namespace_members_are_own_properties_of_a_null_prototype_object() {
    let (rt, _dir) = runtime().await;
    let program = "return [Object.getPrototypeOf(tools) === null, await tools.__proto__(), await tools.constructor(), \
                   'toString' in tools, Object.isFrozen(tools), Object.keys(tools).sort()]";
    let out = rt.run(with_bindings(program, vec![tools()])).await;
    assert_eq!(
        value(&out),
        json!([
            true,
            "own proto",
            "own constructor",
            false,
            true,
            ["__proto__", "constructor", "deny", "echo", "name"]
        ])
    );
    rt.close().await;
}

/// A host rejection is an instance of the declared error class, carrying the
/// member name, the code and the message; the program can catch it.
#[tokio::test(flavor = "multi_thread")]
async fn rejections_are_typed_with_the_member_name() {
    let (rt, _dir) = runtime().await;
    let program = "try { await tools.deny({}) } catch (e) { \
                   return [e instanceof ToolError, e instanceof Error, e.name, e.tool, e.code, e.message] }";
    let out = rt.run(with_bindings(program, vec![tools()])).await;
    assert_eq!(
        value(&out),
        json!([
            true,
            true,
            "ToolError",
            "deny",
            "tools::denied",
            "tools::denied: not allowed"
        ])
    );
    let plain = BindingNamespace::new("plain")
        .function("deny", |_, _| async { Err(BindingError::message("no")) });
    let program =
        "try { await plain.deny() } catch (e) { return [e.constructor.name, e.message, e.code] }";
    assert_eq!(
        value(&rt.run(with_bindings(program, vec![plain])).await),
        json!(["Error", "no", null])
    );
    let out = rt
        .run(with_bindings("await tools.deny()", vec![tools()]))
        .await;
    assert!(
        exception(&out).starts_with("ToolError: tools::denied: not allowed"),
        "{}",
        exception(&out)
    );
    rt.close().await;
}

/// An argument JSON cannot carry is refused in the guest, where it can be caught.
#[tokio::test(flavor = "multi_thread")]
async fn non_json_argument_is_a_catchable_rejection() {
    let (rt, _dir) = runtime().await;
    for argument in [
        "{ f() {} }",
        "{ n: 1n }",
        "[undefined]",
        "new Map()",
        "(() => { const a = {}; a.a = a; return a })()",
    ] {
        let program = format!(
            "try {{ await tools.echo({argument}); return 'sent' }} catch (e) {{ return [e.name, e.message] }}"
        );
        let got = value(&rt.run(with_bindings(&program, vec![tools()])).await);
        assert_eq!(got[0], "TypeError", "{argument}: {got}");
        assert!(
            got[1]
                .as_str()
                .unwrap()
                .starts_with("tools.echo: the argument is not lossless JSON"),
            "{got}"
        );
    }
    rt.close().await;
}

/// A registrar keeps the callable under its id, tells the host `{id, options}`,
/// and drops it again when the host refuses; the kept callable is invoked by key.
#[tokio::test(flavor = "multi_thread")]
async fn registrars_keep_the_callable_and_drop_it_on_rejection() {
    let (rt, _dir) = runtime().await;
    let seen = Arc::new(Mutex::new(Vec::<Value>::new()));
    let record = seen.clone();
    let ns = BindingNamespace::new("app")
        .registrar("register", move |args, _| {
            let record = record.clone();
            async move {
                record.lock().unwrap().push(args.clone());
                if args["id"] == "app::refused" {
                    return Err(BindingError::message("refused by the host"));
                }
                Ok(json!({ "registered": args["id"] }))
            }
        })
        .error_class("AppError", "member");
    let program = "const a = await app.register('app::greet', async (p) => ({ hi: p.name }), { description: 'greets' }); \
                   let refused; try { await app.register('app::refused', () => 1) } catch (e) { refused = [e.name, e.member] } \
                   return [a, refused]";
    let out = rt.run(with_bindings(program, vec![ns])).await;
    assert_eq!(
        value(&out),
        json!([{ "registered": "app::greet" }, ["AppError", "register"]])
    );
    assert_eq!(
        *seen.lock().unwrap(),
        vec![
            json!({"id": "app::greet", "options": {"description": "greets"}}),
            json!({"id": "app::refused", "options": null})
        ]
    );
    let invoke = |key: &str| {
        task(Task::Invoke {
            key: key.into(),
            payload: json!({ "name": "ana" }),
        })
    };
    assert_eq!(
        value(&rt.run(invoke("app::greet")).await),
        json!({ "hi": "ana" })
    );
    assert!(
        exception(&rt.run(invoke("app::refused")).await)
            .contains("no handler is kept under \"app::refused\"")
    );
    rt.close().await;
}

/// `Define` keeps an ES module's `handler`; `Invoke` awaits it. A module
/// without a handler is refused and the previous handler stays.
#[tokio::test(flavor = "multi_thread")]
async fn handlers_are_defined_kept_and_invoked() {
    let (rt, _dir) = runtime().await;
    let define = |source: &str| {
        task(Task::Define {
            key: "app::count".into(),
            source: source.into(),
        })
    };
    let invoke = |payload: Value| {
        task(Task::Invoke {
            key: "app::count".into(),
            payload,
        })
    };
    let source = "let calls = 0;\nexport async function handler(payload) {\n  calls += 1;\n  await null;\n  return { calls, twice: payload.n * 2 };\n}";
    let out = rt.run(define(source)).await;
    assert!(
        matches!(out.ending, TurnEnding::Exited { exit_code: 0, .. }),
        "{:?}",
        out.ending
    );
    assert_eq!(
        value(&rt.run(invoke(json!({"n": 4}))).await),
        json!({"calls": 1, "twice": 8})
    );
    assert_eq!(
        value(&rt.run(invoke(json!({"n": 5}))).await),
        json!({"calls": 2, "twice": 10})
    );
    let text = exception(&rt.run(define("export const nothing = 1;")).await);
    assert!(text.contains("exports no handler function"), "{text}");
    assert_eq!(
        value(&rt.run(invoke(json!({"n": 1}))).await),
        json!({"calls": 3, "twice": 2})
    );
    let text = exception(&rt.run(define("export function handler( {")).await);
    assert!(text.starts_with("SyntaxError"), "{text}");
    let boom = task(Task::Define {
        key: "app::boom".into(),
        source: "export function handler(p) { throw new Error('bad ' + p) }".into(),
    });
    value_less(&rt.run(boom).await);
    let text = exception(
        &rt.run(task(Task::Invoke {
            key: "app::boom".into(),
            payload: json!("input"),
        }))
        .await,
    );
    assert!(text.starts_with("Error: bad input"), "{text}");
    rt.close().await;
}

#[track_caller]
fn value_less(out: &code_runner_core::TurnOutcome) {
    assert!(
        matches!(out.ending, TurnEnding::Exited { exit_code: 0, .. }),
        "{:?}",
        out.ending
    );
}

/// A turn that calls a function its own runtime keeps (the worker's
/// `iii.trigger` of a function the same runtime registered) does not wait
/// behind itself: the `Invoke` runs beside it in the event loop.
#[tokio::test(flavor = "multi_thread")]
async fn invoke_during_a_turn_of_the_same_runtime_does_not_deadlock() {
    let (rt, _dir) = runtime().await;
    let slot: Arc<Mutex<Option<Arc<dyn Runtime>>>> = Arc::new(Mutex::new(Some(rt.clone())));
    let weak = slot.clone();
    let ns = BindingNamespace::new("bus")
        .registrar("register", |_, _| async { Ok(Value::Null) })
        .function("call", move |args, _| {
            let rt = weak.lock().unwrap().clone();
            async move {
                let rt = rt.ok_or_else(|| BindingError::message("gone"))?;
                let key = args["id"].as_str().unwrap_or_default().to_string();
                let out = rt
                    .run(crate::task(Task::Invoke {
                        key,
                        payload: args["payload"].clone(),
                    }))
                    .await;
                match out.ending {
                    TurnEnding::Exited {
                        exit_code: 0,
                        completion: code_runner_core::Completion::Value(v),
                        ..
                    } => Ok(v),
                    other => Err(BindingError::message(format!("{other:?}"))),
                }
            }
        });
    let program = "await bus.register('self::double', async (p) => { console.log('in handler'); return p * 2 }); \
                   console.log('before'); const r = await bus.call({ id: 'self::double', payload: 21 }); console.log('after'); return r";
    let mut spec = with_bindings(program, vec![ns]);
    spec.timeout = std::time::Duration::from_secs(20);
    let out = rt.run(spec).await;
    assert_eq!(value(&out), json!(42));
    assert_eq!(
        out.stdout.render(),
        "before\nafter\n",
        "the handler's output belongs to its own turn"
    );
    slot.lock().unwrap().take();
    rt.close().await;
}

/// Binding calls past the in-flight bound are refused, not queued without end.
#[tokio::test(flavor = "multi_thread")]
async fn binding_calls_in_flight_are_bounded() {
    let (rt, _dir) = runtime().await;
    let ns = BindingNamespace::new("slow").function("wait", |_, _| std::future::pending());
    let program = "let refused = 0; \
                   for (let i = 0; i < 1100; i++) slow.wait(i).catch((e) => { if (e instanceof RangeError) refused++ }); \
                   await new Promise((r) => setTimeout(r, 50)); return refused";
    let out = rt.run(with_bindings(program, vec![ns])).await;
    assert_eq!(
        value(&out),
        json!(1100 - code_runner_v8::MAX_CALLS_IN_FLIGHT)
    );
    rt.close().await;
}

/// A namespace may shadow one of the runtime's own globals for its turns;
/// a later turn without it gets the original back, not a deleted global.
#[tokio::test(flavor = "multi_thread")]
async fn shadowed_globals_come_back_when_the_namespace_goes() {
    let (rt, _dir) = runtime().await;
    let ns = BindingNamespace::new("performance")
        .function("now", |_, _| async { Ok(json!("shadowed")) });
    let out = rt
        .run(with_bindings("return await performance.now()", vec![ns]))
        .await;
    assert_eq!(value(&out), json!("shadowed"));
    let out = rt.run(turn("return typeof performance.now()")).await;
    assert_eq!(value(&out), json!("number"));
    rt.close().await;
}

/// Converting an argument runs the guest's getters; one that throws rejects
/// the call with the guest's own error.
#[tokio::test(flavor = "multi_thread")]
async fn throwing_getter_in_an_argument_rejects_with_its_error() {
    let (rt, _dir) = runtime().await;
    let program = "try { await tools.echo({ get x() { throw new RangeError('from the getter') } }); return 'sent' } \
                   catch (e) { return [e.name, e.message] }";
    let out = rt.run(with_bindings(program, vec![tools()])).await;
    assert_eq!(value(&out), json!(["RangeError", "from the getter"]));
    rt.close().await;
}
