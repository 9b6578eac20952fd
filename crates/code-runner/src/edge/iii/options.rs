//! How a worker joins an engine: the engine's address and this worker's
//! name on it, with the default name and the rules both must meet.

/// How a worker joins an engine.
#[derive(Debug, Clone)]
pub struct IiiOptions {
    /// The engine's WebSocket address, e.g. `ws://127.0.0.1:49134`.
    pub url: String,
    /// This worker's name on the engine: unique per engine namespace (a
    /// second live worker with the same name is refused by the engine).
    pub worker_name: String,
}

impl IiiOptions {
    /// The default worker name: `<host>-<pid>`, unique per process.
    pub fn default_worker_name() -> String {
        let host: String = std::env::var("HOSTNAME")
            .ok()
            .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
            .unwrap_or_default()
            .trim()
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '-'
                }
            })
            .take(40)
            .collect();
        let host = if host.is_empty() {
            "host".to_string()
        } else {
            host
        };
        format!("{host}-{}", std::process::id())
    }

    /// Checks the worker name: 1 to 64 of `[A-Za-z0-9_-]`, since it becomes
    /// part of function ids (`code-runner@<name>::run`) and runtime ids.
    ///
    /// # Errors
    /// `code-runner::invalid_request` naming the rule.
    pub fn validate(&self) -> Result<(), code_runner_core::RunnerError> {
        let name = &self.worker_name;
        let ok = !name.is_empty()
            && name.len() <= 64
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !ok {
            return Err(code_runner_core::RunnerError::invalid(format!(
                "worker name {name:?} must be 1 to 64 of [A-Za-z0-9_-]"
            )));
        }
        if !self.url.starts_with("ws://") && !self.url.starts_with("wss://") {
            return Err(code_runner_core::RunnerError::invalid(format!(
                "engine address {:?} must be a ws:// or wss:// URL",
                self.url
            )));
        }
        Ok(())
    }
}
