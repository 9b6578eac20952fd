//! What a hostile guest hands the host, and the bound that holds (issue 9,
//! node): values nested deep, wide or long; binding arguments alone and in
//! flight; error text; `iii.files` inputs copied out of the isolate. Each
//! test failed before its fix. Memory is measured in a child process, whose
//! peak RSS is this test's alone.

use std::time::Duration;

use code_runner_core::caps::ResultShape;
use code_runner_core::{
    BindingNamespace, Bindings, Completion, RuntimeOptions, TurnEnding, TurnOutcome,
};
use serde_json::{Value, json};

use crate::{exception, in_child, runtime_with, turn, value};

/// The process's peak resident set so far, in MiB.
fn peak_rss_mib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0, |kib| kib / 1024)
}

/// `iii.hold(x)` keeps its argument and never answers; `iii.echo(x)` answers
/// the argument's JSON length.
fn holding() -> Bindings {
    let ns = BindingNamespace::new("iii")
        .function("hold", |args, _call| async move {
            let _held = args;
            std::future::pending::<()>().await;
            Ok(Value::Null)
        })
        .function("echo", |args, _call| async move {
            Ok(json!(args.to_string().len()))
        });
    Bindings::new(vec![ns]).unwrap()
}

async fn run(
    options: RuntimeOptions,
    program: &str,
) -> (
    TurnOutcome,
    std::sync::Arc<dyn code_runner_core::Runtime>,
    tempfile::TempDir,
) {
    let (rt, dir) = runtime_with(options).await;
    let out = run_on(&rt, program).await;
    (out, rt, dir)
}

async fn run_on(rt: &std::sync::Arc<dyn code_runner_core::Runtime>, program: &str) -> TurnOutcome {
    let mut spec = turn(program);
    spec.timeout = Duration::from_secs(60);
    spec.bindings = holding();
    rt.run(spec).await
}

#[track_caller]
fn not_json(out: &TurnOutcome) -> String {
    match &out.ending {
        TurnEnding::Exited {
            exit_code: 0,
            completion: Completion::NotJson(why),
            ..
        } => why.clone(),
        other => panic!("expected a result that is not JSON, got {other:?}"),
    }
}

#[track_caller]
fn oversize(out: &TurnOutcome) -> (u64, ResultShape) {
    match &out.ending {
        TurnEnding::Exited {
            exit_code: 0,
            completion: Completion::Oversize { bytes, shape },
            ..
        } => (*bytes, shape.clone()),
        other => panic!("expected an oversize result, got {other:?}"),
    }
}

/// One nesting limit in both languages: a result or a binding argument
/// nests at most 100 arrays and objects, as python's does; deeper is not
/// JSON (a result: `null` on the wire; an argument: a `TypeError`), and the
/// message stays short however deep the value goes. Before, node allowed
/// 200: a 150-deep result reached the iii engine, which refuses JSON past
/// 128 levels and dropped the answer, and the caller waited for its timeout.
#[tokio::test(flavor = "multi_thread")]
async fn values_nest_at_most_as_deep_as_in_python() {
    let (rt, _dir) = runtime_with(RuntimeOptions::default()).await;
    let nest = |levels: u32| format!("let v = []; for (let i = 1; i < {levels}; i++) v = [v];");
    let within = run_on(&rt, &format!("{} return v", nest(100))).await;
    assert!(value(&within).is_array());
    for levels in [101, 150, 100_000] {
        let why = not_json(&run_on(&rt, &format!("{} return v", nest(levels))).await);
        assert!(why.contains("is nested more than 100 levels deep"), "{why}");
        assert!(why.len() < 1024, "{} bytes of message", why.len());
    }
    let argument = run_on(&rt, &format!("{} return await iii.echo(v)", nest(101))).await;
    let text = exception(&argument);
    assert!(
        text.starts_with("TypeError: iii.echo: the argument is not lossless JSON"),
        "{text}"
    );
    assert!(text.contains("nested more than 100 levels deep"), "{text}");
    rt.close().await;
}

