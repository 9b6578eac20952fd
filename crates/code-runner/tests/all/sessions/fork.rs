//! Sessions that outlive their runtime (issue 47): a kept python runtime of
//! the data interpreter snapshotted through real HTTP and real wasmtime, and
//! restored as a fork that sees its state (globals, classes, closures,
//! numpy arrays, a DataFrame, /work) while the original runs on; the fork's
//! generators are reseeded; a changed, truncated or unknown snapshot is
//! refused cleanly and the worker keeps serving; a node runtime whose
//! ledger cannot be replayed and guest code are refused.

use serde_json::{Value, json};

use crate::helpers::Server;

const SETUP: &str = "import numpy as np, pandas as pd, os, random\n\
x = 41\n\
class C:\n    def __init__(self):\n        self.v = 7\n\
c = C()\n\
f = lambda n: n + x\n\
arr = np.arange(100000, dtype=np.int64)\n\
df = pd.DataFrame({'a': range(1000)})\n\
open('/work/notes.txt', 'w').write('kept')\n\
os.makedirs('/work/d', exist_ok=True)\n\
open('/work/d/e.txt', 'w').write('nested')\n\
os.symlink('notes.txt', '/work/link.txt')\n\
result = 'ready'";

const STATE: &str = "result = [x + 1, c.v, f(1), int(arr.sum()), int(df.a.sum()), open('/work/notes.txt').read(), open('/work/d/e.txt').read(), open('/work/link.txt').read()]";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_session_forks_with_its_state() {
    let server = Server::with_config("python_interpreter: data\n").await;
    let id = server.keep(SETUP).await;
    let taken = server
        .call("code-runner::snapshot", json!({"runtime_id": id}))
        .await;
    let body = taken.ok().clone();
    let snapshot_id = body["snapshot_id"].as_str().expect("an id").to_string();
    assert!(
        snapshot_id.starts_with("sn_") && snapshot_id.len() == 35,
        "{body}"
    );
    let bytes = body["bytes"].as_u64().unwrap();
    assert!(bytes > 0, "{body}");

    let restored = server
        .call("code-runner::restore", json!({"snapshot_id": snapshot_id}))
        .await;
    let fork = restored.ok()["runtime_id"]
        .as_str()
        .expect("a runtime id")
        .to_string();
    assert_ne!(fork, id);
    let expected = json!([
        42,
        7,
        42,
        4_999_950_000u64,
        499_500,
        "kept",
        "nested",
        "kept"
    ]);
    for runtime in [&fork, &id] {
        let answer = server.run_on(runtime, STATE).await;
        assert_eq!(answer.ok()["result"], expected, "{}", answer.body);
    }
    // Independent from here on: the original's change is not the fork's.
    server
        .run_on(&id, "x = 1\nopen('/work/notes.txt', 'w').write('changed')")
        .await
        .ok();
    let answer = server
        .run_on(&fork, "result = [x, open('/work/notes.txt').read()]")
        .await;
    assert_eq!(
        answer.ok()["result"],
        json!([41, "kept"]),
        "{}",
        answer.body
    );
    // The fork's generators were reseeded: its draws are not the original's.
    let draws = "import random, numpy\nresult = [random.random(), float(numpy.random.random())]";
    let (a, b) = (
        server.run_on(&id, draws).await,
        server.run_on(&fork, draws).await,
    );
    let (a, b) = (a.ok()["result"].clone(), b.ok()["result"].clone());
    assert_ne!(a[0], b[0], "random: {a} {b}");
    assert_ne!(a[1], b[1], "numpy: {a} {b}");
    // A second fork of the same snapshot sees the snapshot's state, not the first fork's.
    let again = server
        .call("code-runner::restore", json!({"snapshot_id": snapshot_id}))
        .await;
    let second = again.ok()["runtime_id"].as_str().unwrap().to_string();
    let answer = server.run_on(&second, "result = x").await;
    assert_eq!(answer.ok()["result"], 41, "{}", answer.body);

    // The same over MCP: the snapshot and restore tools.
    let mut session = crate::mcp_tools::client::Session::open(&server.url).await;
    let taken = session
        .call("snapshot", json!({"runtime_id": second}))
        .await;
    let mcp_id = taken["structuredContent"]["snapshot_id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(mcp_id.starts_with("sn_"), "{taken}");
    let restored = session
        .call("restore", json!({"snapshot_id": mcp_id}))
        .await;
    let third = restored["structuredContent"]["runtime_id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    session.close().await;
    let answer = server.run_on(&third, "result = [x, c.v]").await;
    assert_eq!(answer.ok()["result"], json!([41, 7]), "{}", answer.body);

    refusals(&server, &snapshot_id).await;
}

/// A changed, truncated, foreign, other-image, oversized or unknown
/// snapshot is refused, each saying why;
/// node runtimes and guest code are refused; the worker serves on.
async fn refusals(server: &Server, snapshot_id: &str) {
    let path = server.data_dir.join("snapshots").join(snapshot_id);
    let whole = std::fs::read(&path).unwrap();
    let restore = |id: &str| {
        let id = id.to_string();
        async move {
            server
                .call("code-runner::restore", json!({"snapshot_id": id}))
                .await
        }
    };
    let mut changed = whole.clone();
    let at = changed.len() / 2;
    changed[at] ^= 0x40;
    std::fs::write(&path, &changed).unwrap();
    restore(snapshot_id)
        .await
        .assert_error("code-runner::invalid_request", "forged");
    std::fs::write(&path, &whole[..whole.len() / 3]).unwrap();
    restore(snapshot_id)
        .await
        .assert_error("code-runner::invalid_request", "MAC does not match");
    std::fs::write(
        &path,
        b"not a snapshot at all, but long enough to have a prefix and a mac",
    )
    .unwrap();
    restore(snapshot_id)
        .await
        .assert_error("code-runner::invalid_request", "not a code-runner snapshot");
    let unknown = restore("sn_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA").await;
    assert!(
        unknown.error_message().contains("no snapshot sn_AAAA"),
        "{}",
        unknown.body
    );
    assert!(
        !unknown
            .error_message()
            .contains("sn_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"),
        "{}",
        unknown.body
    );
    // Whole and sealed with this worker's own key, but of another image:
    // refused before any of it is loaded.
    let keys = code_runner_snapshot::Keys::load_or_create(&server.data_dir).unwrap();
    let other = code_runner_snapshot::Contents {
        engine: "python-data".into(),
        image: "an-older-build-engine-0000000000000000".into(),
        created_at: 1,
        sections: vec![("pages".into(), vec![0; 4096])],
    };
    let sealed = code_runner_snapshot::seal(&other, keys.signing()).unwrap();
    std::fs::write(&path, &sealed).unwrap();
    restore(snapshot_id)
        .await
        .assert_error("code-runner::invalid_request", "another image");
    // Past max_snapshot_mb (256 MiB here): refused after reading one byte
    // more than the cap, never the rest.
    let oversized = std::fs::File::create(&path).unwrap();
    oversized.set_len((256 << 20) + 4096).unwrap();
    drop(oversized);
    restore(snapshot_id)
        .await
        .assert_error("code-runner::invalid_request", "max_snapshot_mb");
    std::fs::write(&path, &whole).unwrap();
    let answer = restore(snapshot_id).await;
    assert!(answer.ok()["runtime_id"].is_string(), "{}", answer.body);
    // Deleted, it can no longer be restored; the runtime made from it runs on.
    let forked = answer.ok()["runtime_id"].as_str().unwrap().to_string();
    let deleted = server
        .call(
            "code-runner::delete_snapshot",
            json!({"snapshot_id": snapshot_id}),
        )
        .await;
    assert_eq!(deleted.ok()["deleted"], true, "{}", deleted.body);
    assert!(!path.exists());
    restore(snapshot_id)
        .await
        .assert_error("code-runner::runtime_not_found", "no snapshot");
    let again = server
        .call(
            "code-runner::delete_snapshot",
            json!({"snapshot_id": snapshot_id}),
        )
        .await;
    assert_eq!(again.ok()["deleted"], false, "{}", again.body);
    let answer = server.run_on(&forked, "result = x").await;
    assert_eq!(answer.ok()["result"], 41, "{}", answer.body);

    // A node runtime whose turn was stopped by its timeout has a ledger
    // that cannot be replayed: it says so.
    let node = server.keep_in("node", "globalThis.x = 1; return 1").await;
    server
        .call(
            "code-runner::run",
            json!({"runtime_id": node, "code": "while (true) {}", "timeout_ms": 300}),
        )
        .await;
    let answer = server
        .call("code-runner::snapshot", json!({"runtime_id": node}))
        .await;
    answer.assert_error("code-runner::invalid_request", "snapshot_unsupported");
    let guest = format!(
        "try {{ await iii.trigger({{ function_id: 'code-runner::restore', payload: {{ snapshot_id: '{snapshot_id}' }} }}); return 'restored'; }} catch (e) {{ return String(e.message); }}"
    );
    let answer = server.run_on(&node, &guest).await;
    let said = answer.ok()["result"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(said.contains("forbidden"), "{}", answer.body);
    let guest = "try { await iii.trigger({ function_id: 'code-runner::delete_snapshot', payload: { snapshot_id: 'sn_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA' } }); return 'deleted'; } catch (e) { return String(e.message); }";
    let answer = server.run_on(&node, guest).await;
    let said = answer.ok()["result"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(said.contains("forbidden"), "{}", answer.body);
    let answer = server.run("result = 1 + 1").await;
    assert_eq!(answer.ok()["result"], Value::from(2), "{}", answer.body);
}

/// A snapshot past `max_snapshot_mb` is `resource_exhausted` naming it; the
/// runtime and the worker serve on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_past_its_cap_is_refused_and_the_runtime_serves_on() {
    let server = Server::with_config("python_interpreter: data\nmax_snapshot_mb: 1\n").await;
    let id = server
        .keep("import numpy as np\narr = np.random.random((8 << 20) // 8)")
        .await;
    let answer = server
        .call("code-runner::snapshot", json!({"runtime_id": id}))
        .await;
    answer.assert_error("code-runner::resource_exhausted", "max_snapshot_mb (1 MiB)");
    let answer = server.run_on(&id, "result = int(arr.size)").await;
    assert_eq!(answer.ok()["result"], 1 << 20, "{}", answer.body);
}
