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

/// Loads the python engine: the lean interpreter from `dir` when one is
/// given (`--python-wasm`), else the interpreter the configuration chooses
/// from its default location. Answers the engine and its interpreter's name.
pub(crate) fn load_python(
    dir: Option<PathBuf>,
    choice: PythonInterpreter,
    limits: code_runner_python::EngineLimits,
) -> Result<(code_runner_python::PythonEngine, &'static str), code_runner_python::PythonError> {
    use code_runner_python::{Interpreter, PythonEngine};
    let engine = match (dir, choice) {
        (Some(dir), _) => PythonEngine::load(&dir, limits)?,
        (None, PythonInterpreter::Auto) => {
            PythonEngine::with_interpreter(Interpreter::Auto, limits)?
        }
        (None, PythonInterpreter::Lean) => {
            PythonEngine::with_interpreter(Interpreter::Lean, limits)?
        }
        (None, PythonInterpreter::Data) => {
            PythonEngine::with_interpreter(Interpreter::Data, limits)?
        }
    };
    let name = match engine.interpreter() {
        Interpreter::Data => "data",
        _ => "lean",
    };
    Ok((engine, name))
}
