//! What `code-runner::describe` takes and answers.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use code_runner_core::RunnerError;

/// Most ids `function_ids` may name.
pub const MAX_DESCRIBE_IDS: usize = 1_000;
/// Longest `query`, in bytes.
pub const MAX_QUERY_BYTES: usize = 1_024;

/// The language of the declarations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DescribeLang {
    /// TypeScript declarations (`declare namespace iii.fn.…`).
    Typescript,
    /// Python stubs (`TypedDict`s and a class per namespace).
    Python,
}

/// The request of `code-runner::describe`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "DescribeRequest")]
pub struct DescribeRequest {
    /// `typescript` or `python`.
    pub lang: DescribeLang,
    /// Words that must all occur (ignoring case) in a function's id, name or description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub query: Option<String>,
    /// Only these functions (at most 1000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1000))]
    pub function_ids: Option<Vec<String>>,
}

impl DescribeRequest {
    /// Checks the bounds of `query` and `function_ids`.
    ///
    /// # Errors
    /// `code-runner::invalid_request` naming the field.
    pub fn check(&self) -> Result<(), RunnerError> {
        if self
            .query
            .as_ref()
            .is_some_and(|q| q.len() > MAX_QUERY_BYTES)
        {
            return Err(RunnerError::invalid(format!(
                "query is at most {MAX_QUERY_BYTES} bytes: a few words"
            )));
        }
        if self
            .function_ids
            .as_ref()
            .is_some_and(|ids| ids.len() > MAX_DESCRIBE_IDS)
        {
            return Err(RunnerError::invalid(format!(
                "function_ids names at most {MAX_DESCRIBE_IDS} ids; ask in batches"
            )));
        }
        Ok(())
    }
}

/// The answer of `code-runner::describe`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[schemars(title = "DescribeResponse")]
pub struct DescribeResponse {
    /// The declarations, in the language asked.
    pub declarations: String,
    /// The functions declared, each with its name under `iii.fn`.
    pub functions: Vec<Described>,
    /// Names more than one id maps to: those ids are not declared, and
    /// `iii.fn` refuses the name (call them with `iii.trigger`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clashes: Vec<Clash>,
    /// Functions that matched but were left out: the declarations reached
    /// their size bound (narrow with `query` or `function_ids`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub omitted: usize,
    /// The packages guest code can import beside its language's own
    /// library: the operator's `node_packages` (`name@version` once
    /// installed) and `python_packages` (as listed).
    #[serde(default)]
    pub packages: Packages,
}

/// The operator's packages, per language.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct Packages {
    /// What `import` finds in JavaScript and TypeScript.
    pub javascript: Vec<String>,
    /// What `import` finds in python (beside the data stack, when it runs).
    pub python: Vec<String>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// One declared function.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Described {
    /// Its id.
    pub function_id: String,
    /// Its name under `iii.fn` (`my_app.greet` for `my-app::greet`).
    pub name: String,
}

/// A name more than one id maps to.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Clash {
    /// The name.
    pub name: String,
    /// The ids that map to it.
    pub function_ids: Vec<String>,
}
