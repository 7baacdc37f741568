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
        let mut least = u32::MAX;
        let mut least_count = 0u64;
        let mut total_weight = 0u64;
        let mut first_weight = 0u64;
        let mut same_weight = true;
        let mut first = None;
        for i in candidates {
            let a = shared.active(i);
            let w = shared.weight(i, now) as u64;
            if a < least {
                least = a;
                least_count = 1;
                first = Some(i);
                total_weight = w;
                first_weight = w;
                same_weight = true;
            } else if a == least {
                least_count += 1;
                total_weight += w;
                if w != first_weight {
                    same_weight = false;
                }
            }
        }
        let first = first?;
        if least_count == 1 {
            return Some(first);
        }
        if !same_weight && total_weight > 0 {
            let mut offset = rng.below(total_weight);
            for i in candidates {
                if shared.active(i) == least {
                    let w = shared.weight(i, now) as u64;
                    if offset < w {
                        return Some(i);
                    }
                    offset -= w;
                }
            }
        } else {
            let mut k = rng.below(least_count);
            for i in candidates {
                if shared.active(i) == least {
                    if k == 0 {
                        return Some(i);
                    }
                    k -= 1;
                }
            }
        }
        // Counters moved between the passes: the first least-active candidate seen.
        Some(first)
    }
}
