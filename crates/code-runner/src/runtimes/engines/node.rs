//! Node's part of the engines: the operator's `node_packages` installed (or
//! found in the cache) before V8 serves, and what they are, as the texts a
//! model reads name them. A list that cannot be installed leaves node and
//! typescript unavailable, naming the package and why; python serves.

use std::sync::Arc;

use code_runner_core::Config;
use code_runner_v8::packages::{PackageSet, Request};

use super::Engines;

/// The label of the operator's set in module URLs.
const OPERATOR_SET: &str = "node_packages";

/// Installs `config`'s `node_packages` (or finds their install) and reads
/// them in, off the async threads; `None` when there are none.
///
/// # Errors
/// The message naming the package that failed and why.
pub(crate) async fn install_node_packages(
    config: &Config,
) -> Result<Option<Arc<PackageSet>>, String> {
    if config.node_packages.is_empty() {
        return Ok(None);
    }
    let specs = config.node_packages.clone();
    let registry = config.npm_registry.clone();
    tokio::task::spawn_blocking(move || open_node_packages(&specs, registry.as_deref()))
        .await
        .map_err(|err| format!("node_packages installer panicked: {err}"))?
}

/// [`install_node_packages`] on the calling thread (a sandbox process finds
/// the worker's install in the cache; it never runs npm).
///
/// # Errors
/// The message naming the package that failed and why.
pub(crate) fn open_node_packages(
    specs: &[String],
    registry: Option<&str>,
) -> Result<Option<Arc<PackageSet>>, String> {
    if specs.is_empty() {
        return Ok(None);
    }
    let request = Request {
        specs,
        registry,
        what: "node_packages",
    };
    let dir = code_runner_v8::packages::install(&request)?;
    let set =
        PackageSet::open(&dir, OPERATOR_SET).map_err(|why| format!("node_packages: {why}"))?;
    Ok(Some(Arc::new(set)))
}

impl Engines {
    /// Installs the node packages, keeping what they are for the texts.
    pub(super) async fn install_node(
        &self,
        config: &Config,
    ) -> Result<Option<Arc<PackageSet>>, String> {
        let installed = install_node_packages(config).await;
        match &installed {
            Ok(set) => {
                let listed = set
                    .as_ref()
                    .map(|set| set.listed.iter().map(ToString::to_string).collect())
                    .unwrap_or_default();
                let _ = self.node_packages.set(listed);
            }
            Err(why) => tracing::error!("node and typescript are unavailable: {why}"),
        }
        installed
    }

    /// The operator's node packages as `name@version`, once installed.
    pub fn node_packages(&self) -> Vec<String> {
        self.node_packages.get().cloned().unwrap_or_default()
    }
}
