//! The worker's configuration: every key of the contract's table, with its default.

use std::path::PathBuf;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::caps::{ImageCaps, OutputCaps};
use crate::error::RunnerError;

/// Live runtimes across every engine; one more is `code-runner::capacity`.
pub const DEFAULT_MAX_RUNTIMES: usize = 32;
/// Per-run budget when a request names none: long enough for real work, short enough for a chat turn.
pub const DEFAULT_TIMEOUT_MS: u64 = 5_000;
/// Ceiling a request's `timeout_ms` is clamped to.
pub const DEFAULT_MAX_TIMEOUT_MS: u64 = 30_000;
/// Runtimes idle this long are reaped (15 minutes: a conversation's pause, not a day).
pub const DEFAULT_IDLE_TTL_SECS: u64 = 900;
/// V8 object-heap cap per node runtime.
pub const DEFAULT_HEAP_MB: u64 = 128;
/// Off-heap (ArrayBuffer) cap per node runtime; `heap_mb` does not cover it.
pub const DEFAULT_EXTERNAL_MB: u64 = 64;
/// `iii.files` quota per node runtime.
pub const DEFAULT_SCRATCH_MB: u64 = 8;
/// Files per node scratch directory.
pub const DEFAULT_SCRATCH_FILES: u64 = 64;
/// Serialized `result` ceiling before it becomes an omission marker.
pub const DEFAULT_MAX_RESULT_BYTES: u64 = 32_768;
/// Per-stream ceiling for stdout and stderr before head+tail truncation.
pub const DEFAULT_MAX_STREAM_BYTES: u64 = 16_384;
/// Python linear-memory ceiling a request's `memory_mb` may ask for.
pub const DEFAULT_MAX_MEMORY_MB: u64 = 512;
/// Python linear memory when a request names none.
pub const DEFAULT_MEMORY_MB: u64 = 128;
/// Booted python interpreters kept ready for one-shot runs (booting is most of a one-shot run).
pub const DEFAULT_WARM_POOL: usize = 2;
/// The least linear memory CPython 3.12 boots in (its heap and stdlib imports need ~30 MiB).
pub const MIN_MEMORY_MB: u64 = 40;
/// The least V8 heap a node runtime boots and runs a small program in.
pub const MIN_HEAP_MB: u64 = 16;
/// The most linear memory a python runtime can address (wasm32: 4 GiB).
pub const MAX_MEMORY_MB_CEILING: u64 = 4096;
/// The most `max_runtimes` a worker accepts. Each slot reserves address
/// space for its memories up front (about 8 GiB of the 128 TiB a process
/// has): 4096 boots, 16 000 leaves python unavailable after the restart that
/// applies it.
pub const MAX_RUNTIMES_CEILING: usize = 4096;

/// Most images a run response carries by default.
pub const DEFAULT_MAX_IMAGES: u64 = 8;
/// Most image data (base64 bytes) a run response carries by default: 4 MiB.
pub const DEFAULT_MAX_IMAGE_BYTES: u64 = 4 * 1024 * 1024;
/// Most collected files a run response carries by default (`max_collect_files`).
pub const DEFAULT_MAX_COLLECT_FILES: u64 = 16;
/// Most collected file data (base64 bytes) a run response carries by default: 8 MiB.
pub const DEFAULT_MAX_COLLECT_BYTES: u64 = 8 * 1024 * 1024;
/// Requests one run may make by default (`egress_max_requests`).
pub const DEFAULT_EGRESS_MAX_REQUESTS: u32 = 32;
/// The default cap on one response body (`egress_max_response_bytes`): 8 MiB.
pub const DEFAULT_EGRESS_MAX_RESPONSE_BYTES: u64 = 8 << 20;
/// The default budget of one request in ms (`egress_timeout_ms`).
pub const DEFAULT_EGRESS_TIMEOUT_MS: u64 = 10_000;
/// Requests one runtime may have in flight by default (`egress_max_in_flight`).
pub const DEFAULT_EGRESS_MAX_IN_FLIGHT: u32 = 8;

/// The most sandbox processes `sandbox_processes` may ask for: each loads
/// both engines (tens of MiB resident before any runtime).
pub const MAX_SANDBOX_PROCESSES: usize = 256;

