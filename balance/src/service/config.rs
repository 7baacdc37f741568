//! How a [`crate::Cluster`] balances, fails over, times attempts out and tracks health: the
//! typed form of the chain file's service settings (`routechain-rules` parses them).

use std::collections::BTreeMap;
use std::time::Duration;

use crate::health::HealthConfig;
use crate::lb::BalanceConfig;

/// Dubbo's default number of retries after the first attempt (failover cluster).
pub const DEFAULT_RETRIES: u32 = 2;

/// Dubbo's default timeout of one attempt (`timeout`, 1000 ms).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(1000);

/// How a service balances, fails over and tracks health.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceConfig {
    /// The balancers (chain default and per-method overrides).
    pub balance: BalanceConfig,
    /// Drop degraded providers from every routed set (chain-level `skip_degraded`).
    pub skip_degraded: bool,
    /// Retries after the first attempt in [`crate::Cluster::call`] (default 2: three
    /// attempts).
    pub retries: u32,
    /// The timeout of one attempt of [`crate::Cluster::call`] (default 1 s, Dubbo's);
    /// [`Duration::ZERO`] means no timeout. A timed-out attempt is a failure of its provider
    /// and is retried on another one.
    pub timeout: Duration,
    /// Per-method `retries` and `timeout` (`methods.<name>.retries` / `.timeout`), by method
    /// name.
    pub methods: BTreeMap<String, MethodCall>,
    /// Failure threshold and cool-down.
    pub health: HealthConfig,
}

/// The call settings of one method: each one set overrides the service's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MethodCall {
    /// Retries after the first attempt.
    pub retries: Option<u32>,
    /// The timeout of one attempt ([`Duration::ZERO`]: none).
    pub timeout: Option<Duration>,
}

impl Default for ServiceConfig {
    fn default() -> Self {
        ServiceConfig {
            balance: BalanceConfig::default(),
            skip_degraded: false,
            retries: DEFAULT_RETRIES,
            timeout: DEFAULT_TIMEOUT,
            methods: BTreeMap::new(),
            health: HealthConfig::default(),
        }
    }
}

impl ServiceConfig {
    fn method(&self, method: Option<&str>) -> Option<&MethodCall> {
        method.and_then(|m| self.methods.get(m))
    }

    /// The retries of a call to `method` (its own, else the service's).
    pub fn retries_for(&self, method: Option<&str>) -> u32 {
        self.method(method)
            .and_then(|m| m.retries)
            .unwrap_or(self.retries)
    }

    /// The timeout of one attempt of a call to `method` (its own, else the service's);
    /// `None` when it is zero (no timeout).
    pub fn timeout_for(&self, method: Option<&str>) -> Option<Duration> {
        let t = self
            .method(method)
            .and_then(|m| m.timeout)
            .unwrap_or(self.timeout);
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
            },
        );
        config.methods.insert(
            "stream".into(),
            MethodCall {
                retries: None,
                timeout: Some(Duration::ZERO),
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
}
