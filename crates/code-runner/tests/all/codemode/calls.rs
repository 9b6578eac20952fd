//! `iii.fn` through real runs: a call by name in node and both python
//! forms (keywords, one dict), a payload its request schema refuses (an
//! error naming the path and the rule, which never reaches the handler), an
//! unknown name, and a name two ids share.

use serde_json::json;

use super::{publish, with_greet};
use crate::helpers::{INVALID_REQUEST, Server};

/// Node awaits `iii.fn.my_app.greet({name})`; python calls it with
/// keywords and with one dict; each call reaches `my-app::greet`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_by_name_reaches_the_function_in_both_languages() {
    let server = with_greet().await;
    let node = server
        .run_in("node", "return await iii.fn.my_app.greet({ name: 'Ada' });")
        .await;
    assert_eq!(node.ok()["result"], "hello Ada #1", "{}", node.ok());
    let python = server
        .run("result = [iii.fn.my_app.greet(name='Bo'), iii.fn.my_app.greet({'name': 'Cy', 'lang': 'pt'})]")
        .await;
    assert_eq!(
        python.ok()["result"],
        json!(["hello Bo #2", "hello Cy #3"]),
        "{}",
        python.ok()
    );
}

/// A payload the request schema refuses fails in the guest with
/// `invalid_request`, naming the payload's path and the schema's rule, and
/// the handler never sees it (its count does not move).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payload_the_schema_refuses_never_reaches_the_handler() {
    let server = with_greet().await;
    let node = server
        .run_in(
            "node",
            "try { await iii.fn.my_app.greet({ name: 5 }); return 'sent'; } catch (e) { return [e.code, e.message]; }",
        )
        .await;
    let refused = &node.ok()["result"];
    assert_eq!(refused[0], INVALID_REQUEST, "{}", node.ok());
    let message = refused[1].as_str().unwrap();
    assert!(message.contains("my-app::greet"), "{message}");
    assert!(message.contains("at /name"), "{message}");
    assert!(message.contains("/properties/name/type"), "{message}");

    let python = server
        .run(
            "try:\n    iii.fn.my_app.greet(name='x', lang='fr')\n    result = 'sent'\nexcept IIIError as e:\n    result = [e.code, e.message]\n",
        )
        .await;
    let refused = &python.ok()["result"];
    assert_eq!(refused[0], INVALID_REQUEST, "{}", python.ok());
    let message = refused[1].as_str().unwrap();
    assert!(message.contains("at /lang"), "{message}");
    assert!(message.contains("/properties/lang/enum"), "{message}");
    let missing = server
        .run("try:\n    iii.fn.my_app.greet({})\nexcept IIIError as e:\n    result = e.message\n")
        .await;
    assert!(
        missing.ok()["result"]
            .as_str()
            .unwrap()
            .contains("required"),
        "{}",
        missing.ok()
    );

    let valid = server.run("result = iii.fn.my_app.greet(name='Di')").await;
    assert_eq!(valid.ok()["result"], "hello Di #1", "{}", valid.ok());
}

/// An unknown name is `function_not_found`; a name two ids share is refused
/// with both ids, and `iii.trigger` still calls either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_and_clashing_names_are_refused() {
    let server = Server::start().await;
    let echo = "def handler(payload):\n    return payload\n";
    publish(&server, "clash::say-hi", echo, json!({})).await;
    publish(&server, "clash::say_hi", echo, json!({})).await;
    let node = server
        .run_in(
            "node",
            "const out = [];\nfor (const f of [() => iii.fn.nope.nothing({}), () => iii.fn.clash.say_hi({})]) {\n  try { await f(); out.push('sent'); } catch (e) { out.push([e.code, e.message]); }\n}\nout.push(await iii.trigger({ function_id: 'clash::say-hi', payload: 1 }));\nreturn out;",
        )
        .await;
    let out = &node.ok()["result"];
    assert_eq!(out[0][0], "function_not_found", "{}", node.ok());
    assert!(out[0][1].as_str().unwrap().contains("iii.fn.nope.nothing"));
    assert_eq!(out[1][0], INVALID_REQUEST, "{}", node.ok());
    let message = out[1][1].as_str().unwrap();
    assert!(
        message.contains("clash::say-hi") && message.contains("clash::say_hi"),
        "{message}"
    );
    assert_eq!(out[2], 1);
    let python = server
        .run("try:\n    iii.fn.clash.say_hi()\nexcept IIIError as e:\n    result = e.code\n")
        .await;
    assert_eq!(python.ok()["result"], INVALID_REQUEST, "{}", python.ok());
}

/// Both python interpreters take `iii.fn`: the lean one, and the data one
/// (the default, with the data stack `scripts/test` installs);
/// keywords and one dict, and a refused payload, in each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_python_interpreters_call_by_name() {
    for (yaml, interpreter) in [("python_interpreter: lean\n", "lean"), ("", "data")] {
        let server = Server::with_config(yaml).await;
        let health = server.get("/healthz").await;
        // `scripts/test` installs the data stack, so the default is data.
        assert_eq!(
            health.ok()["engines"]["python_interpreter"],
            interpreter,
            "{}",
            health.body
        );
        publish(
            &server,
            "my-app::greet",
            super::GREET,
            json!({"request_format": super::greet_format()}),
        )
        .await;
        let answer = server
            .run("out = [iii.fn.my_app.greet(name='Bo'), iii.fn.my_app.greet({'name': 'Cy'})]\ntry:\n    iii.fn.my_app.greet(name=1)\nexcept IIIError as e:\n    out.append(e.code)\nresult = out\n")
            .await;
        assert_eq!(
            answer.ok()["result"],
            json!(["hello Bo #1", "hello Cy #2", INVALID_REQUEST]),
            "{interpreter}: {}",
            answer.ok()
        );
    }
}
