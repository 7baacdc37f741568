//! The IDC-weight router's per-snapshot state: region → providers and IDC → providers
//! (case-insensitive [`NamedSets`], the rule's names first), the providers degraded by
//! parameter, and the caller's side of the decision for the prepared consumer.

use std::sync::Arc;

use routechain_core::{
    BitSet, DegradedTally, NamedSets, NamedSetsBuilder, NamedSetsEdit, PrepareContext,
    SnapshotEdit, Url, UrlKey, stable_hash,
};

use super::health::Health;
use super::route::HealthySets;
use super::rule::IdcWeightRule;

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

/// `str::trim`, skipped when the value neither starts nor ends with a space (one that could
/// start a whitespace character: ASCII whitespace or a non-ASCII byte).
fn trim(v: &str) -> &str {
    let spaced = |b: Option<&u8>| b.is_some_and(|&b| b.is_ascii_whitespace() || !b.is_ascii());
    let bytes = v.as_bytes();
    if spaced(bytes.first()) || spaced(bytes.last()) {
        v.trim()
    } else {
        v
    }
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
        let n = cx.snapshot.len();
        // The rule's regions and IDCs come first, at the rule's indexes.
        let mut regions = NamedSetsBuilder::new(rule.regions.iter().map(|r| &*r.name), n);
        let mut idcs = NamedSetsBuilder::new(rule.idcs.iter().map(|d| &*d.name), n);
        let mut degraded = BitSet::empty(n);
        // Each provider's IDC and region index, for the health counts.
        let mut idc_of = Vec::with_capacity(n);
        let mut region_of = Vec::with_capacity(n);
        let keys = Keys::new(rule);
        for (i, p) in cx.snapshot.providers().iter().enumerate() {
            if param_degraded(&keys, p) {
                degraded.insert(i);
            }
            let (idc, region) = classify(rule, &keys, p, i, &mut idcs, &mut regions);
            idc_of.push(idc);
            region_of.push(region);
        }
        let (regions, idcs) = (regions.finish(), idcs.finish());
        let health = Health::new(idcs.len(), &idc_of, regions.len(), &region_of, &degraded);
        let prepared = Self::assemble(rule, regions, idcs, degraded, health, cx.consumer);
        tracing::debug!(
            providers = n,
            regions = prepared.regions.len(),
            idcs = prepared.idcs.len(),
            degraded = prepared.degraded.count(),
            "idc-weight router prepared"
        );
        prepared
    }

    /// The state for `cx.snapshot`, which follows this state's snapshot by `edit`: the
    /// region and IDC sets, the param-degraded set and the health counts carried over, and
    /// only the added providers classified ([`TypedRouter::prepare_edit`]). Routes exactly
    /// as [`PreparedIdcWeight::build`] over `cx.snapshot` (a region or IDC name that lost
    /// its last provider is dropped, a new one appended; positions of names the rule does
    /// not list may differ from a fresh build's, which routing never observes: it finds
    /// them by name). Time: the sets and tables in words plus the added providers.
    ///
    /// [`TypedRouter::prepare_edit`]: routechain_core::TypedRouter::prepare_edit
    pub fn edited(&self, edit: &SnapshotEdit, cx: &PrepareContext<'_>) -> Self {
        let rule = &self.rule;
        let added = &cx.snapshot.providers()[edit.added()];
        let start = edit.added().start;
        let mut regions = self.regions.edit(edit);
        let mut idcs = self.idcs.edit(edit);
        let mut idc_of = Vec::with_capacity(added.len());
        let mut region_of = Vec::with_capacity(added.len());
        let keys = Keys::new(rule);
        for (j, p) in added.iter().enumerate() {
            let (idc, region) = classify(rule, &keys, p, start + j, &mut idcs, &mut regions);
            let group = |g: Option<usize>| g.map_or(DegradedTally::NONE, |g| g as u32);
            idc_of.push(group(idc));
            region_of.push(group(region));
        }
        let degraded = edit.bitset(&self.degraded, |i| param_degraded(&keys, &added[i - start]));
        let (idcs, idc_remap) = idcs.finish();
        let (regions, region_remap) = regions.finish();
        // The provisional numbering: the old names, then the new ones.
        let provisional = |sets: &NamedSets, remap: &Option<Vec<u32>>| {
            remap.as_ref().map_or(sets.len(), Vec::len)
        };
        let health = self.health.edited(
            edit,
            (
                &idc_of,
                provisional(&idcs, &idc_remap),
                idc_remap.as_deref(),
            ),
            (
                &region_of,
                provisional(&regions, &region_remap),
                region_remap.as_deref(),
            ),
            [&self.degraded, &degraded],
        );
        Self::assemble(rule, regions, idcs, degraded, health, cx.consumer)
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

    /// The state from its prepared sets (fresh or edited): the healthy sets are derived
    /// from them (O(rule names × providers / 64)) and the consumer's local decision resolved.
    fn assemble(
        rule: &Arc<IdcWeightRule>,
        regions: NamedSets,
        idcs: NamedSets,
        degraded: BitSet,
        health: Health,
        consumer: &Url,
    ) -> Self {
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
        prepared.local = prepared.resolve(rule, consumer);
        prepared
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

/// Files names in a [`NamedSetsBuilder`] (a fresh preparation) or a [`NamedSetsEdit`] (an
/// edit's added providers) alike.
trait Names {
    /// Files provider `i` under `name`; returns the set's position.
    fn add(&mut self, name: &str, i: usize) -> usize;
    /// Files provider `i` under the (pinned) set at position `k`.
    fn add_to(&mut self, k: usize, i: usize);
}

impl Names for NamedSetsBuilder {
    fn add(&mut self, name: &str, i: usize) -> usize {
        NamedSetsBuilder::add(self, name, i)
    }
    fn add_to(&mut self, k: usize, i: usize) {
        NamedSetsBuilder::add_to(self, k, i)
    }
}

impl Names for NamedSetsEdit<'_> {
    fn add(&mut self, name: &str, i: usize) -> usize {
        NamedSetsEdit::add(self, name, i)
    }
    fn add_to(&mut self, k: usize, i: usize) {
        NamedSetsEdit::add_to(self, k, i)
    }
}

/// Files provider `p` (at position `i`) under its IDC and region; returns their positions.
/// The IDC is the IDC param, else the IDC whose subnet holds the provider's address; the
/// region the region param, else the region the rule lists the provider's IDC under.
fn classify(
    rule: &IdcWeightRule,
    keys: &Keys,
    p: &Url,
    i: usize,
    idcs: &mut impl Names,
    regions: &mut impl Names,
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
