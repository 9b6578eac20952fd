//! Host directories a runtime owns.

use std::path::{Path, PathBuf};

/// The cache directory the engines keep what they make once per machine in
/// (python's images, both languages' packages): `$CODE_RUNNER_CACHE_DIR`,
/// else `$XDG_CACHE_HOME/code-runner`, else `~/.cache/code-runner`.
pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("CODE_RUNNER_CACHE_DIR") {
        return PathBuf::from(dir);
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            std::env::var_os("HOME")
                .map(|home| PathBuf::from(home).join(".cache"))
                .unwrap_or_else(std::env::temp_dir)
        });
    base.join("code-runner")
}

/// Creates `path` and any missing parents with mode 0700 on Unix (owner
/// only), so other local users cannot read or write a runtime's `/work`.
/// An existing directory is left as it is.
///
/// # Errors
/// The I/O error of the first directory that cannot be created.
///
/// ```
/// # fn main() -> std::io::Result<()> {
/// let root = std::env::temp_dir().join(format!("cr-private-{}", std::process::id()));
/// let work = root.join("a").join("work");
/// code_runner_core::create_private_dir(&work)?;
/// #[cfg(unix)]
/// {
///     use std::os::unix::fs::PermissionsExt;
///     assert_eq!(std::fs::metadata(&work)?.permissions().mode() & 0o777, 0o700);
/// }
/// # std::fs::remove_dir_all(&root)?;
/// # Ok(()) }
/// ```
pub fn create_private_dir(path: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(path)
}
