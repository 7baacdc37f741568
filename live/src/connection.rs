//! The connection state every registry source shares ([`RegistryConnection`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether a registry source is connected now: shared by the source and whoever shows it
/// (`watch --metrics` exports it as `routechain_registry_connected`).
#[derive(Debug, Clone, Default)]
pub struct RegistryConnection(Arc<AtomicBool>);

impl RegistryConnection {
    /// True while connected (a session, and a server answering).
    pub fn is_connected(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    pub(crate) fn set(&self, connected: bool) {
        self.0.store(connected, Ordering::Relaxed);
    }
}
