//! Provider health tracking: failure counting, cool-downs and probation.
//!
//! The tracker marks and clears bits of the chain's [`DegradedSet`] (in `routechain-core`,
//! because routers read it per call) as calls fail and recover.
//!
//! [`HealthTable`] is the tracker's per-snapshot state (consecutive failures, cool-down
//! ends, probation), driven by an injectable [`Clock`]; [`crate::service::Cluster`] owns it.

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

/// When a provider is degraded and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthConfig {
    /// Consecutive failures that degrade a provider (default 5).
    pub failure_threshold: u32,
    /// How long a degraded provider stays out (default 30 s); then it is on probation:
    /// one success clears it, one failure degrades it again.
    pub cooldown: Duration,
}

impl Default for HealthConfig {
    fn default() -> Self {
        HealthConfig {
            failure_threshold: 5,
            cooldown: Duration::from_secs(30),
        }
    }
}

/// The clock time (in nanoseconds) a cool-down started at `now` ends: at least 1 (0 means
/// "not degraded") and below `u64::MAX` (no pending expiry), saturating for a cool-down too
/// long to count in nanoseconds.
fn cooldown_end(now: Duration, config: &HealthConfig) -> u64 {
    let end = now.saturating_add(config.cooldown).as_nanos();
    u64::try_from(end)
        .unwrap_or(u64::MAX)
        .clamp(1, u64::MAX - 1)
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
}

/// A [`HealthTable`]'s counters, per provider.
#[derive(Debug)]
struct Cells {
    failures: Box<[AtomicU32]>,
    until: Box<[AtomicU64]>,
    probation: Box<[AtomicBool]>,
}

impl Cells {
    /// `n` healthy providers.
    fn new(n: usize) -> Self {
        Cells {
            failures: (0..n).map(|_| AtomicU32::new(0)).collect(),
            until: (0..n).map(|_| AtomicU64::new(0)).collect(),
            probation: (0..n).map(|_| AtomicBool::new(false)).collect(),
        }
    }

    /// True when no provider has any health state.
    fn quiet(&self) -> bool {
        self.failures.iter().all(|a| a.load(Ordering::Relaxed) == 0)
            && self.until.iter().all(|a| a.load(Ordering::Relaxed) == 0)
            && self.probation.iter().all(|a| !a.load(Ordering::Relaxed))
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
            degraded,
        };
        let cells = Cells {
            failures: failures.into_iter().map(AtomicU32::new).collect(),
            until: until.into_iter().map(AtomicU64::new).collect(),
            probation: probation.into_iter().map(AtomicBool::new).collect(),
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
        c.until[i].store(h.degraded_until, Ordering::Relaxed);
        if h.degraded_until != 0 {
            self.degraded.mark(i);
            self.next_expiry
                .fetch_min(h.degraded_until, Ordering::Relaxed);
        } else {
            self.degraded.clear(i);
        }
    }

