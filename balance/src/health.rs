//! Provider health tracking: outlier ejection by consecutive failures, by error rate and
//! by slow-call rate, cool-downs that grow with each ejection, probation, and a cap on the
//! share of the providers ejected at once (Envoy's outlier detection).
//!
//! The tracker marks and clears bits of the chain's [`DegradedSet`] (in `routechain-core`,
//! because routers read it per call) as calls fail and recover: an ejected provider is a
//! degraded one, the one mechanism routers and the breaker read.
//!
//! [`HealthTable`] is the tracker's per-snapshot state (consecutive failures, the current
//! window's counts, cool-down ends, probation, times ejected), driven by an injectable
//! [`Clock`]; [`crate::service::Cluster`] owns it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use once_cell::race::OnceBox;
use routechain_core::DegradedSet;

/// Time as the health tracker sees it: a monotonic duration since some fixed start.
/// Injectable so tests move time by hand ([`ManualClock`]).
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// The time now.
    fn now(&self) -> Duration;

    /// The wall-clock time in milliseconds since the Unix epoch: what a provider's
    /// `timestamp` is compared with for warm-up.
    fn epoch_millis(&self) -> i64 {
        crate::lb::epoch_millis()
    }
}

/// The real monotonic clock.
#[derive(Debug, Clone, Copy)]
pub struct SystemClock {
    start: Instant,
}

