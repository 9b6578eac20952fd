//! `iii.files`: the runtime's scratch directory, its quotas and its modules.

use std::os::unix::fs::PermissionsExt;

use code_runner_core::{Fault, RuntimeOptions, TurnEnding, TurnSpec};
use serde_json::json;

use crate::{exception, runtime, runtime_with, value};

/// The worker's `iii` shape: a namespace with an error class; the engine adds `files`.
fn iii(program: &str) -> TurnSpec {
    crate::with_iii(program)
}

/// Files are written as strings or bytes, read back, listed and removed, and
/// they stay from one turn to the next.
#[tokio::test(flavor = "multi_thread")]
async fn files_round_trip_and_persist_between_turns() {
    let (rt, dir) = runtime().await;
    let program = "await iii.files.write('a.txt', 'olá'); \
                   await iii.files.write('b.bin', new Uint8Array([0, 255, 7])); \
                   await iii.files.write('c.bin', new Uint16Array([1]).buffer); \
                   return [await iii.files.readText('a.txt'), Array.from(await iii.files.read('b.bin')), \
                           (await iii.files.read('b.bin')) instanceof Uint8Array, await iii.files.list()]";
    assert_eq!(
        value(&rt.run(iii(program)).await),
        json!(["olá", [0, 255, 7], true, ["a.txt", "b.bin", "c.bin"]])
    );
    let program = "const removed = [await iii.files.remove('a.txt'), await iii.files.remove('a.txt')]; \
                   return [removed, await iii.files.list()]";
    assert_eq!(
        value(&rt.run(iii(program)).await),
        json!([[true, false], ["b.bin", "c.bin"]])
    );
    let files = dir.path().join("files");
    assert_eq!(std::fs::read(files.join("b.bin")).unwrap(), [0, 255, 7]);
    assert_eq!(
        std::fs::metadata(&files).unwrap().permissions().mode() & 0o777,
        0o700
    );
    rt.close().await;
    assert_eq!(
        std::fs::read_dir(&files).unwrap().count(),
        0,
        "closing leaves files behind"
    );
}

/// Nested paths are files too: written (directories made), read, listed
/// by path and removed; `put_files` writes them before a turn, and a
/// module at the top still imports.
#[tokio::test(flavor = "multi_thread")]
async fn nested_paths_are_files() {
    let (rt, dir) = runtime().await;
    let uploaded = code_runner_core::files::InputFile {
        path: "in/up.csv".into(),
        bytes: b"a,b".to_vec(),
    };
    rt.put_files(vec![uploaded]).await.unwrap();
    let program = "await iii.files.write('data/deep/x.txt', 'x'); \
                   await iii.files.write('m.js', 'export const two = 2'); \
                   const { two } = await import('./m.js'); \
                   return [await iii.files.readText('in/up.csv'), await iii.files.readText('./data/deep/x.txt'), \
                           await iii.files.list(), two, await iii.files.remove('data/deep/x.txt'), await iii.files.list()]";
    assert_eq!(
        value(&rt.run(iii(program)).await),
        json!([
            "a,b",
            "x",
            ["data/deep/x.txt", "in/up.csv", "m.js"],
            2,
            true,
            ["in/up.csv", "m.js"]
        ])
    );
    assert_eq!(
        std::fs::read(dir.path().join("files/in/up.csv")).unwrap(),
        b"a,b"
    );
}

/// A path out of the directory (absolute, `..`), an empty component or an
/// over-long name is an error the guest can catch.
#[tokio::test(flavor = "multi_thread")]
async fn names_stay_in_the_directory() {
    let (rt, dir) = runtime().await;
    let program = "const out = []; \
                   for (const name of ['../escape', '/etc/passwd', 'a//b', '..', '.', '', 'x'.repeat(256)]) { \
                     try { await iii.files.write(name, 'x'); out.push('written ' + name) } \
                     catch (e) { out.push([e instanceof IIIError, e.code, e.member]) } } \
                   try { await iii.files.read('missing') } catch (e) { out.push([e.code, e.message]) } \
                   try { await iii.files.write(42, 'x') } catch (e) { out.push(e.name) } \
                   try { await iii.files.write('x', { not: 'bytes' }) } catch (e) { out.push(e.name) } \
                   return out";
    let got = value(&rt.run(iii(program)).await);
    let refused = json!([true, "code-runner::invalid_request", "files.write"]);
    assert_eq!(got.as_array().unwrap()[..7], vec![refused; 7][..], "{got}");
    assert_eq!(
        got[7],
        json!(["ENOENT", "ENOENT: iii.files: no file named \"missing\""])
    );
    assert_eq!(got[8], json!("TypeError"));
    assert_eq!(got[9], json!("TypeError"));
    assert!(!dir.path().join("escape").exists());
    rt.close().await;
}

