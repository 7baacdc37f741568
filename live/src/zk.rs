//! The ZooKeeper source, in Apache Dubbo's layout, and [`ZkAdmin`] to seed it.
//!
//! - Rules (Dubbo's config center, group `dubbo`): the node
//!   `/dubbo/config/dubbo/<key>.<type>-router` holds the rule YAML, where key is the service
//!   key `interface:version:group` (both colons always written) or an application name, and
//!   type is `condition`, `tag`, `affinity` or one of routechain's own router types.
//!   A node that appears, changes or disappears is an added, modified or deleted rule.
//!   Tag rules (`<app>.tag-router`) are read under the providers' application, learnt from
//!   the providers and followed when it changes. Mesh rules (`<app>.MESHAPPRULE`) of a mesh
//!   entry without `app` are read under *every* provider application present: a node is
//!   watched from when its application's first provider appears until its last one leaves.
//! - Override rules: `<service key>.configurators`, `<consumer app>.configurators` (and
//!   `<providers' app>.configurators` with `apply_provider_overrides`), and the legacy
//!   `override://` children of `/dubbo/<interface>/configurators`, pushed as one list.
//! - Providers (Dubbo's registry): the children of `/dubbo/<interface>/providers`, each the
//!   URL-encoded provider URL. A child is decoded as Dubbo's consumer decodes it
//!   ([`crate::parse_provider_node`]); a child that cannot be parsed is skipped alone;
//!   `empty://` markers are ignored, and the reference's interface, group and version and
//!   the `enabled`/`disabled` flags select providers as Dubbo's consumers do. Each read
//!   reports `N registered, M match (group=…, version=…)`.
//!
//! The source keeps one persistent watch per node it follows, re-reads everything after a
//! reconnection (events can be lost while disconnected) and opens a new session after the
//! old one expired. It chooses its server itself (`failover.rs`): a server that falls
//! silent is left and the session reopened on another, the silent one tried last. While
//! disconnected nothing is pushed: the last good state keeps serving.

use std::collections::HashMap;

use std::time::Duration;

use tokio::sync::mpsc::UnboundedSender;
use zookeeper_client::{Client, Error as ZkClientError};

use crate::dubbo::{Exclusion, decode_component, parse_provider_node, providers_path, rule_path};
use crate::providers::{AppCounts, KeyMap, TextKey};

mod address;
mod admin;
mod failover;
mod register;
mod session;
mod unreadable;
pub(crate) use address::mask;
pub use address::{PASSWORD_ENV, PASSWORD_FILE_ENV, ZkAddress};
pub use admin::ZkAdmin;
pub use register::ZkRegistration;
use routechain_core::Url;
pub use session::ZkConnection;
use unreadable::Unreadable;

use crate::{
    Following, LiveChain, ProviderText, RuleEvent, RuleKey, Skipped, Source, SourceError,
    SourceHandle, Update,
};

/// Why a ZooKeeper operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ZkError {
    /// The address cannot be used (its text, password masked, and why).
    #[error("bad ZooKeeper address `{address}`: {reason}")]
    Address {
        /// The address as given, its password masked.
        address: String,
        /// Why.
        reason: String,
    },
    /// No session could be established.
    #[error("cannot connect to ZooKeeper at {servers}: {reason}")]
    Connect {
        /// The address, its password masked.
        servers: String,
        /// Why.
        reason: String,
    },
    /// An operation on a node failed.
    #[error("ZooKeeper {op} {path}: {source}")]
    Op {
        /// The operation.
        op: &'static str,
        /// The node.
        path: String,
        /// The client's error.
        #[source]
        source: ZkClientError,
    },
}

pub(crate) fn op_error<'p>(
    op: &'static str,
    path: &'p str,
) -> impl FnOnce(ZkClientError) -> ZkError + 'p {
    move |source| ZkError::Op {
        op,
        path: path.to_string(),
        source,
    }
}

