//! Python's part of the engines: its packages installed (and what of them
//! the interpreter shadows) and its engine loaded in the background, and
//! what it offers, as the texts a model reads say it.

use std::path::PathBuf;
use std::sync::{Arc, PoisonError};

use code_runner_core::{Config, Engine};

use super::Engines;
use crate::runtimes::loading::{install_packages, load_python};

/// What the runtimes offer beyond each language's own library, for the
/// texts a model reads (tool descriptions, guidance, `describe`).
#[derive(Debug, Clone, Default)]
pub struct Offer {
    /// The operator's npm packages as `name@version`, once installed.
    pub node_packages: Vec<String>,
    /// Whether python runs the data stack.
    pub data_stack: bool,
    /// What the operator's list takes from the data stack instead of
    /// installing it, as `name==version`.
    pub provided: Vec<String>,
    /// The operator's packages the interpreter shadows, each saying what an
    /// import really gives.
    pub shadowed: Vec<String>,
}

/// What loading python in this process needs.
pub(super) struct PythonLoad {
    pub(super) config: Config,
    pub(super) python_dir: Option<PathBuf>,
}

impl Engines {
    /// Installs the configuration's python packages (or finds their install).
    pub(super) async fn install(
        &self,
        config: &Config,
    ) -> Result<Option<code_runner_python::PythonPackages>, String> {
        let installed = install_packages(config, self.python_data)
            .await
            .map_err(|err| err.message);
        match &installed {
            Ok(packages) => {
                let names = packages.as_ref().map(|p| p.installed.clone());
                let _ = self.python_packages.set(names.unwrap_or_default());
                let provided = packages.as_ref().map(|p| p.provided.clone());
                let _ = self.python_provided.set(provided.unwrap_or_default());
                if let Some(packages) = packages {
                    let shadowed = self.shadowed(packages);
                    for note in &shadowed {
                        tracing::warn!("python_packages: {note}");
                    }
                    *self
                        .python_shadowed
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner) = shadowed;
                }
            }
            Err(why) => tracing::error!("python is unavailable: {why}"),
        }
        installed
    }

    /// The installed `packages`' modules the interpreter python will run shadows.
    fn shadowed(&self, packages: &code_runner_python::PythonPackages) -> Vec<String> {
        let library = match self.python_data {
            true => code_runner_python::default_data_dir()
                .join("lib")
                .join("python315.zip"),
            false => code_runner_python::default_snapshot_dir().join("lib"),
        };
        code_runner_python::shadowed_packages(packages, Some(&library))
    }

    /// Starts loading python in this process, in the background: its
    /// packages first.
    pub(super) fn load_python(self: &Arc<Self>, load: PythonLoad) {
        let engines = self.clone();
        tokio::spawn(async move {
            let limits = code_runner_python::EngineLimits {
                max_runtimes: load.config.max_runtimes,
                max_memory_mb: load.config.max_memory_mb,
            };
            let choice = load.config.python_interpreter;
            let packages = match engines.install(&load.config).await {
                Ok(packages) => packages,
                Err(why) => {
                    engines.python.set(Err(why));
                    return;
                }
            };
            let dir = load.python_dir;
            let python = tokio::task::spawn_blocking(move || {
                load_python(dir, choice, limits, packages.as_ref())
            })
            .await
            .map_err(|err| format!("python engine loader panicked: {err}"))
            .and_then(|loaded| loaded.map_err(|err| err.to_string()));
            match &python {
                Ok((_, name)) => {
                    let _ = engines.python_interpreter.set(name);
                    tracing::info!("python runs the {name} interpreter");
                }
                Err(why) => tracing::warn!("python engine unavailable: {why}"),
            }
            engines
                .python
                .set(python.map(|(engine, _)| Arc::new(engine) as Arc<dyn Engine>));
        });
    }

    /// The shadowed-package notes known now.
    pub(super) fn shadowed_notes(&self) -> Vec<String> {
        self.python_shadowed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// What the runtimes offer, as the texts a model reads say it.
    pub fn offer(&self) -> Offer {
        Offer {
            node_packages: self.node_packages(),
            data_stack: self.python_has_data_stack(),
            provided: self.python_provided.get().cloned().unwrap_or_default(),
            shadowed: self.shadowed_notes(),
        }
    }

    /// Whether python runs the data stack (numpy, pandas, matplotlib, …):
    /// the loaded interpreter's, or before it loaded, what it will be.
    pub fn python_has_data_stack(&self) -> bool {
        match self.python_interpreter.get() {
            Some(name) => *name == "data",
            None => self.python_data,
        }
    }
}
