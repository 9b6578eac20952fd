//! Host directories a runtime owns.

use std::path::Path;

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
