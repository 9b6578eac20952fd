//! What loading the engines answers, in either isolation mode, and the
//! python interpreter's choice both modes make the same way.

use std::path::PathBuf;
use std::sync::Arc;

use code_runner_core::{Engine, PythonInterpreter};

/// What loading the engines answers, in either mode.
pub(crate) struct Loaded {
    pub python: Result<Arc<dyn Engine>, String>,
    /// Which interpreter python runs (`lean`, `data`), once it loaded.
    pub python_interpreter: Option<&'static str>,
    pub node: Result<Arc<dyn Engine>, String>,
    pub typescript: Result<Arc<dyn Engine>, String>,
    pub sandbox: Option<Arc<code_runner_sandbox::Pool>>,
}

/// Installs the configuration's `python_packages` (or reuses their install)
/// off the async threads, for the data interpreter (`on_stack`: resolved
/// against its stack) or the lean one; `None` when there are none.
///
/// # Errors
/// `code-runner::engine` naming the package that failed and why: python
/// does not serve without the packages it was told to offer (node does).
pub(crate) async fn install_packages(
    config: &code_runner_core::Config,
    on_stack: bool,
) -> Result<Option<code_runner_python::PythonPackages>, code_runner_core::RunnerError> {
    if config.python_packages.is_empty() {
        return Ok(None);
    }
    let requirements = config.python_packages.clone();
    tokio::task::spawn_blocking(move || {
        code_runner_python::install_packages(&requirements, on_stack)
    })
    .await
    .map_err(|err| {
        code_runner_core::RunnerError::engine(format!("python_packages installer panicked: {err}"))
    })?
    .map_err(|err| code_runner_core::RunnerError::engine(err.to_string()))
}

/// Loads the python engine: the lean interpreter from `dir` when one is
/// given (`--python-wasm`), else the interpreter the configuration chooses
/// from its default location. Answers the engine and its interpreter's name.
pub(crate) fn load_python(
    dir: Option<PathBuf>,
    choice: PythonInterpreter,
    limits: code_runner_python::EngineLimits,
    packages: Option<&code_runner_python::PythonPackages>,
) -> Result<(code_runner_python::PythonEngine, &'static str), code_runner_python::PythonError> {
    use code_runner_python::{Interpreter, PythonEngine};
    let engine = match (dir, choice) {
        (Some(dir), _) => PythonEngine::load_lean(&dir, limits, packages)?,
        (None, PythonInterpreter::Auto) => {
            PythonEngine::with_packages(Interpreter::Auto, limits, packages)?
        }
        (None, PythonInterpreter::Lean) => {
            PythonEngine::with_packages(Interpreter::Lean, limits, packages)?
        }
        (None, PythonInterpreter::Data) => {
            PythonEngine::with_packages(Interpreter::Data, limits, packages)?
        }
    };
    let name = match engine.interpreter() {
        Interpreter::Data => "data",
        _ => "lean",
    };
    Ok((engine, name))
}
