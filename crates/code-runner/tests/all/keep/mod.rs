//! Kept runtimes (`keep: true`): ids, what persists across turns, the errors
//! of a runtime that is gone, teardown, idle reaping and isolation.

mod teardown;
mod turns;
