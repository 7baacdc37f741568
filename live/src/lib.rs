//! # routechain-live
//!
//! Live rules and providers: sources that push changes, and a chain that applies them
//! atomically and refuses bad ones.
//!
//! Features: `zookeeper` ([`ZkSource`], [`ZkAdmin`], and [`registry`]: registry addresses
//! as Dubbo writes them, several registries merged; brings tokio and `zookeeper-client`)
//! and `file-watch` ([`FileSource`]; brings `notify`). Without either, [`LiveChain`] still
//! applies updates pushed by a source of your own.
//!
//! - [`Update`] is what a source produces: a new provider list, a rule node that was added,
//!   modified or deleted, a reloaded chain file, or several of these to apply in one swap.
//! - [`Source`] is the abstraction every origin implements: [`FileSource`] (the chain file,
//!   its rule files and a providers file, watched with `notify`) and [`ZkSource`] (ZooKeeper
//!   in Apache Dubbo's layout). An etcd or Nacos source implements the same trait; the
//!   routers never see where a rule came from.
//! - [`LiveChain`] owns a `Cluster` (`routechain-balance`: routing, balancers, failover,
//!   health), configured by the chain file's service settings. It turns each update into
//!   one change of the service's published state, built off the call path and published at
//!   once, with a reloaded chain file's service settings; a rule
//!   that does not parse or validate is refused (the previous state keeps serving, the
//!   refusal is logged, counted in [`LiveStats`] and reported), a provider entry that does
//!   not parse is skipped alone, and a provider list that suddenly becomes empty is held
//!   back unless configured otherwise.
//! - Dubbo's override rules (`configurators`, parsed by
//!   [`routechain_rules::configurators`]) are applied to the provider URLs before each
//!   snapshot is prepared: `weight` reaches the balancers, `disabled` providers never reach
//!   the routers (the `overrides` module holds Dubbo's order and the side policy).
//! - [`cache`] keeps what a live chain applied on disk, per reference, and serves it at a
//!   start while its sources deliver nothing (Dubbo's registry `file-cache`;
//!   [`LiveOptions::cache`]).
//! - [`dubbo`] holds Dubbo's registry layout: node paths, how provider nodes are decoded,
//!   the reference (which providers a consumer takes) and the rule keys.
//! - [`ChainTemplate`] serves many services with one chain configuration, as a Dubbo
//!   consumer with hundreds of references does: the chain file is parsed and compiled
//!   once, and each service's [`LiveChain`] (its own reference, providers, rules and
//!   prepared state) shares the parsed file, the registry and the compiled routers, so a
//!   service costs a few kilobytes before its providers (docs/live.md, "Many services").
//!
//! ```no_run
//! use std::sync::Arc;
//! use routechain_balance::Caller;
//! use routechain_core::Request;
//! use routechain_live::{LiveChain, LiveOptions, ZkConfig, ZkSource};
//!
//! let chain_file = routechain_rules::ChainFile::load("bar.chain.yaml".as_ref()).unwrap();
//! let registry = routechain_routers::builtin_registry();
//! let live = Arc::new(LiveChain::new(chain_file, registry, LiveOptions::default()).unwrap());
//! // The source runs its own single-threaded tokio runtime on a thread of its own.
//! let zk = ZkSource::new(ZkConfig::for_chain(&live, "127.0.0.1:2181"));
//! let _watching = live.watch(Box::new(zk), |report| eprintln!("{report}")).unwrap();
//! // On the call path: route and balance with the chain file's (live) settings.
//! let mut caller = Caller::new();
//! let _ = live.service().select(&Request::new().with_method("getComment"), &[], &mut caller);
//! // Or route only, on the published state (a guard: no lock, no reference count).
//! let _ = live.service().load().state().route(&Request::new(), &mut caller);
//! ```

#[cfg(any(feature = "zookeeper", feature = "nacos"))]
mod address;
pub mod cache;
mod chain;
#[cfg(any(feature = "zookeeper", feature = "nacos"))]
mod connection;
pub mod dubbo;
#[cfg(feature = "file-watch")]
mod file;
mod keys;
#[cfg(feature = "metrics")]
pub mod metrics;
#[cfg(feature = "nacos")]
mod nacos;
mod observe;
mod overrides;
mod providers;
#[cfg(feature = "zookeeper")]
pub mod registry;
mod report;
mod template;
#[cfg(feature = "zookeeper")]
mod zk;

