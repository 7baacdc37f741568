//! The condition router per call: each condition's when-part, then its then-part or a
//! weighted v3.1 destination, with the explain texts.

use routechain_core::{Candidates, Evaluation, RouteContext};

use super::prepared::{PreparedAction, PreparedCond, PreparedCondition, SetExpr};
use super::rule::Condition;

impl PreparedCondition {
    fn when_matches(
        &self,
        cond: &Condition,
        prepared: &PreparedCond,
        cx: &RouteContext<'_>,
        use_cache: bool,
    ) -> bool {
        let (request, consumer) = (cx.request(), cx.consumer());
        if use_cache {
            if !prepared.consumer_ok {
                return false;
            }
        } else if !cond
            .when
            .iter()
            .filter(|t| !t.key.reads_request())
            .all(|t| t.matches_when(request, consumer))
        {
            return false;
        }
        cond.when
            .iter()
            .filter(|t| t.key.reads_request())
            .all(|t| t.matches_when(request, consumer))
    }

    /// Routes one call: the conditions one after another, each narrowing what the previous
    /// left.
    pub fn route(&self, cx: &mut RouteContext<'_>, candidates: &mut Candidates) -> Evaluation {
        let rule = &*self.rule;
        if !rule.enabled {
            cx.explain(format_args!(
                "condition rule disabled: every provider passes"
            ));
            return Evaluation::Cached;
        }
        let use_cache = !rule.runtime && cx.consumer_is_prepared();
        let evaluation = if use_cache && rule.cacheable() {
            Evaluation::Cached
        } else {
            Evaluation::Runtime
        };
        for (i, (cond, prepared)) in rule.conditions.iter().zip(&self.conditions).enumerate() {
            if candidates.is_empty() {
                cx.explain(format_args!("condition #{i}: no provider left, skipped"));
                continue;
            }
            if !self.when_matches(cond, prepared, cx, use_cache) {
                cx.explain(format_args!("condition #{i}: when did not match"));
                continue;
            }
            match &prepared.action {
                PreparedAction::Blocklist => {
                    candidates.clear();
                    cx.explain(format_args!(
                        "condition #{i}: when matched, blocklist (empty then-part)"
                    ));
                }
                PreparedAction::TrafficDisabled => {
                    candidates.clear();
                    cx.explain(format_args!(
                        "condition #{i}: when matched, traffic disabled (no `to`)"
                    ));
                }
                PreparedAction::Then(set) => {
                    if set.narrow(candidates, cx) {
                        if cx.explaining() {
                            let n = candidates.count();
                            cx.explain(format_args!(
                                "condition #{i}: when matched, {n} providers by then-part"
                            ));
                        }
                    } else if rule.force {
                        candidates.clear();
                        cx.note_fallback();
                        cx.explain(format_args!(
                            "condition #{i}: then-part matched nothing and force=true: no provider"
                        ));
                    } else {
                        cx.note_fallback();
                        cx.explain(format_args!(
                            "condition #{i} ignored: then-part matched nothing and force=false"
                        ));
                    }
                }
                PreparedAction::Destinations(dests) => {
                    let sticky = match &rule.hash_key {
                        Some(key) => key.hash(cx.request(), cx.consumer()),
                        None => None,
                    };
                    route_destinations(i, dests, rule.force, sticky, cx, candidates);
                }
            }
        }
        evaluation
    }
}

/// Picks one non-empty destination with probability weight / sum (two passes, no
/// allocation); none → `force` ? empty : unchanged.
fn route_destinations(
    i: usize,
    dests: &[(SetExpr, u32)],
    force: bool,
    sticky: Option<u64>,
    cx: &mut RouteContext<'_>,
    candidates: &mut Candidates,
) {
    let mut sum = 0u64;
    let mut live = 0usize;
    let mut last = 0usize;
    // Which of the first 64 destinations are live, so the pick does not evaluate them again.
    let mut live_mask = 0u64;
    for (j, (set, weight)) in dests.iter().enumerate() {
        if *weight > 0 && set.intersects(candidates, cx) {
            sum += u64::from(*weight);
            live += 1;
            last = j;
            if j < 64 {
                live_mask |= 1 << j;
            }
        }
    }
    if live == 0 {
        if force {
            candidates.clear();
            cx.note_fallback();
            cx.explain(format_args!(
                "condition #{i}: every destination is empty and force=true: no provider"
            ));
        } else {
            cx.note_fallback();
            cx.explain(format_args!(
                "condition #{i} ignored: every destination is empty and force=false"
            ));
        }
        return;
    }
    let pick = if live == 1 {
        last
    } else {
        // Sticky (`hash_key`): the hash scaled onto the live weights, so a user keeps its
        // destination and a weight change moves only the users at the margin.
        let mut r = match sticky {
            Some(h) => routechain_core::weighted::scale(h, sum),
            None => cx.rng().below(sum),
        };
        let mut pick = last;
        for (j, (set, weight)) in dests.iter().enumerate() {
            let weight = u64::from(*weight);
            let is_live = if j < 64 {
                live_mask & (1 << j) != 0
            } else {
                weight > 0 && set.intersects(candidates, cx)
            };
            if is_live {
                if r < weight {
                    pick = j;
                    break;
                }
                r -= weight;
            }
        }
        pick
    };
    if let Some((set, weight)) = dests.get(pick) {
        set.and_into(candidates, cx);
        if cx.explaining() {
            let n = candidates.count();
            cx.explain(format_args!(
                "condition #{i}: when matched, destination #{pick} (weight {weight} of {sum}{}), {n} providers",
                if sticky.is_some() { ", sticky" } else { "" }
            ));
        }
    }
}
