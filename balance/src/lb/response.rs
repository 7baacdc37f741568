//! What the latency-aware balancers learn from the service's own calls: per provider,
//! Dubbo's `RpcStatus` succeeded counters (for `shortestresponse`) and its
//! `AdaptiveMetrics` (for `adaptive`), all atomics written by the call outcome
//! ([`Shared::record`](super::Shared::record)) and the picks, never locked.
//!
//! Allocated only for a snapshot whose balancer slots include one of the two algorithms;
//! like the in-flight counters, they start at zero on each new provider list.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};

/// Dubbo's `shortestResponseSlidePeriod` default: the succeeded averages restart every
/// 30 s.
pub const SLIDE_PERIOD_MS: i64 = 30_000;

/// The timeout `adaptive`'s load reads when the consumer sets none (Dubbo's
/// `DEFAULT_TIMEOUT`, ms).
pub const DEFAULT_TIMEOUT_MS: i64 = 1000;

/// One provider's response statistics.
#[derive(Debug, Default)]
pub struct Response {
    /// Calls answered (`RpcStatus.getSucceeded`).
    succeeded: AtomicU64,
    /// Their total elapsed time, microseconds (`getSucceededElapsed`).
    succeeded_elapsed: AtomicU64,
    /// `succeeded` when the sliding window last restarted.
    succeeded_offset: AtomicU64,
    /// `succeeded_elapsed` when the sliding window last restarted.
    elapsed_offset: AtomicU64,
    /// `adaptive`: picks (`consumerReq`).
    req: AtomicU64,
    /// `adaptive`: answers (`consumerSuccess`).
    success: AtomicU64,
    /// `adaptive`: failures (`errorReq`).
    errors: AtomicU64,
    /// `adaptive`: when it was last picked, ms since the epoch (`pickTime`).
    pick_time: AtomicI64,
    /// `adaptive`: `currentTime` (ms).
    current_time: AtomicI64,
    /// `adaptive`: `currentProviderTime` (ms), the time of the last answer.
    provider_time: AtomicI64,
    /// `adaptive`: `lastLatency` (ms).
    last_latency: AtomicI64,
    /// `adaptive`: `ewma`, the bits of an `f64`.
    ewma: AtomicU64,
}

impl Response {
    /// Fresh statistics at `now` (ms since the epoch: Dubbo starts `pickTime` at creation).
    pub fn new(now: i64) -> Self {
        Response {
            pick_time: AtomicI64::new(now),
            ..Response::default()
        }
    }

    /// `shortestresponse`'s estimate: the window's average succeeded elapsed time times
    /// (in-flight calls + 1).
    #[inline]
    pub fn estimate(&self, active: u32) -> u64 {
        let succeeded = self
            .succeeded
            .load(Ordering::Relaxed)
            .saturating_sub(self.succeeded_offset.load(Ordering::Relaxed));
        if succeeded == 0 {
            return 0;
        }
        let elapsed = self
            .succeeded_elapsed
            .load(Ordering::Relaxed)
            .saturating_sub(self.elapsed_offset.load(Ordering::Relaxed));
        (elapsed / succeeded).saturating_mul(u64::from(active) + 1)
    }

    /// Restarts the sliding window (`SlideWindowData.reset`).
    fn reset(&self) {
        self.succeeded_offset
            .store(self.succeeded.load(Ordering::Relaxed), Ordering::Relaxed);
        self.elapsed_offset.store(
            self.succeeded_elapsed.load(Ordering::Relaxed),
            Ordering::Relaxed,
        );
    }

