//! What a hostile guest or engine peer sends through a real iii engine to
//! the real binary (issue 9, for the node engine first): payloads nested or
//! sized past the engine's limits, results nested past them, and what a
//! worker logging at `trace` writes of a runtime id.

use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tungstenite::stream::MaybeTlsStream;
use tungstenite::{Message, WebSocket};

use crate::helpers::engine::{EngineProc, WorkerProc};

/// How long a raw peer waits for an answer that should come.
const ANSWER_WITHIN: Duration = Duration::from_secs(60);

/// A raw WebSocket peer of the engine: sends frames our CLI cannot (JSON
/// nested past 128 levels, which the CLI refuses to parse; 20 MB, past the
/// argument limit of a command line).
struct RawPeer(WebSocket<MaybeTlsStream<TcpStream>>);

impl RawPeer {
    fn connect(engine: &EngineProc) -> RawPeer {
        let (socket, _) =
            tungstenite::connect(engine.url()).expect("a raw connection to the engine");
        if let MaybeTlsStream::Plain(stream) = socket.get_ref() {
            stream
                .set_read_timeout(Some(Duration::from_millis(500)))
                .unwrap();
        }
        RawPeer(socket)
    }

    /// Sends an invocation of `function_id` whose `data` is the JSON text
    /// `data`; returns its invocation id, or `None` when the engine closed
    /// the connection first (its answer to a frame it refuses).
    fn invoke(&mut self, function_id: &str, data: &str) -> Option<String> {
        let id = format!("00000000-0000-4000-8000-{:012x}", rand_id());
        let frame = format!(
            r#"{{"type":"invokefunction","invocation_id":"{id}","function_id":"{function_id}","data":{data}}}"#
        );
        self.0.send(Message::text(frame)).ok().map(|()| id)
    }

    /// The result of invocation `id`, or `None` when the connection ended
    /// or nothing came within `wait`.
    fn answer(&mut self, id: &str, wait: Duration) -> Option<Value> {
        let until = Instant::now() + wait;
        while Instant::now() < until {
            match self.0.read() {
                Ok(Message::Text(text)) if text.contains(id) => {
                    return serde_json::from_str(&text).ok();
                }
                Ok(_) => {}
                Err(tungstenite::Error::Io(err))
                    if matches!(
                        err.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(_) => return None,
            }
        }
        None
    }
}

fn rand_id() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(Instant::now()) & 0xffff_ffff_ffff
}

/// A payload nested 100 000 deep, or nested just past the engine's limit,
/// never reaches the worker: the engine refuses JSON past 128 levels (its
/// serde_json limit; it logs "json decode error … recursion limit exceeded"
/// and drops the frame, so the caller waits for its own timeout). The
/// worker's SDK parses with the same limit although the build enables
/// serde_json's `unbounded_depth`. A 20 MB frame closes the sender's
/// connection (the engine's frame limit); 15 MB of `code` runs. Through all
/// of it the worker stays up and answers the next call. Measured by hand:
/// the worker's peak RSS stayed at 50 MiB through the deep payloads and rose
/// to 189 MiB for the 15 MB program. (The payloads' language is incidental:
/// the engine refuses those frames before any worker sees them; the 15 MB
/// program is node's, python's source size is the fault matrix's.)
#[test]
fn deep_and_huge_payloads_through_the_engine_leave_the_worker_serving() {
    let engine = EngineProc::start();
    let mut worker = WorkerProc::start(&engine, "cr-deep");
    engine
        .trigger_when_registered(
            "code-runner::run",
            &json!({"lang": "node", "code": "return 1"}),
        )
        .unwrap_or_else(|e| panic!("{e}\n{}", worker.log()));
    // Each raw peer sends one frame: the engine closes the connection of a
    // peer whose frame it cannot decode.
    for depth in [100_000, 130] {
        let data = format!(
            r#"{{"lang":"node","code":"return 1","x":{}{}}}"#,
            "[".repeat(depth),
            "]".repeat(depth)
        );
        let mut peer = RawPeer::connect(&engine);
        if let Some(id) = peer.invoke("code-runner::run", &data) {
            assert_eq!(peer.answer(&id, Duration::from_secs(3)), None);
        }
    }
    let log = std::fs::read_to_string(engine.dir.path().join("engine.log")).unwrap_or_default();
    assert!(log.contains("recursion limit exceeded"), "{log}");
    worker.assert_alive();
    let code = format!("/*{}*/ return 7", "x".repeat(15 << 20));
    let mut peer = RawPeer::connect(&engine);
    let id = peer
        .invoke(
            "code-runner::run",
            &json!({"lang": "node", "code": code}).to_string(),
        )
        .expect("the engine takes a 15 MB frame");
    let answer = peer
        .answer(&id, ANSWER_WITHIN)
        .expect("15 MB of code is answered");
    assert_eq!(answer["result"]["result"], 7, "{answer:.300}");
    let code = format!("/*{}*/ return 8", "x".repeat(20 << 20));
    let mut peer = RawPeer::connect(&engine);
    if let Some(id) = peer.invoke(
        "code-runner::run",
        &json!({"lang": "node", "code": code}).to_string(),
    ) {
        assert_eq!(peer.answer(&id, Duration::from_secs(3)), None);
    }
    worker.assert_alive();
    let after = engine
        .trigger(
            "code-runner::run",
            &json!({"lang": "node", "code": "return 2 + 2"}),
        )
        .unwrap_or_else(|e| panic!("{e}\n{}", worker.log()));
    assert_eq!(after["result"], 4, "{after}");
}

