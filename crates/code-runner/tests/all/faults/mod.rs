//! The fault matrix: hostile or broken guest programs, each with the outcome
//! the contract documents, run against the real binary over HTTP.
//!
//! Every case runs twice, one-shot and on a kept runtime, and each time the
//! same server must then answer a normal run (and the kept runtime its next
//! turn), leave no runtime directory behind, and still be alive: these run in
//! a `code-runner serve` subprocess because a regression here (a host stack
//! overflow, an allocation abort) would otherwise kill the whole test binary.
//!
//! A case names its program per language: `python`, and `node` where the
//! fault has a JavaScript form (with `node_expect` when its documented ending
//! differs), so [`Case::programs`] yields one column per language; a
//! python-only row says why it has no node column.
//!
//! The rows are grouped by what they attack: `time`, `memory`, `output`
//! (floods and source size), `files`, `channel` (the host's channel and
//! wrapper), `bus`; `turns` holds the two faults that are not a row.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::helpers::lang::{mark, two_plus_two};
use crate::helpers::{RUN, Server, wait_until};

/// "Stopped on time" for a sub-second budget: generous, to stay robust on a busy machine.
const ON_TIME: Duration = Duration::from_secs(5);
/// Any other case: long enough for 1 GiB of output, short enough to call a hang a hang.
const NO_HANG: Duration = Duration::from_secs(60);

/// A guest program: literal source, or source built at run time (e.g. 1 MiB of it).
#[derive(Clone, Copy)]
enum Code {
    Src(&'static str),
    Gen(fn() -> String),
}

impl Code {
    fn text(self) -> String {
        match self {
            Code::Src(src) => src.to_string(),
            Code::Gen(build) => build(),
        }
    }
}

/// What the contract says a case ends in.
#[derive(Clone, Copy)]
enum Expect {
    /// An error: its code, then a substring of its message.
    Error(&'static str, &'static str),
    /// A response (not an error) for a failed program: exit code 1 and a
    /// traceback on stderr naming one of these exceptions.
    Raises(&'static [&'static str]),
    /// The JavaScript form of `Raises`: exit code 1 and stderr starting with
    /// one of these error names.
    Throws(&'static [&'static str]),
    /// A response that passes this check.
    Response(fn(&Value) -> Result<(), String>),
    /// Any one of these, where the documented ending depends on which limit bites first.
    OneOf(&'static [Expect]),
}

impl Expect {
    fn check(self, status: u16, body: &Value) -> Result<(), String> {
        let ok = (200..300).contains(&status);
        match self {
            Expect::Error(code, part) => {
                let got = body["error"]["code"].as_str();
                ensure(got == Some(code), format!("error {code}"))?;
                ensure(!ok, "a non-2xx status")?;
                let message = body["error"]["message"].as_str().unwrap_or("");
                ensure(
                    message.contains(part),
                    format!("a message containing {part:?}"),
                )
            }
            Expect::Raises(names) => {
                ensure(ok, "a 200 response")?;
                ensure(body["exit_code"] == 1, "exit_code 1")?;
                ensure(body["success"] == false, "success false")?;
                let stderr = body["stderr"].as_str().unwrap_or("");
                ensure(
                    stderr.contains("Traceback") && names.iter().any(|n| stderr.contains(n)),
                    format!("a traceback naming one of {names:?}"),
                )
            }
            Expect::Throws(names) => {
                ensure(ok, "a 200 response")?;
                ensure(body["exit_code"] == 1, "exit_code 1")?;
                ensure(body["success"] == false, "success false")?;
                let stderr = body["stderr"].as_str().unwrap_or("");
                ensure(
                    names.iter().any(|n| stderr.starts_with(n)),
                    format!("stderr starting with one of {names:?}"),
                )
            }
            Expect::Response(check) => {
                ensure(ok, "a 200 response")?;
                check(body)
            }
            Expect::OneOf(options) => {
                let misses: Vec<String> = options
                    .iter()
                    .filter_map(|option| option.check(status, body).err())
                    .collect();
                ensure(misses.len() < options.len(), misses.join(" | "))
            }
        }
    }
}

fn ensure(condition: bool, expected: impl Into<String>) -> Result<(), String> {
    if condition {
        Ok(())
    } else {
        Err(format!("expected {}", expected.into()))
    }
}

