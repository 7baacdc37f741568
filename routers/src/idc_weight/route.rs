//! The IDC-weight router per call: steps 1 to 5 of the module documentation, each a
//! function over the prepared sets, with no allocation and at most one random draw.

use routechain_core::weighted::{self, Draw, UNIT};
use routechain_core::{
    BitSet, Candidates, Evaluation, NamedSets, ProviderSet, RouteContext, WordMask,
};

use super::health::{Counts, effective_weight, rehash};
use super::prepared::{Local, PreparedIdcWeight, Strategy};
use super::rule::{IdcWeightRule, ROUTE_TABLE_TOTAL};

/// What the health options (`hash_key`, `spillover`, `panic_threshold`) decided in one
/// call, for the explain trace.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Decision {
    /// The call's sticky hash, when `hash_key` found a value in the request.
    pub sticky: Option<u64>,
    /// Spillover between the local region and the cross regions: the point drawn in
    /// `0..UNIT` and the chosen level, when the chosen level's load is below 100%.
    pub spill: Option<(u64, usize)>,
    /// A set the call found in panic.
    pub panic: Option<Panic>,
}

/// The set a call found in panic and its counts.
#[derive(Debug, Clone, Copy)]
pub(super) enum Panic {
    /// The chosen region: health is ignored in it.
    Region(Counts),
    /// The target IDC: its providers are kept, healthy or not.
    Idc(usize, Counts),
}

/// Word `w` of `set` (0 past its end).
#[inline]
fn word(set: &BitSet, w: usize) -> u64 {
    set.words().get(w).copied().unwrap_or(0)
}

/// What the call ended with.
#[derive(Debug, Clone, Copy)]
pub(super) enum Outcome {
    /// Step 4 kept the target (or whole region).
    Target,
    /// The target had no candidate; force → empty.
    ForcedEmpty,
    /// The target had no candidate; fell back to the region's candidates.
    FallbackRegion,
    /// No region had a candidate; force → empty.
    NoRegionForced,
    /// No region had a candidate; fell back to every non-degraded candidate.
    FallbackHealthy,
    /// Every candidate is degraded; fell back to the whole input.
    FallbackInput,
}

/// Per snapshot, each rule region's providers and each rule IDC's providers within its
/// region, minus the providers degraded by parameter: what a call keeps when no provider is
/// live-degraded and no set is in panic, prepared so the call's scan or AND reads one
/// prepared set instead of three (region, IDC, degraded), each read a pass over the
/// snapshot's words. `None`: the set itself (no provider degraded, and for an IDC, every
/// provider of it in its region), not stored twice. Rebuilt with the sets it derives from
/// (O(rule names × providers / 64)).
#[derive(Debug, Clone, Default)]
pub(crate) struct HealthySets {
    /// Per rule region `r`: `region(r) AND NOT degraded`.
    regions: Vec<Option<ProviderSet>>,
    /// Per rule IDC `k`: `idc(k) AND region(rule.idcs[k].region) AND NOT degraded`.
    idcs: Vec<Option<ProviderSet>>,
}

impl HealthySets {
    /// The sets of `rule`'s regions and IDCs, from the prepared `regions` and `idcs` (the
    /// rule's names first, at the rule's indexes) and the param-degraded set.
    pub(crate) fn build(
        rule: &IdcWeightRule,
        regions: &NamedSets,
        idcs: &NamedSets,
        degraded: &BitSet,
    ) -> Self {
        let any_degraded = !degraded.is_empty();
        let region = |r: usize| {
            any_degraded.then(|| {
                let mut set = regions.set(r).to_bitset();
                set.and_not_assign(degraded);
                ProviderSet::from_bitset(set)
            })
        };
        let idc = |k: usize| {
            let r = rule.idcs[k].region;
            let (own, within) = (idcs.set(k), regions.set(r));
            let inside = match own {
                ProviderSet::Dense(b) => b.is_subset(&within.to_bitset()),
                ProviderSet::Sparse { indexes, .. } => {
                    indexes.iter().all(|&i| within.contains(i as usize))
                }
            };
            (any_degraded || !inside).then(|| {
                let mut set = own.to_bitset();
                set.and_assign(&within.to_bitset());
                set.and_not_assign(degraded);
                ProviderSet::from_bitset(set)
            })
        };
        HealthySets {
            regions: (0..rule.regions.len().min(regions.len()))
                .map(region)
                .collect(),
            idcs: (0..rule.idcs.len().min(idcs.len())).map(idc).collect(),
        }
    }
}

