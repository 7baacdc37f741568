//! Incremental provider updates: a snapshot derived from the one before it by an edit.
//!
//! Providers churn all day (deployments register and unregister them one by one), and a
//! registry of 100,000 providers must not rebuild every index for one of them. A
//! [`SnapshotEdit`] says how a new snapshot follows from the previous one:
//!
//! - some old positions are deleted ([`SnapshotEdit::removed`]);
//! - the survivors keep their relative order, shifted down over the holes;
//! - the new providers are appended at the end ([`SnapshotEdit::added`]).
//!
//! Because the map from old to new positions is monotone, a bitset or a sorted index list
//! over the old snapshot becomes one over the new snapshot by deleting bits and shifting
//! the rest, with no re-sorting and no per-provider string work: the cost of an edit is the
//! size of the prepared indexes in words, plus the work of the changed providers only.
//! Routers use it in [`crate::TypedRouter::prepare_edit`]; the chain in
//! [`crate::ChainState::next`]; the balancer for its tables.
//!
//! [`Snapshot::edit_to`] computes the edit from a new provider list whose providers are
//! shared with the old snapshot (the live sources reuse parsed providers by their URL
//! text), comparing pointers only.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::ops::Range;

use crate::bitset::BitSet;
use crate::snapshot::{Provider, Snapshot};

/// How a snapshot follows from its predecessor: old positions deleted, survivors kept in
/// order and shifted down, new providers appended (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotEdit {
    old_len: usize,
    /// Ascending, distinct old positions, each `< old_len`.
    removed: Box<[u32]>,
    added: usize,
}

impl SnapshotEdit {
    /// The edit deleting `removed` (old positions, in any order; duplicates and positions
    /// `>= old_len` are ignored) from a snapshot of `old_len` providers and appending
    /// `added` new ones.
    pub fn new(old_len: usize, mut removed: Vec<u32>, added: usize) -> Self {
        removed.retain(|&r| (r as usize) < old_len);
        removed.sort_unstable();
        removed.dedup();
        SnapshotEdit {
            old_len,
            removed: removed.into_boxed_slice(),
            added,
        }
    }

    /// The number of providers before the edit.
    pub fn old_len(&self) -> usize {
        self.old_len
    }

    /// The number of providers after the edit.
    pub fn new_len(&self) -> usize {
        self.survivors() + self.added
    }

    /// The number of old providers kept.
    pub fn survivors(&self) -> usize {
        self.old_len - self.removed.len()
    }

    /// The deleted old positions, ascending.
    pub fn removed(&self) -> &[u32] {
        &self.removed
    }

    /// The new providers' positions in the new snapshot: the last ones.
    pub fn added(&self) -> Range<usize> {
        self.survivors()..self.new_len()
    }

    /// The number of providers removed or added.
    pub fn changes(&self) -> usize {
        self.removed.len() + self.added
    }

    /// True when the edit changes nothing.
    pub fn is_identity(&self) -> bool {
        self.changes() == 0
    }

    /// The new position of old provider `old`, or `None` when it was removed (or is past
    /// the old end). A binary search over the removed positions.
    pub fn new_index(&self, old: usize) -> Option<usize> {
        if old >= self.old_len {
            return None;
        }
        match self.removed.binary_search(&(old as u32)) {
            Ok(_) => None,
            Err(before) => Some(old - before),
        }
    }

    /// The survivors as runs: `(old start, new start, length)`, in order.
    fn runs(&self) -> impl Iterator<Item = (usize, usize, usize)> + '_ {
        let mut from = 0usize;
        let mut k = 0usize;
        std::iter::from_fn(move || {
            while from <= self.old_len {
                let end = self.removed.get(k).map_or(self.old_len, |&r| r as usize);
                let run = (from, from - k, end - from);
                if k < self.removed.len() {
                    k += 1;
                    from = end + 1;
                } else {
                    from = self.old_len + 1;
                }
                if run.2 > 0 {
                    return Some(run);
                }
            }
            None
        })
    }

    /// A bitset over the old snapshot carried to the new one: removed members deleted,
    /// survivors shifted down, and each added position `i` a member when `added(i)` is
    /// true. Time: the set's words plus the added providers.
    pub fn bitset(&self, old: &BitSet, mut added: impl FnMut(usize) -> bool) -> BitSet {
        debug_assert_eq!(
            old.len(),
            self.old_len,
            "the bitset is not over the old snapshot"
        );
        let mut words = vec![0u64; self.new_len().div_ceil(64)];
        if self.removed.is_empty() {
            let n = old.words().len().min(words.len());
            words[..n].copy_from_slice(&old.words()[..n]);
        } else {
            for (from, to, len) in self.runs() {
                copy_bits(&mut words, to, old.words(), from, len);
            }
        }
        for i in self.added() {
            if added(i) {
                words[i / 64] |= 1 << (i % 64);
            }
        }
        BitSet::from_words(words, self.new_len())
    }

    /// A per-provider table over the old snapshot carried to the new one: removed entries
    /// dropped, each added position `i` filled with `added(i)`.
    pub fn table<T: Clone>(&self, old: &[T], added: impl FnMut(usize) -> T) -> Vec<T> {
        debug_assert_eq!(
            old.len(),
            self.old_len,
            "the table is not over the old snapshot"
        );
        let mut out = Vec::with_capacity(self.new_len());
        self.keep(old, &mut out);
        out.extend(self.added().map(added));
        out
    }

    /// Appends the survivors of `old` to `out`, in order.
    fn keep<T: Clone>(&self, old: &[T], out: &mut Vec<T>) {
        for (from, _, len) in self.runs() {
            out.extend_from_slice(&old[from..from + len]);
        }
    }

    /// Sorted, distinct positions over the old snapshot carried to the new one: removed
    /// ones dropped, survivors renumbered (still sorted), and each added position `i` for
    /// which `added(i)` is true appended.
    pub fn indexes(&self, old: &[u32], mut added: impl FnMut(usize) -> bool) -> Vec<u32> {
        let mut out = Vec::with_capacity(old.len());
        let mut k = 0;
        for &i in old {
            while self.removed.get(k).is_some_and(|&r| r < i) {
                k += 1;
            }
            if self.removed.get(k) != Some(&i) {
                out.push(i - k as u32);
            }
        }
        out.extend(self.added().filter(|&i| added(i)).map(|i| i as u32));
        out
    }
}

