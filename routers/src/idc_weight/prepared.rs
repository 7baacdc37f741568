//! The IDC-weight router's per-snapshot state: region → providers and IDC → providers
//! (case-insensitive [`NamedSets`], the rule's names first), the providers degraded by
//! parameter, and the caller's side of the decision for the prepared consumer.

use std::sync::Arc;

use routechain_core::{
    BitSet, DegradedTally, NamedSets, NamedSetsBuilder, PrepareContext, SnapshotEdit, Url, UrlKey,
    stable_hash,
};

use super::health::Health;
use super::route::HealthySets;
use super::rule::IdcWeightRule;
use crate::trim;

/// A URL's value for `key`, trimmed; `None` when absent or blank.
fn param<'u>(url: &'u Url, key: &str) -> Option<&'u str> {
    url.get(key).map(str::trim).filter(|v| !v.is_empty())
}

/// The rule's provider keys, resolved once per preparation ([`UrlKey`]: every provider's
/// keys are read without comparing strings).
struct Keys {
    idc: UrlKey,
    region: UrlKey,
    degraded: UrlKey,
}

impl Keys {
    fn new(rule: &IdcWeightRule) -> Self {
        Keys {
            idc: UrlKey::new(&rule.idc_param),
            region: UrlKey::new(&rule.region_param),
            degraded: UrlKey::new(&rule.degraded_param),
        }
    }
}

/// A provider's value for `key`, trimmed; `None` when absent or blank (as [`param`]).
fn provider_param<'u>(url: &'u Url, key: &UrlKey) -> Option<&'u str> {
    url.get_key(key).map(trim).filter(|v| !v.is_empty())
}

/// The caller's side of the decision: its region and what its IDC implies.
#[derive(Debug, Clone, Copy)]
pub(super) struct Local {
    /// The local region (index into the prepared regions), if it names one that exists.
    pub(super) region: Option<usize>,
    /// The strategy when the local region is chosen and has no route table: one of
    /// [`Strategy::Selected`], [`Strategy::Local`], [`Strategy::LocalMissing`],
    /// [`Strategy::Hash`] and [`Strategy::LocalWhole`].
    pub(super) target: Strategy,
}

/// The IDC-weight router prepared for one snapshot.
#[derive(Debug)]
pub struct PreparedIdcWeight {
    /// The rule.
    pub(super) rule: Arc<IdcWeightRule>,
    /// Providers whose `degraded_param` is `true`.
    pub(super) degraded: BitSet,
    /// True when `degraded` has a member (so a call can skip it).
    pub(super) any_degraded: bool,
    /// Region (lower-cased) → providers; the rule's regions first, then others seen.
    pub(super) regions: NamedSets,
    /// IDC (lower-cased) → providers; the rule's IDCs first, then others seen.
    pub(super) idcs: NamedSets,
    /// The decision for the consumer the chain was prepared for.
    pub(super) local: Local,
    /// Provider counts per IDC and region, with live health.
    pub(super) health: Health,
    /// The rule's regions and IDCs minus the param-degraded providers, for the call's
    /// passes (derived from `regions`, `idcs` and `degraded`; rebuilt with them).
    pub(super) healthy_sets: HealthySets,
}

/// How step 3 chose the target.
#[derive(Debug, Clone, Copy)]
pub(super) enum Strategy {
    /// The region's route table; the draw in `0..100` and the IDC it picked.
    Table { draw: u32, idc: usize },
    /// The region's route table with `spillover`: the point drawn along the effective
    /// weights (weight millionths), their total and the IDC picked.
    Spill { point: u64, total: u64, idc: usize },
    /// The region's route table with `spillover`, but no IDC of it has a healthy provider:
    /// the whole region.
    SpillNone,
    /// `selected[local]`.
    Selected { local: usize, target: usize },
    /// The local IDC.
    Local(usize),
    /// The local IDC, which no provider has.
    LocalMissing,
    /// The stable hash of the consumer host.
    Hash(usize),
    /// The whole local region (caller's IDC unknown, no known IDC to hash over).
    LocalWhole,
    /// A cross region without a route table: the whole region.
    CrossWhole,
}