impl PreparedIdcWeight {
    /// Routes one call.
    pub fn route(&self, cx: &mut RouteContext<'_>, candidates: &mut Candidates) -> Evaluation {
        let rule = &*self.rule;
        let explaining = cx.explaining();
        let input = if explaining { candidates.count() } else { 0 };
        let healthy = self.healthy(cx, candidates, explaining);

        let local_call;
        let local = if cx.consumer_is_prepared() {
            &self.local
        } else {
            local_call = self.resolve(rule, cx.consumer());
            &local_call
        };

        let options = &rule.options;
        let mut decision = Decision {
            sticky: match &options.hash_key {
                Some(key) => key.hash(cx.request(), cx.consumer()),
                None => None,
            },
            ..Decision::default()
        };
        let chosen = match options.overprovisioning {
            Some(opf) => {
                self.choose_level(rule, opf, local, healthy, candidates, cx, &mut decision)
            }
            None => self
                .choose_region(rule, local, healthy, candidates, cx.scratch())
                .map(|(r, is_local)| (r, is_local, None)),
        };
        let Some((region, is_local, region_counts)) = chosen else {
            let outcome = self.fall_back_without_region(rule, healthy, candidates, cx.scratch());
            cx.note_fallback();
            if explaining {
                self.explain(rule, cx, candidates, input, None, None, outcome, &decision);
            }
            return Evaluation::Runtime;
        };

        // Panic: the chosen region first (health ignored in it), else the target IDC.
        let live = cx.degraded();
        let threshold = options.panic_threshold;
        let mut region_mode = healthy;
        if threshold > 0 {
            let c = region_counts.unwrap_or_else(|| self.region_counts(region, live, cx.within()));
            if weighted::in_panic(threshold, c.healthy.into(), c.total.into()) {
                region_mode = Healthy::Input;
                decision.panic = Some(Panic::Region(c));
            }
        }
        let (strategy, target_counts) =
            self.target_strategy(rule, region, is_local, local, cx, &decision);
        let mut target_mode = region_mode;
        if threshold > 0
            && decision.panic.is_none()
            && let Some(Some(k)) = strategy.target()
        {
            let c = target_counts.unwrap_or_else(|| self.idc_counts(k, live, cx.within()));
            // A target with no healthy provider is not in panic: no survivor would be
            // overloaded, and the region's healthy providers take its calls.
            if c.healthy > 0 && weighted::in_panic(threshold, c.healthy.into(), c.total.into()) {
                target_mode = Healthy::Input;
                decision.panic = Some(Panic::Idc(k, c));
            }
        }
        let outcome = self.keep_target(
            rule,
            region,
            strategy,
            target_mode,
            region_mode,
            candidates,
            cx.scratch(),
        );
        if !matches!(outcome, Outcome::Target) {
            cx.note_fallback();
        }
        if explaining {
            self.explain(
                rule,
                cx,
                candidates,
                input,
                Some((region, is_local)),
                Some(strategy),
                outcome,
                &decision,
            );
        }
        Evaluation::Runtime
    }

    /// The region of level `i` of the spillover levels: level 0 is the local region, level
    /// `i ≥ 1` is `cross_region[i - 1]` (`None` when unknown or when it is the local one).
    #[inline]
    pub(super) fn level_region(rule: &IdcWeightRule, local: &Local, i: usize) -> Option<usize> {
        if i == 0 {
            local.region
        } else {
            let r = rule.cross_region[i - 1];
            (Some(r) != local.region).then_some(r)
        }
    }

