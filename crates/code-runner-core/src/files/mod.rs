//! Files in and out of a run (`RunRequest.files`, `RunRequest.collect`),
//! shared by every surface and both engines.
//!
//! - [`path`]: the path rules; [`decode_inputs`] turns the wire's files into
//!   checked, normalised [`InputFile`]s.
//! - [`beneath`]: file operations under a runtime's root by descriptor, never
//!   following a symlink (`openat` with `O_NOFOLLOW` at every component).
//! - [`collect`]: the `collect` globs, the bounded walk, the MIME table and the
//!   caps (a file past them skipped, named in the omission marker).

pub mod beneath;
pub mod collect;
pub mod path;

pub use collect::{CollectCaps, Collected, Collection, Globs, collect, is_textual};
pub use path::{InputFile, decode_inputs, normalise};

#[cfg(test)]
mod tests;

/// The error a failed write of `path` into a runtime's root surfaces as:
/// `invalid_request` when the tree there is in the way (a file where a
/// directory must be, a directory where the file goes, a symlink),
/// `engine` for any other I/O failure.
pub fn put_error(path: &str, err: &std::io::Error) -> crate::RunnerError {
    use rustix::io::Errno;
    let in_the_way = [
        Errno::NOTDIR,
        Errno::ISDIR,
        Errno::LOOP,
        Errno::EXIST,
        Errno::MLINK,
    ]
    .iter()
    .any(|errno| err.raw_os_error() == Some(errno.raw_os_error()));
    if in_the_way {
        path::invalid(
            path,
            &format!(
                "something in the runtime's root is in the way ({err}): a file where a directory must be, a directory, or a symlink"
            ),
        )
    } else {
        crate::RunnerError::engine(format!("cannot write {}: {err}", path::shorten(path)))
    }
}