impl Strategy {
    /// The target IDC, `Some(None)` for "an IDC no provider has", `None` for the whole region.
    pub(super) fn target(self) -> Option<Option<usize>> {
        match self {
            Strategy::Table { idc, .. }
            | Strategy::Spill { idc, .. }
            | Strategy::Selected { target: idc, .. }
            | Strategy::Local(idc)
            | Strategy::Hash(idc) => Some(Some(idc)),
            Strategy::LocalMissing => Some(None),
            Strategy::LocalWhole | Strategy::CrossWhole | Strategy::SpillNone => None,
        }
    }
}

impl PreparedIdcWeight {
    /// Indexes `cx.snapshot` for `rule` and resolves the decision for the chain's consumer.
    pub fn build(rule: &Arc<IdcWeightRule>, cx: &PrepareContext<'_>) -> Self {
        Self::prepare(rule, cx, None)
    }

    /// The state for `cx.snapshot`, which follows this state's snapshot by `edit`
    /// ([`TypedRouter::prepare_edit`]): routes exactly as [`PreparedIdcWeight::build`] over
    /// `cx.snapshot`, reading the added providers only.
    ///
    /// [`TypedRouter::prepare_edit`]: routechain_core::TypedRouter::prepare_edit
    pub fn edited(&self, edit: &SnapshotEdit, cx: &PrepareContext<'_>) -> Self {
        Self::prepare(&self.rule, cx, Some((self, edit)))
    }

    /// The one preparation of both: each provider's IDC and region position and its param
    /// degradation, then the sets and counts from those. Over an edit of `base`, the
    /// survivors' positions and degradation are carried from it (a table copy) and only the
    /// added providers are classified; the sets and counts are built from the tables as in a
    /// fresh preparation (their size in words and entries, no URL read). A region or IDC
    /// name left with no provider is dropped, as a fresh preparation would not have it.
    fn prepare(
        rule: &Arc<IdcWeightRule>,
        cx: &PrepareContext<'_>,
        base: Option<(&Self, &SnapshotEdit)>,
    ) -> Self {
        let n = cx.snapshot.len();
        let none = DegradedTally::NONE;
        let (mut regions, mut idcs, mut idc_of, mut region_of, mut degraded, first) = match base {
            Some((old, edit)) => {
                let mut regions = NamedSetsBuilder::with_names(&old.regions, n);
                let mut idcs = NamedSetsBuilder::with_names(&old.idcs, n);
                let (idc_of, region_of) = old.health.groups();
                let idc_of = edit.table(idc_of, |_| none);
                let region_of = edit.table(region_of, |_| none);
                let first = edit.added().start;
                for i in 0..first {
                    if idc_of[i] != none {
                        idcs.add_to(idc_of[i] as usize, i);
                    }
                    if region_of[i] != none {
                        regions.add_to(region_of[i] as usize, i);
                    }
                }
                let degraded = edit.bitset(&old.degraded, |_| false);
                (regions, idcs, idc_of, region_of, degraded, first)
            }
            // The rule's regions and IDCs come first, at the rule's indexes.
            None => (
                NamedSetsBuilder::new(rule.regions.iter().map(|r| &*r.name), n),
                NamedSetsBuilder::new(rule.idcs.iter().map(|d| &*d.name), n),
                vec![none; n],
                vec![none; n],
                BitSet::empty(n),
                0,
            ),
        };
        let keys = Keys::new(rule);
        let providers = cx.snapshot.providers();
        for i in first..n {
            let p = &providers[i];
            if param_degraded(&keys, p) {
                degraded.insert(i);
            }
            let (idc, region) = classify(rule, &keys, p, i, &mut idcs, &mut regions);
            idc_of[i] = idc.map_or(none, |k| k as u32);
            region_of[i] = region.map_or(none, |r| r as u32);
        }
        let (idcs, regions) = (idcs.finish(&mut idc_of), regions.finish(&mut region_of));
        let health = Health::new(
            idcs.len(),
            idc_of.into_boxed_slice(),
            regions.len(),
            region_of.into_boxed_slice(),
            &degraded,
        );
        // The healthy sets are derived from the prepared sets (O(rule names × providers /
        // 64)) and the consumer's local decision resolved.
        let healthy_sets = HealthySets::build(rule, &regions, &idcs, &degraded);
        let mut prepared = PreparedIdcWeight {
            healthy_sets,
            rule: rule.clone(),
            any_degraded: !degraded.is_empty(),
            degraded,
            regions,
            idcs,
            health,
            local: Local {
                region: None,
                target: Strategy::LocalWhole,
            },
        };
        prepared.local = prepared.resolve(rule, cx.consumer);
        tracing::debug!(
            providers = n,
            regions = prepared.regions.len(),
            idcs = prepared.idcs.len(),
            degraded = prepared.degraded.count(),
            "idc-weight router prepared"
        );
        prepared
    }

