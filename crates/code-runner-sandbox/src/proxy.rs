//! The engine seam over the socket: [`SandboxEngine`] and its runtimes.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use code_runner_core::caps::{Stream, StreamBuffer, UNCAPPED_STREAM_CEILING};
use code_runner_core::{
    BoxFuture, Engine, Fault, Lang, RunnerError, Runtime, RuntimeOptions, TurnEnding, TurnImages,
    TurnOutcome, TurnSpec, TurnUsage,
};

use crate::pool::{CLOSE, Conn, FILES, Pool, SPAWN, TURN, TurnContext, lock};
use crate::protocol::{Frame, FromChild, NamespaceWire, OutcomeWire, ToChild};

/// How long past its deadline a turn may go unanswered before its sandbox
/// process is presumed stuck and killed (with every runtime it holds). Longer
/// than the worker's own bound (2 s), which answers and lets go of the
/// runtime first; this one frees the process.
pub const KILL_GRACE: Duration = Duration::from_secs(5);

/// An [`Engine`] whose runtimes live in sandbox processes.
pub struct SandboxEngine {
    lang: Lang,
    pool: Arc<Pool>,
}

impl SandboxEngine {
    /// The engine of `lang` over `pool`.
    pub fn new(lang: Lang, pool: Arc<Pool>) -> Self {
        SandboxEngine { lang, pool }
    }
}

impl Engine for SandboxEngine {
    fn lang(&self) -> Lang {
        self.lang
    }

    fn spawn(
        &self,
        options: RuntimeOptions,
    ) -> BoxFuture<'_, Result<Arc<dyn Runtime>, RunnerError>> {
        Box::pin(async move {
            // A spawn answered by its process's death never made a runtime:
            // it goes to another process (the pool replaces the dead one),
            // so a runtime asked for just as a process dies is not lost.
            let mut attempt = 0;
            loop {
                attempt += 1;
                match self.spawn_once(options.clone()).await {
                    Err(Spawn::Died(why)) if attempt < MAX_SPAWN_ATTEMPTS => {
                        tracing::debug!(
                            attempt,
                            "a sandbox process died before it spawned a runtime ({why}); another one spawns it"
                        );
                    }
                    Err(Spawn::Died(why)) => return Err(RunnerError::engine(why)),
                    Err(Spawn::Refused(err)) => return Err(err),
                    Ok(runtime) => return Ok(runtime),
                }
            }
        })
    }
}

/// Processes a spawn is tried in before its refusal stands.
const MAX_SPAWN_ATTEMPTS: usize = 4;

/// Why a spawn made no runtime.
enum Spawn {
    /// The process died before it answered (nothing was made there).
    Died(String),
    /// The process, or the pool, answered with an error.
    Refused(RunnerError),
}

impl SandboxEngine {
    async fn spawn_once(&self, options: RuntimeOptions) -> Result<Arc<dyn Runtime>, Spawn> {
        let conn = self.pool.place().await.map_err(Spawn::Refused)?;
        let id = self.pool.next_id();
        conn.load.fetch_add(1, Ordering::SeqCst);
        let runtime = SandboxRuntime {
            lang: self.lang,
            conn: conn.clone(),
            handle: id,
            pool: self.pool.clone(),
            closed: AtomicBool::new(false),
        };
        let Some(reply) = conn.expect(SPAWN, id) else {
            runtime.release();
            return Err(Spawn::Died(conn.death()));
        };
        conn.send(ToChild::Spawn {
            id,
            lang: self.lang,
            options,
        });
        match reply.await {
            Ok(Frame {
                header: FromChild::Spawned { error: None, .. },
                ..
            }) => Ok(Arc::new(runtime) as Arc<dyn Runtime>),
            Ok(Frame {
                header:
                    FromChild::Spawned {
                        error: Some(err), ..
                    },
                ..
            }) => {
                runtime.release();
                Err(Spawn::Refused(err.into()))
            }
            _ => {
                runtime.release();
                Err(Spawn::Died(conn.death()))
            }
        }
    }
}

/// A runtime in a sandbox process, pinned to it for its life.
pub struct SandboxRuntime {
    lang: Lang,
    conn: Arc<Conn>,
    handle: u64,
    pool: Arc<Pool>,
    closed: AtomicBool,
}

impl SandboxRuntime {
    /// The pid of the process that holds it.
    pub fn pid(&self) -> u32 {
        self.conn.pid
    }

    fn release(&self) {
        if !self.closed.swap(true, Ordering::SeqCst) {
            self.conn.load.fetch_sub(1, Ordering::SeqCst);
        }
    }