impl SystemClock {
    /// A clock starting now.
    pub fn new() -> Self {
        SystemClock {
            start: Instant::now(),
        }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for SystemClock {
    fn now(&self) -> Duration {
        self.start.elapsed()
    }
}

/// A clock that moves only when told to (tests). Its wall clock starts at the system time
/// when it is made (or the epoch time given to [`ManualClock::at_epoch`]) and moves with it.
#[derive(Debug)]
pub struct ManualClock {
    nanos: AtomicU64,
    epoch_start: i64,
}

impl Default for ManualClock {
    fn default() -> Self {
        Self::at_epoch(crate::lb::epoch_millis())
    }
}

impl ManualClock {
    /// A clock at zero.
    pub fn new() -> Self {
        Self::default()
    }
    /// A clock at zero whose wall clock reads `epoch_millis` (ms since the Unix epoch).
    pub fn at_epoch(epoch_millis: i64) -> Self {
        ManualClock {
            nanos: AtomicU64::new(0),
            epoch_start: epoch_millis,
        }
    }
    /// Moves the clock forward by `d`.
    pub fn advance(&self, d: Duration) {
        self.nanos.fetch_add(d.as_nanos() as u64, Ordering::Relaxed);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Duration {
        Duration::from_nanos(self.nanos.load(Ordering::Relaxed))
    }
    fn epoch_millis(&self) -> i64 {
        self.epoch_start + (self.nanos.load(Ordering::Relaxed) / 1_000_000) as i64
    }
}

/// When a provider is ejected (degraded) and for how long (the chain file's `health`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthConfig {
    /// Consecutive failures that eject a provider (default 5).
    pub failure_threshold: u32,
    /// How long a provider ejected for the first time stays out (default 30 s; Envoy's
    /// `base_ejection_time`); the n-th ejection lasts n × `cooldown`, at most
    /// `max_cooldown`. Then it is on probation: one success clears it, one failure ejects
    /// it again.
    pub cooldown: Duration,
    /// The longest ejection (default 300 s, Envoy's `max_ejection_time`).
    pub max_cooldown: Duration,
    /// Never more than this percentage of the service's providers ejected at once, at
    /// least one (default 100; Envoy's `max_ejection_percent`, whose default is 10).
    pub max_ejection_percent: u32,
    /// The window the rates are counted over (default 10 s, Envoy's `interval`).
    pub window: Duration,
    /// Calls a provider must have had in the window before a rate ejects it (default 20).
    pub min_requests: u32,
    /// Eject a provider whose failed calls reach this percentage of its calls in the
    /// window (default none; Envoy's `failure_percentage_threshold`).
    pub failure_percentage: Option<u32>,
    /// A call at least this long is slow (default none: slow calls are not counted).
    pub slow_call: Option<Duration>,
    /// With `slow_call`: eject a provider whose slow calls reach this percentage of its
    /// calls in the window (default 50).
    pub slow_call_percentage: u32,
}

impl Default for HealthConfig {
    fn default() -> Self {
        HealthConfig {
            failure_threshold: 5,
            cooldown: Duration::from_secs(30),
            max_cooldown: Duration::from_secs(300),
            max_ejection_percent: 100,
            window: Duration::from_secs(10),
            min_requests: 20,
            failure_percentage: None,
            slow_call: None,
            slow_call_percentage: 50,
        }
    }
}

impl HealthConfig {
    /// True when calls are counted per window (a rate can eject).
    #[inline]
    pub fn counts_rates(&self) -> bool {
        self.failure_percentage.is_some() || self.slow_call.is_some()
    }

    /// How long the `times`-th ejection lasts: `cooldown × times`, at most `max_cooldown`
    /// (never below `cooldown`).
    pub fn ejection_time(&self, times: u32) -> Duration {
        self.cooldown
            .saturating_mul(times.max(1))
            .min(self.max_cooldown.max(self.cooldown))
    }

    /// The most providers of `len` ejected at once: `max_ejection_percent` of them, at
    /// least one.
    pub fn max_ejected(&self, len: usize) -> usize {
        (len * self.max_ejection_percent.min(100) as usize / 100).max(1)
    }
}

/// The clock time (in nanoseconds) a cool-down of `d` started at `now` ends: at least 1 (0
/// means "not degraded") and below `u64::MAX` (no pending expiry), saturating for a
/// cool-down too long to count in nanoseconds.
fn cooldown_end(now: Duration, d: Duration) -> u64 {
    let end = now.saturating_add(d).as_nanos();
    u64::try_from(end)
        .unwrap_or(u64::MAX)
        .clamp(1, u64::MAX - 1)
}

/// The clock time in nanoseconds.
fn nanos(now: Duration) -> u64 {
    u64::try_from(now.as_nanos()).unwrap_or(u64::MAX)
}

/// What one report did to a provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HealthChange {
    /// Nothing visible changed.
    None,
    /// The provider was just degraded.
    Degraded,
    /// A provider on probation succeeded: healthy again.
    Recovered,
}

/// One provider's health, carried from snapshot to snapshot by address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ProviderHealth {
    /// Consecutive failures since the last success.
    pub failures: u32,
    /// While degraded: the clock time its cool-down ends (nanoseconds), else 0.
    pub degraded_until: u64,
    /// Let back in after a cool-down, not yet proven healthy.
    pub probation: bool,
    /// Times ejected (the next ejection lasts one cool-down more); one less for each
    /// window the provider ends healthy.
    pub ejections: u32,
}

/// Per-snapshot health counters: consecutive failures, cool-downs and probation, marking
/// and clearing the bits of the chain state's [`DegradedSet`]. Lock-free: atomics only.
///
/// The per-provider counters (13 bytes per provider) are allocated by the first
/// report that records something (a failure, a degradation, a carried-over health that is
/// not the default), once per snapshot: a snapshot whose providers never fail (most of the
/// services of a process, most of the time) holds none. The cell is set without a lock (a
/// compare-and-swap of one pointer: two first failures at once each allocate, one keeps
/// its table, the other's is freed); a success, a read or a sweep of a table without
/// counters reads that pointer and does nothing else.
#[derive(Debug)]
pub struct HealthTable {
    degraded: Arc<DegradedSet>,
    /// The providers (the degraded set's length).
    len: usize,
    cells: OnceBox<Cells>,
    /// The earliest cool-down end (nanoseconds), `u64::MAX` when none.
    next_expiry: AtomicU64,
    sweeping: AtomicBool,
    /// Providers degraded now (for the ejection cap).
    ejected: AtomicU32,
}