/// One row of the matrix.
struct Case {
    /// The program in python.
    python: Code,
    /// The program in JavaScript, where the fault has a node form.
    node: Option<Code>,
    /// The node column's ending, when it differs from `expect`.
    node_expect: Option<Expect>,
    /// The server's configuration (YAML).
    config: &'static str,
    timeout_ms: Option<u64>,
    /// Set on the one-shot run and on the kept runtime's creation.
    memory_mb: Option<u64>,
    expect: Expect,
    /// The answer must arrive within this.
    within: Duration,
}

impl Case {
    const DEFAULT: Case = Case {
        python: Code::Src("pass"),
        node: None,
        node_expect: None,
        config: "",
        timeout_ms: None,
        memory_mb: None,
        expect: Expect::Response(|_| Ok(())),
        within: NO_HANG,
    };

    /// The programs of this case, by wire `lang`, each with its expected ending.
    fn programs(&self) -> Vec<(&'static str, Code, Expect)> {
        let mut programs = vec![("python", self.python, self.expect)];
        if let Some(node) = self.node {
            programs.push(("node", node, self.node_expect.unwrap_or(self.expect)));
        }
        programs
    }
}

/// The file every case's program first writes to its `/work`, so the test
/// can tell the case's directory from pre-booted interpreters' empty ones.
const CASE_MARK: &str = ".case";

async fn check(case: Case) {
    let mut server = Server::process(case.config).await;
    for (lang, code, expect) in case.programs() {
        let code = format!("{}{}", mark(lang, CASE_MARK), code.text());
        let mut payload = json!({"lang": lang, "code": code});
        if let Some(ms) = case.timeout_ms {
            payload["timeout_ms"] = ms.into();
        }
        if let Some(mb) = case.memory_mb.filter(|_| lang == "python") {
            payload["memory_mb"] = mb.into();
        }
        expect_within(&server, &case, expect, payload, &format!("{lang} one-shot")).await;
        server.assert_alive();
        server.assert_still_serves().await;
        wait_until("the one-shot runtime's directory to go", NO_HANG, || {
            server.dirs_holding(CASE_MARK).is_empty()
        })
        .await;

        let mut create = json!({"lang": lang, "code": two_plus_two(lang), "keep": true});
        if let Some(mb) = case.memory_mb.filter(|_| lang == "python") {
            create["memory_mb"] = mb.into();
        }
        let created = server.call(RUN, create).await;
        let id = created.ok()["runtime_id"].as_str().unwrap().to_string();
        let mut payload = json!({"runtime_id": id, "code": code});
        if let Some(ms) = case.timeout_ms {
            payload["timeout_ms"] = ms.into();
        }
        expect_within(&server, &case, expect, payload, &format!("{lang} kept")).await;
        server.assert_alive();
        let next = server.run_on(&id, two_plus_two(lang)).await;
        assert_eq!(
            next.ok()["result"],
            4,
            "{lang}: the kept runtime must answer its next turn"
        );
        server.teardown(&id).await.ok();
        assert!(
            server.dirs_holding(CASE_MARK).is_empty(),
            "{lang}: teardown left the kept runtime's directory"
        );
        server.assert_still_serves().await;
    }
    server.assert_alive();
}

async fn expect_within(server: &Server, case: &Case, expect: Expect, payload: Value, what: &str) {
    let started = Instant::now();
    let answer = server.call(RUN, payload).await;
    let took = started.elapsed();
    if let Err(why) = expect.check(answer.status.as_u16(), &answer.body) {
        panic!(
            "{what}: {why}; got HTTP {}: {}",
            answer.status,
            truncate(&answer.body.to_string())
        );
    }
    assert!(
        took < case.within,
        "{what}: answered after {took:?}, over {:?}",
        case.within
    );
}

fn truncate(text: &str) -> String {
    match text.char_indices().nth(2000) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

/// Defines one `#[tokio::test]` per row, named for the behaviour it guards.
/// (Defined before the modules below, which hold the rows.)
macro_rules! fault_matrix {
    ($( $(#[$meta:meta])* $name:ident => $case:expr; )+) => {$(
        $(#[$meta])*
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            super::check($case).await;
        }
    )+};
}

mod bus;
mod channel;
mod files;
mod memory;
mod output;
mod time;
mod turns;