    async fn turn(&self, spec: TurnSpec, images: bool) -> (TurnOutcome, TurnImages) {
        let cap = spec.max_stream_bytes;
        let conn = &self.conn;
        if self.closed.load(Ordering::SeqCst) {
            return (faulted(cap, Fault::Aborted), TurnImages::default());
        }
        let turn = self.pool.next_id();
        let Some(reply) = conn.expect(TURN, turn) else {
            return (
                faulted(cap, Fault::NotStarted(conn.death())),
                TurnImages::default(),
            );
        };
        let begun = Arc::new(AtomicBool::new(false));
        let deadline = Instant::now() + spec.timeout;
        let budget = cap.unwrap_or(UNCAPPED_STREAM_CEILING);
        let bindings: Vec<NamespaceWire> = spec
            .bindings
            .namespaces()
            .iter()
            .map(|ns| NamespaceWire {
                global: ns.global.clone(),
                functions: ns.functions.keys().cloned().collect(),
                registrars: ns.registrars.iter().cloned().collect(),
                paths: ns.paths.iter().cloned().collect(),
                values: ns.values.clone(),
                error_class: ns
                    .error_class
                    .as_ref()
                    .map(|c| (c.name.clone(), c.member_name_property.clone())),
            })
            .collect();
        lock(&conn.turns).insert(
            turn,
            TurnContext {
                bindings: spec.bindings.clone(),
                deadline,
                live: spec.live.clone(),
                live_left: [budget, budget],
                begun: begun.clone(),
            },
        );
        let ending = EndGuard {
            conn: conn.clone(),
            turn,
            deadline,
            answered: false,
        };
        let clock = spec.bindings.clock().clone();
        {
            let conn = Arc::downgrade(conn);
            clock.on_change(move |paused| {
                if let Some(conn) = conn.upgrade() {
                    conn.send(ToChild::Clock { turn, paused });
                }
            });
        }
        conn.send(ToChild::Run {
            turn,
            runtime: self.handle,
            task: spec.task.into(),
            timeout_ms: u64::try_from(spec.timeout.as_millis()).unwrap_or(u64::MAX),
            max_stream_bytes: cap,
            bindings,
            live: spec.live.is_some(),
            images,
        });
        let mut reply = std::pin::pin!(reply);
        let mut tick = tokio::time::interval(Duration::from_millis(5));
        let (mut abort_sent, mut killed) = (false, false);
        let answer = loop {
            tokio::select! {
                answer = &mut reply => break answer,
                _ = tick.tick() => {
                    if !abort_sent && spec.abort.is_aborted() {
                        abort_sent = true;
                        conn.send(ToChild::Abort { turn });
                    }
                    if !killed && clock.past(deadline + KILL_GRACE, Instant::now()) {
                        killed = true;
                        conn.kill("a turn went unanswered past its deadline");
                    }
                }
            }
        };
        let mut ending = ending;
        ending.answered = true;
        match answer {
            Ok(Frame {
                header: FromChild::Outcome { outcome, .. },
                blobs,
            }) => rebuild(cap, outcome, blobs),
            // The child died. Its frames before its death were all read
            // first, so without `Begun` the code never ran.
            _ if !begun.load(Ordering::SeqCst) => (
                faulted(cap, Fault::NotStarted(conn.death())),
                TurnImages::default(),
            ),
            _ => (
                faulted(cap, Fault::Crashed(conn.death())),
                TurnImages::default(),
            ),
        }
    }
}

/// Forgets a turn when its future ends. A turn that ended unanswered (the
/// caller, or the worker's own bound, went away) is stopped in the child,
/// and if the child still has not answered it [`KILL_GRACE`] past its
/// deadline, the child is presumed stuck and killed.
struct EndGuard {
    conn: Arc<Conn>,
    turn: u64,
    deadline: Instant,
    answered: bool,
}

impl Drop for EndGuard {
    fn drop(&mut self) {
        lock(&self.conn.turns).remove(&self.turn);
        if self.answered {
            return;
        }
        self.conn.forget(TURN, self.turn);
        lock(&self.conn.abandoned).insert(self.turn);
        self.conn.send(ToChild::Abort { turn: self.turn });
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (conn, turn) = (self.conn.clone(), self.turn);
        let until = tokio::time::Instant::from_std(self.deadline + KILL_GRACE);
        runtime.spawn(async move {
            tokio::time::sleep_until(until).await;
            if lock(&conn.abandoned).remove(&turn) && !conn.is_dead() {
                conn.kill("a turn went unanswered past its deadline");
            }
        });
    }
}

/// The outcome the child reported, its streams rebuilt within this turn's cap.
fn rebuild(
    cap: Option<usize>,
    outcome: OutcomeWire,
    blobs: Vec<Vec<u8>>,
) -> (TurnOutcome, TurnImages) {
    let mut blobs = blobs.into_iter();
    let mut next = || blobs.next().unwrap_or_default();
    let (out_head, out_tail, err_head, err_tail) = (next(), next(), next(), next());
    (
        TurnOutcome {
            stdout: StreamBuffer::from_parts(
                Stream::Stdout,
                cap,
                out_head,
                out_tail,
                outcome.stdout_total,
            ),
            stderr: StreamBuffer::from_parts(
                Stream::Stderr,
                cap,
                err_head,
                err_tail,
                outcome.stderr_total,
            ),
            ending: outcome.ending.into(),
            denied: outcome.denied,
            usage: TurnUsage {
                cpu_ns: outcome.cpu_ns,
                peak_memory_bytes: outcome.peak_memory_bytes,
            },
            interpreter_reset: outcome.interpreter_reset,
            went_back: false,
        },
        TurnImages {
            images: outcome
                .images
                .into_iter()
                .map(|(mime_type, data)| code_runner_core::Image { mime_type, data })
                .collect(),
            omitted: outcome.images_omitted,
        },
    )
}

