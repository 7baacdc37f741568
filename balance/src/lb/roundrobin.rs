//! `roundrobin` (Dubbo's `RoundRobinLoadBalance`): smooth weighted round robin, nginx's.
//!
//! Every candidate's current weight grows by its weight, the largest is chosen and loses
//! the total. The current weights are atomics prepared per snapshot and balancer slot; a
//! pick reads every candidate's (that is what the algorithm is): O(candidates), no list.

use std::sync::atomic::{AtomicI64, Ordering};

use routechain_core::{Candidates, RandomSource, Request};

use super::{Balancer, LoadBalanceKind, Shared};

/// Smooth weighted round robin over one snapshot: weights 5, 1, 1 give `a a b a c a a`.
#[derive(Debug)]
pub struct RoundRobin {
    /// Each provider's current weight.
    current: Box<[AtomicI64]>,
}

impl RoundRobin {
    /// The state for `providers` providers, every current weight zero.
    pub fn new(providers: usize) -> Self {
        RoundRobin {
            current: (0..providers).map(|_| AtomicI64::new(0)).collect(),
        }
    }
}

impl Balancer for RoundRobin {
    fn kind(&self) -> LoadBalanceKind {
        LoadBalanceKind::RoundRobin
    }

    fn pick_at(
        &self,
        shared: &Shared,
        _request: &Request,
        candidates: &Candidates,
        _rng: &mut dyn RandomSource,
        now: i64,
    ) -> Option<usize> {
        let mut total: i64 = 0;
        let mut best: Option<(usize, i64)> = None;
        for i in candidates {
            // A candidate past the snapshot (a candidate set of another size) is skipped.
            let Some(slot) = self.current.get(i) else {
                continue;
            };
            let w = shared.weight(i, now) as i64;
            let cur = slot.fetch_add(w, Ordering::Relaxed) + w;
            total += w;
            if best.is_none_or(|(_, max)| cur > max) {
                best = Some((i, cur));
            }
        }
        let (i, _) = best?;
        if let Some(slot) = self.current.get(i) {
            slot.fetch_sub(total, Ordering::Relaxed);
        }
        Some(i)
    }
}
