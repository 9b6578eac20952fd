//! The link's background loops: mirror every bus change onto the engine,
//! follow the connection (the SDK has no callback, so its state is polled)
//! and, while connected, claim shared ids the engine shows without an owner.

use std::sync::{Arc, Weak};
use std::time::Duration;

use super::{Delivery, IiiLink, config, routing};
use crate::ops::Ops;

/// How often the link looks at the connection state (the SDK has no callback).
const STATE_POLL: Duration = Duration::from_millis(200);

/// How often a worker checks that the shared ids still have an owner.
const CLAIM_EVERY: Duration = Duration::from_secs(3);

/// Follows the bus and the connection until the worker or the link is
/// gone: three loops, so a slow call in one never hides an event from another.
pub(super) fn watch(link: &Arc<IiiLink>, ops: &Arc<Ops>) {
    tokio::spawn(follow_bus(Arc::downgrade(link), Arc::downgrade(ops)));
    tokio::spawn(follow_connection(Arc::downgrade(link), Arc::downgrade(ops)));
    tokio::spawn(keep_claims(Arc::downgrade(link), Arc::downgrade(ops)));
}

/// Mirrors every bus change onto the engine.
async fn follow_bus(link: Weak<IiiLink>, ops: Weak<Ops>) {
    let Some(mut changes) = ops.upgrade().map(|ops| ops.bus.subscribe()) else {
        return;
    };
    while changes.changed().await.is_ok() {
        let (Some(link), Some(ops)) = (link.upgrade(), ops.upgrade()) else {
            return;
        };
        link.mirror.sync(&link.client, &ops);
    }
}

/// Logs the connection's comings and goings, and registers the
/// configuration entry again on every return (the SDK does not replay it).
async fn follow_connection(link: Weak<IiiLink>, ops: Weak<Ops>) {
    let mut was_connected = false;
    loop {
        tokio::time::sleep(STATE_POLL).await;
        let Some(link) = link.upgrade() else { return };
        let connected = link.connected();
        if connected && !was_connected {
            tracing::info!(worker = %link.worker_name, "connected to the iii engine");
            let Some(settings) = ops.upgrade().map(|ops| ops.settings.clone()) else {
                return;
            };
            let link = link.clone();
            tokio::spawn(async move { config::ensure_entry(&link, &settings).await });
        } else if !connected && was_connected {
            tracing::warn!(worker = %link.worker_name, state = link.state(), "lost the iii engine; reconnecting");
        }
        was_connected = connected;
    }
}

/// While connected: claims shared ids left without an owner, and checks
/// now and then that the configuration entry still has its schema (an
/// engine restart faster than [`STATE_POLL`] would otherwise go unseen).
async fn keep_claims(link: Weak<IiiLink>, ops: Weak<Ops>) {
    let mut rounds = 0u32;
    loop {
        tokio::time::sleep(CLAIM_EVERY).await;
        let (Some(link), Some(ops)) = (link.upgrade(), ops.upgrade()) else {
            return;
        };
        if !link.connected() {
            continue;
        }
        claim_shared(&link, &ops).await;
        rounds = rounds.wrapping_add(1);
        if rounds.is_multiple_of(10) && !config::entry_has_schema(&link).await {
            config::ensure_entry(&link, &ops.settings).await;
        }
    }
}

/// Registers the shared ids again where the engine shows no owner: the
/// front that held them left, and the engine does not hand them on.
async fn claim_shared(link: &Arc<IiiLink>, ops: &Arc<Ops>) {
    for id in routing::SHARED {
        let info = link
            .trigger(
                "engine::functions::info",
                serde_json::json!({ "function_id": id }),
                Duration::from_secs(5),
                Delivery::Call,
            )
            .await;
        let unowned = match &info {
            Err(err) => {
                err.code.eq_ignore_ascii_case("function_not_found")
                    || err.code.eq_ignore_ascii_case("not_found")
            }
            Ok(value) => value.is_null(),
        };
        if unowned && ops.bus.contains(id) {
            tracing::info!(function = %id, worker = %link.worker_name, "claiming a shared function left without an owner");
            link.mirror.reclaim(&link.client, ops, id);
        }
    }
}