/// The most CPU a kept node runtime's turns may add up to and still be
/// snapshotted by replay (`max_replay_ms`).
pub const DEFAULT_MAX_REPLAY_MS: u64 = 10_000;
/// A kept runtime idle this long hibernates (`hibernate_after_secs`).
pub const DEFAULT_HIBERNATE_AFTER_SECS: u64 = 60;
/// A hibernated session unused this long ends (`session_ttl_secs`): a day.
pub const DEFAULT_SESSION_TTL_SECS: u64 = 86_400;
/// The most hibernated sessions a store keeps (`max_sessions`).
pub const DEFAULT_MAX_SESSIONS: usize = 10_000;

/// The keys that apply to the very next call when the configuration changes.
///
/// Every other key is captured when the engines boot and cannot be rebound
/// under live runtimes: a change to one is saved at once and applies at the
/// next start.
pub const NEXT_CALL_KEYS: [&str; 22] = [
    "max_result_bytes",
    "max_stream_bytes",
    "max_images",
    "max_image_bytes",
    "max_collect_files",
    "max_collect_bytes",
    "default_timeout_ms",
    "max_timeout_ms",
    "inject_guidance",
    "guest_writable_namespaces",
    "guest_trigger_types",
    "mcp_guest_tools",
    "egress_allow",
    "egress_max_requests",
    "egress_max_response_bytes",
    "egress_timeout_ms",
    "egress_max_in_flight",
    "egress_secrets",
    "approval_required",
    "install_allow",
    "max_snapshot_mb",
    "max_replay_ms",
];

