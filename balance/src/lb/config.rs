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

/// The balancers of a service: a default, and overrides per method. Whether the consumer
/// *named* the algorithm matters for Dubbo's precedence: a `loadbalance` the consumer did
/// not name is taken from the providers' URLs and the override rules (see
/// `docs/load-balancing.md`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BalanceConfig {
    /// The chain's balancer (`load_balance`), used for methods without an override.
    pub default: BalancerSpec,
    /// True when the consumer named the default's algorithm (`load_balance`); with `false`
    /// it is Dubbo's default (`random`) unless a provider or an override rule names one.
    pub default_named: bool,
    /// `methods.<name>.…`, sorted by method name, and whether the method names its algorithm.
    methods: Vec<(String, BalancerSpec, bool)>,
    /// Balancers of the algorithms the providers' URLs or the override rules name, with
    /// the default's options: slots after the methods' (see [`BalanceConfig::kind_slot`]).
    kinds: Vec<BalancerSpec>,
    /// `adaptive`: the timeout its load reads (ms; the consumer's service-level `timeout`,
    /// `None`: Dubbo's default, 1000).
    pub timeout_ms: Option<i64>,
}

impl BalanceConfig {
    /// A configuration with `default` for every method (the consumer names it).
    pub fn new(default: BalancerSpec) -> Self {
        BalanceConfig {
            default,
            default_named: true,
            methods: Vec::new(),
            kinds: Vec::new(),
            timeout_ms: None,
        }
    }

    /// Adds (or replaces) the balancer of `method`, which names its algorithm.
    pub fn with_method(self, method: impl Into<String>, spec: BalancerSpec) -> Self {
        self.with_method_named(method, spec, true)
    }

    /// Adds (or replaces) the balancer of `method`; `named`: the method names the algorithm
    /// (else it sets only options, such as `hash_key`, and inherits the algorithm).
    pub fn with_method_named(
        mut self,
        method: impl Into<String>,
        spec: BalancerSpec,
        named: bool,
    ) -> Self {
        let method = method.into();
        match self
            .methods
            .binary_search_by(|(m, _, _)| m.as_str().cmp(&method))
        {
            Ok(i) => self.methods[i] = (method, spec, named),
            Err(i) => self.methods.insert(i, (method, spec, named)),
        }
        self
    }

    /// With a slot for each of `kinds` (the algorithms providers or override rules name)
    /// that no slot has yet: the default's options with that algorithm.
    pub fn with_kinds(mut self, kinds: impl IntoIterator<Item = super::LoadBalanceKind>) -> Self {
        for kind in kinds {
            if self.kind_slot(kind).is_none() {
                self.kinds.push(BalancerSpec {
                    kind,
                    ..self.default.clone()
                });
            }
        }
        self
    }

    /// The slot for the algorithm `kind` when a provider or an override rule names it:
    /// the default's slot when it is of that kind, else the slot [`BalanceConfig::with_kinds`]
    /// added.
    pub fn kind_slot(&self, kind: super::LoadBalanceKind) -> Option<usize> {
        if self.default.kind == kind {
            return Some(0);
        }
        self.kinds
            .iter()
            .position(|s| s.kind == kind)
            .map(|k| 1 + self.methods.len() + k)
    }

    /// The timeout `adaptive` reads (ms, at least 1).
    pub fn timeout_ms(&self) -> i64 {
        self.timeout_ms
            .filter(|&t| t > 0)
            .unwrap_or(super::response::DEFAULT_TIMEOUT_MS)
    }

    /// The method overrides, sorted by method name.
    pub fn methods(&self) -> impl Iterator<Item = (&str, &BalancerSpec)> + '_ {
        self.methods.iter().map(|(m, s, _)| (m.as_str(), s))
    }

    /// True when the method of slot `slot` names its own algorithm (slot 0:
    /// [`BalanceConfig::default_named`]).
    pub fn named(&self, slot: usize) -> bool {
        match slot {
            0 => self.default_named,
            n => self.methods.get(n - 1).is_some_and(|(_, _, named)| *named),
        }
    }

    /// The slot of `method`: 0 for the default, `1 + i` for the `i`-th override. Per-slot
    /// state (round-robin weights, rings) lives in the [`SnapshotBalance`](crate::lb::SnapshotBalance).
    pub fn slot(&self, method: Option<&str>) -> usize {
        method
            .and_then(|m| {
                self.methods
                    .binary_search_by(|(k, _, _)| k.as_str().cmp(m))
                    .ok()
            })
            .map_or(0, |i| i + 1)
    }

    /// The balancer of slot `slot`.
    pub fn spec(&self, slot: usize) -> &BalancerSpec {
        let m = self.methods.len();
        match slot {
            0 => &self.default,
            n if n <= m => &self.methods[n - 1].1,
            n => self.kinds.get(n - 1 - m).unwrap_or(&self.default),
        }
    }

    /// The number of slots (default, method overrides, algorithms named by providers).
    pub fn slots(&self) -> usize {
        1 + self.methods.len() + self.kinds.len()
    }
}
