//! One read or write of a regular file in `/work` moves the whole buffer, as
//! on Linux, through real wasmtime: `os.write`, unbuffered `write`, `os.read`,
//! `readinto`, `os.pwrite`/`os.pread` and `shutil.copyfileobj`; and a write
//! past the quota still fails as documented.

use code_runner_core::{Runtime, RuntimeOptions};
use serde_json::{Value, json};
use std::sync::Arc;

use crate::{turn, value};

async fn runtime() -> (Arc<dyn Runtime>, tempfile::TempDir) {
    crate::runtime(RuntimeOptions::default()).await
}

const MIB: usize = 1 << 20;

/// Runs `program` in a fresh runtime; the value and the work directory.
async fn run(program: &str) -> (Value, tempfile::TempDir) {
    let (rt, dir) = runtime().await;
    let answer = value(&rt.run(turn(program)).await);
    rt.close().await;
    (answer, dir)
}

/// `n` bytes no two 64 KiB chunks of which are alike, so a lost or repeated
/// chunk shows.
fn pattern(n: usize) -> Vec<u8> {
    (0..n as u64)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8 ^ (i >> 16) as u8)
        .collect()
}

/// The same bytes as [`pattern`], made by the guest.
const PATTERN: &str = "def pattern(n):\n    return bytes(((i * 2654435761) >> 13 ^ (i >> 16)) & 255 for i in range(n))\n";

/// `os.write` of 1 MiB to a regular file returns 1 MiB and the file holds
/// it all (it returned 65 536 and wrote 64 KiB).
#[tokio::test(flavor = "multi_thread")]
async fn an_os_write_of_a_regular_file_is_whole() {
    let (answer, dir) = run(&format!(
        "import os\n{PATTERN}data = pattern(1 << 20)\n\
         fd = os.open('/work/a', os.O_WRONLY | os.O_CREAT | os.O_TRUNC)\n\
         n = os.write(fd, data)\nos.close(fd)\n\
         result = [n, os.path.getsize('/work/a')]"
    ))
    .await;
    assert_eq!(answer, json!([MIB, MIB]));
    assert!(std::fs::read(dir.path().join("a")).unwrap() == pattern(MIB));
}

/// An unbuffered `write` of 3 MiB is one whole write (it returned 65 536),
/// and a second one appends after it.
#[tokio::test(flavor = "multi_thread")]
async fn an_unbuffered_write_of_3_mib_is_whole() {
    let (answer, dir) = run(&format!(
        "{PATTERN}data = pattern(3 << 20)\n\
         with open('/work/b', 'wb', buffering=0) as f:\n    n = f.write(data)\n    m = f.write(data[:5])\n\
         with open('/work/c', 'ab', buffering=0) as f:\n    k = f.write(data)\n\
         result = [n, m, k]"
    ))
    .await;
    assert_eq!(answer, json!([3 * MIB, 5, 3 * MIB]));
    let mut expected = pattern(3 * MIB);
    assert!(std::fs::read(dir.path().join("c")).unwrap() == expected);
    expected.extend_from_slice(&pattern(5));
    assert!(std::fs::read(dir.path().join("b")).unwrap() == expected);
}

/// `os.read` of a whole 1 MiB file returns all of it in one call (it
/// returned 64 KiB), then `b''` at end of file; so does a raw `readinto`, and
/// a read asking for more than is left returns what is left.
#[tokio::test(flavor = "multi_thread")]
async fn an_os_read_of_a_whole_file_is_whole() {
    let (rt, dir) = runtime().await;
    std::fs::write(dir.path().join("in"), pattern(MIB)).unwrap();
    let answer = value(
        &rt.run(turn(&format!(
            "import os\n{PATTERN}expected = pattern(1 << 20)\n\
             fd = os.open('/work/in', os.O_RDONLY)\n\
             whole = os.read(fd, 1 << 20)\nend = os.read(fd, 1 << 20)\n\
             os.lseek(fd, 1000, os.SEEK_SET)\nrest = os.read(fd, 2 << 20)\nos.close(fd)\n\
             buf = bytearray(1 << 20)\n\
             with open('/work/in', 'rb', buffering=0) as f:\n    got = f.readinto(buf)\n\
             result = [len(whole), whole == expected, len(end), len(rest), rest == expected[1000:],\n\
             \x20         got, buf == expected]"
        )))
        .await,
    );
    assert_eq!(
        answer,
        json!([MIB, true, 0, MIB - 1000, true, MIB, true]),
        "{answer}"
    );
    rt.close().await;
}

