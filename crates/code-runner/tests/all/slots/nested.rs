//! A guest cannot hoard capacity through what its `iii.trigger` calls start
//! (issue 9, item 8), in either language: runtimes nested `keep: true` runs
//! keep belong to the runtime that started them, count against an eighth of
//! `max_runtimes` for the whole tree, and are torn down with it; namespaces
//! guest code registers hold another eighth, in all. Before the fix, one run
//! held 30 of 32 slots for the idle TTL with the ids thrown away.

use std::time::Duration;

use serde_json::json;

use crate::helpers::lang::{LANGS, pick, returning};
use crate::helpers::{CAPACITY, EXPIRED, Server, wait_until};

/// A guest in `lang` that asks for ten nested kept runs of `lang`: the ids
/// and the refusals.
fn hoard(lang: &str) -> &'static str {
    pick(
        lang,
        r#"
kept, refused = [], []
for _ in range(10):
    try:
        answer = iii.trigger({"function_id": "code-runner::run",
                              "payload": {"lang": "python", "keep": True, "code": "pass"}})
        kept.append(answer["runtime_id"])
    except IIIError as e:
        refused.append([e.code, e.message])
result = {"kept": kept, "refused": refused}
"#,
        r#"
const kept = [], refused = [];
for (let i = 0; i < 10; i++) {
  try {
    const answer = await iii.trigger({ function_id: "code-runner::run",
                                       payload: { lang: "node", keep: true, code: "" } });
    kept.push(answer.runtime_id);
  } catch (e) {
    refused.push([e.code, e.message]);
  }
}
return { kept, refused };
"#,
    )
}

/// A one-shot run keeps at most its share (2 of 16 here) through nested
/// calls; the rest are `capacity` naming the share; when the run ends its
/// nested runtimes are gone and every slot is free again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_keeps_are_bounded_and_end_with_the_run() {
    let server = Server::with_config("max_runtimes: 16\nwarm_pool: 0\n").await;
    let live = server.live();
    for lang in LANGS {
        let answer = server
            .run_in_with(lang, hoard(lang), json!({"timeout_ms": 30_000}))
            .await;
        let body = answer.ok();
        assert_eq!(body["exit_code"], 0, "{lang}: {body}");
        let kept = body["result"]["kept"].as_array().unwrap();
        let refused = body["result"]["refused"].as_array().unwrap();
        assert_eq!(kept.len(), 2, "{lang}: {body}");
        assert_eq!(refused.len(), 8, "{lang}: {body}");
        assert_eq!(refused[0][0], CAPACITY, "{lang}");
        assert!(
            refused[0][1].as_str().unwrap().contains("at most 2"),
            "{lang}: {body}"
        );
        wait_until(
            "the nested runtimes are torn down",
            Duration::from_secs(60),
            || live() == 0,
        )
        .await;
        for id in kept {
            server
                .run_on(id.as_str().unwrap(), &returning(lang, "1"))
                .await
                .assert_error(EXPIRED, "torn down");
        }
        // A second run gets a share of its own.
        let again = server
            .run_in_with(lang, hoard(lang), json!({"timeout_ms": 30_000}))
            .await;
        assert_eq!(
            again.ok()["result"]["kept"].as_array().unwrap().len(),
            2,
            "{lang}"
        );
        wait_until(
            "the second run's share is free",
            Duration::from_secs(60),
            || live() == 0,
        )
        .await;
    }
}

/// Grandchildren count against the same share: a nested kept runtime that
/// keeps more in turn cannot exceed the tree's share.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_share_covers_the_whole_tree() {
    let server = Server::with_config("max_runtimes: 16\nwarm_pool: 0\n").await;
    let python = r#"
child = iii.trigger({"function_id": "code-runner::run",
                     "payload": {"lang": "python", "keep": True, "code": "pass"}})["runtime_id"]
inner = iii.trigger({"function_id": "code-runner::run", "payload": {"runtime_id": child, "code": '''
kept, refused = 0, 0
for _ in range(5):
    try:
        iii.trigger({"function_id": "code-runner::run", "payload": {"lang": "python", "keep": True, "code": "pass"}})
        kept += 1
    except IIIError as e:
        refused += 1
result = [kept, refused]
'''}})
result = inner["result"]
"#;
    let node = r#"
const child = (await iii.trigger({ function_id: "code-runner::run",
  payload: { lang: "node", keep: true, code: "" } })).runtime_id;