    /// Records a successful call on provider `i`: failures reset, probation ends.
    pub fn success(&self, i: usize) -> HealthChange {
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

    /// Records a failed call on provider `i` at clock time `now`: the threshold-th
    /// consecutive failure, or any failure on probation, degrades it until `now + cooldown`.
    pub fn failure(&self, i: usize, now: Duration, config: &HealthConfig) -> HealthChange {
        if i >= self.len {
            return HealthChange::None;
        }
        let c = self.cells_or_new();
        if c.until[i].load(Ordering::Relaxed) != 0 {
            // Already degraded (a call that was in flight when it was degraded).
            return HealthChange::None;
        }
        let failures = c.failures[i].fetch_add(1, Ordering::Relaxed) + 1;
        let on_probation = c.probation[i].load(Ordering::Relaxed);
        if on_probation || failures >= config.failure_threshold.max(1) {
            let until = cooldown_end(now, config);
            if c.until[i]
                .compare_exchange(0, until, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
            {
                c.probation[i].store(false, Ordering::Relaxed);
                self.degraded.mark(i);
                self.next_expiry.fetch_min(until, Ordering::Relaxed);
                return HealthChange::Degraded;
            }
        }
        HealthChange::None
    }

    /// Marks provider `i` degraded until `now + cooldown` whatever its count (an operator's
    /// or a health check's decision); [`HealthChange::None`] past the end.
    pub fn degrade(&self, i: usize, now: Duration, config: &HealthConfig) -> HealthChange {
        if i >= self.len {
            return HealthChange::None;
        }
        let c = self.cells_or_new();
        let until = cooldown_end(now, config);
        c.until[i].store(until, Ordering::Relaxed);
        c.probation[i].store(false, Ordering::Relaxed);
        self.degraded.mark(i);
        self.next_expiry.fetch_min(until, Ordering::Relaxed);
        HealthChange::Degraded
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
mod tests {
    use super::*;

    #[test]
    fn any_follows_marks_and_clears_including_repeats() {
        let set = DegradedSet::new(130);
        assert!(!set.any());
        set.mark(200); // out of range: ignored
        assert!(!set.any());
        set.mark(3);
        set.mark(3);
        set.mark(129);
        assert!(set.any());
        set.clear(3);
        assert!(set.any(), "129 is still degraded");
        set.clear(3);
        set.clear(7); // never marked
        assert!(set.any());
        set.clear(129);
        assert!(!set.any());
        assert!(!set.contains(3) && !set.contains(129));
        set.mark(64);
        assert!(set.any() && set.contains(64));
    }

    #[test]
    fn threshold_cooldown_probation() {
        let config = HealthConfig {
            failure_threshold: 3,
            cooldown: Duration::from_secs(10),
        };
        let t = HealthTable::new(Arc::new(DegradedSet::new(2)));
        let now = Duration::from_secs(1);
        assert_eq!(t.failure(0, now, &config), HealthChange::None);
        assert_eq!(t.failure(0, now, &config), HealthChange::None);
        t.success(0); // resets the count
        assert_eq!(t.failure(0, now, &config), HealthChange::None);
        assert_eq!(t.failure(0, now, &config), HealthChange::None);
        assert!(!t.degraded().contains(0));
        assert_eq!(t.failure(0, now, &config), HealthChange::Degraded);
        assert!(t.degraded().contains(0));
        assert_eq!(t.next_expiry(), Some(Duration::from_secs(11)));
        assert_eq!(t.expire(Duration::from_secs(10)), 0);
        assert!(t.degraded().contains(0));
        assert_eq!(t.expire(Duration::from_secs(11)), 1);
        assert!(!t.degraded().contains(0));
        assert!(t.get(0).probation);
        assert_eq!(t.next_expiry(), None);
        // On probation one failure degrades again.
        assert_eq!(
            t.failure(0, Duration::from_secs(12), &config),
            HealthChange::Degraded
        );
        t.expire(Duration::from_secs(22));
        assert_eq!(t.success(0), HealthChange::Recovered);
        assert_eq!(t.get(0), ProviderHealth::default());
        assert!(!t.degraded().contains(1));
    }

    #[test]
    fn counters_are_allocated_by_the_first_report_that_records_something() {
        let config = HealthConfig {
            failure_threshold: 2,
            cooldown: Duration::from_secs(10),
        };
        let now = Duration::from_secs(1);
        let t = HealthTable::new(Arc::new(DegradedSet::new(3)));
        // Reads, successes, sweeps and default carry-overs record nothing.
        assert_eq!(t.success(1), HealthChange::None);
        assert_eq!(t.get(1), ProviderHealth::default());
        assert_eq!(t.expire(Duration::from_secs(100)), 0);
        t.set(2, ProviderHealth::default());
        assert_eq!(t.failure(7, now, &config), HealthChange::None); // past the end
        assert!(!t.has_cells());
        // A quiet table carries over as a fresh one.
        let edit = routechain_core::SnapshotEdit::new(3, vec![0], 1);
        let e = t.edited(&edit, Arc::new(DegradedSet::new(3)));
        assert!(!e.has_cells());
        // The first failure allocates them.
        assert_eq!(t.failure(1, now, &config), HealthChange::None);
        assert!(t.has_cells());
        assert_eq!(t.get(1).failures, 1);
        assert_eq!(t.failure(1, now, &config), HealthChange::Degraded);
        assert!(t.degraded().contains(1));
        // A carried-over health that is not the default allocates them too.
        let u = HealthTable::new(Arc::new(DegradedSet::new(3)));
        u.set(0, t.get(1));
        assert!(u.has_cells() && u.degraded().contains(0));
        assert_eq!(u.next_expiry(), Some(Duration::from_secs(11)));
        // The edit carries the counters: provider 1 is at 0 once provider 0 is removed.
        let e = t.edited(&edit, Arc::new(DegradedSet::new(3)));
        assert!(e.has_cells());
        assert_eq!(e.get(0).degraded_until, t.get(1).degraded_until);
        assert_eq!(e.get(2), ProviderHealth::default());
    }

    #[test]
    fn a_cooldown_too_long_for_nanoseconds_degrades_until_the_clock_ends() {
        let config = HealthConfig {
            failure_threshold: 1,
            cooldown: Duration::MAX,
        };
        let t = HealthTable::new(Arc::new(DegradedSet::new(2)));
        let now = Duration::from_secs(1);
        assert_eq!(t.failure(0, now, &config), HealthChange::Degraded);
        assert_eq!(t.degrade(1, now, &config), HealthChange::Degraded);
        assert_eq!(t.next_expiry(), Some(Duration::from_nanos(u64::MAX - 1)));
        assert_eq!(t.expire(Duration::from_secs(1 << 40)), 0);
        assert!(t.degraded().contains(0) && t.degraded().contains(1));
    }
}
