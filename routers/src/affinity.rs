//! The affinity router (Dubbo 3.3's `AffinityServiceStateRouter` /
//! `AffinityProviderAppStateRouter`, rule `<key>.affinity-router`): prefer the providers whose
//! `affinityAware.key` parameter equals the consumer's, when they are at least `ratio` percent
//! of the candidates; otherwise leave the candidates unchanged. There is no force.
//!
//! Per snapshot the router indexes the key (value → providers) and resolves the set for the
//! prepared consumer's value; per call it counts the candidates and the matching candidates
//! with popcounts and compares the fraction with the ratio in `f64`, as Dubbo does.

use std::sync::Arc;

use routechain_core::{
    Candidates, Evaluation, ParamIndex, PrepareContext, PrepareError, PreparedRouter, ProviderSet,
    RouteContext, Router, RouterFactory, RouterSpec, RuleDoc, RuleError, Snapshot, Url,
};
use routechain_rules::schema::affinity::{self as schema, AffinityRule};

/// Dubbo's order for service-scope affinity rules.
pub const SERVICE_PRIORITY: i32 = 130;
/// Dubbo's order for application-scope (provider application) affinity rules.
pub const APPLICATION_PRIORITY: i32 = 135;

/// Builds `affinity` routers. Without a rule (or with a deleted config-center rule) the
/// router passes the candidates unchanged, as Dubbo's does without a rule.
#[derive(Debug, Clone, Copy, Default)]
pub struct AffinityFactory;

impl RouterFactory for AffinityFactory {
    fn default_priority(&self, spec: &RouterSpec<'_>) -> i32 {
        crate::scope_priority(spec, SERVICE_PRIORITY, APPLICATION_PRIORITY)
    }

    fn build(&self, spec: &RouterSpec<'_>) -> Result<Arc<dyn Router>, Vec<RuleError>> {
        let router = match spec.rule {
            Some(doc) => AffinityRouter::from_doc(&doc)?,
            None => AffinityRouter::new(None),
        };
        Ok(Arc::new(router))
    }
}

/// A compiled affinity router.
#[derive(Debug, Clone)]
pub struct AffinityRouter {
    rule: Option<Arc<AffinityRule>>,
}

impl AffinityRouter {
    /// A router with `rule` (`None`: pass-through).
    pub fn new(rule: Option<AffinityRule>) -> Self {
        AffinityRouter {
            rule: rule.map(Arc::new),
        }
    }

    /// Compiles an affinity rule document.
    pub fn from_doc(doc: &RuleDoc<'_>) -> Result<Self, Vec<RuleError>> {
        schema::compile(doc).map(|r| Self::new(Some(r)))
    }

    /// The rule.
    pub fn rule(&self) -> Option<&AffinityRule> {
        self.rule.as_deref()
    }
}

impl Router for AffinityRouter {
    fn name(&self) -> &str {
        "affinity"
    }

    fn prepare(&self, cx: &PrepareContext<'_>) -> Result<Arc<dyn PreparedRouter>, PrepareError> {
        Ok(Arc::new(PreparedAffinity::build(
            cx.snapshot,
            cx.consumer,
            self.rule.clone(),
        )))
    }
}

/// The affinity router's state for one snapshot and consumer.
#[derive(Debug, Clone)]
pub struct PreparedAffinity {
    /// The enabled rule with its index; `None` (no rule, or a disabled one): every
    /// provider passes.
    active: Option<Active>,
}

/// An enabled rule over one snapshot.
#[derive(Debug, Clone)]
struct Active {
    rule: Arc<AffinityRule>,
    /// Provider value of the key → providers.
    index: ParamIndex,
    /// The providers matching the prepared consumer; `None` when it lacks the key.
    prepared: Option<ProviderSet>,
    /// The set of a value no provider has.
    empty: ProviderSet,
}

impl PreparedAffinity {
    /// Indexes `snapshot` by the rule's key and resolves the set for `consumer`.
    pub fn build(snapshot: &Snapshot, consumer: &Url, rule: Option<Arc<AffinityRule>>) -> Self {
        let active = rule.filter(|r| r.enabled).map(|rule| {
            let index = ParamIndex::build(snapshot, &rule.key);
            let empty = ProviderSet::empty(snapshot.len());
            let prepared = consumer
                .param(&rule.key)
                .map(|v| index.get(v).unwrap_or(&empty).clone());
            Active {
                rule,
                index,
                prepared,
                empty,
            }
        });
        PreparedAffinity { active }
    }
}

impl PreparedRouter for PreparedAffinity {
    fn route(&self, cx: &mut RouteContext<'_>, candidates: &mut Candidates) -> Evaluation {
        let Some(active) = &self.active else {
            cx.explain(format_args!(
                "no enabled affinity rule: every provider passes"
            ));
            return Evaluation::Cached;
        };
        let rule = &*active.rule;
        let (matching, evaluation) = if cx.consumer_is_prepared() {
            (active.prepared.as_ref(), Evaluation::Cached)
        } else {
            let set = cx
                .consumer()
                .param(&rule.key)
                .map(|v| active.index.get(v).unwrap_or(&active.empty));
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
            cx.explain(format_args!(
                "{matched} of {total} candidates share the consumer's {:?}: below {}%, candidates unchanged",
                rule.key, rule.ratio
            ));
        }
        evaluation
    }
}
