//! Which bus functions are MCP tools, under which names.
//!
//! The nine operations are `run`, `teardown`, `register_function`,
//! `describe`, `resume`, `read_file`, `install`, `snapshot` and `restore`, each with a title and MCP's
//! annotations. A
//! published function (`register_function`, node's `iii.registerFunction`)
//! is a tool while it lives, named by its id with every `::` written `.`:
//! `my-app::greet` is `my-app.greet`. Id segments hold only letters,
//! digits, `_` and `-`, so the mapping is one-to-one and never meets an
//! operation's name (those have no `.`). An id whose name would pass MCP's
//! 128 characters, and every function of the worker's own, the engine's or
//! another reserved namespace, is not a tool.
//!
//! A function guest code published is a tool only for the sessions that
//! may see it ([`Viewer`]): by default the session whose runs published it.
//! Its description starts with [`GUEST_MARK`] and is cut to
//! [`MAX_GUEST_DESCRIPTION_CHARS`]; every published tool's description and
//! format strings are [`clean`]ed of what is not plainly visible.

use std::sync::Arc;

use code_runner_core::Config;
use code_runner_core::wire::FunctionInfo;
use rmcp::model::{JsonObject, MetaObject, Tool, ToolAnnotations};
use serde_json::{Value, json};

use super::clean::{GUEST_MARK, MAX_GUEST_DESCRIPTION_CHARS, clean, clean_value};
use crate::bus::Listing;
use crate::bus::names::{
    DESCRIBE, INSTALL, READ_FILE, REGISTER_FUNCTION, RESTORE, RESUME, RUN, SNAPSHOT, TEARDOWN,
};
use crate::bus::naming::FunctionId;
use crate::ids::RuntimeKey;
use crate::runtimes::engines::Offer;

/// Who lists the tools: which guest-published functions it sees.
#[derive(Debug, Clone, Copy)]
pub struct Viewer<'a> {
    /// Every guest's (the configuration key `mcp_guest_tools`).
    pub every_guest: bool,
    /// Else those published by the lineages rooted at these keys: the
    /// session's own runs.
    pub roots: &'a [RuntimeKey],
}

impl Viewer<'_> {
    /// Whether a function `publisher` published is a tool for this viewer.
    pub fn sees(&self, publisher: Option<RuntimeKey>) -> bool {
        publisher.is_none_or(|root| self.every_guest || self.roots.contains(&root))
    }
}

/// Longest tool name MCP allows.
pub const MAX_TOOL_NAME: usize = 128;

/// The operations, by tool name.
const OPERATIONS: [(&str, &str); 9] = [
    ("run", RUN),
    ("teardown", TEARDOWN),
    ("register_function", REGISTER_FUNCTION),
    ("describe", DESCRIBE),
    ("resume", RESUME),
    ("read_file", READ_FILE),
    ("install", INSTALL),
    ("snapshot", SNAPSHOT),
    ("restore", RESTORE),
];

/// The bus function a tool name calls, if it names one.
pub fn function_id(tool: &str) -> Option<String> {
    if let Some((_, id)) = OPERATIONS.iter().find(|(name, _)| *name == tool) {
        return Some((*id).to_string());
    }
    let id = tool.replace('.', "::");
    FunctionId::parse(&id).ok().map(|_| id)
}

/// The tool name of a published function's id, if it is a tool.
pub fn published_name(id: &str) -> Option<String> {
    FunctionId::parse(id).ok()?;
    let name = id.replace("::", ".");
    (name.len() <= MAX_TOOL_NAME).then_some(name)
}

/// Whether `id` is one of the worker's own operations (not a published
/// function).
pub fn is_operation(id: &str) -> bool {
    OPERATIONS.iter().any(|(_, op)| *op == id)
}

