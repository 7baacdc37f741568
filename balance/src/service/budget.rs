//! The retry budget of a service (Finagle's `RetryBudget`, Envoy's `retry_budget`):
//! failover retries are limited to a share of the calls made over a sliding window, plus a
//! minimum per second, so that when a dependency degrades its retries do not multiply its
//! load. A retry the budget refuses ends the call with
//! [`InvokeError::RetryBudgetExhausted`](super::InvokeError::RetryBudgetExhausted).
//!
//! The window is ten slices of `ttl / 10`, each counting the calls and the retries that
//! started in it (atomics; a slice is reused when its time comes round again). A call adds
//! one to its slice; a retry sums the live slices (ten loads each) and takes one if
//! `retries < min_per_second × ttl + percent × calls / 100`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A retry budget's settings (the chain file's `retry_budget`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryBudget {
    /// Retries allowed per 100 calls (default 20, Finagle's and Envoy's 20%).
    pub percent: u32,
    /// Retries allowed per second whatever the calls (default 10, Finagle's
    /// `minRetriesPerSec`): a service with few calls can still retry.
    pub min_per_second: u32,
    /// The window the calls and retries are counted over (default 10 s, Finagle's `ttl`).
    pub ttl: Duration,
}

impl Default for RetryBudget {
    fn default() -> Self {
        RetryBudget {
            percent: 20,
            min_per_second: 10,
            ttl: Duration::from_secs(10),
        }
    }
}

const SLICES: usize = 10;

/// One slice of the window: which slice of time it counts (its number since the clock's
/// start, plus one: 0 is never used) and its counts.
#[derive(Debug, Default)]
struct Slice {
    epoch: AtomicU64,
    calls: AtomicU64,
    retries: AtomicU64,
}

/// The counts a budget reads: calls and retries per slice of its window.
#[derive(Debug, Default)]
pub(crate) struct BudgetCounts {
    slices: [Slice; SLICES],
}

impl BudgetCounts {
    /// The slice of `now` (its epoch and itself), reset when it last counted an older
    /// slice of time.
    fn slice(&self, now: Duration, budget: &RetryBudget) -> (u64, &Slice) {
        let width = (budget.ttl.as_nanos() / SLICES as u128).max(1);
        let epoch = u64::try_from(now.as_nanos() / width).unwrap_or(u64::MAX - 1) + 1;
        let slice = &self.slices[(epoch % SLICES as u64) as usize];
        let seen = slice.epoch.load(Ordering::Relaxed);
        if seen != epoch
            && slice
                .epoch
                .compare_exchange(seen, epoch, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            slice.calls.store(0, Ordering::Relaxed);
            slice.retries.store(0, Ordering::Relaxed);
        }
        (epoch, slice)
    }

    /// Counts a call (its first attempt) at `now`.
    pub(crate) fn call(&self, now: Duration, budget: &RetryBudget) {
        self.slice(now, budget)
            .1
            .calls
            .fetch_add(1, Ordering::Relaxed);
    }

    /// Takes one retry at `now` from the budget: false when it is spent.
    pub(crate) fn retry(&self, now: Duration, budget: &RetryBudget) -> bool {
        let (epoch, current) = self.slice(now, budget);
        let (mut calls, mut retries) = (0u64, 0u64);
        for s in &self.slices {
            let e = s.epoch.load(Ordering::Relaxed);
            if e != 0 && e + (SLICES as u64) > epoch {
                calls += s.calls.load(Ordering::Relaxed);
                retries += s.retries.load(Ordering::Relaxed);
            }
        }
        let reserve = u64::from(budget.min_per_second).saturating_mul(budget.ttl.as_secs().max(1));
        let allowed = reserve.saturating_add(calls * u64::from(budget.percent) / 100);
        if retries >= allowed {
            return false;
        }
        current.retries.fetch_add(1, Ordering::Relaxed);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(percent: u32, min_per_second: u32) -> RetryBudget {
        RetryBudget {
            percent,
            min_per_second,
            ttl: Duration::from_secs(10),
        }
    }

    /// Retries allowed at `now` until the budget refuses one.
    fn drain(c: &BudgetCounts, now: Duration, b: &RetryBudget) -> u64 {
        let mut n = 0;
        while c.retry(now, b) {
            n += 1;
            assert!(n < 1_000_000);
        }
        n
    }

    #[test]
    fn retries_are_a_share_of_the_calls_plus_the_reserve() {
        let b = budget(20, 1);
        let c = BudgetCounts::default();
        let now = Duration::from_secs(100);
        for _ in 0..1000 {
            c.call(now, &b);
        }
        // 20% of 1000 plus 1 per second over 10 s.
        assert_eq!(drain(&c, now, &b), 210);
        // More calls make more room.
        for _ in 0..50 {
            c.call(now, &b);
        }
        assert_eq!(drain(&c, now, &b), 10);
    }

    #[test]
    fn without_calls_the_reserve_alone_and_none_without_it() {
        let c = BudgetCounts::default();
        assert_eq!(drain(&c, Duration::from_secs(1), &budget(20, 3)), 30);
        let c = BudgetCounts::default();
        assert_eq!(drain(&c, Duration::from_secs(1), &budget(20, 0)), 0);
    }

    #[test]
    fn the_window_slides_a_slice_at_a_time() {
        let b = budget(100, 0);
        let c = BudgetCounts::default();
        let t0 = Duration::from_secs(50);
        for _ in 0..100 {
            c.call(t0, &b);
        }
        assert_eq!(drain(&c, t0, &b), 100);
        // 9.5 s later the calls and the retries still count: nothing left.
        assert_eq!(drain(&c, t0 + Duration::from_millis(9500), &b), 0);
        // Past the window both are gone.
        let later = t0 + Duration::from_secs(11);
        assert_eq!(drain(&c, later, &b), 0);
        for _ in 0..10 {
            c.call(later, &b);
        }
        assert_eq!(drain(&c, later, &b), 10);
    }
}
