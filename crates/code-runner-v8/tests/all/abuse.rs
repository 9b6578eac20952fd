//! What a hostile guest tried against the engine (issue 16's review), each
//! through real V8: the bootstrap under guest prototypes, allocations no cap
//! counted, and compiles that took the host's memory. The cases whose
//! regression aborts the process run in a child process (see [`in_child`]).

use std::time::{Duration, Instant};

use code_runner_core::{Fault, RuntimeOptions, TurnEnding, TurnOutcome, TurnSpec};
use serde_json::json;

use crate::{exception, in_child, runtime, runtime_with, turn, value, with_iii};

/// "Answered in time" on a busy machine, for budgets well under a second.
const IN_TIME: Duration = Duration::from_secs(10);

fn heap_128() -> RuntimeOptions {
    RuntimeOptions {
        heap_mb: 128,
        ..RuntimeOptions::default()
    }
}

#[track_caller]
fn assert_exhausted(out: &TurnOutcome) {
    match &out.ending {
        TurnEnding::Faulted(Fault::ResourceExhausted(_)) => {}
        TurnEnding::Exited { exit_code: 1, .. } => {}
        other => panic!(
            "expected resource_exhausted or a caught error, got {other:?}; stderr: {}",
            out.stderr.render()
        ),
    }
}

/// Resident memory of this process, in MiB.
fn rss_mib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb / 1024)
}

/// A 1 GiB string in a 128 MiB heap, twice in one run: it was allowed once
/// (RSS +1 GiB) and the second one was V8's fatal out-of-memory abort of
/// the whole process.
#[test]
fn a_string_larger_than_the_heap_never_aborts() {
    in_child("abuse::child_huge_strings");
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "run by a_string_larger_than_the_heap_never_aborts in a child process"]
async fn child_huge_strings() {
    let (rt, _dir) = runtime_with(heap_128()).await;
    for program in [
        r#"return "\u1234".repeat(2**29 - 24).indexOf("y")"#,
        r#"let a = "\u1234".repeat(2**29 - 24).indexOf("y"); let b = "\u4321".repeat(2**29 - 24).indexOf("y"); return a + b"#,
        r#"let s = "\u1234"; for (let i = 0; i < 28; i++) s += s; return s.indexOf("y") + s.slice(1).indexOf("z")"#,
    ] {
        let out = rt.run(slow(program)).await;
        assert_exhausted(&out);
        assert_eq!(value(&rt.run(turn("return 2 + 2")).await), json!(4));
    }
    rt.close().await;
}

/// V8 admits a huge string without asking the heap callback (its young
/// large-object space takes its first object whatever its size) and again
/// after each scavenge: a turn making a new 1 GiB string each round in a
/// 128 MiB heap ran every round, and the condemned isolate kept its
/// gigabyte until the runtime's next turn. A collection that finds the heap
/// past its cap now condemns the isolate, and a condemned isolate is
/// dropped as soon as its last turn ends.
#[test]
fn a_runtime_past_its_heap_cap_is_stopped_and_dropped() {
    in_child("abuse::child_past_heap_cap");
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "run by a_runtime_past_its_heap_cap_is_stopped_and_dropped in a child process"]
async fn child_past_heap_cap() {
    let (rt, _dir) = runtime_with(heap_128()).await;
    let before = rss_mib();
    let out = rt
        .run(slow(
            r#"for (let i = 0; i < 8; i++) { console.log(i); "\u1234".repeat(2**29 - 24).indexOf("y"); } return "every round""#,
        ))
        .await;
    assert!(
        matches!(out.ending, TurnEnding::Faulted(Fault::ResourceExhausted(_))),
        "{:?}",
        out.ending
    );
    let rounds = out.stdout.render().lines().count();
    assert!(rounds < 8, "{rounds} rounds of 1 GiB ran");
    // The runtime stays open and runs nothing more: its memory goes anyway.
    let mut held = rss_mib().saturating_sub(before);
    for _ in 0..100 {
        if held < 400 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        held = rss_mib().saturating_sub(before);
    }
    assert!(
        held < 400,
        "the runtime still holds {held} MiB after its turn"
    );
    assert_eq!(value(&rt.run(turn("return 2 + 2")).await), json!(4));
    rt.close().await;
}