    /// Step 2 with `spillover`: the local region and the cross regions are priority levels
    /// (Envoy's): each level's availability is `min(1, overprovisioning × healthy share)`
    /// (0 without a healthy candidate), the loads follow [`weighted::priority_loads`], and
    /// one point in `0..UNIT` (random, or the sticky hash) picks the level. When the local
    /// region is fully available it takes every call: one count, no draw. Otherwise
    /// O(levels) count loads plus the first-hit scans that check each level has a healthy
    /// candidate. Returns the region, whether it is the local one, and its counts when read.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn choose_level(
        &self,
        rule: &IdcWeightRule,
        opf: u32,
        local: &Local,
        healthy: Healthy,
        candidates: &Candidates,
        cx: &mut RouteContext<'_>,
        decision: &mut Decision,
    ) -> Option<(usize, bool, Option<Counts>)> {
        let live = cx.degraded();
        let view = self.health.view(live, cx.within());
        let counts = |r: usize| view.region(r, self.regions.set(r), &self.degraded);
        let has = |r: usize, scratch: &BitSet| {
            self.any_healthy(healthy, candidates, scratch, self.within_region(r))
        };
        // The local region fully available: it keeps every call.
        if let Some(r) = local.region
            && has(r, cx.scratch())
        {
            let c = counts(r);
            if weighted::availability(opf, c.healthy.into(), c.total.into()) >= UNIT {
                return Some((r, true, Some(c)));
            }
        }
        let point = match decision.sticky {
            Some(h) => weighted::scale(h, UNIT),
            None => cx.rng().below(UNIT),
        };
        let scratch: &BitSet = cx.scratch();
        let levels = 1 + rule.cross_region.len();
        // The first levels' availabilities, each computed once (a level scanned once).
        const CACHED: usize = 8;
        let mut cached = [0u64; CACHED];
        let availability = |i: usize| {
            Self::level_region(rule, local, i)
                .filter(|&r| has(r, scratch))
                .map_or(0, |r| {
                    let c = counts(r);
                    weighted::availability(opf, c.healthy.into(), c.total.into()).max(1)
                })
        };
        for (i, a) in cached.iter_mut().enumerate().take(levels) {
            *a = availability(i);
        }
        let available = |i: usize| {
            if i < CACHED {
                cached[i]
            } else {
                availability(i)
            }
        };
        if (0..levels).all(|i| available(i) == 0) {
            return None;
        }
        let mut cumulative = 0u64;
        let mut chosen: Option<(usize, u64)> = None;
        weighted::priority_loads(levels, available, |i, load| {
            cumulative += load;
            if chosen.is_none() && point < cumulative {
                chosen = Some((i, load));
            }
        });
        let (level, load) = chosen?;
        if load < UNIT {
            decision.spill = Some((point, level));
        }
        Self::level_region(rule, local, level).map(|r| (r, level == 0, None))
    }

    /// Step 1: healthy = input minus degraded (param or live). The live set is read once
    /// here, so later steps agree with each other: when no provider is live-degraded
    /// (`DegradedSet::any`, one load) the call treats the live set as empty and never reads
    /// it; the param set is fixed per snapshot. Only a non-empty live set (or an explain
    /// trace, which reports the healthy count) copies the healthy set into the scratch set;
    /// otherwise every later pass computes it on the fly from the input words.
    #[inline]
    fn healthy(
        &self,
        cx: &mut RouteContext<'_>,
        candidates: &Candidates,
        explaining: bool,
    ) -> Healthy {
        let live = cx.degraded();
        if explaining || live.any() {
            let n = candidates.len();
            let scratch = cx.scratch();
            if scratch.len() != n {
                scratch.reset_full(n);
            }
            for (w, (h, c)) in scratch
                .words_mut()
                .iter_mut()
                .zip(candidates.words())
                .enumerate()
            {
                *h = c & !word(&self.degraded, w) & !live.word(w);
            }
            Healthy::Scratch
        } else if self.any_degraded {
            Healthy::InputMinusParam
        } else {
            Healthy::Input
        }
    }

    /// Step 2: the first region with a healthy candidate, the local one first, and whether
    /// it is the local one.
    #[inline]
    fn choose_region(
        &self,
        rule: &IdcWeightRule,
        local: &Local,
        healthy: Healthy,
        candidates: &Candidates,
        scratch: &BitSet,
    ) -> Option<(usize, bool)> {
        let has = |r: usize| self.any_healthy(healthy, candidates, scratch, self.within_region(r));
        match local.region.filter(|&r| has(r)) {
            Some(r) => Some((r, true)),
            None => rule
                .cross_region
                .iter()
                .copied()
                .find(|&r| Some(r) != local.region && has(r))
                .map(|r| (r, false)),
        }
    }

    /// Step 5 when no region has a healthy candidate: `force` empties; otherwise every
    /// healthy candidate, or the whole input when every candidate is degraded.
    #[inline]
    fn fall_back_without_region(
        &self,
        rule: &IdcWeightRule,
        healthy: Healthy,
        candidates: &mut Candidates,
        scratch: &BitSet,
    ) -> Outcome {
        if rule.force {
            candidates.clear();
            Outcome::NoRegionForced
        } else if !self.any_healthy(healthy, candidates, scratch, Within::ALL) {
            Outcome::FallbackInput
        } else {
            self.keep_healthy(healthy, candidates, scratch, Within::ALL);
            Outcome::FallbackHealthy
        }
    }

    /// Steps 4 and 5: keep the healthy candidates of the target IDC (or of the whole
    /// region); when the target has none, `force` empties, otherwise the region's.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    fn keep_target(
        &self,
        rule: &IdcWeightRule,
        region: usize,
        strategy: Strategy,
        target_mode: Healthy,
        region_mode: Healthy,
        candidates: &mut Candidates,
        scratch: &BitSet,
    ) -> Outcome {
        let region_set = self.within_region(region);
        let Some(target) = strategy.target() else {
            self.keep_healthy(region_mode, candidates, scratch, region_set);
            return Outcome::Target;
        };
        let target_set = target.map(|k| self.within_idc(region, k));
        let hit = target_set.is_some_and(|t| self.any_healthy(target_mode, candidates, scratch, t));
        match target_set {
            Some(t) if hit => {
                self.keep_healthy(target_mode, candidates, scratch, t);
                Outcome::Target
            }
            _ if rule.force => {
                candidates.clear();
                Outcome::ForcedEmpty
            }
            _ => {
                self.keep_healthy(region_mode, candidates, scratch, region_set);
                Outcome::FallbackRegion
            }
        }
    }
}

