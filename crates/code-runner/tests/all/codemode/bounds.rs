//! Issue 44, item 2: host work on a guest's schema is bounded by work and
//! tied to the turn. A schema that expands exponentially is refused when it
//! is published; a check that would take too long on its payload is refused
//! before it starts; a turn's checks run one at a time and stop with it, so
//! a burst leaves nothing spinning and other tenants are answered.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{DESCRIBE, publish};
use crate::helpers::{INVALID_REQUEST, REGISTER, Server};

/// The review's schema: 40 `$defs`, each an `allOf` of two `$ref`s to the
/// next: 2.8 KB, about 2⁴⁰ validation steps.
fn doubling_schema() -> Value {
    let mut defs = serde_json::Map::new();
    for i in 0..40 {
        let next = format!("#/$defs/d{}", i + 1);
        defs.insert(
            format!("d{i}"),
            json!({"allOf": [{"$ref": next}, {"$ref": next}]}),
        );
    }
    defs.insert("d40".into(), json!({"type": "object"}));
    json!({"type": "object", "$defs": defs, "$ref": "#/$defs/d0"})
}

/// A tree whose every level is an `anyOf` of two references back: small
/// and legitimate to publish, but a payload nested 40 deep would cost 2⁴⁰.
fn doubling_tree() -> Value {
    json!({
        "$defs": {"node": {"type": "object", "properties": {
            "kids": {"type": "array", "items": {"anyOf": [
                {"$ref": "#/$defs/node"}, {"$ref": "#/$defs/node"}]}}}}},
        "$ref": "#/$defs/node"
    })
}

/// The exponential schema is refused at registration, from the host and
/// from guest code alike, naming the bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exponential_schema_is_refused_when_published() {
    let server = Server::start().await;
    let schema = doubling_schema();
    assert!(schema.to_string().len() < 3000);
    let answer = server
        .call(
            REGISTER,
            json!({"function_id": "bomb::go", "lang": "python",
                "source": "def handler(payload):\n    return 1\n", "request_format": schema}),
        )
        .await;
    answer.assert_error(INVALID_REQUEST, "2000 subschemas");
    let code = format!(
        "try {{ await iii.registerFunction(iii.namespace + '::go', () => 1, {{ request_format: {schema} }}); return 'published'; }} catch (e) {{ return e.message; }}"
    );
    let answer = server.run_in("node", &code).await;
    let text = answer.ok()["result"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(text.contains("2000 subschemas"), "{}", answer.ok());
}

/// 64 checks at once in a 3 s run, each of which would cost 2⁴⁰ steps: each
/// is refused at the step bound or cancelled with its turn, the run answers
/// on time, nothing runs on after it (the worker process's CPU stands still),
/// and another tenant's run and `describe` are answered meanwhile. (The
/// review saw 64 threads spinning for hours, and other tenants unanswered.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_costly_checks_stops_with_its_turn() {
    let server = Server::process("").await;
    publish(
        &server,
        "tree::walk",
        "def handler(payload):\n    return 'walked'\n",
        json!({"request_format": doubling_tree()}),
    )
    .await;
    let mut deep = json!({});
    for _ in 0..40 {
        deep = json!({"kids": [deep]});
    }
    let code = format!(
        "const deep = {deep};\n\
         const calls = Array.from({{ length: 64 }}, () => iii.fn.tree.walk(deep).then(() => 'ran', (e) => e.code));\n\
         const answers = await Promise.all(calls);\n\
         const counts = {{}}; for (const a of answers) counts[a] = (counts[a] ?? 0) + 1;\n\
         return counts;"
    );
    let started = Instant::now();
    let attack = server.run_in_with("node", &code, json!({"timeout_ms": 3000}));
    let other = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let ran = Instant::now();
        let one = server.run_in("python", "result = 6 * 7").await;
        let listed = server.call(DESCRIBE, json!({"lang": "typescript"})).await;
        (ran.elapsed(), one, listed)
    };
    let (attack, (took, one, listed)) = tokio::join!(attack, other);
    assert_eq!(one.ok()["result"], 42, "{}", one.ok());
    assert_eq!(listed.status, 200, "{}", listed.body);
    assert!(
        took < Duration::from_secs(10),
        "another tenant waited {took:?}"
    );
    // The run answers by its deadline (or times out with it), never later.
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    if attack.status == 200 {
        let counts = &attack.ok()["result"];
        assert!(counts.get("ran").is_none(), "{}", attack.ok());
    }
    // Nothing runs on: the worker's CPU stands (nearly) still after the turn.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = cpu_ticks(server.pid());
    tokio::time::sleep(Duration::from_millis(2000)).await;
    let after = cpu_ticks(server.pid());
    assert!(
        after.saturating_sub(before) <= 40,
        "the worker kept computing after the turn: {before} -> {after} ticks in 2 s"
    );
}

/// One check whose payload would take past the step bound is refused with
/// `resource_exhausted` naming it; a shallow payload passes and is checked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_past_its_step_bound_is_refused_before_it_runs() {
    let server = Server::start().await;
    publish(
        &server,
        "tree::walk",
        "def handler(payload):\n    return 'walked'\n",
        json!({"request_format": doubling_tree()}),
    )
    .await;
    let mut deep = json!({});
    for _ in 0..40 {
        deep = json!({"kids": [deep]});
    }
    let code = format!(
        "const shallow = await iii.fn.tree.walk({{ kids: [{{ kids: [] }}] }});\n\
         let bad; try {{ await iii.fn.tree.walk({{ kids: 5 }}); }} catch (e) {{ bad = e.code; }}\n\
         let deep; try {{ await iii.fn.tree.walk({deep}); }} catch (e) {{ deep = [e.code, e.message]; }}\n\
         return {{ shallow, bad, deep }};"
    );
    let started = Instant::now();
    let answer = server.run_in("node", &code).await;
    let result = &answer.ok()["result"];
    assert_eq!(result["shallow"], "walked", "{}", answer.ok());
    assert_eq!(result["bad"], INVALID_REQUEST, "{}", answer.ok());
    assert_eq!(
        result["deep"][0],
        "code-runner::resource_exhausted",
        "{}",
        answer.ok()
    );
    assert!(
        result["deep"][1]
            .as_str()
            .unwrap_or_default()
            .contains("4194304 steps"),
        "{}",
        answer.ok()
    );
    assert!(started.elapsed() < Duration::from_secs(20));
}

/// The user and system CPU ticks process `pid` has used.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command's closing parenthesis: utime is the 12th, stime the 13th.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    tick(11) + tick(12)
}
