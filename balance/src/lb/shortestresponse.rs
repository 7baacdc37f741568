//! `shortestresponse` (Dubbo's `ShortestResponseLoadBalance`): the candidates with the
//! shortest estimated response, `average succeeded elapsed time × (in-flight + 1)`, the
//! average taken over a sliding window restarted every 30 s; one → it; several →
//! weighted random among them (uniform when their weights are equal or zero), as
//! `leastactive`.
//!
//! The averages are the snapshot's [`Responses`](super::response::Responses), fed by the
//! service's call outcomes; elapsed times are kept in microseconds (Dubbo: milliseconds),
//! so calls faster than a millisecond still rank. A pick reads every candidate's
//! estimate: O(candidates), no list.

use routechain_core::{Candidates, RandomSource, Request};

use super::{Balancer, LoadBalanceKind, Shared};

/// Shortest estimated response, ties weighted random. Keeps no state of its own.
#[derive(Debug, Clone, Copy, Default)]
pub struct ShortestResponse;

impl ShortestResponse {
    /// The choice, and whether there were several candidates.
    fn choose(
        shared: &Shared,
        candidates: &Candidates,
        rng: &mut dyn RandomSource,
        now: i64,
    ) -> (Option<usize>, bool) {
        let estimate = |i: usize| shared.estimate(i);
        let mut seen = 0u32;
        let mut shortest = u64::MAX;
        let mut count = 0u64;
        let mut total_weight = 0u64;
        let mut first_weight = 0u64;
        let mut same_weight = true;
        let mut first = None;
        for i in candidates {
            seen += 1;
            let e = estimate(i);
            let w = u64::from(shared.weight(i, now));
            if e < shortest {
                shortest = e;
                count = 1;
                first = Some(i);
                total_weight = w;
                first_weight = w;
                same_weight = true;
            } else if e == shortest {
                count += 1;
                total_weight += w;
                if w != first_weight {
                    same_weight = false;
                }
            }
        }
        let Some(first) = first else {
            return (None, false);
        };
        let many = seen > 1;
        if count == 1 {
            return (Some(first), many);
        }
        if !same_weight && total_weight > 0 {
            let mut offset = rng.below(total_weight);
            for i in candidates {
                if estimate(i) == shortest {
                    let w = u64::from(shared.weight(i, now));
                    if offset < w {
                        return (Some(i), many);
                    }
                    offset -= w;
                }
            }
        } else {
            let mut k = rng.below(count);
            for i in candidates {
                if estimate(i) == shortest {
                    if k == 0 {
                        return (Some(i), many);
                    }
                    k -= 1;
                }
            }
        }
        // Estimates moved between the passes: the first shortest candidate seen.
        (Some(first), many)
    }
}

impl Balancer for ShortestResponse {
    fn kind(&self) -> LoadBalanceKind {
        LoadBalanceKind::ShortestResponse
    }

    fn pick_at(
        &self,
        shared: &Shared,
        _request: &Request,
        candidates: &Candidates,
        rng: &mut dyn RandomSource,
        now: i64,
    ) -> Option<usize> {
        let (picked, many) = Self::choose(shared, candidates, rng, now);
        // After the choice, as Dubbo restarts the window asynchronously once the pick has
        // read the averages; a lone candidate is chosen without the balancer (Dubbo's
        // `AbstractLoadBalance.select`), so it does not restart the window.
        if many {
            shared.responses().slide(now);
        }
        picked
    }
}
