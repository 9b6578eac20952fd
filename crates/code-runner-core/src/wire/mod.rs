//! The wire contract: request and response bodies of the worker's functions.
//!
//! Field names equal the wire names, and every request rejects unknown fields
//! so a typo (`timeout` for `timeout_ms`) is an error naming the field, not a
//! silently ignored option.

mod approval;

pub use approval::{ResumeRequest, SuspendedCall};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The language of a runtime, and so which engine backs it.
///
/// `node`, `python` and `typescript` are its names, and what answers carry;
/// a request may also spell them as models do (`javascript`, `js`, `py`,
/// `ts`, in any case: [`Lang::parse`]). Anything else fails deserialization
/// before a handler runs, naming what is accepted. `typescript` runs on the
/// node engine after its types are stripped (erased to whitespace, so lines
/// and columns stay the source's); `node` is JavaScript.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[allow(
    missing_docs,
    reason = "variant docs would turn the schema's plain `enum` into `oneOf`"
)]
pub enum Lang {
    // JavaScript in a V8 isolate.
    Node,
    // CPython 3.14 compiled to WebAssembly, in wasmtime.
    Python,
    // TypeScript, type-stripped, then JavaScript in a V8 isolate.
    TypeScript,
}

impl Lang {
    /// Every language, in the order the docs list them.
    pub const ALL: [Lang; 3] = [Lang::Python, Lang::Node, Lang::TypeScript];

    /// The wire spelling: `"node"`, `"python"` or `"typescript"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Lang::Node => "node",
            Lang::Python => "python",
            Lang::TypeScript => "typescript",
        }
    }

    /// The language `name` names: its own name or an alias a model writes
    /// (`javascript`, `js`, `nodejs`, `py`, `python3`, `ts`), in any case,
    /// spaces around it ignored.
    pub fn parse(name: &str) -> Option<Lang> {
        match name.trim().to_ascii_lowercase().as_str() {
            "node" | "javascript" | "js" | "nodejs" | "node.js" => Some(Lang::Node),
            "python" | "py" | "python3" => Some(Lang::Python),
            "typescript" | "ts" => Some(Lang::TypeScript),
            _ => None,
        }
    }

    /// Whether the node engine (V8) runs this language: node and typescript
    /// share its limits (`heap_mb`, `external_mb`, `iii.files`), its turn
    /// order and `iii.registerFunction`.
    pub fn on_node_engine(self) -> bool {
        match self {
            Lang::Node | Lang::TypeScript => true,
            Lang::Python => false,
        }
    }
}

impl<'de> Deserialize<'de> for Lang {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        Lang::parse(&name).ok_or_else(|| {
            let shown: String = name.chars().take(40).collect();
            serde::de::Error::custom(format!(
                "unknown lang `{shown}`: expected node, python or typescript (javascript, js, py and ts are accepted too)"
            ))
        })
    }
}

impl std::fmt::Display for Lang {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The request of `code-runner::run`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "RunRequest")]
pub struct RunRequest {
    /// Node and typescript: an async function body (`return x` sets `result`; `await` works; typescript's types are stripped, not checked). Python: a module (assign `result = x`). A global `iii` is in scope.
    pub code: String,
    /// When `runtime_id` is omitted: `true` leaves the runtime running and returns its `runtime_id`; `false` destroys it after the run.
    #[serde(default)]
    pub keep: bool,
    /// Required when `runtime_id` is omitted; on an existing runtime omit it or pass the runtime's own language.
    #[serde(default)]
    pub lang: Option<Lang>,
    /// Run in this existing runtime (from a keep: true run), sharing its globals and scratch; it is not destroyed afterwards. Omit to run one-shot.
    #[serde(default)]
    pub runtime_id: Option<String>,
    /// Wall-clock budget in milliseconds, clamped to the configured maximum.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// Python only: linear-memory ceiling in MiB for a new runtime (default 128, at least 40, at most the configured `max_memory_mb`). Fixed when the runtime is created, so it is refused alongside a `runtime_id`.
    #[serde(default)]
    pub memory_mb: Option<u64>,
    /// Python only, with `keep: true`: a turn that loses the interpreter (a timeout, a memory cap, an exit) costs only that turn: the runtime goes back to its state before it (variables, imports, `/work`) instead of a fresh interpreter, and the error says so. Each turn first sets its state aside, which costs time in proportion to the memory the runtime has written (milliseconds for a small session). Fixed when the runtime is created.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub checkpoint: bool,
    /// Files written before the code runs: into `/work` for python, into the runtime's `iii.files` directory for node and typescript; on a kept runtime they stay for later turns. Paths are relative and normalised (`a/./b` is `a/b`); an absolute path, `..`, NUL, an empty or over-long component, a duplicate, or too many files is `code-runner::invalid_request` naming the path. They count against the runtime's scratch quota and file count: past them the run is `code-runner::resource_exhausted` before any code runs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<FileInput>,
    /// Globs, relative to the same root as `files` (`*` does not cross `/`, `**` does), naming the files to return in the response's `files` once the code has run, even when it failed. Symlinks are never followed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub collect: Vec<String>,
    /// How collected files come back: `inline` (each file's bytes in the answer, as base64) or `link` (each file's `uri`, size, type and a short `preview`; the bytes are read with `code-runner::read_file` or MCP `resources/read` while the link lives). Default `inline` (`link` over MCP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collect_mode: Option<CollectMode>,
}