/// A result is built on the host only up to `max_result_bytes` (its JSON
/// size counted exactly) and 262 144 values: past either it is measured
/// and reported by size and shape (the omission marker, or `null` with the
/// cap off), never copied. Before, node built up to 64 MiB of it whatever
/// the cap was: a 60 MB string result cost the host 170 MiB, only to be
/// replaced by the marker.
#[tokio::test(flavor = "multi_thread")]
async fn a_result_past_the_caps_is_measured_not_built() {
    let capped = |bytes| RuntimeOptions {
        max_result_bytes: Some(bytes),
        heap_mb: 512,
        ..RuntimeOptions::default()
    };
    let (out, rt, _dir) = run(capped(32_768), "return 'x'.repeat(1e6)").await;
    assert_eq!(oversize(&out), (1_000_002, ResultShape::String(1_000_000)));
    rt.close().await;
    let (out, rt, _dir) = run(capped(7), "return [1, 22, 3]").await;
    assert_eq!(oversize(&out), (8, ResultShape::Array(3)));
    rt.close().await;
    let (out, rt, _dir) = run(capped(8), "return [1, 22, 3]").await;
    assert_eq!(value(&out), json!([1, 22, 3]));
    rt.close().await;
    // With the cap off: at most 16 MiB and 262 144 values.
    let uncapped = RuntimeOptions {
        heap_mb: 512,
        ..RuntimeOptions::default()
    };
    let (rt, _dir) = runtime_with(uncapped).await;
    let out = run_on(&rt, "return 'x'.repeat(17 << 20)").await;
    assert_eq!(oversize(&out).1, ResultShape::String(17 << 20));
    let out = run_on(&rt, "return new Array(262145).fill(0)").await;
    assert_eq!(oversize(&out), (524_291, ResultShape::Array(262_145)));
    let out = run_on(&rt, "return new Array(262143).fill(0)").await;
    assert_eq!(value(&out).as_array().map(Vec::len), Some(262_143));
    rt.close().await;
}

/// A result of 30 million small values is measured in bounded memory. Before,
/// the host built 7 million of them into a tree and held a handle for every
/// one: 1 223 MiB at peak for a 240 MB array (254 MiB after).
#[test]
fn a_result_of_millions_of_values_costs_the_host_no_tree() {
    in_child("hostile::child_millions_of_values");
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "run by a_result_of_millions_of_values_costs_the_host_no_tree in a child process"]
async fn child_millions_of_values() {
    let options = RuntimeOptions {
        heap_mb: 1024,
        ..RuntimeOptions::default()
    };
    let (rt, _dir) = runtime_with(options).await;
    let before = peak_rss_mib();
    let out = run_on(&rt, "return new Array(3e7).fill(0)").await;
    assert_eq!(oversize(&out), (60_000_001, ResultShape::Array(30_000_000)));
    let grew = peak_rss_mib() - before;
    // The array itself is 240 MB of V8 heap.
    assert!(grew < 500, "the peak grew by {grew} MiB");
    rt.close().await;
}

/// A binding call's argument is at most 16 MiB and 262 144 values, and the
/// calls one runtime has in flight hold at most 64 MiB and 1 Mi values of
/// arguments together: past that the call rejects with a `RangeError`, and a
/// new turn starts afresh. Before, each argument could be 64 MiB or millions
/// of values (a 7 million zeros argument cost the host 840 MiB), with 1 024
/// of them in flight.
#[tokio::test(flavor = "multi_thread")]
async fn binding_arguments_are_bounded_alone_and_in_flight() {
    let options = RuntimeOptions {
        heap_mb: 512,
        ..RuntimeOptions::default()
    };
    let (rt, _dir) = runtime_with(options).await;
    let wide = run_on(&rt, "return await iii.echo(new Array(262145).fill(0))").await;
    assert!(
        exception(&wide).contains("limited to 262144 JSON values (this one holds 262146"),
        "{}",
        exception(&wide)
    );
    let long = run_on(&rt, "return await iii.echo('x'.repeat(16 << 20))").await;
    assert!(
        exception(&long).contains("limited to 16777216 bytes of JSON"),
        "{}",
        exception(&long)
    );
    let fits = run_on(&rt, "return await iii.echo(new Array(262143).fill(0))").await;
    assert_eq!(value(&fits), json!(524_287));
    let flood = |argument: &str| {
        format!(
            "const arg = {argument}; const answers = []; \
             for (let i = 0; i < 6; i++) answers.push(Promise.race([ \
               iii.hold(arg).then(() => 'answered', (e) => e.name + ': ' + e.message), \
               new Promise((held) => setTimeout(() => held('held'), 100))])); \
             return await Promise.all(answers)"
        )
    };
    for argument in ["'x'.repeat(15 << 20)", "new Array(250000).fill(0)"] {
        let out = run_on(&rt, &flood(argument)).await;
        let answers = value(&out);
        let answers = answers.as_array().unwrap();
        assert_eq!(
            answers[..4],
            vec![json!("held"); 4],
            "{argument}: {answers:?}"
        );
        for refused in &answers[4..] {
            let text = refused.as_str().unwrap_or_default();
            assert!(
                text.starts_with("RangeError: iii.hold: the binding calls in flight already hold"),
                "{argument}: {text}"
            );
        }
    }
    rt.close().await;
}

