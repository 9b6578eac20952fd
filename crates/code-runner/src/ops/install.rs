//! `code-runner::install`: packages an agent asks for, added to one kept
//! runtime. Host authority ([`crate::bus::bridge::HOST_ONLY`]): guest code
//! can never call it. Every package must be named by the operator's
//! `install_allow` (or `*`); empty, the default, turns it off.
//!
//! The pipelines are the operator's: npm's lock with integrity, no install
//! scripts, no native addons, esbuild's bundle (node, typescript), added as
//! a second module map of that runtime's loader; pip's pure wheels with
//! hashes, resolved against the data stack when python runs it (python),
//! copied into the runtime's `/work/.packages` and appended to `sys.path`
//! by a host turn. Python's instances are pre-initialised images whose
//! mounts are fixed when the image is made, so a live one cannot gain a
//! mount; its `/work` is its own, counted and snapshotted with it. Installs
//! are cached by their list across runtimes; a runtime holds at most
//! [`MAX_PYTHON_BYTES`] of python's and `code_runner_v8::packages::MAX_ADDED`
//! sets of node's.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use code_runner_core::{Bindings, Lang, RunnerError, Task, TurnSpec};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::bus::bridge;
use crate::bus::names::INSTALL;
use crate::bus::payload::parse;
use crate::bus::{CallError, Caller, Function};
use crate::ops::{Ops, handler_as};

/// At most this many packages in one request.
const MAX_REQUIREMENTS: usize = 16;
/// At most this many bytes and files of python packages in one runtime's `/work`.
pub const MAX_PYTHON_BYTES: u64 = 64 << 20;
const MAX_PYTHON_FILES: usize = 10_000;
/// At most this many installs run at once in the worker (each runs npm or
/// pip as a child); past them a call is `capacity`, at once.
const MAX_INSTALLING: usize = 2;
/// Where python's added packages live in the runtime.
const PYTHON_SITE: &str = ".packages";
/// The host turn that makes them importable (after the data stack and the
/// operator's packages: nothing added can shadow those).
const PYTHON_PATH_TURN: &str = "import importlib, sys\nif '/work/.packages' not in sys.path:\n    sys.path.append('/work/.packages')\nimportlib.invalidate_caches()\n";

/// `code-runner::install`'s request.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InstallRequest {
    /// The kept runtime to add them to (from a `keep: true` run).
    pub runtime_id: String,
    /// Packages in the runtime's language: pip requirements for python
    /// (`tabulate==0.9.0`), `name@range` for node and typescript (`zod@3`).
    pub requirements: Vec<String>,
}

/// `code-runner::install`'s answer.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct InstallResponse {
    /// What the runtime can import now, dependencies included:
    /// `name==version` (python) or the listed `name@version` (node).
    pub installed: Vec<String>,
    /// What the data stack provides of the request instead (python).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub provided: Vec<String>,
    /// How to import them.
    pub note: String,
}

/// `code-runner::install`, for the composition root.
pub(crate) fn function(ops: &Arc<Ops>) -> (&'static str, Function) {
    (
        INSTALL,
        Function::new(
            "Add packages to one kept runtime: pure-Python wheels (python) or npm packages (node, typescript), each named by the operator's install_allow. They are importable from the runtime's next run on.",
            code_runner_core::wire::schema_of::<InstallRequest>(),
            code_runner_core::wire::schema_of::<InstallResponse>(),
            handler_as(ops, install),
        ),
    )
}

