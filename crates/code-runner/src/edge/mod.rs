//! The callers: the command line, the HTTP API and playground, the console
//! cards and the iii engine link. Nothing below imports this layer: each part
//! is handed what it needs by the composition root (`worker.rs`).

pub mod cli;
pub mod http;
pub mod iii;
pub mod logging;
pub(crate) mod ui;
