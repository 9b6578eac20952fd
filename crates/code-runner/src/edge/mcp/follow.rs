//! What one MCP session knows of its tools: the runtimes its runs kept
//! (their guest code's functions are its tools), and the one follower that
//! tells it `notifications/tools/list_changed`.
//!
//! A session has one follower at most, started when it is initialized; a
//! stateless request has none. The follower sleeps until the bus's listing
//! changes (a function registered again as it was changes nothing) or the
//! session gains a runtime, then compares the names it sees in the shared
//! listing ([`crate::bus::Bus::listing`]: built once per change, whoever
//! asks first) and ends when its session's transport is closed.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::{Peer, RoleServer};
use serde_json::Value;

use super::tools;
use crate::edge::api::Api;
use crate::ids::RuntimeKey;

/// How long the tool list must be still before a change is announced.
const SETTLE: Duration = Duration::from_millis(50);

/// How often an idle follower looks whether its session is gone.
const CLOSED_POLL: Duration = Duration::from_secs(5);

/// Most kept runtimes a session remembers as its own; the oldest is
/// forgotten first.
const MAX_OWN_ROOTS: usize = 256;

/// Followers alive in this process.
static FOLLOWERS: AtomicUsize = AtomicUsize::new(0);

/// How many MCP sessions follow the bus for tool-list changes now, over
/// every transport (one per initialized session at most): `/healthz` shows it.
pub fn followers() -> usize {
    FOLLOWERS.load(Ordering::SeqCst)
}

/// Counts one follower while it lives.
struct Counted;

impl Counted {
    fn new() -> Counted {
        FOLLOWERS.fetch_add(1, Ordering::SeqCst);
        Counted
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        FOLLOWERS.fetch_sub(1, Ordering::SeqCst);
    }
}

/// One session's own runtimes, and whether it is followed already.
#[derive(Default)]
pub(super) struct Own {
    following: AtomicBool,
    /// The lineage roots of the kept runtimes its `run` calls answered with.
    roots: Mutex<VecDeque<RuntimeKey>>,
    /// Fires when `roots` gains one, so the follower looks again.
    grew: tokio::sync::Notify,
}

impl Own {
    /// The session's runtimes' roots.
    pub fn roots(&self) -> Vec<RuntimeKey> {
        self.lock().iter().copied().collect()
    }

    /// Remembers the kept runtime a `run` answered with as the session's.
    pub fn remember<A: Api>(&self, api: &A, answer: &Value) {
        let Some(root) = answer
            .get("runtime_id")
            .and_then(Value::as_str)
            .and_then(|id| api.runtime_root(id))
        else {
            return;
        };
        let mut roots = self.lock();
        if roots.contains(&root) {
            return;
        }
        if roots.len() >= MAX_OWN_ROOTS {
            roots.pop_front();
        }
        roots.push_back(root);
        drop(roots);
        self.grew.notify_one();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<RuntimeKey>> {
        self.roots.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Who the session is as a viewer of guest-published tools.
pub(super) fn viewer<'a, A: Api>(api: &A, roots: &'a [RuntimeKey]) -> tools::Viewer<'a> {
    tools::Viewer {
        every_guest: api.config().mcp_guest_tools,
        roots,
    }
}

/// Tells `peer` whenever the published tools its session sees change, until
/// it goes away. Returns once the names it starts from are known (so no
/// change after that is missed); a second call for a session does nothing.
pub(super) async fn follow<A: Api>(api: &A, own: &Arc<Own>, peer: Peer<RoleServer>) {
    if own.following.swap(true, Ordering::SeqCst) {
        return;
    }
    let counted = Counted::new();
    let mut changes = api.changes();
    changes.borrow_and_update();
    let mut known = visible_names(api, own).await;
    let (api, own) = (api.clone(), own.clone());
    tokio::spawn(async move {
        let _counted = counted;
        loop {
            let woke = tokio::select! {
                changed = changes.changed() => {
                    if changed.is_err() { return }
                    true
                }
                () = own.grew.notified() => true,
                () = tokio::time::sleep(CLOSED_POLL) => false,
            };
            if peer.is_transport_closed() {
                return;
            }
            if !woke {
                continue;
            }
            tokio::time::sleep(SETTLE).await;
            changes.borrow_and_update();
            let now = visible_names(&api, &own).await;
            if now != known {
                known = now;
                if peer.notify_tool_list_changed().await.is_err() {
                    return;
                }
            }
        }
    });
}

/// The names of the published tools the session sees now.
async fn visible_names<A: Api>(api: &A, own: &Own) -> Vec<String> {
    let Ok(listing) = api.listing().await else {
        return Vec::new();
    };
    let roots = own.roots();
    tools::published_names(&listing, viewer(api, &roots))
}

/// Most `subscriptions/listen` streams open at once in the process, and
/// from one client address: a 2026-07-28 request has no session, so the
/// session caps do not hold them.
pub const MAX_LISTENERS: usize = 64;
/// See [`MAX_LISTENERS`].
pub const MAX_LISTENERS_PER_CLIENT: usize = 16;

/// Listeners open now, by client address (`None`: stdio).
static LISTENERS: std::sync::LazyLock<
    Mutex<std::collections::HashMap<Option<std::net::IpAddr>, usize>>,
> = std::sync::LazyLock::new(Mutex::default);

/// One listener's place, given back when it ends.
struct Listening(Option<std::net::IpAddr>);

impl Listening {
    fn take(client: Option<std::net::IpAddr>) -> Result<Listening, String> {
        let mut open = LISTENERS.lock().unwrap_or_else(|p| p.into_inner());
        let total: usize = open.values().sum();
        let mine = open.get(&client).copied().unwrap_or(0);
        if total >= MAX_LISTENERS {
            return Err(format!(
                "{MAX_LISTENERS} subscriptions are open on this server, its limit; close one first"
            ));
        }
        if client.is_some() && mine >= MAX_LISTENERS_PER_CLIENT {
            return Err(format!(
                "{MAX_LISTENERS_PER_CLIENT} subscriptions are open from this client address, its limit; close one first"
            ));
        }
        *open.entry(client).or_default() += 1;
        Ok(Listening(client))
    }
}

impl Drop for Listening {
    fn drop(&mut self) {
        let mut open = LISTENERS.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = open.get_mut(&self.0) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.0);
            }
        }
    }
}

/// A 2026-07-28 `subscriptions/listen` stream: tells its client whenever the
/// published tools it sees change (the same names a handshake session's
/// follower compares, seen by no session: every client sees the same list),
/// until the client closes it. At most [`MAX_LISTENERS`] at once.
///
/// # Errors
/// The limit, when it is reached (the listen request answers an error).
pub(super) async fn listen<A: Api>(
    api: &A,
    client: Option<std::net::IpAddr>,
    context: rmcp::service::SubscriptionContext,
) -> Result<(), String> {
    let _place = Listening::take(client)?;
    let _counted = Counted::new();
    if context.accepted().tools_list_changed != Some(true) {
        context.cancelled().await;
        return Ok(());
    }
    let own = Own::default();
    let mut changes = api.changes();
    changes.borrow_and_update();
    let mut known = visible_names(api, &own).await;
    loop {
        tokio::select! {
            () = context.cancelled() => return Ok(()),
            changed = changes.changed() => {
                if changed.is_err() {
                    return Ok(());
                }
            }
        }
        tokio::time::sleep(SETTLE).await;
        changes.borrow_and_update();
        let now = visible_names(api, &own).await;
        if now != known {
            known = now;
            if context.sink().notify_tool_list_changed().await.is_err() {
                return Ok(());
            }
        }
    }
}
