//! Registries as Dubbo users name them: [`RegistryAddress`] parses the whole address (one
//! registry or several, with their parameters), and [`RegistrySource`] is the source it
//! picks for a chain: one registry's own source, or several registries' sources merged
//! (`merge.rs`) with the rules read from one of them, the config center.
//!
//! [`RuleStore`] is what `routechain check --registry` audits: the rules a registry holds
//! and the providers of a service, read once.
//!
//! ```no_run
//! use std::sync::Arc;
//! use routechain_live::{LiveChain, LiveOptions, RegistryAddress, RegistryOptions, RegistrySource};
//!
//! let chain_file = routechain_rules::ChainFile::load("bar.chain.yaml".as_ref()).unwrap();
//! let registry = routechain_routers::builtin_registry();
//! let live = Arc::new(LiveChain::new(chain_file, registry, LiveOptions::default()).unwrap());
//! // Two registries: their providers merged, the rules read from the first.
//! let address = RegistryAddress::parse("zookeeper://zk-a:2181 | zookeeper://zk-b:2181").unwrap();
//! let options = RegistryOptions { protect_empty: true, zone: None };
//! let source = RegistrySource::for_chain(&address, &live, options);
//! let _watching = live.watch(Box::new(source), |report| eprintln!("{report}")).unwrap();
//! ```

use std::fmt;

use crate::{
    Following, LiveChain, Source, SourceError, SourceHandle, UpdateSender, ZkConfig, ZkSource,
};

mod address;
mod audit;
mod merge;

pub use address::{
    DEFAULT_WEIGHT, Registry, RegistryAddress, RegistryAddressError, RegistryEntry, RegistryParams,
    mask,
};
pub use audit::{RegistryStore, RuleStore, RuleWriter, StoreError, StoredRule, rule_key_of};

/// How a [`RegistrySource`] combines several registries.
#[derive(Debug, Clone, Default)]
pub struct RegistryOptions {
    /// Hold back a registry's provider list that becomes empty, that registry alone
    /// (its last providers keep serving): the chain's `protect_empty`.
    pub protect_empty: bool,
    /// The consumer's zone, matched against the registries' `zone` in the zone-aware
    /// choice for a call without a `registry_zone` attachment (Dubbo's default zone
    /// detector).
    pub zone: Option<String>,
}

/// One registry of a [`RegistrySource`]: its source's configuration (what it follows, in
/// [`Following`], with its connection state).
#[derive(Debug, Clone)]
pub enum RegistryConfig {
    /// A ZooKeeper registry's configuration.
    ZooKeeper(ZkConfig),
    /// A Nacos registry's configuration.
    #[cfg(feature = "nacos")]
    Nacos(crate::NacosConfig),
}

impl RegistryConfig {
    /// What is followed from the start: ZooKeeper's node paths
    /// ([`ZkConfig::watched_paths`]), Nacos's configs and service
    /// ([`crate::NacosConfig::watched`]).
    pub fn watched(&self) -> Vec<String> {
        match self {
            RegistryConfig::ZooKeeper(c) => c.watched_paths(),
            #[cfg(feature = "nacos")]
            RegistryConfig::Nacos(c) => c.watched(),
        }
    }

    /// What the registry's source follows.
    pub fn following(&self) -> &Following {
        match self {
            RegistryConfig::ZooKeeper(c) => &c.following,
            #[cfg(feature = "nacos")]
            RegistryConfig::Nacos(c) => &c.following,
        }
    }

    /// What the registry's source follows, to change before it starts (e.g. to share
    /// its connection state with a metrics collector).
    pub fn following_mut(&mut self) -> &mut Following {
        match self {
            RegistryConfig::ZooKeeper(c) => &mut c.following,
            #[cfg(feature = "nacos")]
            RegistryConfig::Nacos(c) => &mut c.following,
        }
    }
}

