//! `fetch` and its web classes in the real engine. No network here: the
//! `iii.fetch` binding is a host function of the test (the worker's real one
//! is tested end to end in code-runner's tests/all/egress.rs).

use std::time::Duration;

use code_runner_core::{BindingError, BindingNamespace, Bindings, TurnSpec};
use serde_json::{Value, json};

use crate::{runtime, turn, value};

/// `iii` with a `fetch` that answers with what it was asked (the body
/// echoed as it came, base64), a 201 and a header of its own; a request to
/// `refused.example` is refused the way the worker refuses, and one to
/// `slow.example` is never answered within the test.
fn with_fetch(program: &str) -> TurnSpec {
    let ns = BindingNamespace::new("iii")
        .function("fetch", |args: Value, _| async move {
            let url = args["url"].as_str().unwrap_or_default().to_owned();
            if url.contains("refused.example") {
                return Err(BindingError {
                    code: Some("code-runner::egress".into()),
                    message: "fetch to refused.example: not in egress_allow".into(),
                });
            }
            if url.contains("slow.example") {
                tokio::time::sleep(Duration::from_secs(60)).await;
            }
            Ok(json!({
                "status": 201,
                "status_text": "Created",
                "url": format!("{url}#final"),
                "redirected": true,
                "headers": [["x-seen", serde_json::to_string(&args).unwrap()], ["set-cookie", "a=1"], ["set-cookie", "b=2"]],
                "body": args.get("body").cloned().unwrap_or(json!("")),
            }))
        })
        .value("namespace", Value::Null)
        .error_class("IIIError", "member");
    let mut spec = turn(program);
    spec.bindings = Bindings::new(vec![ns]).unwrap();
    spec
}

/// The request reaches the binding as the egress contract says (method,
/// absolute URL, header pairs with lower-case names, the body as base64 with
/// its default content type) and the answer becomes a Response.
#[tokio::test(flavor = "multi_thread")]
async fn fetch_sends_the_contract_request_and_builds_the_response() {
    let (rt, _dir) = runtime().await;
    let program = r#"
        const res = await fetch("http://api.test/a/../b?q=1", {
          method: "post", headers: { "X-Token": "t" }, body: "héllo",
        });
        const seen = JSON.parse(res.headers.get("x-seen"));
        return [seen, res.status, res.statusText, res.ok, res.url, res.redirected,
                res.headers.getSetCookie(), await res.text(), res.bodyUsed,
                await res.text().catch((e) => `${e.name}: ${e.message}`)];
    "#;
    let out = rt.run(with_fetch(program)).await;
    assert_eq!(
        value(&out),
        json!([
            {
                "method": "POST",
                "url": "http://api.test/b?q=1",
                "headers": [["x-token", "t"], ["content-type", "text/plain;charset=UTF-8"]],
                "body": "aMOpbGxv",
                "pieces": true
            },
            201,
            "Created",
            true,
            "http://api.test/b?q=1#final",
            true,
            ["a=1", "b=2"],
            "héllo",
            true,
            "TypeError: Response: the body has already been read"
        ])
    );
    rt.close().await;
}

/// Bytes, URLSearchParams and JSON bodies, and the body methods on the way back.
#[tokio::test(flavor = "multi_thread")]
async fn bodies_round_trip_as_bytes_forms_and_json() {
    let (rt, _dir) = runtime().await;
    let program = r#"
        const bytes = new Uint8Array(300).map((_, i) => i & 255);
        const a = await fetch("http://api.test/", { method: "PUT", body: new DataView(bytes.buffer, 1, 299) });
        const got = await a.bytes();
        const b = await fetch(new Request("http://api.test/", { method: "POST", body: new URLSearchParams({ q: "a b&c", n: "é" }) }));
        const c = await fetch("http://api.test/", { method: "POST", headers: [["content-type", "application/json"]], body: JSON.stringify({ k: [1, 2] }) });
        return [got.length, got[0], got[298], JSON.parse(b.headers.get("x-seen")).headers, await b.text(),
                await c.json(), (await (await fetch("http://api.test/")).arrayBuffer()).byteLength];
    "#;
    let out = rt.run(with_fetch(program)).await;
    assert_eq!(
        value(&out),
        json!([
            299,
            1,
            43,
            [["content-type", "application/x-www-form-urlencoded;charset=UTF-8"]],
            "q=a+b%26c&n=%C3%A9",
            { "k": [1, 2] },
            0
        ])
    );
    rt.close().await;
}