/// A [`HealthTable`]'s counters, per provider.
#[derive(Debug)]
struct Cells {
    failures: Box<[AtomicU32]>,
    until: Box<[AtomicU64]>,
    probation: Box<[AtomicBool]>,
    ejections: Box<[AtomicU32]>,
    /// The current window: calls, failed calls, slow calls, and when it ends (ns; 0: none
    /// started).
    window: Box<[Window]>,
}

/// One provider's counts in the current window.
#[derive(Debug, Default)]
struct Window {
    calls: AtomicU32,
    failed: AtomicU32,
    slow: AtomicU32,
    end: AtomicU64,
}

impl Cells {
    /// `n` healthy providers.
    fn new(n: usize) -> Self {
        Cells {
            failures: (0..n).map(|_| AtomicU32::new(0)).collect(),
            until: (0..n).map(|_| AtomicU64::new(0)).collect(),
            probation: (0..n).map(|_| AtomicBool::new(false)).collect(),
            ejections: (0..n).map(|_| AtomicU32::new(0)).collect(),
            window: (0..n).map(|_| Window::default()).collect(),
        }
    }

    /// True when no provider has any health state.
    fn quiet(&self) -> bool {
        self.failures.iter().all(|a| a.load(Ordering::Relaxed) == 0)
            && self.until.iter().all(|a| a.load(Ordering::Relaxed) == 0)
            && self.probation.iter().all(|a| !a.load(Ordering::Relaxed))
            && self
                .ejections
                .iter()
                .all(|a| a.load(Ordering::Relaxed) == 0)
    }

    /// Provider `i`'s window at `now` (ns), a new one started when the last has ended:
    /// a window the provider ends healthy takes one off its ejection count.
    #[inline]
    fn window(&self, i: usize, now: u64, config: &HealthConfig) -> &Window {
        let w = &self.window[i];
        let end = w.end.load(Ordering::Relaxed);
        if now >= end {
            let next = now.saturating_add(nanos(config.window).max(1));
            if w.end
                .compare_exchange(end, next, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
            {
                w.calls.store(0, Ordering::Relaxed);
                w.failed.store(0, Ordering::Relaxed);
                w.slow.store(0, Ordering::Relaxed);
                if end != 0 && self.until[i].load(Ordering::Relaxed) == 0 {
                    let _ =
                        self.ejections[i].fetch_update(Ordering::Relaxed, Ordering::Relaxed, |e| {
                            e.checked_sub(1)
                        });
                }
            }
        }
        w
    }
}

impl Window {
    /// True when a rate of `config` is reached (with at least `min_requests` calls).
    fn tripped(&self, config: &HealthConfig) -> bool {
        let calls = u64::from(self.calls.load(Ordering::Relaxed));
        if calls < u64::from(config.min_requests.max(1)) {
            return false;
        }
        let reached = |n: &AtomicU32, pct: u32| {
            u64::from(n.load(Ordering::Relaxed)) * 100 >= u64::from(pct) * calls
        };
        config
            .failure_percentage
            .is_some_and(|p| reached(&self.failed, p))
            || (config.slow_call.is_some() && reached(&self.slow, config.slow_call_percentage))
    }
}

impl HealthTable {
    /// A table over `degraded.len()` providers, all healthy, marking `degraded`.
    pub fn new(degraded: Arc<DegradedSet>) -> Self {
        HealthTable {
            len: degraded.len(),
            cells: OnceBox::new(),
            next_expiry: AtomicU64::new(u64::MAX),
            sweeping: AtomicBool::new(false),
            ejected: AtomicU32::new(0),
            degraded,
        }
    }

    /// The counters, once a report recorded something.
    #[inline]
    fn cells(&self) -> Option<&Cells> {
        self.cells.get()
    }

