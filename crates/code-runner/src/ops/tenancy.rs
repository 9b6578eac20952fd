//! Who may write a namespace: register into it, re-register its functions,
//! tear it down.
//!
//! A namespace belongs to whoever created it:
//!
//! - **a host call** (HTTP, the CLI, the iii engine): the operator's. Host
//!   callers are the operator and may write any namespace of
//!   `register_function`. Guest code may write a host-created namespace only
//!   when the configuration key `guest_writable_namespaces` lists it;
//! - **guest code**: the lineage that created it, named by its root (the
//!   runtime a host call started; a kept runtime's later runs share it).
//!   Guest code of any other lineage is refused; host callers may write it.
//!
//! A namespace a plain runtime holds through node's `iii.registerFunction`
//! is that runtime's: its `runtime_id` is the capability, so `teardown
//! {namespace}` destroys it only when called from that runtime's own
//! lineage; everyone else, host callers included, tears it down by id.
//!
//! A plain runtime's own namespace (its `iii.namespace`, see
//! [`crate::runtimes::lineage`]) is reserved for it while it lives: its own
//! `iii.registerFunction` may claim it, and `register_function` from guest
//! code of its lineage may create a namespace runtime there (which then
//! follows the rules above, outliving the runtime as namespaces guest code
//! registers do); nobody else may register into it, host callers included,
//! until the runtime ends ([`may_register_reserved`]).

use code_runner_core::RunnerError;

use crate::bus::Caller;
use crate::bus::naming::canonical;
use crate::ids::RuntimeKey;
use crate::runtimes::lineage::Reservation;

/// Who writes (or created) a namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writer {
    /// A host call: the operator.
    Host,
    /// Guest code of the lineage rooted at this key.
    Guest(RuntimeKey),
}

impl Writer {
    /// The writer a call comes from.
    pub fn of(caller: &Caller) -> Writer {
        caller
            .guest
            .as_ref()
            .map_or(Writer::Host, |guest| Writer::Guest(guest.root))
    }
}

/// Whether `writer` may `act` on (register into, tear down) `namespace`,
/// which `owner` created; `open` is `guest_writable_namespaces`.
///
/// # Errors
/// `code-runner::invalid_request` naming the namespace, whose it is, and
/// what would allow it.
pub fn may_write(
    namespace: &str,
    owner: Writer,
    writer: Writer,
    open: &[String],
    act: &str,
) -> Result<(), RunnerError> {
    let Writer::Guest(root) = writer else {
        return Ok(());
    };
    if owner == Writer::Guest(root) || open.iter().any(|n| n == namespace) {
        return Ok(());
    }
    let ns = canonical(namespace);
    Err(RunnerError::invalid(match owner {
        Writer::Host => format!(
            "guest code may not {act} namespace {ns}: a host call created it, and guest code may write such a namespace only if the operator lists it in the configuration key guest_writable_namespaces; use a namespace of your own"
        ),
        Writer::Guest(_) => format!(
            "guest code may not {act} namespace {ns}: it belongs to the run whose code created it, and only that run's code (or a host call) may write it; use a namespace of your own"
        ),
    }))
}

/// Whether `writer` may tear down `namespace` by name when the runtime whose
/// lineage root is `holder_root` holds it through `iii.registerFunction`.
///
/// # Errors
/// `code-runner::invalid_request` saying to use the runtime's id.
pub fn may_tear_down_held(
    namespace: &str,
    holder_root: Option<RuntimeKey>,
    writer: Writer,
) -> Result<(), RunnerError> {
    if let (Writer::Guest(root), Some(holder)) = (writer, holder_root)
        && root == holder
    {
        return Ok(());
    }
    Err(RunnerError::invalid(format!(
        "namespace {} is held by a runtime that registered in it with iii.registerFunction; tear that runtime down with its runtime_id (teardown {{runtime_id}}): its id is the capability, and a namespace name is not",
        canonical(namespace)
    )))
}

/// Whether guest code may register into `namespace` while `look_alike` (see
/// [`crate::ops::namespaces::NamespaceRuntimes::look_alike`]) reads the same
/// ignoring case, `_` and `-` and belongs to someone else: `HOSTNS` and
/// `host_ns` beside the operator's `host-ns` would pass for it in a listing.
///
/// # Errors
/// `code-runner::invalid_request` naming both namespaces and whose the other is.
pub fn may_look_like(
    namespace: &str,
    look_alike: Option<(String, Option<Writer>)>,
) -> Result<(), RunnerError> {
    let Some((other, owner)) = look_alike else {
        return Ok(());
    };
    let whose = match owner {
        Some(Writer::Host) | None => "the operator's (a host call created it)",
        Some(Writer::Guest(_)) => "another run's",
    };
    Err(RunnerError::invalid(format!(
        "namespace {} looks like namespace {}, which is {whose}: namespaces that differ only in case, `_` or `-` are one name to whoever reads a listing, so guest code may not create one beside another's; use a namespace of your own",
        canonical(namespace),
        canonical(&other)
    )))
}

