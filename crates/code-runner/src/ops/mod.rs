//! The operations: one file per bus function, and the state they share. The
//! only layer that sees both the bus (`crate::bus`) and the runtimes
//! (`crate::runtimes`).

pub(crate) mod configuration;
pub(crate) mod functions;
pub(crate) mod guest;
pub(crate) mod guidance;
pub(crate) mod invoke;
pub(crate) mod namespaces;
pub(crate) mod register;
pub(crate) mod retire;
pub(crate) mod tenancy;
