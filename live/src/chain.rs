//! [`LiveChain`]: a [`Cluster`] whose providers, rules and settings follow live
//! [`Update`](crate::Update)s, applied atomically, bad ones refused.
//!
//! This file holds the chain, its inputs and its subscriptions; `apply.rs` reads an update
//! into staged changes, `batch.rs` applies a batch of them as one swap.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::sync::{Arc, Mutex};

use routechain_balance::{Cluster, SystemClock};
use routechain_core::{ChainEntry, ChainState, Registry, Snapshot, Url};
use routechain_rules::{ChainFile, LocatedError, YamlDoc};

use crate::dubbo::ServiceKey;
use crate::keys::{
    KeyContext, follows_each_provider_app, follows_provider_app, override_context, reference,
    subscription,
};
use crate::overrides;
use crate::providers::{Registered, TextCache};
pub use crate::report::{LiveOptions, LiveStats, Report};
use crate::{RuleKey, Source, SourceError, SourceHandle};
use apply::Staged;
use routechain_rules::configurators::OverrideRule;
use routechain_rules::load::LoadError;

struct Inputs {
    file: ChainFile,
    /// Config-center rules by key: `Some` the current document, `None` deleted (cleared).
    overrides: HashMap<RuleKey, Option<YamlDoc>>,
    /// Override rules (configurators) by node.
    configurators: BTreeMap<RuleKey, Arc<OverrideRule>>,
    /// The providers as registered, in the chain's stable order, with what the routers see
    /// of each after the override rules (see `crate::providers`).
    registered: Registered,
    /// The providers' application (tag rules are read under it).
    provider_app: Option<String>,
    /// Every provider application present (a mesh entry without `app` reads each one's
    /// `<app>.MESHAPPRULE`).
    provider_apps: BTreeSet<String>,
}

/// A chain whose rules, providers and service settings change while it serves.
///
/// Calls route and balance through [`LiveChain::service`], configured by the chain file's
/// service settings (`load_balance`, `methods`, `skip_degraded`, `retries`, `health`);
/// route-only callers read its state (`service().load()`, lock-free). Updates are applied
/// one at a time by [`LiveChain::apply`] (or the thread [`LiveChain::watch`] starts): each
/// becomes one [`routechain_balance::ClusterChange`] that [`Cluster::apply`] publishes
/// whole, together with the reloaded chain file's service settings, so a call sees the old
/// state and settings or the new ones, never a mix. A rule change recompiles only the
/// entries that subscribe to that rule (the others keep their prepared state); a provider
/// change is an edit of the serving snapshot, which every router follows; both in one
/// update make one change, in which the routers whose rule is unchanged follow the edit and
/// the recompiled ones prepare.
pub struct LiveChain {
    service: Arc<Cluster>,
    registry: Registry,
    /// The reference given in place of the chain file's (`ChainTemplate::live_chain_for`),
    /// kept over chain-file reloads.
    reference: Option<ServiceKey>,
    options: LiveOptions,
    inputs: Mutex<Inputs>,
    /// The parsed URLs of the last provider list pushed as text, by their text: a new list
    /// parses only the lines it does not share with the last one.
    parsed: Mutex<TextCache>,
    stats: LiveStats,
}

impl fmt::Debug for LiveChain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LiveChain")
            .field("service", &self.service)
            .field("stats", &self.stats)
            .finish()
    }
}

fn render(errors: &[LocatedError]) -> String {
    errors
        .iter()
        .map(LocatedError::render)
        .collect::<Vec<_>>()
        .join("\n")
}

impl LiveChain {
    /// A live chain over `file` with no provider yet.
    pub fn new(
        file: ChainFile,
        registry: Registry,
        options: LiveOptions,
    ) -> Result<Self, LoadError> {
        Self::with_providers(file, registry, options, Snapshot::new(1, Vec::new()))
    }

    /// A live chain over `file` serving `providers` from the start.
    pub fn with_providers(
        file: ChainFile,
        registry: Registry,
        options: LiveOptions,
        providers: Snapshot,
    ) -> Result<Self, LoadError> {
        let entries = file.compile(&registry)?;
        Self::build(file, registry, None, entries, options, providers)
    }