fn faulted(cap: Option<usize>, fault: Fault) -> TurnOutcome {
    TurnOutcome {
        stdout: StreamBuffer::new(Stream::Stdout, cap),
        stderr: StreamBuffer::new(Stream::Stderr, cap),
        ending: TurnEnding::Faulted(fault),
        denied: false,
        usage: TurnUsage::default(),
        interpreter_reset: false,
        went_back: false,
    }
}

impl Runtime for SandboxRuntime {
    fn lang(&self) -> Lang {
        self.lang
    }

    fn run(&self, turn: TurnSpec) -> BoxFuture<'_, TurnOutcome> {
        Box::pin(async move { self.turn(turn, false).await.0 })
    }

    fn run_with_images(&self, turn: TurnSpec) -> BoxFuture<'_, (TurnOutcome, TurnImages)> {
        Box::pin(self.turn(turn, true))
    }

    fn is_gone(&self) -> bool {
        self.conn.is_dead()
    }

    /// One `PutFiles` frame: the paths in its header, the contents as blobs
    /// (never JSON arrays), within the worker's frame bound.
    fn put_files(
        &self,
        files: Vec<code_runner_core::files::InputFile>,
    ) -> BoxFuture<'_, Result<(), RunnerError>> {
        Box::pin(async move {
            if files.is_empty() {
                return Ok(());
            }
            let gone = |why: String| {
                RunnerError::new(
                    code_runner_core::ErrorCode::Expired,
                    format!("the runtime ended before its files were written ({why})"),
                )
            };
            if self.closed.load(Ordering::SeqCst) {
                return Err(gone("closed".into()));
            }
            let id = self.pool.next_id();
            let Some(reply) = self.conn.expect(FILES, id) else {
                return Err(gone(self.conn.death()));
            };
            let (paths, blobs) = files.into_iter().map(|f| (f.path, f.bytes)).unzip();
            let frame = Frame {
                header: ToChild::PutFiles {
                    id,
                    runtime: self.handle,
                    paths,
                },
                blobs,
            };
            if !self.conn.send_frame(frame) {
                self.conn.forget(FILES, id);
                return Err(gone(self.conn.death()));
            }
            let _forget = ForgetOnDrop(&self.conn, id);
            match reply.await {
                Ok(Frame {
                    header: FromChild::FilesPut { error: None, .. },
                    ..
                }) => Ok(()),
                Ok(Frame {
                    header:
                        FromChild::FilesPut {
                            error: Some(err), ..
                        },
                    ..
                }) => Err(err.into()),
                _ => Err(gone(self.conn.death())),
            }
        })
    }

    /// One `AddPackages` frame: the child reads the install from the cache.
    fn add_packages(
        &self,
        dir: std::path::PathBuf,
    ) -> BoxFuture<'_, Result<Vec<String>, RunnerError>> {
        Box::pin(async move {
            let gone = |why: String| {
                RunnerError::new(
                    code_runner_core::ErrorCode::Expired,
                    format!("the runtime ended before its packages were added ({why})"),
                )
            };
            if self.closed.load(Ordering::SeqCst) {
                return Err(gone("closed".into()));
            }
            let id = self.pool.next_id();
            let Some(reply) = self.conn.expect(FILES, id) else {
                return Err(gone(self.conn.death()));
            };
            let message = ToChild::AddPackages {
                id,
                runtime: self.handle,
                dir,
            };
            if !self.conn.send(message) {
                self.conn.forget(FILES, id);
                return Err(gone(self.conn.death()));
            }
            let _forget = ForgetOnDrop(&self.conn, id);
            match reply.await {
                Ok(Frame {
                    header: FromChild::PackagesAdded { added, .. },
                    ..
                }) => added.map_err(Into::into),
                _ => Err(gone(self.conn.death())),
            }
        })
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            if self.closed.load(Ordering::SeqCst) {
                return;
            }
            // A node runtime holds no slot of the child's own (python's
            // pooling allocator does): its close goes on in the child while
            // the caller answers, which saves a one-shot run a round trip.
            if self.lang.on_node_engine() {
                self.conn.send(ToChild::Close {
                    runtime: self.handle,
                });
                self.release();
                return;
            }
            if let Some(reply) = self.conn.expect(CLOSE, self.handle)
                && self.conn.send(ToChild::Close {
                    runtime: self.handle,
                })
            {
                let _ = reply.await;
            }
            self.release();
        })
    }
}

/// Forgets a files request's waiter when its caller stops waiting.
struct ForgetOnDrop<'a>(&'a Conn, u64);

impl Drop for ForgetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.forget(FILES, self.1);
    }
}

impl Drop for SandboxRuntime {
    fn drop(&mut self) {
        if !self.closed.load(Ordering::SeqCst) {
            self.conn.send(ToChild::Close {
                runtime: self.handle,
            });
            self.release();
        }
    }
}