/// What the ZooKeeper source follows, and where.
#[derive(Clone)]
pub struct ZkConfig {
    /// The registry address, in any form [`ZkAddress::parse`] takes (`host:port,...`,
    /// `user:pass@host:port`, `zookeeper://...`); a bad one is refused when the source
    /// starts.
    pub servers: String,
    /// The rule nodes and providers followed (node kinds read under provider
    /// applications: `tag`, `mesh`, `configurators`), the pause between connection
    /// attempts and the connection's state.
    pub following: Following,
    /// The session timeout asked of the server.
    pub session_timeout: Duration,
}

/// Shows the address with its password masked.
impl std::fmt::Debug for ZkConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZkConfig")
            .field("servers", &address::mask(&self.servers))
            .field("following", &self.following)
            .field("session_timeout", &self.session_timeout)
            .finish()
    }
}

impl ZkConfig {
    /// Every path watched from the start: the rule and override nodes, the legacy override
    /// directory and the providers directory (nodes under the providers' application are
    /// added when it is known).
    pub fn watched_paths(&self) -> Vec<String> {
        let f = &self.following;
        let mut paths: Vec<String> = f.rule_keys.iter().map(rule_path).collect();
        paths.extend(f.service.as_ref().map(|s| providers_path(&s.interface)));
        paths
    }

    /// Follows what `live` needs: the rule keys its entries subscribe to, and the providers
    /// of its chain file's `service`.
    pub fn for_chain(live: &LiveChain, servers: impl Into<String>) -> Self {
        ZkConfig {
            servers: servers.into(),
            following: Following::for_chain(live),
            session_timeout: Duration::from_secs(10),
        }
    }
}

/// The ZooKeeper [`Source`]: runs its own single-threaded tokio runtime on a thread.
#[derive(Debug)]
pub struct ZkSource {
    config: ZkConfig,
}

impl ZkSource {
    /// A source following `config`.
    pub fn new(config: ZkConfig) -> Self {
        ZkSource { config }
    }
}

impl Source for ZkSource {
    fn name(&self) -> &str {
        "zookeeper"
    }

