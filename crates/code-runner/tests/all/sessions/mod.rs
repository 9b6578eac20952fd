//! Sessions that outlive their runtime and their worker (issue 47): forks
//! through `snapshot`/`restore` ([`fork`]), hibernation of idle runtimes
//! woken by id ([`hibernate`]), a drain on SIGTERM and a restart that serves
//! the same ids ([`restart`]), a store on a real S3-compatible server
//! ([`s3`]), and two workers on a real iii engine sharing a store
//! ([`workers`]).

mod checkpoint;
mod fork;
mod hibernate;
mod restart;
mod s3;
mod workers;
