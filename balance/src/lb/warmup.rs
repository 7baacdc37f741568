//! Dubbo's warm-up (`AbstractLoadBalance.getWeight`): a provider that started less than
//! `warmup` ago (default 10 minutes) weighs less, growing with its uptime, so a cold JVM,
//! cache or connection pool is not given its full share at once.
//!
//! The uptime is `now − timestamp`, the provider URL's `timestamp` param (milliseconds since
//! the epoch, written by the provider when it registers); `warmup` is the provider URL's
//! `warmup` param in milliseconds. For a provider with a positive weight and timestamp:
//! an uptime below zero (a clock ahead of ours) gives weight 1; an uptime in `1..warmup`
//! gives [`warmup_weight`]; otherwise the weight is the static one.
//!
//! What a call pays: the table below is built with the weights, off the call path, and
//! holds only the providers still warming when it was built, with the instant the last of
//! them is warm. A pick with no provider warming reads one flag. While one is, the pick
//! reads the clock and asks [`WarmTable::at`] for the weights of the candidates it
//! considers (a bit test, then a binary search among the warming providers only), so the
//! weights move with time without any rebuild; when the last warm-up has ended the flag is
//! cleared (one store) and the picks are free again.

use std::sync::atomic::{AtomicBool, Ordering};

use routechain_core::{BitSet, Provider, Snapshot, SnapshotEdit, UrlKey};

/// Dubbo's default `warmup`: 10 minutes, in milliseconds.
pub const DEFAULT_WARMUP_MS: i64 = 600_000;

/// Dubbo's `calculateWarmupWeight(uptime, warmup, weight)`, in Java's arithmetic:
/// `(int) (uptime / ((float) warmup / weight))`, at least 1 and at most `weight`.
pub fn warmup_weight(uptime: i32, warmup: i32, weight: i32) -> i32 {
    // Java: int / float is float division; (int) of a float truncates toward zero and
    // saturates (NaN → 0), as Rust's `as` does.
    let ww = (uptime as f32 / (warmup as f32 / weight as f32)) as i32;
    if ww < 1 { 1 } else { ww.min(weight) }
}

/// The weight Dubbo's `getWeight` gives a provider of static weight `weight` at `now` (ms
/// since the epoch), `timestamp` and `warmup` as read from its URL (0 timestamp: none).
pub fn weight_at(weight: u32, timestamp: i64, warmup: i64, now: i64) -> u32 {
    if weight == 0 || timestamp <= 0 {
        return weight;
    }
    let uptime = now.saturating_sub(timestamp);
    if uptime < 0 {
        return 1;
    }
    if uptime > 0 && uptime < warmup {
        // `uptime < warmup`, and Java's `(int) uptime` of a long: both fit an i32 when the
        // int `warmup` does.
        let w = i32::try_from(weight).unwrap_or(i32::MAX);
        let warmup = i32::try_from(warmup).unwrap_or(i32::MAX);
        return warmup_weight(uptime as i32, warmup, w).max(0) as u32;
    }
    weight
}

/// A provider's `timestamp` and `warmup` params as Dubbo reads them: `timestamp` a long
/// (absent or not a number: 0, no warm-up), `warmup` an int (absent or not a number: the
/// default).
pub fn warm_params(timestamp: Option<&str>, warmup: Option<&str>) -> (i64, i64) {
    let ts = timestamp.and_then(|t| t.parse::<i64>().ok()).unwrap_or(0);
    let warmup = warmup
        .and_then(|w| w.parse::<i32>().ok())
        .map_or(DEFAULT_WARMUP_MS, i64::from);
    (ts, warmup)
}

/// One provider still warming when the table was built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Warming {
    index: u32,
    timestamp: i64,
    warmup: i64,
}

/// The providers of a snapshot still warming up (see the module documentation).
#[derive(Debug, Default)]
pub struct WarmTable {
    /// Sorted by index.
    warming: Box<[Warming]>,
    /// Their positions.
    mask: BitSet,
    /// When the last warm-up ends (ms since the epoch).
    until: i64,
    /// Set when a pick found every warm-up over: picks stop reading the clock.
    over: AtomicBool,
}

