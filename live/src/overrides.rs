//! Applying Dubbo's override rules (`configurators`) to provider URLs before a snapshot is
//! prepared: which rules apply in which order, from which side, and what a `disabled`
//! provider becomes (nothing: routers never see it).
//!
//! Parsing and matching are [`routechain_rules::configurators`]'s; this module holds the
//! order Dubbo's `RegistryDirectory` applies them in and the policy for `side: provider`.

use std::collections::BTreeMap;
use std::sync::Arc;

use routechain_core::Url;
use routechain_rules::configurators::{OverrideEntry, OverrideRule, Side, View};

use crate::RuleKey;

/// What the overrides are applied from.
pub(crate) struct OverrideContext<'a> {
    /// The consumer's host (`side: consumer` items' `addresses`); empty when unknown, then
    /// only items for any address (`0.0.0.0`) apply.
    pub consumer_host: &'a str,
    /// The consumer's application.
    pub consumer_app: Option<&'a str>,
    /// Also apply `side: provider` items (the chain's `apply_provider_overrides`).
    pub provider_side: bool,
}

/// The rules in the order Dubbo applies them: the legacy `override://` URLs, then the
/// application-scope nodes, then the service-scope nodes, then the chain file's
/// `overrides:` files; within each, Dubbo's configurator order (any host first, then
/// by `priority`), so that later (more specific) entries win.
pub(crate) fn ordered<'a>(
    nodes: &'a BTreeMap<RuleKey, Arc<OverrideRule>>,
    files: impl Iterator<Item = &'a OverrideRule>,
) -> Vec<&'a OverrideEntry> {
    let rank = |k: &RuleKey| match () {
        _ if k.router_type == RuleKey::LEGACY_OVERRIDES => 0,
        _ if !k.key.contains(':') => 1,
        _ => 2,
    };
    let mut keyed: Vec<(&RuleKey, &Arc<OverrideRule>)> = nodes.iter().collect();
    keyed.sort_by_key(|(k, _)| rank(k));
    let mut out = Vec::new();
    let mut push_group = |entries: Vec<&'a OverrideEntry>| {
        let mut entries = entries;
        entries.sort_by_key(|e| e.order_key());
        out.extend(entries);
    };
    for r in 0..3 {
        push_group(
            keyed
                .iter()
                .filter(|(k, _)| rank(k) == r)
                .flat_map(|(_, rule)| rule.entries.iter())
                .collect(),
        );
    }
    for f in files {
        push_group(f.entries.iter().collect());
    }
    out
}

/// The providers as the consumer sees them: every applicable entry's parameters merged
/// (provider-side items first, as the provider would have applied them before
/// registering, then consumer-side items), and the providers that end up disabled left
/// out (Dubbo's `RegistryDirectory`: `disabled` decides when present, else `enabled`).
#[cfg(test)]
pub(crate) fn apply(
    registered: &[Url],
    entries: &[&OverrideEntry],
    cx: &OverrideContext<'_>,
) -> Vec<Url> {
    registered
        .iter()
        .filter_map(|p| apply_one(p, entries, cx))
        .collect()
}

/// One provider as the consumer sees it (see [`apply`]): a clone of `p` when no entry
/// changes it, `None` when it ends up disabled.
pub(crate) fn apply_one(
    p: &Url,
    entries: &[&OverrideEntry],
    cx: &OverrideContext<'_>,
) -> Option<Url> {
    if entries.is_empty() {
        return Some(p.clone());
    }
    let mut changes: Vec<(String, String)> = Vec::new();
    if cx.provider_side {
        let view = View {
            side: Side::Provider,
            host: p.host(),
            application: p.param("application"),
        };
        for e in entries {
            changes.extend(e.configure(p, view).into_iter().flatten());
        }
    }
    let view = View {
        side: Side::Consumer,
        host: cx.consumer_host,
        application: cx.consumer_app,
    };
    for e in entries {
        changes.extend(e.configure(p, view).into_iter().flatten());
    }
    let url = if changes.iter().all(|(k, v)| p.param(k) == Some(v.as_str())) {
        p.clone()
    } else {
        let mut params: Vec<(&str, &str)> = p.params().collect();
        params.extend(changes.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        Url::from_parts(p.protocol(), p.host(), p.port(), p.path(), params)
    };
    let enabled = match url.param("disabled") {
        Some(d) => d != "true",
        None => url.param("enabled") != Some("false"),
    };
    enabled.then_some(url)
}