/// A refusal is a TypeError carrying the binding's message, and guest code
/// that replaces `iii` (or `Headers`, `Request`) does not change where fetch goes.
#[tokio::test(flavor = "multi_thread")]
async fn refusals_are_type_errors_and_fetch_ignores_a_replaced_iii() {
    let (rt, _dir) = runtime().await;
    let program = r#"
        globalThis.iii = { fetch: async () => { throw new Error("hijacked") } };
        globalThis.Headers = globalThis.Request = function () { throw new Error("hijacked") };
        const refused = await fetch("https://refused.example/x").catch((e) => [e instanceof TypeError, e.message, e.code]);
        const ok = await fetch("http://api.test/");
        return [refused, ok.status];
    "#;
    let out = rt.run(with_fetch(program)).await;
    assert_eq!(
        value(&out),
        json!([
            [
                true,
                "fetch to refused.example: not in egress_allow",
                "code-runner::egress"
            ],
            201
        ])
    );
    rt.close().await;
}

/// An abort rejects at once with the signal's reason, while the host has
/// not answered; a signal aborted before the call never reaches the host.
#[tokio::test(flavor = "multi_thread")]
async fn abort_rejects_without_waiting_for_the_host() {
    let (rt, _dir) = runtime().await;
    let program = r#"
        const controller = new AbortController();
        const pending = fetch("http://slow.example/", { signal: controller.signal });
        setTimeout(() => controller.abort(), 50);
        const aborted = await pending.catch((e) => [e.name, e.code, e instanceof DOMException, e instanceof Error]);
        const timedOut = await fetch("http://slow.example/", { signal: AbortSignal.timeout(50) }).catch((e) => e.name);
        const early = await fetch("https://refused.example/", { signal: AbortSignal.abort("why") }).catch((e) => e);
        return [aborted, timedOut, early];
    "#;
    let out = rt.run(with_fetch(program)).await;
    assert_eq!(
        value(&out),
        json!([["AbortError", 20, true, true], "TimeoutError", "why"])
    );
    rt.close().await;
}

/// Without an `iii.fetch` binding, fetch rejects with a TypeError saying so.
#[tokio::test(flavor = "multi_thread")]
async fn without_the_binding_fetch_says_there_is_no_network() {
    let (rt, _dir) = runtime().await;
    let out = rt
        .run(turn(
            "return await fetch('http://api.test/').catch((e) => [e.name, e.message])",
        ))
        .await;
    assert_eq!(
        value(&out),
        json!([
            "TypeError",
            "fetch: this runtime has no network (no egress binding)"
        ])
    );
    rt.close().await;
}

/// Headers, URL, URLSearchParams and Response behave as the standard says,
/// without any network.
#[tokio::test(flavor = "multi_thread")]
async fn web_classes_follow_the_standard() {
    let (rt, _dir) = runtime().await;
    let program = r#"
        const h = new Headers([["B", "1"], ["a", " 2 "], ["b", "3"], ["Set-Cookie", "x=1"], ["set-cookie", "y=2"]]);
        h.append("C", "4"); h.delete("c");
        const headers = [[...h], h.get("b"), h.has("A"), h.getSetCookie(), [...h.keys()].length];
        let bad; try { h.set("bad name", "v") } catch (e) { bad = e.name }
        const p = new URLSearchParams("?a=1&b=%20x+y&c=%zz&a=2");
        p.append("d", "é &"); p.delete("c");
        const params = [[...p], p.getAll("a"), p.toString(), p.size];
        const u = new URL("../c/./d?x=1#h", "https://User@Example.COM:443/a/b");
        u.searchParams.set("y", "2 3");
        const url = [u.href, u.origin, u.host, u.pathname, u.search, u.hash, new URL("http://0x7f.1:8080").host,
                     URL.canParse("nope"), new URL("http://[::1]/").hostname];
        const r = Response.json({ z: 1 }, { status: 202, headers: { "X-A": "b" } });
        const c = r.clone();
        const response = [r.status, r.ok, r.headers.get("content-type"), await r.json(), await c.text(), r.bodyUsed, c.bodyUsed,
                          new Response(null, { status: 404 }).ok];
        let status; try { new Response("x", { status: 204 }) } catch (e) { status = e.name }
        return [headers, bad, params, url, response, status, Object.prototype.toString.call(h)];
    "#;
    let out = rt.run(turn(program)).await;
    assert_eq!(
        value(&out),
        json!([
            [
                [["a", "2"], ["b", "1, 3"], ["set-cookie", "x=1"], ["set-cookie", "y=2"]],
                "1, 3",
                true,
                ["x=1", "y=2"],
                4
            ],
            "TypeError",
            [
                [["a", "1"], ["b", " x y"], ["a", "2"], ["d", "é &"]],
                ["1", "2"],
                "a=1&b=+x+y&a=2&d=%C3%A9+%26",
                4
            ],
            [
                "https://User@example.com/c/d?x=1&y=2+3#h",
                "https://example.com",
                "example.com",
                "/c/d",
                "?x=1&y=2+3",
                "#h",
                "127.0.0.1:8080",
                false,
                "[::1]"
            ],
            [202, true, "application/json", { "z": 1 }, "{\"z\":1}", true, true, false],
            "TypeError",
            "[object Headers]"
        ])
    );
    rt.close().await;
}
