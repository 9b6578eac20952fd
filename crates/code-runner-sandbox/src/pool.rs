//! The worker's side of sandbox processes: starting one, its connection,
//! its death and replacement, and placement over several.

use std::collections::{BTreeMap, HashMap};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use code_runner_core::caps::Stream;
use code_runner_core::{BindingCall, BindingError, Bindings, LiveOutput, RunnerError};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::sync::{mpsc, oneshot, watch};

use crate::confine::SOCKET_FD;
use crate::protocol::Report;
use crate::protocol::{
    self, BindingErrorWire, Frame, FromChild, Init, MAX_CHILD_FRAME_BYTES, ToChild,
};

/// How long a sandbox process may take to load its engines and confine itself.
pub const BOOT_TIMEOUT: Duration = Duration::from_secs(120);
/// Bytes of binding-call arguments one sandbox process may have in flight
/// in the worker at once (64 MiB, each call charged at least 64 KiB, so at
/// most 1024 calls); past it a call is refused at once.
pub const MAX_CALL_BYTES_IN_FLIGHT: usize = 64 * 1024 * 1024;

/// The least a binding call is charged against [`MAX_CALL_BYTES_IN_FLIGHT`].
const CALL_FLOOR_BYTES: usize = 64 * 1024;

/// How to start sandbox processes.
#[derive(Debug, Clone)]
pub struct SandboxOptions {
    /// The program to run (the worker's own binary) and its arguments.
    pub program: PathBuf,
    /// Arguments that select the hidden sandbox role.
    pub args: Vec<String>,
    /// The only environment the process gets (artifact paths; no secrets).
    pub env: Vec<(String, String)>,
    /// How many processes to keep.
    pub processes: usize,
    /// What each process is told first.
    pub init: Init,
}

/// A reply a request waits for.
pub(crate) type Waiter = oneshot::Sender<Frame<FromChild>>;

/// What the worker knows of one turn running in a child.
pub(crate) struct TurnContext {
    pub(crate) bindings: Bindings,
    pub(crate) deadline: Instant,
    pub(crate) live: Option<LiveOutput>,
    /// Live bytes still accepted per stream (stdout, stderr).
    pub(crate) live_left: [usize; 2],
    /// Set when the child says the turn's code is about to run; the turn
    /// holds it too, as the connection forgets its turns when the child dies.
    pub(crate) begun: Arc<AtomicBool>,
}

/// One sandbox process and its connection.
pub(crate) struct Conn {
    pub(crate) pid: u32,
    out: mpsc::UnboundedSender<Vec<u8>>,
    pending: Mutex<HashMap<(u8, u64), Waiter>>,
    pub(crate) turns: Mutex<HashMap<u64, TurnContext>>,
    death: watch::Sender<Option<String>>,
    reaped: AtomicBool,
    pub(crate) load: AtomicUsize,
    call_bytes: AtomicUsize,
    report: Mutex<Report>,
    probe: Mutex<Option<BTreeMap<String, String>>>,
    /// The worker's tasks of binding calls not yet answered, by call id
    /// (a `Cancel` frame aborts one).
    running: Mutex<HashMap<u64, tokio::task::AbortHandle>>,
    /// Turns whose caller went away before the child answered: if one is
    /// still unanswered [`crate::KILL_GRACE`] past its deadline, the child is stuck.
    pub(crate) abandoned: Mutex<std::collections::HashSet<u64>>,
}

/// Reply kinds, so ids of different requests never meet.
pub(crate) const SPAWN: u8 = 0;
pub(crate) const TURN: u8 = 1;
pub(crate) const CLOSE: u8 = 2;
pub(crate) const FILES: u8 = 3;

impl Conn {
    pub(crate) fn send(&self, message: ToChild) -> bool {
        self.send_frame(Frame::new(message))
    }

    /// Sends a frame with blobs.
    pub(crate) fn send_frame(&self, frame: Frame<ToChild>) -> bool {
        self.out.send(frame.encode()).is_ok() && !self.is_dead()
    }

    /// Registers a waiter for the reply `(kind, id)`; `None` when the child is dead.
    pub(crate) fn expect(&self, kind: u8, id: u64) -> Option<oneshot::Receiver<Frame<FromChild>>> {
        let (tx, rx) = oneshot::channel();
        let mut pending = lock(&self.pending);
        if self.is_dead() {
            return None;
        }
        pending.insert((kind, id), tx);
        Some(rx)
    }