/// `code-runner::install`.
pub(crate) async fn install(
    ops: Arc<Ops>,
    payload: Value,
    caller: Caller,
) -> Result<Value, CallError> {
    if caller.guest.is_some() {
        return Err(bridge::refuse_guest(INSTALL, "installing packages"));
    }
    let request: InstallRequest = parse(payload)?;
    let config = ops.config();
    let count = request.requirements.len();
    if count == 0 || count > MAX_REQUIREMENTS {
        return Err(RunnerError::invalid(format!(
            "requirements: {count} packages (1 to {MAX_REQUIREMENTS})"
        ))
        .into());
    }
    let (kept, _busy) = crate::ops::standing::enter(&ops, &request.runtime_id).await?;
    static INSTALLING: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(MAX_INSTALLING);
    let _installing = INSTALLING.try_acquire().map_err(|_| {
        RunnerError::new(
            code_runner_core::ErrorCode::Capacity,
            format!(
                "{MAX_INSTALLING} installs are running in this worker; try again when they end"
            ),
        )
    })?;
    let python = kept.lang == Lang::Python;
    for requirement in &request.requirements {
        let name = match python {
            true => {
                code_runner_python::check_requirement(requirement).map_err(RunnerError::invalid)?;
                python_name(requirement)
            }
            false => {
                code_runner_v8::packages::check_spec(requirement)
                    .map_err(|why| RunnerError::invalid(format!("requirements: {why}")))?;
                code_runner_v8::packages::split_spec(requirement)
                    .0
                    .to_string()
            }
        };
        allowed(&config.install_allow, &name, python)?;
    }
    let response = match python {
        true => install_python(&ops, &kept, request.requirements).await?,
        false => install_node(&config, &kept, request.requirements).await?,
    };
    Ok(serde_json::to_value(response).unwrap_or(Value::Null))
}

/// A pip requirement's project name, normalised (PEP 503).
fn python_name(requirement: &str) -> String {
    let end = requirement
        .find(|c: char| !(c.is_ascii_alphanumeric() || "._-".contains(c)))
        .unwrap_or(requirement.len());
    normalise(&requirement[..end])
}

fn normalise(name: &str) -> String {
    name.to_ascii_lowercase().replace(['_', '.'], "-")
}

/// Whether `install_allow` names `name` (python's names compared normalised).
fn allowed(allow: &[String], name: &str, python: bool) -> Result<(), RunnerError> {
    if allow.is_empty() {
        return Err(RunnerError::invalid(
            "install is off on this worker: the operator's install_allow names no packages",
        ));
    }
    let named = allow.iter().any(|entry| {
        entry == "*"
            || match python {
                true => normalise(entry) == name,
                false => entry == name,
            }
    });
    if named {
        return Ok(());
    }
    Err(RunnerError::invalid(format!(
        "install_allow does not name {name}: the operator allows {}",
        crate::ops::guidance::first_of(allow, 20)
    )))
}

async fn install_node(
    config: &code_runner_core::Config,
    kept: &crate::runtimes::registry::Kept,
    specs: Vec<String>,
) -> Result<InstallResponse, RunnerError> {
    let registry = config.npm_registry.clone();
    let dir = tokio::task::spawn_blocking(move || {
        let request = code_runner_v8::packages::Request {
            specs: &specs,
            registry: registry.as_deref(),
            what: "install",
        };
        code_runner_v8::packages::install(&request)
    })
    .await
    .map_err(|err| RunnerError::engine(format!("the installer panicked: {err}")))?
    .map_err(RunnerError::invalid)?;
    let installed = kept.runtime.add_packages(dir).await?;
    Ok(InstallResponse {
        installed,
        provided: Vec::new(),
        note: "import them in this runtime's next runs (`import { x } from 'name'`, or `await import('name')`)".into(),
    })
}

