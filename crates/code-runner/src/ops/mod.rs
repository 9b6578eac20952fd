//! The operations: one file per bus function, and the state they share. The
//! only layer that sees both the bus (`crate::bus`) and the runtimes
//! (`crate::runtimes`).

pub(crate) mod approvals;
pub(crate) mod configuration;
pub(crate) mod describe;
pub(crate) mod egress;
pub(crate) mod files;
pub(crate) mod guest;
pub(crate) mod guidance;
pub(crate) mod host_work;
pub(crate) mod info;
pub(crate) mod install;
pub(crate) mod invoke;
pub(crate) mod knobs;
pub(crate) mod namespaces;
pub(crate) mod read_file;
pub(crate) mod register;
pub(crate) mod registrations;
pub(crate) mod resume;
pub(crate) mod retire;
pub(crate) mod run;
pub(crate) mod sessions;
pub(crate) mod standing;
pub(crate) mod teardown;
pub(crate) mod tenancy;
pub(crate) mod usage;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock, Weak};

use code_runner_core::{Config, Engine, Lang, RunnerError};
use serde_json::Value;

use crate::bus::bridge::GuestTriggers;
use crate::bus::catalog::Catalog;
use crate::bus::outbound::Outbound;
use crate::bus::{Bus, CallError, Caller, Function, Handler};
use crate::runtimes::engines::Engines;
use crate::runtimes::lineage::{Lineage, Parent};
use crate::runtimes::pool::WarmPool;
use crate::runtimes::registry::Registry;
use crate::settings::Settings;
use namespaces::NamespaceRuntimes;

/// What the operations share: the live settings, the runtimes, the bus and
/// its published functions, and the way out to other workers. Built once by
/// the composition root; bus handlers hold it weakly.
pub(crate) struct Ops {
    pub(crate) settings: Arc<Settings>,
    pub(crate) registry: Registry,
    pub(crate) bus: Arc<Bus>,
    pub(crate) lineage: Lineage,
    pub(crate) published: Catalog,
    /// Trigger bindings guest code registered, by lineage.
    pub(crate) guest_triggers: GuestTriggers,
    pub(crate) namespaces: NamespaceRuntimes,
    pub(crate) runtimes_dir: PathBuf,
    pub(crate) engines: Arc<Engines>,
    /// Where calls of ids this bus does not hold go, once the worker joined an iii engine.
    pub(crate) outbound: Arc<OnceLock<Arc<dyn Outbound>>>,
    /// Guest requests through the host (`iii.fetch`), under the live policy.
    pub(crate) egress: Arc<egress::EgressState>,
    /// Runs suspended on a call that waits for a person.
    pub(crate) suspensions: approvals::Suspensions,
    /// Collected files linked (`collect_mode: "link"`), read by uri.
    pub(crate) links: crate::runtimes::links::Links,
    /// What hosts registered, kept for the next start.
    pub(crate) registrations: registrations::Registrations,
    /// The snapshot keys and store.
    pub(crate) sessions: sessions::Sessions,
    /// What an operator scrapes (`GET /metrics`).
    pub(crate) metrics: std::sync::Arc<crate::telemetry::Metrics>,
}

impl Ops {
    /// The operations over `engines`, with runtimes under `runtimes_dir`.
    pub(crate) fn new(
        settings: Arc<Settings>,
        engines: Arc<Engines>,
        runtimes_dir: PathBuf,
    ) -> Ops {
        // The data directory's: runtimes live in its `runtimes/`.
        let data_dir = runtimes_dir.parent().unwrap_or(&runtimes_dir).to_path_buf();
        let registrations = registrations::Registrations::new(&data_dir);
        let sessions = sessions::Sessions::new(&data_dir);
        Ops {
            settings,
            registry: Registry::default(),
            bus: Arc::default(),
            lineage: Lineage::default(),
            published: Catalog::default(),
            guest_triggers: GuestTriggers::default(),
            namespaces: NamespaceRuntimes::default(),
            runtimes_dir,
            engines,
            outbound: Arc::default(),
            egress: Arc::default(),
            suspensions: approvals::Suspensions::default(),
            registrations,
            sessions,
            links: crate::runtimes::links::Links::default(),
            metrics: crate::telemetry::Metrics::new(),
        }
    }

    /// The metrics as `GET /metrics` serves them, the gauges read now;
    /// `mcp_followers` from the edge, which knows them.
    pub(crate) fn metrics_text(&self, mcp_followers: u64) -> String {
        let config = self.config();
        self.metrics.render(crate::telemetry::State {
            slots_used: self.registry.used() as u64,
            slots_max: config.max_runtimes as u64,
            kept: self.registry.kept_count() as u64,
            suspended: self.suspensions.count() as u64,
            mcp_followers,
            linked_bytes: self.links.held().0 as u64,
            reloads: self.settings.reloads(),
            egress_refusals: egress::REFUSAL_REASONS
                .into_iter()
                .zip(self.egress.refusals())
                .collect(),
            engines: self
                .engines
                .stats()
                .into_iter()
                .map(|(lang, stats)| (lang.as_str(), stats))
                .collect(),
        })
    }

    /// The configuration calls use now.
    pub(crate) fn config(&self) -> Config {
        self.settings.in_force()
    }

    /// The data directory (runtimes and the configuration live under it).
    pub(crate) fn data_dir(&self) -> &Path {
        self.runtimes_dir.parent().unwrap_or(Path::new("."))
    }

