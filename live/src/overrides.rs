//! Applying Dubbo's override rules (`configurators`) to provider URLs before a snapshot is
//! prepared: which rules apply in which order, from which side, and what a `disabled`
//! provider becomes (nothing: routers never see it).
//!
//! Parsing and matching are [`routechain_rules::configurators`]'s; this module holds the
//! order Dubbo's `RegistryDirectory` applies them in and the policy for `side: provider`.

use std::collections::BTreeMap;
use std::sync::Arc;

use routechain_balance::service::params::{OVERRIDDEN_KEY, is_call_key};
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
    // Provider-side items are what the provider would have registered: its own URL's
    // values. The consumer-side ones are Dubbo's override layer.
    let provider_side = changes.len();
    let view = View {
        side: Side::Consumer,
        host: cx.consumer_host,
        application: cx.consumer_app,
    };
    for e in entries {
        changes.extend(e.configure(p, view).into_iter().flatten());
    }
    // The call parameters a rule set are listed, so the balancer ranks them above the
    // consumer's (Dubbo's override URL is a layer of its own).
    let mut overridden: Vec<&str> = changes[provider_side..]
        .iter()
        .map(|(k, _)| k.as_str())
        .filter(|k| is_call_key(k))
        .collect();
    overridden.sort_unstable();
    overridden.dedup();
    let marker = overridden.join(",");
    let url = if changes.iter().all(|(k, v)| p.param(k) == Some(v.as_str()))
        && p.param(OVERRIDDEN_KEY).unwrap_or("") == marker
    {
        p.clone()
    } else {
        let mut params: Vec<(&str, &str)> = p.params().collect();
        params.extend(changes.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        if !marker.is_empty() {
            params.push((OVERRIDDEN_KEY, &marker));
        }
        Url::from_parts(p.protocol(), p.host(), p.port(), p.path(), params)
    };
    let enabled = match url.param("disabled") {
        Some(d) => d != "true",
        None => url.param("enabled") != Some("false"),
    };
    enabled.then_some(url)
}

#[cfg(test)]
mod tests {
    use super::*;
    use routechain_balance::{CallParams, ParamSource, ServiceConfig};
    use routechain_core::Snapshot;

    /// A consumer-side rule's `timeout` is Dubbo's override layer: listed in the marker,
    /// so it beats the consumer's own timeout; a provider-side rule's is the provider's
    /// value (the provider would have registered it), below the consumer's.
    #[test]
    fn consumer_side_rules_are_marked_and_rank_above_the_consumer() {
        let rule = |side: &str| {
            OverrideRule::parse(
                "r.yaml",
                &format!(
                    "configVersion: v2.7\nscope: service\nkey: svc\nconfigs:\n  - side: {side}\n    parameters: {{timeout: '2500', getUser.retries: '0'}}\n"
                ),
            )
            .unwrap()
        };
        let p =
            Url::parse_provider("dubbo://10.0.0.1:20880/svc?timeout=3000&methods=getUser").unwrap();
        let consumer = ServiceConfig {
            timeout: Some(std::time::Duration::from_millis(700)),
            ..ServiceConfig::default()
        };
        let cases = [
            (
                Side::Consumer,
                "consumer",
                2500,
                ParamSource::OverrideService,
            ),
            (
                Side::Provider,
                "provider",
                700,
                ParamSource::ConsumerService,
            ),
        ];
        for (side, name, want, source) in cases {
            let r = rule(name);
            let entries: Vec<&OverrideEntry> = r.entries.iter().collect();
            let cx = OverrideContext {
                consumer_host: "",
                consumer_app: None,
                provider_side: side == Side::Provider,
            };
            let url = apply_one(&p, &entries, &cx).unwrap();
            assert_eq!(url.param("timeout"), Some("2500"));
            let marked = (side == Side::Consumer).then_some("getUser.retries,timeout");
            assert_eq!(url.param(OVERRIDDEN_KEY), marked);
            let snapshot = Snapshot::new(1, vec![url]);
            let params = CallParams::new(&snapshot, &consumer);
            let m = params.method(Some("getUser"));
            let (timeout, got) = params.timeout(m, Some(0));
            assert_eq!(
                (timeout.unwrap().as_millis() as u64, got),
                (want, source),
                "{name}"
            );
            let retries = params.retries(m, Some(0));
            let want_retries = if side == Side::Consumer {
                (0, ParamSource::OverrideMethod)
            } else {
                (2, ParamSource::Default)
            };
            assert_eq!(retries, want_retries, "{name}");
        }
    }
}
