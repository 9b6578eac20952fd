//! The HTTP edge: routes and error bodies, who may call, the edge's limits,
//! and property tests of whatever arrives.

mod limits;
mod properties;
mod routes;
mod rules;
