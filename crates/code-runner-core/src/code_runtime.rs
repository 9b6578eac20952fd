//! The code-runtime seam: embed an engine in a larger program without the worker.
//!
//! [`CodeRuntime::resolve`] validates a [`CodeRunRequest`] and applies the
//! provider's defaults; [`CodeRuntime::run`] executes the resulting
//! [`CodeRunSpec`] in a fresh, isolated runtime and never fails for what the
//! program did: the outcome is a [`CodeRunResult`] whose `error` names one
//! [`FailureKind`]. [`CodeRuntime::dispose`] stops and awaits every run in flight.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::bindings::{BindingNamespace, Bindings};
use crate::caps::serialized_len;
use crate::engine::{AbortSignal, Engine, FailureKind, RuntimeOptions, Task, TurnEnding, TurnSpec};
use crate::error::RunnerError;
use crate::settle::{Settled, ValuePolicy, settle_completion};

/// The working directory every program sees.
pub const WORK_DIR: &str = "/work";

/// File-effect mode for one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// The working directory is readable, nothing is writable.
    ReadOnly,
    /// Only the working directory is writable.
    WorkspaceWrite,
    /// The host filesystem: never enforceable here, always refused.
    FullAccess,
}

/// How complete the confining backend's enforcement is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxEnforcement {
    /// Every file effect goes through the backend's checks.
    Complete,
}

/// File confinement facts for one run, independent of its outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CodeRunSandbox {
    /// The mode applied.
    pub mode: SandboxMode,
    /// Whether an observed failure matches a denial by the sandbox.
    pub denied: bool,
    /// Completeness of enforcement.
    pub enforcement: SandboxEnforcement,
}

/// Caller inputs for one program.
#[derive(Debug, Clone, Default)]
pub struct CodeRunRequest {
    /// The program source in the runtime's language.
    pub program: String,
    /// Host functions, one global object per namespace.
    pub bindings: Vec<BindingNamespace>,
    /// Working directory; only [`WORK_DIR`] exists in the execution world.
    pub cwd: Option<String>,
    /// Requested budget in milliseconds; capped by the provider.
    pub timeout_ms: Option<u64>,
    /// Requested file policy; `None` means the provider's default (workspace-write).
    pub sandbox_policy: Option<SandboxMode>,
    /// Fires to stop the run hard.
    pub signal: Option<AbortSignal>,
}

/// Fully resolved inputs: `run` never supplies a missing directory or deadline.
#[derive(Debug, Clone)]
pub struct CodeRunSpec {
    /// The program source.
    pub program: String,
    /// Validated bindings.
    pub bindings: Bindings,
    /// Absolute working directory in the execution world.
    pub cwd: String,
    /// Positive deadline in milliseconds, after capping.
    pub timeout_ms: u64,
    /// The file policy to apply.
    pub sandbox_policy: SandboxMode,
    /// Cancellation.
    pub signal: AbortSignal,
}

/// Why a run failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CodeRunFailure {
    /// The failure class.
    pub kind: FailureKind,
    /// Detail, suitable for a model to self-correct.
    pub message: String,
}

/// The outcome of one run; an error is a field, never a rejection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CodeRunResult {
    /// Applied file policy and observed denial.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<CodeRunSandbox>,
    /// The completion value, when the run completed with lossless JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
    /// Captured text: stdout lines, then stderr lines, each in emission order.
    pub logs: Vec<String>,
    /// Present iff the run failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<CodeRunFailure>,
}

/// Provider defaults and ceilings for [`CodeRuntime`].
#[derive(Debug, Clone)]
pub struct CodeRuntimeOptions {
    /// Budget when a request names none (default 5000 ms).
    pub default_timeout_ms: u64,
    /// Ceiling on a request's budget (default 30000 ms).
    pub max_timeout_ms: u64,
    /// Memory per run in MiB (default 128).
    pub memory_mb: u64,
    /// Cap on serialized logs plus value or message (default 1 MiB); `None` disables it.
    pub max_output_bytes: Option<usize>,
    /// Where per-run working directories are created (default: the system temp dir).
    pub scratch_root: PathBuf,
}

