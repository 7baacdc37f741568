//! The IDC-weight router per call: steps 1 to 5 of the module documentation, each a
//! function over the prepared sets, with no allocation and at most one random draw.

use routechain_core::{BitSet, Candidates, Evaluation, RouteContext};

use super::prepared::{Local, PreparedIdcWeight, Strategy};
use super::rule::{IdcWeightRule, ROUTE_TABLE_TOTAL};

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

        let Some((region, is_local)) =
            self.choose_region(rule, local, healthy, candidates, cx.scratch())
        else {
            let outcome = self.fall_back_without_region(rule, healthy, candidates, cx.scratch());
            if explaining {
                self.explain(rule, cx, candidates, input, None, None, outcome);
            }
            return Evaluation::Runtime;
        };
        let strategy = target_strategy(rule, region, is_local, local, cx);
        let outcome = self.keep_target(rule, region, strategy, healthy, candidates, cx.scratch());
        if explaining {
            self.explain(
                rule,
                cx,
                candidates,
                input,
                Some((region, is_local)),
                Some(strategy),
                outcome,
            );
        }
        Evaluation::Runtime
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
        let has = |r: usize| {
            let set = self.regions.set(r);
            self.any_healthy(healthy, candidates, scratch, |w| set.word(w))
        };
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
        } else if !self.any_healthy(healthy, candidates, scratch, |_| !0) {
            Outcome::FallbackInput
        } else {
            self.keep_healthy(healthy, candidates, scratch, |_| !0);
            Outcome::FallbackHealthy
        }
    }

    /// Steps 4 and 5: keep the healthy candidates of the target IDC (or of the whole
    /// region); when the target has none, `force` empties, otherwise the region's.
    #[inline]
    fn keep_target(
        &self,
        rule: &IdcWeightRule,
        region: usize,
        strategy: Strategy,
        healthy: Healthy,
        candidates: &mut Candidates,
        scratch: &BitSet,
    ) -> Outcome {
        let region_set = self.regions.set(region);
        let Some(target) = strategy.target() else {
            self.keep_healthy(healthy, candidates, scratch, |w| region_set.word(w));
            return Outcome::Target;
        };
        let target_set = target.map(|k| self.idcs.set(k));
        let hit = target_set.is_some_and(|t| {
            self.any_healthy(healthy, candidates, scratch, |w| {
                region_set.word(w) & t.word(w)
            })
        });
        match target_set {
            Some(t) if hit => {
                self.keep_healthy(healthy, candidates, scratch, |w| {
                    region_set.word(w) & t.word(w)
                });
                Outcome::Target
            }
            _ if rule.force => {
                candidates.clear();
                Outcome::ForcedEmpty
            }
            _ => {
                self.keep_healthy(healthy, candidates, scratch, |w| region_set.word(w));
                Outcome::FallbackRegion
            }
        }
    }
}

/// Step 3: how the target IDC of the chosen region is decided: its route table (one draw),
/// else in the local region the caller's side of the decision, else the whole region.
#[inline]
fn target_strategy(
    rule: &IdcWeightRule,
    region: usize,
    is_local: bool,
    local: &Local,
    cx: &mut RouteContext<'_>,
) -> Strategy {
    let table = rule
        .regions
        .get(region)
        .and_then(|r| r.route_table.as_ref());
    if let Some(table) = table {
        let draw = cx.rng().below(u64::from(ROUTE_TABLE_TOTAL)) as u32;
        Strategy::Table {
            draw,
            idc: table.pick(draw),
        }
    } else if is_local {
        local.target
    } else {
        Strategy::CrossWhole
    }
}

/// Where a call's healthy set (input minus degraded providers) lives.
#[derive(Debug, Clone, Copy)]
enum Healthy {
    /// No provider is degraded: the healthy set is the input.
    Input,
    /// Only the param-degraded set (fixed per snapshot) is non-empty: input minus it.
    InputMinusParam,
    /// Copied into the scratch set (live-degraded providers, or an explain trace).
    Scratch,
}

impl PreparedIdcWeight {
    /// True when `healthy AND f` has a member (stops at the first non-zero word). Must be
    /// called before `candidates` is narrowed.
    #[inline]
    fn any_healthy(
        &self,
        healthy: Healthy,
        candidates: &Candidates,
        scratch: &BitSet,
        mut f: impl FnMut(usize) -> u64,
    ) -> bool {
        match healthy {
            Healthy::Input => candidates.any_with(f),
            Healthy::InputMinusParam => candidates.any_with(|w| !word(&self.degraded, w) & f(w)),
            Healthy::Scratch => scratch.any_with(f),
        }
    }

    /// `candidates = healthy AND f`, in one pass.
    #[inline]
    fn keep_healthy(
        &self,
        healthy: Healthy,
        candidates: &mut Candidates,
        scratch: &BitSet,
        mut f: impl FnMut(usize) -> u64,
    ) {
        match healthy {
            // healthy ⊆ candidates, so candidates AND healthy AND f = candidates AND (f minus
            // what healthy removes).
            Healthy::Input => candidates.and_with(f),
            Healthy::InputMinusParam => candidates.and_with(|w| !word(&self.degraded, w) & f(w)),
            Healthy::Scratch => candidates.and_with(|w| word(scratch, w) & f(w)),
        }
    }
}
