//! Kept runtimes (`keep: true`), in both languages: ids, what persists
//! across turns (`turns`), and the end of a runtime (`teardown`): the errors
//! of an id that is gone, idle reaping, isolation, and the runtime
//! directories runs leave and kept runtimes hold.

mod teardown;
mod turns;
