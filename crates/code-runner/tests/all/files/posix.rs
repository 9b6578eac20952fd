//! Python's filesystem against Linux's: the table of
//! `fixtures/fs_linux_probe.py` (every path-taking `os`/`shutil`/`pathlib`
//! call it names, on trailing slashes, `./` prefixes, `..` inside `/work` and
//! symlinks inside it; 1,600 cases) run in both interpreters, each answer
//! compared with CPython's on Linux (`fixtures/fs_linux_answers.json`). A
//! case may differ only as [`DIFFERENCES`] says, each with its reason, and
//! as docs/limits.md documents; a listed difference that goes away fails
//! too, so the list stays true.

use serde_json::{Map, Value, json};

use crate::helpers::Server;
use crate::helpers::lang::PYTHON_INTERPRETERS;

const PROBE: &str = include_str!("../../fixtures/fs_linux_probe.py");
const LINUX: &str = include_str!("../../fixtures/fs_linux_answers.json");

/// The cases whose answer in the sandbox is not Linux's, with it and why.
const DIFFERENCES: &[(&str, &str, &str)] = &[
    (
        "symlink to /",
        r#"["EPERM"]"#,
        "a symlink's target may not be absolute: /work is the guest's whole filesystem",
    ),
    (
        "rmtree dangling",
        r#"["None"]"#,
        "CPython without fd-based rmtree (WASI) refuses a symlink by name: \
         OSError('Cannot call rmtree on a symbolic link'), no errno",
    ),
    ("rmtree ./dangling", r#"["None"]"#, "the same"),
    ("rmtree d/../dangling", r#"["None"]"#, "the same"),
    (
        "rmtree e/..",
        r#"["ok", null]"#,
        "rmtree('x/..') empties the directory as on Linux; the sandbox resolves `..` \
         by name, so `x/..` still names it once x is gone and the last rmdir is answered \
         (ENOTEMPTY is not raised: /work itself stays), where Linux finds x gone (ENOENT)",
    ),
    ("rmtree d/sub/..", r#"["ok", null]"#, "the same"),
    ("rmtree d/..", r#"["ok", null]"#, "the same"),
    ("rmtree ld/..", r#"["ok", null]"#, "the same"),
];

/// Every case answers as CPython does on Linux, in both interpreters, but
/// for the documented differences.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_paths_behave_as_on_linux() {
    let linux: Map<String, Value> = serde_json::from_str(LINUX).expect("the Linux table");
    assert!(linux.len() > 1500, "the table has {} cases", linux.len());
    for (case, _, _) in DIFFERENCES {
        assert!(linux.contains_key(*case), "{case} is not in the table");
    }
    for interpreter in PYTHON_INTERPRETERS {
        let server = Server::with_config(&format!(
            "{interpreter}max_result_bytes: 4000000\nmax_timeout_ms: 60000\n"
        ))
        .await;
        let answer = server.run_with(PROBE, json!({"timeout_ms": 60_000})).await;
        let guest = answer.ok()["result"]
            .as_object()
            .cloned()
            .unwrap_or_else(|| panic!("{interpreter}: {}", answer.body));
        let mut wrong = Vec::new();
        for (case, expected) in &linux {
            let got = guest.get(case).cloned().unwrap_or(Value::Null);
            let documented = DIFFERENCES.iter().find(|(c, _, _)| c == case);
            let want = match documented {
                Some((_, answer, _)) => serde_json::from_str(answer).expect("a JSON answer"),
                None => expected.clone(),
            };
            if got != want {
                wrong.push(format!(
                    "{case}: Linux {expected}, sandbox {got}, expected {want}"
                ));
            }
        }
        assert!(
            wrong.is_empty(),
            "{interpreter}: {} of {} cases differ:\n{}",
            wrong.len(),
            linux.len(),
            wrong.join("\n")
        );
    }
}
