//! Faults of files: floods of the runtime's directory meet its budget, and
//! no path, symlink or import leads out of it.

use serde_json::json;

use super::{Case, Code, Expect, ensure};
use crate::helpers::RESOURCE_EXHAUSTED;

fault_matrix! {
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
    /// (Python's `/work`: `iii.files` takes names, not paths, so node has no symlinks.)
    absolute_symlink_fails_in_the_guest => Case {
        python: Code::Src(include_str!("../../fixtures/escape_symlink_absolute.py")),
        expect: Expect::Raises(&["PermissionError", "FileNotFoundError"]),
        ..Case::DEFAULT
    };

    /// A relative symlink climbing out of /work cannot be followed.
    /// (Python's `/work`: `iii.files` takes names, not paths, so node has no symlinks.)
    relative_symlink_out_of_work_fails_in_the_guest => Case {
        python: Code::Src(include_str!("../../fixtures/escape_symlink_relative.py")),
        expect: Expect::Raises(&["PermissionError", "FileNotFoundError"]),
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
}
