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
//! differs), so [`Case::programs`] yields one column per language.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::helpers::lang::{mark, two_plus_two};
use crate::helpers::{
    EXPIRED, RESOURCE_EXHAUSTED, RUN, Server, TIMEOUT, client, post_json, wait_until,
};

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
macro_rules! fault_matrix {
    ($( $(#[$meta:meta])* $name:ident => $case:expr; )+) => {$(
        $(#[$meta])*
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            check($case).await;
        }
    )+};
}

fault_matrix! {
    /// A busy loop never yields to the host: the epoch deadline must stop it.
    busy_loop_is_stopped_by_its_timeout => Case {
        python: Code::Src("while True: pass"),
        node: Some(Code::Src("while (true) {}")),
        timeout_ms: Some(300),
        expect: Expect::Error(TIMEOUT, "300 ms"),
        within: ON_TIME,
        ..Case::DEFAULT
    };

    /// A guest parked in a host sleep is invisible to epochs: the host sleep itself must stop.
    sleep_is_stopped_by_its_timeout => Case {
        python: Code::Src("import time\ntime.sleep(60)"),
        node: Some(Code::Src("await new Promise((r) => setTimeout(r, 60000))")),
        timeout_ms: Some(300),
        expect: Expect::Error(TIMEOUT, "300 ms"),
        within: ON_TIME,
        ..Case::DEFAULT
    };

    /// A request cannot buy more time than `max_timeout_ms`: 60000 is clamped to 500.
    timeout_above_the_maximum_is_clamped => Case {
        python: Code::Src("import time\ntime.sleep(60)"),
        node: Some(Code::Src("await new Promise((r) => setTimeout(r, 60000))")),
        config: "max_timeout_ms: 500\ndefault_timeout_ms: 500\n",
        timeout_ms: Some(60_000),
        expect: Expect::Error(TIMEOUT, "500 ms"),
        within: ON_TIME,
        ..Case::DEFAULT
    };

    /// Growing lists past linear memory is `resource_exhausted`, not a host OOM.
    list_memory_bomb_is_resource_exhausted => Case {
        python: Code::Src(include_str!("../../fixtures/memory_bomb_list.py")),
        node: Some(Code::Src("const a = []; for (;;) a.push(new Array(1e6).fill(1))")),
        node_expect: Some(Expect::Error(RESOURCE_EXHAUSTED, "heap limit 128 MiB exceeded")),
        timeout_ms: Some(30_000),
        expect: Expect::Error(RESOURCE_EXHAUSTED, "memory limit 128 MiB"),
        ..Case::DEFAULT
    };

    /// One huge allocation past the ceiling is refused the same way.
    bytes_memory_bomb_is_resource_exhausted => Case {
        python: Code::Src("blob = bytearray(300 << 20)"),
        node: Some(Code::Src("const a = []; for (;;) a.push(new ArrayBuffer(16 << 20))")),
        node_expect: Some(Expect::Error(RESOURCE_EXHAUSTED, "external memory limit 64 MiB exceeded")),
        expect: Expect::Error(RESOURCE_EXHAUSTED, "memory limit"),
        ..Case::DEFAULT
    };

    /// A smaller `memory_mb` is the ceiling that bites, and the message says which.
    memory_bomb_under_a_small_memory_mb_names_it => Case {
        python: Code::Src(include_str!("../../fixtures/memory_bomb_list.py")),
        timeout_ms: Some(30_000),
        memory_mb: Some(64),
        expect: Expect::Error(RESOURCE_EXHAUSTED, "memory limit 64 MiB"),
        ..Case::DEFAULT
    };

    /// Unbounded recursion at the default limit is python's own RecursionError
    /// (or, if the wasm stack goes first, resource_exhausted), never a host crash.
    deep_recursion_is_a_recursion_error_or_resource_exhausted => Case {
        python: Code::Src("def f(n): return f(n + 1)\nf(0)"),
        node: Some(Code::Src("const f = (n) => f(n + 1) + 1;\nf(0)")),
        node_expect: Some(Expect::Throws(&["RangeError: Maximum call stack size exceeded"])),
        expect: Expect::OneOf(&[
            Expect::Raises(&["RecursionError"]),
            Expect::Error(RESOURCE_EXHAUSTED, ""),
        ]),
        ..Case::DEFAULT
    };

    /// With the recursion limit lifted, the wasm stack is what stops it: that
    /// must trap inside wasmtime, not overflow the host thread's stack.
    recursion_past_a_lifted_limit_is_contained => Case {
        python: Code::Src(include_str!("../../fixtures/recursion_past_raised_limit.py")),
        timeout_ms: Some(30_000),
        expect: Expect::OneOf(&[
            Expect::Raises(&["RecursionError", "MemoryError"]),
            Expect::Error(RESOURCE_EXHAUSTED, ""),
        ]),
        ..Case::DEFAULT
    };

    /// 1 GiB of stdout is a success whose stdout is head, marker and tail, at most ~17 KB.
    stdout_flood_is_truncated_around_a_marker => Case {
        python: Code::Src(include_str!("../../fixtures/stdout_flood.py")),
        node: Some(Code::Src(include_str!("../../fixtures/stdout_flood.js"))),
        timeout_ms: Some(30_000),
        expect: Expect::Response(|body| {
            ensure(body["success"] == true, "success true")?;
            ensure(body["result"] == "flooded", "the result untouched")?;
            let stdout = body["stdout"].as_str().unwrap_or("");
            ensure(stdout.len() <= 17 * 1024, format!("≤ 17 KB of stdout, got {}", stdout.len()))?;
            ensure(stdout.contains("[…stdout truncated: was ~1048576 KB; middle omitted]"), "the stdout marker")?;
            ensure(stdout.starts_with("the start\n"), "the head kept")?;
            ensure(stdout.ends_with("the end\n"), "the tail kept")
        }),
        ..Case::DEFAULT
    };

    /// stderr is capped on its own, with a marker naming stderr.
    stderr_flood_is_truncated_with_a_marker_naming_stderr => Case {
        python: Code::Src(include_str!("../../fixtures/stderr_flood.py")),
        node: Some(Code::Src(include_str!("../../fixtures/stderr_flood.js"))),
        timeout_ms: Some(30_000),
        expect: Expect::Response(|body| {
            ensure(body["success"] == true, "success true")?;
            let stderr = body["stderr"].as_str().unwrap_or("");
            ensure(stderr.len() <= 17 * 1024, format!("≤ 17 KB of stderr, got {}", stderr.len()))?;
            ensure(stderr.contains("[…stderr truncated: was ~"), "the stderr marker")?;
            ensure(stderr.ends_with("the end\n"), "the tail kept")?;
            ensure(body["stdout"] == "", "stdout untouched")
        }),
        ..Case::DEFAULT
    };

    /// 300 MiB into /work crosses its 256 MiB budget.
    work_flood_in_bytes_is_resource_exhausted => Case {
        python: Code::Src(include_str!("../../fixtures/work_flood_bytes.py")),
        node: Some(Code::Src(include_str!("../../fixtures/scratch_flood_bytes.js"))),
        node_expect: Some(Expect::Error(RESOURCE_EXHAUSTED, "iii.files quota exceeded: 8 MiB and 64 files")),
        timeout_ms: Some(30_000),
        expect: Expect::Error(RESOURCE_EXHAUSTED, "/work"),
        ..Case::DEFAULT
    };

    /// 25000 entries cross /work's 20000-entry budget.
    work_flood_in_files_is_resource_exhausted => Case {
        python: Code::Src(include_str!("../../fixtures/work_flood_files.py")),
        node: Some(Code::Src(include_str!("../../fixtures/scratch_flood_files.js"))),
        node_expect: Some(Expect::Error(RESOURCE_EXHAUSTED, "iii.files quota exceeded: 8 MiB and 64 files")),
        timeout_ms: Some(30_000),
        expect: Expect::Error(RESOURCE_EXHAUSTED, "/work"),
        ..Case::DEFAULT
    };

    /// `..` cannot climb out of the /work preopen.
    dot_dot_out_of_work_fails_in_the_guest => Case {
        python: Code::Src("print(open('/work/../etc/passwd').read())"),
        node: Some(Code::Src("console.log(await iii.files.readText('../etc/passwd'))")),
        node_expect: Some(Expect::Throws(&["IIIError: code-runner::invalid_request"])),
        expect: Expect::Raises(&["PermissionError", "FileNotFoundError"]),
        ..Case::DEFAULT
    };

    /// There is no host filesystem outside /work.
    absolute_host_path_fails_in_the_guest => Case {
        python: Code::Src("print(open('/etc/passwd').read())"),
        node: Some(Code::Src("console.log(await import('/etc/passwd'))")),
        node_expect: Some(Expect::Throws(&["TypeError: cannot import"])),
        expect: Expect::Raises(&["PermissionError", "FileNotFoundError"]),
        ..Case::DEFAULT
    };

    /// A symlink to an absolute host path cannot be made, or cannot be followed.
    absolute_symlink_fails_in_the_guest => Case {
        python: Code::Src(include_str!("../../fixtures/escape_symlink_absolute.py")),
        expect: Expect::Raises(&["PermissionError", "FileNotFoundError"]),
        ..Case::DEFAULT
    };

    /// A relative symlink climbing out of /work cannot be followed.
    relative_symlink_out_of_work_fails_in_the_guest => Case {
        python: Code::Src(include_str!("../../fixtures/escape_symlink_relative.py")),
        expect: Expect::Raises(&["PermissionError", "FileNotFoundError"]),
        ..Case::DEFAULT
    };

    /// An `iii.trigger` whose callee would take 60 s is bounded by the
    /// caller's own 500 ms budget.
    trigger_that_never_answers_is_bounded_by_the_run_timeout => Case {
        python: Code::Src(include_str!("../../fixtures/trigger_never_answers.py")),
        node: Some(Code::Src(include_str!("../../fixtures/trigger_never_answers.js"))),
        timeout_ms: Some(500),
        expect: Expect::Error(TIMEOUT, "500 ms"),
        within: ON_TIME,
        ..Case::DEFAULT
    };

    /// stdin is empty (reads see end-of-file), fd 0 carries nothing to the
    /// host (a frame-like write is refused), and fd 1 written by hand is stdout.
    stdin_reads_and_raw_fd_writes_do_not_break_the_channel => Case {
        python: Code::Src(include_str!("../../fixtures/stdin_and_raw_fds.py")),
        expect: Expect::Response(|body| {
            ensure(body["exit_code"] == 0, "exit_code 0")?;
            ensure(body["result"] == json!({"stdin": "", "fd0": ""}), "empty stdin reads")?;
            ensure(body["stdout"] == "raw\n", "the raw fd 1 write on stdout")
        }),
        ..Case::DEFAULT
    };

    /// Rebinding module attributes the wrapper also uses (os.read/os.write,
    /// json, math) cannot break the channel.
    rebinding_wrapper_modules_does_not_break_the_channel => Case {
        python: Code::Src(include_str!("../../fixtures/rebind_wrapper_modules.py")),
        node: Some(Code::Src(include_str!("../../fixtures/rebind_intrinsics.js"))),
        expect: Expect::Response(|body| ensure(body["result"] == "rebound", "result 'rebound'")),
        ..Case::DEFAULT
    };

    /// The wrapper binds the builtins it needs before any program runs, so a
    /// program that rebinds them breaks only itself: its turn completes.
    rebinding_builtins_does_not_break_the_wrapper => Case {
        python: Code::Src(include_str!("../../fixtures/rebind_builtins.py")),
        expect: Expect::Response(|body| ensure(body["result"] == "rebound" && body["exit_code"] == 0, "result 'rebound', exit 0")),
        ..Case::DEFAULT
    };

    /// 1 MiB of source (a comment) fits the body limit and compiles.
    one_mib_comment_runs => Case {
        python: Code::Gen(|| format!("# {}\nresult = 'ran'", "x".repeat(1 << 20))),
        node: Some(Code::Gen(|| format!("// {}\nreturn 'ran'", "x".repeat(1 << 20)))),
        timeout_ms: Some(30_000),
        expect: Expect::Response(|body| ensure(body["result"] == "ran", "result 'ran'")),
        ..Case::DEFAULT
    };

    /// 1 MiB of source as a string literal compiles and is whole.
    one_mib_string_literal_runs => Case {
        python: Code::Gen(|| format!("s = '{}'\nresult = len(s)", "y".repeat(1 << 20))),
        node: Some(Code::Gen(|| format!("const s = '{}';\nreturn s.length", "y".repeat(1 << 20)))),
        timeout_ms: Some(30_000),
        expect: Expect::Response(|body| ensure(body["result"] == 1 << 20, "result 1048576")),
        ..Case::DEFAULT
    };

    /// Guest python reaches the bus: a nested `code-runner::run` answers its result.
    trigger_of_code_runner_run_returns_its_result => Case {
        python: Code::Src(include_str!("../../fixtures/trigger_run.py")),
        node: Some(Code::Src(include_str!("../../fixtures/trigger_run_python.js"))),
        timeout_ms: Some(30_000),
        expect: Expect::Response(|body| ensure(body["result"] == 42, "result 42")),
        ..Case::DEFAULT
    };

    /// A turn awaiting a promise nothing will ever settle is idle, not busy:
    /// its own thread ends it at the deadline (python has no such state; its
    /// column is the equivalent host-blocking read).
    idle_never_settling_promise_is_stopped_by_its_timeout => Case {
        python: Code::Src("import time\ntime.sleep(60)"),
        node: Some(Code::Src("await new Promise(() => {})")),
        timeout_ms: Some(300),
        expect: Expect::Error(TIMEOUT, "300 ms"),
        within: ON_TIME,
        ..Case::DEFAULT
    };

    /// A rejected promise nobody handles fails the run as Node would exit: exit 1.
    unhandled_rejection_is_a_failed_run => Case {
        python: Code::Src("raise RuntimeError('unhandled')"),
        node: Some(Code::Src("Promise.reject(new Error('unhandled')); await new Promise((r) => setTimeout(r, 20)); return 1")),
        expect: Expect::Raises(&["RuntimeError"]),
        node_expect: Some(Expect::Throws(&["Error: unhandled"])),
        ..Case::DEFAULT
    };

    /// A thrown non-Error value is shown as Node shows it, and the run fails.
    throwing_a_non_error_is_a_failed_run => Case {
        python: Code::Src("raise SystemExit('not an error')"),
        node: Some(Code::Src("throw { reason: 'not an error' }")),
        expect: Expect::Response(|body| ensure(body["exit_code"] == 1 && body["stderr"] == "not an error\n", "exit 1, the message on stderr")),
        node_expect: Some(Expect::Response(|body| {
            ensure(body["exit_code"] == 1, "exit_code 1")?;
            ensure(body["stderr"] == "{ reason: 'not an error' }\n", "the value inspected on stderr")
        })),
        ..Case::DEFAULT
    };

    /// Every way out of the scratch directory fails inside the guest.
    scratch_escape_attempts_fail_in_the_guest => Case {
        python: Code::Src("import os\nresult = [os.path.exists(p) for p in ['/etc/passwd', '/work/../etc/passwd']]"),
        node: Some(Code::Src(include_str!("../../fixtures/scratch_escape.js"))),
        expect: Expect::Response(|body| ensure(body["result"] == json!([false, false]), "nothing outside /work")),
        node_expect: Some(Expect::Response(|body| {
            let refused = body["result"].as_array().is_some_and(|all| all.len() == 10 && all.iter().all(|r| r == true));
            ensure(refused, "every attempt refused")
        })),
        ..Case::DEFAULT
    };

    /// Guest node reaches python through the bus, and the other way round.
    python_triggers_node_and_gets_its_result => Case {
        python: Code::Src(include_str!("../../fixtures/trigger_run_node.py")),
        node: Some(Code::Src("return (await iii.trigger({ function_id: 'code-runner::run', payload: { lang: 'node', code: 'return 6 * 7' } })).result")),
        timeout_ms: Some(30_000),
        expect: Expect::Response(|body| ensure(body["result"] == 42, "result 42")),
        ..Case::DEFAULT
    };

    /// A bus error reaches the guest as an exception carrying the bus `.code`.
    trigger_bus_error_raises_with_its_code => Case {
        python: Code::Src(include_str!("../../fixtures/trigger_bus_error.py")),
        node: Some(Code::Src(include_str!("../../fixtures/trigger_bus_error.js"))),
        expect: Expect::Response(|body| {
            ensure(
                body["result"] == json!({"raised": true, "code": "function_not_found"}),
                "an exception with .code function_not_found",
            )
        }),
        ..Case::DEFAULT
    };
}

/// Tearing down a runtime in the middle of a call stops that call: it answers
/// `expired` promptly, instead of running on (or hanging) in a dead runtime.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn teardown_during_a_call_answers_expired_to_that_call() {
    let server = Server::start().await;
    let id = server.keep("pass").await;
    let running = {
        let url = server.url.clone();
        let payload = json!({
            "runtime_id": id,
            "code": include_str!("../../fixtures/sleep_after_marking_started.py"),
            "timeout_ms": 30_000,
        });
        tokio::spawn(async move { post_json(&client(), &url, RUN, &payload).await })
    };
    wait_until("the call to start", NO_HANG, || {
        server.dirs_holding("started").len() == 1
    })
    .await;
    let started = Instant::now();
    let teardown = server.teardown(&id).await;
    assert_eq!(
        teardown.ok(),
        &json!({"torn_down": true, "unregistered": [], "runtime_id": id})
    );
    let answer = running.await.expect("the running call's task");
    answer.assert_error(EXPIRED, "");
    assert!(
        started.elapsed() < ON_TIME,
        "the running call was stopped late"
    );
    server
        .run_on(&id, "result = 1")
        .await
        .assert_error(EXPIRED, "");
    assert!(server.dirs_holding("started").is_empty());
    server.assert_still_serves().await;
}