    /// A live chain over `file` and its compiled `entries` (its own rules, through
    /// `registry`), serving `providers`; `reference` is kept over chain-file reloads.
    pub(crate) fn build(
        file: ChainFile,
        registry: Registry,
        reference: Option<ServiceKey>,
        entries: impl Into<Arc<[ChainEntry]>>,
        options: LiveOptions,
        providers: Snapshot,
    ) -> Result<Self, LoadError> {
        let generation = providers.generation();
        let (registered, effective, layer) = {
            let consumer = options.consumer.as_ref().or(file.consumer.as_ref());
            let none = BTreeMap::new();
            let entries = overrides::ordered(&none, file.overrides.iter().map(|o| &o.rule));
            let cx = override_context(&file, consumer);
            let layer = overrides::next_layer(&Default::default(), &entries, &cx);
            let (registered, effective) = Registered::new(providers, &entries, &cx);
            (registered, effective, layer)
        };
        let consumer = options
            .consumer
            .clone()
            .or_else(|| file.consumer.clone())
            .unwrap_or_else(Url::empty);
        let state = ChainState::new(
            file.service.as_deref().map(Arc::from),
            Arc::new(Snapshot::from_shared(generation, effective)),
            consumer,
            entries,
        )?
        .with_metrics(options.metrics.then(|| {
            Arc::new(if options.provider_picks {
                routechain_core::ChainMetrics::with_provider_picks()
            } else {
                routechain_core::ChainMetrics::new()
            })
        }));
        let clock = options
            .clock
            .clone()
            .unwrap_or_else(|| Arc::new(SystemClock::new()));
        let config = routechain_balance::ServiceConfig {
            overrides: layer,
            ..file.service_config.clone()
        };
        let service = Cluster::with_clock(state, config, clock);
        Ok(LiveChain {
            service: Arc::new(service),
            registry,
            reference,
            options,
            inputs: Mutex::new(Inputs {
                provider_app: registered.apps.application(),
                provider_apps: registered.apps.applications(),
                registered,
                file,
                overrides: HashMap::new(),
                configurators: BTreeMap::new(),
            }),
            parsed: Mutex::new(TextCache::default()),
            stats: LiveStats::default(),
        })
    }

    /// The service over the chain: routes, balances, fails over and tracks health with the
    /// chain file's service settings, which follow every applied chain-file reload.
    pub fn service(&self) -> &Arc<Cluster> {
        &self.service
    }

    /// The update counters.
    pub fn stats(&self) -> &LiveStats {
        &self.stats
    }

    /// The options.
    pub fn options(&self) -> &LiveOptions {
        &self.options
    }

    /// The chain's service, as the chain file names it.
    pub fn service_name(&self) -> Option<String> {
        self.lock().file.service.clone()
    }

    /// The reference: which providers the chain takes (the chain file's `service`, `group`
    /// and `version`).
    pub fn reference(&self) -> Option<ServiceKey> {
        reference(&self.lock().file)
    }

    /// The consumer's application (the `application` of the consumer URL).
    pub fn consumer_application(&self) -> Option<String> {
        let inputs = self.lock();
        self.consumer_url(&inputs.file)
            .and_then(|c| c.param("application"))
            .map(str::to_string)
    }

    fn consumer_url<'a>(&'a self, file: &'a ChainFile) -> Option<&'a Url> {
        self.options.consumer.as_ref().or(file.consumer.as_ref())
    }

