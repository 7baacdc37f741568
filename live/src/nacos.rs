//! The Nacos source, in Apache Dubbo's layout, and [`NacosAdmin`] to seed it.
//!
//! - Providers (Dubbo's `NacosRegistry`): the instances of the Nacos service
//!   `providers:<interface>:<version>:<group>` (empty parts kept, `$` written `___`) in
//!   the address's group and namespace. A reference with a wildcard or list group or
//!   version (`*`, `a,b`) follows every service of the group whose name matches, as
//!   Dubbo's `NacosServiceName.isCompatible` says, looked up again every
//!   [`NacosConfig::lookup_interval`]. An instance is the provider URL Dubbo builds from it
//!   (`<protocol>://<ip>:<port>/<path>?<metadata>`); `enabled=false` instances are left out
//!   as Dubbo leaves them out, and so (beyond Dubbo, unless the address says
//!   `dubbo-exact=true`) are `healthy=false` ones, and the Nacos weight (×100, Dubbo's
//!   scale) becomes the provider's `weight` when its metadata sets none. Then the
//!   reference's interface, group and version select providers as for ZooKeeper
//!   ([`ServiceKey::exclusion`]). An instance whose URL does not parse is skipped alone.
//! - Rules (Dubbo's Nacos config center): the config `<key>.<type>-router`,
//!   `<app>.MESHAPPRULE` or `<key>.configurators` of group `dubbo` in the address's
//!   namespace, for the same keys the ZooKeeper source reads (rules under the providers'
//!   application and under every provider application included). A config that appears,
//!   changes or is removed is an added, modified or deleted rule.
//!
//! Every change is pushed as the ZooKeeper source pushes it (the same [`Update`]s and
//! status lines, so `watch` prints the same lines and counts the same metrics). The
//! source's clients are on one server at a time (`session.rs`): a server that refuses or
//! falls silent is left for the next, the source says so (the connection state in
//! [`NacosConfig::following`] goes false), and everything is read again on the next one.
//! Meanwhile nothing is pushed: the last good state keeps serving. A rule config one
//! server says it has not while another holds it is no deletion (`Ctx::read_rule`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use nacos_sdk::api::config::ConfigService;
use nacos_sdk::api::naming::{
    NamingChangeEvent, NamingEventListener, NamingService, ServiceInstance,
};
use routechain_core::Url;
use tokio::sync::mpsc::UnboundedSender;

use crate::dubbo::{Exclusion, ServiceKey};
use crate::providers::AppCounts;
use crate::{
    Following, LiveChain, ProviderText, RuleEvent, RuleKey, Skipped, Source, SourceError,
    SourceHandle, Update,
};

mod address;
mod admin;
mod configs;
mod instance;
mod session;

#[cfg(test)]
mod tests;

pub use address::{
    DEFAULT_GROUP, NacosAddress, PASSWORD_ENV as NACOS_PASSWORD_ENV,
    PASSWORD_FILE_ENV as NACOS_PASSWORD_FILE_ENV,
};
pub use admin::NacosAdmin;
pub use instance::{instance_url, provider_instance};

/// The config-center group of every governance rule, as Dubbo reads them.
pub const RULE_GROUP: &str = "dubbo";

/// Why a Nacos operation failed.
#[derive(Debug, thiserror::Error)]
pub enum NacosError {
    /// The address cannot be used (its text, password masked, and why).
    #[error("bad Nacos address `{address}`: {reason}")]
    Address {
        /// The address as given, its password masked.
        address: String,
        /// Why.
        reason: String,
    },
    /// The client could not be made or the server did not answer.
    #[error("cannot connect to Nacos at {address}: {reason}")]
    Connect {
        /// The address, its password masked.
        address: String,
        /// Why.
        reason: String,
    },
    /// An operation failed.
    #[error("Nacos {op} {what}: {reason}")]
    Op {
        /// The operation.
        op: &'static str,
        /// The service or dataId.
        what: String,
        /// The client's error.
        reason: String,
    },
}

/// The dataId of a rule key in Nacos's config center: the ZooKeeper node's last part
/// (`<key>.<type>-router`, `<app>.MESHAPPRULE`, `<key>.configurators`), `$` written `___`
/// and `/` written `-` as Dubbo's `NacosConfigServiceWrapper` writes them.
pub fn rule_data_id(key: &RuleKey) -> String {
    key.to_string().replace('$', "___").replace('/', "-")
}

