//! Live provider health visible to routers without rebuilding the chain.
//!
//! A [`DegradedSet`] is a bitset of atomics over one snapshot. A health tracker (failure
//! counting, cool-downs; `routechain-balance`'s `HealthTable`) marks and clears bits as calls
//! fail and recover; routers read the words per call (the IDC-weight router's degraded
//! filter, the chain's `skip_degraded`).
//!
//! A router that needs per-group degraded counts per call (the IDC-weight router's healthy
//! count per IDC) registers a [`DegradedTally`] with [`DegradedSet::tally`] off the call
//! path: `mark` and `clear` then update its counters whenever they flip a bit, so the
//! router reads one counter per group instead of scanning the set.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use arc_swap::ArcSwap;

/// A concurrently updatable set of degraded provider indexes over one snapshot.
#[derive(Debug, Default)]
pub struct DegradedSet {
    words: Box<[AtomicU64]>,
    len: usize,
    /// Members, kept by `mark`/`clear` after they flip a bit, so [`DegradedSet::any`] is one
    /// load. While a flip is in flight it may lag the bits (or wrap below zero for a moment);
    /// readers only compare it with zero.
    members: AtomicU64,
    /// Registered tallies, updated by `mark`/`clear` when they flip a bit (dropped tallies
    /// are pruned at the next registration).
    tallies: ArcSwap<Vec<Weak<DegradedTally>>>,
}

impl DegradedSet {
    /// An empty set over `len` providers.
    pub fn new(len: usize) -> Self {
        DegradedSet {
            words: (0..len.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
            len,
            members: AtomicU64::new(0),
            tallies: ArcSwap::default(),
        }
    }
    /// A new set over the snapshot `edit` derives, holding the members of this one that
    /// survive it (at their new positions); added providers are not degraded. Off the call
    /// path: O(providers / 64). A mark racing it may be lost, as with any carry-over: the
    /// next failure marks the provider again.
    pub fn edited(&self, edit: &crate::SnapshotEdit) -> Self {
        let now = crate::BitSet::from_words(
            self.words
                .iter()
                .map(|w| w.load(Ordering::Relaxed))
                .collect(),
            self.len,
        );
        let next = edit.bitset(&now, |_| false);
        DegradedSet {
            words: next.words().iter().map(|&w| AtomicU64::new(w)).collect(),
            len: next.len(),
            members: AtomicU64::new(next.count() as u64),
            tallies: ArcSwap::default(),
        }
    }

    /// The number of providers the set ranges over.
    pub fn len(&self) -> usize {
        self.len
    }
    /// True when it ranges over no provider.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Word `w` of the set (0 past the end).
    #[inline]
    pub fn word(&self, w: usize) -> u64 {
        self.words
            .get(w)
            .map(|a| a.load(Ordering::Relaxed))
            .unwrap_or(0)
    }
    /// True when any provider is degraded (one load: a count kept by `mark` and `clear`).
    /// Racing a `mark` or `clear` it answers as if the call came before or after it.
    pub fn any(&self) -> bool {
        self.members.load(Ordering::Relaxed) != 0
    }
    /// The number of degraded providers (a popcount of the set: O(providers / 64), for
    /// gauges and reports, not for the call path).
    pub fn count(&self) -> usize {
        self.words
            .iter()
            .map(|w| w.load(Ordering::Relaxed).count_ones() as usize)
            .sum()
    }
    /// True when provider `i` is degraded.
    pub fn contains(&self, i: usize) -> bool {
        i < self.len && self.word(i / 64) & (1 << (i % 64)) != 0
    }
    /// Marks provider `i` degraded.
    pub fn mark(&self, i: usize) {
        if i < self.len {
            let bit = 1 << (i % 64);
            if self.words[i / 64].fetch_or(bit, Ordering::SeqCst) & bit == 0 {
                self.members.fetch_add(1, Ordering::Relaxed);
                self.notify(i);
            }
        }
    }
    /// Clears provider `i`.
    pub fn clear(&self, i: usize) {
        if i < self.len {
            let bit = 1 << (i % 64);
            if self.words[i / 64].fetch_and(!bit, Ordering::SeqCst) & bit != 0 {
                self.members.fetch_sub(1, Ordering::Relaxed);
                self.notify(i);
            }
        }
    }

    /// Brings every registered tally up to date for provider `i` (after a flip).
    fn notify(&self, i: usize) {
        let tallies = self.tallies.load();
        for t in tallies.iter() {
            if let Some(t) = t.upgrade() {
                t.reconcile(self, i);
            }
        }
    }

    /// Registers a tally of degraded providers per group: `group[i]` is provider `i`'s group
    /// (`< groups`) or [`DegradedTally::NONE`] for a provider counted in none. From now on
    /// `mark` and `clear` keep its counts; the providers already degraded are counted here.
    /// Off the call path: O(providers / 64 + degraded) now, O(1) per flip afterwards, per
    /// live tally. The tally stops being updated when the last `Arc` to it is dropped.
    pub fn tally(&self, group: Box<[u32]>, groups: usize) -> Arc<DegradedTally> {
        let tally = Arc::new(DegradedTally {
            seen: (0..group.len().div_ceil(64))
                .map(|_| AtomicU64::new(0))
                .collect(),
            counts: (0..groups).map(|_| AtomicU32::new(0)).collect(),
            group,
        });
        let weak = Arc::downgrade(&tally);
        self.tallies.rcu(|old| {
            let mut next: Vec<Weak<DegradedTally>> = old
                .iter()
                .filter(|t| t.strong_count() > 0)
                .cloned()
                .collect();
            next.push(weak.clone());
            next
        });
        for (w, word) in self.words.iter().enumerate() {
            let mut bits = word.load(Ordering::SeqCst);
            while bits != 0 {
                let i = w * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                tally.reconcile(self, i);
            }
        }
        tally
    }
}

/// Degraded providers counted per group, kept by [`DegradedSet::mark`] and
/// [`DegradedSet::clear`] (see [`DegradedSet::tally`]). Reading a count is one load.
///
/// The tally keeps its own bit per provider and changes a count only when it flips that
/// bit, so a flip applied twice (registration racing a `mark`) counts once. After each flip
/// of the set's bit the flipper re-reads the set's bit until its own bit agrees with it
/// (all `SeqCst`), so once `mark`/`clear` calls settle, every count equals the degraded
/// members of its group; while one is in flight a count may lag by that flip.
#[derive(Debug)]
pub struct DegradedTally {
    group: Box<[u32]>,
    counts: Box<[AtomicU32]>,
    seen: Box<[AtomicU64]>,
}

impl DegradedTally {
    /// The group of a provider counted in none.
    pub const NONE: u32 = u32::MAX;