impl PreparedIdcWeight {
    /// Step 3: how the target IDC of the chosen region is decided: its route table (one
    /// draw, sticky with `hash_key`; by effective weight with `spillover`, unless the region
    /// is in panic), else in the local region the caller's side of the decision, else the
    /// whole region.
    #[inline]
    fn target_strategy(
        &self,
        rule: &IdcWeightRule,
        region: usize,
        is_local: bool,
        local: &Local,
        cx: &mut RouteContext<'_>,
        decision: &Decision,
    ) -> (Strategy, Option<Counts>) {
        let table = rule
            .regions
            .get(region)
            .and_then(|r| r.route_table.as_ref());
        let Some(table) = table else {
            let strategy = if is_local {
                local.target
            } else {
                Strategy::CrossWhole
            };
            return (strategy, None);
        };
        let Some(opf) = rule.options.overprovisioning else {
            let draw = match decision.sticky {
                Some(h) => weighted::scale(h, u64::from(ROUTE_TABLE_TOTAL)) as u32,
                None => cx.rng().below(u64::from(ROUTE_TABLE_TOTAL)) as u32,
            };
            let strategy = Strategy::Table {
                draw,
                idc: table.pick(draw),
            };
            return (strategy, None);
        };
        let view = self.health.view(cx.degraded(), cx.within());
        let region_panic = matches!(decision.panic, Some(Panic::Region(_)));
        // Each IDC's counts and effective weight, read once (the first eight kept on the
        // stack; a longer table reads the others again for the pick).
        const CACHED: usize = 8;
        let mut cached = [(
            Counts {
                healthy: 0,
                total: 0,
            },
            0u64,
        ); CACHED];
        let entry = |i: usize| {
            let (k, w) = table.entry(i);
            let c = view.idc(k, self.idcs.set(k), &self.degraded);
            let eff = if region_panic {
                u64::from(w) * UNIT
            } else {
                effective_weight(w, c, opf)
            };
            (c, eff)
        };
        for (i, e) in cached.iter_mut().enumerate().take(table.len()) {
            *e = entry(i);
        }
        let get = |i: usize| if i < CACHED { cached[i] } else { entry(i) };
        // The IDC draw after a level draw uses a second hash, independent of the first.
        let draw = decision
            .sticky
            .map_or(Draw::Random, |h| Draw::Sticky(rehash(h)));
        match weighted::pick(table.len(), |i| get(i).1, draw, cx.rng()) {
            Some(p) => (
                Strategy::Spill {
                    point: p.point,
                    total: p.total,
                    idc: table.entry(p.index).0,
                },
                Some(get(p.index).0),
            ),
            None => (Strategy::SpillNone, None),
        }
    }