/// The worker's configuration, read from YAML or JSON; every key is optional.
///
/// Unknown keys are refused by name. `0` disables `max_result_bytes` and
/// `max_stream_bytes`; [`Config::output_caps`] turns that into `None`. The
/// keys in [`NEXT_CALL_KEYS`] apply to the next call when changed; the others
/// at the next start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
#[schemars(
    title = "CodeRunnerConfig",
    description = "code-runner's configuration. Output caps, timeouts and inject_guidance apply to the next call; every other key when the worker next starts. 0 disables max_result_bytes, max_stream_bytes and scratch_mb."
)]
pub struct Config {
    /// Live runtimes across both engines (default 32). Applies at the next start.
    #[schemars(range(min = 1, max = MAX_RUNTIMES_CEILING))]
    pub max_runtimes: usize,
    /// Per run when unspecified, in ms (default 5000). Applies to the next call.
    #[schemars(range(min = 1))]
    pub default_timeout_ms: u64,
    /// Ceiling a request's `timeout_ms` is clamped to (default 30000). Applies to the next call.
    #[schemars(range(min = 1))]
    pub max_timeout_ms: u64,
    /// Reap kept runtimes idle this long, in seconds (default 900). Applies at the next start.
    #[schemars(range(min = 1))]
    pub idle_ttl_secs: u64,
    /// V8 object-heap cap per node runtime, at least 16 (default 128). Applies at the next start.
    pub heap_mb: u64,
    /// Off-heap (ArrayBuffer) cap per node runtime; 0 allows none (default 64). Applies at the next start.
    pub external_mb: u64,
    /// `iii.files` quota per node runtime; 0 disables `iii.files`, every write
    /// is refused (default 8). Applies at the next start.
    pub scratch_mb: u64,
    /// Max files per node runtime (default 64). Applies at the next start.
    pub scratch_files: u64,
    /// Where node scratch directories live (default: the data directory). Applies at the next start.
    pub scratch_root: Option<PathBuf>,
    /// Append the usage guidance to agent system prompts (default true). Applies to the next call.
    pub inject_guidance: bool,
    /// Ceiling on the serialized result, in bytes; 0 disables it (default 32768). Applies to the next call.
    pub max_result_bytes: u64,
    /// Ceiling on each of stdout/stderr, in bytes; 0 disables it (default 16384). Applies to the next call.
    pub max_stream_bytes: u64,
    /// Most images one run response carries; 0 disables the cap (default 8). Applies to the next call.
    pub max_images: u64,
    /// Ceiling on the image data one run response carries, in base64 bytes; 0 disables it (default 4194304). Applies to the next call.
    pub max_image_bytes: u64,
    /// Most files a run's `collect` returns; past it the list ends with an omission marker (0 returns only the marker; default 16). Applies to the next call.
    pub max_collect_files: u64,
    /// Ceiling on the collected file data one run response carries, in base64 bytes; the first file past it ends the list with an omission marker (default 8388608). Applies to the next call.
    pub max_collect_bytes: u64,
    /// The interpreter behind `lang: "python"`: `auto` (default) runs the data stack (numpy, pandas, scipy, scikit-learn, statsmodels, matplotlib) when `scripts/fetch-python-data` installed it, else the standard-library-only interpreter; `lean` always the latter; `data` always the former. Applies at the next start.
    pub python_interpreter: PythonInterpreter,
    /// Pure-Python packages from PyPI every python runtime can import, as pip
    /// requirements (`tabulate==0.9.0`, `beautifulsoup4>=4.12`; at most 64):
    /// resolved with pip into a lock with hashes at start, wheels with
    /// compiled code refused, cached per list (default none). A package that
    /// cannot be installed stops the start. Applies at the next start.
    pub python_packages: Vec<String>,
    /// npm packages every JavaScript and TypeScript runtime can import, as
    /// `name@range` (`zod@3`, `lodash-es@4.17.21`; at most 64): resolved
    /// with the host's npm into a lock with every tarball's integrity at
    /// start, install scripts and native addons refused, bundled into ESM
    /// and cached per list (default none). A package that cannot be
    /// installed leaves node and typescript unavailable, naming it. Applies at the next start.
    pub node_packages: Vec<String>,
    /// The npm registry `node_packages` and `install` resolve from (default
    /// the host npm's own, normally https://registry.npmjs.org/). Applies at the next start.
    pub npm_registry: Option<String>,
    /// Packages an agent may add to one kept runtime with
    /// `code-runner::install`: package names (`tabulate`, `zod`, `@scope/name`)
    /// or `*` for any; default empty, which turns `install` off. Applies to the next call.
    pub install_allow: Vec<String>,
    /// The largest snapshot `code-runner::snapshot` writes and
    /// `code-runner::restore` reads, in MiB (default 256). Applies to the next call.
    #[schemars(range(min = 1))]
    pub max_snapshot_mb: u64,
    /// The most CPU, in milliseconds, a kept node or TypeScript runtime's
    /// turns may add up to and still be snapshotted (default 10000): its
    /// snapshot is a turn ledger that a restore replays, so this bounds a
    /// restore's work. Past it the runtime says it cannot be snapshotted and
    /// stays live instead of hibernating. Applies to runtimes kept from the next call.
    #[schemars(range(min = 1))]
    pub max_replay_ms: u64,
    /// Where snapshots and hibernated sessions are kept: empty (the
    /// default) for the data directory, an absolute path or `file:///path`
    /// for a directory, `s3://bucket/prefix` for an object store several
    /// workers share (credentials and endpoint from the `AWS_*` environment
    /// variables). Applies at the next start.
    pub snapshot_store: String,
    /// The file of keys snapshots are signed with (default
    /// `<data-dir>/snapshot-keys`, made once with mode 0600); workers that
    /// share a store share it. Applies at the next start.
    pub snapshot_keys_file: Option<String>,
    /// A kept runtime (python's data interpreter, node, TypeScript) idle this long, in seconds, is written to the
    /// snapshot store and closed, freeing its slot; its id keeps working and
    /// its next call wakes it (default 60; 0 never hibernates). Only when
    /// shorter than `idle_ttl_secs`. Applies at the next start.
    pub hibernate_after_secs: u64,
    /// A hibernated session unused this long, in seconds, ends and its
    /// snapshot is deleted (default 86400). Applies at the next start.
    #[schemars(range(min = 1))]
    pub session_ttl_secs: u64,
    /// The most hibernated sessions the store keeps (default 10000); past
    /// it an idle runtime stays live until `idle_ttl_secs`. Applies at the next start.
    #[schemars(range(min = 1))]
    pub max_sessions: usize,
    /// Ceiling on a python request's `memory_mb` (default 512, at least 40). Applies at the next start.
    #[schemars(range(min = MIN_MEMORY_MB, max = MAX_MEMORY_MB_CEILING))]
    pub max_memory_mb: u64,
    /// Interpreters kept booted for one-shot runs at the default memory (default 2; 0 disables).
    /// They hold no `max_runtimes` slot until a run takes one. Applies at the next start.
    pub warm_pool: usize,
    /// Where guest code runs: `in-process` (default: V8 isolates and
    /// wasmtime instances in the worker's own process) or `process` (both
    /// engines in confined sandbox processes, a second layer under the
    /// first). Applies at the next start.
    pub isolation: Isolation,
    /// With `isolation: process`, how many sandbox processes to keep; 0 (the
    /// default) means one per CPU. Applies at the next start.
    #[schemars(range(max = MAX_SANDBOX_PROCESSES))]
    pub sandbox_processes: usize,
    /// Namespaces a host call created that guest code may still register
    /// into and tear down (default none). Applies to the next call.
    pub guest_writable_namespaces: Vec<String>,
    /// Trigger types guest code may bind its functions to through
    /// `engine::register_trigger` (default none). `console:*`, `harness::*`,
    /// `configuration`, `log` and `trace` are refused. Applies to the next call.
    pub guest_trigger_types: Vec<String>,
    /// Show the functions guest code published (node's `iii.registerFunction`,
    /// `register_function` from a run) as tools to every MCP session, marked
    /// and cleaned; by default (false) only the session whose runs published
    /// them sees them. Applies to the next call.
    pub mcp_guest_tools: bool,
    /// Functions whose calls from guest code wait for a person's approval:
    /// ids, or `namespace::*` for every function of a namespace (default
    /// none). The run answers `suspended` and `code-runner::resume` goes
    /// on. Applies to the next call.
    pub approval_required: Vec<String>,
    /// Where guest code's `fetch` (JavaScript) and `urllib` (Python) may go:
    /// `host`, `host:port`, `*.suffix`, `*.suffix:port`, an IP, `ip:port`,
    /// `[v6]:port` or a CIDR. A port defaults to the scheme's (80, 443). A
    /// non-public address (loopback, private, link-local, metadata, …) only
    /// when an entry names it. Default none: no request leaves. Applies to the next call.
    pub egress_allow: Vec<String>,
    /// Requests one run may make (default 32). Applies to the next call.
    #[schemars(range(min = 1))]
    pub egress_max_requests: u32,
    /// The most bytes one response body may have; a larger one is an error,
    /// not a truncated body (default 8388608). Applies to the next call.
    #[schemars(range(min = 1))]
    pub egress_max_response_bytes: u64,
    /// One request's budget in ms, redirects included, never past the run's
    /// deadline (default 10000). Applies to the next call.
    #[schemars(range(min = 1))]
    pub egress_timeout_ms: u64,
    /// Requests one runtime may have in flight at once (default 8, at most 64). Applies to the next call.
    #[schemars(range(min = 1, max = 64))]
    pub egress_max_in_flight: u32,
    /// Secrets guest requests may carry without the guest seeing them:
    /// `{NAME: {env: VAR, hosts: [patterns], in_url: false}}`. The worker reads the value
    /// from its own environment variable `VAR`; guest code sees a
    /// placeholder (`iii.secrets.NAME`, python's `os.environ["NAME"]`) that
    /// becomes the value only in header values of requests to the listed hosts, over https
    /// (plain http only for an entry spelled `http://host`; in URLs too with `in_url`). Applies to the next call.
    pub egress_secrets: std::collections::BTreeMap<String, EgressSecret>,
    /// Where to send traces, OpenTelemetry's OTLP over HTTP with protobuf
    /// bodies: a collector's base URL (`http://collector:4318`; spans go to
    /// its `/v1/traces`) or the full traces URL. Default none: spans reach
    /// only an iii engine the worker is connected to. Applies at the next start.
    pub otlp_endpoint: Option<String>,
}