/// The Nacos service name of a concrete reference, as Dubbo registers its providers:
/// `providers:<interface>:<version>:<group>`, empty parts kept, `$` written `___`.
pub fn service_name(interface: &str, version: &str, group: &str) -> String {
    format!("providers:{interface}:{version}:{group}").replace('$', "___")
}

/// Whether `key` names one service (no `*` and no list in its group or version).
fn concrete(key: &ServiceKey) -> bool {
    let plain = |v: &Option<String>| v.as_deref().is_none_or(|v| v != "*" && !v.contains(','));
    plain(&key.version) && plain(&key.group)
}

/// Whether the service `name` is one a non-concrete reference `key` follows (Dubbo's
/// `NacosServiceName.isCompatible`): four `:`-separated parts, category `providers`, the
/// interface equal; then anything if the reference's version or group is `*`, else each
/// equal to the reference's or one of its list.
fn compatible(key: &ServiceKey, name: &str) -> bool {
    let parts: Vec<&str> = name.split(':').collect();
    let [category, interface, version, group] = parts[..] else {
        return false;
    };
    if category != "providers" || interface.replace("___", "$") != key.interface {
        return false;
    }
    let want_version = key.version.as_deref().unwrap_or("");
    let want_group = key.group.as_deref().unwrap_or("");
    if want_version == "*" || want_group == "*" {
        return true;
    }
    let fits = |want: &str, have: &str| want == have || want.split(',').any(|w| w.trim() == have);
    fits(want_version, version) && fits(want_group, group)
}

/// Whether the source is connected now: shared by the source and whoever shows it
/// (`watch --metrics` exports it as `routechain_registry_connected`).
pub type NacosConnection = crate::connection::RegistryConnection;

/// What the Nacos source follows, and where.
#[derive(Clone)]
pub struct NacosConfig {
    /// The registry address, in the form [`NacosAddress::parse`] takes; a bad one is
    /// refused when the source starts.
    pub address: String,
    /// The rule configs and providers followed, the pause between connection attempts
    /// and the connection's state.
    pub following: Following,
    /// How often a wildcard or list reference looks for new matching services.
    pub lookup_interval: Duration,
    /// How often the rule configs are read. (The client's config listener of `nacos-sdk`
    /// 0.8.3 misses a config's first publication after it listened to the missing config,
    /// and its removal; a read of a config nobody listens to asks the server.)
    pub rule_poll: Duration,
}

/// Shows the address with its password masked.
impl std::fmt::Debug for NacosConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NacosConfig")
            .field("address", &crate::address::mask(&self.address))
            .field("following", &self.following)
            .field("lookup_interval", &self.lookup_interval)
            .field("rule_poll", &self.rule_poll)
            .finish()
    }
}

impl NacosConfig {
    /// Follows what `live` needs: the rule keys its entries subscribe to, and the providers
    /// of its chain file's `service`.
    pub fn for_chain(live: &LiveChain, address: impl Into<String>) -> Self {
        NacosConfig {
            address: address.into(),
            following: Following::for_chain(live),
            lookup_interval: Duration::from_secs(10),
            rule_poll: Duration::from_secs(1),
        }
    }

    /// What is followed from the start, as `watch` lists it: the rule dataIds (group
    /// `dubbo`) and the providers' service name (a pattern for a wildcard reference).
    pub fn watched(&self) -> Vec<String> {
        let mut watched: Vec<String> = self
            .following
            .rule_keys
            .iter()
            .filter(|k| k.router_type != RuleKey::LEGACY_OVERRIDES)
            .map(|k| format!("config {RULE_GROUP}/{}", rule_data_id(k)))
            .collect();
        if let Some(s) = &self.following.service {
            watched.push(format!(
                "service {}",
                service_name(
                    &s.interface,
                    s.version.as_deref().unwrap_or(""),
                    s.group.as_deref().unwrap_or("")
                )
            ));
        }
        watched
    }
}

/// The Nacos [`Source`]: runs its own single-threaded tokio runtime on a thread (the
/// client's own tasks run on the client's runtime).
#[derive(Debug)]
pub struct NacosSource {
    config: NacosConfig,
}

impl NacosSource {
    /// A source following `config`.
    pub fn new(config: NacosConfig) -> Self {
        NacosSource { config }
    }
}

