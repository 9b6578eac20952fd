//! Namespaces: a runtime's own namespace, and who may write or tear down one.

mod own;
mod tenants;
