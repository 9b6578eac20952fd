//! Kept runtimes on their way to or from hibernation. While a runtime's id
//! is in transit (its state being written to the store, or read back), a
//! call for it waits for the passage to end and then looks again, so it
//! never finds the id missing halfway, and two calls never wake one
//! session twice.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

/// The ids in transit.
#[derive(Default)]
pub struct Transit {
    moving: Arc<Mutex<HashMap<String, Arc<Notify>>>>,
}

/// One id's passage; dropping it ends the passage and wakes its waiters.
pub struct Passage {
    moving: Arc<Mutex<HashMap<String, Arc<Notify>>>>,
    id: String,
}

impl Drop for Passage {
    fn drop(&mut self) {
        let notify = self
            .moving
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.id);
        if let Some(notify) = notify {
            notify.notify_waiters();
        }
    }
}

impl Transit {
    /// Begins `id`'s passage, unless one is under way.
    pub fn begin(&self, id: &str) -> Option<Passage> {
        let mut moving = self.moving.lock().unwrap_or_else(|p| p.into_inner());
        if moving.contains_key(id) {
            return None;
        }
        moving.insert(id.to_string(), Arc::new(Notify::new()));
        Some(Passage {
            moving: self.moving.clone(),
            id: id.to_string(),
        })
    }

    /// Waits for `id`'s passage to end, if one is under way; says whether it waited.
    pub async fn wait(&self, id: &str) -> bool {
        let notify = self
            .moving
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
            .cloned();
        let Some(notify) = notify else {
            return false;
        };
        let notified = notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        // Ended between the lookup and the registration (another passage
        // may have begun since): nothing to wait for.
        let same = self
            .moving
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
            .is_some_and(|now| Arc::ptr_eq(now, &notify));
        if !same {
            return true;
        }
        notified.await;
        true
    }
}