/// One `egress_secrets` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EgressSecret {
    /// The worker's environment variable that holds the value (at least 8 bytes).
    pub env: String,
    /// The hosts the value may be sent to (patterns as in `egress_allow`),
    /// over https only; an entry spelled `http://host` allows plain http too.
    pub hosts: Vec<String>,
    /// Whether the placeholder may stand in a URL (a query parameter, a
    /// path), not only in a header's value (default false: URLs end up in
    /// logs and redirects).
    #[serde(default)]
    pub in_url: bool,
}

/// The interpreter behind `lang: "python"` (the `python_interpreter` key).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[schemars(inline)]
#[allow(
    missing_docs,
    reason = "variant docs would turn the schema's plain `enum` into `oneOf`"
)]
pub enum PythonInterpreter {
    // The data stack when installed, else lean.
    #[default]
    Auto,
    // CPython 3.14, the standard library only.
    Lean,
    // CPython 3.15 with numpy, pandas, scipy, scikit-learn, statsmodels, matplotlib.
    Data,
}

/// Where guest code runs (the `isolation` key).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
#[schemars(inline)]
#[allow(
    missing_docs,
    reason = "variant docs would turn the schema's plain `enum` into `oneOf`"
)]
pub enum Isolation {
    // In the worker's own process.
    #[default]
    InProcess,
    // In confined sandbox processes.
    Process,
}

