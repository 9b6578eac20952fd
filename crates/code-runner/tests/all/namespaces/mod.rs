//! Namespaces: a runtime's own namespace, who may write or tear down one,
//! and look-alikes of another's.

mod look_alike;
mod own;
mod tenants;
