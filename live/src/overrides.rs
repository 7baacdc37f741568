//! Applying Dubbo's override rules (`configurators`) to provider URLs before a snapshot is
//! prepared: which rules apply in which order, from which side, and what a `disabled`
//! provider becomes (nothing: routers never see it).
//!
//! Parsing and matching are [`routechain_rules::configurators`]'s; this module holds the
//! order Dubbo's `RegistryDirectory` applies them in, the policy for `side: provider`, and
//! the override layer of the call parameters ([`layer`]: which keys of a provider's URL a
//! consumer-side rule set, so calls rank them above the consumer's own values).

use std::collections::BTreeMap;
use std::sync::Arc;

use routechain_balance::service::params::is_call_key;
use routechain_balance::{OverrideKeys, OverrideLayer};
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
    // values. The consumer-side ones are Dubbo's override layer ([`layer`]).
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

/// The override layer of the call parameters: the consumer-side `entries` (in Dubbo's
/// order) that set a call parameter, seen from `cx`'s consumer. It tells a call which keys
/// of a provider's URL are the rules' (Dubbo ranks its override URL above the consumer's
/// values), apart from the URL, so routers see only what the registry and the rules give.
/// `None` when no entry sets a call parameter.
pub(crate) fn layer(entries: &[&OverrideEntry], cx: &OverrideContext<'_>) -> Option<Layer> {
    // A v2.7 entry applies from its `side` only (`OverrideEntry::configure`); a legacy one
    // from both.
    let consumer_side = |e: &OverrideEntry| {
        e.url.param("configVersion").is_none_or(str::is_empty)
            || e.url.param("side") == Some("consumer")
    };
    let entries: Vec<OverrideEntry> = entries
        .iter()
        .filter(|e| consumer_side(e) && e.url.params().any(|(k, _)| is_call_key(k)))
        .map(|e| (*e).clone())
        .collect();
    (!entries.is_empty()).then(|| Layer {
        entries,
        consumer_host: cx.consumer_host.to_string(),
        consumer_app: cx.consumer_app.map(str::to_string),
    })
}

/// See [`layer`].
#[derive(Debug)]
pub(crate) struct Layer {
    entries: Vec<OverrideEntry>,
    consumer_host: String,
    consumer_app: Option<String>,
}

impl OverrideKeys for Layer {
    /// The keys the consumer-side entries that apply to `provider` set. The entries are
    /// matched against the URL the consumer sees (the rules merged): the keys a rule
    /// matches on (address, application, service, group, version) are never overridden
    /// (Dubbo strips them from a rule's parameters); only a v3 `match` on a parameter
    /// another rule sets could match otherwise than on the registered URL.
    fn keys(&self, provider: &Url, each: &mut dyn FnMut(&str)) {
        let view = View {
            side: Side::Consumer,
            host: &self.consumer_host,
            application: self.consumer_app.as_deref(),
        };
        for e in &self.entries {
            for (k, _) in e.configure(provider, view).into_iter().flatten() {
                if is_call_key(&k) {
                    each(&k);
                }
            }
        }
    }
}

/// The service's override layer for `entries` seen from `cx`: `old` when the new one is
/// the same (same entries, by their override URL and `match`, from the same consumer: its
/// `Debug` text, which prints all of them), so the published call parameters stay; else
/// the new one.
pub(crate) fn next_layer(
    old: &OverrideLayer,
    entries: &[&OverrideEntry],
    cx: &OverrideContext<'_>,
) -> OverrideLayer {
    let new = layer(entries, cx);
    let old_text = old.get().map(|o| format!("{o:?}"));
    if new.as_ref().map(|n| format!("{n:?}")) == old_text {
        return old.clone();
    }
    new.map_or_else(OverrideLayer::default, |n| {
        OverrideLayer::new(std::sync::Arc::new(n))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use routechain_balance::{CallParams, ParamSource, ServiceConfig};
    use routechain_core::Snapshot;

    /// A consumer-side rule's `timeout` is Dubbo's override layer: the service's override
    /// layer names it, so it beats the consumer's own timeout; a provider-side rule's is the
    /// provider's value (the provider would have registered it), below the consumer's. The
    /// merged URL carries nothing but the rule's values.
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
            assert_eq!(
                url.params().count(),
                p.params().count() + 1,
                "getUser.retries"
            );
            let overrides = next_layer(&OverrideLayer::default(), &entries, &cx);
            let mut marked = Vec::new();
            if let Some(l) = overrides.get() {
                l.keys(&url, &mut |k| marked.push(k.to_string()));
            }
            marked.sort();
            let want_keys: &[&str] = match side {
                Side::Consumer => &["getUser.retries", "timeout"],
                Side::Provider => &[],
            };
            assert_eq!(marked, want_keys, "{name}");
            // The same rules again: the same layer (the call parameters stay published).
            let again = next_layer(&overrides, &entries, &cx);
            assert!(again == overrides, "{name}");
            let consumer = ServiceConfig {
                overrides,
                ..consumer.clone()
            };
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
