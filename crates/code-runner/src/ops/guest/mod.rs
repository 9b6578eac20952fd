//! The guest's `iii` global: `trigger`, `fetch` (requests through the host,
//! [`crate::ops::egress`]), `namespace`, `secrets` and, for node,
//! `registerFunction`.
//!
//! One implementation serves every engine: an engine only sees a
//! [`BindingNamespace`]. Every guest bus call passes the bus bridge
//! ([`crate::bus::bridge`]) before dispatch and carries its runtime as the
//! [`Caller`], so what it starts is charged to it and ends with it.
//!
//! [`trigger`] is `iii.trigger` (calls out, bounded per turn); [`typed`] is
//! `iii.fn.<name>(payload)` (a call by name, its payload checked first);
//! [`register`] is node's `iii.registerFunction` (publishes for the runtime's life).

mod check;
mod register;
mod trigger;
mod typed;

use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Weak};

use code_runner_core::{
    AbortSignal, BindingError, BindingNamespace, Bindings, Lang, RunnerError, TurnClock,
};
use serde_json::Value;

use crate::bus::catalog::Owner;
use crate::ids::RuntimeKey;
use crate::ops::Ops;
use crate::ops::approvals::{self, Approver};
use crate::ops::egress::{self, TurnEgress};
use crate::telemetry::TraceParent;
use register::register_from_guest;
use trigger::trigger;
use typed::call_by_name;

pub(crate) use check::check_arguments;

/// What the guest's `iii` knows about the runtime it runs in.
#[derive(Debug, Clone)]
pub(crate) struct GuestContext {
    /// The runtime's lineage key.
    pub key: RuntimeKey,
    /// The root of its lineage.
    pub root: RuntimeKey,
    /// Its language.
    pub lang: Lang,
    /// The namespace it serves (a namespace runtime), else `None`.
    pub namespace: Option<String>,
    /// What `iii.namespace` is: the namespace it serves, or a plain
    /// runtime's own (reserved for it while it lives, see [`crate::runtimes::lineage`]).
    pub iii_namespace: String,
    /// Fires when the turn (or call) these bindings serve answers; what its
    /// guest code starts is chained to it, so it ends then too.
    pub scope: AbortSignal,
    /// The turn's requests through the host (`iii.fetch`) and their cost.
    pub egress: Arc<TurnEgress>,
    /// Where a call that waits for a person goes: the run's gate, or
    /// nobody (a published function's call, a run guest code started).
    pub approvals: Approver,
    /// The turn's clock, stopped while a call waits for a person.
    pub clock: TurnClock,
    /// The trace of the call the turn serves: what its guest code calls
    /// and fetches are spans within it.
    pub trace: TraceParent,
}

impl GuestContext {
    /// The context of the live runtime `key`, a namespace runtime of
    /// `namespace` or (`None`) a plain runtime, whose `iii.namespace` is its
    /// own: the same string every turn, for as long as it lives.
    pub fn of(ops: &Ops, key: RuntimeKey, lang: Lang, namespace: Option<String>) -> Self {
        let iii_namespace = namespace
            .clone()
            .or_else(|| ops.lineage.own_namespace(key))
            .unwrap_or_default();
        GuestContext {
            key,
            root: ops.lineage.root(key).unwrap_or(key),
            lang,
            namespace,
            iii_namespace,
            scope: AbortSignal::new(),
            egress: Arc::default(),
            approvals: Approver::Nobody(approvals::PUBLISHED_CALL),
            clock: TurnClock::new(),
            trace: TraceParent::default(),
        }
    }

    /// The same context for a turn that serves a call traced as `trace`.
    #[must_use]
    pub fn traced(mut self, trace: TraceParent) -> Self {
        self.trace = trace;
        self
    }

    /// The same context for a run's turn, whose calls that need a person's
    /// approval go to `approver` (a host's run: its gate, the turn's `clock`
    /// stopped while they wait).
    #[must_use]
    pub fn gated(mut self, approver: Approver, clock: TurnClock) -> Self {
        self.approvals = approver;
        self.clock = clock;
        self
    }

    /// The same context counting its requests in `egress` (read by whoever
    /// answers the turn, for `usage.egress`).
    #[must_use]
    pub fn metered(mut self, egress: Arc<TurnEgress>) -> Self {
        self.egress = egress;
        self
    }

    /// The same context for a turn that ends with `scope` (fired by
    /// whoever started the turn, or by the turn's own end).
    #[must_use]
    pub fn within(mut self, scope: AbortSignal) -> Self {
        self.scope = scope;
        self
    }