impl Isolation {
    /// The configuration's spelling: `in-process` or `process`.
    pub fn as_str(self) -> &'static str {
        match self {
            Isolation::InProcess => "in-process",
            Isolation::Process => "process",
        }
    }
}

impl std::str::FromStr for Isolation {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "in-process" => Ok(Isolation::InProcess),
            "process" => Ok(Isolation::Process),
            other => Err(format!("isolation `{other}` is not in-process or process")),
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_runtimes: DEFAULT_MAX_RUNTIMES,
            default_timeout_ms: DEFAULT_TIMEOUT_MS,
            max_timeout_ms: DEFAULT_MAX_TIMEOUT_MS,
            idle_ttl_secs: DEFAULT_IDLE_TTL_SECS,
            heap_mb: DEFAULT_HEAP_MB,
            external_mb: DEFAULT_EXTERNAL_MB,
            scratch_mb: DEFAULT_SCRATCH_MB,
            scratch_files: DEFAULT_SCRATCH_FILES,
            scratch_root: None,
            inject_guidance: true,
            max_result_bytes: DEFAULT_MAX_RESULT_BYTES,
            max_stream_bytes: DEFAULT_MAX_STREAM_BYTES,
            max_images: DEFAULT_MAX_IMAGES,
            max_image_bytes: DEFAULT_MAX_IMAGE_BYTES,
            max_collect_files: DEFAULT_MAX_COLLECT_FILES,
            max_collect_bytes: DEFAULT_MAX_COLLECT_BYTES,
            python_interpreter: PythonInterpreter::Auto,
            python_packages: Vec::new(),
            node_packages: Vec::new(),
            npm_registry: None,
            install_allow: Vec::new(),
            max_snapshot_mb: 256,
            max_replay_ms: DEFAULT_MAX_REPLAY_MS,
            snapshot_store: String::new(),
            snapshot_keys_file: None,
            hibernate_after_secs: DEFAULT_HIBERNATE_AFTER_SECS,
            session_ttl_secs: DEFAULT_SESSION_TTL_SECS,
            max_sessions: DEFAULT_MAX_SESSIONS,
            max_memory_mb: DEFAULT_MAX_MEMORY_MB,
            warm_pool: DEFAULT_WARM_POOL,
            isolation: Isolation::InProcess,
            sandbox_processes: 0,
            guest_writable_namespaces: Vec::new(),
            guest_trigger_types: Vec::new(),
            approval_required: Vec::new(),
            mcp_guest_tools: false,
            egress_allow: Vec::new(),
            egress_max_requests: DEFAULT_EGRESS_MAX_REQUESTS,
            egress_max_response_bytes: DEFAULT_EGRESS_MAX_RESPONSE_BYTES,
            egress_timeout_ms: DEFAULT_EGRESS_TIMEOUT_MS,
            egress_max_in_flight: DEFAULT_EGRESS_MAX_IN_FLIGHT,
            egress_secrets: Default::default(),
            otlp_endpoint: None,
        }
    }
}

/// `snapshot_store` is empty, an absolute path, `file:///path` or `s3://bucket[/prefix]`.
fn check_snapshot_store(store: &str) -> Result<(), RunnerError> {
    let bucket = store
        .strip_prefix("s3://")
        .map(|rest| rest.split('/').next().unwrap_or(""));
    let ok = store.is_empty()
        || store.starts_with('/')
        || store
            .strip_prefix("file://")
            .is_some_and(|path| path.starts_with('/'))
        || bucket.is_some_and(|bucket| !bucket.is_empty());
    match ok {
        true => Ok(()),
        false => Err(RunnerError::invalid(format!(
            "config key snapshot_store ({store}) must be empty (the data directory), an absolute path, file:///path or s3://bucket/prefix"
        ))),
    }
}

/// `otlp_endpoint` is an `http://` or `https://` URL with a host.
fn check_otlp_endpoint(endpoint: &str) -> Result<(), RunnerError> {
    let rest = endpoint
        .strip_prefix("http://")
        .or_else(|| endpoint.strip_prefix("https://"));
    match rest {
        Some(rest)
            if !rest.is_empty()
                && !rest.starts_with('/')
                && !rest.contains(char::is_whitespace) =>
        {
            Ok(())
        }
        _ => Err(RunnerError::invalid(format!(
            "config key otlp_endpoint ({endpoint}) must be an http:// or https:// URL of an OTLP/HTTP collector, such as http://collector:4318"
        ))),
    }
}