async fn install_python(
    ops: &Arc<Ops>,
    kept: &crate::runtimes::registry::Kept,
    requirements: Vec<String>,
) -> Result<InstallResponse, RunnerError> {
    let work = kept
        .dir_path()
        .ok_or_else(|| RunnerError::invalid("this runtime has no /work to install into"))?;
    let on_stack = ops.engines.python_has_data_stack();
    let packages = tokio::task::spawn_blocking(move || {
        code_runner_python::install_packages(&requirements, on_stack)
    })
    .await
    .map_err(|err| RunnerError::engine(format!("the installer panicked: {err}")))?
    .map_err(|err| {
        RunnerError::invalid(err.to_string().replace("python_packages: ", "install: "))
    })?;
    let Some(packages) = packages else {
        return Err(RunnerError::invalid("requirements: none given"));
    };
    let (from, to) = (packages.site_packages.clone(), work.join(PYTHON_SITE));
    tokio::task::spawn_blocking(move || copy_tree(&from, &to))
        .await
        .map_err(|err| RunnerError::engine(format!("copying the packages panicked: {err}")))??;
    let spec = TurnSpec {
        task: Task::program(PYTHON_PATH_TURN),
        timeout: Duration::from_secs(30),
        bindings: Bindings::default(),
        max_stream_bytes: Some(4096),
        abort: code_runner_core::AbortSignal::new(),
        live: None,
    };
    let outcome = kept.runtime.run(spec).await;
    match outcome.ending {
        code_runner_core::TurnEnding::Exited { exit_code: 0, .. } => {}
        code_runner_core::TurnEnding::Exited { exception, .. } => {
            return Err(RunnerError::engine(format!(
                "the packages were copied to /work/{PYTHON_SITE} but could not be put on sys.path: {}",
                exception.unwrap_or_default()
            )));
        }
        code_runner_core::TurnEnding::Faulted(fault) => return Err(fault.to_runner_error()),
    }
    Ok(InstallResponse {
        installed: packages.installed,
        provided: packages.provided,
        note: format!(
            "importable in this runtime's next runs, from /work/{PYTHON_SITE} (on sys.path)"
        ),
    })
}

/// Copies the wheels' files into the runtime's `/work/.packages`, within
/// [`MAX_PYTHON_BYTES`] and [`MAX_PYTHON_FILES`] for everything there;
/// symlinks are not followed (pip's install has none).
fn copy_tree(from: &Path, to: &Path) -> Result<(), RunnerError> {
    let fail = |err: std::io::Error| RunnerError::engine(format!("copying the packages: {err}"));
    let (mut files, mut bytes) = existing(to);
    let mut stack = vec![(from.to_path_buf(), to.to_path_buf())];
    while let Some((source, target)) = stack.pop() {
        code_runner_core::create_private_dir(&target).map_err(fail)?;
        for entry in std::fs::read_dir(&source).map_err(fail)? {
            let entry = entry.map_err(fail)?;
            let kind = entry.file_type().map_err(fail)?;
            let destination = target.join(entry.file_name());
            if kind.is_dir() {
                stack.push((entry.path(), destination));
            } else if kind.is_file() {
                files += 1;
                bytes += entry.metadata().map_err(fail)?.len();
                if files > MAX_PYTHON_FILES || bytes > MAX_PYTHON_BYTES {
                    return Err(RunnerError::new(
                        code_runner_core::ErrorCode::ResourceExhausted,
                        format!(
                            "a runtime holds at most {MAX_PYTHON_FILES} files and {} MiB of installed packages",
                            MAX_PYTHON_BYTES >> 20
                        ),
                    ));
                }
                std::fs::copy(entry.path(), &destination).map_err(fail)?;
            }
        }
    }
    Ok(())
}

/// Files and bytes already under `dir`.
fn existing(dir: &Path) -> (usize, u64) {
    let (mut files, mut bytes) = (0, 0);
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            match entry.file_type() {
                Ok(kind) if kind.is_dir() => stack.push(entry.path()),
                Ok(kind) if kind.is_file() => {
                    files += 1;
                    bytes += entry.metadata().map(|m| m.len()).unwrap_or(0);
                }
                _ => {}
            }
        }
    }
    (files, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Empty is off; `*` is any; names compare as each index does.
    #[test]
    fn the_allow_list_decides() {
        let off = allowed(&[], "zod", false).unwrap_err();
        assert!(off.message.contains("install is off"));
        let allow = vec!["tabulate".to_string(), "zod".to_string()];
        assert!(allowed(&allow, "zod", false).is_ok());
        assert!(allowed(&allow, &python_name("Tabulate==0.9.0"), true).is_ok());
        let refused = allowed(&allow, "lodash", false).unwrap_err();
        assert!(
            refused.message.contains("does not name lodash"),
            "{}",
            refused.message
        );
        assert!(allowed(&["*".into()], "anything", false).is_ok());
        assert_eq!(python_name("Text_Unidecode>=1"), "text-unidecode");
    }
}