pub use cache::CacheOptions;
pub use chain::{LiveChain, LiveOptions, LiveStats, Report, Watching};
#[cfg(any(feature = "zookeeper", feature = "nacos"))]
pub use connection::{Following, RegistryConnection};
pub use dubbo::{
    Exclusion, ServiceKey, configurators_path, decode_component, encode_component,
    parse_provider_node, providers_application, providers_path, rule_path,
};
#[cfg(feature = "file-watch")]
pub use file::{FileConfig, FileSource};
pub use keys::PROVIDER_APP_TYPES;
#[cfg(feature = "nacos")]
pub use nacos::{
    DEFAULT_GROUP, NACOS_PASSWORD_ENV, NACOS_PASSWORD_FILE_ENV, NacosAddress, NacosAdmin,
    NacosConfig, NacosConnection, NacosError, NacosSource, RULE_GROUP, instance_url,
    provider_instance, rule_data_id, service_name,
};
pub use observe::{ApplyHistogram, SourceCount, UpdateResult};
pub use providers::parse_providers;
#[cfg(feature = "zookeeper")]
pub use registry::{
    RegistryAddress, RegistryAddressError, RegistryConfig, RegistryOptions, RegistrySource,
    RuleStore, RuleWriter,
};
pub use template::ChainTemplate;
#[cfg(feature = "zookeeper")]
pub use zk::{
    PASSWORD_ENV, PASSWORD_FILE_ENV, ZkAddress, ZkAdmin, ZkConfig, ZkConnection, ZkError,
    ZkRegistration, ZkSource,
};

use std::fmt;

/// What a config-center node is for: the key (a service key `interface:version:group` or
/// an application name) and the kind: a router type (`condition`, `tag`, `affinity`,
/// `group`...: the node `/dubbo/config/dubbo/<key>.<type>-router`), [`RuleKey::MESH`]
/// (`<key>.MESHAPPRULE`), [`RuleKey::CONFIGURATORS`] (override rules,
/// `<key>.configurators`) or [`RuleKey::LEGACY_OVERRIDES`] (the `override://` URLs under
/// `/dubbo/<interface>/configurators/`, key = the interface).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RuleKey {
    /// The service key or application name.
    pub key: String,
    /// The router type.
    pub router_type: String,
}

impl RuleKey {
    /// The kind of Dubbo's mesh rules: node `<app>.MESHAPPRULE`.
    pub const MESH: &'static str = "mesh";
    /// The kind of override rules: node `<key>.configurators`.
    pub const CONFIGURATORS: &'static str = "configurators";
    /// The kind of legacy override URLs: the children of `/dubbo/<interface>/configurators`.
    pub const LEGACY_OVERRIDES: &'static str = "override";

    /// Whether this node holds override rules (configurators), not a router's rule.
    pub fn is_override(&self) -> bool {
        self.router_type == Self::CONFIGURATORS || self.router_type == Self::LEGACY_OVERRIDES
    }

    /// A rule key.
    pub fn new(key: impl Into<String>, router_type: impl Into<String>) -> Self {
        RuleKey {
            key: key.into(),
            router_type: router_type.into(),
        }
    }
}

impl fmt::Display for RuleKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.router_type.as_str() {
            RuleKey::MESH => write!(f, "{}.MESHAPPRULE", self.key),
            RuleKey::CONFIGURATORS => write!(f, "{}.configurators", self.key),
            RuleKey::LEGACY_OVERRIDES => write!(f, "/dubbo/{}/configurators", self.key),
            t => write!(f, "{}.{t}-router", self.key),
        }
    }
}

/// What happened to a rule node (Dubbo's config-change types).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleEvent {
    /// The node appeared, with this text.
    Added(String),
    /// The node's text changed to this.
    Modified(String),
    /// The node was removed: the rule is cleared.
    Deleted,
}

impl RuleEvent {
    /// `added`, `modified` or `deleted`.
    pub fn kind(&self) -> &'static str {
        match self {
            RuleEvent::Added(_) => "added",
            RuleEvent::Modified(_) => "modified",
            RuleEvent::Deleted => "deleted",
        }
    }
}

/// A provider list as a source read it, before parsing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderText {
    /// The providers-file format: one URL per line, blank lines and `#` comments skipped.
    Lines(String),
    /// One URL per item (a registry's entries, already decoded).
    Urls(Vec<String>),
    /// A registry's entries, already decoded, parsed and filtered by the reference, with
    /// the entries that could not be parsed (each skipped alone).
    Parsed {
        /// The providers the reference takes (shared: a source keeps the parsed URLs of
        /// the entries it already read and hands the same ones again).
        urls: Vec<routechain_core::Url>,
        /// The entries skipped.
        skipped: Vec<Skipped>,
    },
}

/// A provider entry that could not be read, skipped alone (the others apply).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// Where: a znode path, or `file:line:column`.
    pub location: String,
    /// Why.
    pub reason: String,
}