    /// The degraded providers of group `g` (0 for an unknown group).
    #[inline]
    pub fn count(&self, g: usize) -> u32 {
        self.counts
            .get(g)
            .map(|c| c.load(Ordering::Relaxed))
            .unwrap_or(0)
    }

    /// The number of groups.
    pub fn groups(&self) -> usize {
        self.counts.len()
    }

    /// Makes this tally's bit for `i` agree with `set`'s, adjusting the count on a flip.
    fn reconcile(&self, set: &DegradedSet, i: usize) {
        let Some(&g) = self.group.get(i) else { return };
        let Some(count) = self.counts.get(g as usize) else {
            return;
        };
        let (w, bit) = (i / 64, 1u64 << (i % 64));
        loop {
            let want = set.words[w].load(Ordering::SeqCst) & bit != 0;
            let flipped = if want {
                self.seen[w].fetch_or(bit, Ordering::SeqCst) & bit == 0
            } else {
                self.seen[w].fetch_and(!bit, Ordering::SeqCst) & bit != 0
            };
            if flipped {
                if want {
                    count.fetch_add(1, Ordering::SeqCst);
                } else {
                    count.fetch_sub(1, Ordering::SeqCst);
                }
            }
            if (set.words[w].load(Ordering::SeqCst) & bit != 0) == want {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tallies_count_per_group_through_marks_and_clears() {
        let set = DegradedSet::new(200);
        set.mark(3);
        set.mark(150);
        // Providers 0..100 in group 0, 100..199 in group 1, 199 in none.
        let group: Box<[u32]> = (0..200)
            .map(|i| match i {
                0..100 => 0,
                199 => DegradedTally::NONE,
                _ => 1,
            })
            .collect();
        let t = set.tally(group.clone(), 2);
        assert_eq!((t.count(0), t.count(1), t.count(7)), (1, 1, 0));
        set.mark(3);
        set.mark(4);
        set.mark(199);
        set.clear(150);
        set.clear(151);
        assert_eq!((t.count(0), t.count(1)), (2, 0));
        // A second tally; a dropped one is pruned and no longer updated.
        let t2 = set.tally(group, 2);
        assert_eq!(t2.count(0), 2);
        drop(t);
        set.mark(120);
        assert_eq!(t2.count(1), 1);
        assert_eq!(
            set.tallies
                .load()
                .iter()
                .filter(|w| w.strong_count() > 0)
                .count(),
            1
        );
    }

    #[test]
    fn tallies_settle_under_concurrent_flips() {
        let set = Arc::new(DegradedSet::new(256));
        let group: Box<[u32]> = (0..256).map(|i| (i % 4) as u32).collect();
        let tally = set.tally(group, 4);
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let set = &set;
                s.spawn(move || {
                    let mut x = t + 1;
                    for _ in 0..20_000 {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        let i = (x % 256) as usize;
                        if x & (1 << 40) != 0 {
                            set.mark(i);
                        } else {
                            set.clear(i);
                        }
                    }
                });
            }
        });
        for g in 0..4 {
            let want = (0..256).filter(|i| i % 4 == g && set.contains(*i)).count();
            assert_eq!(tally.count(g) as usize, want, "group {g}");
        }
    }
}
