//! What a hostile guest (or client) cannot do to the host, in both
//! languages where the attack has a form in each: the memory its values
//! cost the host, its descriptors and quota, the error text it gets quoted
//! back, the catalog it asks about, and what it sends through an iii
//! engine.

mod error_text;
mod info;
mod memory;
mod resources;
mod through_engine;
