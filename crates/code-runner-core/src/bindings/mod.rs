//! Host bindings: namespaces of async host functions a program sees as globals.
//!
//! The naming rules live in [`names`], once, so every engine enforces the same
//! ones: a namespace valid against one engine is valid against all of them.

mod clock;
mod names;

pub use clock::TurnClock;

pub use names::{RESERVED_BINDING_GLOBALS, RESERVED_ERROR_MEMBERS, RESERVED_WORDS};

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use serde_json::{Map, Value};

use crate::error::RunnerError;
use names::{check_global, check_member_property};

/// A boxed, sendable future, the return type of every dyn-compatible async seam call.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A rejected binding call: surfaces in the program as an exception (or an
/// instance of the namespace's declared error class).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{message}", code.as_ref().map(|c| format!("{c}: ")).unwrap_or_default())]
pub struct BindingError {
    /// A machine-readable code, e.g. `code-runner::timeout` for a bus error.
    pub code: Option<String>,
    /// Human-readable detail.
    pub message: String,
}

impl BindingError {
    /// An error with a message and no code.
    pub fn message(message: impl Into<String>) -> Self {
        BindingError {
            code: None,
            message: message.into(),
        }
    }
}

impl From<RunnerError> for BindingError {
    fn from(err: RunnerError) -> Self {
        BindingError {
            code: Some(err.code.as_str().to_string()),
            message: err.message,
        }
    }
}

/// What a binding call knows about the run that made it.
#[derive(Debug, Clone, Copy)]
pub struct BindingCall {
    /// When the calling run's budget ends; a binding should not outlive it.
    pub deadline: Instant,
}

/// One host function: lossless JSON in, lossless JSON (or a rejection) out.
pub type BindingFn = Arc<
    dyn Fn(Value, BindingCall) -> BoxFuture<'static, Result<Value, BindingError>> + Send + Sync,
>;

/// A program-visible typed rejection for one namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorClass {
    /// The constructor global and the resulting error's name.
    pub name: String,
    /// The own property that carries the rejected member's name.
    pub member_name_property: String,
}

/// A group of host functions exposed to the program as one global object.
#[derive(Clone)]
pub struct BindingNamespace {
    /// The global identifier the program sees.
    pub global: String,
    /// The callable members, keyed by the exact name the program calls.
    pub functions: BTreeMap<String, BindingFn>,
    /// Members of `functions` that take a callable: the program calls
    /// `ns.member(id, handler, options?)`, the engine keeps `handler` under
    /// the key `id` (as [`crate::Task::Define`] would) and calls the host
    /// function with `{"id": id, "options": options}` (options `null` when
    /// omitted). When the host function rejects, the engine drops the handler
    /// again and the call rejects. An engine whose language cannot pass
    /// callables across (python) treats a registrar as an ordinary member.
    pub registrars: BTreeSet<String>,
    /// Members of `functions` the program reaches by a path of property
    /// names and calls: `ns.member.a.b(args)` calls the host function with
    /// `{"path": ["a", "b"], "args": args}` (`args` null when omitted; in
    /// python, keywords become one object as for any member). Engines refuse
    /// a path of more than 8 names before calling the host, which checks again.
    pub paths: BTreeSet<String>,
    /// Plain JSON attributes beside the functions (e.g. `iii.namespace`).
    pub values: Map<String, Value>,
    /// Optional typed rejection for this namespace.
    pub error_class: Option<ErrorClass>,
}

impl fmt::Debug for BindingNamespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BindingNamespace")
            .field("global", &self.global)
            .field("functions", &self.functions.keys().collect::<Vec<_>>())
            .field("registrars", &self.registrars)
            .field("paths", &self.paths)
            .field("values", &self.values)
            .field("error_class", &self.error_class)
            .finish()
    }
}

impl BindingNamespace {
    /// An empty namespace under `global`.
    pub fn new(global: impl Into<String>) -> Self {
        BindingNamespace {
            global: global.into(),
            functions: BTreeMap::new(),
            registrars: BTreeSet::new(),
            paths: BTreeSet::new(),
            values: Map::new(),
            error_class: None,
        }
    }

    /// Adds an async host function under `name`.
    #[must_use]
    pub fn function<F, Fut>(mut self, name: impl Into<String>, f: F) -> Self
    where
        F: Fn(Value, BindingCall) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, BindingError>> + Send + 'static,
    {
        self.functions.insert(
            name.into(),
            Arc::new(move |args, call| Box::pin(f(args, call))),
        );
        self
    }

    /// Adds a registrar under `name`: a member the program calls with an id
    /// and a callable (see [`BindingNamespace::registrars`]).
    #[must_use]
    pub fn registrar<F, Fut>(mut self, name: impl Into<String>, f: F) -> Self
    where
        F: Fn(Value, BindingCall) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, BindingError>> + Send + 'static,
    {
        let name = name.into();
        self.registrars.insert(name.clone());
        self.function(name, f)
    }

    /// Adds a path member under `name`: the program calls
    /// `ns.name.a.b(args)` (see [`BindingNamespace::paths`]).
    #[must_use]
    pub fn path_member<F, Fut>(mut self, name: impl Into<String>, f: F) -> Self
    where
        F: Fn(Value, BindingCall) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, BindingError>> + Send + 'static,
    {
        let name = name.into();
        self.paths.insert(name.clone());
        self.function(name, f)
    }