/// Text the guest controls reaches the host's outcome bounded: a thrown
/// string or `Error` of 10 MB, a syntax error quoting a 20 MB token, a
/// result refused at the end of a path of megabyte keys, an import of a
/// 10 MB specifier. Before, the syntax error came back whole (20 MB), the
/// path quoted every key (90 MB), and the import's error quoted the
/// specifier twice over.
#[tokio::test(flavor = "multi_thread")]
async fn error_text_from_the_guest_is_bounded() {
    let options = RuntimeOptions {
        heap_mb: 512,
        ..RuntimeOptions::default()
    };
    let (rt, _dir) = runtime_with(options).await;
    let token = "x".repeat(20 << 20);
    for program in [
        "throw 'y'.repeat(1e7)".to_string(),
        "throw new Error('m'.repeat(1e7))".to_string(),
        format!("let a = 1 {token}"),
    ] {
        let out = run_on(&rt, &program).await;
        let text = exception(&out);
        assert!(text.len() <= 70_000, "{program:.40}: {} bytes", text.len());
        assert!(out.stderr.render().len() <= 17_000);
    }
    let keys = "const k = 'k'.repeat(1e6); const v = {}; let o = v; \
                for (let i = 0; i < 90; i++) { o[k + i] = {}; o = o[k + i] } o.bad = 1n; return v";
    let why = not_json(&run_on(&rt, keys).await);
    assert!(
        why.contains("[\"bad\"] is a BigInt (1n), which JSON.stringify refuses"),
        "{why:.300}"
    );
    assert!(why.len() < 2048, "{} bytes", why.len());
    let import = "try { await import('q'.repeat(1e7)) } catch (e) { return e.message }";
    let message = value(&run_on(&rt, import).await);
    let message = message.as_str().unwrap_or_default();
    assert!(message.contains("cannot import \"qqq"), "{message:.200}");
    assert!(message.len() < 1024, "{} bytes", message.len());
    rt.close().await;
}

/// What `iii.files` copies out of the isolate is checked first: a name past
/// 255 characters and a text past the quota are refused before the host
/// copies them. Before, a 300 M-character string for an 8 MiB quota was
/// copied (as UTF-8, up to three bytes a character) only to be refused:
/// 1 551 MiB at peak for an emoji string; a 400 M-character name, 787 MiB.
#[test]
fn iii_files_inputs_are_refused_before_they_are_copied() {
    in_child("hostile::child_files_inputs");
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "run by iii_files_inputs_are_refused_before_they_are_copied in a child process"]
async fn child_files_inputs() {
    let options = RuntimeOptions {
        heap_mb: 1024,
        ..RuntimeOptions::default()
    };
    let (rt, _dir) = runtime_with(options).await;
    let before = peak_rss_mib();
    let out = run_on(
        &rt,
        "const answers = []; \
         for (const [name, text] of [['a', '\\u{1F600}'.repeat(1e8)], ['n'.repeat(3e8), 'x']]) { \
           try { await iii.files.write(name, text); answers.push('written') } \
           catch (e) { answers.push(e.code + ' ' + e.message.slice(0, 200)) } } \
         return answers",
    )
    .await;
    let answers = value(&out);
    assert!(
        answers[0]
            .as_str()
            .unwrap_or_default()
            .starts_with("code-runner::resource_exhausted"),
        "{answers}"
    );
    assert!(
        answers[1]
            .as_str()
            .unwrap_or_default()
            .contains("a name is at most 1024 bytes, this one has 300000000 characters"),
        "{answers}"
    );
    let grew = peak_rss_mib() - before;
    assert!(grew < 200, "the peak grew by {grew} MiB");
    rt.close().await;
}

/// `iii.files` needs no descriptor budget: each call opens at most one
/// descriptor and closes it before it returns, so a flood of calls (and of
/// imports from scratch files) leaves the process holding what it held
/// before. Python's `/work` keeps descriptors open and has a budget of 512.
#[test]
fn an_iii_files_flood_holds_no_descriptor() {
    in_child("hostile::child_files_flood");
}

fn open_descriptors() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, Iterator::count)
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "run by an_iii_files_flood_holds_no_descriptor in a child process"]
async fn child_files_flood() {
    let (rt, _dir) = runtime_with(RuntimeOptions::default()).await;
    value(
        &run_on(
            &rt,
            "await iii.files.write('m.js', 'export const n = 1'); return 1",
        )
        .await,
    );
    let before = open_descriptors();
    let out = run_on(
        &rt,
        "const held = []; \
         for (let i = 0; i < 5000; i++) { \
           await iii.files.write('f' + (i % 50), 'x'.repeat(100)); \
           held.push(iii.files.read('f' + (i % 50)), iii.files.readText('m.js'), import('./m.js')); } \
         await Promise.all(held); return (await iii.files.list()).length",
    )
    .await;
    assert_eq!(value(&out), json!(51));
    assert_eq!(open_descriptors(), before);
    rt.close().await;
}
