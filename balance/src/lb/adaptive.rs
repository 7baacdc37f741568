//! `adaptive` (Dubbo 3's `AdaptiveLoadBalance` and `AdaptiveMetrics`): power of two
//! choices on a load that grows with the latency average (an EWMA of β = 0.5), the calls
//! in flight and the failure ratio:
//! `load = (√ewma + 1) × (inflight + 1) / (success/(req+1) × weight + 1)`.
//!
//! - Two distinct candidates are drawn (with two candidates, both without a draw); the
//!   lower load wins; equal loads → weighted random between the two.
//! - A provider not picked for two timeouts has load 0 (it is tried again).
//! - Each look at a provider ages its latency: the first look after an answer takes a
//!   penalty of two timeouts into the average, each later one the last latency halved
//!   once per timeout elapsed, as Dubbo's `getLoad`.
//!
//! Differences from Dubbo, both because gRPC providers do not answer Dubbo's
//! `lb_adaptive` attachment: the provider's CPU load factor is 1, and an answer's time
//! (`curTime`) is the consumer's clock when it arrives. The timeout is the consumer's
//! service-level `timeout` (else Dubbo's 1000 ms).
//!
//! The metrics are the snapshot's [`Responses`](super::response::Responses): atomics,
//! written by the picks and by the service's call outcomes.

use routechain_core::{Candidates, RandomSource, Request};

use super::{Balancer, LoadBalanceKind, Shared};

/// Power of two choices on Dubbo's adaptive load. Keeps no state of its own.
#[derive(Debug, Clone, Copy, Default)]
pub struct Adaptive;

impl Adaptive {
    /// The lower load of `a` and `b` (`chooseLowLoadInvoker`).
    fn lower(shared: &Shared, a: usize, b: usize, rng: &mut dyn RandomSource, now: i64) -> usize {
        let (wa, wb) = (shared.weight(a, now), shared.weight(b, now));
        let responses = shared.responses();
        let timeout = responses.timeout();
        let load = |i: usize, w: u32| responses.get(i).map_or(0.0, |r| r.load(w, timeout, now));
        let (la, lb) = (load(a, wa), load(b, wb));
        if la.to_bits() == lb.to_bits() {
            let total = u64::from(wa) + u64::from(wb);
            if total > 0 {
                return if rng.below(total) < u64::from(wa) {
                    a
                } else {
                    b
                };
            }
            return if rng.below(2) == 0 { a } else { b };
        }
        if la > lb { b } else { a }
    }
}

impl Balancer for Adaptive {
    fn kind(&self) -> LoadBalanceKind {
        LoadBalanceKind::Adaptive
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
        // One candidate: chosen without the balancer, so not counted as picked (Dubbo's
        // `AbstractLoadBalance.select`).
        if n <= 1 {
            return candidates.first();
        }
        let (a, b) = if n == 2 {
            (candidates.nth(0)?, candidates.nth(1)?)
        } else {
            super::two_distinct(candidates, n, rng)?
        };
        let chosen = Self::lower(shared, a, b, rng, now);
        if let Some(r) = shared.responses().get(chosen) {
            r.picked(now);
        }
        Some(chosen)
    }
}
