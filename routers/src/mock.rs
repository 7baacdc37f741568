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
    BitSet, Candidates, Evaluation, PrepareContext, PrepareError, PreparedRouter, ProviderSet,
    RouteContext, Router, RouterFactory, RouterSpec, RuleError, Snapshot,
};

/// The attachment that asks for mock providers.
pub const NEED_MOCK_KEY: &str = "invocation.need.mock";
/// The protocol of mock providers.
pub const MOCK_PROTOCOL: &str = "mock";
/// Dubbo's order for the mock router.
pub const DEFAULT_PRIORITY: i32 = -100;

/// Builds `mock` routers; an entry with a rule is an error.
#[derive(Debug, Clone, Copy, Default)]
pub struct MockFactory;

impl RouterFactory for MockFactory {
    fn default_priority(&self, _spec: &RouterSpec<'_>) -> i32 {
        DEFAULT_PRIORITY
    }

    fn build(&self, spec: &RouterSpec<'_>) -> Result<Arc<dyn Router>, Vec<RuleError>> {
        if let Some(rule) = spec.rule {
            return Err(vec![RuleError::new(
                rule.path.clone(),
                "the mock router takes no rule: it routes by the `invocation.need.mock` attachment",
            )]);
        }
        Ok(Arc::new(MockRouter))
    }
}

/// The mock router.
#[derive(Debug, Clone, Copy, Default)]
pub struct MockRouter;

impl Router for MockRouter {
    fn name(&self) -> &str {
        "mock"
    }

    fn prepare(&self, cx: &PrepareContext<'_>) -> Result<Arc<dyn PreparedRouter>, PrepareError> {
        Ok(Arc::new(PreparedMock::build(cx.snapshot)))
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
}

impl PreparedRouter for PreparedMock {
    fn route(&self, cx: &mut RouteContext<'_>, candidates: &mut Candidates) -> Evaluation {
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
