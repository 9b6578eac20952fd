//! The callers: the HTTP API and playground, the console cards, the iii
//! engine link and the process log. Nothing below imports this layer; each
//! part is handed what it needs by the composition root (`worker.rs`).

pub mod api;
pub mod http;
pub mod iii;
pub mod live;
pub mod logging;
pub mod mcp;
pub(crate) mod ui;
