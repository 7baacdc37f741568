//! The balancer configuration: which algorithm a service and each method uses, and the
//! consistent-hash key (`load_balance`, `hash_key`, `hash_nodes`, `methods` in a chain file).

use super::{DEFAULT_HASH_NODES, LoadBalanceKind};

/// One piece of a consistent-hash key, read from the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HashKeyPart {
    /// `arguments[n]`: the argument's string form (as [`Request::with_argument_str`](routechain_core::Request::with_argument_str)).
    Argument(usize),
    /// `attachments[k]`.
    Attachment(String),
    /// `attributes[k]`.
    Attribute(String),
}

impl HashKeyPart {
    /// Parses `arguments[0]`, `attachments[user]` or `attributes[user]`; the error says what
    /// is expected.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let inner = |prefix: &str| {
            text.strip_prefix(prefix)
                .and_then(|r| r.strip_prefix('['))
                .and_then(|r| r.strip_suffix(']'))
        };
        if let Some(n) = inner("arguments") {
            return n
                .trim()
                .parse::<usize>()
                .map(HashKeyPart::Argument)
                .map_err(|_| {
                    format!(
                        "invalid argument index {n:?} in hash key {text:?}: expected arguments[N]"
                    )
                });
        }
        for (prefix, make) in [
            (
                "attachments",
                HashKeyPart::Attachment as fn(String) -> HashKeyPart,
            ),
            ("attributes", HashKeyPart::Attribute),
        ] {
            if let Some(k) = inner(prefix) {
                let k = k.trim();
                if k.is_empty() {
                    return Err(format!("empty key in hash key {text:?}"));
                }
                return Ok(make(k.to_string()));
            }
        }
        Err(format!(
            "invalid hash key {text:?}: expected arguments[N], attachments[KEY] or attributes[KEY]"
        ))
    }
}

impl std::fmt::Display for HashKeyPart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HashKeyPart::Argument(n) => write!(f, "arguments[{n}]"),
            HashKeyPart::Attachment(k) => write!(f, "attachments[{k}]"),
            HashKeyPart::Attribute(k) => write!(f, "attributes[{k}]"),
        }
    }
}

/// A configured balancer: the algorithm and its options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BalancerSpec {
    /// The algorithm.
    pub kind: LoadBalanceKind,
    /// `consistenthash`: the key parts, concatenated (Dubbo's `hash.arguments`, default the
    /// first argument). Parts missing from a request are skipped, as Dubbo skips absent
    /// arguments.
    pub hash_key: Vec<HashKeyPart>,
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
            hash_key: vec![HashKeyPart::Argument(0)],
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