/// A guest that tries to end its turn early (a frame-like text on every
/// descriptor, a nested call of the runner's own turn function) and keeps
/// running must not outlive the turn's deadline: the runtime's next call
/// answers on time (a fresh 4, or a documented error), not never.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_done_frame_does_not_outlive_the_turn_deadline() {
    let mut server = Server::process("").await;
    let id = server.keep("pass").await;
    let forged = json!({
        "runtime_id": id,
        "code": include_str!("../../fixtures/forge_done_frame.py"),
        "timeout_ms": 1000,
    });
    let started = Instant::now();
    let _ = tokio::time::timeout(ON_TIME, server.call(RUN, forged))
        .await
        .expect("the forging turn itself hung past its 1000 ms budget");
    let next = json!({"runtime_id": id, "code": "result = 2 + 2", "timeout_ms": 1000});
    let answer = tokio::time::timeout(ON_TIME, server.call(RUN, next))
        .await
        .expect("the next call hung: the forging guest escaped its turn's deadline");
    if answer.status.is_success() {
        assert_eq!(answer.body["result"], 4, "{}", answer.body);
    } else {
        let code = answer.error_code().unwrap_or("");
        assert!([TIMEOUT, EXPIRED].contains(&code), "{}", answer.body);
    }
    assert!(started.elapsed() < 2 * ON_TIME);
    server.assert_alive();
    server.assert_still_serves().await;
}