/// Who registers into a namespace that may be reserved as a plain runtime's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claimant {
    /// The guest code of this plain runtime, through `iii.registerFunction`.
    Runtime(RuntimeKey),
    /// A `register_function` call by this writer.
    Register(Writer),
}

/// Whether `claimant` may register into `namespace`, which `reservation`
/// (if any) reserves as a live plain runtime's own: that runtime's own
/// registrar may, and `register_function` from guest code of its lineage;
/// anyone else, host callers included, may not while it lives.
///
/// # Errors
/// `code-runner::invalid_request` naming the namespace and why.
pub fn may_register_reserved(
    namespace: &str,
    reservation: Option<Reservation>,
    claimant: Claimant,
) -> Result<(), RunnerError> {
    let Some(reservation) = reservation else {
        return Ok(());
    };
    let allowed = match claimant {
        Claimant::Runtime(key) => key == reservation.holder,
        Claimant::Register(Writer::Guest(root)) => root == reservation.root,
        Claimant::Register(Writer::Host) => false,
    };
    if allowed {
        return Ok(());
    }
    Err(RunnerError::invalid(format!(
        "namespace {} is the own namespace (iii.namespace) of a runtime that is still running, reserved for that runtime until it ends; register under your own iii.namespace or another namespace",
        canonical(namespace)
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtimes::lineage::{Lasting, Lineage};

    fn two_roots() -> (RuntimeKey, RuntimeKey) {
        let lineage = Lineage::default();
        let begin = || lineage.begin(None, Lasting::No, 32).unwrap();
        (begin(), begin())
    }

    /// Host callers write anything; a guest writes what its lineage made,
    /// or what the operator opened, nothing else.
    #[test]
    fn namespaces_are_written_by_their_owner() {
        let (a, b) = two_roots();
        let open = vec!["shared".to_string()];
        for owner in [Writer::Host, Writer::Guest(a)] {
            assert!(may_write("app", owner, Writer::Host, &[], "register into").is_ok());
        }
        assert!(may_write("app", Writer::Guest(a), Writer::Guest(a), &[], "x").is_ok());
        let err = may_write(
            "app",
            Writer::Guest(a),
            Writer::Guest(b),
            &[],
            "register into",
        )
        .unwrap_err();
        assert!(
            err.message
                .contains("may not register into namespace app::"),
            "{}",
            err.message
        );
        assert!(
            err.message.contains("belongs to the run"),
            "{}",
            err.message
        );
        let err = may_write("app", Writer::Host, Writer::Guest(a), &[], "tear down").unwrap_err();
        assert!(
            err.message.contains("guest_writable_namespaces"),
            "{}",
            err.message
        );
        assert!(may_write("shared", Writer::Host, Writer::Guest(a), &open, "x").is_ok());
        assert!(may_write("shared", Writer::Guest(b), Writer::Guest(a), &open, "x").is_ok());
    }

    /// A held namespace goes by name only from its holder's lineage.
    #[test]
    fn held_namespaces_need_the_holders_lineage() {
        let (a, b) = two_roots();
        assert!(may_tear_down_held("t", Some(a), Writer::Guest(a)).is_ok());
        for writer in [Writer::Host, Writer::Guest(b)] {
            let err = may_tear_down_held("t", Some(a), writer).unwrap_err();
            assert!(err.message.contains("runtime_id"), "{}", err.message);
        }
        assert!(may_tear_down_held("t", None, Writer::Guest(a)).is_err());
    }

    /// A runtime's own namespace is its own while it lives: its registrar
    /// and register_function from its lineage may register there; another
    /// runtime, another lineage and the host may not; a free name is free.
    #[test]
    fn own_namespaces_are_reserved_for_their_runtime() {
        let lineage = Lineage::default();
        let a = lineage.begin(None, Lasting::Yes, 32).unwrap();
        let b = lineage.begin(None, Lasting::No, 32).unwrap();
        let ns = lineage.own_namespace(a).unwrap();
        assert_ne!(Some(&ns), lineage.own_namespace(b).as_ref());
        let reserved = lineage.reservation(&ns);
        assert_eq!(reserved.map(|r| r.holder), Some(a));
        for ok in [Claimant::Runtime(a), Claimant::Register(Writer::Guest(a))] {
            assert!(may_register_reserved(&ns, reserved, ok).is_ok(), "{ok:?}");
        }
        for refused in [
            Claimant::Runtime(b),
            Claimant::Register(Writer::Guest(b)),
            Claimant::Register(Writer::Host),
        ] {
            let err = may_register_reserved(&ns, reserved, refused).unwrap_err();
            assert!(
                err.message.contains(&format!("namespace {ns}::")),
                "{}",
                err.message
            );
            assert!(err.message.contains("reserved"), "{}", err.message);
        }
        lineage.end(a);
        assert_eq!(lineage.reservation(&ns), None);
        assert!(lineage.own_namespace(a).is_none());
        assert!(may_register_reserved(&ns, None, Claimant::Register(Writer::Host)).is_ok());
    }
}