    pub(crate) fn forget(&self, kind: u8, id: u64) {
        lock(&self.pending).remove(&(kind, id));
    }

    pub(crate) fn is_dead(&self) -> bool {
        self.death.borrow().is_some()
    }

    /// Why the child died, once it has.
    pub(crate) fn death(&self) -> String {
        self.death
            .borrow()
            .clone()
            .unwrap_or_else(|| "sandbox process died".to_string())
    }

    /// Kills the child (SIGKILL) unless it is already reaped.
    pub(crate) fn kill(&self, why: &str) {
        if self.reaped.load(Ordering::SeqCst) {
            return;
        }
        tracing::warn!(pid = self.pid, "killing a sandbox process: {why}");
        kill_pid(self.pid);
    }

    fn died(&self, why: String) {
        self.death.send_replace(Some(why));
        // Dropping the waiters answers every request still open.
        lock(&self.pending).clear();
        lock(&self.turns).clear();
    }
}

/// Starts one sandbox process and waits until it is ready.
pub(crate) async fn start(options: &SandboxOptions) -> Result<(Arc<Conn>, Report), String> {
    let mut fds = [0i32; 2];
    // SAFETY: socketpair writes two descriptors into the array we pass.
    if unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    } != 0
    {
        return Err(format!("socketpair: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: socketpair just made both descriptors and nothing else owns them.
    let (parent, child) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let mut command = std::process::Command::new(&options.program);
    command
        .args(&options.args)
        .env_clear()
        .envs(options.env.iter().map(|(k, v)| (k, v)))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null());
    let child_fd = child.as_raw_fd();
    // SAFETY: between fork and exec only async-signal-safe calls run: dup2 and
    // fcntl on descriptors this process owns (raw syscalls through rustix).
    unsafe {
        command.pre_exec(move || {
            let target = SOCKET_FD;
            if child_fd == target {
                let flags = libc::fcntl(target, libc::F_GETFD);
                libc::fcntl(target, libc::F_SETFD, flags & !libc::FD_CLOEXEC);
            } else if libc::dup2(child_fd, target) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let process = command
        .spawn()
        .map_err(|err| format!("cannot start {}: {err}", options.program.display()))?;
    drop(child);
    let pid = process.id();
    let exited = wait_in_thread(process);
    let stream = std_stream(parent)?;
    let (mut reader, mut writer) = stream.into_split();
    let init = Frame::new(options.init.clone()).encode();
    writer
        .write_all(&init)
        .await
        .map_err(|err| format!("cannot send the init frame: {err}"))?;
    let ready = tokio::time::timeout(
        BOOT_TIMEOUT,
        protocol::read_frame::<FromChild, _>(&mut reader, MAX_CHILD_FRAME_BYTES),
    )
    .await;
    let report = match ready {
        Ok(Ok(Frame {
            header: FromChild::Ready { report },
            ..
        })) => report,
        other => {
            kill_pid(pid);
            let status = exited.await.unwrap_or_default();
            return Err(format!(
                "sandbox process {pid} did not become ready ({status}): {:?}",
                other.map(|r| r.map(|f| f.header)).ok()
            ));
        }
    };
    let (out, mut frames) = mpsc::unbounded_channel::<Vec<u8>>();
    tokio::spawn(async move {
        while let Some(bytes) = frames.recv().await {
            if writer.write_all(&bytes).await.is_err() {
                break;
            }
        }
    });
    let conn = Arc::new(Conn {
        pid,
        out,
        pending: Mutex::default(),
        turns: Mutex::default(),
        death: watch::channel(None).0,
        reaped: AtomicBool::new(false),
        load: AtomicUsize::new(0),
        call_bytes: AtomicUsize::new(0),
        report: Mutex::new(report.clone()),
        probe: Mutex::new(None),
        running: Mutex::default(),
        abandoned: Mutex::default(),
    });
    tokio::spawn(read_loop(conn.clone(), reader, exited));
    Ok((conn, report))
}

fn std_stream(fd: OwnedFd) -> Result<tokio::net::UnixStream, String> {
    let stream = std::os::unix::net::UnixStream::from(fd);
    stream
        .set_nonblocking(true)
        .map_err(|err| format!("socket: {err}"))?;
    tokio::net::UnixStream::from_std(stream).map_err(|err| format!("socket: {err}"))
}

/// Waits for the process on a thread of its own; answers how it ended.
fn wait_in_thread(mut process: std::process::Child) -> oneshot::Receiver<String> {
    let (tx, rx) = oneshot::channel();
    let spawned = std::thread::Builder::new()
        .name("code-runner-sandbox-wait".into())
        .spawn(move || {
            let status = process.wait().map(describe).unwrap_or_default();
            let _ = tx.send(status);
        });
    if spawned.is_err() {
        tracing::error!("cannot start a thread to wait for a sandbox process");
    }
    rx
}

fn kill_pid(pid: u32) {
    if let Ok(pid) = i32::try_from(pid) {
        // SAFETY: kill takes integers; the pid is our unreaped child.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}

fn describe(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.signal(), status.code()) {
        (Some(signal), _) => format!("signal {signal}"),
        (None, Some(code)) => format!("exit status {code}"),
        _ => "unknown status".to_string(),
    }
}

/// Reads the child's frames until it dies or breaks the protocol (then it is killed).
async fn read_loop(
    conn: Arc<Conn>,
    mut reader: tokio::net::unix::OwnedReadHalf,
    exited: oneshot::Receiver<String>,
) {
    loop {
        match protocol::read_frame::<FromChild, _>(&mut reader, MAX_CHILD_FRAME_BYTES).await {
            Ok(frame) => dispatch(&conn, frame),
            Err(protocol::FrameError::Invalid(why)) => {
                conn.kill(&format!("it broke the protocol: {why}"));
                break;
            }
            Err(protocol::FrameError::Closed) => break,
        }
    }
    let mut exited = exited;
    let status = match tokio::time::timeout(Duration::from_secs(5), &mut exited).await {
        Ok(Ok(status)) => status,
        _ => {
            kill_pid(conn.pid);
            let status = exited.await.unwrap_or_default();
            format!("closed its socket, then killed ({status})")
        }
    };
    conn.reaped.store(true, Ordering::SeqCst);
    let why = format!("sandbox process died: {status}");
    tracing::warn!(pid = conn.pid, "{why}");
    conn.died(why);
}

fn dispatch(conn: &Arc<Conn>, frame: Frame<FromChild>) {
    let key = match &frame.header {
        FromChild::Spawned { id, .. } => (SPAWN, *id),
        FromChild::Outcome { turn, .. } => {
            lock(&conn.abandoned).remove(turn);
            (TURN, *turn)
        }
        FromChild::Closed { runtime } => (CLOSE, *runtime),
        FromChild::FilesPut { id, .. } | FromChild::PackagesAdded { id, .. } => (FILES, *id),
        FromChild::Begun { turn } => {
            if let Some(ctx) = lock(&conn.turns).get(turn) {
                ctx.begun.store(true, Ordering::SeqCst);
            }
            return;
        }
        FromChild::Live { turn, stderr } => {
            live(conn, *turn, *stderr, frame.blobs.first());
            return;
        }
        FromChild::Call { .. } => {
            call(conn, frame.header);
            return;
        }
        FromChild::Cancel { call } => {
            if let Some(task) = lock(&conn.running).remove(call) {
                task.abort();
            }
            return;
        }
        FromChild::Ready { report } => {
            *lock(&conn.report) = report.clone();
            return;
        }
        FromChild::Probe { results } => {
            *lock(&conn.probe) = Some(results.clone());
            return;
        }
    };
    if let Some(waiter) = lock(&conn.pending).remove(&key) {
        let _ = waiter.send(frame);
    }
}

/// Output as it is written, handed on within the turn's stream budget.
fn live(conn: &Conn, turn: u64, stderr: bool, bytes: Option<&Vec<u8>>) {
    let Some(bytes) = bytes else { return };
    let mut turns = lock(&conn.turns);
    let Some(ctx) = turns.get_mut(&turn) else {
        return;
    };
    let Some(tap) = ctx.live.clone() else { return };
    let left = &mut ctx.live_left[usize::from(stderr)];
    let take = bytes.len().min(*left);
    *left -= take;
    drop(turns);
    if take > 0 {
        let stream = if stderr {
            Stream::Stderr
        } else {
            Stream::Stdout
        };
        tap.call(stream, &bytes[..take]);
    }
}

/// A binding call from guest code: only a turn of this child, only a
/// function its bindings hold, within the turn's deadline and the child's
/// byte budget.
fn call(conn: &Arc<Conn>, message: FromChild) {
    let FromChild::Call {
        call,
        turn,
        global,
        member,
        args,
        remaining_ms,
    } = message
    else {
        return;
    };
    let reply = move |conn: &Conn, answer: Result<Value, BindingError>| {
        conn.send(ToChild::Reply {
            call,
            answer: answer.map_err(BindingErrorWire::from),
        });
    };
    let found = lock(&conn.turns).get(&turn).map(|ctx| {
        (
            ctx.bindings.lookup(&global, &member).cloned(),
            ctx.bindings.clock().deadline(ctx.deadline),
        )
    });
    let (function, deadline) = match found {
        Some((Some(function), deadline)) => (function, deadline),
        Some((None, _)) => {
            return reply(
                conn,
                Err(BindingError::message(format!(
                    "no binding {global}.{member}"
                ))),
            );
        }
        None => return reply(conn, Err(BindingError::message("the turn has ended"))),
    };
    // Each call is charged at least CALL_FLOOR_BYTES, so the budget bounds
    // how many are in flight too (1024), not only their size.
    let bytes = (code_runner_core::caps::serialized_len(&args) as usize).max(CALL_FLOOR_BYTES);
    if conn.call_bytes.fetch_add(bytes, Ordering::SeqCst) + bytes > MAX_CALL_BYTES_IN_FLIGHT {
        conn.call_bytes.fetch_sub(bytes, Ordering::SeqCst);
        return reply(
            conn,
            Err(BindingError::message("too many binding calls in flight")),
        );
    }
    let deadline = deadline.min(Instant::now() + Duration::from_millis(remaining_ms));
    let held = Charge {
        conn: conn.clone(),
        call,
        bytes,
    };
    let mut running = lock(&conn.running);
    let task = tokio::spawn(async move {
        let answer = function(args, BindingCall { deadline }).await;
        reply(&held.conn, answer);
    });
    running.insert(call, task.abort_handle());
}

/// A binding call's share of the child's budget, and its place among the
/// running calls: both given back when its task ends, answered or aborted.
struct Charge {
    conn: Arc<Conn>,
    call: u64,
    bytes: usize,
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.conn.call_bytes.fetch_sub(self.bytes, Ordering::SeqCst);
        lock(&self.conn.running).remove(&self.call);
    }
}

/// One place in the pool: its current process, replaced when it dies.
struct Place {
    current: watch::Sender<Option<Arc<Conn>>>,
}

/// The sandbox processes: placement and replacement.
pub struct Pool {
    places: Vec<Place>,
    options: SandboxOptions,
    next_id: AtomicU64,
    replaced: AtomicU64,
    last_replacement_ms: AtomicU64,
    started: Mutex<Option<Report>>,
    failure: Mutex<Option<String>>,
}

impl Pool {
    /// Starts `options.processes` sandbox processes (at least one) and keeps
    /// them: each is replaced when it dies. Waits until every first
    /// process is ready or failed.
    pub async fn start(options: SandboxOptions) -> Arc<Pool> {
        let count = options.processes.max(1);
        let pool = Arc::new(Pool {
            places: (0..count)
                .map(|_| Place {
                    current: watch::channel(None).0,
                })
                .collect(),
            options,
            next_id: AtomicU64::new(1),
            replaced: AtomicU64::new(0),
            last_replacement_ms: AtomicU64::new(0),
            started: Mutex::new(None),
            failure: Mutex::new(None),
        });
        let mut firsts = Vec::with_capacity(count);
        for index in 0..count {
            let (tx, rx) = oneshot::channel();
            firsts.push(rx);
            tokio::spawn(Pool::keep(Arc::downgrade(&pool), index, tx));
        }
        for first in firsts {
            let _ = first.await;
        }
        pool
    }

    /// Keeps place `index` filled: starts its process, and the next one
    /// whenever it dies, for as long as the pool lives (holding it only
    /// weakly while it waits).
    async fn keep(pool: std::sync::Weak<Pool>, index: usize, first: oneshot::Sender<()>) {
        let mut first = Some(first);
        let mut replacement = false;
        loop {
            let Some(strong) = pool.upgrade() else { return };
            let begun = Instant::now();
            let started = start(&strong.options).await;
            let mut death = match started {
                Ok((conn, report)) => {
                    strong.started_one(&conn, report, replacement, begun);
                    let death = conn.death.subscribe();
                    strong.places[index].current.send_replace(Some(conn));
                    Some(death)
                }
                Err(why) => {
                    tracing::error!("a sandbox process did not start: {why}");
                    *lock(&strong.failure) = Some(why);
                    None
                }
            };
            drop(strong);
            if let Some(first) = first.take() {
                let _ = first.send(());
            }
            match &mut death {
                Some(death) => {
                    let _ = death.wait_for(|d| d.is_some()).await;
                    replacement = true;
                }
                None => tokio::time::sleep(Duration::from_secs(1)).await,
            }
        }
    }

    fn started_one(&self, conn: &Conn, report: Report, replacement: bool, begun: Instant) {
        if replacement {
            let ms = u64::try_from(begun.elapsed().as_millis()).unwrap_or(u64::MAX);
            self.replaced.fetch_add(1, Ordering::SeqCst);
            self.last_replacement_ms.store(ms, Ordering::SeqCst);
            tracing::info!(
                pid = conn.pid,
                "a sandbox process replaced a dead one in {ms} ms"
            );
            return;
        }
        let mut started = lock(&self.started);
        if started.is_none() {
            for (layer, why) in &report.not_applied {
                tracing::warn!("sandbox confinement: {layer} not applied: {why}");
            }
            tracing::info!(layers = ?report.applied.keys().collect::<Vec<_>>(), "sandbox processes confined");
            *started = Some(report);
        }
    }

    /// Why no process started, if none did.
    pub fn failure(&self) -> Option<String> {
        match self.live().is_empty() {
            true => Some(
                lock(&self.failure)
                    .clone()
                    .unwrap_or_else(|| "no sandbox process is running".to_string()),
            ),
            false => None,
        }
    }

    fn live(&self) -> Vec<Arc<Conn>> {
        self.places
            .iter()
            .filter_map(|place| place.current.borrow().clone())
            .filter(|conn| !conn.is_dead())
            .collect()
    }

    /// The least loaded live process; waits a little for a replacement when none is live.
    pub(crate) async fn place(&self) -> Result<Arc<Conn>, RunnerError> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(conn) = self
                .live()
                .into_iter()
                .min_by_key(|conn| conn.load.load(Ordering::SeqCst))
            {
                return Ok(conn);
            }
            if Instant::now() > deadline {
                return Err(RunnerError::engine(
                    self.failure()
                        .unwrap_or_else(|| "no sandbox process is available".to_string()),
                ));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    pub(crate) fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Test role: what a process started with `Init::probe` answered to
    /// each forbidden attempt, once it has reported.
    pub fn probe_results(&self) -> Option<BTreeMap<String, String>> {
        self.live()
            .iter()
            .find_map(|conn| lock(&conn.probe).clone())
    }

    /// The pids of the live sandbox processes.
    pub fn pids(&self) -> Vec<u32> {
        self.live().iter().map(|conn| conn.pid).collect()
    }

    /// The processes, their load and confinement, for `/healthz`.
    pub fn health(&self) -> Value {
        let processes: Vec<Value> = self
            .live()
            .iter()
            .map(|conn| json!({ "pid": conn.pid, "runtimes": conn.load.load(Ordering::SeqCst) }))
            .collect();
        let report = lock(&self.started).clone().unwrap_or_default();
        json!({
            "mode": "process",
            "processes": processes,
            "replaced": self.replaced.load(Ordering::SeqCst),
            "last_replacement_ms": self.last_replacement_ms.load(Ordering::SeqCst),
            "confinement": { "applied": report.applied, "not_applied": report.not_applied },
        })
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        for conn in self.live() {
            conn.kill("the worker is shutting down");
        }
    }
}

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