const inner = await iii.trigger({ function_id: "code-runner::run", payload: { runtime_id: child, code: `
let kept = 0, refused = 0;
for (let i = 0; i < 5; i++) {
  try {
    await iii.trigger({ function_id: "code-runner::run", payload: { lang: "node", keep: true, code: "" } });
    kept++;
  } catch (e) {
    refused++;
  }
}
return [kept, refused];
` } });
return inner.result;
"#;
    let live = server.live();
    for lang in LANGS {
        let answer = server
            .run_in_with(
                lang,
                pick(lang, python, node),
                json!({"timeout_ms": 30_000}),
            )
            .await;
        assert_eq!(
            answer.ok()["result"],
            json!([1, 4]),
            "{lang}: {}",
            answer.body
        );
        wait_until(
            "the whole tree is torn down",
            Duration::from_secs(60),
            || live() == 0,
        )
        .await;
    }
}

/// Nested runtimes of a kept runtime live as long as it: usable from the
/// host by id meanwhile, expired once their starter is torn down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_keeps_of_a_kept_runtime_end_with_it() {
    let server = Server::with_config("warm_pool: 0\n").await;
    let live = server.live();
    for lang in LANGS {
        let start = pick(
            lang,
            "child = iii.trigger({'function_id': 'code-runner::run', 'payload': {'lang': 'python', 'keep': True, 'code': 'x = 7'}})['runtime_id']",
            "globalThis.child = (await iii.trigger({ function_id: 'code-runner::run', payload: { lang: 'node', keep: true, code: 'globalThis.x = 7' } })).runtime_id",
        );
        let parent = server.keep_in(lang, start).await;
        let child = server.run_on(&parent, &returning(lang, "child")).await;
        let child = child.ok()["result"].as_str().unwrap().to_string();
        assert_eq!(
            server.run_on(&child, &returning(lang, "x")).await.ok()["result"],
            7,
            "{lang}"
        );
        let torn = server.teardown(&parent).await;
        assert_eq!(torn.ok()["torn_down"], true, "{lang}");
        server
            .run_on(&child, &returning(lang, "x"))
            .await
            .assert_error(EXPIRED, "torn down");
        wait_until("no runtime is left", Duration::from_secs(60), || {
            live() == 0
        })
        .await;
    }
}

/// A guest in `lang` that registers `{prefix}0::f` … `{prefix}3::f`
/// through `iii.trigger` of `register_function`: per id, "ok" or the
/// refusal's code and message.
fn register_four(lang: &str, prefix: &str) -> String {
    pick(
        lang,
        format!(
            "done = []\nfor i in range(4):\n    try:\n        iii.trigger({{'function_id': 'code-runner::register_function', 'payload': \
             {{'function_id': '{prefix}%d::f' % i, 'lang': 'python', 'source': 'def handler(p):\\n    return 1'}}}})\n        done.append('ok')\n\
             \x20   except IIIError as err:\n        done.append(err.code + ' ' + err.message)\nresult = done"
        ),
        format!(
            "const done = [];\nfor (let i = 0; i < 4; i++) {{\n  try {{\n    await iii.trigger({{ function_id: 'code-runner::register_function', payload: \
             {{ function_id: `{prefix}${{i}}::f`, lang: 'node', source: 'export function handler() {{ return 1; }}' }} }});\n    done.push('ok');\n\
             \x20 }} catch (err) {{ done.push(err.code + ' ' + err.message); }}\n}}\nreturn done;"
        ),
    )
}

/// Namespaces registered by guest code outlive the runs that registered
/// them, so all of them together hold at most an eighth of `max_runtimes`.
/// Before, each one-shot run could register its own share (4) and keep it:
/// eight runs held 31 of 32 slots, exempt from the idle sweep, for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespaces_registered_by_guests_cannot_take_every_slot() {
    for lang in LANGS {
        let server = Server::start().await;
        let long = json!({"timeout_ms": 60_000});
        let first = server
            .run_in_with(lang, &register_four(lang, "first"), long.clone())
            .await;
        assert_eq!(
            first.ok()["result"],
            json!(["ok", "ok", "ok", "ok"]),
            "{lang}"
        );
        let second = server
            .run_in_with(lang, &register_four(lang, "second"), long.clone())
            .await;
        let body = second.ok();
        for refusal in body["result"].as_array().unwrap() {
            let text = refusal.as_str().unwrap_or_default();
            assert!(text.starts_with("code-runner::capacity"), "{lang}: {body}");
            assert!(text.contains("registered by guest code"), "{lang}: {body}");
        }
        let health = server.get("/healthz").await;
        assert_eq!(health.ok()["runtimes"]["live"], 4, "{}", health.body);
        // A host call still registers; a namespace torn down makes room.
        server
            .call(
                "code-runner::register_function",
                json!({"function_id": "host::f", "lang": "python", "source": "def handler(p):\n    return 2"}),
            )
            .await
            .ok();
        server
            .call("code-runner::teardown", json!({"namespace": "first0"}))
            .await
            .ok();
        let third = server
            .run_in_with(lang, &register_four(lang, "third"), long)
            .await;
        assert_eq!(third.ok()["result"][0], "ok", "{lang}");
        server.assert_still_serves().await;
    }
}