impl Source for NacosSource {
    fn name(&self) -> &str {
        "nacos"
    }

    fn start(self: Box<Self>, tx: UnboundedSender<Update>) -> Result<SourceHandle, SourceError> {
        let start_error = |reason: String| SourceError::Start {
            source_name: "nacos".into(),
            reason,
        };
        let address =
            NacosAddress::parse(&self.config.address).map_err(|e| start_error(e.to_string()))?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| start_error(e.to_string()))?;
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let config = self.config;
        let thread = std::thread::Builder::new()
            .name("routechain-nacos".into())
            .spawn(move || runtime.block_on(session::run(config, address, tx, stop_rx)))
            .map_err(|e| start_error(e.to_string()))?;
        Ok(SourceHandle::new(
            move || {
                let _ = stop_tx.send(true);
            },
            thread,
        ))
    }
}

/// What the client's naming listener reports to the source's loop: a service's
/// instances, as pushed.
struct Event(String, Vec<ServiceInstance>);

struct Listener(UnboundedSender<Event>);

impl NamingEventListener for Listener {
    fn event(&self, event: Arc<NamingChangeEvent>) {
        let instances = event.instances.clone().unwrap_or_default();
        let _ = self.0.send(Event(event.service_name.clone(), instances));
    }
}

/// The clients of one connection, to one server.
struct Clients {
    naming: NamingService,
    config: ConfigService,
    /// The server (`host:port`, its HTTP port).
    server: String,
    /// The address's group (the probe lists it).
    group: String,
}

/// Builds the clients on `server` alone (one of the address's).
async fn connect(address: &NacosAddress, server: &str) -> Result<Clients, NacosError> {
    let failed = |e: nacos_sdk::api::error::Error| NacosError::Connect {
        address: format!("{server} of {address}"),
        reason: e.to_string(),
    };
    let props = || address.client_props().server_addr(server);
    let mut naming = nacos_sdk::api::naming::NamingServiceBuilder::new(props());
    let mut config = nacos_sdk::api::config::ConfigServiceBuilder::new(props());
    if address.has_credentials() {
        naming = naming.enable_auth_plugin_http();
        config = config.enable_auth_plugin_http();
    }
    // Each build sets up its own connection: both at once.
    let (naming, config) = tokio::join!(naming.build(), config.build());
    let (naming, config) = (naming.map_err(failed)?, config.map_err(failed)?);
    Ok(Clients {
        naming,
        config,
        server: server.to_string(),
        group: address.group().to_string(),
    })
}

/// One instance as read: the provider URL taken, or why it is not.
#[derive(Clone)]
enum Read {
    Taken(Url),
    Excluded(&'static str),
}

/// What the source last read.
#[derive(Default)]
struct View {
    rules: HashMap<RuleKey, Option<String>>,
    /// The instances of every followed service (`None`: not read yet).
    instances: BTreeMap<String, Vec<ServiceInstance>>,
    /// The providers taken, in the source's stable order (the ones kept in their order,
    /// new ones appended), by the instance's identity and URL text.
    taken: Vec<(String, Url)>,
    /// The skipped instances of the last list pushed; `None`: no list pushed yet.
    pushed: Option<Vec<String>>,
    /// Skipped instances reported so far (each once while it stays).
    skipped: BTreeSet<String>,
    provider_app: Option<String>,
    app_keys: Vec<RuleKey>,
    each_apps: BTreeSet<String>,
    each_keys: Vec<RuleKey>,
}

struct Ctx<'a> {
    config: &'a NacosConfig,
    address: &'a NacosAddress,
    tx: &'a UnboundedSender<Update>,
    view: View,
}

