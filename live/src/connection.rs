//! What every registry source shares: what it follows for a chain ([`Following`], part of
//! [`crate::ZkConfig`] and [`crate::NacosConfig`]) and its connection state
//! ([`RegistryConnection`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::{LiveChain, RuleKey, ServiceKey};

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

/// What a registry source follows for a chain, whatever the registry: its rules, the
/// rules under the providers' applications, its providers; and how it reconnects.
#[derive(Debug, Clone)]
pub struct Following {
    /// The rules to follow.
    pub rule_keys: Vec<RuleKey>,
    /// The kinds of rule read under the providers' application once it is known: see
    /// [`LiveChain::provider_app_kinds`].
    pub provider_app_kinds: Vec<String>,
    /// The kinds of rule read under every provider application present: see
    /// [`LiveChain::each_provider_app_kinds`].
    pub each_app_kinds: Vec<String>,
    /// The reference whose providers to follow (`None`: providers come from elsewhere).
    pub service: Option<ServiceKey>,
    /// The pause between connection attempts while the registry is unreachable.
    pub retry_delay: Duration,
    /// The connection's state, set by the source (share it to show it).
    pub connection: RegistryConnection,
}

impl Following {
    /// What `live` needs: the rule keys its entries subscribe to, and the providers of its
    /// chain file's `service`.
    pub fn for_chain(live: &LiveChain) -> Self {
        Following {
            rule_keys: live.subscriptions(),
            provider_app_kinds: live.provider_app_kinds(),
            each_app_kinds: live.each_provider_app_kinds(),
            service: live.reference(),
            retry_delay: Duration::from_millis(500),
            connection: RegistryConnection::default(),
        }
    }
}
