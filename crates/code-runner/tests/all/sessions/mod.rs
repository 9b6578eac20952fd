//! Sessions that outlive their runtime and their worker (issues 47, 48): forks
//! through `snapshot`/`restore` ([`fork`]), hibernation of idle runtimes
//! woken by id ([`hibernate`]), a drain on SIGTERM and a restart that serves
//! the same ids ([`restart`]), a store on a real S3-compatible server
//! ([`s3`]), and two workers on a real iii engine sharing a store
//! ([`workers`]); node sessions by their turn ledger ([`node`]).

mod checkpoint;
mod fork;
mod hibernate;
mod node;
mod restart;
mod s3;
mod workers;
