//! Reading one update: its items flattened, each parsed (provider lists through the text
//! cache, rules as YAML, override rules, chain files) into a staged change, the bad ones
//! refused alone; the staged changes are then applied together (`batch.rs`).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use routechain_core::Url;
use routechain_rules::configurators::OverrideRule;
use routechain_rules::{ChainFile, YamlDoc};

use super::{LiveChain, render};
use crate::providers::parse_providers_reusing;
use crate::report::Report;
use crate::{RuleEvent, RuleKey, Update};

impl LiveChain {
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
                    Ok(mut file) => {
                        // A live chain built for a reference of its own keeps it.
                        if let Some(r) = &self.reference {
                            crate::template::set_reference(&mut file, r);
                        }
                        staged.push(Staged::Chain {
                            change,
                            file: Box::new(file),
                        })
                    }
                    Err(errors) => reports.push(self.refuse(change, render(&errors))),
                },
                Update::Unreadable { reason, .. } => reports.push(self.refuse(change, reason)),
                Update::Registries(table) => staged.push(Staged::Registries { change, table }),
                Update::Batch(_) => {}
            }
        }
        if !staged.is_empty() {
            reports.extend(self.apply_parsed(staged));
        }
        reports
    }

    pub(super) fn refuse(&self, change: String, reason: String) -> Report {
        self.stats.refused.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(change = %change, "refused update: {reason}");
        Report::Refused { change, reason }
    }
}

pub(super) enum Staged {
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
        providers: Vec<Url>,
    },
    Overrides {
        change: String,
        key: RuleKey,
        rule: Option<Arc<OverrideRule>>,
    },
    Registries {
        change: String,
        table: Arc<routechain_balance::RegistryTable>,
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
