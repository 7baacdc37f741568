//! How a [`crate::Cluster`] balances, fails over, times attempts out and tracks health: the
//! typed form of the chain file's service settings (`routechain-rules` parses them). These
//! are the *consumer's* call parameters; [`super::params`] merges them with the providers'
//! URLs and the override rules in Dubbo's order.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::health::HealthConfig;
use crate::lb::BalanceConfig;

use super::registries::RegistryTable;

/// Dubbo's default number of retries after the first attempt (failover cluster).
pub const DEFAULT_RETRIES: u32 = 2;

/// Dubbo's default timeout of one attempt (`timeout`, 1000 ms).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(1000);

/// Dubbo's default number of parallel calls of the `forking` cluster (`forks`).
pub const DEFAULT_FORKS: u32 = 2;

/// How a call uses the providers it may try: Dubbo's `cluster` (the consumer's `cluster=`
/// parameter, default `failover`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ClusterMode {
    /// Retry a failed attempt on another provider, up to `retries` more times.
    #[default]
    Failover,
    /// One attempt; its error is the call's.
    Failfast,
    /// One attempt; an error is logged and swallowed, and the call returns a default value.
    Failsafe,
    /// `forks` attempts on distinct providers at once; the first success wins.
    Forking,
    /// Every routed provider in turn; the call fails if any attempt failed.
    Broadcast,
}

impl ClusterMode {
    /// Every mode, in documentation order.
    pub const ALL: [ClusterMode; 5] = [
        ClusterMode::Failover,
        ClusterMode::Failfast,
        ClusterMode::Failsafe,
        ClusterMode::Forking,
        ClusterMode::Broadcast,
    ];

    /// Dubbo's name (the `cluster` value).
    pub fn name(self) -> &'static str {
        match self {
            ClusterMode::Failover => "failover",
            ClusterMode::Failfast => "failfast",
            ClusterMode::Failsafe => "failsafe",
            ClusterMode::Forking => "forking",
            ClusterMode::Broadcast => "broadcast",
        }
    }

    /// The mode named `name` (exact, as Dubbo's extension names).
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.name() == name)
    }
}

impl std::fmt::Display for ClusterMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How a service balances, fails over and tracks health: the consumer's settings. A value
/// left `None` is not the consumer's, so the providers' URLs and the defaults decide it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ServiceConfig {
    /// The balancers (chain default and per-method overrides).
    pub balance: BalanceConfig,
    /// Drop degraded providers from every routed set (chain-level `skip_degraded`).
    pub skip_degraded: bool,
    /// Retries after the first attempt (Dubbo's `retries`; default 2: three attempts).
    pub retries: Option<u32>,
    /// The timeout of one attempt (Dubbo's `timeout`; default 1 s); [`Duration::ZERO`]
    /// means no timeout. A timed-out attempt is a failure of its provider and is retried
    /// on another one.
    pub timeout: Option<Duration>,
    /// The cluster mode (Dubbo's `cluster`; default failover).
    pub cluster: Option<ClusterMode>,
    /// Parallel calls of the `forking` mode (Dubbo's `forks`; default 2).
    pub forks: Option<u32>,
    /// Per-method settings (`methods.<name>.…`), by method name.
    pub methods: BTreeMap<String, MethodCall>,
    /// Failure threshold and cool-down.
    pub health: HealthConfig,
    /// The retry budget (`None`: retries limited by `retries` only).
    pub retry_budget: Option<super::RetryBudget>,
    /// Which call parameters of each provider's URL the override rules set from the
    /// consumer side (Dubbo's override layer): not a chain-file setting, `routechain-live`
    /// sets it from the rules it applies. None: no override rule sets a call parameter.
    pub overrides: OverrideLayer,
    /// Several registries one of which is chosen per call (Dubbo's `ZoneAwareClusterInvoker`,
    /// [`super::registries`]); `None`: every provider is routed. Not a chain-file setting:
    /// `routechain-live` sets it from the registries it follows.
    pub registries: Option<Arc<RegistryTable>>,
}

