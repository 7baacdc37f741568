//! `p2c` (Dubbo 3.2's `P2CLoadBalance`, on in-flight calls): the power of two choices.
//!
//! Two distinct candidates are drawn uniformly — two `nth` lookups by popcount,
//! O(words) — and the one with fewer calls in flight wins (then the larger weight, then
//! the first drawn).

use routechain_core::{Candidates, RandomSource, Request};

use super::{Balancer, LoadBalanceKind, Shared};

/// Power of two choices over in-flight calls. Keeps no state of its own.
#[derive(Debug, Clone, Copy, Default)]
pub struct P2c;

impl Balancer for P2c {
    fn kind(&self) -> LoadBalanceKind {
        LoadBalanceKind::P2c
    }

    fn pick_at(
        &self,
        shared: &Shared,
        _request: &Request,
        candidates: &Candidates,
        rng: &mut dyn RandomSource,
        now: i64,
    ) -> Option<usize> {
        let n = candidates.count() as u64;
        if n <= 1 {
            return candidates.first();
        }
        let (ia, ib) = super::two_distinct(candidates, n, rng)?;
        let (aa, ab) = (shared.active(ia), shared.active(ib));
        Some(
            if ab < aa || (ab == aa && shared.weight(ib, now) > shared.weight(ia, now)) {
                ib
            } else {
                ia
            },
        )
    }
}
