//! The affinity router (Dubbo 3.3's `AffinityServiceStateRouter` /
//! `AffinityProviderAppStateRouter`, rule `<key>.affinity-router`): prefer the providers whose
//! `affinityAware.key` parameter equals the consumer's, when they are at least `ratio` percent
//! of the candidates; otherwise leave the candidates unchanged. There is no force.
//!
//! Per snapshot the router indexes the key (value → providers) and resolves the set for the
//! prepared consumer's value; per call it counts the candidates and the matching candidates
//! with popcounts and compares the fraction with the ratio in `f64`, as Dubbo does.

mod rule;

use std::sync::Arc;

use routechain_core::{
    Candidates, Evaluation, PrepareContext, ProviderSet, RouteContext, RouterSpec, RuleError,
    SetRef, Snapshot, TypedRouter, Url, ValueIndex,
};

pub use self::rule::{AffinityRule, RawAffinityRule};

/// Dubbo's order for service-scope affinity rules (and for an entry without a rule).
pub const DEFAULT_PRIORITY: i32 = 130;
/// Dubbo's order for application-scope (provider application) affinity rules.
pub const APPLICATION_SCOPE_PRIORITY: i32 = 135;

/// The `affinity` router type. Without a rule (or with a deleted config-center rule) every
/// provider passes, as Dubbo's does without a rule.
#[derive(Debug, Clone, Copy, Default)]
pub struct AffinityRouter;

impl TypedRouter for AffinityRouter {
    type Raw = RawAffinityRule;
    type Rule = AffinityRule;
    type Prepared = PreparedAffinity;

    /// Compiled alike for every service: services of one chain configuration share it.
    fn reads_service(&self) -> bool {
        false
    }

    fn default_priority(&self, rule: Option<&AffinityRule>) -> i32 {
        if rule.is_some_and(AffinityRule::is_application_scope) {
            APPLICATION_SCOPE_PRIORITY
        } else {
            DEFAULT_PRIORITY
        }
    }

    fn compile(
        &self,
        raw: RawAffinityRule,
        spec: &RouterSpec<'_>,
    ) -> Result<AffinityRule, Vec<RuleError>> {
        AffinityRule::compile(raw, spec.rule_path())
    }

    fn prepare(
        rule: &Arc<AffinityRule>,
        cx: &PrepareContext<'_>,
    ) -> Result<PreparedAffinity, String> {
        Ok(PreparedAffinity::build(cx.snapshot, cx.consumer, rule))
    }

    fn route(
        prepared: &PreparedAffinity,
        cx: &mut RouteContext<'_>,
        candidates: &mut Candidates,
    ) -> Evaluation {
        prepared.route(cx, candidates)
    }
}

/// The affinity router's state for one snapshot and consumer.
#[derive(Debug, Clone)]
pub struct PreparedAffinity {
    /// The enabled rule's index; `None` (a disabled rule): every provider passes.
    active: Option<Active>,
}

/// An enabled rule over one snapshot.
#[derive(Debug, Clone)]
struct Active {
    rule: Arc<AffinityRule>,
    /// Provider value of the key → providers.
    index: ValueIndex,
    /// The providers matching the prepared consumer; `None` when it lacks the key.
    prepared: Option<ProviderSet>,
    /// The set of a value no provider has.
    empty: ProviderSet,
}

impl PreparedAffinity {
    /// Indexes `snapshot` by the rule's key and resolves the set for `consumer`.
    pub fn build(snapshot: &Snapshot, consumer: &Url, rule: &Arc<AffinityRule>) -> Self {
        let active = rule.enabled.then(|| {
            let index = ValueIndex::build(snapshot, &rule.key);
            let empty = ProviderSet::empty(snapshot.len());
            let prepared = consumer.param(&rule.key).map(|v| {
                index
                    .get(v)
                    .map_or(empty.clone(), |s| s.to_provider_set(snapshot.len()))
            });
            Active {
                rule: rule.clone(),
                index,
                prepared,
                empty,
            }
        });
        PreparedAffinity { active }
    }

    /// Routes one call.
    pub fn route(&self, cx: &mut RouteContext<'_>, candidates: &mut Candidates) -> Evaluation {
        let Some(active) = &self.active else {
            cx.explain(format_args!(
                "no enabled affinity rule: every provider passes"
            ));
            return Evaluation::Cached;
        };
        let rule = &*active.rule;
        let (matching, evaluation) = if cx.consumer_is_prepared() {
            (
                active.prepared.as_ref().map(SetRef::from),
                Evaluation::Cached,
            )
        } else {
            let set = cx
                .consumer()
                .param(&rule.key)
                .map(|v| active.index.get(v).unwrap_or(active.empty.as_set_ref()));
            (set, Evaluation::Runtime)
        };
        let Some(matching) = matching else {
            cx.explain(format_args!(
                "the consumer has no {:?} parameter: candidates unchanged",
                rule.key
            ));
            return evaluation;
        };
        let total = candidates.count();
        if total == 0 {
            return evaluation;
        }
        let matched = matching.count_and(candidates);
        if matched as f64 / total as f64 >= rule.ratio / 100.0 {
            matching.and_into(candidates);
            cx.explain(format_args!(
                "{matched} of {total} candidates share the consumer's {:?}: at least {}%, kept",
                rule.key, rule.ratio
            ));
        } else {
            cx.note_fallback();
            cx.explain(format_args!(
                "{matched} of {total} candidates share the consumer's {:?}: below {}%, candidates unchanged",
                rule.key, rule.ratio
            ));
        }
        evaluation
    }
}

#[cfg(test)]
mod tests;