    /// The counters, allocated now if no report recorded anything yet.
    fn cells_or_new(&self) -> &Cells {
        self.cells.get_or_init(|| Box::new(Cells::new(self.len)))
    }

    /// This table carried over to a snapshot that follows its own by `edit`: each
    /// surviving provider keeps its failures, cool-down and probation at its new position
    /// (the same provider, shifted down over the removed ones); the added ones start
    /// healthy (the caller carries them over by address, as [`HealthTable::set`] does).
    /// `degraded` is the new snapshot's set ([`DegradedSet::edited`] of this one's). Time:
    /// the table's length, no string looked at (nothing when no report recorded anything).
    pub fn edited(&self, edit: &routechain_core::SnapshotEdit, degraded: Arc<DegradedSet>) -> Self {
        // Loaded once (calls may go on updating the old table meanwhile, as with a carry
        // by address), padded or cut to the edit's old length (a table that followed a
        // degraded set of another size).
        fn loaded<A, T: Clone>(cells: &[A], len: usize, zero: T, load: impl Fn(&A) -> T) -> Vec<T> {
            let mut v: Vec<T> = cells.iter().map(load).collect();
            v.resize(len, zero);
            v
        }
        // The common case: no provider has any health state; a new table is all there is.
        let Some(old) = self.cells().filter(|c| !c.quiet()) else {
            return HealthTable::new(degraded);
        };
        let n = edit.old_len();
        let failures = edit.table(
            &loaded(&old.failures, n, 0, |a| a.load(Ordering::Relaxed)),
            |_| 0,
        );
        let until = edit.table(
            &loaded(&old.until, n, 0, |a| a.load(Ordering::Relaxed)),
            |_| 0,
        );
        let probation = edit.table(
            &loaded(&old.probation, n, false, |a| a.load(Ordering::Relaxed)),
            |_| false,
        );
        let ejections = edit.table(
            &loaded(&old.ejections, n, 0, |a| a.load(Ordering::Relaxed)),
            |_| 0,
        );
        let ejected = until.iter().filter(|&&u| u != 0).count() as u32;
        let next_expiry = until
            .iter()
            .copied()
            .filter(|&u| u != 0)
            .min()
            .unwrap_or(u64::MAX);
        let table = HealthTable {
            len: failures.len(),
            cells: OnceBox::new(),
            next_expiry: AtomicU64::new(next_expiry),
            sweeping: AtomicBool::new(false),
            ejected: AtomicU32::new(ejected),
            degraded,
        };
        let cells = Cells {
            window: failures.iter().map(|_| Window::default()).collect(),
            failures: failures.into_iter().map(AtomicU32::new).collect(),
            until: until.into_iter().map(AtomicU64::new).collect(),
            probation: probation.into_iter().map(AtomicBool::new).collect(),
            ejections: ejections.into_iter().map(AtomicU32::new).collect(),
        };
        // A fresh cell: set here, before anyone else sees the table.
        let _ = table.cells.set(Box::new(cells));
        table
    }

    /// The degraded set it marks.
    pub fn degraded(&self) -> &Arc<DegradedSet> {
        &self.degraded
    }

    /// The health of provider `i`.
    pub fn get(&self, i: usize) -> ProviderHealth {
        match self.cells().filter(|_| i < self.len) {
            None => ProviderHealth::default(),
            Some(c) => ProviderHealth {
                failures: c.failures[i].load(Ordering::Relaxed),
                degraded_until: c.until[i].load(Ordering::Relaxed),
                probation: c.probation[i].load(Ordering::Relaxed),
                ejections: c.ejections[i].load(Ordering::Relaxed),
            },
        }
    }

