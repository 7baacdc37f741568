//! The `condition` router: Dubbo's condition rules, v3.0 text (`when => then`) and v3.1
//! from/to with weighted destinations, exactly as Dubbo 3.3 routes them, with the
//! provider side precomputed.
//!
//! - `rule`: the rule as written ([`RawConditionRule`]) and compiled ([`ConditionRule`]);
//!   `parser` turns the condition texts into `matcher::Term`s and reports located errors.
//! - `prepared`: per snapshot and consumer, every then-part and every v3.1 `to.match` as a
//!   [`routechain_core::ProviderSet`]; `$name` references resolve against the prepared
//!   consumer; for a request that carries another consumer, each reference costs one
//!   [`routechain_core::ValueIndex`] lookup per evaluation of its then-part (a consumer value
//!   that is a glob is decided once per distinct provider value). When-parts that read
//!   nothing from the request are decided at prepare time (unless `runtime: true`), and the
//!   route is then reported [`Evaluation::Cached`].
//! - A provider change prepares that state again over the new snapshot (about 2 ms at
//!   100,000 providers, within a provider push's budget: `cargo run --release -p
//!   routechain-benches --example edit_table`).
//! - `route`: per call, the when-part's string compares, bitset intersections, and for v3.1
//!   one draw `rng().below(sum of weights)` over the non-empty destinations (with the
//!   rule's `hash_key`, routechain's own field: the request's stable hash scaled onto the
//!   sum instead, so a user keeps its destination), with the explain texts. Nothing allocates (the per-call form for another consumer works in the call's
//!   scratch bitset).
//! - [`ConditionRouter`] is the type `condition` (default priority 140 for `scope: service`,
//!   150 for `scope: application`).

// The parsed form of a condition text: `routechain check`'s lint (routechain-cli), the fuzz
// targets and the rule-memory test read it. Public for them, not part of the API.
#[doc(hidden)]
pub mod matcher;
#[doc(hidden)]
pub mod parser;
mod prepared;
mod route;
mod rule;

use std::sync::Arc;

use routechain_core::{
    Candidates, Evaluation, PrepareContext, RouteContext, RouterSpec, RuleError, TypedRouter,
};

pub use self::prepared::PreparedCondition;
pub use self::rule::{
    Action, Condition, ConditionRule, ConfigVersion, DEFAULT_DESTINATION_WEIGHT, Destination,
    RawConditionRule, Scope, SourceText, condition_texts,
};

/// Dubbo's priority of a service-scope condition rule (and of an entry without a rule).
pub const DEFAULT_PRIORITY: i32 = 140;
/// Dubbo's priority of an application-scope condition rule.
pub const APPLICATION_SCOPE_PRIORITY: i32 = 150;

/// The `condition` router type. Without a rule every provider passes.
#[derive(Debug, Clone, Copy, Default)]
pub struct ConditionRouter;

impl TypedRouter for ConditionRouter {
    type Raw = RawConditionRule;
    type Rule = ConditionRule;
    type Prepared = PreparedCondition;

    /// Compiled alike for every service: services of one chain configuration share it.
    fn reads_service(&self) -> bool {
        false
    }

    fn default_priority(&self, rule: Option<&ConditionRule>) -> i32 {
        match rule.map(|r| r.scope) {
            Some(Scope::Application) => APPLICATION_SCOPE_PRIORITY,
            _ => DEFAULT_PRIORITY,
        }
    }

    /// `condition(service)` or `condition(application)`.
    fn name(&self, type_name: &str, rule: &ConditionRule) -> String {
        format!("{type_name}({})", rule.scope.as_str())
    }

    fn compile(
        &self,
        raw: RawConditionRule,
        spec: &RouterSpec<'_>,
    ) -> Result<ConditionRule, Vec<RuleError>> {
        ConditionRule::compile(raw, spec.rule_path())
    }

    fn prepare(
        rule: &Arc<ConditionRule>,
        cx: &PrepareContext<'_>,
    ) -> Result<PreparedCondition, String> {
        Ok(PreparedCondition::build(rule, cx))
    }

    fn route(
        prepared: &PreparedCondition,
        cx: &mut RouteContext<'_>,
        candidates: &mut Candidates,
    ) -> Evaluation {
        prepared.route(cx, candidates)
    }
}

#[cfg(test)]
mod hostile_tests;
#[cfg(test)]
mod sticky_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod zero_alloc_tests;
