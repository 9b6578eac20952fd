//! Faults of size: floods of stdout and stderr are cut around a marker, and
//! a megabyte of source compiles and runs.

use super::{Case, Code, Expect, ensure};

fault_matrix! {
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
}