/// The source of a chain following a [`RegistryAddress`]: for one registry, that
/// registry's source as it is; for several, each registry's source with the providers
/// combined (merged; with Dubbo's zone-aware choice, a table of which registry lists each
/// provider, one registry chosen per call: [`routechain_balance::Registries`]) and the rules followed in
/// the config center alone ([`RegistryAddress::config_center`]).
#[derive(Clone)]
pub struct RegistrySource {
    members: Vec<(RegistryEntry, RegistryConfig)>,
    /// The position in `members` of the config center.
    center: usize,
    zone_aware: bool,
    options: RegistryOptions,
}

impl fmt::Debug for RegistrySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.members.iter().map(|(e, _)| e.to_string()))
            .finish()
    }
}

impl RegistrySource {
    /// The source following what `live` needs from the registries of `address`.
    pub fn for_chain(
        address: &RegistryAddress,
        live: &LiveChain,
        options: RegistryOptions,
    ) -> Self {
        let center = address.config_center();
        let mut members = Vec::with_capacity(address.entries().len());
        let mut center_member = 0;
        for (i, entry) in address.entries().iter().enumerate() {
            if !address.followed(i) {
                continue;
            }
            // Rules are followed in the config center alone; providers where subscribed.
            macro_rules! follow {
                ($config:expr, $kind:path) => {{
                    let mut config = $config;
                    let following = &mut config.following;
                    if i != center {
                        following.rule_keys.clear();
                        following.provider_app_kinds.clear();
                        following.each_app_kinds.clear();
                    }
                    if !entry.params.subscribe {
                        following.service = None;
                    }
                    $kind(config)
                }};
            }
            let following = match &entry.registry {
                Registry::ZooKeeper(_) => {
                    follow!(
                        ZkConfig::for_chain(live, entry.text()),
                        RegistryConfig::ZooKeeper
                    )
                }
                #[cfg(feature = "nacos")]
                Registry::Nacos(_) => follow!(
                    crate::NacosConfig::for_chain(live, entry.text()),
                    RegistryConfig::Nacos
                ),
            };
            if i == center {
                center_member = members.len();
            }
            members.push((entry.clone(), following));
        }
        RegistrySource {
            members,
            center: center_member,
            zone_aware: address.zone_aware(),
            options,
        }
    }

    /// Each registry and what it follows (the rules in the config center only).
    pub fn following(&self) -> &[(RegistryEntry, RegistryConfig)] {
        &self.members
    }

    /// Whether `other` follows the same nodes with the same filters (a reloaded chain file
    /// that changes nothing to follow).
    pub fn follows_same(&self, other: &RegistrySource) -> bool {
        self.members.len() == other.members.len()
            && self
                .members
                .iter()
                .zip(&other.members)
                .all(|((_, a), (_, b))| {
                    let (fa, fb) = (a.following(), b.following());
                    std::mem::discriminant(a) == std::mem::discriminant(b)
                        && a.watched() == b.watched()
                        && fa.service == fb.service
                        && fa.provider_app_kinds == fb.provider_app_kinds
                        && fa.each_app_kinds == fb.each_app_kinds
                })
    }

    /// Each registry's configuration, to change before the source starts (e.g. to share a
    /// connection state with a metrics collector).
    pub fn following_mut(&mut self) -> impl Iterator<Item = &mut RegistryConfig> {
        self.members.iter_mut().map(|(_, f)| f)
    }
}

fn start_one(following: RegistryConfig, tx: UpdateSender) -> Result<SourceHandle, SourceError> {
    match following {
        RegistryConfig::ZooKeeper(config) => Box::new(ZkSource::new(config)).start(tx),
        #[cfg(feature = "nacos")]
        RegistryConfig::Nacos(config) => Box::new(crate::NacosSource::new(config)).start(tx),
    }
}

impl Source for RegistrySource {
    fn name(&self) -> &str {
        match self.members.as_slice() {
            [(e, _)] => e.kind(),
            _ => "registries",
        }
    }

