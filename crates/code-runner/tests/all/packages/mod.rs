//! Packages the operator lists, and the ones an agent asks for: python's
//! wheels, npm's bundles, and `code-runner::install`.

mod install;
mod node;
mod python;
mod registry;