/// `os.pwrite` and `os.pread` of 1 MiB are whole (the read returned 64 KiB);
/// a positioned read past the end returns `b''`, across it what is left.
#[tokio::test(flavor = "multi_thread")]
async fn positioned_writes_and_reads_are_whole() {
    let (answer, dir) = run(&format!(
        "import os\n{PATTERN}data = pattern(1 << 20)\n\
         fd = os.open('/work/p', os.O_RDWR | os.O_CREAT)\n\
         w = os.pwrite(fd, data, 4096)\nr = os.pread(fd, 1 << 20, 4096)\n\
         head = os.pread(fd, 4096, 0)\npast = os.pread(fd, 100, (1 << 20) + 4096)\n\
         tail = os.pread(fd, 1 << 20, 1 << 20)\nos.close(fd)\n\
         result = [w, len(r), r == data, head == bytes(4096), len(past), len(tail), tail == data[(1 << 20) - 4096:]]"
    ))
    .await;
    assert_eq!(
        answer,
        json!([MIB, MIB, true, true, 0, 4096, true]),
        "{answer}"
    );
    let file = std::fs::read(dir.path().join("p")).unwrap();
    assert_eq!(file.len(), MIB + 4096);
    assert!(file[4096..] == pattern(MIB)[..]);
}

/// `shutil.copyfileobj` of a few MiB into an unbuffered file copies every
/// byte (each of its 256 KiB writes kept 64 KiB), raw or buffered either side.
#[tokio::test(flavor = "multi_thread")]
async fn shutil_copyfileobj_copies_every_byte() {
    let size = 5 * MIB + 123;
    let (rt, dir) = runtime().await;
    std::fs::write(dir.path().join("src"), pattern(size)).unwrap();
    let answer = value(
        &rt.run(turn(
            "import os, shutil\n\
             with open('/work/src', 'rb') as a, open('/work/raw', 'wb', buffering=0) as b:\n    shutil.copyfileobj(a, b)\n\
             with open('/work/src', 'rb', buffering=0) as a, open('/work/big', 'wb', buffering=0) as b:\n    shutil.copyfileobj(a, b, 3 << 20)\n\
             shutil.copyfile('/work/src', '/work/copy')\n\
             result = [os.path.getsize(p) for p in ('/work/raw', '/work/big', '/work/copy')]",
        ))
        .await,
    );
    assert_eq!(answer, json!([size, size, size]));
    let expected = pattern(size);
    for name in ["raw", "big", "copy"] {
        assert!(
            std::fs::read(dir.path().join(name)).unwrap() == expected,
            "{name} differs"
        );
    }
    rt.close().await;
}