/// The byte and file quotas fail the call with `resource_exhausted`, which
/// the guest can catch; uncaught, the run is `resource_exhausted`.
#[tokio::test(flavor = "multi_thread")]
async fn quotas_are_resource_exhausted() {
    let options = RuntimeOptions {
        scratch_mb: Some(1),
        scratch_files: 3,
        ..RuntimeOptions::default()
    };
    let (rt, _dir) = runtime_with(options).await;
    let program = "const big = 'x'.repeat(700 * 1024); await iii.files.write('one', big); \
                   try { await iii.files.write('two', big) } catch (e) { return [e.code, e.member, e.message] }";
    let got = value(&rt.run(iii(program)).await);
    assert_eq!(got[0], "code-runner::resource_exhausted");
    assert_eq!(got[1], "files.write");
    assert!(
        got[2]
            .as_str()
            .unwrap()
            .contains("1 MiB and 3 files per runtime"),
        "{got}"
    );
    let flood = "for (let i = 0; ; i++) await iii.files.write('f' + i, 'x')";
    match rt.run(iii(flood)).await.ending {
        TurnEnding::Faulted(Fault::ResourceExhausted(message)) => {
            assert!(message.starts_with("iii.files quota exceeded"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    rt.close().await;
}

/// `scratch_mb: 0` means no `iii.files` at all, never an unbounded one.
#[tokio::test(flavor = "multi_thread")]
async fn disabled_scratch_refuses_writes() {
    let (rt, _dir) = runtime_with(RuntimeOptions {
        scratch_mb: None,
        ..RuntimeOptions::default()
    })
    .await;
    let program = "try { await iii.files.write('a', 'x') } catch (e) { return [e.code, e.message, await iii.files.list()] }";
    let got = value(&rt.run(iii(program)).await);
    assert_eq!(got[0], "code-runner::resource_exhausted");
    assert!(
        got[1]
            .as_str()
            .unwrap()
            .contains("disabled on this worker (scratch_mb: 0)"),
        "{got}"
    );
    assert_eq!(got[2], json!([]));
    rt.close().await;
}

/// Modules written into `iii.files` are importable, statically from each
/// other and dynamically from a program; JSON too.
#[tokio::test(flavor = "multi_thread")]
async fn modules_in_scratch_are_importable() {
    let (rt, _dir) = runtime().await;
    let program = r#"
        await iii.files.write('util.js', "export const twice = (n) => n * 2;");
        await iii.files.write('main.js', "import { twice } from './util.js'; import data from 'data.json' with { type: 'json' }; export const answer = twice(data.n);");
        await iii.files.write('data.json', '{"n": 21}');
        const main = await import('./main.js');
        return main.answer;
    "#;
    assert_eq!(value(&rt.run(iii(program)).await), json!(42));
    rt.close().await;
}

/// Nothing but scratch files can be imported: not builtins, not paths, not
/// the embedding layer's own modules.
#[tokio::test(flavor = "multi_thread")]
async fn imports_outside_scratch_are_refused() {
    let (rt, _dir) = runtime().await;
    for specifier in [
        "node:fs",
        "fs",
        "../etc/passwd",
        "/etc/passwd",
        "ext:core/ops",
        "https://example.com/x.js",
        "code-runner:define/1",
    ] {
        let program = format!(
            "try {{ await import({specifier:?}); return 'imported' }} catch (e) {{ return e.message }}"
        );
        let got = value(&rt.run(iii(&program)).await);
        let message = got.as_str().unwrap();
        assert!(
            message.contains("cannot import") || message.contains("Importing ext:"),
            "{specifier}: {message}"
        );
    }
    let text = exception(&rt.run(iii("await import('missing.js')")).await);
    assert!(text.contains("cannot import \"missing.js\""), "{text}");
    rt.close().await;
}
