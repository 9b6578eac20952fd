//! The standalone store: `<data-dir>/configuration/code-runner.yaml`.
//!
//! Written whole, never in place: a temporary file in the same directory is
//! written, fsynced and renamed over the old one (then the directory is
//! fsynced), so a reader or a crash sees the old file or the new one, never
//! half of one.

use std::io::Write;
use std::path::{Path, PathBuf};

use code_runner_core::{BoxFuture, Config, RunnerError};

use super::{ConfigStore, parse_yaml};

/// Heads the file, for whoever opens it by hand.
const HEADER: &str = "\
# code-runner configuration. Edit it here (the running worker picks the change
# up) or with `configuration::set`. max_result_bytes, max_stream_bytes,
# max_images, max_image_bytes, max_collect_files, max_collect_bytes,
# default_timeout_ms, max_timeout_ms,
# inject_guidance, guest_writable_namespaces, guest_trigger_types and
# mcp_guest_tools apply to the next call; every other key applies when the
# worker next starts.
";

/// Where a data directory keeps its configuration.
pub(crate) fn persisted_path(data_dir: &Path) -> PathBuf {
    data_dir.join("configuration").join("code-runner.yaml")
}

/// The YAML file holding the configuration of one data directory.
#[derive(Debug, Clone)]
pub(crate) struct ConfigFile {
    path: PathBuf,
}

impl ConfigFile {
    /// The configuration file of `data_dir` (which need not exist yet).
    pub fn in_data_dir(data_dir: &Path) -> ConfigFile {
        ConfigFile {
            path: persisted_path(data_dir),
        }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The persisted configuration, or `seed` (which is then persisted) on a first boot.
    ///
    /// # Errors
    /// `code-runner::invalid_request` for an invalid persisted file, naming
    /// it and the key; `code-runner::engine` when it cannot be read or written.
    pub fn load_or_seed(&self, seed: &Config) -> Result<Config, RunnerError> {
        if self.path.exists() {
            return self.read();
        }
        seed.validate()?;
        self.write(seed)?;
        Ok(seed.clone())
    }

    /// Reads and validates the file.
    ///
    /// # Errors
    /// `code-runner::invalid_request` naming the file and the offending key;
    /// `code-runner::engine` when it cannot be read.
    pub fn read(&self) -> Result<Config, RunnerError> {
        let text = std::fs::read_to_string(&self.path).map_err(|err| {
            RunnerError::engine(format!("cannot read {}: {err}", self.path.display()))
        })?;
        parse_yaml(&text).map_err(|err| {
            RunnerError::new(
                err.code,
                format!("{}: {}", self.path.display(), err.message),
            )
        })
    }

    /// Replaces the file with `config`, atomically and durably.
    ///
    /// # Errors
    /// `code-runner::engine` naming the path; the old file is then intact.
    pub fn write(&self, config: &Config) -> Result<(), RunnerError> {
        let yaml = serde_yaml_ng::to_string(config).map_err(|err| {
            RunnerError::engine(format!("cannot serialise the configuration: {err}"))
        })?;
        self.write_text(&format!("{HEADER}{yaml}"))
    }

    /// Replaces the file with `text` (already validated), atomically and
    /// durably: a seed file is kept as written, comments and all.
    ///
    /// # Errors
    /// `code-runner::engine` naming the path; the old file is then intact.
    pub fn write_text(&self, text: &str) -> Result<(), RunnerError> {
        let failed = |err: std::io::Error| {
            RunnerError::engine(format!("cannot write {}: {err}", self.path.display()))
        };
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(failed)?;
        let mut temp = tempfile::Builder::new()
            .prefix(".code-runner.yaml.")
            .tempfile_in(dir)
            .map_err(failed)?;
        temp.write_all(text.as_bytes()).map_err(failed)?;
        temp.as_file().sync_all().map_err(failed)?;
        temp.persist(&self.path).map_err(|err| failed(err.error))?;
        // The rename is durable once the directory entry is.
        if let Ok(dir) = std::fs::File::open(dir) {
            let _ = dir.sync_all();
        }
        Ok(())
    }
}

impl ConfigStore for ConfigFile {
    fn load(&self) -> BoxFuture<'_, Result<Config, RunnerError>> {
        let file = self.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || file.read())
                .await
                .map_err(|err| RunnerError::engine(format!("configuration reader failed: {err}")))?
        })
    }

    fn save<'a>(&'a self, config: &'a Config) -> BoxFuture<'a, Result<(), RunnerError>> {
        let (file, config) = (self.clone(), config.clone());
        Box::pin(async move {
            tokio::task::spawn_blocking(move || file.write(&config))
                .await
                .map_err(|err| RunnerError::engine(format!("configuration writer failed: {err}")))?
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The seed is persisted on the first boot only; later boots read the file.
    #[test]
    fn the_seed_is_persisted_on_first_boot_only() {
        let dir = tempfile::tempdir().unwrap();
        let file = ConfigFile::in_data_dir(dir.path());
        let seed = Config {
            max_runtimes: 3,
            ..Config::default()
        };
        assert_eq!(file.load_or_seed(&seed).unwrap().max_runtimes, 3);
        let other = Config {
            max_runtimes: 9,
            ..Config::default()
        };
        assert_eq!(file.load_or_seed(&other).unwrap().max_runtimes, 3);
        let text = std::fs::read_to_string(file.path()).unwrap();
        assert!(text.starts_with("# code-runner configuration"), "{text}");
        assert!(text.contains("max_runtimes: 3"), "{text}");
    }

    /// A write leaves exactly the file behind: no temporary files.
    #[test]
    fn a_write_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = ConfigFile::in_data_dir(dir.path());
        file.write(&Config::default()).unwrap();
        file.write(&Config::default()).unwrap();
        let entries: Vec<_> = std::fs::read_dir(file.path().parent().unwrap())
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        assert_eq!(entries, ["code-runner.yaml"]);
    }

    /// An invalid file is refused naming the file and the key.
    #[test]
    fn an_invalid_file_names_itself_and_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let file = ConfigFile::in_data_dir(dir.path());
        std::fs::create_dir_all(file.path().parent().unwrap()).unwrap();
        std::fs::write(file.path(), "heap_mb: -3\n").unwrap();
        let message = file.read().unwrap_err().message;
        assert!(message.contains("code-runner.yaml"), "{message}");
        assert!(message.contains("heap_mb"), "{message}");
    }
}