impl PartialEq for WarmTable {
    fn eq(&self, other: &Self) -> bool {
        self.warming == other.warming && self.until == other.until
    }
}
impl Eq for WarmTable {}

impl Clone for WarmTable {
    fn clone(&self) -> Self {
        WarmTable {
            warming: self.warming.clone(),
            mask: self.mask.clone(),
            until: self.until,
            over: AtomicBool::new(self.over.load(Ordering::Relaxed)),
        }
    }
}

/// The URL keys warm-up reads, resolved once per table.
struct Keys {
    timestamp: UrlKey,
    warmup: UrlKey,
}

impl Keys {
    fn new() -> Self {
        Keys {
            timestamp: UrlKey::new("timestamp"),
            warmup: UrlKey::new("warmup"),
        }
    }

    /// Provider `p` as a warming entry at `now`, when it is warming (or ahead of `now`).
    /// `warmup` is read only for a provider that started less than 2³¹ ms ago (Dubbo's
    /// `warmup` is an int): the others cannot be warming.
    fn warming(&self, index: usize, p: &Provider, now: i64) -> Option<Warming> {
        let (timestamp, _) = warm_params(p.get_key(&self.timestamp), None);
        if timestamp <= 0 || now.saturating_sub(timestamp) >= i64::from(i32::MAX) {
            return None;
        }
        let (_, warmup) = warm_params(None, p.get_key(&self.warmup));
        let warm = now < timestamp.saturating_add(warmup.max(0));
        warm.then_some(Warming {
            index: index as u32,
            timestamp,
            warmup,
        })
    }
}

impl WarmTable {
    /// The providers of `snapshot` warming at `now`, whatever their weights: a provider
    /// weighing 0 at service level may weigh more for a method (`<method>.weight`), and
    /// [`WarmTable::at`] leaves a weight of 0 at 0.
    pub fn new(snapshot: &Snapshot, now: i64) -> Self {
        let keys = Keys::new();
        let warming = snapshot
            .providers()
            .iter()
            .enumerate()
            .filter_map(|(i, p)| keys.warming(i, p, now))
            .collect();
        Self::of(warming, snapshot.len())
    }

    /// The table of `snapshot`, derived from this one (of the snapshot `edit` started
    /// from): the survivors still warming at `now` renumbered, only the added providers'
    /// URLs read. Equal to [`WarmTable::new`] of `snapshot` at `now`.
    pub fn edited(&self, edit: &SnapshotEdit, snapshot: &Snapshot, now: i64) -> Self {
        let keys = Keys::new();
        let providers = snapshot.providers();
        let mut warming: Vec<Warming> = self
            .warming
            .iter()
            .filter(|w| now < w.timestamp.saturating_add(w.warmup.max(0)))
            .filter_map(|w| {
                let index = edit.new_index(w.index as usize)?;
                Some(Warming {
                    index: index as u32,
                    ..*w
                })
            })
            .collect();
        for i in edit.added() {
            warming.extend(providers.get(i).and_then(|p| keys.warming(i, p, now)));
        }
        Self::of(warming.into_boxed_slice(), snapshot.len())
    }

    fn of(warming: Box<[Warming]>, len: usize) -> Self {
        let mask = BitSet::from_indexes(len, warming.iter().map(|w| w.index as usize));
        let until = warming
            .iter()
            .map(|w| w.timestamp.saturating_add(w.warmup.max(0)))
            .max()
            .unwrap_or(0);
        WarmTable {
            over: AtomicBool::new(warming.is_empty()),
            warming,
            mask,
            until,
        }
    }

    /// True when some provider may still be warming: the picks need the time.
    #[inline]
    pub fn active(&self) -> bool {
        !self.over.load(Ordering::Relaxed)
    }

    /// The time for a pick: `now` while a provider warms, else 0 (static weights). Marks
    /// the table over once `now` is past the last warm-up.
    #[inline]
    pub fn now(&self, now: i64) -> i64 {
        if now >= self.until {
            self.over.store(true, Ordering::Relaxed);
            0
        } else {
            now
        }
    }