    fn start(self: Box<Self>, tx: UnboundedSender<Update>) -> Result<SourceHandle, SourceError> {
        let start_error = |e: std::io::Error| SourceError::Start {
            source_name: "zookeeper".into(),
            reason: e.to_string(),
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(start_error)?;
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let config = self.config;
        // A bad address is refused now, not retried.
        let address = ZkAddress::parse(&config.servers).map_err(|e| SourceError::Start {
            source_name: "zookeeper".into(),
            reason: e.to_string(),
        })?;
        let thread = std::thread::Builder::new()
            .name("routechain-zookeeper".into())
            .spawn(move || runtime.block_on(session::run(config, address, tx, stop_rx)))
            .map_err(start_error)?;
        Ok(SourceHandle::new(
            move || {
                let _ = stop_tx.send(true);
            },
            thread,
        ))
    }
}

/// A provider node as read: its URL, or why the reference does not take it.
#[derive(Clone)]
enum Node {
    /// An `empty://` marker.
    Empty,
    /// A provider the reference takes.
    Taken(Url),
    /// A provider the reference does not take, and why.
    Excluded(Exclusion),
}

/// A provider node read, and the last read of the list that held it.
struct Seen {
    node: Node,
    round: u32,
}

/// The provider nodes read, counted: what the status line reports, and the applications
/// of the providers taken.
#[derive(Default)]
struct NodeCounts {
    /// Nodes that are not `empty://` markers.
    registered: usize,
    excluded: std::collections::BTreeMap<Exclusion, usize>,
    apps: AppCounts,
}

impl NodeCounts {
    fn count(&mut self, node: &Node, up: bool) {
        let step = |n: &mut usize| {
            if up { *n += 1 } else { *n -= 1 }
        };
        match node {
            Node::Empty => return,
            Node::Taken(u) if up => self.apps.add(u),
            Node::Taken(u) => self.apps.remove(u),
            Node::Excluded(why) => {
                let n = self.excluded.entry(*why).or_default();
                step(n);
                if *n == 0 {
                    self.excluded.remove(why);
                }
            }
        }
        step(&mut self.registered);
    }
}

/// What the source last read: rule node data (`None`: no node) and the provider URLs.
#[derive(Default)]
struct View {
    rules: HashMap<RuleKey, Option<Vec<u8>>>,
    /// The providers taken (clones of the `Url`s the node cache holds), in the source's stable
    /// order (the ones kept in their order, new ones appended by node name).
    urls: Vec<Url>,
    /// The skipped nodes of the last list pushed; `None`: no list pushed since the view
    /// was (re)started, so the next read pushes whatever it finds.
    pushed: Option<Vec<String>>,
    /// Every provider node read, by its name, as it was read, updated in place: a changed
    /// list parses only the nodes that are new (a node's name is its whole URL: a node
    /// that stays is the same provider). A name is known by its keyed 128-bit hash
    /// ([`TextKey`]: no copy of the name is kept; why a hash is an acceptable key is said
    /// there).
    nodes: KeyMap<Seen>,
    /// The read of the provider list (`Seen::round` of the nodes it held).
    round: u32,
    counts: NodeCounts,
    /// The providers' application and the rule keys read under it.
    provider_app: Option<String>,
    app_keys: Vec<RuleKey>,
    /// Every provider application present and the rule keys read under each.
    each_apps: std::collections::BTreeSet<String>,
    each_keys: Vec<RuleKey>,
    /// The provider nodes skipped so far (each reported once while it stays).
    skipped: std::collections::HashSet<String>,
}

enum End {
    Stop,
    /// The server was left (silent, or the connection lost): the session is reopened on
    /// another one.
    Left(String),
    /// The session ended: a new one is opened.
    Reconnect(String),
}

struct Ctx<'a> {
    config: &'a ZkConfig,
    tx: &'a UnboundedSender<Update>,
    view: View,
    /// Set when keys under a new providers' application need watches.
    new_app_keys: bool,
    /// The nodes that could not be read, retried with backoff.
    unreadable: Unreadable,
    /// Unreadable nodes not reported yet.
    unreadable_news: Vec<Update>,
}