/// How a run's collected files come back.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CollectMode {
    /// Each file's bytes in the answer, as base64.
    #[default]
    Inline,
    /// Each file by reference: a `uri` to read it by, with a preview.
    Link,
}

/// A file the client gives a run: its path and its content, as text or as base64 (exactly one of them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "FileInput")]
pub struct FileInput {
    /// Where the file goes, relative to python's `/work` or node's `iii.files` directory (`data/in.csv`); parent directories are created.
    pub path: String,
    /// The content as UTF-8 text. Exactly one of `text` and `base64`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The content as base64 (standard alphabet, padded), for binary files. Exactly one of `text` and `base64`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base64: Option<String>,
}

/// The response of `code-runner::run`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(title = "RunResponse")]
pub struct RunResponse {
    /// What the program wrote to standard output, capped by `max_stream_bytes`.
    pub stdout: String,
    /// What the program wrote to standard error, capped by `max_stream_bytes`.
    pub stderr: String,
    /// The program's exit status: 0 on success, 1 for an uncaught exception, `n` for `SystemExit(n)`.
    pub exit_code: i64,
    /// Whether the run finished with `exit_code` 0 (false while it is `suspended`: it has not finished).
    pub success: bool,
    /// Wall-clock milliseconds the run took inside the worker.
    pub duration_ms: u64,
    /// The completion value: what the code returned (node, typescript) or assigned to `result` (python). Null when it returned nothing, when it returned something JSON cannot represent, or when the run failed.
    ///
    /// Always present, never skipped — unlike `runtime_id`, a null result is information ("the code returned nothing") rather than an absence.
    pub result: Value,
    /// Present when this run addresses a runtime that outlives the call — a `keep: true` run that SUCCEEDED, or a `runtime_id` echoed back. Absent, not null, otherwise: there is nothing to address. Treat a present value as a secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_id: Option<String>,
    /// What the run cost, as the sandbox measured it.
    #[serde(default)]
    pub usage: Usage,
    /// The figures the program showed, in order (python with the data stack: `plt.show()`, `display(fig)`), at most `max_images` of them and `max_image_bytes` of data in all. Past either cap the list ends with a `text/plain` entry whose `data` is an omission marker (plain text, not base64) saying what was left out. Absent when the run showed none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<Image>,
    /// The files the request's `collect` globs matched once the code had run (also when it failed), sorted by path, at most `max_collect_files` of them and `max_collect_bytes` of base64 in all. Past either cap the list ends with an omission marker: an entry with an empty `path`, `mime_type` `text/plain`, `size` 0 and, in `base64`, plain text (not base64) saying how many files and bytes were left out and which cap. Absent when nothing matched.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<CollectedFile>,
    /// Present when the run is suspended: its code called a function that waits for a person's approval. The output so far is above, `runtime_id` names the suspended runtime (a one-shot is kept while suspended), and `code-runner::resume` with this `call_id` goes on with the same run and answers as `run` does. Time suspended does not count against the timeout; the idle TTL ends a run left suspended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspended: Option<SuspendedCall>,
    /// Present when there is something to know about `result`: why it is null (a value with no JSON form, named by its path and type, and how to fix it; python's last line an expression whose value was not kept), or what its JSON form changed that a caller should know (bytes as base64, a `Map` written as `{}`). Absent when there is nothing to say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_note: Option<String>,
    /// Present when this kept runtime was reset before this run: its interpreter was lost with an earlier turn (a timeout, a memory cap, an exit), so this run started from a fresh one (`to: fresh`, files in `/work` kept); or, for a runtime kept with `checkpoint: true`, when this run exited the interpreter and the runtime went back to its state before it (`to: checkpoint`). `because` says why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_reset: Option<RuntimeReset>,
    /// Present (true) when this kept runtime was woken from hibernation for this run: idle past `hibernate_after_secs` (or its worker restarted), it had been written to the snapshot store and closed, and was restored before this run with its variables, imports and `/work` as its last run left them. Absent otherwise.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub restored: bool,
}