/// A turn writing a gigabyte: a budget for a loaded machine.
fn slow(program: &str) -> TurnSpec {
    let mut spec = turn(program);
    spec.timeout = Duration::from_secs(180);
    spec
}

/// Guest code ran inside the bootstrap after the deadline was disarmed: a
/// setter on `Array.prototype[0]` and one pending timer made `endTurn`
/// loop, the run never answered and a core spun until restart. The same
/// poison on `Object.prototype` (`get`, `set`) broke every property
/// descriptor the bootstrap made.
#[tokio::test(flavor = "multi_thread")]
async fn guest_prototypes_never_run_inside_the_bootstrap() {
    let (rt, _dir) = runtime().await;
    let poison = r#"
        globalThis.hits = 0;
        const trap = { set(v) { globalThis.hits++; for (;;) {} }, get() { globalThis.hits++; for (;;) {} }, configurable: true };
        Object.defineProperty(Array.prototype, 0, trap);
        Object.defineProperty(Array.prototype, 1, trap);
        Object.defineProperty(Object.prototype, "get", { get() { globalThis.hits++; return () => 1; }, configurable: true });
        Object.defineProperty(Object.prototype, "set", { get() { globalThis.hits++; return () => 1; }, configurable: true });
        setTimeout(() => {}, 100000);
        setTimeout(() => {}, 100000);
        return 1;
    "#;
    let started = Instant::now();
    let answered = tokio::time::timeout(Duration::from_secs(30), rt.run(turn(poison))).await;
    let out = answered.expect("the poisoned turn answers (it never did)");
    assert_eq!(value(&out), json!(1));
    assert!(started.elapsed() < IN_TIME, "{:?}", started.elapsed());
    // The next turns of the kept runtime run, print and throw as usual, and
    // no bootstrap path touched the traps.
    let out = rt
        .run(turn("setTimeout(() => {}, 100000); console.log('x', [1, 2], {a: 1}); return globalThis.hits"))
        .await;
    assert_eq!(value(&out), json!(0), "stdout: {}", out.stdout.render());
    assert_eq!(out.stdout.render(), "x [ 1, 2 ] { a: 1 }\n");
    let thrown = exception(&rt.run(turn("throw new Error('boom')")).await);
    assert!(thrown.contains("boom"), "{thrown}");
    assert_eq!(
        value(&rt.run(turn("return globalThis.hits")).await),
        json!(0)
    );
    rt.close().await;
}

/// `structuredClone` wrote a string once per reference into a buffer
/// outside both caps: 384 references to one 8 MiB string grew the host by
/// 3.2 GB. The clone is now a walk on the heap: strings are shared.
#[test]
fn structured_clone_shares_strings_and_keeps_its_semantics() {
    // Alone in a process: the host's growth is measured, other tests' memory is not.
    in_child("abuse::child_structured_clone_shares_strings_and_keeps_its_semantics");
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "run by structured_clone_shares_strings_and_keeps_its_semantics in a child process"]
async fn child_structured_clone_shares_strings_and_keeps_its_semantics() {
    let (rt, _dir) = runtime().await;
    let before = rss_mib();
    let out = rt
        .run(turn(
            "const s = 'x'.repeat(8 * 2**20); const c = structuredClone(new Array(384).fill(s)); return [c.length, c[383].length]",
        ))
        .await;
    assert_eq!(value(&out), json!([384, 8 << 20]));
    let grown = rss_mib().saturating_sub(before);
    assert!(grown < 512, "the host grew by {grown} MiB");
    let out = rt
        .run(turn(
            r#"
            const o = { n: 1, s: "t", d: new Date(5), r: /a+/gi, m: new Map([[1, {x: 2}]]), st: new Set([3]),
                        u: new Uint16Array([1, 2, 3]).subarray(1), b: new ArrayBuffer(4), e: new RangeError("bad"), big: 10n,
                        nested: [1, , 3] };
            o.self = o;
            const c = structuredClone(o);
            let refused = [];
            for (const bad of [() => 1, Symbol("s"), { f() {} }]) {
              try { structuredClone(bad); refused.push("no"); } catch (e) { refused.push(e.name); }
            }
            return [c !== o, c.self === c, c.d.getTime(), c.r.source + c.r.flags, c.m.get(1).x, c.st.has(3),
                    Array.from(c.u), c.u.byteOffset, c.b.byteLength, c.e instanceof RangeError, c.e.message,
                    typeof c.big, 1 in c.nested, c.nested.length, refused];
            "#,
        ))
        .await;
    assert_eq!(
        value(&out),
        json!([
            true,
            true,
            5,
            "a+gi",
            2,
            true,
            [2, 3],
            2,
            4,
            true,
            "bad",
            "bigint",
            false,
            3,
            ["DataCloneError", "DataCloneError", "DataCloneError"]
        ])
    );
    rt.close().await;
}