    fn start(self: Box<Self>, tx: UpdateSender) -> Result<SourceHandle, SourceError> {
        let RegistrySource {
            members,
            center,
            zone_aware,
            options,
        } = *self;
        if members.len() == 1 {
            let (_, following) = members.into_iter().next().expect("one registry");
            return start_one(following, tx);
        }
        let merge = merge::Merge::new(
            members
                .iter()
                .map(|(e, _)| (short_name(e), e.params.clone()))
                .collect(),
            center,
            zone_aware,
            options.zone.clone(),
            options.protect_empty,
        );
        let merge = std::sync::Arc::new(std::sync::Mutex::new(merge));
        // The registries' sources first (dropped first: their senders close), then the
        // threads passing their updates through the merge.
        let mut sources = Vec::with_capacity(members.len());
        let mut passers = Vec::with_capacity(members.len());
        for (i, (_, following)) in members.into_iter().enumerate() {
            let (member_tx, mut member_rx) = tokio::sync::mpsc::unbounded_channel();
            sources.push(start_one(following, member_tx)?);
            let merge = merge.clone();
            let tx = tx.clone();
            let thread = std::thread::Builder::new()
                .name(format!("routechain-registry-{i}"))
                .spawn(move || {
                    while let Some(update) = member_rx.blocking_recv() {
                        // Sent under the lock: the chain gets the combined lists in the
                        // order they were made.
                        let mut merge = merge.lock().unwrap_or_else(|p| p.into_inner());
                        if let Some(u) = merge.pass(i, update)
                            && tx.send(u).is_err()
                        {
                            return;
                        }
                    }
                })
                .map_err(|e| SourceError::Start {
                    source_name: "registries".into(),
                    reason: e.to_string(),
                })?;
            passers.push(SourceHandle::new(|| {}, thread));
        }
        sources.append(&mut passers);
        Ok(SourceHandle::group(sources))
    }
}

/// The registry as its lines name it: `zookeeper a:2181` (password masked).
fn short_name(entry: &RegistryEntry) -> String {
    match &entry.registry {
        Registry::ZooKeeper(a) => format!("zookeeper://{a}"),
        #[cfg(feature = "nacos")]
        Registry::Nacos(_) => mask(entry.text().split('?').next().unwrap_or(entry.text())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live() -> LiveChain {
        crate::test_chain("service: com.foo.Bar\nrouters:\n  - type: condition\n  - type: tag\n")
    }

    fn rule_keys(source: &RegistrySource) -> Vec<(usize, usize, Option<String>)> {
        source
            .following()
            .iter()
            .map(|(_, c)| {
                let f = c.following();
                let service = f.service.as_ref().map(|s| s.interface.clone());
                (f.rule_keys.len(), f.provider_app_kinds.len(), service)
            })
            .collect()
    }

    #[test]
    fn rules_are_followed_in_the_config_center_alone_and_providers_everywhere() {
        let live = live();
        let bar = Some("com.foo.Bar".to_string());
        // (address, per registry: rule keys, provider-application kinds, service)
        let table = [
            ("a:1", vec![(3, 1, bar.clone())]),
            ("a:1|b:2", vec![(3, 1, bar.clone()), (0, 0, bar.clone())]),
            (
                "a:1|b:2?use-as-config-center=true",
                vec![(0, 0, bar.clone()), (3, 1, bar.clone())],
            ),
            (
                "a:1?use-as-config-center=false;b:2",
                vec![(0, 0, bar.clone()), (3, 1, bar.clone())],
            ),
            // `subscribe=false`: no provider followed there (nothing at all but rules).
            (
                "a:1?subscribe=false|b:2",
                vec![(3, 1, None), (0, 0, bar.clone())],
            ),
            ("a:1|b:2?subscribe=false", vec![(3, 1, bar.clone())]),
        ];
        for (text, want) in table {
            let address = RegistryAddress::parse(text).unwrap();
            let source = RegistrySource::for_chain(&address, &live, RegistryOptions::default());
            assert_eq!(rule_keys(&source), want, "{text}");
            assert!(source.follows_same(&source.clone()));
        }
        let one = RegistryAddress::parse("a:1").unwrap();
        let two = RegistryAddress::parse("a:1|b:2").unwrap();
        let options = RegistryOptions::default;
        let one = RegistrySource::for_chain(&one, &live, options());
        let two = RegistrySource::for_chain(&two, &live, options());
        assert!(!one.follows_same(&two));
        assert_eq!(one.name(), "zookeeper");
        assert_eq!(two.name(), "registries");
    }
}
