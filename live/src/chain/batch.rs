//! Applying a batch of staged changes as one swap: chain-file reloads and rule changes
//! recompile the entries that follow them, provider lists become an edit of the serving
//! snapshot (with the override rules), and all of it becomes one change of the service's
//! published state: routers whose rule is unchanged derive their state by the edit, the
//! others prepare.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use routechain_balance::{ClusterChange, OverrideLayer, ServiceConfig};
use routechain_core::{ChainEntry, Snapshot, SnapshotEdit, Url};
use routechain_rules::{ChainFile, EntryDef, RuleOverride, RuleSource};

use super::apply::Staged;
use super::{LiveChain, render};
use crate::RuleKey;
use crate::keys::{
    KeyContext, follows_each_provider_app, follows_key, follows_provider_app, override_context,
    rule_for, subscription,
};
use crate::overrides;
use crate::providers::{AppCounts, follow};
use crate::report::Report;

/// A replaced state of this many providers is freed off the update path.
const LARGE_STATE: usize = 4096;

impl LiveChain {
    pub(super) fn apply_parsed(&self, staged: Vec<Staged>) -> Vec<Report> {
        let mut inputs = self.lock();
        let current = self.service.state();
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
        // A new table of several registries (the zone-aware choice per call).
        let mut registries = None;
        for item in staged {
            match item {
                Staged::Registries { change, table } => {
                    let serving = self.service.config();
                    if serving.registries.as_ref().is_some_and(|s| **s == *table) {
                        reports.push(Report::Ignored {
                            change,
                            reason: "the registries list the same providers".into(),
                        });
                    } else {
                        registries = Some(table);
                        changes.push(change);
                    }
                }
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
                            // The serving settings, but for the override layer (the rules')
                            // and the registries' table (the sources').
                            None => {
                                ServiceConfig {
                                    overrides: OverrideLayer::default(),
                                    registries: None,
                                    ..(*self.service.config()).clone()
                                } != file.service_config
                            }
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
        let old_config = self.service.config();
        // The override layer of the call parameters, new when the rules change what it marks.
        let mut layer = old_config.overrides.clone();
        if pending.is_some() || rules_changed {
            let file = new_file.as_ref().unwrap_or(&inputs.file);
            let ordered =
                overrides::ordered(&configurators, file.overrides.iter().map(|o| &o.rule));
            let cx = override_context(file, self.consumer_url(file));
            if rules_changed {
                layer = overrides::next_layer(&layer, &ordered, &cx);
            }
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
                &cx,
                current.snapshot(),
                generation,
            );
            if d.edit.as_ref().is_some_and(SnapshotEdit::is_identity)
                && layer == old_config.overrides
            {
                for (change, reason) in provider_changes {
                    reports.push(Report::Ignored {
                        change,
                        reason: reason.into(),
                    });
                }
            } else if d.edit.as_ref().is_some_and(SnapshotEdit::is_identity) {
                // No provider's URL changed, but which keys the rules set did: the call
                // parameters rank anew (the new layer goes with the settings).
                changes.extend(provider_changes.into_iter().map(|(c, _)| c));
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
        // A reloaded chain file brings its service settings, and the rules their override
        // layer; they swap with the state.
        // The registries' table is the sources', not the chain file's: kept until a new one.
        let config = ServiceConfig {
            overrides: layer,
            registries: registries.or_else(|| old_config.registries.clone()),
            ..new_file
                .as_ref()
                .map_or_else(|| (*old_config).clone(), |f| f.service_config.clone())
        };
        let config = (config != *old_config).then_some(config);
        // Providers changed (alone or with some routers' rules): the balancers, health and
        // every router whose rule is unchanged follow the edit (a router that cannot
        // prepares afresh); a router with a new rule prepares over the new snapshot.
        let result = self.service.apply(ClusterChange {
            providers: snapshot.map(|s| (s, edit)),
            entries: entries.map(Into::into),
            consumer: fresh.map(|file| {
                self.options
                    .consumer
                    .clone()
                    .or_else(|| file.consumer.clone())
                    .unwrap_or_else(Url::empty)
            }),
            service: fresh.map(|file| file.service.as_deref().map(Arc::from)),
            config,
        });
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
                // The replaced state is not kept (one state per live chain); a large one
                // is freed off the update path (a 100,000-provider state is not free to
                // drop), a small one here: handing it over would cost more than freeing it.
                if current.snapshot().len() >= LARGE_STATE {
                    crate::providers::drop_later(current);
                } else {
                    drop(current);
                }
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