    /// Records a call that ended after `elapsed_us` microseconds at `now` (ms since the
    /// epoch); `answered`: the provider answered (an application error included), else
    /// it failed or timed out.
    pub fn record(&self, elapsed_us: u64, answered: bool, now: i64) {
        if !answered {
            self.errors.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.succeeded.fetch_add(1, Ordering::Relaxed);
        self.succeeded_elapsed
            .fetch_add(elapsed_us, Ordering::Relaxed);
        self.success.fetch_add(1, Ordering::Relaxed);
        // `setProviderMetrics` with the consumer's clock as the provider's `curTime` and
        // the measured elapsed time as `rt`; an answer older than the last is dropped.
        if self.provider_time.load(Ordering::Relaxed) > now {
            return;
        }
        let rt = (elapsed_us / 1000) as i64;
        self.provider_time.store(now, Ordering::Relaxed);
        self.current_time.store(now, Ordering::Relaxed);
        self.last_latency.store(rt, Ordering::Relaxed);
        let ewma = 0.5 * f64::from_bits(self.ewma.load(Ordering::Relaxed)) + 0.5 * rt as f64;
        self.ewma.store(ewma.to_bits(), Ordering::Relaxed);
    }

    /// `adaptive`'s counters: picks, answers, failures.
    pub fn counts(&self) -> (u64, u64, u64) {
        (
            self.req.load(Ordering::Relaxed),
            self.success.load(Ordering::Relaxed),
            self.errors.load(Ordering::Relaxed),
        )
    }

    /// `adaptive`: counts a pick at `now` (`addConsumerReq`, `setPickTime`).
    #[inline]
    pub fn picked(&self, now: i64) {
        self.req.fetch_add(1, Ordering::Relaxed);
        self.pick_time.store(now, Ordering::Relaxed);
    }

    /// `adaptive`'s load (`AdaptiveMetrics.getLoad`) at `now` with `weight` and `timeout`
    /// (ms, at least 1): 0 when not picked for two timeouts; else the latency average is
    /// aged (a penalty of two timeouts on the first look after an answer, then halved per
    /// timeout elapsed) and the load is
    /// `cpu × (√ewma + 1) × (inflight + 1) / (success/(req+1) × weight + 1)`, the
    /// providers' CPU load taken as 1 (gRPC providers do not send Dubbo's `load`).
    pub fn load(&self, weight: u32, timeout: i64, now: i64) -> f64 {
        if now - self.pick_time.load(Ordering::Relaxed) > timeout * 2 {
            return 0.0;
        }
        let current = self.current_time.load(Ordering::Relaxed);
        let mut ewma = f64::from_bits(self.ewma.load(Ordering::Relaxed));
        if current > 0 {
            let multiple = (now - current) / timeout + 1;
            if multiple > 0 {
                let latency = if self.provider_time.load(Ordering::Relaxed) == current {
                    timeout * 2
                } else {
                    // Java's `>>` on a long: the shift count is taken mod 64.
                    self.last_latency.load(Ordering::Relaxed) >> (multiple & 63)
                };
                self.last_latency.store(latency, Ordering::Relaxed);
                ewma = 0.5 * ewma + 0.5 * latency as f64;
                self.ewma.store(ewma.to_bits(), Ordering::Relaxed);
                self.current_time.store(now, Ordering::Relaxed);
            }
        }
        let req = self.req.load(Ordering::Relaxed);
        let success = self.success.load(Ordering::Relaxed);
        let inflight = req as i64 - success as i64 - self.errors.load(Ordering::Relaxed) as i64;
        const CPU_LOAD: f64 = 1.0;
        CPU_LOAD * (ewma.sqrt() + 1.0) * (inflight + 1) as f64
            / ((success as f64 / (req + 1) as f64) * f64::from(weight) + 1.0)
    }
}

/// The statistics of every provider of a snapshot and the sliding window's clock.
#[derive(Debug, Default)]
pub struct Responses {
    providers: Box<[Response]>,
    /// When the window last restarted (ms since the epoch).
    window_start: AtomicI64,
    /// True while one pick restarts the window.
    resetting: AtomicBool,
    /// The timeout `adaptive` reads (ms, at least 1).
    timeout: i64,
}

impl Responses {
    /// None (the snapshot's balancers do not read response times).
    pub fn none() -> Self {
        Responses::default()
    }

    /// Fresh statistics for `n` providers at `now` (ms since the epoch), `adaptive`
    /// reading `timeout` ms.
    pub fn new(n: usize, now: i64, timeout: i64) -> Self {
        Responses {
            providers: (0..n).map(|_| Response::new(now)).collect(),
            window_start: AtomicI64::new(now),
            resetting: AtomicBool::new(false),
            timeout: timeout.max(1),
        }
    }

    /// True when allocated (some balancer reads response times).
    #[inline]
    pub fn kept(&self) -> bool {
        !self.providers.is_empty()
    }

    /// Provider `i`'s statistics.
    #[inline]
    pub fn get(&self, i: usize) -> Option<&Response> {
        self.providers.get(i)
    }

    /// The timeout `adaptive` reads (ms).
    #[inline]
    pub fn timeout(&self) -> i64 {
        self.timeout
    }

    /// Restarts the sliding window when a period has passed at `now`; one caller does it
    /// (a compare-and-swap), the others carry on with the current averages, as Dubbo's
    /// asynchronous reset.
    #[inline]
    pub fn slide(&self, now: i64) {
        if now - self.window_start.load(Ordering::Relaxed) > SLIDE_PERIOD_MS
            && self
                .resetting
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        {
            for r in self.providers.iter() {
                r.reset();
            }
            self.window_start.store(now, Ordering::Relaxed);
            self.resetting.store(false, Ordering::Release);
        }
    }
}