/// One change pushed by a source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Update {
    /// The whole provider list, replaced.
    Providers {
        /// Where it came from (a file, a ZooKeeper path), for messages.
        origin: String,
        /// The list.
        text: ProviderText,
    },
    /// A rule node changed.
    Rule {
        /// Which node.
        key: RuleKey,
        /// What happened.
        event: RuleEvent,
        /// Where it came from, for messages (a ZooKeeper path...).
        origin: String,
    },
    /// The chain file (or a rule file it names) changed: reload it from this path.
    ChainFile(std::path::PathBuf),
    /// Several changes to apply together in one swap (each refused on its own if bad).
    Batch(Vec<Update>),
    /// A node the source could not read (no auth, its ACL...): counted as refused; the
    /// previous state keeps serving while the source retries.
    Unreadable {
        /// Where: `zookeeper:<path>`.
        origin: String,
        /// Why (the registry's error, e.g. `NoAuth`).
        reason: String,
    },
    /// Several registries' table: which registries list each provider address, for the
    /// zone-aware choice of one registry per call ([`routechain_balance::Registries`]); sent
    /// with the merged provider list it describes.
    Registries(std::sync::Arc<routechain_balance::RegistryTable>),
    /// Something the operator should know that changes nothing (connected, disconnected...).
    Status {
        /// The source's name.
        source: String,
        /// What happened.
        message: String,
    },
}

impl Update {
    /// A short description for reports: what changed and where.
    pub fn describe(&self) -> String {
        match self {
            Update::Providers { origin, text } => {
                let n = match text {
                    ProviderText::Lines(t) => t
                        .lines()
                        .filter(|l| !l.trim().is_empty() && !l.trim().starts_with('#'))
                        .count(),
                    ProviderText::Urls(u) => u.len(),
                    ProviderText::Parsed { urls, .. } => urls.len(),
                };
                format!("providers from {origin} ({n} URL(s))")
            }
            Update::Rule { key, event, .. } => format!("rule {key} {}", event.kind()),
            Update::ChainFile(p) => format!("chain file {}", p.display()),
            Update::Batch(items) => items
                .iter()
                .map(Update::describe)
                .collect::<Vec<_>>()
                .join(" + "),
            Update::Status { source, message } => format!("{source}: {message}"),
            Update::Unreadable { origin, .. } => format!("unreadable node {origin}"),
            Update::Registries(t) => format!(
                "{} registries, one chosen per call (zone-aware)",
                t.registries().len()
            ),
        }
    }
}

/// Where [`Update`]s go: the sending half of the channel a [`LiveChain`] reads.
pub type UpdateSender = tokio::sync::mpsc::UnboundedSender<Update>;

/// Why a source could not start.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// A file or directory could not be watched.
    #[error("cannot watch {path}: {reason}")]
    Watch {
        /// The path.
        path: String,
        /// Why.
        reason: String,
    },
    /// The source's thread or runtime could not start.
    #[error("cannot start source {source_name}: {reason}")]
    Start {
        /// The source.
        source_name: String,
        /// Why.
        reason: String,
    },
}

/// An origin of live updates (files, ZooKeeper; etcd or Nacos later).
///
/// A source runs on its own thread or task and pushes [`Update`]s into the sender until the
/// returned [`SourceHandle`] is dropped or the receiver is gone. It never touches the chain:
/// parsing, validation, refusal and the swap are the [`LiveChain`]'s.
pub trait Source: Send {
    /// A short name for logs (`file`, `zookeeper`).
    fn name(&self) -> &str;
    /// Starts delivering updates.
    fn start(self: Box<Self>, tx: UpdateSender) -> Result<SourceHandle, SourceError>;
}

/// A running source; dropping it stops the source and waits for its thread.
pub struct SourceHandle {
    stop: Option<Box<dyn FnOnce() + Send>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl SourceHandle {
    /// A handle that runs `stop` and then joins `thread` when dropped.
    pub fn new(stop: impl FnOnce() + Send + 'static, thread: std::thread::JoinHandle<()>) -> Self {
        SourceHandle {
            stop: Some(Box::new(stop)),
            thread: Some(thread),
        }
    }
}

impl SourceHandle {
    /// One handle for several running sources: dropping it stops them all.
    pub fn group(handles: Vec<SourceHandle>) -> Self {
        SourceHandle {
            stop: Some(Box::new(move || drop(handles))),
            thread: None,
        }
    }
}

/// Several sources feeding one chain, e.g. ZooKeeper for rules and providers and the file
/// source for the chain file (`routechain watch --zookeeper`).
pub struct Sources(pub Vec<Box<dyn Source>>);

impl fmt::Debug for Sources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|s| s.name().to_string()))
            .finish()
    }
}

impl Source for Sources {
    fn name(&self) -> &str {
        "sources"
    }

    fn start(self: Box<Self>, tx: UpdateSender) -> Result<SourceHandle, SourceError> {
        let mut handles = Vec::with_capacity(self.0.len());
        for source in self.0 {
            handles.push(source.start(tx.clone())?);
        }
        Ok(SourceHandle::group(handles))
    }
}

impl fmt::Debug for SourceHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SourceHandle")
            .field("running", &self.thread.is_some())
            .finish()
    }
}

impl Drop for SourceHandle {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            stop();
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A live chain of the chain file `yaml`, with the built-in routers and default options.
#[cfg(test)]
pub(crate) fn test_chain(yaml: &str) -> LiveChain {
    let file = routechain_rules::ChainFile::parse("t.yaml", yaml, None).unwrap();
    LiveChain::new(
        file,
        routechain_routers::builtin_registry(),
        LiveOptions::default(),
    )
    .unwrap()
}
