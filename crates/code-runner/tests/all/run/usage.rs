//! `usage` in every run response, measured by the sandbox (issue 22): CPU
//! time of the runtime's thread, the turn's peak memory, wall time.

use crate::helpers::Server;
use crate::helpers::lang::{LANGS, pick};

/// A fixed amount of work (not a wall-clock loop, which a busy machine would
/// starve) reports its CPU in both languages, never more than the wall time,
/// and a failed run (exit 1) carries usage too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_loop_reports_its_cpu() {
    let server = Server::start().await;
    for lang in LANGS {
        let code = pick(
            lang,
            "x = 0\nfor i in range(2_000_000):\n    x = (x + i * 7) % 1_000_003\nresult = 1",
            "let x = 0; for (let i = 0; i < 60_000_000; i++) { x = (x + i * 7) % 1_000_003; } return 1",
        );
        let body = server.run_in(lang, code).await.ok().clone();
        assert_eq!(body["result"], 1, "{lang}: {body}");
        let cpu = body["usage"]["cpu_ms"].as_f64().unwrap();
        assert!(cpu >= 20.0, "{lang}: {body}");
        assert!(
            body["usage"]["wall_ms"].as_f64().unwrap() + 5.0 >= cpu,
            "{lang}: {body}"
        );
        let failed = pick(lang, "raise ValueError('x')", "throw new Error('x')");
        let body = server.run_in(lang, failed).await.ok().clone();
        assert_eq!(body["exit_code"], 1, "{lang}: {body}");
        assert!(
            body["usage"]["peak_memory_bytes"].as_u64().unwrap() > 0,
            "{lang}: {body}"
        );
    }
}

/// A 50 MiB python allocation and a node heap of a million objects report a
/// peak at least that large; a trivial run reports small numbers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_peaks_are_reported_and_a_trivial_run_is_small() {
    let server = Server::start().await;
    let body = server
        .run_in("python", "b = bytearray(50 * 1024 * 1024)\nresult = len(b)")
        .await
        .ok()
        .clone();
    assert_eq!(body["result"], 50 << 20, "{body}");
    // Python's peak is its linear memory, the interpreter's own included
    // (the data stack's image is 161 MiB of it): the allocation shows as
    // about 50 MiB above what a trivial run of the same interpreter peaks at
    // (less the free memory the interpreter's heap already held).
    let trivial = server.run_in("python", "result = 1").await.ok().clone();
    let base = trivial["usage"]["peak_memory_bytes"].as_u64().unwrap();
    assert!(
        body["usage"]["peak_memory_bytes"].as_u64().unwrap() >= base + (45 << 20),
        "{body} against a trivial run's {base}"
    );
    let body = server
        .run_in(
            "node",
            "const a = []; for (let i = 0; i < 1_000_000; i++) a.push({ i }); return a.length",
        )
        .await
        .ok()
        .clone();
    assert_eq!(body["result"], 1_000_000, "{body}");
    // A million objects of one field each: at least 16 bytes apiece.
    assert!(
        body["usage"]["peak_memory_bytes"].as_u64().unwrap() >= 16_000_000,
        "{body}"
    );
    for (lang, code, most) in [
        // The lean interpreter peaks near 15 MiB, the data stack near 165 MiB.
        ("python", "result = 1", 192u64 << 20),
        ("node", "return 1", 16 << 20),
        ("typescript", "return 1 as number", 16 << 20),
    ] {
        let body = server.run_in(lang, code).await.ok().clone();
        let usage = &body["usage"];
        assert!(
            usage["peak_memory_bytes"].as_u64().unwrap() < most,
            "{lang}: {body}"
        );
        assert!(usage["cpu_ms"].as_f64().unwrap() < 100.0, "{lang}: {body}");
    }
}
