//! `code-runner::describe`: declarations of the functions guest code may
//! call, for code that calls them through `iii.fn` (code mode).
//!
//! The functions are those `iii.trigger` would let guest code call: every
//! function on this worker's bus that is not internal and that the bus
//! bridge admits, and on an iii engine every other worker's function too
//! (from `engine::functions::list`). Each gets a name by one rule
//! ([`names`]); the declarations are generated here from the functions'
//! JSON Schemas ([`schema`] lowers a schema within bounds, [`ts`] and [`py`]
//! render it), each function's at most [`MAX_FUNCTION_BYTES`] (past it, its
//! signature with `unknown` types), all of them at most
//! [`MAX_DECLARATIONS_BYTES`] (past it, the rest are counted in `omitted`).

pub(crate) mod names;
mod py;
pub(crate) mod schema;
mod text;
mod ts;
mod wire;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use code_runner_core::wire::schema_of;
use serde_json::Value;

use crate::bus::names::DESCRIBE;
use crate::bus::payload::parse;
use crate::bus::{CallError, Caller, Function, bridge};
use crate::ops::{Ops, Reach, Slice, handler_as, host_work};
use schema::Ty;
pub(crate) use wire::{
    Clash, DescribeLang, DescribeRequest, DescribeResponse, Described, Packages,
};

/// Most bytes of one function's declaration; past it, its signature with
/// `unknown` types.
pub const MAX_FUNCTION_BYTES: usize = 16 * 1024;
/// Most bytes of all the declarations of one answer; past it, the rest are
/// left out and counted in `omitted` (narrow with `query` or `function_ids`).
pub const MAX_DECLARATIONS_BYTES: usize = 256 * 1024;
/// How long a describe waits for each of the engine's answers (an `iii.fn`
/// call waits no longer than what is left of its turn).
pub(crate) const LIST_TIMEOUT: Duration = Duration::from_secs(5);

/// A function guest code may call, as described.
#[derive(Debug, Clone)]
pub(crate) struct Callable {
    pub id: String,
    pub description: Option<String>,
    pub request: Arc<Value>,
    pub response: Arc<Value>,
    /// Another worker's, listed by the engine without its schemas
    /// ([`with_schemas`] fetches them).
    pub remote: bool,
}

/// One function to declare.
pub(crate) struct Entry {
    pub id: String,
    pub parts: Vec<String>,
    pub doc: Option<String>,
}

/// `code-runner::describe`, for the composition root.
pub(crate) fn function(ops: &Arc<Ops>) -> (&'static str, Function) {
    (
        DESCRIBE,
        Function::new(
            "Declarations of the functions guest code may call, for code that calls them as iii.fn.<namespace>.<function>(payload) (my-app::greet is iii.fn.my_app.greet): TypeScript (lang \"typescript\") or Python stubs (lang \"python\"), from their JSON Schemas, with their descriptions. query keeps the functions whose id, name or description holds every word of it; function_ids names them.",
            schema_of::<DescribeRequest>(),
            schema_of::<DescribeResponse>(),
            handler_as(ops, describe),
        ),
    )
}

/// What `describe` reaches: the functions, and the packages each language
/// imports (named beside the declarations).
pub(crate) struct Describing {
    reach: Reach,
    packages: Packages,
}

impl Slice for Describing {
    fn of(ops: &Arc<Ops>) -> Self {
        let config = ops.config();
        let offer = ops.engines.offer();
        let javascript = match offer.node_packages.is_empty() {
            true => config.node_packages.clone(),
            false => offer.node_packages,
        };
        Describing {
            reach: Reach::of(ops),
            packages: Packages {
                javascript,
                python: config.python_packages.clone(),
            },
        }
    }
}