/// The keys of a provider's URL that override rules set from the consumer side, so that
/// [`super::params`] ranks their values as Dubbo ranks its override URL (above the
/// consumer's own values), apart from what the provider registered. Implemented by
/// `routechain-live` over the rules it merges into the provider URLs.
pub trait OverrideKeys: std::fmt::Debug + Send + Sync {
    /// Calls `each` with every key (`timeout`, `getUser.retries`...) a consumer-side
    /// override rule set in `provider` (its URL as the consumer sees it, the rules merged).
    fn keys(&self, provider: &routechain_core::Provider, each: &mut dyn FnMut(&str));
}

/// The override layer of a [`ServiceConfig`]: an [`OverrideKeys`], or none. Two are equal
/// when they are the same one (the `Arc`), so a new layer re-reads the providers' URLs.
#[derive(Debug, Clone, Default)]
pub struct OverrideLayer(Option<std::sync::Arc<dyn OverrideKeys>>);

impl OverrideLayer {
    /// The layer `keys` gives.
    pub fn new(keys: std::sync::Arc<dyn OverrideKeys>) -> Self {
        OverrideLayer(Some(keys))
    }

    /// The keys, when some override rule sets a call parameter.
    pub fn get(&self) -> Option<&dyn OverrideKeys> {
        self.0.as_deref()
    }
}

impl PartialEq for OverrideLayer {
    fn eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (Some(a), Some(b)) => std::sync::Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        }
    }
}
impl Eq for OverrideLayer {}

/// The call settings of one method: each one set overrides the service's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MethodCall {
    /// Retries after the first attempt.
    pub retries: Option<u32>,
    /// The timeout of one attempt ([`Duration::ZERO`]: none).
    pub timeout: Option<Duration>,
    /// The cluster mode.
    pub cluster: Option<ClusterMode>,
    /// Parallel calls of the `forking` mode.
    pub forks: Option<u32>,
}

impl ServiceConfig {
    fn method(&self, method: Option<&str>) -> Option<&MethodCall> {
        method.and_then(|m| self.methods.get(m))
    }

    /// The consumer's retries of a call to `method` (its own, else the service's, else
    /// Dubbo's default), before override rules.
    pub fn retries_for(&self, method: Option<&str>) -> u32 {
        self.method(method)
            .and_then(|m| m.retries)
            .or(self.retries)
            .unwrap_or(DEFAULT_RETRIES)
    }

    /// The consumer's timeout of one attempt of a call to `method` (its own, else the
    /// service's, else Dubbo's default), before the providers' URLs and override rules;
    /// `None` when it is zero (no timeout).
    pub fn timeout_for(&self, method: Option<&str>) -> Option<Duration> {
        let t = self
            .method(method)
            .and_then(|m| m.timeout)
            .or(self.timeout)
            .unwrap_or(DEFAULT_TIMEOUT);
        (!t.is_zero()).then_some(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn method_settings_override_the_service_ones() {
        let mut config = ServiceConfig::default();
        config.methods.insert(
            "slow".into(),
            MethodCall {
                retries: Some(0),
                timeout: Some(Duration::from_secs(5)),
                ..MethodCall::default()
            },
        );
        config.methods.insert(
            "stream".into(),
            MethodCall {
                timeout: Some(Duration::ZERO),
                ..MethodCall::default()
            },
        );
        assert_eq!(config.retries_for(None), 2);
        assert_eq!(config.retries_for(Some("slow")), 0);
        assert_eq!(config.retries_for(Some("stream")), 2);
        assert_eq!(config.timeout_for(None), Some(DEFAULT_TIMEOUT));
        assert_eq!(config.timeout_for(Some("other")), Some(DEFAULT_TIMEOUT));
        assert_eq!(
            config.timeout_for(Some("slow")),
            Some(Duration::from_secs(5))
        );
        assert_eq!(config.timeout_for(Some("stream")), None);
    }

    #[test]
    fn cluster_names_are_dubbos() {
        for m in ClusterMode::ALL {
            assert_eq!(ClusterMode::parse(m.name()), Some(m));
        }
        assert_eq!(ClusterMode::parse("available"), None);
    }
}