/// Resizable and shared buffers are standard JavaScript again (they were
/// refused outright, which failed 32 of test262's sample): made, resized,
/// grown, transferred, subclassed, and used with `Atomics`.
#[tokio::test(flavor = "multi_thread")]
async fn resizable_and_shared_buffers_work_as_in_node() {
    let (rt, _dir) = runtime().await;
    let out = rt
        .run(turn(
            r#"
            const rab = new ArrayBuffer(8, { maxByteLength: 64 });
            const tracking = new Uint8Array(rab);
            const made = [rab.byteLength, rab.resizable, rab.maxByteLength, tracking.length];
            rab.resize(32);
            tracking[31] = 7;
            let past;
            try { rab.resize(65); } catch (e) { past = e.name; }
            const moved = rab.transfer();
            const sab = new SharedArrayBuffer(4, { maxByteLength: 16 });
            sab.grow(16);
            const shared = new Int32Array(sab);
            Atomics.add(shared, 0, 5);
            Atomics.store(shared, 1, 9);
            const swapped = Atomics.compareExchange(shared, 1, 9, 10);
            class Mine extends ArrayBuffer {}
            const mine = new Mine(0, { maxByteLength: 8 });
            mine.resize(8);
            const getter = { get maxByteLength() { getter.reads++; return 16; }, reads: 0 };
            new ArrayBuffer(1, getter);
            let below;
            try { new ArrayBuffer(9, { maxByteLength: 8 }); } catch (e) { below = e.name; }
            return [made, [rab.detached, moved.byteLength, moved.resizable, moved.maxByteLength, new Uint8Array(moved)[31]], past,
                    [sab.byteLength, sab.growable, sab.maxByteLength, Atomics.load(shared, 0), swapped, Atomics.load(shared, 1),
                     Atomics.notify(shared, 0, 1), new SharedArrayBuffer(8).byteLength, typeof Atomics.waitAsync],
                    [mine instanceof Mine, mine.byteLength, mine.resizable], getter.reads, below,
                    [new ArrayBuffer(8).resizable, new ArrayBuffer(undefined).byteLength, new ArrayBuffer(4, {}).resizable,
                     new ArrayBuffer(4, null).resizable, ArrayBuffer.prototype.transfer.length]];
            "#,
        ))
        .await;
    assert_eq!(
        value(&out),
        json!([
            [8, true, 64, 8],
            [true, 32, true, 64, 7],
            "RangeError",
            [16, true, 16, 5, 9, 10, 0, 8, "function"],
            [true, 8, true],
            1,
            "RangeError",
            [false, 0, false, false, 0]
        ])
    );
    rt.close().await;
}