    /// Adds a plain JSON attribute under `name`.
    #[must_use]
    pub fn value(mut self, name: impl Into<String>, value: Value) -> Self {
        self.values.insert(name.into(), value);
        self
    }

    /// Declares the typed rejection class.
    #[must_use]
    pub fn error_class(
        mut self,
        name: impl Into<String>,
        member_name_property: impl Into<String>,
    ) -> Self {
        self.error_class = Some(ErrorClass {
            name: name.into(),
            member_name_property: member_name_property.into(),
        });
        self
    }
}

/// A validated list of namespaces, cheap to clone, and the clock of the
/// turn they serve (which a call waiting for a person stops).
#[derive(Debug, Clone, Default)]
pub struct Bindings {
    namespaces: Arc<Vec<BindingNamespace>>,
    clock: TurnClock,
}

impl Bindings {
    /// Validates `namespaces` against the portable naming rules.
    ///
    /// # Errors
    /// `code-runner::invalid_request` naming the first offending global,
    /// class or property.
    pub fn new(namespaces: Vec<BindingNamespace>) -> Result<Bindings, RunnerError> {
        let mut globals = BTreeSet::new();
        for ns in &namespaces {
            check_global("binding namespace", &ns.global)?;
            if !globals.insert(ns.global.as_str()) {
                return Err(RunnerError::invalid(format!(
                    "binding namespace `{}` is declared twice",
                    ns.global
                )));
            }
            for name in ns.values.keys() {
                if ns.functions.contains_key(name) {
                    return Err(RunnerError::invalid(format!(
                        "binding namespace `{}` declares `{name}` both as a function and a value",
                        ns.global
                    )));
                }
            }
        }
        for ns in &namespaces {
            let Some(class) = &ns.error_class else {
                continue;
            };
            check_global("binding error class", &class.name)?;
            if globals.contains(class.name.as_str()) {
                return Err(RunnerError::invalid(format!(
                    "binding error class `{}` collides with a namespace global",
                    class.name
                )));
            }
            check_member_property(&class.member_name_property)?;
        }
        Ok(Bindings {
            namespaces: Arc::new(namespaces),
            clock: TurnClock::new(),
        })
    }

    /// No bindings at all.
    pub fn none() -> Bindings {
        Bindings::default()
    }

    /// The namespaces, in declaration order.
    pub fn namespaces(&self) -> &[BindingNamespace] {
        &self.namespaces
    }

    /// The same namespaces on `clock`, the turn's (engines measure the
    /// turn's time on it).
    #[must_use]
    pub fn with_clock(mut self, clock: TurnClock) -> Self {
        self.clock = clock;
        self
    }

    /// The clock of the turn these bindings serve.
    pub fn clock(&self) -> &TurnClock {
        &self.clock
    }

    /// The function `member` of namespace `global`, if declared.
    pub fn lookup(&self, global: &str, member: &str) -> Option<&BindingFn> {
        self.namespaces
            .iter()
            .find(|ns| ns.global == global)?
            .functions
            .get(member)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(global: &str) -> BindingNamespace {
        BindingNamespace::new(global)
    }

    /// The portable identifier rule and the reserved sets apply to every engine alike.
    #[test]
    fn global_names_follow_the_portable_rules() {
        assert!(Bindings::new(vec![ns("tools"), ns("_x1")]).is_ok());
        for bad in [
            "$tools",
            "1x",
            "",
            "tools-x",
            "class",
            "lambda",
            "None",
            "console",
            "__code_runner__",
            "ünï",
        ] {
            let err = Bindings::new(vec![ns(bad)]).unwrap_err();
            assert!(
                err.message.contains(&format!("`{bad}`")),
                "{bad}: {}",
                err.message
            );
        }
        assert!(Bindings::new(vec![ns("a"), ns("a")]).is_err());
    }

    /// Member names are arbitrary own properties: prototype-ish names are fine.
    #[test]
    fn member_names_are_arbitrary() {
        let tools = ns("tools")
            .function("__proto__", |_, _| async { Ok(Value::Null) })
            .function("constructor", |_, _| async { Ok(Value::Null) })
            .function("with space", |_, _| async { Ok(Value::Null) });
        let bindings = Bindings::new(vec![tools]).unwrap();
        assert!(bindings.lookup("tools", "__proto__").is_some());
        assert!(bindings.lookup("tools", "missing").is_none());
    }

    /// The error-class property exclusions: reserved members and dunder names.
    #[test]
    fn error_class_property_exclusions() {
        let ok = ns("tools").error_class("ToolError", "tool");
        assert!(Bindings::new(vec![ok]).is_ok());
        for bad in ["", "message", "__class__", "code"] {
            let class = ns("tools").error_class("ToolError", bad);
            assert!(Bindings::new(vec![class]).is_err(), "{bad}");
        }
        // `__` alone and `____` have an empty middle: ordinary names.
        assert!(Bindings::new(vec![ns("tools").error_class("ToolError", "____")]).is_ok());
        assert!(Bindings::new(vec![ns("tools").error_class("tools", "tool")]).is_err());
        assert!(Bindings::new(vec![ns("tools").error_class("class", "tool")]).is_err());
    }
}
