//! The mock router (Dubbo's `MockInvokersSelector`): providers with protocol `mock` serve only
//! calls that ask for them.
//!
//! - attachment `invocation.need.mock` absent → providers whose protocol is not `mock`;
//! - `true` (any case) → providers whose protocol is `mock`;
//! - any other value → the candidates unchanged.
//!
//! Both sets are precomputed per snapshot; per call one attachment lookup and one bitset AND.
//! The router takes no rule; Dubbo runs it first (priority −100).

use std::sync::Arc;

use routechain_core::{
    BitSet, Candidates, Evaluation, PrepareContext, ProviderSet, RouteContext, RouterSpec,
    RuleError, Snapshot, TypedRouter,
};

/// The attachment that asks for mock providers.
pub const NEED_MOCK_KEY: &str = "invocation.need.mock";
/// The protocol of mock providers.
pub const MOCK_PROTOCOL: &str = "mock";
/// Dubbo's order for the mock router.
pub const DEFAULT_PRIORITY: i32 = -100;

/// The `mock` router type. It takes no rule: an entry with one is an error.
#[derive(Debug, Clone, Copy, Default)]
pub struct MockRouter;

/// The mock router's rule: none (an entry always compiles to this).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MockRule;

impl TypedRouter for MockRouter {
    type Raw = serde::de::IgnoredAny;
    type Rule = MockRule;
    type Prepared = PreparedMock;

    /// Compiled alike for every service: services of one chain configuration share it.
    fn reads_service(&self) -> bool {
        false
    }

    fn default_priority(&self, _rule: Option<&MockRule>) -> i32 {
        DEFAULT_PRIORITY
    }

    fn compile(
        &self,
        _raw: serde::de::IgnoredAny,
        spec: &RouterSpec<'_>,
    ) -> Result<MockRule, Vec<RuleError>> {
        Err(vec![RuleError::new(
            spec.rule_path().clone(),
            "the mock router takes no rule: it routes by the `invocation.need.mock` attachment",
        )])
    }

    fn without_rule(&self, _spec: &RouterSpec<'_>) -> Result<Option<MockRule>, Vec<RuleError>> {
        Ok(Some(MockRule))
    }

    fn prepare(_rule: &Arc<MockRule>, cx: &PrepareContext<'_>) -> Result<PreparedMock, String> {
        Ok(PreparedMock::build(cx.snapshot))
    }

    fn route(
        prepared: &PreparedMock,
        cx: &mut RouteContext<'_>,
        candidates: &mut Candidates,
    ) -> Evaluation {
        prepared.route(cx, candidates)
    }
}

/// The mock and normal providers of one snapshot.
#[derive(Debug, Clone)]
pub struct PreparedMock {
    mocked: ProviderSet,
    normal: ProviderSet,
}

impl PreparedMock {
    /// Splits `snapshot` by protocol.
    pub fn build(snapshot: &Snapshot) -> Self {
        let mocked = BitSet::from_fn(snapshot.len(), |i| {
            snapshot.providers()[i].protocol() == MOCK_PROTOCOL
        });
        let mut normal = BitSet::full(snapshot.len());
        normal.and_not_assign(&mocked);
        PreparedMock {
            mocked: ProviderSet::from_bitset(mocked),
            normal: ProviderSet::from_bitset(normal),
        }
    }

    /// Routes one call.
    pub fn route(&self, cx: &mut RouteContext<'_>, candidates: &mut Candidates) -> Evaluation {
        match cx.request().attachments.get(NEED_MOCK_KEY) {
            None => {
                self.normal.and_into(candidates);
                cx.explain(format_args!(
                    "invocation.need.mock not set: providers whose protocol is not mock"
                ));
            }
            Some(v) if v.eq_ignore_ascii_case("true") => {
                self.mocked.and_into(candidates);
                cx.explain(format_args!(
                    "invocation.need.mock=true: providers whose protocol is mock"
                ));
            }
            Some(v) => {
                cx.explain(format_args!(
                    "invocation.need.mock={v:?} is not true: candidates unchanged"
                ));
            }
        }
        Evaluation::Runtime
    }
}

#[cfg(test)]
mod tests;
