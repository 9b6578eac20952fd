//! The HTTP edge: routes and error bodies, who may call, the edge's limits,
//! and property tests of whatever arrives. The edge is the same for every
//! language: its tests probe with python runs (the property tests send
//! programs of both).

mod limits;
mod mcp;
mod properties;
mod routes;
mod rules;