/// A result nested past the engine's JSON limit is `null` through the
/// engine, in both languages. Before, node let results nest 200 deep: the
/// worker's answer of a 150-deep result was refused by the engine, and the
/// caller got no answer at all until its own timeout.
#[test]
fn a_result_nested_past_the_engine_limit_is_null_not_lost() {
    let engine = EngineProc::start();
    let worker = WorkerProc::start(&engine, "cr-nest");
    for (lang, code) in [
        (
            "node",
            "let v = []; for (let i = 1; i < 150; i++) v = [v]; return v",
        ),
        (
            "python",
            "v = []\nfor _ in range(1, 150):\n    v = [v]\nresult = v",
        ),
    ] {
        let answer = engine
            .trigger_when_registered(
                "code-runner::run",
                &json!({"lang": lang, "timeout_ms": 30_000, "code": code}),
            )
            .unwrap_or_else(|e| panic!("{e}\n{}", worker.log()));
        assert_eq!(answer["exit_code"], 0, "{lang}: {answer}");
        assert_eq!(answer["result"], Value::Null, "{lang}: {answer}");
    }
}

/// A worker on an engine logging at `trace` never writes a runtime id in
/// full, whichever language the runtime is. Before, the WebSocket crates'
/// trace events quoted every frame, so each answer carrying a `runtime_id`
/// was in the log whole.
#[test]
fn a_trace_log_on_an_engine_holds_no_runtime_id() {
    let engine = EngineProc::start();
    let mut worker = WorkerProc::with_log_filter(&engine, "cr-trace", "", "trace");
    for (lang, keep, turn) in [
        ("python", "x = 41", "result = x + 1"),
        ("node", "globalThis.x = 41", "return x + 1"),
    ] {
        let kept = engine
            .trigger_when_registered(
                "code-runner::run",
                &json!({"lang": lang, "keep": true, "code": keep, "timeout_ms": 30000}),
            )
            .unwrap_or_else(|e| panic!("{e}\n{}", worker.log()));
        let id = kept["runtime_id"].as_str().expect("a kept runtime's id");
        let again = engine
            .trigger(
                "code-runner::run",
                &json!({"runtime_id": id, "code": turn, "timeout_ms": 30000}),
            )
            .unwrap();
        assert_eq!(again["result"], 42, "{lang}: {again}");
        let log = worker.log();
        assert!(log.contains("TRACE"), "the worker did not log at trace");
        let secret = &id[id.len() - 32..];
        assert!(
            !log.contains(secret),
            "{lang}: the log holds the runtime id in full"
        );
    }
    worker.assert_alive();
}