    /// The local region and IDC names for `consumer`: the rule's `local`, else the consumer
    /// URL's params; a missing region is the region the rule lists the local IDC under.
    pub(super) fn local_names<'s>(
        rule: &'s IdcWeightRule,
        consumer: &'s Url,
    ) -> (Option<&'s str>, Option<&'s str>) {
        let idc = rule
            .local_idc
            .as_deref()
            .or_else(|| param(consumer, &rule.idc_param))
            .or_else(|| {
                // The IDC whose subnet holds the consumer's address.
                rule.options
                    .idc_cidrs
                    .lookup(consumer.host())
                    .map(|k| &*rule.idcs[k].name)
            });
        let region = rule
            .local_region
            .as_deref()
            .or_else(|| param(consumer, &rule.region_param))
            .or_else(|| {
                idc.and_then(|d| rule.idc_index(d))
                    .map(|k| &*rule.regions[rule.idcs[k].region].name)
            });
        (region, idc)
    }

    /// The local decision for `consumer` (no allocation).
    pub(super) fn resolve(&self, rule: &IdcWeightRule, consumer: &Url) -> Local {
        let (region_name, idc_name) = Self::local_names(rule, consumer);
        let region = region_name.and_then(|r| self.regions.find(r));
        let target = match idc_name {
            Some(d) => match self.idcs.find(d) {
                Some(k) => match rule.selected_for(k) {
                    Some(t) => Strategy::Selected {
                        local: k,
                        target: t,
                    },
                    None => Strategy::Local(k),
                },
                None => Strategy::LocalMissing,
            },
            None => match region.and_then(|r| rule.regions.get(r)) {
                Some(r) if !r.idcs.is_empty() => {
                    let h = stable_hash(consumer.host().as_bytes()) % r.idcs.len() as u64;
                    Strategy::Hash(r.idcs.start + h as usize)
                }
                _ => Strategy::LocalWhole,
            },
        };
        Local { region, target }
    }

    pub(super) fn idc_name(&self, k: usize) -> &str {
        self.idcs.name(k)
    }
}

/// True when provider `p`'s `degraded_param` is `true`.
fn param_degraded(keys: &Keys, p: &Url) -> bool {
    p.get_key(&keys.degraded)
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

/// Files provider `p` (at position `i`) under its IDC and region; returns their positions.
/// The IDC is the IDC param, else the IDC whose subnet holds the provider's address; the
/// region the region param, else the region the rule lists the provider's IDC under.
fn classify(
    rule: &IdcWeightRule,
    keys: &Keys,
    p: &Url,
    i: usize,
    idcs: &mut NamedSetsBuilder,
    regions: &mut NamedSetsBuilder,
) -> (Option<usize>, Option<usize>) {
    let idc = match provider_param(p, &keys.idc) {
        Some(v) => Some(idcs.add(v, i)),
        None => rule
            .options
            .idc_cidrs
            .lookup(p.host())
            .inspect(|&k| idcs.add_to(k, i)),
    };
    let region = match provider_param(p, &keys.region) {
        Some(v) => Some(regions.add(v, i)),
        // No region param: the region the rule lists the provider's IDC under (the rule's
        // IDCs are pinned first, at the same positions in a build and an edit).
        None => idc.filter(|&k| k < rule.idcs.len()).map(|k| {
            let r = rule.idcs[k].region;
            regions.add_to(r, i);
            r
        }),
    };
    (idc, region)
}