/// What a kept runtime went back to before a run, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(title = "RuntimeReset")]
pub struct RuntimeReset {
    /// `fresh`: a new interpreter (variables and imports gone, files kept).
    pub to: ResetTo,
    /// What lost the interpreter, e.g. "the previous turn timed out".
    pub because: String,
}

/// What a reset runtime went back to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ResetTo {
    /// A fresh interpreter: variables and imports gone, files kept.
    Fresh,
    /// Its checkpoint (`checkpoint: true`): its state before the run that lost the interpreter, files too.
    Checkpoint,
}

/// A file a run left that a `collect` glob matched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(title = "CollectedFile")]
pub struct CollectedFile {
    /// Its path relative to the root (`out/clean.csv`); empty only for the omission marker that ends a capped list.
    pub path: String,
    /// Its MIME type, from the extension (`text/csv`, `image/png`, ...; `application/octet-stream` when unknown); `text/plain` for the omission marker.
    pub mime_type: String,
    /// The file's size in bytes (before base64); 0 for the omission marker.
    pub size: u64,
    /// The file's bytes, base64-encoded (standard alphabet, padded); the omission marker's text as is. Absent when the file is linked (`collect_mode: "link"`) and, over MCP, when its bytes are in a content block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base64: Option<String>,
    /// With `collect_mode: "link"`: where to read the file (`code-runner://files/<token>/<path>`, with `code-runner::read_file` or MCP `resources/read`). A capability, like a `runtime_id`: whoever holds it can read the file. It lives while the kept runtime that made it does, or for the idle TTL since it was last read; a read after that says it expired.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
    /// With `collect_mode: "link"`, for a text file: its first lines (at most 10 lines and 1 KiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preview: Option<String>,
}

impl CollectedFile {
    /// The omission marker that ends a capped or partial list: `text` says
    /// what was left out and why.
    pub fn marker(text: String) -> CollectedFile {
        CollectedFile {
            path: String::new(),
            mime_type: "text/plain".into(),
            size: 0,
            base64: Some(text),
            uri: None,
            preview: None,
        }
    }
}

/// The request of `code-runner::read_file`: a linked file's `uri`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "ReadFileRequest")]
pub struct ReadFileRequest {
    /// The `uri` a run's linked file carries (`code-runner://files/<token>/<path>`).
    pub uri: String,
}

/// The response of `code-runner::read_file`: the linked file whole.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(title = "ReadFileResponse")]
pub struct ReadFileResponse {
    /// The uri it was read by.
    pub uri: String,
    /// The file's path relative to its runtime's root.
    pub path: String,
    /// Its MIME type, as the run's answer gave it.
    pub mime_type: String,
    /// Its size in bytes.
    pub size: u64,
    /// Its bytes, base64-encoded (standard alphabet, padded).
    pub base64: String,
}

/// An image a run produced, e.g. a matplotlib figure the program showed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(title = "Image")]
pub struct Image {
    /// Its MIME type: `image/png`, or `text/plain` for the omission marker that ends a capped list.
    pub mime_type: String,
    /// The image's bytes, base64-encoded (standard alphabet, padded); the omission marker's text as is.
    pub data: String,
}

/// What a run cost: measured, never estimated.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(title = "Usage")]
pub struct Usage {
    /// CPU milliseconds the runtime's thread spent on this turn (interpreter, compiler and garbage collector; not the worker's own work around it).
    pub cpu_ms: f64,
    /// The most memory the sandbox held during the turn, in bytes. Python: the interpreter's linear memory, its high-water mark so far (WebAssembly memory never shrinks). Node: the V8 heap (used) plus external memory (ArrayBuffers), at their peak.
    pub peak_memory_bytes: u64,
    /// Wall-clock milliseconds the run took inside the worker (as `duration_ms`).
    pub wall_ms: u64,
    /// The HTTP requests the run's code made through the host (`fetch`, `urllib`); absent when it made none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress: Option<EgressUsage>,
}

/// What a run's HTTP requests cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(title = "EgressUsage")]
pub struct EgressUsage {
    /// Requests sent, each redirect hop counted.
    pub requests: u64,
    /// Bytes received: response bodies and headers.
    pub bytes_in: u64,
    /// Bytes sent: request bodies, URLs and headers.
    pub bytes_out: u64,
}
///
/// Exactly one of `runtime_id` or `namespace` must be set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "TeardownRequest")]
pub struct TeardownRequest {
    /// A register_function namespace, e.g. "app" for app::greet.
    #[serde(default)]
    pub namespace: Option<String>,
    /// A runtime_id from a keep: true run.
    #[serde(default)]
    pub runtime_id: Option<String>,
}

