//! The trampolines the preview-1 shadows ([`super::fs`]) delegate through:
//! a tiny instance importing the interpreter's memory and wasmtime-wasi's
//! own functions (from the unshadowed linker) and exporting one forwarder
//! each, since wasmtime-wasi finds guest memory through its caller's
//! `memory` export; and a second one with a page of its own that answers
//! `fd_filestat_get` for the quota's recount without touching guest memory.

use wasmtime::{Extern, Linker, Memory, Module, TypedFunc};

/// The WASI module every delegated function comes from.
pub const MODULE: &str = "wasi_snapshot_preview1";

/// The delegated wasmtime-wasi functions, with their signatures as WAT types.
const DELEGATED: &[(&str, &str)] = &[
    ("fd_write", "(param i32 i32 i32 i32) (result i32)"),
    ("fd_pwrite", "(param i32 i32 i32 i64 i32) (result i32)"),
    ("fd_filestat_set_size", "(param i32 i64) (result i32)"),
    (
        "path_open",
        "(param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)",
    ),
    ("fd_close", "(param i32) (result i32)"),
    ("fd_renumber", "(param i32 i32) (result i32)"),
    ("path_create_directory", "(param i32 i32 i32) (result i32)"),
    ("path_symlink", "(param i32 i32 i32 i32 i32) (result i32)"),
    (
        "path_link",
        "(param i32 i32 i32 i32 i32 i32 i32) (result i32)",
    ),
    ("path_unlink_file", "(param i32 i32 i32) (result i32)"),
    ("path_remove_directory", "(param i32 i32 i32) (result i32)"),
    (
        "path_filestat_get",
        "(param i32 i32 i32 i32 i32) (result i32)",
    ),
    (
        "path_rename",
        "(param i32 i32 i32 i32 i32 i32) (result i32)",
    ),
    ("poll_oneoff", "(param i32 i32 i32 i32) (result i32)"),
];

/// The forwarding trampoline's text.
fn trampoline_wat() -> String {
    let mut wat = String::from("(module\n  (import \"env\" \"memory\" (memory 0))\n");
    for (name, ty) in DELEGATED {
        wat.push_str(&format!(
            "  (import \"{MODULE}\" \"{name}\" (func ${name} {ty}))\n"
        ));
    }
    wat.push_str("  (export \"memory\" (memory 0))\n");
    for (name, ty) in DELEGATED {
        let params = ty.split(") (result").next().unwrap_or("");
        let arity = params.matches("i32").count() + params.matches("i64").count();
        let args: String = (0..arity).map(|i| format!("local.get {i} ")).collect();
        wat.push_str(&format!(
            "  (func (export \"{name}\") {ty} {args}call ${name})\n"
        ));
    }
    wat.push(')');
    wat
}