/// A single write that would cross the 256 MiB quota is refused whole, as
/// documented: `EIO` through an open file (wasi-libc's report of a refused
/// stream write), `EDQUOT` for a positioned write; nothing of it lands, the
/// writes that fit still do, and the host saw the refusal.
#[tokio::test(flavor = "multi_thread")]
async fn a_whole_write_past_the_quota_still_fails() {
    let (rt, dir) = runtime().await;
    let out = rt
        .run(turn(
            "import errno, os\nchunk = bytes(60 << 20)\n\
             fd = os.open('/work/big', os.O_WRONLY | os.O_CREAT)\n\
             sizes = [os.write(fd, chunk) for _ in range(4)]\n\
             def refused(call):\n    try:\n        return call()\n\
             \x20   except OSError as err:\n        return errno.errorcode[err.errno]\n\
             streamed = refused(lambda: os.write(fd, chunk))\n\
             positioned = refused(lambda: os.pwrite(fd, chunk, 240 << 20))\n\
             os.close(fd)\n\
             result = [sizes, streamed, positioned, os.path.getsize('/work/big')]",
        ))
        .await;
    let answer = value(&out);
    let chunk = 60 * MIB;
    assert_eq!(
        answer,
        json!([[chunk, chunk, chunk, chunk], "EIO", "EDQUOT", 4 * chunk]),
        "{answer}"
    );
    assert!(out.denied, "the quota refusal is a sandbox denial");
    assert_eq!(
        std::fs::metadata(dir.path().join("big")).unwrap().len(),
        4 * chunk as u64
    );
    rt.close().await;
}

/// Issue 29, item 6: writes far past a file's end, in every way python
/// makes them: a buffered `seek` then `write`, `os.pwrite`, `os.ftruncate`,
/// `os.lseek` then `os.write`; then a small hole that fits.
pub const WRITES_PAST_THE_END: &str = "import errno, os\n\
def refused(call):\n    try:\n        call()\n        return 'written'\n\
\x20   except OSError as err:\n        return errno.errorcode[err.errno]\n\
def far():\n    with open('/work/sparse', 'wb') as f:\n        f.seek(2 << 30)\n        f.write(b'x')\n\
buffered = refused(far)\n\
fd = os.open('/work/sparse2', os.O_WRONLY | os.O_CREAT)\n\
positioned = refused(lambda: os.pwrite(fd, b'x', 2 << 30))\n\
truncated = refused(lambda: os.ftruncate(fd, 2 << 30))\n\
os.lseek(fd, 1 << 30, os.SEEK_SET)\n\
streamed = refused(lambda: os.write(fd, b'x'))\n\
os.close(fd)\n\
def near():\n    with open('/work/near', 'wb') as f:\n        f.seek(1 << 20)\n        f.write(b'x')\n\
fits = refused(near)\n\
sizes = [os.path.getsize(p) for p in ['/work/sparse', '/work/sparse2', '/work/near']]\n\
result = [buffered, positioned, truncated, streamed, fits, sizes]";

/// What [`WRITES_PAST_THE_END`] must answer: each far write refused by the
/// quota (`EDQUOT`, or `EIO` where wasi-libc reports a refused stream
/// write), the files as small as before, the small hole written; on the
/// host too, and the refusals seen as denials.
pub fn assert_writes_past_the_end_refused(
    out: &code_runner_core::TurnOutcome,
    dir: &std::path::Path,
) {
    let answer = value(out);
    for (i, what) in ["buffered", "positioned", "truncated", "streamed"]
        .iter()
        .enumerate()
    {
        let code = answer[i].as_str().unwrap_or("");
        assert!(
            code == "EDQUOT" || code == "EIO",
            "{what}: {answer} ({})",
            out.stderr.render()
        );
    }
    assert_eq!(answer[4], "written", "{answer}");
    assert_eq!(answer[5], json!([0, 0, (1 << 20) + 1]), "{answer}");
    for name in ["sparse", "sparse2"] {
        let len = std::fs::metadata(dir.join(name)).map_or(0, |m| m.len());
        assert_eq!(len, 0, "{name} on the host");
    }
    assert!(out.denied, "the quota refusals are sandbox denials");
}

/// The lean flavour charges the size a file reaches, holes included: a
/// 2 GiB seek then one byte is refused, not charged as one byte.
#[tokio::test(flavor = "multi_thread")]
async fn a_write_far_past_the_end_is_charged_the_size_it_reaches() {
    let (rt, dir) = runtime().await;
    let out = rt.run(turn(WRITES_PAST_THE_END)).await;
    assert_writes_past_the_end_refused(&out, dir.path());
    rt.close().await;
}