impl Ctx<'_> {
    fn status(&self, message: impl Into<String>) {
        let _ = self.tx.send(Update::Status {
            source: "zookeeper".into(),
            message: message.into(),
        });
    }

    fn providers_dir(&self) -> Option<String> {
        self.config
            .following
            .service
            .as_ref()
            .map(|s| providers_path(&s.interface))
    }

    /// Sends what a read changed, then the unreadable nodes it found, as one update.
    fn send(&mut self, mut updates: Vec<Update>) {
        updates.append(&mut self.unreadable_news);
        match updates.len() {
            0 => {}
            1 => {
                let _ = self.tx.send(updates.remove(0));
            }
            _ => {
                let _ = self.tx.send(Update::Batch(updates));
            }
        }
    }

    /// A read of `path` failed with `e`: an error of the session is returned (the session
    /// loop reconnects or re-reads); one of the node alone (`NoAuth`...) is reported as
    /// an unreadable node (once per reason) and retried with backoff, the node's previous
    /// state serving meanwhile.
    fn unreadable(&mut self, path: &str, e: ZkClientError) -> Result<(), ZkClientError> {
        if unreadable::is_session_error(&e) {
            return Err(e);
        }
        let reason = unreadable::reason(&e);
        if self.unreadable.failed(path, &reason) {
            tracing::warn!(path, "ZooKeeper node unreadable: {reason}");
            // Sent with the read's other changes (after them), so that what could be read
            // is serving when it is reported.
            self.unreadable_news.push(Update::Unreadable {
                origin: format!("zookeeper:{path}"),
                reason: format!(
                    "{reason}; its previous state keeps serving, retrying with backoff until it reads"
                ),
            });
        }
        Ok(())
    }

    /// `path` read: said once if it was unreadable until now.
    fn readable(&mut self, path: &str) {
        if self.unreadable.read(path) {
            self.status(format!("{path} reads again"));
        }
    }

    /// Reads one rule node and returns the event its change makes, if any.
    async fn read_rule(
        &mut self,
        client: &Client,
        key: &RuleKey,
    ) -> Result<Option<Update>, ZkClientError> {
        let path = rule_path(key);
        let now = if key.router_type == RuleKey::LEGACY_OVERRIDES {
            // The `override://` children, decoded, as one JSON list (Dubbo's compatible
            // form); no child is no rule.
            match client.list_children(&path).await {
                Ok(mut children) if !children.is_empty() => {
                    children.sort();
                    let urls: Vec<String> = children
                        .iter()
                        .map(|c| decode_component(c).unwrap_or_else(|_| c.clone()))
                        .map(|u| format!("{u:?}"))
                        .collect();
                    Some(format!("[{}]", urls.join(", ")).into_bytes())
                }
                Ok(_) | Err(ZkClientError::NoNode) => None,
                Err(e) => return self.unreadable(&path, e).map(|()| None),
            }
        } else {
            match client.get_data(&path).await {
                Ok((data, _)) => Some(data),
                Err(ZkClientError::NoNode) => None,
                Err(e) => return self.unreadable(&path, e).map(|()| None),
            }
        };
        self.readable(&path);
        let before = self.view.rules.insert(key.clone(), now.clone()).flatten();
        let text = |d: Vec<u8>| String::from_utf8_lossy(&d).into_owned();
        let event = match (before, now) {
            (None, Some(d)) => RuleEvent::Added(text(d)),
            (Some(a), Some(b)) if a != b => RuleEvent::Modified(text(b)),
            (Some(_), None) => RuleEvent::Deleted,
            _ => return Ok(None),
        };
        Ok(Some(Update::Rule {
            key: key.clone(),
            event,
            origin: format!("zookeeper:{path}"),
        }))
    }

    /// Reads the providers and returns the updates: the providers, if they changed, then
    /// the rules under the providers' application, if it changed.
    async fn read_providers(&mut self, client: &Client) -> Result<Vec<Update>, ZkClientError> {
        let (Some(dir), Some(service)) =
            (self.providers_dir(), self.config.following.service.clone())
        else {
            return Ok(Vec::new());
        };
        let children = match client.list_children(&dir).await {
            Ok(c) => c,
            Err(ZkClientError::NoNode) => Vec::new(),
            Err(e) => return self.unreadable(&dir, e).map(|()| Vec::new()),
        };
        self.readable(&dir);
        // One look-up per child (children whose name was read before are neither decoded
        // nor parsed again), the departed ones dropped in place, no sort of the list: a
        // change costs hashing the names ZooKeeper lists, plus the changed nodes.
        self.view.round = self.view.round.wrapping_add(1);
        let round = self.view.round;
        let mut seen = 0;
        let mut added: Vec<(String, TextKey, Node)> = Vec::new();
        let mut skipped = Vec::new();
        for (n, child) in children.into_iter().enumerate() {
            // A first read parses every node: let the client's session task (on this
            // single-threaded runtime) keep the session alive meanwhile.
            if n % 1024 == 1023 {
                tokio::task::yield_now().await;
            }
            let key = TextKey::of(&child);
            if let Some(s) = self.view.nodes.get_mut(&key) {
                if s.round != round {
                    s.round = round;
                    seen += 1;
                }
                continue;
            }
            let node = parse_provider_node(&child).map(|u| {
                if u.protocol() == "empty" {
                    Node::Empty
                } else {
                    match service.exclusion(&u) {
                        None => Node::Taken(u),
                        Some(why) => Node::Excluded(why),
                    }
                }
            });
            match node {
                Ok(node) => added.push((child, key, node)),
                Err(reason) => skipped.push(Skipped {
                    location: format!("{dir}/{child}"),
                    reason,
                }),
            }
        }
        let View { nodes, counts, .. } = &mut self.view;
        let mut gone: Vec<Url> = Vec::new();
        if seen != nodes.len() {
            nodes.retain(|_, s| {
                let keep = s.round == round;
                if !keep {
                    counts.count(&s.node, false);
                    if let Node::Taken(u) = &s.node {
                        gone.push(u.clone());
                    }
                }
                keep
            });
            if nodes.capacity() > 4 * nodes.len() + 16 {
                nodes.shrink_to_fit();
            }
        }
        // New nodes by name, so that a first read is in the registry's sorted order.
        added.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let mut came: Vec<Url> = Vec::new();
        for (_, key, node) in added {
            counts.count(&node, true);
            if let Node::Taken(u) = &node {
                came.push(u.clone());
            }
            nodes.insert(key, Seen { node, round });
        }
        skipped.sort_unstable_by(|a, b| a.location.cmp(&b.location));
        let locations: Vec<String> = skipped.iter().map(|s| s.location.clone()).collect();
        let unchanged = gone.is_empty() && came.is_empty();
        if !gone.is_empty() {
            let gone: std::collections::HashSet<usize> = gone.iter().map(Url::block_addr).collect();
            self.view.urls.retain(|u| !gone.contains(&u.block_addr()));
        }
        self.view.urls.extend(came);
        if unchanged && self.view.pushed.as_ref() == Some(&locations) {
            return Ok(Vec::new());
        }
        self.view.pushed = Some(locations);
        let urls = self.view.urls.clone();
        let registered = self.view.counts.registered + skipped.len();
        let excluded = &self.view.counts.excluded;
        let mut message = format!(
            "{dir}: {registered} registered, {} match ({})",
            urls.len(),
            service.describe_filter()
        );
        if !excluded.is_empty() {
            let parts: Vec<String> = excluded
                .iter()
                .map(|(w, n)| format!("{n} by {w}"))
                .collect();
            message.push_str(&format!("; excluded {}", parts.join(", ")));
        }
        if !skipped.is_empty() {
            message.push_str(&format!("; {} skipped", skipped.len()));
        }
        self.status(message);
        let app = self.view.counts.apps.application();
        let apps = self.view.counts.apps.applications();
        let now: std::collections::HashSet<String> =
            skipped.iter().map(|s| s.location.clone()).collect();
        self.view.skipped.retain(|l| now.contains(l));
        let skipped: Vec<Skipped> = skipped
            .into_iter()
            .filter(|s| self.view.skipped.insert(s.location.clone()))
            .collect();
        let mut updates = vec![Update::Providers {
            origin: format!("zookeeper:{dir}"),
            text: ProviderText::Parsed { urls, skipped },
        }];
        if app != self.view.provider_app && !self.config.following.provider_app_kinds.is_empty() {
            for old in std::mem::take(&mut self.view.app_keys) {
                self.view.rules.remove(&old);
            }
            self.view.provider_app = app.clone();
            if let Some(app) = app {
                let keys: Vec<RuleKey> = self
                    .config
                    .following
                    .provider_app_kinds
                    .iter()
                    .map(|k| RuleKey::new(app.clone(), k.clone()))
                    .collect();
                self.status(format!(
                    "providers' application {app}: watching {}",
                    keys.iter().map(rule_path).collect::<Vec<_>>().join(", ")
                ));
                for k in &keys {
                    updates.extend(self.read_rule(client, k).await?);
                }
                self.view.app_keys = keys;
                self.new_app_keys = true;
            }
        }
        if apps != self.view.each_apps && !self.config.following.each_app_kinds.is_empty() {
            updates.extend(self.follow_each_app(client, apps).await?);
        }
        Ok(updates)
    }

    /// Follows the nodes of every provider application in `apps`: the nodes of an
    /// application that appeared are read and watched, those of one whose last provider
    /// left are no longer watched (nor remembered: read afresh if it comes back).
    async fn follow_each_app(
        &mut self,
        client: &Client,
        apps: std::collections::BTreeSet<String>,
    ) -> Result<Vec<Update>, ZkClientError> {
        let keys_of = |app: &String| -> Vec<RuleKey> {
            self.config
                .following
                .each_app_kinds
                .iter()
                .map(|k| RuleKey::new(app.clone(), k.clone()))
                .collect()
        };
        let mut updates = Vec::new();
        let gone: Vec<String> = self.view.each_apps.difference(&apps).cloned().collect();
        let came: Vec<String> = apps.difference(&self.view.each_apps).cloned().collect();
        for app in &gone {
            let keys = keys_of(app);
            self.view.each_keys.retain(|k| !keys.contains(k));
            for k in &keys {
                // A node also followed for another reason stays read.
                if !self.config.following.rule_keys.contains(k) && !self.view.app_keys.contains(k) {
                    self.view.rules.remove(k);
                }
            }
            self.status(format!(
                "application {app} has no provider left: no longer watching {}",
                keys.iter().map(rule_path).collect::<Vec<_>>().join(", ")
            ));
        }
        for app in &came {
            let keys = keys_of(app);
            self.status(format!(
                "application {app} has providers: watching {}",
                keys.iter().map(rule_path).collect::<Vec<_>>().join(", ")
            ));
            for k in &keys {
                updates.extend(self.read_rule(client, k).await?);
            }
            self.view.each_keys.extend(keys);
        }
        self.view.each_apps = apps;
        // The watches are installed afresh (the new nodes added, the old ones dropped).
        self.new_app_keys = true;
        Ok(updates)
    }

    /// Re-reads every node and pushes what changed as one batch. A read that fails half-way
    /// sends nothing: the rule nodes' last pushed contents are put back and the provider
    /// list is pushed by the next read whatever it finds (the provider nodes already
    /// parsed are kept), so that no change read but not sent is lost.
    async fn resync(&mut self, client: &Client) -> Result<(), ZkClientError> {
        let rules = self.view.rules.clone();
        self.unreadable.start_round();
        let result = self.resync_inner(client).await;
        self.unreadable.end_round();
        if result.is_err() {
            self.view.rules = rules;
            self.view.pushed = None;
        }
        result
    }

    async fn resync_inner(&mut self, client: &Client) -> Result<(), ZkClientError> {
        let mut updates = Vec::new();
        // Providers first: rules under the providers' application follow them.
        updates.extend(self.read_providers(client).await?);
        let keys: Vec<RuleKey> = self
            .config
            .following
            .rule_keys
            .iter()
            .chain(&self.view.app_keys)
            .chain(&self.view.each_keys)
            .cloned()
            .collect();
        for key in keys {
            updates.extend(self.read_rule(client, &key).await?);
        }
        // A full read is sent even when it found nothing, so that a merge of several
        // registries knows this one was read (an empty batch applies nothing).
        if updates.is_empty() {
            updates.push(Update::Batch(Vec::new()));
        }
        self.send(updates);
        Ok(())
    }

    /// Re-reads the node at `path` after a watch event (a failed read sends nothing and
    /// is undone as in [`Ctx::resync`]).
    async fn changed(&mut self, client: &Client, path: &str) -> Result<(), ZkClientError> {
        let rules = self.view.rules.clone();
        let result = self.changed_inner(client, path).await;
        self.unreadable.end_round();
        if result.is_err() {
            self.view.rules = rules;
            self.view.pushed = None;
        }
        result
    }

    async fn changed_inner(&mut self, client: &Client, path: &str) -> Result<(), ZkClientError> {
        let updates = if Some(path) == self.providers_dir().as_deref() {
            self.read_providers(client).await?
        } else {
            match self
                .config
                .following
                .rule_keys
                .iter()
                .chain(&self.view.app_keys)
                .chain(&self.view.each_keys)
                .find(|k| rule_path(k) == path)
                .cloned()
            {
                Some(key) => self.read_rule(client, &key).await?.into_iter().collect(),
                None => Vec::new(),
            }
        };
        self.send(updates);
        Ok(())
    }
}