impl Ctx<'_> {
    fn status(&self, message: impl Into<String>) {
        let _ = self.tx.send(Update::Status {
            source: "nacos".into(),
            message: message.into(),
        });
    }

    fn send(&self, mut updates: Vec<Update>) {
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

    fn origin(&self, what: &str) -> String {
        self.address.location(what)
    }

    /// Every rule key followed now.
    fn keys(&self) -> Vec<RuleKey> {
        self.config
            .following
            .rule_keys
            .iter()
            .chain(&self.view.app_keys)
            .chain(&self.view.each_keys)
            .filter(|k| k.router_type != RuleKey::LEGACY_OVERRIDES)
            .cloned()
            .collect()
    }

    /// The service names to follow now: the reference's, or every compatible one.
    async fn service_names(&self, naming: &NamingService) -> Result<Vec<String>, NacosError> {
        let Some(key) = &self.config.following.service else {
            return Ok(Vec::new());
        };
        if concrete(key) {
            return Ok(vec![service_name(
                &key.interface,
                key.version.as_deref().unwrap_or(""),
                key.group.as_deref().unwrap_or(""),
            )]);
        }
        let mut names = service_list(naming, self.address.group()).await?;
        names.retain(|n| compatible(key, n));
        names.sort();
        Ok(names)
    }

    /// Reads one rule's config and returns the event its change makes, if any.
    ///
    /// A config the server says it has not (not found, or empty) while the source holds
    /// its rule is a deletion only when no other server of the address holds it either:
    /// a server that has not caught up (restarted, or behind the raft leader) answers
    /// `not found` for a config the others hold. Meanwhile the rule keeps serving and the
    /// next read asks again, so a real deletion applies once it has reached the servers
    /// that answer.
    async fn read_rule(
        &mut self,
        clients: &Clients,
        key: &RuleKey,
    ) -> Result<Option<Update>, NacosError> {
        let data_id = rule_data_id(key);
        let now = match clients
            .config
            .get_config(data_id.clone(), RULE_GROUP.to_string())
            .await
        {
            Ok(r) if r.content().is_empty() => None,
            Ok(r) => Some(r.content().clone()),
            Err(nacos_sdk::api::error::Error::ConfigNotFound(_)) => None,
            Err(e) => {
                return Err(NacosError::Op {
                    op: "get config",
                    what: data_id,
                    reason: e.to_string(),
                });
            }
        };
        let held = self.view.rules.get(key).is_some_and(Option::is_some);
        if now.is_none()
            && held
            && configs::held_elsewhere(self.address, &clients.server, &data_id, RULE_GROUP).await
        {
            tracing::debug!(
                server = clients.server,
                "{RULE_GROUP}/{data_id}: not found on the source's server but held by another; \
                 the rule keeps serving"
            );
            return Ok(None);
        }
        let before = self.view.rules.insert(key.clone(), now.clone()).flatten();
        let event = match (before, now) {
            (None, Some(d)) => RuleEvent::Added(d),
            (Some(a), Some(b)) if a != b => RuleEvent::Modified(b),
            (Some(_), None) => RuleEvent::Deleted,
            _ => return Ok(None),
        };
        Ok(Some(Update::Rule {
            key: key.clone(),
            event,
            origin: self.origin(&format!("{RULE_GROUP}/{data_id}")),
        }))
    }

    /// The provider list from the instances read, and the updates it makes: the
    /// providers, if they changed, then the rules under the providers' applications.
    async fn providers(&mut self, clients: &Clients) -> Result<Vec<Update>, NacosError> {
        let Some(service) = self.config.following.service.clone() else {
            return Ok(Vec::new());
        };
        let exact = self.address.dubbo_exact();
        let mut registered = 0;
        let mut excluded: BTreeMap<String, usize> = BTreeMap::new();
        let mut skipped = Vec::new();
        let mut now: Vec<(String, Url)> = Vec::new();
        for (name, instances) in &self.view.instances {
            for i in instances {
                registered += 1;
                let location = self.origin(&format!(
                    "{}/{name}/{}:{}",
                    self.address.group(),
                    i.ip,
                    i.port
                ));
                match instance::read(i, exact) {
                    Err(reason) => skipped.push(Skipped { location, reason }),
                    Ok(Read::Excluded(why)) => *excluded.entry(why.to_string()).or_default() += 1,
                    Ok(Read::Taken(u)) => match service.exclusion(&u) {
                        Some(why) => *excluded.entry(exclusion(why)).or_default() += 1,
                        None => now.push((format!("{name} {}", u.raw()), u)),
                    },
                }
            }
        }
        // The stable order: the providers kept in their order, the new ones appended in
        // the registry's order.
        let new: HashMap<&str, &Url> = now.iter().map(|(k, u)| (k.as_str(), u)).collect();
        let mut taken: Vec<(String, Url)> = self
            .view
            .taken
            .iter()
            .filter(|(k, _)| new.contains_key(k.as_str()))
            .cloned()
            .collect();
        let kept: std::collections::HashSet<&str> = taken.iter().map(|(k, _)| k.as_str()).collect();
        let came: Vec<(String, Url)> = now
            .iter()
            .filter(|(k, _)| !kept.contains(k.as_str()))
            .cloned()
            .collect();
        drop(kept);
        let unchanged = came.is_empty() && taken.len() == self.view.taken.len();
        taken.extend(came);
        skipped.sort_unstable_by(|a, b| a.location.cmp(&b.location));
        let locations: Vec<String> = skipped.iter().map(|s| s.location.clone()).collect();
        if unchanged && self.view.pushed.as_ref() == Some(&locations) {
            return Ok(Vec::new());
        }
        self.view.taken = taken;
        self.view.pushed = Some(locations);
        let urls: Vec<Url> = self.view.taken.iter().map(|(_, u)| u.clone()).collect();
        let names: Vec<&str> = self.view.instances.keys().map(String::as_str).collect();
        let what = match names.as_slice() {
            [one] => one.to_string(),
            _ => format!("{} services", names.len()),
        };
        let mut message = format!(
            "{}: {registered} registered, {} match ({})",
            self.origin(&format!("{}/{what}", self.address.group())),
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
        let now: BTreeSet<String> = skipped.iter().map(|s| s.location.clone()).collect();
        self.view.skipped.retain(|l| now.contains(l));
        let skipped: Vec<Skipped> = skipped
            .into_iter()
            .filter(|s| self.view.skipped.insert(s.location.clone()))
            .collect();
        let counts = AppCounts::of(&urls);
        let mut updates = vec![Update::Providers {
            origin: self.origin(&format!("{}/{what}", self.address.group())),
            text: ProviderText::Parsed { urls, skipped },
        }];
        let app = counts.application();
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
                    "providers' application {app}: following {}",
                    data_ids(&keys)
                ));
                for k in &keys {
                    updates.extend(self.read_rule(clients, k).await?);
                }
                self.view.app_keys = keys;
            }
        }
        let apps = counts.applications();
        if apps != self.view.each_apps && !self.config.following.each_app_kinds.is_empty() {
            let keys_of = |app: &String| -> Vec<RuleKey> {
                self.config
                    .following
                    .each_app_kinds
                    .iter()
                    .map(|k| RuleKey::new(app.clone(), k.clone()))
                    .collect()
            };
            let gone: Vec<String> = self.view.each_apps.difference(&apps).cloned().collect();
            let came: Vec<String> = apps.difference(&self.view.each_apps).cloned().collect();
            for app in &gone {
                let keys = keys_of(app);
                self.view.each_keys.retain(|k| !keys.contains(k));
                for k in &keys {
                    if !self.config.following.rule_keys.contains(k)
                        && !self.view.app_keys.contains(k)
                    {
                        self.view.rules.remove(k);
                    }
                }
                self.status(format!(
                    "application {app} has no provider left: no longer following {}",
                    data_ids(&keys)
                ));
            }
            for app in &came {
                let keys = keys_of(app);
                self.status(format!(
                    "application {app} has providers: following {}",
                    data_ids(&keys)
                ));
                for k in &keys {
                    updates.extend(self.read_rule(clients, k).await?);
                }
                self.view.each_keys.extend(keys);
            }
            self.view.each_apps = apps;
        }
        Ok(updates)
    }
}

fn data_ids(keys: &[RuleKey]) -> String {
    keys.iter()
        .map(|k| format!("{RULE_GROUP}/{}", rule_data_id(k)))
        .collect::<Vec<_>>()
        .join(", ")
}

fn exclusion(why: Exclusion) -> String {
    why.to_string()
}

/// Every service name of `group`, page by page (Nacos lists at most 500 a page).
async fn service_list(naming: &NamingService, group: &str) -> Result<Vec<String>, NacosError> {
    let mut names = Vec::new();
    let mut page = 1;
    loop {
        let (list, total) = naming
            .get_service_list(page, 500, Some(group.to_string()))
            .await
            .map_err(|e| NacosError::Op {
                op: "list services of group",
                what: group.to_string(),
                reason: e.to_string(),
            })?;
        let n = list.len();
        names.extend(list);
        if n == 0 || i64::from(page) * 500 >= i64::from(total) {
            return Ok(names);
        }
        page += 1;
    }
}
