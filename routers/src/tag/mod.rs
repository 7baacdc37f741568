//! The tag router (Dubbo's `TagStateRouter`): static tags from the providers' `dubbo.tag`
//! parameter, and a dynamic rule (`<provider-app>.tag-router`) that names tagged providers by
//! address pattern or by parameter `match`.
//!
//! Everything the rule and the snapshot decide is precomputed in [`PreparedTag::build`]:
//! static tag → providers, the untagged providers, every dynamic tag → providers (its
//! address patterns resolved, its `match` entries resolved against the snapshot as Dubbo
//! does on notify), and the failover set (in no dynamic tag, no static tag). Per call the
//! router reads the request tag and force flag, makes one hash lookup by `&str` per tag
//! level tried, and narrows the candidates with bitset operations.
//!
//! The two forces are kept apart, as in Dubbo: the rule's `force` only refuses the fallback
//! when a dynamic tag's addresses match none of the candidates; the request's
//! `dubbo.force.tag` refuses every fallback (and hierarchical fallback `a|b|c` → `a|b` → `a`).

pub mod address;
pub mod rule;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use routechain_core::{
    BitSet, Candidates, Evaluation, ParamIndex, PrepareContext, ProviderSet, RouteContext,
    RouterSpec, RuleError, Snapshot, TypedRouter,
};

pub use self::address::{AddressPattern, HostPort};
pub use self::rule::{RawTagRule, TagRule};

/// The request tag: invocation attachment, else consumer URL parameter; the provider's static
/// tag parameter.
pub const TAG_KEY: &str = "dubbo.tag";
/// The request force flag: invocation attachment, else consumer URL parameter.
pub const FORCE_TAG_KEY: &str = "dubbo.force.tag";
/// Dubbo's order for the tag router.
pub const DEFAULT_PRIORITY: i32 = 100;
/// The separator of hierarchical tags.
pub const TAG_SEPARATOR: char = '|';

/// The `tag` router type. An entry without a rule routes by static tags only.
#[derive(Debug, Clone, Copy, Default)]
pub struct TagRouter;

impl TypedRouter for TagRouter {
    type Raw = RawTagRule;
    type Rule = TagRule;
    type Prepared = PreparedTag;

    fn default_priority(&self, _rule: Option<&TagRule>) -> i32 {
        DEFAULT_PRIORITY
    }

    fn compile(&self, raw: RawTagRule, spec: &RouterSpec<'_>) -> Result<TagRule, Vec<RuleError>> {
        TagRule::compile(raw, spec.rule_path())
    }

    fn without_rule(&self, _spec: &RouterSpec<'_>) -> Result<Option<TagRule>, Vec<RuleError>> {
        Ok(Some(TagRule::static_only()))
    }

    fn prepare(rule: &Arc<TagRule>, cx: &PrepareContext<'_>) -> Result<PreparedTag, String> {
        Ok(PreparedTag::build(cx.snapshot, Some(rule)))
    }

    fn route(
        prepared: &PreparedTag,
        cx: &mut RouteContext<'_>,
        candidates: &mut Candidates,
    ) -> Evaluation {
        prepared.route(cx, candidates)
    }
}

/// What an enabled dynamic rule resolved to over one snapshot.
#[derive(Debug, Clone)]
struct Dynamic {
    /// The rule's `force`.
    force: bool,
    /// Tag name → providers at its addresses (Dubbo's `tagnameToAddresses`, resolved). A tag
    /// is present when it has addresses (or its `match` found providers), even when they
    /// match no provider of this snapshot.
    by_tag: HashMap<Box<str>, ProviderSet>,
    /// Providers in no dynamic tag and with no static tag.
    failover: ProviderSet,
}

/// The tag router's state for one snapshot and rule.
#[derive(Debug, Clone)]
pub struct PreparedTag {
    /// Static tag value → providers.
    static_tags: ParamIndex,
    /// Providers with no (or an empty) static tag.
    untagged: ProviderSet,
    dynamic: Option<Dynamic>,
}