    /// Who owns what this runtime publishes.
    pub fn owner(&self) -> Owner {
        match &self.namespace {
            Some(namespace) => Owner::Namespace {
                namespace: namespace.clone(),
                lang: self.lang,
            },
            None => Owner::Runtime(self.key),
        }
    }
}

/// The `iii` shape a pooled runtime's warm-up turn installs, so an engine
/// that sets bindings up once per shape (node) has done it before a run
/// takes the runtime. The warm-up program is empty: nothing here is called,
/// and its `iii.namespace` (empty) is never seen: the run that takes the
/// runtime brings the runtime's own, so node installs its bindings once
/// more on that first turn (and not again on a kept runtime's later turns,
/// whose namespace stays the same).
pub(crate) fn warm_up_bindings(lang: Lang) -> Bindings {
    let key = RuntimeKey::PLACEHOLDER;
    bindings(
        Weak::new(),
        GuestContext {
            key,
            root: key,
            lang,
            namespace: None,
            iii_namespace: String::new(),
            scope: AbortSignal::new(),
            egress: Arc::default(),
            approvals: Approver::Nobody(approvals::PUBLISHED_CALL),
            clock: TurnClock::new(),
            trace: TraceParent::default(),
        },
    )
    .bindings
}

/// The guest's `iii` for one call, and the signal that ends what its guest
/// code starts: the turn's own abort signal (a bounded runtime fires it
/// when the turn answers), or fired by the caller after a call of several
/// turns.
#[derive(Clone)]
pub(crate) struct GuestBindings {
    /// The binding namespaces.
    pub bindings: Bindings,
    /// The context's scope.
    pub scope: AbortSignal,
}

impl std::ops::Deref for GuestBindings {
    type Target = Bindings;

    fn deref(&self) -> &Bindings {
        &self.bindings
    }
}

/// The guest's `iii` for a turn on the runtime described by `ctx`.
pub(crate) fn bindings(ops: Weak<Ops>, ctx: GuestContext) -> GuestBindings {
    let (scope, clock) = (ctx.scope.clone(), ctx.clock.clone());
    let ctx = Arc::new(ctx);
    let in_flight = Arc::new(AtomicUsize::new(0));
    let namespace = Value::String(ctx.iii_namespace.clone());
    let secrets = ops.upgrade().map_or_else(
        || Value::Object(Default::default()),
        |ops| ops.egress.secrets(&ops.config()),
    );
    let mut iii = BindingNamespace::new("iii")
        .function("trigger", {
            let (ops, ctx, in_flight) = (ops.clone(), ctx.clone(), in_flight.clone());
            move |args, call| trigger(ops.clone(), ctx.clone(), in_flight.clone(), args, call)
        })
        .path_member("fn", {
            let (ops, ctx) = (ops.clone(), ctx.clone());
            let checks = check::TurnChecks::default();
            move |args, call| {
                call_by_name(
                    ops.clone(),
                    ctx.clone(),
                    in_flight.clone(),
                    checks.clone(),
                    args,
                    call,
                )
            }
        })
        .function("fetch", {
            let (ops, ctx) = (ops.clone(), ctx.clone());
            move |args, call| {
                let (ops, ctx) = (ops.upgrade(), ctx.clone());
                async move {
                    let ops = ops.ok_or_else(|| BindingError::message("the worker is stopping"))?;
                    let (state, config) = (ops.egress.clone(), ops.config());
                    let span = ops.bus.traces().fetch(&ctx.trace, &args);
                    drop(ops);
                    let answer = egress::fetch(
                        state,
                        ctx.egress.clone(),
                        config,
                        ctx.scope.clone(),
                        args,
                        call,
                    )
                    .await;
                    span.end_fetch(
                        answer
                            .as_ref()
                            .map_err(|err| err.code.as_deref().unwrap_or("error")),
                    );
                    answer
                }
            }
        })
        .function("fetch_body", {
            let ctx = ctx.clone();
            move |args, _call| {
                let answer = egress::fetch_body(&ctx.egress, args);
                async move { answer }
            }
        })
        .value("namespace", namespace)
        .value("secrets", secrets)
        .error_class("IIIError", "member");
    if ctx.lang.on_node_engine() {
        iii = iii.registrar("registerFunction", move |args, _call| {
            register_from_guest(ops.clone(), ctx.clone(), args)
        });
    }
    GuestBindings {
        bindings: Bindings::new(vec![iii])
            .unwrap_or_default()
            .with_clock(clock),
        scope,
    }
}

fn binding_error(err: RunnerError) -> BindingError {
    BindingError::from(err)
}
