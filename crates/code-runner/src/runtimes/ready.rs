//! An engine loaded in the background: whether it is ready, and waiting
//! for it, bounded. The worker answers from its first moment (an MCP
//! host's `initialize`, a node run) while python's data image is still
//! being made; a run of a language not ready yet waits a little, told what
//! is being prepared, then is answered `capacity` with what is left.

use std::sync::Arc;
use std::time::{Duration, Instant};

use code_runner_core::{Engine, ErrorCode, Lang, RunnerError};
use tokio::sync::watch;

/// Where one engine stands.
#[derive(Clone)]
pub(crate) enum State {
    /// Being loaded (or not asked for yet, when loaded on first use), since then.
    Preparing(Instant),
    /// Loaded.
    Ready(Arc<dyn Engine>),
    /// It cannot be loaded: why.
    Unavailable(String),
}

/// One engine's state, shared by the loader and everyone who waits.
pub(crate) struct Cell {
    state: watch::Sender<State>,
}

impl Default for Cell {
    fn default() -> Self {
        Cell {
            state: watch::Sender::new(State::Preparing(Instant::now())),
        }
    }
}

/// How often a waiting caller is told what is being prepared.
const TELL_EVERY: Duration = Duration::from_secs(5);

impl Cell {
    /// The engine is loaded (or failed to load).
    pub(crate) fn set(&self, loaded: Result<Arc<dyn Engine>, String>) {
        self.state.send_replace(match loaded {
            Ok(engine) => State::Ready(engine),
            Err(why) => State::Unavailable(why),
        });
    }

    /// Where it stands now.
    pub(crate) fn now(&self) -> State {
        self.state.borrow().clone()
    }

    /// Resolves once it is ready or unavailable.
    pub(crate) async fn settled(&self) {
        let mut changes = self.state.subscribe();
        let _ = changes
            .wait_for(|state| !matches!(state, State::Preparing(_)))
            .await;
    }

    /// The engine, once ready: waits at most `wait` for it, calling `tell`
    /// with what is being prepared every few seconds meanwhile.
    ///
    /// # Errors
    /// `code-runner::engine` when it cannot be loaded; `code-runner::capacity`
    /// when it is still being prepared after `wait` (the message says what,
    /// for how long, and to retry).
    pub(crate) async fn ready(
        &self,
        lang: Lang,
        wait: Duration,
        tell: &mut (dyn FnMut(String) + Send),
    ) -> Result<Arc<dyn Engine>, RunnerError> {
        let mut changes = self.state.subscribe();
        let until = tokio::time::Instant::now() + wait;
        loop {
            let since = match changes.borrow_and_update().clone() {
                State::Ready(engine) => return Ok(engine),
                State::Unavailable(why) => return Err(RunnerError::engine(why)),
                State::Preparing(since) => since,
            };
            let left = until.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                return Err(RunnerError::new(
                    ErrorCode::Capacity,
                    format!(
                        "{} retry in a little while (GET /healthz says when it is ready)",
                        preparing(lang, since)
                    ),
                ));
            }
            tokio::select! {
                changed = changes.changed() => {
                    if changed.is_err() {
                        return Err(RunnerError::engine(format!("the {lang} engine's loader ended")));
                    }
                }
                () = tokio::time::sleep(left.min(TELL_EVERY)) => {
                    if !left.is_zero() {
                        tell(format!("[code-runner] {}\n", preparing(lang, since)));
                    }
                }
            }
        }
    }
}

/// What is being prepared for `lang`, and for how long.
pub(crate) fn preparing(lang: Lang, since: Instant) -> String {
    let elapsed = since.elapsed().as_secs();
    match (lang, code_runner_python::progress::step()) {
        (Lang::Python, Some((step, for_how_long))) => format!(
            "python is not ready yet: {step} ({} s so far; {elapsed} s since the worker started, and once per machine and python_packages list this takes one to four minutes on two cores);",
            for_how_long.as_secs()
        ),
        _ => format!("{lang} is not ready yet: its engine is loading ({elapsed} s so far);"),
    }
}
