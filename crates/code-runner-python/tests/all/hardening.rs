//! A hostile guest against the python engine's per-runtime budgets, through
//! real wasmtime: descriptors, the `/work` quota, and what it hands back.

use code_runner_core::caps::ResultShape;
use code_runner_core::{Completion, RuntimeOptions, TurnEnding};
use serde_json::json;

use crate::{in_child, runtime, turn, value};

/// Descriptors this process holds right now.
fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |dir| dir.count())
}

/// One runtime opening a file in a loop gets `ENOMEM` past its descriptor
/// budget instead of taking the process's descriptors, and closing the
/// runtime gives every one back. The count is process-wide, so the test runs
/// alone in a child process: tests beside it open descriptors of their own.
#[test]
fn descriptors_are_bounded_per_runtime_and_released_at_close() {
    in_child("hardening::child_descriptors_are_bounded_per_runtime_and_released_at_close");
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "run by descriptors_are_bounded_per_runtime_and_released_at_close"]
async fn child_descriptors_are_bounded_per_runtime_and_released_at_close() {
    let (rt, _dir) = runtime(RuntimeOptions::default()).await;
    let before = open_fds();
    let out = rt
        .run(turn(
            "import errno\nopen('/work/f', 'w').close()\nheld = []\nrefused = None\n\
             try:\n    for _ in range(5000):\n        held.append(open('/work/f'))\n\
             except OSError as err:\n    refused = err.errno == errno.ENOMEM\n\
             result = [len(held), refused]",
        ))
        .await;
    let during = open_fds();
    let answer = value(&out);
    let held = answer[0].as_u64().unwrap_or(u64::MAX);
    assert!(held < 1000, "the guest held {held} files: {answer}");
    assert_eq!(answer[1], json!(true), "{answer}");
    assert!(
        during < before + 1100,
        "{before} descriptors before, {during} during"
    );
    rt.close().await;
    let after = open_fds();
    assert!(
        after < before + 20,
        "{before} descriptors before, {after} after close"
    );
}

/// Bytes written through a descriptor after its file is unlinked still count
/// against the `/work` quota: the guest's write fails at 256 MiB (wasi-libc
/// reports a refused stream write as `EIO`), and the host saw the refusal.
#[tokio::test(flavor = "multi_thread")]
async fn bytes_written_after_unlink_count_against_the_quota() {
    let (rt, _dir) = runtime(RuntimeOptions::default()).await;
    let out = rt
        .run(turn(
            "import errno, os\nfd = os.open('/work/big', os.O_WRONLY | os.O_CREAT)\n\
             os.unlink('/work/big')\nchunk = b'x' * (1 << 20)\nwritten = 0\nrefused = None\n\
             try:\n    while written < 400 << 20:\n        written += os.write(fd, chunk)\n\
             except OSError as err:\n    refused = err.errno in (errno.EDQUOT, errno.EIO)\n\
             result = [written >> 20, refused]",
        ))
        .await;
    let answer = value(&out);
    assert!(answer[0].as_u64().unwrap_or(u64::MAX) <= 256, "{answer}");
    assert_eq!(answer[1], json!(true), "{answer}");
    assert!(out.denied, "the quota refusal is a sandbox denial");
    rt.close().await;
}

/// A tree nested past PATH_MAX (through directory descriptors) cannot hide
/// its bytes from the quota: writing at its bottom is refused by 256 MiB.
#[tokio::test(flavor = "multi_thread")]
async fn a_tree_too_deep_to_walk_does_not_count_as_empty() {
    let (rt, _dir) = runtime(RuntimeOptions::default()).await;
    let out = rt
        .run(turn(
            "import errno, os\nfd = os.open('/work', os.O_RDONLY)\n\
             for _ in range(2100):\n    os.mkdir('d', dir_fd=fd)\n\
             \x20   inner = os.open('d', os.O_RDONLY, dir_fd=fd)\n    os.close(fd)\n    fd = inner\n\
             big = os.open('big', os.O_WRONLY | os.O_CREAT, dir_fd=fd)\n\
             chunk = b'x' * (1 << 20)\nwritten = 0\nrefused = None\n\
             try:\n    while written < 400 << 20:\n        written += os.write(big, chunk)\n\
             except OSError as err:\n    refused = err.errno in (errno.EDQUOT, errno.EIO)\n\
             result = [written >> 20, refused]",
        ))
        .await;
    let answer = value(&out);
    assert!(answer[0].as_u64().unwrap_or(u64::MAX) <= 256, "{answer}");
    assert_eq!(answer[1], json!(true), "{answer}");
    assert!(out.denied, "the quota refusal is a sandbox denial");
    rt.close().await;
}

/// A result larger than the runtime's result cap is measured, not parsed:
/// the engine hands back its size and shape only.
#[tokio::test(flavor = "multi_thread")]
async fn a_result_over_the_cap_is_reported_not_parsed() {
    let (rt, _dir) = runtime(RuntimeOptions {
        max_result_bytes: Some(32_768),
        ..RuntimeOptions::default()
    })
    .await;
    let out = rt.run(turn("result = [0] * 2_000_000")).await;
    match &out.ending {
        TurnEnding::Exited {
            exit_code: 0,
            completion: Completion::Oversize { bytes, shape },
            ..
        } => {
            assert_eq!(*bytes, 4_000_001);
            assert_eq!(*shape, ResultShape::Array(2_000_000));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        value(&rt.run(turn("result = 'small'")).await),
        json!("small")
    );
    rt.close().await;
}

/// A guest that replaces the runner's turn function and hands the host a
/// malformed head loses that turn only: the next turn runs on a fresh instance.
#[tokio::test(flavor = "multi_thread")]
async fn a_forged_turn_end_costs_only_that_turn() {
    let (rt, _dir) = runtime(RuntimeOptions::default()).await;
    let out = rt
        .run(turn(
            "import runner\nrunner._turn = lambda task: ('{' * 100_000, '[' * 10_000_000)\nresult = 1",
        ))
        .await;
    assert_eq!(value(&out), json!(1));
    let forged = rt.run(turn("result = 2")).await;
    assert!(
        matches!(
            forged.ending,
            TurnEnding::Faulted(code_runner_core::Fault::Protocol(_))
        ),
        "{:?}",
        forged.ending
    );
    assert_eq!(value(&rt.run(turn("result = 3")).await), json!(3));
    rt.close().await;
}