    fn key_context<'a>(&'a self, inputs: &'a Inputs, file: &'a ChainFile) -> KeyContext<'a> {
        KeyContext {
            consumer_app: self.consumer_url(file).and_then(|c| c.param("application")),
            provider_app: inputs.provider_app.as_deref(),
            provider_apps: Some(&inputs.provider_apps),
        }
    }

    /// The config-center nodes the chain follows whatever its providers: the rule keys its
    /// entries subscribe to (entries without a rule of their own), then the override-rule
    /// nodes (`<service key>.configurators`, `<consumer app>.configurators`, the legacy
    /// `override://` directory of the interface); deduplicated, in that order. The nodes
    /// named after the providers' application are [`LiveChain::provider_app_kinds`].
    pub fn subscriptions(&self) -> Vec<RuleKey> {
        let inputs = self.lock();
        let cx = KeyContext {
            provider_app: None,
            provider_apps: None,
            ..self.key_context(&inputs, &inputs.file)
        };
        let mut keys: Vec<RuleKey> = Vec::new();
        let mut push = |k: RuleKey| {
            if !keys.contains(&k) {
                keys.push(k);
            }
        };
        for def in inputs.file.entries.iter() {
            if follows_provider_app(def) {
                continue;
            }
            if let Some(k) = subscription(&inputs.file, def, cx) {
                push(k);
            }
        }
        if let Some(r) = reference(&inputs.file) {
            push(RuleKey::new(r.rule_key(), RuleKey::CONFIGURATORS));
            if let Some(app) = cx.consumer_app {
                push(RuleKey::new(app, RuleKey::CONFIGURATORS));
            }
            push(RuleKey::new(r.interface.clone(), RuleKey::LEGACY_OVERRIDES));
        }
        keys
    }

    /// The kinds of node read under the providers' application: the types of the entries
    /// that follow it (tag, mesh), and `configurators` when the chain sets
    /// `apply_provider_overrides` (a provider's own application-scope override rules, such
    /// as Dubbo's documented "disable a provider" rule).
    pub fn provider_app_kinds(&self) -> Vec<String> {
        let inputs = self.lock();
        let mut kinds: Vec<String> = Vec::new();
        for def in inputs.file.entries.iter() {
            if follows_provider_app(def)
                && !follows_each_provider_app(def)
                && !kinds.contains(&def.type_name)
            {
                kinds.push(def.type_name.clone());
            }
        }
        if inputs.file.apply_provider_overrides {
            kinds.push(RuleKey::CONFIGURATORS.to_string());
        }
        kinds
    }

    /// The kinds of node read under *every* provider application present, each followed
    /// from when the application's first provider appears until its last one leaves:
    /// `mesh` when a mesh entry names no `app` (Dubbo's `<app>.MESHAPPRULE` per provider
    /// application).
    pub fn each_provider_app_kinds(&self) -> Vec<String> {
        let inputs = self.lock();
        if inputs.file.entries.iter().any(follows_each_provider_app) {
            vec![RuleKey::MESH.to_string()]
        } else {
            Vec::new()
        }
    }

    /// The provider applications present (whose `<app>.MESHAPPRULE` a mesh entry without
    /// `app` follows).
    pub fn provider_applications(&self) -> Vec<String> {
        self.lock().provider_apps.iter().cloned().collect()
    }

    /// The providers as registered (before the override rules), for the cache: the serving
    /// snapshot when it is that list (no copy: the common case), else a copy of the list.
    pub(crate) fn registered_providers(&self) -> crate::cache::Registered {
        let inputs = self.lock();
        let serving = self.service.state();
        let list = inputs.registered.list(serving.snapshot());
        if std::ptr::eq(list, &**serving.snapshot()) {
            crate::cache::Registered::Serving(serving.snapshot().clone())
        } else {
            crate::cache::Registered::Copied(list.providers().to_vec())
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inputs> {
        self.inputs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts `source` and a thread that applies its updates in order, calling `on_report`
    /// with every outcome. Dropping the returned [`Watching`] stops both. With
    /// [`LiveOptions::cache`] the applied state is also kept on disk, and served at a start
    /// while the sources deliver nothing ([`crate::cache`]).
    pub fn watch(
        self: &Arc<Self>,
        source: Box<dyn Source>,
        mut on_report: impl FnMut(&Report) + Send + 'static,
    ) -> Result<Watching, SourceError> {
        let name = source.name().to_string();
        let name_for_updates = name.clone();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let handle = source.start(tx)?;
        let me = self.clone();
        let cache = self.options.cache.clone();
        let applier = std::thread::Builder::new()
            .name(format!("routechain-live-{name}"))
            .spawn(move || match cache {
                Some(cache) => {
                    crate::cache::follow(&me, &name_for_updates, cache, rx, &mut on_report);
                }
                None => {
                    while let Some(update) = rx.blocking_recv() {
                        for report in me.apply_from(&name_for_updates, update) {
                            on_report(&report);
                        }
                    }
                }
            })
            .map_err(|e| SourceError::Start {
                source_name: name,
                reason: e.to_string(),
            })?;
        Ok(Watching {
            source: Some(handle),
            applier: Some(applier),
        })
    }

    /// Applies a parsed provider list (prepare + swap; empty-push protection applies). A
    /// provider that is a clone of a serving one ([`Url::ptr_eq`], as a registry source's
    /// cache hands them over) is neither parsed nor copied, and the routers edit their
    /// state for what changed rather than prepare it again.
    pub fn apply_providers(&self, origin: &str, providers: Vec<Url>) -> Vec<Report> {
        self.observed("api", || {
            self.apply_parsed(vec![Staged::Providers {
                change: format!("providers from {origin} ({} URL(s))", providers.len()),
                providers,
            }])
        })
    }
}

/// A source and the thread applying its updates; dropping it stops both.
pub struct Watching {
    source: Option<SourceHandle>,
    applier: Option<std::thread::JoinHandle<()>>,
}

impl fmt::Debug for Watching {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Watching")
            .field("source", &self.source)
            .finish()
    }
}

impl Drop for Watching {
    fn drop(&mut self) {
        // Stopping the source drops its sender, which ends the applier's loop.
        drop(self.source.take());
        if let Some(t) = self.applier.take() {
            let _ = t.join();
        }
    }
}

mod apply;
mod batch;
#[cfg(test)]
pub(crate) mod tests;
