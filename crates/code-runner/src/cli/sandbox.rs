//! The hidden sandbox role: `code-runner __sandbox`, started by a worker
//! with `isolation: process`, its socket at descriptor 3. It loads both
//! engines for `code-runner-sandbox`'s child loop; nothing else of the
//! worker runs in it.

use std::process::ExitCode;
use std::sync::Arc;

use code_runner_core::{Engine, Lang, PythonInterpreter};
use code_runner_sandbox::Init;
use code_runner_sandbox::child::LoadedEngines;

use crate::runtimes::engines::{FILES_NAMESPACE, open_node_packages};
use crate::runtimes::loading::load_python;

/// Serves as a sandbox process until the worker closes the socket.
pub fn main() -> ExitCode {
    crate::edge::logging::init();
    let code = code_runner_sandbox::child::main(code_runner_python::open_page_tracking, load);
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

/// Loads the engines the worker would have loaded in-process.
fn load(init: &Init) -> LoadedEngines {
    let choice = match init.python.interpreter.as_str() {
        "data" => PythonInterpreter::Data,
        "lean" => PythonInterpreter::Lean,
        _ => PythonInterpreter::Auto,
    };
    let limits = code_runner_python::EngineLimits {
        max_runtimes: init.python.max_runtimes,
        max_memory_mb: init.python.max_memory_mb,
    };
    // The worker installed the packages before starting this process: this
    // finds that install in the cache (no pip runs here).
    // Resolved against the data stack exactly when the worker's was (the
    // same interpreter, so the same install's key).
    let on_stack = init.python.dir.is_none()
        && match choice {
            PythonInterpreter::Data => true,
            PythonInterpreter::Lean => false,
            PythonInterpreter::Auto => {
                code_runner_python::Interpreter::Auto.resolved()
                    == code_runner_python::Interpreter::Data
            }
        };
    let python = code_runner_python::install_packages(&init.python.packages, on_stack)
        .and_then(|packages| {
            load_python(init.python.dir.clone(), choice, limits, packages.as_ref())
        })
        .map(|(engine, _)| Arc::new(engine) as Arc<dyn Engine>)
        .map_err(|err| err.to_string());
    let node_packages = open_node_packages(&init.node_packages, init.npm_registry.as_deref());
    let v8 = code_runner_v8::V8Engine::new()
        .map(|engine| engine.files_namespace(FILES_NAMESPACE))
        .map_err(|err| err.to_string())
        .and_then(|engine| match node_packages? {
            Some(set) => Ok(engine.packages(set)),
            None => Ok(engine),
        });
    let node = v8.clone().map(|engine| Arc::new(engine) as Arc<dyn Engine>);
    let typescript = v8.map(|engine| Arc::new(engine.typescript()) as Arc<dyn Engine>);
    vec![
        (Lang::Python, python),
        (Lang::Node, node),
        (Lang::TypeScript, typescript),
    ]
}