impl Config {
    /// Checks the relations between keys; the message names the offending key.
    ///
    /// # Errors
    /// `code-runner::invalid_request` for a zero `max_runtimes` or timeout, a
    /// `default_timeout_ms` above `max_timeout_ms`, or a `max_memory_mb` or
    /// `heap_mb` below its engine's minimum.
    pub fn validate(&self) -> Result<(), RunnerError> {
        if self.max_runtimes == 0 || self.max_runtimes > MAX_RUNTIMES_CEILING {
            return Err(RunnerError::invalid(format!(
                "config key max_runtimes ({}) must be 1..={MAX_RUNTIMES_CEILING}: every slot reserves address space when the engines boot",
                self.max_runtimes
            )));
        }
        if self.default_timeout_ms == 0 || self.max_timeout_ms == 0 {
            return Err(RunnerError::invalid(
                "config keys default_timeout_ms and max_timeout_ms must be at least 1",
            ));
        }
        if self.default_timeout_ms > self.max_timeout_ms {
            return Err(RunnerError::invalid(format!(
                "config key default_timeout_ms ({}) exceeds max_timeout_ms ({})",
                self.default_timeout_ms, self.max_timeout_ms
            )));
        }
        if self.idle_ttl_secs == 0 {
            return Err(RunnerError::invalid(
                "config key idle_ttl_secs must be at least 1",
            ));
        }
        if self.heap_mb < MIN_HEAP_MB {
            return Err(RunnerError::invalid(format!(
                "config key heap_mb ({}) is below the V8 minimum of {MIN_HEAP_MB}",
                self.heap_mb
            )));
        }
        if self.max_memory_mb < MIN_MEMORY_MB {
            return Err(RunnerError::invalid(format!(
                "config key max_memory_mb ({}) is below the interpreter's minimum of {MIN_MEMORY_MB}",
                self.max_memory_mb
            )));
        }
        if self.max_memory_mb > MAX_MEMORY_MB_CEILING {
            return Err(RunnerError::invalid(format!(
                "config key max_memory_mb ({}) is above {MAX_MEMORY_MB_CEILING}, the most a wasm32 runtime can address",
                self.max_memory_mb
            )));
        }
        if self.egress_max_requests == 0
            || self.egress_max_response_bytes == 0
            || self.egress_timeout_ms == 0
            || !(1..=64).contains(&self.egress_max_in_flight)
        {
            return Err(RunnerError::invalid(
                "config keys egress_max_requests, egress_max_response_bytes and egress_timeout_ms must be at least 1, and egress_max_in_flight 1 to 64",
            ));
        }
        if self.session_ttl_secs == 0 || self.max_sessions == 0 {
            return Err(RunnerError::invalid(
                "config keys session_ttl_secs and max_sessions must be at least 1",
            ));
        }
        check_snapshot_store(&self.snapshot_store)?;
        if let Some(endpoint) = &self.otlp_endpoint {
            check_otlp_endpoint(endpoint)?;
        }
        if let Some(file) = &self.snapshot_keys_file
            && !file.starts_with('/')
        {
            return Err(RunnerError::invalid(format!(
                "config key snapshot_keys_file ({file}) must be an absolute path"
            )));
        }
        crate::guest_policy::check_guest_namespaces(&self.guest_writable_namespaces)?;
        crate::guest_policy::check_guest_trigger_types(&self.guest_trigger_types)?;
        crate::guest_policy::check_approval_required(&self.approval_required)?;
        Ok(())
    }

    /// Parses YAML (JSON is YAML too) and validates it.
    ///
    /// # Errors
    /// `code-runner::invalid_request` naming the unknown key, the mistyped
    /// value or the failed relation.
    pub fn from_yaml(text: &str) -> Result<Config, RunnerError> {
        let config: Config = if text.trim().is_empty() {
            Config::default()
        } else {
            serde_yaml_ng::from_str(text)
                .map_err(|err| RunnerError::invalid(format!("configuration: {err}")))?
        };
        config.validate()?;
        Ok(config)
    }

    /// The keys whose values differ between `self` and `other`, in table order.
    pub fn changed_keys(&self, other: &Config) -> Vec<String> {
        let (ours, theirs) = (self.to_map(), other.to_map());
        ours.iter()
            .filter(|(key, value)| theirs.get(key.as_str()) != Some(value))
            .map(|(key, _)| key.clone())
            .collect()
    }