impl Default for CodeRuntimeOptions {
    fn default() -> Self {
        CodeRuntimeOptions {
            default_timeout_ms: crate::config::DEFAULT_TIMEOUT_MS,
            max_timeout_ms: crate::config::DEFAULT_MAX_TIMEOUT_MS,
            memory_mb: crate::config::DEFAULT_MEMORY_MB,
            max_output_bytes: Some(1024 * 1024),
            scratch_root: std::env::temp_dir(),
        }
    }
}

/// The seam over one engine: resolve, run, dispose.
pub struct CodeRuntime {
    engine: Arc<dyn Engine>,
    options: CodeRuntimeOptions,
    in_flight: Mutex<HashMap<u64, AbortSignal>>,
    idle: tokio::sync::Notify,
    next_id: AtomicU64,
    disposed: AtomicBool,
}

impl CodeRuntime {
    /// A seam over `engine` with `options`.
    pub fn new(engine: Arc<dyn Engine>, options: CodeRuntimeOptions) -> Self {
        CodeRuntime {
            engine,
            options,
            in_flight: Mutex::new(HashMap::new()),
            idle: tokio::sync::Notify::new(),
            next_id: AtomicU64::new(0),
            disposed: AtomicBool::new(false),
        }
    }

    /// Validates choices and applies defaults.
    ///
    /// # Errors
    /// `code-runner::invalid_request` for invalid bindings, a zero budget, a
    /// working directory outside [`WORK_DIR`], or a policy this provider
    /// cannot enforce (`full-access`).
    pub fn resolve(&self, request: CodeRunRequest) -> Result<CodeRunSpec, RunnerError> {
        let bindings = Bindings::new(request.bindings)?;
        let cwd = request.cwd.unwrap_or_else(|| WORK_DIR.to_string());
        if cwd.trim_end_matches('/') != WORK_DIR {
            return Err(RunnerError::invalid(format!(
                "cwd `{cwd}` does not exist in the execution world; programs run in {WORK_DIR}"
            )));
        }
        let timeout_ms = match request.timeout_ms {
            Some(0) => return Err(RunnerError::invalid("timeout_ms must be at least 1")),
            Some(ms) => ms.min(self.options.max_timeout_ms),
            None => self
                .options
                .default_timeout_ms
                .min(self.options.max_timeout_ms),
        };
        let sandbox_policy = match request
            .sandbox_policy
            .unwrap_or(SandboxMode::WorkspaceWrite)
        {
            SandboxMode::FullAccess => {
                return Err(RunnerError::invalid(
                    "sandbox policy full-access cannot be enforced: programs only ever see their working directory",
                ));
            }
            mode => mode,
        };
        Ok(CodeRunSpec {
            program: request.program,
            bindings,
            cwd: WORK_DIR.to_string(),
            timeout_ms,
            sandbox_policy,
            signal: request.signal.unwrap_or_default(),
        })
    }

