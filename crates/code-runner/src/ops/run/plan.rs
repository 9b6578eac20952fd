//! What a run's turn is made of, fixed when the run is admitted: its code,
//! the signal it hangs under (the calling turn's, the caller's cancel, or
//! its own), where its output goes while written, who approves its gated
//! calls, and what its requests cost.

use std::sync::{Arc, Weak};
use std::time::Duration;

use code_runner_core::{AbortSignal, Config, LiveOutput, Task, TurnClock, TurnSpec};

use crate::bus::Caller;
use crate::ops::Ops;
use crate::ops::approvals::suspended::Progress;
use crate::ops::approvals::{self, Approver, Gate};
use crate::ops::egress::TurnEgress;
use crate::ops::guest::{self, GuestContext};

/// A run's turn, ready to be made for a runtime.
pub(super) struct Plan {
    code: String,
    /// The signal each attempt's own hangs under, if any.
    parent: Option<AbortSignal>,
    output: Option<LiveOutput>,
    approver: Approver,
    egress: Arc<TurnEgress>,
    max_stream_bytes: Option<usize>,
    ops: Weak<Ops>,
}

impl Plan {
    /// The plan of a run `caller` asked for. Only a host's run can wait for
    /// a person: a run guest code started has no gate of its own, so its
    /// code never holds a suspension (and a `runtime_id` + `call_id`) it
    /// could resume itself.
    pub(super) fn new(
        ops: &Arc<Ops>,
        caller: &Caller,
        code: String,
        config: &Config,
        egress: Arc<TurnEgress>,
        gate: Arc<Gate>,
        progress: Option<&Arc<Progress>>,
    ) -> Plan {
        let parent = match (&caller.guest, &caller.cancel) {
            (Some(guest), _) => Some(guest.scope.clone()),
            (None, Some(cancel)) => Some(cancel.clone()),
            (None, None) => None,
        };
        let output = match progress {
            Some(progress) => Some(progress.tee(caller.live.clone())),
            None => caller.live.clone(),
        };
        let approver = match &caller.guest {
            None => Approver::Run(gate),
            Some(_) => Approver::Nobody(approvals::GUEST_STARTED),
        };
        Plan {
            code,
            parent,
            output,
            approver,
            egress,
            max_stream_bytes: config.output_caps().max_stream_bytes,
            ops: Arc::downgrade(ops),
        }
    }

    /// One attempt's turn in `context`, within `timeout`. Its signal is its
    /// scope: the bounded runtime fires it when the turn answers, which ends
    /// the runs its guest code started.
    pub(super) fn turn(&self, context: GuestContext, timeout: Duration) -> TurnSpec {
        let scope = match &self.parent {
            Some(parent) => parent.child(),
            None => AbortSignal::new(),
        };
        let bindings = context
            .within(scope.clone())
            .metered(self.egress.clone())
            .gated(self.approver.clone(), TurnClock::new());
        TurnSpec {
            live: self.output.clone(),
            task: Task::Program(self.code.clone()),
            timeout,
            bindings: guest::bindings(self.ops.clone(), bindings).bindings,
            max_stream_bytes: self.max_stream_bytes,
            abort: scope,
        }
    }
}
