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
        let (picked, seen) =
            super::least::least_by(shared, candidates, rng, now, |i| shared.estimate(i));
        (picked, seen > 1)
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
