//! Faults of time: loops, sleeps, promises nothing settles and calls that
//! never answer are stopped by the run's timeout, which a request cannot
//! raise past `max_timeout_ms`.

use super::{Case, Code, Expect, ON_TIME};
use crate::helpers::TIMEOUT;

fault_matrix! {
    /// A busy loop never yields to the host: the epoch deadline must stop it.
    busy_loop_is_stopped_by_its_timeout => Case {
        python: Code::Src("while True: pass"),
        node: Some(Code::Src("while (true) {}")),
        timeout_ms: Some(300),
        expect: Expect::Error(TIMEOUT, "300 ms"),
        within: ON_TIME,
        ..Case::DEFAULT
    };

    /// A guest parked in a host sleep is invisible to epochs: the host sleep itself must stop.
    sleep_is_stopped_by_its_timeout => Case {
        python: Code::Src("import time\ntime.sleep(60)"),
        node: Some(Code::Src("await new Promise((r) => setTimeout(r, 60000))")),
        timeout_ms: Some(300),
        expect: Expect::Error(TIMEOUT, "300 ms"),
        within: ON_TIME,
        ..Case::DEFAULT
    };

    /// A request cannot buy more time than `max_timeout_ms`: 60000 is clamped to 500.
    timeout_above_the_maximum_is_clamped => Case {
        python: Code::Src("import time\ntime.sleep(60)"),
        node: Some(Code::Src("await new Promise((r) => setTimeout(r, 60000))")),
        config: "max_timeout_ms: 500\ndefault_timeout_ms: 500\n",
        timeout_ms: Some(60_000),
        expect: Expect::Error(TIMEOUT, "500 ms"),
        within: ON_TIME,
        ..Case::DEFAULT
    };

    /// A turn awaiting a promise nothing will ever settle is idle, not busy:
    /// its own thread ends it at the deadline (python has no such state; its
    /// column is the equivalent host-blocking read).
    idle_never_settling_promise_is_stopped_by_its_timeout => Case {
        python: Code::Src("import time\ntime.sleep(60)"),
        node: Some(Code::Src("await new Promise(() => {})")),
        timeout_ms: Some(300),
        expect: Expect::Error(TIMEOUT, "300 ms"),
        within: ON_TIME,
        ..Case::DEFAULT
    };

    /// An `iii.trigger` whose callee would take 60 s is bounded by the
    /// caller's own 500 ms budget.
    trigger_that_never_answers_is_bounded_by_the_run_timeout => Case {
        python: Code::Src(include_str!("../../fixtures/trigger_never_answers.py")),
        node: Some(Code::Src(include_str!("../../fixtures/trigger_never_answers.js"))),
        timeout_ms: Some(500),
        expect: Expect::Error(TIMEOUT, "500 ms"),
        within: ON_TIME,
        ..Case::DEFAULT
    };
}