/// The response of `code-runner::teardown`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(title = "TeardownResponse")]
pub struct TeardownResponse {
    /// Whether a runtime was destroyed.
    pub torn_down: bool,
    /// Bus function ids this teardown unregistered, across every runtime it destroyed.
    pub unregistered: Vec<String>,
    /// Set when this teardown was addressed by `runtime_id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_id: Option<String>,
    /// Set when addressed by `namespace` — echoed in its canonical `app::` form, since more than one runtime (one per language) can back it and there is no single `runtime_id` to report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// The request of `code-runner::register_function`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "RegisterRequest")]
pub struct RegisterRequest {
    /// What `engine::functions::info` shows a caller — write one.
    #[serde(default)]
    pub description: Option<String>,
    /// Bus id, e.g. `my-app::greet`; the segment before the first `::` is the namespace, which holds one persistent runtime per lang.
    pub function_id: String,
    /// Language of the namespace runtime this handler runs in.
    pub lang: Lang,
    /// Optional JSON Schema object (≤ 16 KiB, must constrain: `type`/`properties`/`$ref`) for the payload; shown by `engine::functions::info` and as its MCP tool's inputSchema. Enforced for calls by name from guest code (`iii.fn`) and MCP tool calls (a mismatch never reaches the handler); `iii.trigger` and HTTP calls reach the handler as sent.
    #[serde(default)]
    pub request_format: Option<Value>,
    /// Optional JSON Schema for the handler's return value; the same size rules as `request_format`; shown, not enforced.
    #[serde(default)]
    pub response_format: Option<Value>,
    /// When true, a call of this function from guest code waits for a person's approval: the run answers `suspended`, and `code-runner::resume` goes on (as configuration `approval_required` does for the ids it names).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub requires_approval: bool,
    /// Source that defines `handler(payload)` in `lang`: `export function handler(payload) {…}` (node and typescript, an ES module; also `function handler`, `export const handler = …`, or a default export that is a function) or `def handler(payload): …` (python).
    pub source: String,
}

/// The response of `code-runner::register_function`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(title = "RegisterResponse")]
pub struct RegisterResponse {
    /// The id now published on the bus.
    pub function_id: String,
    /// Always true: a failed registration is an error, not a response.
    pub registered: bool,
}

/// Most ids one `engine::functions::info` request may name; more is
/// `code-runner::invalid_request`. The list is refused while it is being
/// parsed, so a huge request costs no more than this many ids.
pub const MAX_INFO_IDS: usize = 1_000;

/// The request of `engine::functions::info`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "FunctionsInfoRequest")]
pub struct FunctionsInfoRequest {
    /// The function ids to describe (at most 1000; a repeated id is described once).
    #[serde(deserialize_with = "bounded_ids")]
    #[schemars(length(max = 1000))]
    pub function_ids: Vec<String>,
}

/// Deserializes at most [`MAX_INFO_IDS`] strings, failing at the first one past it.
fn bounded_ids<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Vec<String>, D::Error> {
    struct Ids;
    impl<'de> serde::de::Visitor<'de> for Ids {
        type Value = Vec<String>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "an array of at most {MAX_INFO_IDS} function ids")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Self::Value, A::Error> {
            let mut ids = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(MAX_INFO_IDS));
            while let Some(id) = seq.next_element::<String>()? {
                if ids.len() == MAX_INFO_IDS {
                    return Err(serde::de::Error::custom(format!(
                        "more than {MAX_INFO_IDS} function ids; ask in batches of at most {MAX_INFO_IDS}"
                    )));
                }
                ids.push(id);
            }
            Ok(ids)
        }
    }
    deserializer.deserialize_seq(Ids)
}

/// One entry of `engine::functions::info`'s answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FunctionInfo {
    /// The function id asked about.
    pub function_id: String,
    /// What the function does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// JSON Schema of the payload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_schema: Option<Value>,
    /// JSON Schema of the answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_schema: Option<Value>,
    /// Free-form metadata; `{"internal": true}` marks hooks and content functions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
    /// Set instead of the rest when the id is unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The response of `engine::functions::info`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(title = "FunctionsInfoResponse")]
pub struct FunctionsInfoResponse {
    /// One entry per distinct asked id, in the order first asked.
    pub functions: Vec<FunctionInfo>,
}

/// The JSON Schema (draft-07) of `T`, as `engine::functions::info` shows it.
pub fn schema_of<T: JsonSchema>() -> Value {
    let generator = schemars::generate::SchemaSettings::draft07().into_generator();
    generator.into_root_schema_for::<T>().to_value()
}

#[cfg(test)]
mod tests;