    /// `self` with the [`NEXT_CALL_KEYS`] taken from `newer`: what is in
    /// force when `self` was captured at boot and `newer` is the stored value.
    pub fn with_next_call_keys_from(&self, newer: &Config) -> Config {
        Config {
            max_result_bytes: newer.max_result_bytes,
            max_stream_bytes: newer.max_stream_bytes,
            max_images: newer.max_images,
            max_image_bytes: newer.max_image_bytes,
            max_collect_files: newer.max_collect_files,
            max_collect_bytes: newer.max_collect_bytes,
            default_timeout_ms: newer.default_timeout_ms,
            max_timeout_ms: newer.max_timeout_ms,
            inject_guidance: newer.inject_guidance,
            guest_writable_namespaces: newer.guest_writable_namespaces.clone(),
            guest_trigger_types: newer.guest_trigger_types.clone(),
            approval_required: newer.approval_required.clone(),
            mcp_guest_tools: newer.mcp_guest_tools,
            egress_allow: newer.egress_allow.clone(),
            egress_max_requests: newer.egress_max_requests,
            egress_max_response_bytes: newer.egress_max_response_bytes,
            egress_timeout_ms: newer.egress_timeout_ms,
            egress_max_in_flight: newer.egress_max_in_flight,
            egress_secrets: newer.egress_secrets.clone(),
            ..self.clone()
        }
    }

    fn to_map(&self) -> serde_json::Map<String, Value> {
        match serde_json::to_value(self) {
            Ok(Value::Object(map)) => map,
            _ => serde_json::Map::new(),
        }
    }

    /// The output caps, with the contract's "0 disables" turned into `None`.
    pub fn output_caps(&self) -> OutputCaps {
        OutputCaps {
            max_result_bytes: nonzero(self.max_result_bytes),
            max_stream_bytes: nonzero(self.max_stream_bytes),
        }
    }

    /// The image caps, with "0 disables" turned into `None`.
    pub fn image_caps(&self) -> ImageCaps {
        ImageCaps {
            max_images: nonzero(self.max_images),
            max_image_bytes: nonzero(self.max_image_bytes),
        }
    }

    /// The caps on a run's collected files (`0` is a cap of nothing, not "no cap").
    pub fn collect_caps(&self) -> crate::files::CollectCaps {
        crate::files::CollectCaps {
            max_files: usize::try_from(self.max_collect_files).unwrap_or(usize::MAX),
            max_bytes: usize::try_from(self.max_collect_bytes).unwrap_or(usize::MAX),
        }
    }

    /// The budget for a run asking for `timeout_ms`: the default when absent, clamped to the maximum.
    ///
    /// # Errors
    /// `code-runner::invalid_request` for `timeout_ms: 0`.
    pub fn timeout(&self, timeout_ms: Option<u64>) -> Result<Duration, RunnerError> {
        match timeout_ms {
            Some(0) => Err(RunnerError::invalid("timeout_ms must be at least 1")),
            Some(ms) => Ok(Duration::from_millis(ms.min(self.max_timeout_ms))),
            None => Ok(Duration::from_millis(
                self.default_timeout_ms.min(self.max_timeout_ms),
            )),
        }
    }

    /// The python linear-memory ceiling for a new runtime asking for `memory_mb`.
    ///
    /// # Errors
    /// `code-runner::invalid_request` below [`MIN_MEMORY_MB`] or above `max_memory_mb`.
    pub fn memory_mb(&self, memory_mb: Option<u64>) -> Result<u64, RunnerError> {
        let mb = memory_mb.unwrap_or(DEFAULT_MEMORY_MB.min(self.max_memory_mb));
        if mb < MIN_MEMORY_MB || mb > self.max_memory_mb {
            return Err(RunnerError::invalid(format!(
                "memory_mb {mb} is outside {MIN_MEMORY_MB}..={}",
                self.max_memory_mb
            )));
        }
        Ok(mb)
    }
}

