//! Runtimes are isolated from each other and from the embedding layer.

use serde_json::json;

use crate::{runtime, turn, value};

/// Two runtimes share nothing: globals, prototypes, random sequences.
#[tokio::test(flavor = "multi_thread")]
async fn runtimes_share_no_state() {
    let (a, _da) = runtime().await;
    let (b, _db) = runtime().await;
    value(
        &a.run(turn(
            "globalThis.secret = 's3cr3t'; Array.prototype.leak = 1; return 1",
        ))
        .await,
    );
    let out = b
        .run(turn("return [typeof secret, [].leak === undefined]"))
        .await;
    assert_eq!(value(&out), json!(["undefined", true]));
    let ra = value(&a.run(turn("return [Math.random(), Math.random()]")).await);
    let rb = value(&b.run(turn("return [Math.random(), Math.random()]")).await);
    assert_ne!(ra, rb, "two runtimes drew the same random numbers");
    a.close().await;
    b.close().await;
}

/// Nothing of deno_core is reachable: not its namespace, not its ops, not
/// through the functions the bootstrap left behind.
#[tokio::test(flavor = "multi_thread")]
async fn embedding_layer_is_unreachable() {
    let (rt, _dir) = runtime().await;
    let program = r#"
        const found = [];
        for (const name of Object.getOwnPropertyNames(globalThis)) {
            if (/^(Deno|__bootstrap|__code_runner__|WebAssembly)$/.test(name)) found.push(name);
        }
        for (const fn of [console.log, setTimeout, performance.now, structuredClone]) {
            for (const key of ['caller', 'arguments']) { try { if (fn[key]) found.push(key) } catch {} }
        }
        try { await import('ext:core/ops'); found.push('ext:core/ops') } catch {}
        return found;
    "#;
    assert_eq!(value(&rt.run(turn(program)).await), json!([]));
    rt.close().await;
}
