//! The balancer configuration: which algorithm a service and each method uses, and the
//! consistent-hash key (`load_balance`, `hash_key`, `hash_nodes`, `methods` in a chain file).

use routechain_core::KeyPart;

use super::{DEFAULT_HASH_NODES, LoadBalanceKind};

/// A configured balancer: the algorithm and its options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BalancerSpec {
    /// The algorithm.
    pub kind: LoadBalanceKind,
    /// `consistenthash`: the key parts, concatenated (Dubbo's `hash.arguments`, default the
    /// first argument). Parts missing from a request are skipped, as Dubbo skips absent
    /// arguments.
    pub hash_key: Vec<KeyPart>,
    /// `consistenthash`: virtual nodes per provider (Dubbo's `hash.nodes`, default 160;
    /// rounded down to a multiple of 4 as Dubbo does).
    pub hash_nodes: u32,
}

impl Default for BalancerSpec {
    fn default() -> Self {
        BalancerSpec::new(LoadBalanceKind::Random)
    }
}

impl BalancerSpec {
    /// A balancer of `kind` with the default options.
    pub fn new(kind: LoadBalanceKind) -> Self {
        BalancerSpec {
            kind,
            hash_key: vec![KeyPart::Argument(0)],
            hash_nodes: DEFAULT_HASH_NODES,
        }
    }
}

/// The balancers of a service: a default, and overrides per method.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BalanceConfig {
    /// The chain's balancer (`load_balance`), used for methods without an override.
    pub default: BalancerSpec,
    /// `methods.<name>.load_balance`, sorted by method name.
    methods: Vec<(String, BalancerSpec)>,
}

impl BalanceConfig {
    /// A configuration with `default` for every method.
    pub fn new(default: BalancerSpec) -> Self {
        BalanceConfig {
            default,
            methods: Vec::new(),
        }
    }

    /// Adds (or replaces) the balancer of `method`.
    pub fn with_method(mut self, method: impl Into<String>, spec: BalancerSpec) -> Self {
        let method = method.into();
        match self
            .methods
            .binary_search_by(|(m, _)| m.as_str().cmp(&method))
        {
            Ok(i) => self.methods[i].1 = spec,
            Err(i) => self.methods.insert(i, (method, spec)),
        }
        self
    }

    /// The method overrides, sorted by method name.
    pub fn methods(&self) -> impl Iterator<Item = (&str, &BalancerSpec)> + '_ {
        self.methods.iter().map(|(m, s)| (m.as_str(), s))
    }

    /// The slot of `method`: 0 for the default, `1 + i` for the `i`-th override. Per-slot
    /// state (round-robin weights, rings) lives in the [`SnapshotBalance`](crate::lb::SnapshotBalance).
    pub fn slot(&self, method: Option<&str>) -> usize {
        method
            .and_then(|m| {
                self.methods
                    .binary_search_by(|(k, _)| k.as_str().cmp(m))
                    .ok()
            })
            .map_or(0, |i| i + 1)
    }

    /// The balancer of slot `slot`.
    pub fn spec(&self, slot: usize) -> &BalancerSpec {
        match slot {
            0 => &self.default,
            n => self.methods.get(n - 1).map_or(&self.default, |(_, s)| s),
        }
    }

    /// The number of slots (default plus overrides).
    pub fn slots(&self) -> usize {
        1 + self.methods.len()
    }
}