/// What V8 reserves for a resizable buffer (its `maxByteLength`) is charged
/// to external_mb when the buffer is made, before V8 reserves anything: a
/// `maxByteLength` of 2^40 (or anything past the budget) is a RangeError,
/// reservations and plain buffers share one budget, and a buffer nobody
/// holds gives its reservation back. Before the guards a resizable buffer
/// grew to 1.25 GiB under a 64 MiB cap.
#[tokio::test(flavor = "multi_thread")]
async fn resizable_buffers_are_charged_to_external_mb() {
    let (rt, _dir) = runtime().await;
    let out = rt
        .run(turn(
            r#"
            const tries = [];
            const attempt = (f) => { try { f(); tries.push("made"); } catch (e) { tries.push(e.name); } };
            attempt(() => new ArrayBuffer(0, { maxByteLength: 2 ** 40 }));
            attempt(() => new SharedArrayBuffer(0, { maxByteLength: 2 ** 40 }));
            attempt(() => new ArrayBuffer(0, { maxByteLength: 65 * 2 ** 20 }));
            const held = new ArrayBuffer(0, { maxByteLength: 40 * 2 ** 20 });
            attempt(() => new ArrayBuffer(0, { maxByteLength: 30 * 2 ** 20 }));
            attempt(() => new Uint8Array(30 * 2 ** 20));
            attempt(() => { class Mine extends SharedArrayBuffer {}; new Mine(0, { maxByteLength: 30 * 2 ** 20 }); });
            // Only one of these fits beside `held` at a time.
            for (let i = 0; i < 40; i++) new ArrayBuffer(0, { maxByteLength: 20 * 2 ** 20 }).resize(20 * 2 ** 20);
            held.resize(40 * 2 ** 20);
            new Uint8Array(held).fill(1);
            const moved = held.transfer();
            attempt(() => new ArrayBuffer(0, { maxByteLength: 30 * 2 ** 20 }));
            let message;
            try { new ArrayBuffer(0, { maxByteLength: 2 ** 40 }); } catch (e) { message = e.message; }
            return [tries, moved.byteLength, message.includes("external_mb")];
            "#,
        ))
        .await;
    assert_eq!(
        value(&out),
        json!([
            [
                "RangeError",
                "RangeError",
                "RangeError",
                "RangeError",
                "RangeError",
                "RangeError",
                "RangeError"
            ],
            40 << 20,
            true
        ])
    );
    // Uncaught, the refusal is the runtime's resource_exhausted.
    let out = rt
        .run(turn("new SharedArrayBuffer(0, { maxByteLength: 2 ** 40 })"))
        .await;
    match &out.ending {
        TurnEnding::Faulted(Fault::ResourceExhausted(message)) => {
            assert!(
                message.contains("external memory limit 64 MiB"),
                "{message}"
            )
        }
        other => panic!("expected resource_exhausted, got {other:?}"),
    }
    // Once the buffers are gone, the whole budget is there again.
    let out = rt
        .run(turn(
            "const b = new ArrayBuffer(0, { maxByteLength: 60 * 2 ** 20 }); b.resize(60 * 2 ** 20); return b.byteLength",
        ))
        .await;
    assert_eq!(value(&out), json!(60 << 20));
    rt.close().await;
}

/// `Atomics.wait` would block the runtime's thread (nothing else can ever
/// notify it): it throws, as on a browser's main thread, and a turn that
/// tries it still ends.
#[tokio::test(flavor = "multi_thread")]
async fn atomics_wait_never_blocks_the_thread() {
    let (rt, _dir) = runtime().await;
    let mut spec = turn(
        "const i32 = new Int32Array(new SharedArrayBuffer(8)); \
         try { Atomics.wait(i32, 0, 0); return 'returned'; } catch (e) { return e.name; }",
    );
    spec.timeout = Duration::from_secs(2);
    let started = Instant::now();
    let out = tokio::time::timeout(Duration::from_secs(60), rt.run(spec))
        .await
        .expect("the turn answers");
    assert_eq!(value(&out), json!("TypeError"));
    assert!(started.elapsed() < IN_TIME, "{:?}", started.elapsed());
    rt.close().await;
}

