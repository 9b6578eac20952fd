//! `code-runner::run`, one-shot, in both languages: the response shape and
//! failures as responses (`response`), what happens to results JSON cannot
//! carry or the caps replace (`results`), the request limits checked
//! before a runtime boots and the run's deadline (`limits`), and what each
//! run reports it cost (`usage`).

mod answers;
mod limits;
mod response;
mod results;
mod usage;
