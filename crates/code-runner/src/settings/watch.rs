//! Watches the configuration file, so a hand edit is picked up while running.
//!
//! The directory is watched, not the file: a save by rename (ours, and most
//! editors') replaces the file's inode, which a watch on the file itself
//! would lose. Events are debounced (an editor's save is several events) and
//! then the worker reloads from the store in force; a change that does not
//! validate is logged and ignored there.

use std::path::Path;
use std::sync::Weak;
use std::time::Duration;

use notify::event::{AccessKind, AccessMode};
use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::mpsc;

use super::Settings;

/// Quiet time after the last event before reloading: one save is often a
/// truncate and a write, or a write and a rename.
const DEBOUNCE: Duration = Duration::from_millis(250);

/// A live watch; dropping it stops the watch and ends its task.
pub(crate) struct ConfigWatch {
    _watcher: RecommendedWatcher,
}

impl ConfigWatch {
    /// Watches `file` (its directory must exist) and reloads `settings`
    /// settings after each change. `None`, with a warning, when the platform
    /// refuses a watch: `configuration::set` still works then.
    pub fn start(file: &Path, settings: Weak<Settings>) -> Option<ConfigWatch> {
        let name = file.file_name()?.to_os_string();
        let dir = file.parent()?;
        // One pending signal is enough: a reload reads the whole file.
        let (changed, mut changes) = mpsc::channel::<()>(1);
        let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            let Ok(event) = event else { return };
            let touches_file = event
                .paths
                .iter()
                .any(|path| path.file_name() == Some(&name));
            if touches_file && !is_read(&event.kind) {
                let _ = changed.try_send(());
            }
        })
        .and_then(|mut watcher| {
            watcher.watch(dir, RecursiveMode::NonRecursive)?;
            Ok(watcher)
        });
        let watcher = match watcher {
            Ok(watcher) => watcher,
            Err(err) => {
                tracing::warn!(
                    "cannot watch {} ({err}): hand edits are picked up at the next start",
                    dir.display()
                );
                return None;
            }
        };
        tokio::spawn(async move {
            // Ends when the watcher, and with it the sender, is dropped.
            while changes.recv().await.is_some() {
                loop {
                    match tokio::time::timeout(DEBOUNCE, changes.recv()).await {
                        Ok(Some(())) => continue,
                        Ok(None) => return,
                        Err(_quiet) => break,
                    }
                }
                let Some(settings) = settings.upgrade() else {
                    return;
                };
                // A refusal is logged by reload itself.
                let _ = settings.reload().await;
            }
        });
        Some(ConfigWatch { _watcher: watcher })
    }
}

/// Reads (our own reloads among them) change nothing.
fn is_read(kind: &EventKind) -> bool {
    matches!(kind, EventKind::Access(access) if *access != AccessKind::Close(AccessMode::Write))
}