/// Compiles take zone memory outside both caps: `eval` of a 40 MB array
/// literal peaked at +802 MiB in a 128 MiB heap, a 3 MB RegExp at +192 MiB.
/// Sources compiled from strings are bounded by length (a RangeError the
/// guest can catch); ordinary `eval`, direct or not, works as before.
#[test]
fn compiles_from_strings_are_bounded() {
    // Alone in a process: the host's growth is measured, other tests' memory is not.
    in_child("abuse::child_compiles_from_strings_are_bounded");
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "run by compiles_from_strings_are_bounded in a child process"]
async fn child_compiles_from_strings_are_bounded() {
    let (rt, _dir) = runtime_with(heap_128()).await;
    let before = rss_mib();
    let out = rt
        .run(turn(
            r#"
            const caught = [];
            const attempt = (f) => { try { f(); caught.push("ran"); } catch (e) { caught.push(e.name + ": " + e.message.slice(0, 40)); } };
            const big = "[" + "0,".repeat(2e7) + "0]";
            attempt(() => eval(big));
            attempt(() => (0, eval)(big));
            attempt(() => new Function(big));
            attempt(() => new (async function () {}).constructor(big));
            const pattern = "a".repeat(3e6);
            attempt(() => new RegExp(pattern));
            attempt(() => RegExp(pattern));
            attempt(() => "x".match(pattern));
            attempt(() => "x".search({ toString: () => pattern }));
            attempt(() => [..."x".matchAll(pattern)]);
            attempt(() => /a/.compile(pattern));
            const q = 21;
            return [caught, eval("q * 2"), (0, eval)("typeof q"), new Function("a", "return a + 1")(1),
                    new RegExp("b+").test("abbb"), "abc".match("b").index, "a-b".split(/-/).length];
            "#,
        ))
        .await;
    let v = value(&out);
    let caught: Vec<&str> = v[0]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    assert_eq!(caught.len(), 10, "{v}");
    for (i, entry) in caught.iter().enumerate() {
        // The function constructors get V8's EvalError, the rest our RangeError.
        let expected = if i == 2 || i == 3 {
            "EvalError"
        } else {
            "RangeError"
        };
        assert!(entry.starts_with(expected), "{v}");
    }
    assert_eq!(v[1], json!(42));
    assert_eq!(v[2], json!("undefined"));
    assert_eq!(v[3], json!(2));
    assert_eq!(v[4], json!(true));
    assert_eq!(v[5], json!(1));
    assert_eq!(v[6], json!(2));
    let grown = rss_mib().saturating_sub(before);
    assert!(grown < 400, "the host grew by {grown} MiB");
    // Within the limit, a long source compiles from a string as before.
    let out = rt
        .run(turn("return eval('[' + '0,'.repeat(1e6) + '0]').length"))
        .await;
    assert_eq!(value(&out), json!(1_000_001));
    // A module written to iii.files past the limit is refused when imported.
    let out = rt
        .run(with_iii(
            "await iii.files.write('big.js', 'export const a = [' + '0,'.repeat(3e6) + '0];'); \
             try { await import('./big.js'); return 'imported'; } catch (e) { return e.name + ': ' + e.message.slice(0, 30); }",
        ))
        .await;
    let imported = value(&out);
    assert!(
        imported
            .as_str()
            .unwrap_or("")
            .contains(": a module compiled in this runt"),
        "{imported}"
    );
    rt.close().await;
}

/// Small leaks a process shared by many isolates should not have: the
/// clock is coarse, and a file name is well-formed UTF-16 (`"\ud800"` and
/// `"\ufffd"` named the same file).
#[tokio::test(flavor = "multi_thread")]
async fn clock_is_coarse_and_file_names_are_well_formed() {
    let (rt, _dir) = runtime().await;
    let out = rt
        .run(with_iii(
            r#"
            const fine = [];
            for (let i = 0; i < 200; i++) { const t = performance.now(); fine.push(Math.abs(t * 10 - Math.round(t * 10)) < 1e-6); }
            const refused = [];
            for (const name of ["\ud800", "a\udc00b", "\udfff\ud800"]) {
              try { await iii.files.write(name, "x"); refused.push("written"); } catch (e) { refused.push(e.code); }
            }
            await iii.files.write("\ufffd", "ok");
            return [fine.every(Boolean), refused, await iii.files.list()];
            "#,
        ))
        .await;
    assert_eq!(
        value(&out),
        json!([
            true,
            [
                "code-runner::invalid_request",
                "code-runner::invalid_request",
                "code-runner::invalid_request"
            ],
            ["\u{fffd}"]
        ])
    );
    rt.close().await;
}