/// The tools over `listing` that `viewer` sees: the operations, then every
/// published function that is a tool, by name.
pub fn tools(listing: &Listing, config: &Config, python: &Offer, viewer: Viewer) -> Vec<Tool> {
    let mut tools = Vec::new();
    for (name, id) in OPERATIONS {
        if let Some(info) = listing.functions.iter().find(|f| f.function_id == id) {
            let mut tool = tool(name, info);
            if id == RUN || id == RESUME || id == READ_FILE {
                tool.output_schema = tool.output_schema.map(|s| Arc::new(bytes_in_blocks(&s)));
            }
            tool.description = Some(operation_text(name, config, python).into());
            let (title, annotations) = operation_annotations(name);
            tool.title = Some(title.to_string());
            tool.annotations = Some(annotations);
            tools.push(tool);
        }
    }
    for (name, info, publisher) in published(listing, viewer) {
        let mut tool = tool(&name, info);
        let text = info.description.as_deref().unwrap_or_default();
        tool.description = Some(
            match publisher {
                Some(_) => format!("{GUEST_MARK}{}", clean(text, MAX_GUEST_DESCRIPTION_CHARS)),
                None => clean(text, usize::MAX),
            }
            .into(),
        );
        tool.input_schema = Arc::new(clean_object(&tool.input_schema));
        tool.output_schema = tool.output_schema.map(|s| Arc::new(clean_object(&s)));
        if publisher.is_some() {
            let mut meta = MetaObject::new();
            meta.0
                .insert("code-runner/guest_published".into(), Value::Bool(true));
            tool.meta = Some(meta);
        }
        tools.push(tool);
    }
    tools
}

/// The names of the published tools `viewer` sees in `listing`, sorted:
/// what a change of the tool list compares.
pub fn published_names(listing: &Listing, viewer: Viewer) -> Vec<String> {
    published(listing, viewer)
        .into_iter()
        .map(|(name, _, _)| name)
        .collect()
}

/// The published functions `viewer` sees that are tools, sorted by name.
fn published<'a>(
    listing: &'a Listing,
    viewer: Viewer,
) -> Vec<(String, &'a FunctionInfo, Option<RuntimeKey>)> {
    let mut published: Vec<_> = listing
        .functions
        .iter()
        .zip(listing.publishers.iter().copied())
        .filter(|(f, publisher)| !is_internal(f) && viewer.sees(*publisher))
        .filter_map(|(f, publisher)| Some((published_name(&f.function_id)?, f, publisher)))
        .collect();
    published.sort_by(|a, b| a.0.cmp(&b.0));
    published
}

fn clean_object(schema: &JsonObject) -> JsonObject {
    match clean_value(&Value::Object(schema.clone()), 0) {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    }
}

/// An operation's title and what a host may assume of it (MCP's hints):
/// `describe` only reads; `teardown` destroys and is idempotent; `run`,
/// `register_function` and `resume` change what runs (and may reach the
/// hosts the operator allows: open world).
fn operation_annotations(name: &str) -> (&'static str, ToolAnnotations) {
    let (title, read_only, destructive, idempotent, open_world) = match name {
        "run" => ("Run code in a sandbox", false, false, false, true),
        "teardown" => ("Destroy a runtime or namespace", false, true, true, false),
        "register_function" => ("Publish a function", false, false, true, false),
        "describe" => ("Declare what code may call", true, false, true, false),
        "read_file" => ("Read a linked file", true, false, true, false),
        "install" => (
            "Install packages into a kept runtime",
            false,
            false,
            true,
            true,
        ),
        _ => ("Resume a suspended run", false, false, false, true),
    };
    let annotations = ToolAnnotations::with_title(title)
        .read_only(read_only)
        .destructive(destructive)
        .idempotent(idempotent)
        .open_world(open_world);
    (title, annotations)
}

/// An output schema as MCP answers it: a figure's `data` and a read
/// file's `base64` are in their content blocks, not in the structured
/// content ([`super::content::structured`]), so they are not required there.
fn bytes_in_blocks(schema: &JsonObject) -> JsonObject {
    let mut schema = schema.clone();
    if let Some(required) = schema.get_mut("required").and_then(Value::as_array_mut) {
        required.retain(|field| field != "base64");
    }
    for defs in ["definitions", "$defs"] {
        if let Some(required) = schema
            .get_mut(defs)
            .and_then(|defs| defs.get_mut("Image"))
            .and_then(|image| image.get_mut("required"))
            .and_then(Value::as_array_mut)
        {
            required.retain(|field| field != "data");
        }
    }
    schema
}