/// The stat trampoline, on a page of its own: `stat` (`fd_filestat_get` at
/// byte 0), `tell` (`fd_tell` at byte 64) and `flags` (`fd_fdstat_get` at
/// byte 128), each answering its errno: what a write's growth is reckoned
/// from (the size, the position, the append flag); and `lstat`
/// (`path_filestat_get` with the given lookup flags, of the path the caller
/// put at [`LSTAT_PATH`], at byte 0): what `unlink("x/")` answers from.
const STAT_WAT: &str = r#"(module
  (import "wasi_snapshot_preview1" "fd_filestat_get" (func $st (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_tell" (func $tell (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_fdstat_get" (func $fdstat (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "path_filestat_get" (func $pst (param i32 i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "lstat") (param i32 i32 i32) (result i32)
    (call $pst (local.get 0) (local.get 1) (i32.const 256) (local.get 2) (i32.const 0)))
  (func (export "stat") (param i32) (result i32) (call $st (local.get 0) (i32.const 0)))
  (func (export "tell") (param i32) (result i32) (call $tell (local.get 0) (i32.const 64)))
  (func (export "flags") (param i32) (result i32) (call $fdstat (local.get 0) (i32.const 128))))"#;

/// Where `lstat` reads its path in the stat trampoline's page (it holds up
/// to the rest of the page).
pub const LSTAT_PATH: usize = 256;

/// The two trampoline modules, compiled once per engine.
pub struct Trampolines {
    forward: Module,
    stat: Module,
}

impl Trampolines {
    /// Compiles both for `engine`.
    pub fn new(engine: &wasmtime::Engine) -> wasmtime::Result<Self> {
        Ok(Trampolines {
            forward: Module::new(engine, trampoline_wat())?,
            stat: Module::new(engine, STAT_WAT)?,
        })
    }
}

pub(super) type F3 = TypedFunc<(i32, i32, i32), i32>;
pub(super) type F4 = TypedFunc<(i32, i32, i32, i32), i32>;
/// `path_open`'s wasm signature.
type PathOpen = TypedFunc<(i32, i32, i32, i32, i32, i64, i64, i32, i32), i32>;
/// `path_link`'s wasm signature.
type PathLink = TypedFunc<(i32, i32, i32, i32, i32, i32, i32), i32>;

/// One store's delegates: wasmtime-wasi's functions, reached through its trampolines.
pub struct Originals {
    pub(super) fd_write: F4,
    pub(super) fd_pwrite: TypedFunc<(i32, i32, i32, i64, i32), i32>,
    pub(super) fd_filestat_set_size: TypedFunc<(i32, i64), i32>,
    pub(super) path_open: PathOpen,
    pub(super) fd_close: TypedFunc<i32, i32>,
    pub(super) fd_renumber: TypedFunc<(i32, i32), i32>,
    pub(super) path_create_directory: F3,
    pub(super) path_symlink: TypedFunc<(i32, i32, i32, i32, i32), i32>,
    pub(super) path_link: PathLink,
    pub(super) path_unlink_file: F3,
    pub(super) path_remove_directory: F3,
    pub(super) path_rename: TypedFunc<(i32, i32, i32, i32, i32, i32), i32>,
    pub(super) poll_oneoff: F4,
    pub(super) stat: TypedFunc<i32, i32>,
    /// The stat trampoline's `tell`: a descriptor's position, at byte 64.
    pub(super) tell: TypedFunc<i32, i32>,
    /// The stat trampoline's `flags`: a descriptor's `fdstat`, at byte 128.
    pub(super) flags: TypedFunc<i32, i32>,
    /// The stat trampoline's `lstat`: `(fd, lookup flags, path length)` of
    /// the path at [`LSTAT_PATH`], its filestat at byte 0.
    pub(super) lstat: TypedFunc<(i32, i32, i32), i32>,
    pub(super) path_filestat_get: TypedFunc<(i32, i32, i32, i32, i32), i32>,
    pub(super) stat_memory: Memory,
}

impl Originals {
    /// Instantiates the trampolines over the interpreter's `memory` and
    /// wasmtime-wasi's own functions (from the unshadowed `base` linker).
    pub fn new<T: 'static>(
        base: &Linker<T>,
        trampolines: &Trampolines,
        memory: Memory,
        store: &mut wasmtime::Store<T>,
    ) -> wasmtime::Result<Self> {
        let mut imports: Vec<Extern> = vec![memory.into()];
        for (name, _) in DELEGATED {
            imports.push(base.get(&mut *store, MODULE, name)?);
        }
        let forward = wasmtime::Instance::new(&mut *store, &trampolines.forward, &imports)?;
        let stat_imports = [
            "fd_filestat_get",
            "fd_tell",
            "fd_fdstat_get",
            "path_filestat_get",
        ]
        .into_iter()
        .map(|name| base.get(&mut *store, MODULE, name))
        .collect::<Result<Vec<_>, _>>()?;
        let stat = wasmtime::Instance::new(&mut *store, &trampolines.stat, &stat_imports)?;
        let s = &mut *store;
        Ok(Originals {
            fd_write: forward.get_typed_func(&mut *s, "fd_write")?,
            fd_pwrite: forward.get_typed_func(&mut *s, "fd_pwrite")?,
            fd_filestat_set_size: forward.get_typed_func(&mut *s, "fd_filestat_set_size")?,
            path_open: forward.get_typed_func(&mut *s, "path_open")?,
            fd_close: forward.get_typed_func(&mut *s, "fd_close")?,
            fd_renumber: forward.get_typed_func(&mut *s, "fd_renumber")?,
            path_create_directory: forward.get_typed_func(&mut *s, "path_create_directory")?,
            path_symlink: forward.get_typed_func(&mut *s, "path_symlink")?,
            path_link: forward.get_typed_func(&mut *s, "path_link")?,
            path_unlink_file: forward.get_typed_func(&mut *s, "path_unlink_file")?,
            path_remove_directory: forward.get_typed_func(&mut *s, "path_remove_directory")?,
            path_rename: forward.get_typed_func(&mut *s, "path_rename")?,
            poll_oneoff: forward.get_typed_func(&mut *s, "poll_oneoff")?,
            stat: stat.get_typed_func(&mut *s, "stat")?,
            tell: stat.get_typed_func(&mut *s, "tell")?,
            flags: stat.get_typed_func(&mut *s, "flags")?,
            lstat: stat.get_typed_func(&mut *s, "lstat")?,
            path_filestat_get: forward.get_typed_func(&mut *s, "path_filestat_get")?,
            stat_memory: stat
                .get_memory(&mut *s, "memory")
                .ok_or_else(|| wasmtime::Error::msg("the stat trampoline has no memory"))?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The trampoline forwards every delegated function with its own arity.
    #[test]
    fn trampoline_parses_and_forwards_every_function() {
        let engine = wasmtime::Engine::default();
        let module = Module::new(&engine, trampoline_wat()).expect("valid WAT");
        assert_eq!(module.exports().count(), DELEGATED.len() + 1);
        Module::new(&engine, STAT_WAT).expect("valid stat WAT");
    }
}