    /// Sets provider `i`'s health (carrying it over from another snapshot).
    pub fn set(&self, i: usize, h: ProviderHealth) {
        if i >= self.len {
            return;
        }
        // The default health on a table without counters: nothing to store.
        let c = match self.cells() {
            Some(c) => c,
            None if h == ProviderHealth::default() => {
                self.degraded.clear(i);
                return;
            }
            None => self.cells_or_new(),
        };
        c.failures[i].store(h.failures, Ordering::Relaxed);
        c.probation[i].store(h.probation, Ordering::Relaxed);
        c.ejections[i].store(h.ejections, Ordering::Relaxed);
        let was = c.until[i].swap(h.degraded_until, Ordering::Relaxed);
        match (was != 0, h.degraded_until != 0) {
            (false, true) => {
                self.ejected.fetch_add(1, Ordering::Relaxed);
            }
            (true, false) => {
                self.ejected.fetch_sub(1, Ordering::Relaxed);
            }
            _ => {}
        }
        if h.degraded_until != 0 {
            self.degraded.mark(i);
            self.next_expiry
                .fetch_min(h.degraded_until, Ordering::Relaxed);
        } else {
            self.degraded.clear(i);
        }
    }

    /// Records a successful call on provider `i` at `now`: failures reset, probation ends;
    /// with rates counted ([`HealthConfig::counts_rates`]) the call counts in the window,
    /// and a slow-call rate reached ejects the provider.
    pub fn success(&self, i: usize, now: Duration, config: &HealthConfig) -> HealthChange {
        if config.counts_rates() && i < self.len {
            let c = self.cells_or_new();
            let w = c.window(i, nanos(now), config);
            w.calls.fetch_add(1, Ordering::Relaxed);
            if c.until[i].load(Ordering::Relaxed) == 0 && w.tripped(config) {
                return self.eject(c, i, now, config);
            }
        }
        // No counters: no failure counted, no probation (the common case: one load).
        let Some(c) = self.cells().filter(|_| i < self.len) else {
            return HealthChange::None;
        };
        // Written only when set: a success on a healthy provider (the common case) writes
        // nothing, so callers on different threads do not contend for these lines.
        if c.failures[i].load(Ordering::Relaxed) != 0 {
            c.failures[i].store(0, Ordering::Relaxed);
        }
        if c.probation[i].load(Ordering::Relaxed) && c.probation[i].swap(false, Ordering::Relaxed) {
            HealthChange::Recovered
        } else {
            HealthChange::None
        }
    }