    /// IDC `k`'s counts for a call whose live degraded set is `live`, within the chosen
    /// registry's providers when there is one.
    #[inline]
    pub(super) fn idc_counts(
        &self,
        k: usize,
        live: &routechain_core::DegradedSet,
        within: Option<&BitSet>,
    ) -> Counts {
        let view = self.health.view(live, within);
        view.idc(k, self.idcs.set(k), &self.degraded)
    }

    /// Region `r`'s counts (see [`PreparedIdcWeight::idc_counts`]).
    #[inline]
    pub(super) fn region_counts(
        &self,
        r: usize,
        live: &routechain_core::DegradedSet,
        within: Option<&BitSet>,
    ) -> Counts {
        let view = self.health.view(live, within);
        view.region(r, self.regions.set(r), &self.degraded)
    }
}

/// Where a call's healthy set (input minus degraded providers) lives.
#[derive(Debug, Clone, Copy)]
pub(super) enum Healthy {
    /// No provider is degraded: the healthy set is the input.
    Input,
    /// Only the param-degraded set (fixed per snapshot) is non-empty: input minus it.
    InputMinusParam,
    /// Copied into the scratch set (live-degraded providers, or an explain trace).
    Scratch,
}

/// The region's and the IDC's words (`None`: absent), for a fused pass.
type DenseWords<'a> = (Option<&'a [u64]>, Option<&'a [u64]>);

/// The providers a pass keeps: a region's, optionally narrowed to an IDC's (both absent:
/// every provider).
#[derive(Debug, Clone, Copy)]
pub(super) struct Within<'a> {
    region: Option<&'a ProviderSet>,
    idc: Option<&'a ProviderSet>,
    /// The prepared `region AND idc AND NOT param-degraded` ([`HealthySets`]), when known.
    healthy: Option<&'a ProviderSet>,
}

impl<'a> Within<'a> {
    /// Every provider.
    const ALL: Within<'static> = Within {
        region: None,
        idc: None,
        healthy: None,
    };

    /// Word `w` of the set (the general path: sparse sets, per word).
    #[inline]
    fn word(&self, w: usize) -> u64 {
        self.region.map_or(!0, |s| s.word(w)) & self.idc.map_or(!0, |s| s.word(w))
    }

    /// The sets' words when every present set is dense (the fused path), else `None`.
    #[inline]
    fn dense(&self) -> Option<DenseWords<'a>> {
        fn words(set: Option<&ProviderSet>) -> Option<Option<&[u64]>> {
            match set {
                None => Some(None),
                Some(ProviderSet::Dense(b)) => Some(Some(b.words())),
                Some(ProviderSet::Sparse { .. }) => None,
            }
        }
        Some((words(self.region)?, words(self.idc)?))
    }
}

