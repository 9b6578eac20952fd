//! `code-runner::run`, one-shot: the response shape, failures as responses,
//! what happens to results JSON cannot carry or the caps replace, and the
//! request limits checked before a runtime boots.

mod limits;
mod response;
mod results;
