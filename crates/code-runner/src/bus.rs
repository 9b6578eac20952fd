//! The embedded bus: functions by id, with their schemas.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use code_runner_core::wire::{FunctionInfo, FunctionsInfoResponse};
use code_runner_core::{BoxFuture, RunnerError};
use serde::Serialize;
use serde_json::Value;

/// The error code of a call to an id nothing is registered under.
pub const FUNCTION_NOT_FOUND: &str = "function_not_found";

/// The id of the catalog function.
pub const FUNCTIONS_INFO: &str = "engine::functions::info";

/// A bus error: a contract code or a bus-level one, with a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[error("{code}: {message}")]
pub struct CallError {
    /// e.g. `code-runner::timeout` or `function_not_found`.
    pub code: String,
    /// Human-readable detail.
    pub message: String,
}

impl From<RunnerError> for CallError {
    fn from(err: RunnerError) -> Self {
        CallError {
            code: err.code.as_str().to_string(),
            message: code_runner_core::bound_message(err.message),
        }
    }
}

/// A function handler: JSON payload in, JSON answer or error out.
pub type Handler = Arc<dyn Fn(Value) -> BoxFuture<'static, Result<Value, CallError>> + Send + Sync>;

/// A bus function: its description, schemas, metadata and handler.
#[derive(Clone)]
pub struct Function {
    /// What `engine::functions::info` shows a caller.
    pub description: String,
    /// JSON Schema of the payload.
    pub request_schema: Value,
    /// JSON Schema of the answer.
    pub response_schema: Value,
    /// Free-form metadata; `{"internal": true}` marks a function callers
    /// do not call directly (hooks, content functions).
    pub metadata: Value,
    /// The handler.
    pub handler: Handler,
}

impl Function {
    /// A function with schemas and empty metadata.
    pub fn new(
        description: impl Into<String>,
        request_schema: Value,
        response_schema: Value,
        handler: Handler,
    ) -> Self {
        Function {
            description: description.into(),
            request_schema,
            response_schema,
            metadata: Value::Object(Default::default()),
            handler,
        }
    }

    /// Marks the function internal (`metadata.internal: true`).
    #[must_use]
    pub fn internal(mut self) -> Self {
        if let Value::Object(map) = &mut self.metadata {
            map.insert("internal".into(), Value::Bool(true));
        }
        self
    }
}

/// The registry of bus functions.
#[derive(Default)]
pub struct Bus {
    functions: RwLock<BTreeMap<String, Function>>,
}

impl Bus {
    /// Registers (or replaces) `id`.
    pub fn register(&self, id: &str, function: Function) {
        self.functions
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.to_string(), function);
    }

    /// Calls `id` with `payload`.
    ///
    /// # Errors
    /// `function_not_found` for an unknown id, else the handler's error.
    pub async fn call(&self, id: &str, payload: Value) -> Result<Value, CallError> {
        let handler = self
            .functions
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
            .map(|entry| entry.handler.clone())
            .ok_or_else(|| CallError {
                code: FUNCTION_NOT_FOUND.into(),
                message: format!("no function `{id}` on this bus"),
            })?;
        handler(payload).await
    }

    /// Describes `ids`, in order; an unknown id gets an entry with `error`.
    pub fn info(&self, ids: &[String]) -> FunctionsInfoResponse {
        let functions = self.functions.read().unwrap_or_else(|p| p.into_inner());
        let describe = |id: &String| match functions.get(id) {
            Some(entry) => FunctionInfo {
                function_id: id.clone(),
                description: Some(entry.description.clone()),
                request_schema: Some(entry.request_schema.clone()),
                response_schema: Some(entry.response_schema.clone()),
                metadata: Some(entry.metadata.clone()),
                error: None,
            },
            None => FunctionInfo {
                function_id: id.clone(),
                description: None,
                request_schema: None,
                response_schema: None,
                metadata: None,
                error: Some(format!(
                    "{FUNCTION_NOT_FOUND}: no function `{id}` on this bus"
                )),
            },
        };
        FunctionsInfoResponse {
            functions: ids.iter().map(describe).collect(),
        }
    }

    /// Every registered id, sorted.
    pub fn ids(&self) -> Vec<String> {
        self.functions
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .cloned()
            .collect()
    }
}