    /// Where a guest's call of `id` goes: out (to the iii engine) for a
    /// function this worker does not hold, so any worker's function is
    /// reachable, else (`None`) this worker's own bus. Our own functions stay
    /// local even on an engine: the call keeps its guest [`Caller`] (what it
    /// starts is charged to the calling runtime, and a call back into the
    /// same runtime is refused), which a hop through the engine would lose.
    pub(crate) fn outbound_for(&self, id: &str) -> Option<&Arc<dyn Outbound>> {
        self.outbound.get().filter(|_| !self.bus.contains(id))
    }

    /// This worker's name on the engine it joined, if it joined one.
    pub(crate) fn worker_name(&self) -> Option<&str> {
        self.outbound.get().map(|out| out.worker_name())
    }

    /// The warm pool of `lang`, if it has one.
    pub(crate) fn pool(&self, lang: Lang) -> Option<&Arc<WarmPool>> {
        self.engines.pool(lang)
    }

    /// The engine of `lang`, waiting while it loads ([`Engines::ready`]):
    /// a host caller at most [`Engines::wait`], told what is being prepared
    /// on its live output; guest code no longer than its turn has left.
    pub(crate) async fn engine(
        &self,
        lang: Lang,
        caller: &Caller,
    ) -> Result<Arc<dyn Engine>, RunnerError> {
        let wait = match caller.time_left() {
            Some(left) => left.min(self.engines.wait()),
            None => self.engines.wait(),
        };
        let live = caller.live.clone();
        let mut tell = move |text: String| {
            if let Some(live) = &live {
                live.call(code_runner_core::caps::Stream::Stderr, text.as_bytes());
            }
        };
        self.engines.ready(lang, wait, &mut tell).await
    }
}

/// The lineage parent of what `caller` starts: the calling runtime when
/// guest code calls, none for a host call.
pub(crate) fn parent_of(caller: &Caller) -> Option<Parent> {
    caller.guest.as_ref().map(|guest| Parent {
        runtime: guest.runtime,
        root: guest.root,
    })
}

/// Every bus function the operations serve, with its id, for the
/// composition root to register.
pub(crate) fn functions(ops: &Arc<Ops>) -> Vec<(&'static str, Function)> {
    let mut all = vec![
        run::function(ops),
        teardown::function(ops),
        info::function(ops),
        register::function(ops),
        describe::function(ops),
        resume::function(ops),
        install::function(ops),
        read_file::function(ops),
        usage::function(ops),
    ];
    all.extend(sessions::functions(ops));
    all.extend(configuration::functions(ops));
    all.push(guidance::function(ops));
    all
}

/// A part of [`Ops`] an operation asks for instead of the whole, as axum's
/// handlers take a substate (`FromRef`): `configuration` sees only the
/// settings, `info` only the bus. What takes all of [`Ops`] (`run`,
/// `register`, `resume`, `teardown`) reaches every part: the runtimes, their
/// lineage, the bus, the namespaces.
pub(crate) trait Slice: Send + 'static {
    /// This slice of `ops`.
    fn of(ops: &Arc<Ops>) -> Self;
}

impl Slice for Arc<Ops> {
    fn of(ops: &Arc<Ops>) -> Self {
        ops.clone()
    }
}

impl Slice for Arc<Settings> {
    fn of(ops: &Arc<Ops>) -> Self {
        ops.settings.clone()
    }
}

impl Slice for Arc<Bus> {
    fn of(ops: &Arc<Ops>) -> Self {
        ops.bus.clone()
    }
}

impl Slice for Arc<Engines> {
    fn of(ops: &Arc<Ops>) -> Self {
        ops.engines.clone()
    }
}

impl<A: Slice, B: Slice> Slice for (A, B) {
    fn of(ops: &Arc<Ops>) -> Self {
        (A::of(ops), B::of(ops))
    }
}

/// What guest code can reach by id: this bus's functions and, once the
/// worker joined an iii engine, the engine's others (`describe`, `iii.fn`).
#[derive(Clone)]
pub(crate) struct Reach {
    pub(crate) bus: Arc<Bus>,
    pub(crate) outbound: Arc<OnceLock<Arc<dyn Outbound>>>,
}

impl Slice for Reach {
    fn of(ops: &Arc<Ops>) -> Self {
        Reach {
            bus: ops.bus.clone(),
            outbound: ops.outbound.clone(),
        }
    }
}

/// A bus handler over the slice `S` of the operations. The bus holds the
/// operations only weakly, so it never keeps the worker alive, and a call
/// holds only its slice.
pub(crate) fn handler<S, F, Fut>(ops: &Arc<Ops>, f: F) -> Handler
where
    S: Slice,
    F: Fn(S, Value) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Value, CallError>> + Send + 'static,
{
    handler_as(ops, move |slice, payload, _caller| f(slice, payload))
}

/// Like [`handler`], for a function that needs to know its [`Caller`].
pub(crate) fn handler_as<S, F, Fut>(ops: &Arc<Ops>, f: F) -> Handler
where
    S: Slice,
    F: Fn(S, Value, Caller) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Value, CallError>> + Send + 'static,
{
    let weak: Weak<Ops> = Arc::downgrade(ops);
    let f = Arc::new(f);
    Arc::new(move |payload: Value, caller: Caller| {
        let (weak, f) = (weak.clone(), f.clone());
        Box::pin(crate::bus::detached::detached(async move {
            let slice = S::of(&weak.upgrade().ok_or_else(shutting_down)?);
            f(slice, payload, caller).await
        }))
    })
}

fn shutting_down() -> CallError {
    RunnerError::engine("the worker is shutting down").into()
}
