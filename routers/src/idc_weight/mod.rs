//! The IDC-weight router (`type: idc-weight`): per call, picks the region and the IDC
//! (datacenter) to call, by route table, failover switch, the caller's own IDC or a stable
//! hash, drops degraded providers, and falls back when the choice has no provider.
//!
//! Per call, exactly:
//! 1. Candidates = input minus degraded providers (param `degraded_param` = `true`, or
//!    marked in the live [`routechain_core::DegradedSet`] by the health tracker).
//! 2. Region: the first of [local region] + `cross_region` with a candidate; keep only its
//!    providers. None anywhere → step 5.
//! 3. Target IDC: the region's route table (one draw in `0..100` over cumulative weights);
//!    else, in the local region, `selected[local idc]`; else the local IDC; else (caller's
//!    IDC unknown) a stable hash of the consumer host over the region's known IDCs. In a
//!    cross region without a table, the whole region.
//! 4. Keep the candidates in the target IDC.
//! 5. Nothing left: `force: true` → empty; `force: false` → the candidates of step 2, or
//!    every non-degraded candidate, or (every candidate degraded) the whole input.
//!
//! No rule (an entry without one, or a deleted config-center rule): every provider passes.
//!
//! Prepared per snapshot: region → bitset (a provider without the region param takes the
//! region its IDC is listed under), IDC → bitset, the degraded-param bitset, and the local
//! region/IDC decision for the prepared consumer. The route tables are cumulative weights
//! compiled with the rule. Per call: a few word scans (the region and target checks stop at
//! the first hit) and one pass that narrows the candidates, at most one random draw; no
//! allocation. A provider change carries each provider's IDC and region position over,
//! classifying only the added providers, and builds the sets and counts from those tables
//! ([`PreparedIdcWeight::edited`]). The candidates minus degraded are copied into the
//! scratch bitset only when some provider is live-degraded (or an explain trace is
//! recorded).

//!
//! The folder's files follow those jobs: `rule` (the rule as written, validation, route
//! tables), `prepared` (the per-snapshot indexes and the caller's side of the decision),
//! `route` (steps 1 to 5 per call) and `explain` (the explain trace's words).

mod cidrs;
mod explain;
mod health;
pub(crate) mod options;
mod prepared;
mod route;
mod rule;

use std::sync::Arc;

use routechain_core::{
    Candidates, DegradedSet, Evaluation, PrepareContext, RouteContext, RouterSpec, RuleError,
    SnapshotEdit, TypedRouter,
};

pub use self::prepared::PreparedIdcWeight;
pub use self::rule::{IdcWeightRule, ROUTE_TABLE_TOTAL, RawIdcWeightRule, RouteTable};

/// The default priority of the IDC-weight router: last of the built-in filters, after
/// Dubbo's tag (100) and condition (140/150) routers and the group router (160).
pub const DEFAULT_PRIORITY: i32 = 170;

/// The `idc-weight` router type. An entry without a rule (or whose config-center rule was
/// deleted, `routechain_rules::RuleOverride::Cleared`) passes every provider, as the
/// condition and affinity routers do without a rule.
#[derive(Debug, Clone, Copy, Default)]
pub struct IdcWeightRouter;

impl TypedRouter for IdcWeightRouter {
    type Raw = RawIdcWeightRule;
    type Rule = IdcWeightRule;
    type Prepared = PreparedIdcWeight;

    /// Compiled alike for every service: services of one chain configuration share it.
    fn reads_service(&self) -> bool {
        false
    }

    fn default_priority(&self, _rule: Option<&IdcWeightRule>) -> i32 {
        DEFAULT_PRIORITY
    }

    fn compile(
        &self,
        raw: RawIdcWeightRule,
        spec: &RouterSpec<'_>,
    ) -> Result<IdcWeightRule, Vec<RuleError>> {
        IdcWeightRule::compile(raw, spec.rule_path())
    }

    fn prepare(
        rule: &Arc<IdcWeightRule>,
        cx: &PrepareContext<'_>,
    ) -> Result<PreparedIdcWeight, String> {
        Ok(PreparedIdcWeight::build(rule, cx))
    }

    /// Carries each provider's IDC and region over the edit, classifying only the added
    /// providers.
    fn prepare_edit(
        prepared: &PreparedIdcWeight,
        _rule: &Arc<IdcWeightRule>,
        edit: &SnapshotEdit,
        cx: &PrepareContext<'_>,
    ) -> Option<Result<PreparedIdcWeight, String>> {
        Some(Ok(prepared.edited(edit, cx)))
    }

    fn attach(prepared: &PreparedIdcWeight, degraded: &Arc<DegradedSet>) {
        let options = &prepared.rule.options;
        if options.overprovisioning.is_some() || options.panic_threshold > 0 {
            prepared.health.attach(degraded, &prepared.degraded);
        }
    }

    fn route(
        prepared: &PreparedIdcWeight,
        cx: &mut RouteContext<'_>,
        candidates: &mut Candidates,
    ) -> Evaluation {
        prepared.route(cx, candidates)
    }
}

#[cfg(test)]
mod edit_tests;
#[cfg(test)]
mod health_tests;
#[cfg(test)]
mod tests;
