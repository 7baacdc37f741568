//! [`LiveChain`]: a [`Chain`] that applies [`Update`]s atomically and refuses bad ones.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use routechain_balance::{Service, ServiceConfig, SystemClock};
use routechain_core::{
    Chain, ChainEntry, ChainState, DegradedSet, PrepareError, Registry, Snapshot, SnapshotEdit, Url,
};
use routechain_rules::{ChainFile, EntryDef, LocatedError, RuleOverride, RuleSource, YamlDoc};

use crate::dubbo::ServiceKey;
use crate::keys::{
    KeyContext, follows_each_provider_app, follows_key, follows_provider_app, override_context,
    reference, rule_for, subscription,
};
use crate::overrides;
use crate::providers::{AppCounts, Registered, TextCache, follow, parse_providers_reusing};
pub use crate::report::{LiveOptions, LiveStats, Report};
use crate::{RuleEvent, RuleKey, Source, SourceError, SourceHandle, Update};
use routechain_rules::configurators::OverrideRule;
use routechain_rules::load::{self, LoadError};

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
/// Calls route through [`LiveChain::chain`] (lock-free) or route and balance through
/// [`LiveChain::service`], the [`Service`] over the same chain, configured by the chain
/// file's service settings (`load_balance`, `methods`, `skip_degraded`, `retries`,
/// `health`). Updates are applied one at a time by [`LiveChain::apply`] (or the thread
/// [`LiveChain::watch`] starts): each builds a new [`ChainState`] from the current one and
/// swaps it in whole, together with the reloaded chain file's service settings, so a call
/// sees the old state and settings or the new ones, never a mix. A rule change recompiles
/// only the entries that subscribe to that rule (the others keep their prepared state); a
/// provider change re-prepares every router over the new snapshot; both in one update make
/// one swap.
pub struct LiveChain {
    service: Arc<Service>,
    registry: Registry,
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
        let generation = providers.generation();
        let (registered, effective) = {
            let consumer = options.consumer.as_deref().or(file.consumer.as_ref());
            let none = BTreeMap::new();
            let entries = overrides::ordered(&none, file.overrides.iter().map(|o| &o.rule));
            Registered::new(providers, &entries, &override_context(&file, consumer))
        };
        let state = load::build_state(
            &file,
            &registry,
            Arc::new(Snapshot::from_shared(generation, effective)),
            options.consumer.clone(),
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
        let service = Service::with_clock(
            Arc::new(Chain::new(state)),
            file.service_config.clone(),
            clock,
        );
        Ok(LiveChain {
            service: Arc::new(service),
            registry,
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

    /// The chain calls route through (`chain().load()` per call).
    pub fn chain(&self) -> &Arc<Chain> {
        self.service.chain()
    }

    /// The service over the chain: routes, balances, fails over and tracks health with the
    /// chain file's service settings, which follow every applied chain-file reload.
    pub fn service(&self) -> &Arc<Service> {
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
        self.options.consumer.as_deref().or(file.consumer.as_ref())
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
        for def in &inputs.file.entries {
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
        for def in &inputs.file.entries {
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

    fn lock(&self) -> std::sync::MutexGuard<'_, Inputs> {
        self.inputs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts `source` and a thread that applies its updates in order, calling `on_report`
    /// with every outcome. Dropping the returned [`Watching`] stops both.
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
        let applier = std::thread::Builder::new()
            .name(format!("routechain-live-{name}"))
            .spawn(move || {
                while let Some(update) = rx.blocking_recv() {
                    for report in me.apply_from(&name_for_updates, update) {
                        on_report(&report);
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

    /// Applies a parsed provider list (prepare + swap; empty-push protection applies). The
    /// benchmark hook for "prepare and swap N providers".
    pub fn apply_providers(&self, origin: &str, providers: Vec<Url>) -> Vec<Report> {
        self.apply_shared_providers(origin, providers.into_iter().map(Arc::new).collect())
    }

    /// Applies a parsed provider list whose URLs are shared (with the serving snapshot, or
    /// a source's cache): what is the same `Arc` as a serving provider is neither parsed
    /// nor copied.
    pub fn apply_shared_providers(&self, origin: &str, providers: Vec<Arc<Url>>) -> Vec<Report> {
        self.observed("api", || {
            self.apply_parsed(vec![Staged::Providers {
                change: format!("providers from {origin} ({} URL(s))", providers.len()),
                providers,
            }])
        })
    }

    /// Applies one update (see [`LiveChain::apply`], which wraps this with the update
    /// counts by source, the apply-time histogram and the tracing span).
    pub(crate) fn apply_update(&self, update: Update) -> Vec<Report> {
        let mut items = Vec::new();
        flatten(update, &mut items);
        let mut staged = Vec::new();
        let mut reports = Vec::new();
        for item in items {
            // A provider list is described once parsed (counting the entries of a pushed
            // text is a pass over all of it: 33 MB at 100,000 providers).
            let change = match &item {
                Update::Providers { .. } => String::new(),
                other => other.describe(),
            };
            match item {
                Update::Status { source, message } => {
                    tracing::info!(source = %source, "{message}");
                    reports.push(Report::Status { source, message });
                }
                Update::Providers { origin, text } => {
                    let (providers, skipped) = {
                        let mut cache = self.parsed.lock().unwrap_or_else(|p| p.into_inner());
                        parse_providers_reusing(&origin, text, &mut cache)
                    };
                    let change = match skipped.len() {
                        0 => format!("providers from {origin} ({} URL(s))", providers.len()),
                        n => format!(
                            "providers from {origin} ({} URL(s), {n} skipped)",
                            providers.len()
                        ),
                    };
                    for s in skipped {
                        self.stats.skipped.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!(location = %s.location, "skipped provider: {}", s.reason);
                        reports.push(Report::Skipped {
                            location: s.location,
                            reason: s.reason,
                        });
                    }
                    staged.push(Staged::Providers { change, providers });
                }
                Update::Rule { key, event, origin } if key.is_override() => {
                    let rule = match event {
                        RuleEvent::Deleted => None,
                        RuleEvent::Added(text) | RuleEvent::Modified(text) => {
                            match OverrideRule::parse(&origin, &text) {
                                Ok(rule) => Some(Arc::new(rule)),
                                Err(errors) => {
                                    reports.push(self.refuse(change, render(&errors)));
                                    continue;
                                }
                            }
                        }
                    };
                    staged.push(Staged::Overrides { change, key, rule });
                }
                Update::Rule { key, event, origin } => {
                    let doc = match event {
                        RuleEvent::Deleted => None,
                        RuleEvent::Added(text) | RuleEvent::Modified(text) => {
                            // A mesh rule is a stream of documents (`<app>.MESHAPPRULE`).
                            let parsed = if key.router_type == RuleKey::MESH {
                                YamlDoc::parse_stream(origin, &text)
                            } else {
                                YamlDoc::parse(origin, &text)
                            };
                            match parsed {
                                Ok(doc) => Some(doc),
                                Err(e) => {
                                    reports.push(self.refuse(change, e.render()));
                                    continue;
                                }
                            }
                        }
                    };
                    staged.push(Staged::Rule { change, key, doc });
                }
                Update::ChainFile(path) => match ChainFile::load(&path) {
                    Ok(file) => staged.push(Staged::Chain {
                        change,
                        file: Box::new(file),
                    }),
                    Err(errors) => reports.push(self.refuse(change, render(&errors))),
                },
                Update::Batch(_) => {}
            }
        }
        if !staged.is_empty() {
            reports.extend(self.apply_parsed(staged));
        }
        reports
    }

    fn refuse(&self, change: String, reason: String) -> Report {
        self.stats.refused.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(change = %change, "refused update: {reason}");
        Report::Refused { change, reason }
    }

    fn apply_parsed(&self, staged: Vec<Staged>) -> Vec<Report> {
        let mut inputs = self.lock();
        let current = self.chain().state();
        let mut reports = Vec::new();
        let mut new_file: Option<ChainFile> = None;
        let mut overrides = inputs.overrides.clone();
        let mut configurators = inputs.configurators.clone();
        // The new registered list (stable order), its edit from the current one (valid when
        // it follows the current list directly: the batch's first list) and applications.
        let mut pending: Option<(Snapshot, SnapshotEdit, AppCounts, bool)> = None;
        // The override rules changed: every provider's view is recomputed.
        let mut rules_changed = false;
        // The generation of a new provider snapshot.
        let generation = current.snapshot().generation() + 1;
        let mut provider_app = inputs.provider_app.clone();
        let mut provider_apps = inputs.provider_apps.clone();
        let mut entries: Option<Vec<ChainEntry>> = None;
        let mut changes = Vec::new();
        // Changes that take effect only through the provider list (providers, override
        // rules): applied when the providers the routers see change, else ignored.
        let mut provider_changes: Vec<(String, &'static str)> = Vec::new();
        for item in staged {
            match item {
                Staged::Chain { change, file } => {
                    // Entries whose definition and rule are unchanged keep their compiled
                    // router (and so their prepared indexes); the others compile.
                    let old_file = new_file.as_ref().unwrap_or(&inputs.file);
                    let old_entries = entries
                        .clone()
                        .unwrap_or_else(|| current.entries().to_vec());
                    let same_context = old_file.service == file.service
                        && old_file.group == file.group
                        && old_file.version == file.version
                        && old_file.base_dir == file.base_dir
                        && self.consumer_url(old_file).map(Url::raw)
                            == self.consumer_url(&file).map(Url::raw);
                    let cx = KeyContext {
                        consumer_app: self
                            .consumer_url(&file)
                            .and_then(|c| c.param("application")),
                        provider_app: provider_app.as_deref(),
                        provider_apps: Some(&provider_apps),
                    };
                    let mut compiled = Vec::with_capacity(file.entries.len());
                    let mut errors = Vec::new();
                    for (pos, def) in file.entries.iter().enumerate() {
                        let kept = old_entries.get(pos).filter(|_| {
                            same_context
                                && old_file
                                    .entries
                                    .get(pos)
                                    .is_some_and(|old| same_entry(old_file, old, &file, def))
                        });
                        if let Some(e) = kept {
                            compiled.push(e.clone());
                            continue;
                        }
                        match file.compile_entry(
                            &self.registry,
                            def,
                            rule_for(&file, &overrides, def, cx).get(),
                        ) {
                            Ok(e) => compiled.push(e),
                            Err(mut es) => errors.append(&mut es),
                        }
                    }
                    if errors.is_empty() {
                        let settings_changed = match &new_file {
                            Some(f) => f.service_config != file.service_config,
                            None => *self.service.config() != file.service_config,
                        };
                        let overrides_changed = old_file.apply_provider_overrides
                            != file.apply_provider_overrides
                            || old_file
                                .overrides
                                .iter()
                                .map(|o| (&o.path, &o.text))
                                .ne(file.overrides.iter().map(|o| (&o.path, &o.text)));
                        entries = Some(compiled);
                        new_file = Some(*file);
                        let change = if settings_changed {
                            format!("{change} (service settings changed)")
                        } else {
                            change
                        };
                        if overrides_changed || !same_context {
                            // The providers are recomputed below with the new overrides.
                            rules_changed = true;
                        }
                        changes.push(change);
                    } else {
                        reports.push(self.refuse(change, render(&errors)));
                    }
                }
                Staged::Rule { change, key, doc } => {
                    let file = new_file.as_ref().unwrap_or(&inputs.file);
                    let cx = KeyContext {
                        consumer_app: self.consumer_url(file).and_then(|c| c.param("application")),
                        provider_app: provider_app.as_deref(),
                        provider_apps: Some(&provider_apps),
                    };
                    let subscribed: Vec<(usize, &EntryDef)> = file
                        .entries
                        .iter()
                        .enumerate()
                        .filter(|(_, d)| follows_key(file, d, &key, cx))
                        .collect();
                    if subscribed.is_empty() {
                        // Kept: an entry may follow this key later (a new providers'
                        // application, a reloaded chain file).
                        overrides.insert(key, doc);
                        reports.push(Report::Ignored {
                            change,
                            reason: "no chain entry subscribes to this rule".into(),
                        });
                        continue;
                    }
                    // Tentatively in place (an entry following each provider application
                    // composes its rule from all of them); taken back if refused.
                    let previous = overrides.insert(key.clone(), doc);
                    let rule = match overrides.get(&key) {
                        Some(Some(d)) => RuleOverride::Doc(d),
                        _ => RuleOverride::Cleared,
                    };
                    let mut compiled = Vec::new();
                    let mut errors = Vec::new();
                    for (pos, def) in &subscribed {
                        let each = follows_each_provider_app(def);
                        // The node's text alone first, so that its errors are located in it.
                        match file.compile_entry(&self.registry, def, rule) {
                            Ok(e) if !each => compiled.push((*pos, e)),
                            Ok(_) => {}
                            Err(mut es) => {
                                errors.append(&mut es);
                                continue;
                            }
                        }
                        if each {
                            match file.compile_entry(
                                &self.registry,
                                def,
                                rule_for(file, &overrides, def, cx).get(),
                            ) {
                                Ok(e) => compiled.push((*pos, e)),
                                Err(mut es) => errors.append(&mut es),
                            }
                        }
                    }
                    if !errors.is_empty() {
                        match previous {
                            Some(p) => overrides.insert(key, p),
                            None => overrides.remove(&key),
                        };
                        reports.push(self.refuse(change, render(&errors)));
                        continue;
                    }
                    let es = entries.get_or_insert_with(|| current.entries().to_vec());
                    for (pos, e) in compiled {
                        if let Some(slot) = es.get_mut(pos) {
                            *slot = e;
                        }
                    }
                    changes.push(change);
                }
                Staged::Overrides { change, key, rule } => {
                    match rule {
                        Some(r) => configurators.insert(key, r),
                        None => configurators.remove(&key),
                    };
                    rules_changed = true;
                    provider_changes.push((change, "the override rules change no provider"));
                }
                Staged::Providers { change, providers } => {
                    let serving = pending
                        .as_ref()
                        .map_or(inputs.registered.list(current.snapshot()).len(), |p| {
                            p.0.len()
                        });
                    if providers.is_empty() && serving > 0 && self.options.protect_empty {
                        self.stats.held_back.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!(change = %change, "empty provider list held back");
                        reports.push(Report::HeldBack {
                            change,
                            serving: current.snapshot().len(),
                        });
                        continue;
                    }
                    // Tag entries follow the providers' application; a mesh entry without
                    // `app` follows every provider application present.
                    // The list in stable order and its edit, by pointer: the providers kept
                    // are the same URLs (the text cache, a registry source's node cache).
                    let (list, edit, counts) = match &pending {
                        None => follow(
                            inputs.registered.list(current.snapshot()),
                            &inputs.registered.apps,
                            providers,
                            generation,
                        ),
                        Some((list, _, counts, _)) => follow(list, counts, providers, generation),
                    };
                    let app = counts.application();
                    let apps = counts.applications();
                    let app_changed = app != provider_app;
                    let apps_changed = apps != provider_apps;
                    if app_changed || apps_changed {
                        let file = new_file.as_ref().unwrap_or(&inputs.file);
                        // An application whose last provider left is unsubscribed: its
                        // rule is forgotten (read afresh if it comes back), unless an entry
                        // names it.
                        let cx_old = KeyContext {
                            consumer_app: None,
                            provider_app: None,
                            provider_apps: None,
                        };
                        for gone in provider_apps.difference(&apps) {
                            let key = RuleKey::new(gone.clone(), RuleKey::MESH);
                            if !file
                                .entries
                                .iter()
                                .any(|d| subscription(file, d, cx_old).as_ref() == Some(&key))
                            {
                                overrides.remove(&key);
                            }
                        }
                        let cx = KeyContext {
                            consumer_app: self
                                .consumer_url(file)
                                .and_then(|c| c.param("application")),
                            provider_app: app.as_deref(),
                            provider_apps: Some(&apps),
                        };
                        let mut errors = Vec::new();
                        let mut compiled = Vec::new();
                        for (pos, def) in file.entries.iter().enumerate() {
                            let each = follows_each_provider_app(def);
                            let follows = if each {
                                apps_changed
                            } else {
                                app_changed && follows_provider_app(def)
                            };
                            if !follows {
                                continue;
                            }
                            match file.compile_entry(
                                &self.registry,
                                def,
                                rule_for(file, &overrides, def, cx).get(),
                            ) {
                                Ok(e) => compiled.push((pos, e)),
                                Err(mut es) => errors.append(&mut es),
                            }
                        }
                        if !errors.is_empty() {
                            reports.push(self.refuse(change, render(&errors)));
                            continue;
                        }
                        if !compiled.is_empty() {
                            let es = entries.get_or_insert_with(|| current.entries().to_vec());
                            for (pos, e) in compiled {
                                if let Some(slot) = es.get_mut(pos) {
                                    *slot = e;
                                }
                            }
                            changes.push(if app_changed {
                                format!(
                                    "providers' application {} (tag and mesh rules follow it)",
                                    app.as_deref().unwrap_or("(none)")
                                )
                            } else {
                                format!(
                                    "provider applications {} (mesh rules follow each)",
                                    apps.iter().cloned().collect::<Vec<_>>().join(", ")
                                )
                            });
                        }
                        provider_app = app;
                        provider_apps = apps;
                    }
                    let direct = pending.is_none();
                    pending = Some((list, edit, counts, direct));
                    provider_changes.push((change, "the provider list is unchanged"));
                }
            }
        }
        // The providers the routers see: the registered ones with the override rules, as an
        // edit of the serving snapshot.
        let mut derived = None;
        let mut snapshot: Option<Arc<Snapshot>> = None;
        let mut edit: Option<SnapshotEdit> = None;
        if pending.is_some() || rules_changed {
            let file = new_file.as_ref().unwrap_or(&inputs.file);
            let ordered =
                overrides::ordered(&configurators, file.overrides.iter().map(|o| &o.rule));
            let next = pending.map(|(list, edit, counts, direct)| {
                // Several lists in one batch: the last one's edit from the current list
                // (its order is the current one's for the providers kept).
                if direct {
                    (list, edit, counts)
                } else {
                    let (list, edit) = inputs
                        .registered
                        .list(current.snapshot())
                        .edit_to(generation, list.providers());
                    (list, edit, counts)
                }
            });
            let d = inputs.registered.derive(
                next,
                rules_changed,
                &ordered,
                &override_context(file, self.consumer_url(file)),
                current.snapshot(),
                generation,
            );
            if d.edit.as_ref().is_some_and(SnapshotEdit::is_identity) {
                for (change, reason) in provider_changes {
                    reports.push(Report::Ignored {
                        change,
                        reason: reason.into(),
                    });
                }
            } else {
                changes.extend(provider_changes.into_iter().map(|(c, _)| c));
                snapshot = Some(Arc::new(d.snapshot));
                // An edit that changes more providers than the new list holds (a list
                // replaced wholesale) is prepared afresh: cheaper than following it.
                edit = d.edit.filter(|e| e.changes() <= e.new_len());
            }
            derived = Some(d.registered);
        }
        if changes.is_empty() {
            // Nothing the routers see changed; what was read is kept for later.
            inputs.overrides = overrides;
            inputs.configurators = configurators;
            if let Some(r) = derived {
                inputs.registered = r;
            }
            return reports;
        }
        let change = changes.join(" + ");
        // A chain file with another service or consumer prepares everything afresh; otherwise
        // routers that are the same as before keep their prepared state.
        let consumer_raw = |f: &ChainFile| f.consumer.as_ref().map(|c| c.raw().to_string());
        let fresh = new_file.as_ref().filter(|f| {
            f.service != inputs.file.service
                || (self.options.consumer.is_none()
                    && consumer_raw(f) != consumer_raw(&inputs.file))
        });
        // A reloaded chain file brings its service settings; they swap with the state.
        let old_config = self.service.config();
        let config: Option<ServiceConfig> = new_file
            .as_ref()
            .map(|f| f.service_config.clone())
            .filter(|c| *c != *old_config);
        let result = match (&snapshot, &edit) {
            // Providers changed alone: every router, the balancers and health follow the
            // edit (routers that cannot prepare afresh).
            (Some(s), Some(e)) if fresh.is_none() && entries.is_none() => {
                self.service.update_edited(config, e, |cur, degraded| {
                    cur.with_edit(s.clone(), e, degraded)
                })
            }
            _ => self
                .service
                .update(config, |cur| -> Result<ChainState, PrepareError> {
                    if let Some(file) = fresh {
                        let snap = snapshot.clone().unwrap_or_else(|| cur.snapshot().clone());
                        let consumer = self
                            .options
                            .consumer
                            .clone()
                            .or_else(|| file.consumer.clone().map(Arc::new))
                            .unwrap_or_else(|| Arc::new(Url::empty()));
                        return ChainState::new(
                            file.service.as_deref().map(Arc::from),
                            snap,
                            consumer,
                            entries.clone().unwrap_or_default(),
                        );
                    }
                    match (&snapshot, &entries) {
                        (Some(s), Some(e)) => cur.with_snapshot_and_entries(
                            s.clone(),
                            Arc::new(DegradedSet::new(s.len())),
                            e.clone(),
                        ),
                        (Some(s), None) => {
                            cur.with_snapshot(s.clone(), Arc::new(DegradedSet::new(s.len())))
                        }
                        (None, Some(e)) => cur.with_entries(e.clone()),
                        (None, None) => cur.with_entries(cur.entries().clone()),
                    }
                }),
        };
        match result {
            Ok(state) => {
                if let Some(file) = new_file {
                    inputs.file = file;
                }
                inputs.overrides = overrides;
                inputs.configurators = configurators;
                if let Some(r) = derived {
                    inputs.registered = r;
                }
                inputs.provider_app = provider_app;
                inputs.provider_apps = provider_apps;
                // The replaced state is freed off the update path (a 100,000-provider
                // state is not free to drop), and not kept: one state per live chain.
                crate::providers::drop_later(current);
                self.stats.applied.fetch_add(1, Ordering::Relaxed);
                tracing::info!(generation = state.generation(), "applied {change}");
                reports.push(Report::Applied {
                    generation: state.generation(),
                    change,
                    providers: state.snapshot().len(),
                });
            }
            Err(e) => reports.push(self.refuse(change, e.to_string())),
        }
        reports
    }
}

/// True when two chain entries are defined the same: the same entry mapping (type,
/// priority, application, inline rule...) and, for a `rule_file`, the same file and content.
fn same_entry(a_file: &ChainFile, a: &EntryDef, b_file: &ChainFile, b: &EntryDef) -> bool {
    let same_rule = match (&a.rule, &b.rule) {
        (RuleSource::None, RuleSource::None) | (RuleSource::Inline, RuleSource::Inline) => true,
        (RuleSource::File { path: pa, doc: da }, RuleSource::File { path: pb, doc: db }) => {
            let root = routechain_core::FieldPath::root();
            pa == pb && da.same_at(&root, db, &root)
        }
        _ => false,
    };
    same_rule && a_file.doc.same_at(&a.path(), &b_file.doc, &b.path())
}

enum Staged {
    Chain {
        change: String,
        file: Box<ChainFile>,
    },
    Rule {
        change: String,
        key: RuleKey,
        doc: Option<YamlDoc>,
    },
    Providers {
        change: String,
        providers: Vec<Arc<Url>>,
    },
    Overrides {
        change: String,
        key: RuleKey,
        rule: Option<Arc<OverrideRule>>,
    },
}

fn flatten(update: Update, out: &mut Vec<Update>) {
    match update {
        Update::Batch(items) => {
            for item in items {
                flatten(item, out);
            }
        }
        other => out.push(other),
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

#[cfg(test)]
mod tests;