impl PreparedIdcWeight {
    /// Region `r`'s providers, with its prepared healthy set when it is a rule region.
    #[inline]
    fn within_region(&self, r: usize) -> Within<'_> {
        let region = self.regions.set(r);
        Within {
            region: Some(region),
            idc: None,
            healthy: self
                .healthy_sets
                .regions
                .get(r)
                .map(|h| h.as_ref().unwrap_or(region)),
        }
    }

    /// IDC `k`'s providers within region `r`, with their prepared healthy set when `k` is
    /// a rule IDC of `r`.
    #[inline]
    fn within_idc(&self, r: usize, k: usize) -> Within<'_> {
        let idc = self.idcs.set(k);
        let healthy = match self.healthy_sets.idcs.get(k) {
            Some(h) if self.rule.idcs[k].region == r => Some(h.as_ref().unwrap_or(idc)),
            _ => None,
        };
        Within {
            region: Some(self.regions.set(r)),
            idc: Some(idc),
            healthy,
        }
    }

    /// The prepared healthy set of `within` when it answers for `healthy`: the input minus
    /// the param-degraded providers (or the input, when none is), never a scratch copy or
    /// a set in panic.
    #[inline]
    fn prepared<'a>(&self, healthy: Healthy, within: &Within<'a>) -> Option<&'a ProviderSet> {
        match healthy {
            Healthy::InputMinusParam => within.healthy,
            Healthy::Input if !self.any_degraded => within.healthy,
            _ => None,
        }
    }

    /// True when `healthy AND within` has a member (stops at the first non-zero word). Must
    /// be called before `candidates` is narrowed. A prepared healthy set is one scan with the
    /// candidates; other dense sets take one fused loop over the words
    /// ([`BitSet::any_mask`]); sparse ones the per-word path.
    #[inline]
    fn any_healthy(
        &self,
        healthy: Healthy,
        candidates: &Candidates,
        scratch: &BitSet,
        within: Within<'_>,
    ) -> bool {
        if let Some(set) = self.prepared(healthy, &within) {
            return set.intersects(candidates);
        }
        if let Some((region, idc)) = within.dense() {
            let (set, not) = match healthy {
                Healthy::Input => (candidates, None),
                Healthy::InputMinusParam => (candidates, Some(self.degraded.words())),
                Healthy::Scratch => (scratch, None),
            };
            let mask = WordMask {
                and: region,
                also: idc,
                not,
            };
            if let Some(any) = set.any_mask(mask) {
                return any;
            }
        }
        let f = |w| within.word(w);
        match healthy {
            Healthy::Input => candidates.any_with(f),
            Healthy::InputMinusParam => candidates.any_with(|w| !word(&self.degraded, w) & f(w)),
            Healthy::Scratch => scratch.any_with(f),
        }
    }

    /// `candidates = healthy AND within`, in one pass (fused over dense sets, as
    /// [`PreparedIdcWeight::any_healthy`]).
    #[inline]
    fn keep_healthy(
        &self,
        healthy: Healthy,
        candidates: &mut Candidates,
        scratch: &BitSet,
        within: Within<'_>,
    ) {
        if let Some(set) = self.prepared(healthy, &within) {
            set.and_into(candidates);
            return;
        }
        if let Some((region, idc)) = within.dense() {
            // healthy ⊆ candidates, so candidates AND healthy AND within = candidates AND
            // (within minus what healthy removes).
            let fused = match healthy {
                Healthy::Input => candidates.and_mask(WordMask {
                    and: region,
                    also: idc,
                    not: None,
                }),
                Healthy::InputMinusParam => candidates.and_mask(WordMask {
                    and: region,
                    also: idc,
                    not: Some(self.degraded.words()),
                }),
                // Three sets: the healthy set (a subset of the candidates) and the region
                // first, then the IDC.
                Healthy::Scratch => {
                    candidates.and_mask(WordMask {
                        and: Some(scratch.words()),
                        also: region,
                        not: None,
                    }) && candidates.and_mask(WordMask {
                        and: idc,
                        ..WordMask::default()
                    })
                }
            };
            if fused {
                return;
            }
        }
        let f = |w| within.word(w);
        match healthy {
            Healthy::Input => candidates.and_with(f),
            Healthy::InputMinusParam => candidates.and_with(|w| !word(&self.degraded, w) & f(w)),
            Healthy::Scratch => candidates.and_with(|w| word(scratch, w) & f(w)),
        }
    }
}