/// The reproductions in a loop, in eight runtimes at once: every run ends
/// as resource_exhausted, none aborts the process, and each runtime goes on.
#[test]
fn huge_strings_in_eight_runtimes_never_abort() {
    in_child("abuse::child_huge_strings_in_eight_runtimes");
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "run by huge_strings_in_eight_runtimes_never_abort in a child process"]
async fn child_huge_strings_in_eight_runtimes() {
    let mut tasks = Vec::new();
    for i in 0..8 {
        tasks.push(tokio::spawn(async move {
            let (rt, _dir) = runtime_with(heap_128()).await;
            for round in 0..2 {
                let program = if (i + round) % 2 == 0 {
                    r#"let a = "a".repeat(2**29 - 24).indexOf("y"); let b = "b".repeat(2**29 - 24).indexOf("y"); return a + b"#
                } else {
                    r#"let s = "\u1234"; for (let i = 0; i < 27; i++) s += s; return s.indexOf("y") + (s + "!").indexOf("z")"#
                };
                let out = rt.run(slow(program)).await;
                assert_exhausted(&out);
                assert_eq!(value(&rt.run(turn("return 2 + 2")).await), json!(4));
            }
            rt.close().await;
        }));
    }
    for task in tasks {
        task.await.expect("a runtime's loop");
    }
}

/// The guards stand in for the built-ins without showing: what the standard
/// says of `RegExp` and `ArrayBuffer` (and what test suites check) holds.
#[tokio::test(flavor = "multi_thread")]
async fn guards_look_like_the_builtins() {
    let (rt, _dir) = runtime().await;
    let out = rt
        .run(turn(
            r#"
            const re = /a+/g;
            const like = { [Symbol.match]: true, source: "b+", flags: "i" };
            const fromLike = new RegExp(like);
            const native = (f) => Function.prototype.toString.call(f).includes("[native code]");
            class Sub extends RegExp {}
            return [
              RegExp(re) === re, new RegExp(re) !== re, RegExp(re, "y").flags,
              fromLike.source + "/" + fromLike.flags, new Sub("c").test("c"), new Sub("c") instanceof Sub,
              RegExp.length, ArrayBuffer.length, RegExp.name, ArrayBuffer.name,
              native(RegExp), native(ArrayBuffer), native(String.prototype.match), native(Function.prototype.toString),
              native(RegExp.prototype.compile), native(() => 1),
              String.prototype.match.length, String.prototype.matchAll.name,
              Object.getOwnPropertyDescriptor(RegExp, "prototype").writable,
              RegExp.prototype.constructor === RegExp, typeof RegExp.prototype.exec,
              [..."a1b2".matchAll(/\d/g)].length, "aXbX".search("X"), "abc".match(/b/)[0],
              (() => { try { new RegExp(Symbol()); return "made"; } catch (e) { return e.name; } })(),
              (() => { const seen = []; String.prototype.match.call({ toString() { seen.push("this"); return "ab"; } }, { toString() { seen.push("pattern"); return "b"; } }); return seen.join(); })(),
            ];
            "#,
        ))
        .await;
    assert_eq!(
        value(&out),
        json!([
            true,
            true,
            "y",
            "b+/i",
            true,
            true,
            2,
            1,
            "RegExp",
            "ArrayBuffer",
            true,
            true,
            true,
            true,
            true,
            false,
            1,
            "matchAll",
            false,
            true,
            "function",
            2,
            1,
            "b",
            "TypeError",
            "this,pattern"
        ])
    );
    rt.close().await;
}
