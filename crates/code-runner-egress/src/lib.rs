//! code-runner's egress: the host side of a guest's `fetch` (JavaScript) or
//! `urllib` (Python). Guest code has no sockets; its requests come here, and
//! go out only to the hosts the operator lists in `egress_allow`.
//!
//! Each hop of a request is checked before any connection is made: the
//! scheme (`http`, `https`), the host and port against the allow-list (in
//! the WHATWG URL parser's canonical form, so numeric aliases are the
//! address they spell), then every address the name resolves to against
//! the address rule ([`address`]): a non-public address only when an entry
//! names it. The connection goes only to the addresses approved (the
//! client's resolver is pinned to them, so a second lookup cannot rebind
//! the name). Redirects are followed by hand, each hop checked again, at
//! most [`MAX_REDIRECTS`]. Bodies are read through a byte cap (a response
//! past it is an error, not a truncated body). Secrets ([`secrets`]) are
//! placeholders in the guest and values only on the wire to their hosts,
//! and every byte that leaves this crate (a response, an error's text) has
//! passed their scrub.
//!
//! The client is `reqwest` with rustls and the Web PKI roots, no system
//! proxy, HTTP/1.1, no decompression of its own: requests ask for bodies
//! without content coding, and [`coding`] decodes gzip and deflate a server
//! sends anyway, within the response cap, before the scrub.

pub mod address;
pub mod allow;
mod coding;
mod fetch;
mod gate;
mod model;
pub mod secrets;

pub use allow::{Allow, Host};
pub use fetch::Egress;
pub use gate::{Gate, Permit};
pub use model::{
    BodyCharge, EgressError, Kind, MAX_BODY_BYTES_IN_FLIGHT, MAX_REDIRECTS,
    MAX_REQUEST_HEADER_BYTES, MAX_REQUEST_HEADERS, MAX_URL_BYTES, Policy, Request, Response, Usage,
};
pub use secrets::{MIN_SECRET_BYTES, SecretSpec, Secrets};