fn nonzero(bytes: u64) -> Option<usize> {
    (bytes > 0).then(|| usize::try_from(bytes).unwrap_or(usize::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The defaults are the contract's table; a drift here changes every deployment.
    #[test]
    fn empty_yaml_gives_the_contract_defaults() {
        let config = Config::from_yaml("").unwrap();
        assert_eq!(config.max_runtimes, 32);
        assert_eq!(config.default_timeout_ms, 5000);
        assert_eq!(config.max_timeout_ms, 30000);
        assert_eq!(config.idle_ttl_secs, 900);
        assert_eq!(config.heap_mb, 128);
        assert_eq!(config.external_mb, 64);
        assert_eq!(config.scratch_mb, 8);
        assert_eq!(config.scratch_files, 64);
        assert_eq!(config.scratch_root, None);
        assert!(config.inject_guidance);
        assert_eq!(config.max_result_bytes, 32768);
        assert_eq!(config.max_stream_bytes, 16384);
        assert_eq!(config.max_memory_mb, 512);
        assert_eq!(config.warm_pool, 2);
        assert!(config.guest_writable_namespaces.is_empty());
        assert!(config.guest_trigger_types.is_empty());
    }

    /// An unknown key must be named, not silently ignored.
    #[test]
    fn unknown_key_is_refused_by_name() {
        let err = Config::from_yaml("max_runtime: 3\n").unwrap_err();
        assert!(err.message.contains("max_runtime"), "{}", err.message);
    }

    /// Zero disables a cap: inner code sees `None`.
    #[test]
    fn zero_disables_caps() {
        let config = Config::from_yaml("max_result_bytes: 0\nmax_stream_bytes: 10").unwrap();
        let caps = config.output_caps();
        assert_eq!(caps.max_result_bytes, None);
        assert_eq!(caps.max_stream_bytes, Some(10));
    }

    /// Timeouts are clamped, defaulted, and zero is refused.
    #[test]
    fn timeout_is_clamped_and_defaulted() {
        let config = Config::default();
        assert_eq!(config.timeout(None).unwrap(), Duration::from_millis(5000));
        assert_eq!(
            config.timeout(Some(999_999)).unwrap(),
            Duration::from_millis(30000)
        );
        assert_eq!(config.timeout(Some(10)).unwrap(), Duration::from_millis(10));
        assert!(config.timeout(Some(0)).is_err());
    }

    /// Memory requests outside the bounds name the bounds.
    #[test]
    fn memory_bounds_are_enforced() {
        let config = Config::default();
        assert_eq!(config.memory_mb(None).unwrap(), 128);
        assert_eq!(config.memory_mb(Some(40)).unwrap(), 40);
        assert!(config.memory_mb(Some(39)).is_err());
        assert!(
            config
                .memory_mb(Some(513))
                .unwrap_err()
                .message
                .contains("40..=512")
        );
    }

    /// The tiers: only the next-call keys move; the rest keep their boot value.
    #[test]
    fn next_call_keys_move_and_the_rest_stay() {
        let boot = Config::default();
        let stored = Config {
            max_stream_bytes: 100,
            max_result_bytes: 7,
            default_timeout_ms: 10,
            max_timeout_ms: 20,
            inject_guidance: false,
            max_runtimes: 3,
            warm_pool: 0,
            ..Config::default()
        };
        let in_force = boot.with_next_call_keys_from(&stored);
        assert_eq!(
            boot.changed_keys(&in_force),
            [
                "default_timeout_ms",
                "max_timeout_ms",
                "inject_guidance",
                "max_result_bytes",
                "max_stream_bytes"
            ]
        );
        assert_eq!(in_force.max_runtimes, 32);
        assert_eq!(in_force.warm_pool, 2);
        assert_eq!(
            in_force.changed_keys(&stored),
            ["max_runtimes", "warm_pool"]
        );
    }

    /// Every next-call key is a real key, so a rename cannot silently drop a tier.
    #[test]
    fn next_call_keys_are_config_keys() {
        let keys = Config::default().to_map();
        for key in NEXT_CALL_KEYS {
            assert!(keys.contains_key(key), "{key} is not a config key");
        }
    }

    /// Relations between keys are checked once, at load.
    #[test]
    fn default_timeout_above_max_is_refused() {
        let err = Config::from_yaml("default_timeout_ms: 40000").unwrap_err();
        assert!(err.message.contains("default_timeout_ms"));
    }

    /// A V8 heap too small to boot in is refused by name, not discovered per run.
    #[test]
    fn heap_below_the_v8_minimum_is_refused() {
        let err = Config::from_yaml("heap_mb: 8").unwrap_err();
        assert!(err.message.contains("heap_mb (8)"), "{}", err.message);
        assert!(Config::from_yaml("heap_mb: 16").is_ok());
    }
}