    /// The providers warming when the table was built (index, timestamp, warmup).
    pub fn warming(&self) -> impl ExactSizeIterator<Item = (usize, i64, i64)> + '_ {
        self.warming
            .iter()
            .map(|w| (w.index as usize, w.timestamp, w.warmup))
    }

    /// True when provider `i` may be warming (a bit test).
    #[inline]
    pub fn contains(&self, i: usize) -> bool {
        self.mask.contains(i)
    }

    /// The weight of provider `i`, of static weight `weight`, at `now` (0: static).
    #[inline]
    pub fn at(&self, i: usize, weight: u32, now: i64) -> u32 {
        if now == 0 || !self.mask.contains(i) {
            return weight;
        }
        match self.warming.binary_search_by_key(&(i as u32), |w| w.index) {
            Ok(k) => {
                let w = &self.warming[k];
                weight_at(weight, w.timestamp, w.warmup, now)
            }
            Err(_) => weight,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn dubbos_examples() {
        // 10 minutes, weight 100: one point per 6 s of uptime.
        assert_eq!(warmup_weight(60_000, 600_000, 100), 10);
        assert_eq!(warmup_weight(300_000, 600_000, 100), 50);
        assert_eq!(warmup_weight(599_999, 600_000, 100), 99);
        assert_eq!(warmup_weight(1, 600_000, 100), 1);
        assert_eq!(warmup_weight(5_999, 600_000, 100), 1);
        assert_eq!(warmup_weight(6_000, 600_000, 100), 1);
        assert_eq!(warmup_weight(12_000, 600_000, 100), 2);
        // Weight above warmup: capped at the weight.
        assert_eq!(warmup_weight(10, 100, 1_000), 100);
    }

    #[test]
    fn get_weight_cases() {
        let now = 1_000_000_000;
        // No timestamp, weight 0: untouched.
        assert_eq!(weight_at(100, 0, 600_000, now), 100);
        assert_eq!(weight_at(0, now - 1000, 600_000, now), 0);
        // A clock ahead of ours: 1.
        assert_eq!(weight_at(100, now + 5, 600_000, now), 1);
        // Uptime 0: Dubbo's `uptime > 0` test keeps the static weight.
        assert_eq!(weight_at(100, now, 600_000, now), 100);
        assert_eq!(weight_at(100, now - 300_000, 600_000, now), 50);
        assert_eq!(weight_at(100, now - 600_000, 600_000, now), 100);
        // A negative warmup: never warming.
        assert_eq!(weight_at(100, now - 10, -5, now), 100);
    }

    #[test]
    fn params_as_dubbo_reads_them() {
        assert_eq!(warm_params(None, None), (0, DEFAULT_WARMUP_MS));
        assert_eq!(warm_params(Some("17"), Some("1000")), (17, 1000));
        assert_eq!(
            warm_params(Some("x"), Some("9999999999")),
            (0, DEFAULT_WARMUP_MS)
        );
    }

    proptest! {
        #[test]
        fn formula_stays_within_exact_arithmetic(
            uptime in 1i32..=i32::MAX,
            warmup in 1i32..=i32::MAX,
            weight in 1i32..=100_000,
        ) {
            prop_assume!(uptime < warmup);
            let w = warmup_weight(uptime, warmup, weight);
            prop_assert!((1..=weight).contains(&w));
            // f32 rounding moves the quotient by less than one point from the exact one.
            let exact = (i64::from(uptime) * i64::from(weight) / i64::from(warmup)) as i32;
            let exact = exact.clamp(1, weight);
            prop_assert!((w - exact).abs() <= 1, "{w} vs exact {exact}");
        }

        #[test]
        fn weight_grows_with_uptime(a in 1i64..600_000, b in 1i64..600_000, weight in 1u32..1000) {
            let now = 10_000_000_000;
            let (lo, hi) = (a.min(b), a.max(b));
            let w_lo = weight_at(weight, now - lo, DEFAULT_WARMUP_MS, now);
            let w_hi = weight_at(weight, now - hi, DEFAULT_WARMUP_MS, now);
            prop_assert!(w_lo <= w_hi && w_hi <= weight);
        }
    }
}