    /// Runs a resolved spec in a fresh runtime that is destroyed afterwards.
    pub async fn run(&self, spec: CodeRunSpec) -> CodeRunResult {
        if self.disposed.load(Ordering::SeqCst) {
            return failure(
                FailureKind::SandboxUnavailable,
                "the code runtime was disposed".into(),
            );
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.lock().insert(id, spec.signal.clone());
        let result = self.run_isolated(spec).await;
        let mut in_flight = self.lock();
        in_flight.remove(&id);
        if in_flight.is_empty() {
            self.idle.notify_waiters();
        }
        result
    }

    /// Aborts every run in flight, waits for them to settle, and refuses new ones.
    pub async fn dispose(&self) {
        self.disposed.store(true, Ordering::SeqCst);
        loop {
            let idle = self.idle.notified();
            {
                let in_flight = self.lock();
                if in_flight.is_empty() {
                    return;
                }
                in_flight.values().for_each(AbortSignal::abort);
            }
            idle.await;
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, AbortSignal>> {
        self.in_flight
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    async fn run_isolated(&self, spec: CodeRunSpec) -> CodeRunResult {
        let work = match tempdir_in(&self.options.scratch_root) {
            Ok(dir) => dir,
            Err(err) => return failure(FailureKind::SandboxUnavailable, err),
        };
        let options = RuntimeOptions {
            memory_mb: self.options.memory_mb,
            work_dir: work.path.clone(),
            read_only: spec.sandbox_policy == SandboxMode::ReadOnly,
            max_result_bytes: self.options.max_output_bytes,
            ..RuntimeOptions::default()
        };
        let runtime = match self.engine.spawn(options).await {
            Ok(runtime) => runtime,
            Err(err) => return failure(FailureKind::SandboxUnavailable, err.message),
        };
        let cap = self.options.max_output_bytes;
        let turn = TurnSpec {
            live: None,
            task: Task::Program(spec.program),
            timeout: Duration::from_millis(spec.timeout_ms),
            bindings: spec.bindings,
            max_stream_bytes: cap,
            abort: spec.signal,
        };
        let outcome = runtime.run(turn).await;
        runtime.close().await;
        drop(work);
        let truncated = outcome.stdout.truncated() || outcome.stderr.truncated();
        let logs: Vec<String> = [outcome.stdout.render(), outcome.stderr.render()]
            .iter()
            .flat_map(|text| text.lines().map(str::to_string).collect::<Vec<_>>())
            .collect();
        let sandbox = |denied: bool| CodeRunSandbox {
            mode: spec.sandbox_policy,
            denied,
            enforcement: SandboxEnforcement::Complete,
        };
        let (value, error) = match outcome.ending {
            TurnEnding::Faulted(fault) => {
                let denied = outcome.denied;
                let mut result = failure(fault.kind(), fault.message());
                result.logs = logs;
                result.sandbox = Some(sandbox(denied));
                return result;
            }
            TurnEnding::Exited {
                exit_code,
                completion,
                exception,
            } => match (exception, exit_code) {
                (Some(text), _) => (None, Some((FailureKind::Exception, text))),
                (None, 0) => match settle_completion(
                    completion,
                    ValuePolicy::Lossless {
                        max_output_bytes: cap,
                    },
                ) {
                    Settled::Value(value, _) => (value, None),
                    Settled::Failed(kind, message) => (None, Some((kind, message))),
                },
                (None, code) => (
                    None,
                    Some((
                        FailureKind::Exception,
                        format!("the program exited with status {code}"),
                    )),
                ),
            },
        };
        let payload = serialized_len(&Value::from(logs.clone()))
            + value.as_ref().map_or(0, serialized_len)
            + error
                .as_ref()
                .map_or(0, |(_, message)| message.len() as u64);
        if let Some(max) = cap.filter(|max| truncated || payload > *max as u64) {
            return CodeRunResult {
                sandbox: Some(sandbox(false)),
                value: None,
                logs: Vec::new(),
                error: Some(CodeRunFailure {
                    kind: FailureKind::OutputLimit,
                    message: format!(
                        "logs plus value or message exceeded the {max}-byte output cap"
                    ),
                }),
            };
        }
        let denied = error.is_some() && outcome.denied;
        CodeRunResult {
            sandbox: Some(sandbox(denied)),
            value,
            logs,
            error: error.map(|(kind, message)| CodeRunFailure { kind, message }),
        }
    }
}

fn failure(kind: FailureKind, message: String) -> CodeRunResult {
    CodeRunResult {
        sandbox: None,
        value: None,
        logs: Vec::new(),
        error: Some(CodeRunFailure { kind, message }),
    }
}

/// A per-run directory, removed when dropped.
struct TempWork {
    path: PathBuf,
}

fn tempdir_in(root: &std::path::Path) -> Result<TempWork, String> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let name = format!(
        "code-runner-seam-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    let path = root.join(name);
    crate::fs::create_private_dir(&path).map_err(|err| {
        format!(
            "cannot create a working directory under {}: {err}",
            root.display()
        )
    })?;
    Ok(TempWork { path })
}

impl Drop for TempWork {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}