/// `code-runner::describe`.
pub(crate) async fn describe(
    describing: Describing,
    payload: Value,
    caller: Caller,
) -> Result<Value, CallError> {
    let Describing { reach, packages } = describing;
    let request: DescribeRequest = parse(payload)?;
    request.check()?;
    let mut all = callables(&reach, LIST_TIMEOUT).await;
    all.sort_by(|a, b| a.id.cmp(&b.id));
    let clashes = names::clashes(all.iter().map(|c| c.id.as_str()));
    let mut chosen = select(&request, all);
    with_schemas(&reach, &mut chosen, LIST_TIMEOUT).await;
    drop(reach);
    let job = move || {
        let mut answered = answer(&request, &chosen, clashes);
        answered.packages = packages;
        serde_json::to_value(answered).unwrap_or(Value::Null)
    };
    Ok(host_work::run(&caller, "describing functions", job).await?)
}

/// Every function guest code may call: this bus's, then the engine's others.
/// Waits at most `wait` for the engine's listing.
pub(crate) async fn callables(reach: &Reach, wait: Duration) -> Vec<Callable> {
    let mut all: Vec<Callable> = reach
        .bus
        .snapshot()
        .into_iter()
        .filter(|(id, f)| !is_internal(&f.metadata) && bridge::check(id, &Value::Null).is_ok())
        .map(|(id, f)| Callable {
            id,
            description: Some(f.description).filter(|d| !d.is_empty()),
            request: f.request_schema,
            response: f.response_schema,
            remote: false,
        })
        .collect();
    if let Some(out) = reach.outbound.get() {
        let listed = out
            .call("engine::functions::list", serde_json::json!({}), wait, None)
            .await;
        match listed {
            Ok(listed) => {
                let local: BTreeSet<String> = all.iter().map(|c| c.id.clone()).collect();
                all.extend(remote(&listed, &local, |id| reach.bus.contains(id)));
            }
            Err(err) => {
                tracing::debug!(code = %err.code, "engine::functions::list failed; describing this worker's functions only")
            }
        }
    }
    all
}

/// The callables named `name` (one, unless names clash): this bus's ids are
/// matched by name before any function is copied; the engine's listing is
/// asked (within `wait`) only when the worker joined one.
pub(crate) async fn named(reach: &Reach, name: &str, wait: Duration) -> Vec<Callable> {
    let admitted = |id: &str, metadata: &Value| {
        !is_internal(metadata) && bridge::check(id, &Value::Null).is_ok()
    };
    let local: Vec<Callable> = reach
        .bus
        .ids()
        .into_iter()
        .filter(|id| names::name_of(id) == name)
        .filter_map(|id| {
            let f = reach.bus.get(&id)?;
            admitted(&id, &f.metadata).then(|| Callable {
                id,
                description: None,
                request: f.request_schema,
                response: f.response_schema,
                remote: false,
            })
        })
        .collect();
    if reach.outbound.get().is_none() {
        return local;
    }
    let mut all = callables(reach, wait).await;
    all.retain(|c| names::name_of(&c.id) == name);
    all
}

/// The engine's functions that are neither this worker's nor refused.
fn remote(listed: &Value, local: &BTreeSet<String>, held: impl Fn(&str) -> bool) -> Vec<Callable> {
    let Some(functions) = listed.get("functions").and_then(Value::as_array) else {
        return Vec::new();
    };
    functions
        .iter()
        .filter_map(|f| {
            let id = f.get("function_id")?.as_str()?;
            let metadata = f.get("metadata").cloned().unwrap_or(Value::Null);
            let skip = local.contains(id)
                || held(id)
                || is_internal(&metadata)
                || bridge::check(id, &Value::Null).is_err();
            (!skip).then(|| Callable {
                id: id.to_string(),
                description: f
                    .get("description")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                request: Arc::new(schema_in(f, "request")),
                response: Arc::new(schema_in(f, "response")),
                remote: true,
            })
        })
        .collect()
}

fn is_internal(metadata: &Value) -> bool {
    metadata.get("internal").and_then(Value::as_bool) == Some(true)
}