/// Sets of a tag rule resolved over a snapshot, for tests and diagnostics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedTags {
    /// Dynamic tag name → provider indexes, sorted by name.
    pub dynamic: Vec<(String, Vec<usize>)>,
    /// The failover set (in no dynamic tag, no static tag).
    pub failover: Vec<usize>,
    /// The untagged set (no static tag).
    pub untagged: Vec<usize>,
}

impl PreparedTag {
    /// Precomputes every set `rule` (or static routing alone) needs over `snapshot`.
    pub fn build(snapshot: &Snapshot, rule: Option<&TagRule>) -> Self {
        let len = snapshot.len();
        let static_tags = ParamIndex::build(snapshot, TAG_KEY);
        let untagged = {
            let mut b = static_tags.missing().to_bitset();
            if let Some(empty) = static_tags.get("") {
                b.or_assign(&empty.to_bitset());
            }
            ProviderSet::from_bitset(b)
        };
        let dynamic = rule.filter(|r| r.enabled).map(|rule| {
            let at: Vec<HostPort<'_>> = snapshot
                .providers()
                .iter()
                .map(|p| HostPort::new(p.host(), p.port()))
                .collect();
            let mut by_tag: HashMap<Box<str>, BitSet> = HashMap::new();
            // Tags with addresses, in order (a later tag of the same name replaces it).
            for tag in rule.tags.iter().filter(|t| !t.addresses.is_empty()) {
                let set = BitSet::from_fn(len, |i| tag.addresses.iter().any(|a| a.matches(&at[i])));
                by_tag.insert(tag.name.as_str().into(), set);
            }
            // Tags with `match` (v3.0 only): resolved against this snapshot to the addresses
            // of the providers they match; a tag matching nothing is not set.
            if rule.uses_match() {
                for tag in rule.tags.iter().filter(|t| t.addresses.is_empty()) {
                    let Some(matches) = &tag.matches else {
                        continue;
                    };
                    let addresses: HashSet<(&str, u16)> = snapshot
                        .providers()
                        .iter()
                        .filter(|p| matches.iter().all(|m| m.is_match(p.param(&m.key))))
                        .map(|p| (p.host(), p.port()))
                        .collect();
                    if addresses.is_empty() {
                        continue;
                    }
                    // A matched provider without port names its whole host, as Dubbo's
                    // host-only address does.
                    let set = BitSet::from_fn(len, |i| {
                        addresses.contains(&(at[i].host, at[i].port))
                            || addresses.contains(&(at[i].host, 0))
                    });
                    by_tag.insert(tag.name.as_str().into(), set);
                }
            }
            let mut any = BitSet::empty(len);
            for set in by_tag.values() {
                any.or_assign(set);
            }
            let mut failover = untagged.to_bitset();
            failover.and_not_assign(&any);
            Dynamic {
                force: rule.force,
                by_tag: by_tag
                    .into_iter()
                    .map(|(k, v)| (k, ProviderSet::from_bitset(v)))
                    .collect(),
                failover: ProviderSet::from_bitset(failover),
            }
        });
        PreparedTag {
            static_tags,
            untagged,
            dynamic,
        }
    }

    /// True when an enabled dynamic rule is in force.
    pub fn has_dynamic_rule(&self) -> bool {
        self.dynamic.is_some()
    }

    /// The resolved sets, for tests and diagnostics.
    pub fn resolved(&self) -> ResolvedTags {
        let members = |s: &ProviderSet| s.to_bitset().iter().collect::<Vec<_>>();
        let mut dynamic: Vec<(String, Vec<usize>)> = self
            .dynamic
            .iter()
            .flat_map(|d| d.by_tag.iter())
            .map(|(k, v)| (k.to_string(), members(v)))
            .collect();
        dynamic.sort();
        ResolvedTags {
            dynamic,
            failover: members(
                self.dynamic
                    .as_ref()
                    .map_or(&self.untagged, |d| &d.failover),
            ),
            untagged: members(&self.untagged),
        }
    }
}

