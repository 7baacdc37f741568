//! Live provider health visible to routers without rebuilding the chain.
//!
//! A [`DegradedSet`] is a bitset of atomics over one snapshot. A health tracker (failure
//! counting, cool-downs; `routechain-balance`'s `HealthTable`) marks and clears bits as calls
//! fail and recover; routers read the words per call (the IDC-weight router's degraded
//! filter, the chain's `skip_degraded`).

use std::sync::atomic::{AtomicU64, Ordering};

/// A concurrently updatable set of degraded provider indexes over one snapshot.
#[derive(Debug, Default)]
pub struct DegradedSet {
    words: Box<[AtomicU64]>,
    len: usize,
    /// Members, kept by `mark`/`clear` after they flip a bit, so [`DegradedSet::any`] is one
    /// load. While a flip is in flight it may lag the bits (or wrap below zero for a moment);
    /// readers only compare it with zero.
    members: AtomicU64,
}

impl DegradedSet {
    /// An empty set over `len` providers.
    pub fn new(len: usize) -> Self {
        DegradedSet {
            words: (0..len.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
            len,
            members: AtomicU64::new(0),
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
    /// True when provider `i` is degraded.
    pub fn contains(&self, i: usize) -> bool {
        i < self.len && self.word(i / 64) & (1 << (i % 64)) != 0
    }
    /// Marks provider `i` degraded.
    pub fn mark(&self, i: usize) {
        if i < self.len {
            let bit = 1 << (i % 64);
            if self.words[i / 64].fetch_or(bit, Ordering::Relaxed) & bit == 0 {
                self.members.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    /// Clears provider `i`.
    pub fn clear(&self, i: usize) {
        if i < self.len {
            let bit = 1 << (i % 64);
            if self.words[i / 64].fetch_and(!bit, Ordering::Relaxed) & bit != 0 {
                self.members.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }
}