/// Whether `callable` matches every word of `query` (in its id, name or
/// description, ignoring case).
fn matches(callable: &Callable, words: &[String]) -> bool {
    let haystack = format!(
        "{} {} {}",
        callable.id,
        names::name_of(&callable.id),
        callable.description.as_deref().unwrap_or("")
    )
    .to_lowercase();
    words.iter().all(|word| haystack.contains(word.as_str()))
}

/// The functions `request` asks for (by `function_ids` and `query`).
fn select(request: &DescribeRequest, all: Vec<Callable>) -> Vec<Callable> {
    let words: Vec<String> = request
        .query
        .as_deref()
        .unwrap_or("")
        .split_whitespace()
        .map(str::to_lowercase)
        .collect();
    let wanted: Option<BTreeSet<&str>> = request
        .function_ids
        .as_ref()
        .map(|ids| ids.iter().map(String::as_str).collect());
    all.into_iter()
        .filter(|c| wanted.as_ref().is_none_or(|w| w.contains(c.id.as_str())))
        .filter(|c| matches(c, &words))
        .collect()
}

/// Fills in the schemas of the remote functions among `callables` from the
/// engine's `engine::functions::info`, 100 ids a call (its listing carries
/// none). A function the engine does not describe keeps `unknown` types.
pub(crate) async fn with_schemas(reach: &Reach, callables: &mut [Callable], wait: Duration) {
    let Some(out) = reach.outbound.get() else {
        return;
    };
    let ids: Vec<String> = callables
        .iter()
        .filter(|c| c.remote)
        .map(|c| c.id.clone())
        .collect();
    for chunk in ids.chunks(100) {
        let info = out
            .call(
                "engine::functions::info",
                serde_json::json!({ "function_ids": chunk }),
                wait,
                None,
            )
            .await;
        let info = match info {
            Ok(info) => info,
            Err(err) => {
                tracing::debug!(code = %err.code, "engine::functions::info failed; remote functions keep unknown types");
                continue;
            }
        };
        let entries = info
            .get("functions")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .or_else(|| info.as_array().map(Vec::as_slice))
            .unwrap_or_else(|| std::slice::from_ref(&info));
        for entry in entries {
            let Some(id) = entry.get("function_id").and_then(Value::as_str) else {
                continue;
            };
            if let Some(c) = callables.iter_mut().find(|c| c.remote && c.id == id) {
                c.request = Arc::new(schema_in(entry, "request"));
                c.response = Arc::new(schema_in(entry, "response"));
            }
        }
    }
}

/// A listing entry's `<side>_schema` (or `<side>_format`), else null.
fn schema_in(entry: &Value, side: &str) -> Value {
    entry
        .get(format!("{side}_schema"))
        .or_else(|| entry.get(format!("{side}_format")))
        .cloned()
        .unwrap_or(Value::Null)
}

/// The answer for `chosen` (sorted by id); `clashes` over every callable.
fn answer(
    request: &DescribeRequest,
    chosen: &[Callable],
    clashes: BTreeMap<String, Vec<String>>,
) -> DescribeResponse {
    let mut rendered: Vec<(&Entry, String)> = Vec::new();
    let entries: Vec<Entry> = chosen
        .iter()
        .map(|c| Entry {
            id: c.id.clone(),
            parts: names::parts_of(&c.id),
            doc: c.description.as_deref().map(|d| schema::cut(d, 4 * 1024)),
        })
        .collect();
    let mut functions = Vec::new();
    let mut taken = BTreeSet::new();
    let mut classes = String::new();
    let mut namespaces = BTreeSet::new();
    let mut total = 0;
    let mut omitted = 0;
    for (callable, entry) in chosen.iter().zip(&entries) {
        let name = names::name_of(&callable.id);
        if clashes.contains_key(&name) {
            continue;
        }
        let (input, output) = (
            schema::lower(&callable.request),
            schema::lower(&callable.response),
        );
        let (mut text, mut own) = render(request.lang, entry, &input, &output, &mut taken);
        if text.len() + own.0.len() > MAX_FUNCTION_BYTES {
            give_back(&mut taken, own.1);
            (text, own) = render(request.lang, entry, &Ty::Unknown, &Ty::Unknown, &mut taken);
        }
        let (named, new) = naming(request.lang, entry, &namespaces);
        let cost = text.len() + own.0.len() + named;
        if total + cost > MAX_DECLARATIONS_BYTES {
            give_back(&mut taken, own.1);
            omitted += 1;
            continue;
        }
        namespaces.extend(new);
        total += cost;
        classes.push_str(&own.0);
        rendered.push((entry, text));
        functions.push(Described {
            function_id: callable.id.clone(),
            name,
        });
    }
    let declarations = match request.lang {
        DescribeLang::Typescript => ts::assemble(&rendered),
        DescribeLang::Python => py::assemble(&classes, &rendered),
    };
    DescribeResponse {
        declarations,
        functions,
        clashes: clashes
            .into_iter()
            .map(|(name, function_ids)| Clash { name, function_ids })
            .collect(),
        omitted,
        packages: Packages::default(),
    }
}