/// The dynamic tag set for `tag`: the tag itself, or (unless forced) its nearest ancestor
/// level `a|b|c` → `a|b` → `a`. Returns the level found.
fn select_level<'t, 's>(
    by_tag: &'s HashMap<Box<str>, ProviderSet>,
    tag: &'t str,
    forced: bool,
) -> Option<(&'t str, &'s ProviderSet)> {
    if let Some(set) = by_tag.get(tag) {
        return Some((tag, set));
    }
    if forced {
        return None;
    }
    tag.rmatch_indices(TAG_SEPARATOR)
        .map(|(i, _)| &tag[..i])
        .find_map(|level| by_tag.get(level).map(|set| (level, set)))
}

fn non_empty(v: Option<&str>) -> Option<&str> {
    v.filter(|s| !s.is_empty())
}

impl PreparedTag {
    /// Routes one call.
    pub fn route(&self, cx: &mut RouteContext<'_>, candidates: &mut Candidates) -> Evaluation {
        if candidates.is_empty() {
            return Evaluation::Runtime;
        }
        let request = cx.request();
        let consumer = cx.consumer();
        let tag = non_empty(request.attachments.get(TAG_KEY))
            .or_else(|| non_empty(consumer.param(TAG_KEY)));
        let Some(tag) = tag else {
            // An untagged request never reaches a tagged provider.
            match &self.dynamic {
                Some(d) => {
                    d.failover.and_into(candidates);
                    cx.explain(format_args!(
                        "no request tag: providers in no dynamic tag and with no static tag"
                    ));
                }
                None => {
                    self.untagged.and_into(candidates);
                    cx.explain(format_args!("no request tag: providers with no static tag"));
                }
            }
            return Evaluation::Runtime;
        };
        let forced = match non_empty(request.attachments.get(FORCE_TAG_KEY)) {
            Some(v) => v.eq_ignore_ascii_case("true"),
            None => consumer
                .param(FORCE_TAG_KEY)
                .is_some_and(|v| v.eq_ignore_ascii_case("true")),
        };
        let fallback = match &self.dynamic {
            Some(d) => {
                if let Some((level, set)) = select_level(&d.by_tag, tag, forced) {
                    if set.intersects(candidates) {
                        set.and_into(candidates);
                        cx.explain(format_args!(
                            "tag {tag:?}: dynamic addresses of tag {level:?}"
                        ));
                    } else if d.force {
                        candidates.clear();
                        cx.explain(format_args!(
                            "tag {tag:?}: forced: empty (rule force=true and the dynamic addresses of tag {level:?} match no candidate)"
                        ));
                    } else if forced {
                        candidates.clear();
                        cx.explain(format_args!(
                            "tag {tag:?}: forced: empty (dubbo.force.tag=true and the dynamic addresses of tag {level:?} match no candidate)"
                        ));
                    } else {
                        d.failover.and_into(candidates);
                        cx.explain(format_args!(
                            "tag {tag:?}: dynamic addresses of tag {level:?} match no candidate; FAILOVER to untagged (in no dynamic tag, no static tag)"
                        ));
                    }
                    return Evaluation::Runtime;
                }
                &d.failover
            }
            None => &self.untagged,
        };
        match self.static_tags.get(tag) {
            Some(set) if set.intersects(candidates) => {
                set.and_into(candidates);
                cx.explain(format_args!("tag {tag:?}: static tag"));
            }
            _ if forced => {
                candidates.clear();
                cx.explain(format_args!(
                    "tag {tag:?}: forced: empty (dubbo.force.tag=true and no candidate has the static tag)"
                ));
            }
            _ => {
                fallback.and_into(candidates);
                if self.dynamic.is_some() {
                    cx.explain(format_args!(
                        "tag {tag:?}: no candidate has the tag; FAILOVER to untagged (in no dynamic tag, no static tag)"
                    ));
                } else {
                    cx.explain(format_args!(
                        "tag {tag:?}: no candidate has the static tag; FAILOVER to untagged (no static tag)"
                    ));
                }
            }
        }
        Evaluation::Runtime
    }
}