    /// Counts a slow call on provider `i` at `now` (one at least `slow_call` long; the
    /// call itself is counted by [`HealthTable::success`] or [`HealthTable::failure`]).
    pub fn slow(&self, i: usize, now: Duration, config: &HealthConfig) {
        if i < self.len {
            let c = self.cells_or_new();
            c.window(i, nanos(now), config)
                .slow
                .fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Records a failed call on provider `i` at clock time `now`: the threshold-th
    /// consecutive failure, any failure on probation, or a rate of the window reached
    /// ejects it (within the cap) for its ejection time.
    pub fn failure(&self, i: usize, now: Duration, config: &HealthConfig) -> HealthChange {
        if i >= self.len {
            return HealthChange::None;
        }
        let c = self.cells_or_new();
        let tripped = config.counts_rates() && {
            let w = c.window(i, nanos(now), config);
            w.calls.fetch_add(1, Ordering::Relaxed);
            w.failed.fetch_add(1, Ordering::Relaxed);
            w.tripped(config)
        };
        if c.until[i].load(Ordering::Relaxed) != 0 {
            // Already degraded (a call that was in flight when it was degraded).
            return HealthChange::None;
        }
        let failures = c.failures[i].fetch_add(1, Ordering::Relaxed) + 1;
        let on_probation = c.probation[i].load(Ordering::Relaxed);
        if tripped || on_probation || failures >= config.failure_threshold.max(1) {
            return self.eject(c, i, now, config);
        }
        HealthChange::None
    }

    /// Ejects provider `i` at `now` unless the cap is reached: its ejection count grows by
    /// one and it stays out for [`HealthConfig::ejection_time`] of it; its window starts
    /// afresh when it is back.
    fn eject(&self, c: &Cells, i: usize, now: Duration, config: &HealthConfig) -> HealthChange {
        let cap = config.max_ejected(self.len) as u32;
        if self
            .ejected
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |e| {
                (e < cap).then_some(e + 1)
            })
            .is_err()
        {
            return HealthChange::None;
        }
        let times = c.ejections[i].load(Ordering::Relaxed).saturating_add(1);
        let until = cooldown_end(now, config.ejection_time(times));
        if c.until[i]
            .compare_exchange(0, until, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
        {
            self.ejected.fetch_sub(1, Ordering::Relaxed);
            return HealthChange::None;
        }
        c.ejections[i].store(times, Ordering::Relaxed);
        c.probation[i].store(false, Ordering::Relaxed);
        c.window[i].end.store(0, Ordering::Relaxed);
        self.degraded.mark(i);
        self.next_expiry.fetch_min(until, Ordering::Relaxed);
        HealthChange::Degraded
    }

    /// Marks provider `i` degraded until `now + cooldown` whatever its count and the cap
    /// (an operator's or a health check's decision); [`HealthChange::None`] past the end.
    pub fn degrade(&self, i: usize, now: Duration, config: &HealthConfig) -> HealthChange {
        if i >= self.len {
            return HealthChange::None;
        }
        let c = self.cells_or_new();
        let until = cooldown_end(now, config.cooldown);
        if c.until[i].swap(until, Ordering::Relaxed) == 0 {
            self.ejected.fetch_add(1, Ordering::Relaxed);
        }
        c.probation[i].store(false, Ordering::Relaxed);
        self.degraded.mark(i);
        self.next_expiry.fetch_min(until, Ordering::Relaxed);
        HealthChange::Degraded
    }

    /// Providers degraded now.
    pub fn ejected(&self) -> usize {
        self.ejected.load(Ordering::Relaxed) as usize
    }

    /// The earliest cool-down end, if any provider is degraded by the tracker.
    pub fn next_expiry(&self) -> Option<Duration> {
        match self.next_expiry.load(Ordering::Relaxed) {
            u64::MAX => None,
            n => Some(Duration::from_nanos(n)),
        }
    }

    /// Lets providers whose cool-down has ended back in, on probation. Cheap when nothing
    /// expired (one atomic load, inlined into the call); one caller sweeps at a time, the
    /// others go on.
    #[inline]
    pub fn expire(&self, now: Duration) -> usize {
        let now = now.as_nanos() as u64;
        if now < self.next_expiry.load(Ordering::Relaxed) {
            return 0;
        }
        self.sweep(now)
    }

    /// [`HealthTable::expire`] once a cool-down ended (`now` in nanoseconds).
    #[cold]
    fn sweep(&self, now: u64) -> usize {
        if self.sweeping.swap(true, Ordering::Acquire) {
            return 0;
        }
        let mut released = 0;
        let mut next = u64::MAX;
        // A pending expiry implies counters (only a report that set `until` lowers it).
        if let Some(c) = self.cells() {
            for (i, until) in c.until.iter().enumerate() {
                let u = until.load(Ordering::Relaxed);
                if u == 0 {
                    continue;
                }
                if u <= now {
                    if until
                        .compare_exchange(u, 0, Ordering::Relaxed, Ordering::Relaxed)
                        .is_ok()
                    {
                        c.failures[i].store(0, Ordering::Relaxed);
                        c.probation[i].store(true, Ordering::Relaxed);
                        self.degraded.clear(i);
                        self.ejected.fetch_sub(1, Ordering::Relaxed);
                        released += 1;
                    }
                } else {
                    next = next.min(u);
                }
            }
        }
        self.next_expiry.store(next, Ordering::Relaxed);
        self.sweeping.store(false, Ordering::Release);
        released
    }

    /// True when a report allocated this table's counters (for tests of the lazy table).
    #[cfg(test)]
    fn has_cells(&self) -> bool {
        self.cells().is_some()
    }
}

#[cfg(test)]
mod tests;