fn is_internal(info: &FunctionInfo) -> bool {
    info.metadata
        .as_ref()
        .and_then(|m| m.get("internal"))
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

fn tool(name: &str, info: &FunctionInfo) -> Tool {
    let mut tool = Tool::new_with_raw(
        name.to_string(),
        None,
        Arc::new(input_schema(info.request_schema.as_ref())),
    );
    tool.output_schema = info
        .response_schema
        .as_ref()
        .and_then(object_schema)
        .map(Arc::new);
    tool
}

/// A request schema as MCP wants it: an object schema; anything else (a
/// published function's "any" format) becomes an open object.
fn input_schema(schema: Option<&Value>) -> JsonObject {
    schema
        .and_then(object_schema)
        .unwrap_or_else(|| match json!({"type": "object"}) {
            Value::Object(map) => map,
            _ => JsonObject::new(),
        })
}

/// `schema` when it describes JSON objects (`"type": "object"`), without
/// the `format`s JSON Schema does not define (schemars writes `uint64` for
/// a `u64`; clients' validators warn about each).
fn object_schema(schema: &Value) -> Option<JsonObject> {
    match schema {
        Value::Object(map) if map.get("type").and_then(Value::as_str) == Some("object") => {
            let mut schema = Value::Object(map.clone());
            drop_unknown_formats(&mut schema, 0);
            match schema {
                Value::Object(map) => Some(map),
                _ => None,
            }
        }
        _ => None,
    }
}

/// The formats JSON Schema (draft 2020-12) defines.
const KNOWN_FORMATS: [&str; 19] = [
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

/// Removes unknown `format` keywords from `schema`, to a bounded depth (a
/// published format is bounded in size already).
fn drop_unknown_formats(schema: &mut Value, depth: usize) {
    if depth > 64 {
        return;
    }
    match schema {
        Value::Object(map) => {
            if map
                .get("format")
                .and_then(Value::as_str)
                .is_some_and(|f| !KNOWN_FORMATS.contains(&f))
            {
                map.remove("format");
            }
            for value in map.values_mut() {
                drop_unknown_formats(value, depth + 1);
            }
        }
        Value::Array(items) => {
            for item in items {
                drop_unknown_formats(item, depth + 1);
            }
        }
        _ => {}
    }
}

/// The operator's `install_allow`, as the install tool names it.
fn allowed_names(allow: &[String]) -> String {
    if allow.iter().any(|name| name == "*") {
        return "any package".to_string();
    }
    crate::ops::guidance::first_of(allow, 20)
}

/// What a model needs to use an operation well, with the caps in force.
fn operation_text(name: &str, config: &Config, python: &Offer) -> String {
    let cap = |bytes: u64| match bytes {
        0 => "no cap".to_string(),
        bytes => format!("{bytes} bytes"),
    };
    match name {
        "run" => format!(
            "Run code in a sandbox: {}. \
             lang \"python\": a script; assign `result` to return a value. lang \"node\": the body of an \
             async function; `return` the value, `await` freely. lang \"typescript\": the same, types \
             stripped and not checked (enum, namespace, parameter properties and decorators refused). The answer has stdout, stderr, exit_code \
             and result: a failing script is an answer (exit_code 1 and the traceback), not an error. \
             Caps: stdout and stderr keep {} each (head and tail, a marker between), result {}: print \
             less or return a summary when a cap is hit. timeout_ms defaults to {} ms (at most {}). \
             keep: true keeps the runtime (variables, files in /work or iii.files) and returns a \
             runtime_id to pass to later runs; tear it down when done. files: [{{path, text}} or \
             {{path, base64}}] are written under that root before the code runs; collect: globs \
             (\"out/*.csv\") return the files they match, each as a resource_link with its size, type \
             and first lines (read it whole with read_file or resources/read); collect_mode \"inline\" \
             puts the whole files in the answer instead. Figures come back as images.",
            crate::ops::guidance::sandbox_sentence(config, python),
            cap(config.max_stream_bytes),
            cap(config.max_result_bytes),
            config.default_timeout_ms,
            config.max_timeout_ms,
        ),
        "describe" => "TypeScript declarations (lang \"typescript\") or Python stubs (lang \"python\") \
             of the functions code in a run may call by name: my-app::greet is \
             iii.fn.my_app.greet(payload) (await it in node/typescript; keywords or one dict in python), \
             its payload checked against the function's schema first. query keeps the functions whose id, \
             name or description holds every word of it: search first on a host with many functions."
            .to_string(),
        "snapshot" => "Save a kept runtime's whole state (variables, imports, objects, arrays, DataFrames, files) between its runs: answers a snapshot_id. Restore it to try two continuations from one point (each restore is a new runtime; the original runs on) or to keep a session past its runtime. Python runtimes of the data interpreter (no file left open), and node/typescript runtimes (replayed from their turns; not after a turn that timed out).".to_string(),
        "restore" => "Make a new kept runtime from a snapshot_id (from snapshot): it starts exactly where the snapshotted runtime was, its random generators reseeded. Answers its runtime_id; tear it down when done.".to_string(),
        "install" => match config.install_allow.is_empty() {
            true => "Add packages to a kept runtime. Off on this worker: the operator allows no packages (install_allow is empty), so every call is refused.".to_string(),
            false => format!(
                "Add packages to a kept runtime (runtime_id from a keep: true run): requirements are pip requirements for a python runtime (\"tabulate==0.9.0\": pure-Python wheels only) or npm packages for node and typescript (\"zod@3\"). The operator allows: {}. They import from that runtime's next run on; other runtimes do not see them.",
                allowed_names(&config.install_allow)
            ),
        },
        "resume" => "Go on with a run that answered `suspended`: its code called a function that \
             waits for a person's approval. Ask the person, then pass the run's runtime_id and \
             suspended.call_id with approve true (the call proceeds) or false (the code's call fails \
             with reason). Answers as run does."
            .to_string(),
        "read_file" => "Read a file a run linked: pass the uri of its resource_link \
             (code-runner://files/lk_…/path). Answers the file whole, text as text. A link lives while \
             its kept runtime does, or for the idle TTL since it was last read."
            .to_string(),
        "teardown" => "Destroy a kept runtime (runtime_id) or every runtime behind a \
             register_function namespace (namespace), and unregister their functions."
            .to_string(),
        _ => "Publish a function whose handler runs in a sandbox: source defines handler(payload) \
             in lang (python: def handler(payload); node or typescript: function handler(payload)); it then \
             appears as a tool named by its id with `::` written `.` (my-app::greet is \
             my-app.greet) until torn down."
            .to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Formats JSON Schema does not define are dropped; the rest stay.
    #[test]
    fn unknown_formats_are_dropped() {
        let schema = json!({"type": "object", "properties": {
            "n": {"type": "integer", "format": "uint64"},
            "at": {"type": "string", "format": "date-time"},
        }});
        let cleaned = Value::Object(object_schema(&schema).unwrap());
        assert_eq!(cleaned["properties"]["n"].get("format"), None);
        assert_eq!(cleaned["properties"]["at"]["format"], "date-time");
        assert_eq!(object_schema(&json!({"type": "array"})), None);
    }

    /// Names map one-to-one; reserved and over-long ids are no tools.
    #[test]
    fn names_map_both_ways() {
        assert_eq!(function_id("run").as_deref(), Some(RUN));
        assert_eq!(
            published_name("my-app::greet").as_deref(),
            Some("my-app.greet")
        );
        assert_eq!(
            function_id("my-app.users.get").as_deref(),
            Some("my-app::users::get")
        );
        assert_eq!(published_name("code-runner::run"), None);
        assert_eq!(published_name("engine::functions::info"), None);
        assert_eq!(function_id("code-runner.run"), None);
        assert_eq!(function_id("nodots"), None);
        let long = format!("a::{}::{}::d", "b".repeat(60), "c".repeat(64));
        assert!(FunctionId::parse(&long).is_ok());
        assert_eq!(published_name(&long), None);
    }
}