/// One function's text and, for python, the classes it needs and the names
/// they took.
fn render(
    lang: DescribeLang,
    entry: &Entry,
    input: &Ty,
    output: &Ty,
    taken: &mut BTreeSet<String>,
) -> (String, (String, Vec<String>)) {
    match lang {
        DescribeLang::Typescript => (ts::function(entry, input, output), Default::default()),
        DescribeLang::Python => {
            let mut classes = py::Classes::new(taken);
            let method = py::function(entry, input, output, &mut classes);
            (method, (classes.text, classes.added))
        }
    }
}

/// At least the bytes of the lines that name `entry` beside its own text
/// (python: its protocol's header and its namespace's attribute), and of
/// each namespace it opens that `seen` lacks (its class or block, and its
/// parent's attribute); with those namespaces.
fn naming(lang: DescribeLang, entry: &Entry, seen: &BTreeSet<String>) -> (usize, Vec<String>) {
    let mut bytes = match lang {
        DescribeLang::Typescript => 0,
        DescribeLang::Python => 3 * entry.id.len() + 40,
    };
    let mut new: Vec<String> = Vec::new();
    for depth in 1..entry.parts.len() {
        let prefix = entry.parts[..depth].join(".");
        if !seen.contains(&prefix) && !new.contains(&prefix) {
            bytes += 3 * prefix.len() + 40;
            new.push(prefix);
        }
    }
    (bytes, new)
}

fn give_back(taken: &mut BTreeSet<String>, names: Vec<String>) {
    for name in names {
        taken.remove(&name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Thousands of functions, each in a namespace of its own with a long
    /// id: the answer, namespaces and python's protocols included, stays
    /// within the bound (plus the header); the rest are counted.
    #[test]
    fn the_answer_stays_within_its_bound_in_both_languages() {
        let schema = Arc::new(serde_json::json!({"type": "object",
            "properties": {"n": {"type": "integer"}}}));
        let chosen: Vec<Callable> = (0..4000)
            .map(|i| Callable {
                id: format!("{}{i}::{}::f", "n".repeat(60), "m".repeat(60)),
                description: None,
                request: Arc::clone(&schema),
                response: Arc::clone(&schema),
                remote: false,
            })
            .collect();
        for lang in [DescribeLang::Typescript, DescribeLang::Python] {
            let request = DescribeRequest {
                lang,
                query: None,
                function_ids: None,
            };
            let answer = answer(&request, &chosen, BTreeMap::new());
            assert!(answer.omitted > 0, "{lang:?}");
            assert_eq!(answer.functions.len() + answer.omitted, chosen.len());
            let len = answer.declarations.len();
            assert!(
                len <= MAX_DECLARATIONS_BYTES + py::HEADER.len() + 64,
                "{lang:?}: {len}"
            );
        }
    }
}
