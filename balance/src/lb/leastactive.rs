//! `leastactive` (Dubbo's `LeastActiveLoadBalance`): the candidates with the fewest calls
//! in flight; one → it; several → weighted random among them (uniform when their weights
//! are equal or zero).
//!
//! In-flight counts are the snapshot's atomics ([`Shared::active`]), counted by the
//! service's guards. A pick reads every candidate's count (that is what the algorithm is):
//! O(candidates), no list.

use routechain_core::{Candidates, RandomSource, Request};

use super::{Balancer, LoadBalanceKind, Shared};

/// Least active, ties weighted random. Keeps no state of its own.
#[derive(Debug, Clone, Copy, Default)]
pub struct LeastActive;

impl Balancer for LeastActive {
    fn kind(&self) -> LoadBalanceKind {
        LoadBalanceKind::LeastActive
    }

    fn pick_at(
        &self,
        shared: &Shared,
        _request: &Request,
        candidates: &Candidates,
        rng: &mut dyn RandomSource,
        now: i64,
    ) -> Option<usize> {
        super::least::least_by(shared, candidates, rng, now, |i| shared.active(i)).0
    }
}
