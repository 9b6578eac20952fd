//! Every function id this worker serves, and its configuration entry's id:
//! each defined once, here.

/// `code-runner::run`: run code, one-shot or kept.
pub const RUN: &str = "code-runner::run";
/// `code-runner::teardown`: destroy a kept or namespace runtime.
pub const TEARDOWN: &str = "code-runner::teardown";
/// `code-runner::register_function`: publish a function whose handler runs in a sandbox.
pub const REGISTER_FUNCTION: &str = "code-runner::register_function";
/// `code-runner::release`: a peer's guest tree ended (registered only as the
/// scoped `code-runner@<worker>::release`, internal).
pub const RELEASE: &str = "code-runner::release";
/// `code-runner::resume`: goes on with a run suspended on a call that waits for approval.
pub const RESUME: &str = "code-runner::resume";
/// Packages an agent asks for, added to one kept runtime (host only).
pub const INSTALL: &str = "code-runner::install";
/// A kept runtime's state, written to the snapshot store (host only).
pub const SNAPSHOT: &str = "code-runner::snapshot";
/// A new kept runtime from a snapshot (host only).
pub const RESTORE: &str = "code-runner::restore";
/// A snapshot removed from the store (host only).
pub const DELETE_SNAPSHOT: &str = "code-runner::delete_snapshot";
/// `code-runner::read_file`: a linked file's bytes by its uri.
pub const READ_FILE: &str = "code-runner::read_file";
/// Per-tenant usage for a period (host only).
pub const USAGE: &str = "code-runner::usage";
/// `code-runner::describe`: declarations of what guest code may call (code mode).
pub const DESCRIBE: &str = "code-runner::describe";
/// `engine::functions::info`: describe bus functions.
pub const FUNCTIONS_INFO: &str = "engine::functions::info";
/// `configuration::get`: read a configuration entry.
pub const CONFIGURATION_GET: &str = "configuration::get";
/// `configuration::set`: replace a configuration entry.
pub const CONFIGURATION_SET: &str = "configuration::set";
/// `code-runner::on-config-change`: reload from the stored configuration.
pub const ON_CONFIG_CHANGE: &str = "code-runner::on-config-change";
/// `code-runner::inject-guidance`: the harness hook that teaches a model the conventions.
pub const INJECT_GUIDANCE: &str = "code-runner::inject-guidance";
/// `code-runner::ui-content`: the console cards' and playground's assets.
pub const UI_CONTENT: &str = "code-runner::ui-content";
/// The id of the configuration entry holding code-runner's limits.
pub const CONFIG_ID: &str = "code-runner";