/// Copies bits `[from, from + len)` of `src` to `dst` starting at bit `to`, 64 at a time.
/// `dst`'s bits in the target range must be zero (they are ORed in).
fn copy_bits(dst: &mut [u64], to: usize, src: &[u64], from: usize, len: usize) {
    let mut done = 0;
    while done < len {
        let n = (len - done).min(64);
        let (s, d) = (from + done, to + done);
        // Up to 64 source bits starting at `s`, which may straddle two words.
        let (w, o) = (s / 64, s % 64);
        let mut bits = src[w] >> o;
        if o != 0 && w + 1 < src.len() {
            bits |= src[w + 1] << (64 - o);
        }
        if n < 64 {
            bits &= (1u64 << n) - 1;
        }
        let (w, o) = (d / 64, d % 64);
        dst[w] |= bits << o;
        if o != 0 && w + 1 < dst.len() {
            dst[w + 1] |= bits >> (64 - o);
        }
        done += n;
    }
}

/// Hashes a pointer: one multiplication (the key is already unique; SipHash would cost more
/// than the edit itself at 100,000 providers). `std` has no such hasher, and a crate for
/// one line is not worth a dependency.
#[derive(Default)]
struct PointerHasher(u64);

impl Hasher for PointerHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_usize(&mut self, n: usize) {
        self.0 = (n as u64)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .rotate_left(26);
    }
}

impl Snapshot {
    /// The snapshot this one becomes by `removed` (old positions) and `added` (appended),
    /// with the edit: survivors keep their order and their shared providers.
    pub fn edited(
        &self,
        generation: u64,
        removed: Vec<u32>,
        added: Vec<Provider>,
    ) -> (Snapshot, SnapshotEdit) {
        let edit = SnapshotEdit::new(self.len(), removed, added.len());
        let mut providers = Vec::with_capacity(edit.new_len());
        edit.keep(self.providers(), &mut providers);
        providers.extend(added);
        (Snapshot::from_shared(generation, providers), edit)
    }

    /// The snapshot holding exactly the providers of `next` (a list whose unchanged
    /// providers are clones of this snapshot's, [`Url::ptr_eq`](crate::Url::ptr_eq): a live
    /// source reuses parsed providers by their URL text), in this snapshot's order for the
    /// ones kept and in `next`'s order for the new ones, with the edit from this one.
    /// Providers are compared by block, counting repeats (a list may name one provider
    /// twice): time linear in the two lists, no string compared. (An equal provider parsed
    /// anew is another block: it counts as removed and added.)
    pub fn edit_to(&self, generation: u64, next: &[Provider]) -> (Snapshot, SnapshotEdit) {
        type Counts = HashMap<usize, u32, BuildHasherDefault<PointerHasher>>;
        let key = |p: &Provider| p.block_addr();
        let mut wanted = Counts::with_capacity_and_hasher(next.len(), Default::default());
        for p in next {
            *wanted.entry(key(p)).or_default() += 1;
        }
        let mut removed = Vec::new();
        for (i, p) in self.providers().iter().enumerate() {
            match wanted.get_mut(&key(p)) {
                Some(n) if *n > 0 => *n -= 1,
                _ => removed.push(i as u32),
            }
        }
        // What is left wanted is new, in `next`'s order.
        let added: Vec<Provider> = next
            .iter()
            .filter(|p| {
                wanted.get_mut(&key(p)).is_some_and(|n| {
                    let new = *n > 0;
                    *n = n.saturating_sub(1);
                    new
                })
            })
            .cloned()
            .collect();
        self.edited(generation, removed, added)
    }
}

#[cfg(test)]
mod tests;
