//! Fixed-length bitsets over a provider snapshot (the idea of Dubbo 3's `BitList`).
//!
//! Bit `i` stands for the provider at index `i` of the snapshot. Routers precompute
//! bitsets when the snapshot or their rule changes and, per call, narrow the candidate set
//! in place with word-wise operations: no allocation, no per-provider string work.

use std::fmt;

const WORD: usize = 64;

/// A fixed-length set of provider indexes.
#[derive(Clone, PartialEq, Eq, Default, Hash)]
pub struct BitSet {
    words: Vec<u64>,
    len: usize,
}

/// The working set of one call: the providers still in play. Routers narrow it in place.
pub type Candidates = BitSet;

fn words_for(len: usize) -> usize {
    len.div_ceil(WORD)
}

impl BitSet {
    /// An empty set over `len` providers.
    pub fn empty(len: usize) -> Self {
        BitSet {
            words: vec![0; words_for(len)],
            len,
        }
    }

    /// The full set over `len` providers.
    pub fn full(len: usize) -> Self {
        let mut s = Self::empty(len);
        s.fill();
        s
    }

    /// A set over `len` providers from its words (least significant bit first; missing
    /// words are zero, bits past `len` are cleared).
    pub fn from_words(mut words: Vec<u64>, len: usize) -> Self {
        words.resize(words_for(len), 0);
        let mut s = BitSet { words, len };
        s.trim();
        s
    }

    /// A set over `len` providers holding `indexes` (indexes `>= len` are ignored).
    pub fn from_indexes(len: usize, indexes: impl IntoIterator<Item = usize>) -> Self {
        let mut s = Self::empty(len);
        for i in indexes {
            if i < len {
                s.insert(i);
            }
        }
        s
    }

    /// A set over `len` providers holding every `i` for which `pred(i)` is true.
    pub fn from_fn(len: usize, mut pred: impl FnMut(usize) -> bool) -> Self {
        let mut s = Self::empty(len);
        for i in 0..len {
            if pred(i) {
                s.insert(i);
            }
        }
        s
    }

    /// The number of providers the set ranges over (not the number of members).
    pub fn len(&self) -> usize {
        self.len
    }

    /// The words, least significant bit first; bits past `len` are always zero.
    pub fn words(&self) -> &[u64] {
        &self.words
    }

    /// Mutable words. Callers must keep bits past `len` zero ([`BitSet::trim`] restores it).
    pub fn words_mut(&mut self) -> &mut [u64] {
        &mut self.words
    }

    /// Clears the bits past `len` in the last word.
    pub fn trim(&mut self) {
        let rem = self.len % WORD;
        if rem != 0
            && let Some(last) = self.words.last_mut()
        {
            *last &= (1u64 << rem) - 1;
        }
    }

    /// Resizes to `len` providers and fills the set. Allocates only when the buffer must grow.
    pub fn reset_full(&mut self, len: usize) {
        self.len = len;
        self.words.resize(words_for(len), 0);
        self.fill();
    }

    /// Resizes to `len` providers without filling: the members are unspecified until the
    /// caller writes every word (the chain's first router, [`crate::PreparedRouter::route_from_full`]).
    /// Allocates only when the buffer must grow.
    pub(crate) fn resize_unfilled(&mut self, len: usize) {
        self.len = len;
        self.words.resize(words_for(len), 0);
    }

    /// Makes this set a copy of `other`. Allocates only when the buffer must grow.
    pub fn copy_from(&mut self, other: &BitSet) {
        self.len = other.len;
        self.words.clear();
        self.words.extend_from_slice(&other.words);
    }

    /// Adds every provider.
    pub fn fill(&mut self) {
        self.words.fill(u64::MAX);
        self.trim();
    }

    /// Removes every provider.
    pub fn clear(&mut self) {
        self.words.fill(0);
    }

    /// Number of members.
    pub fn count(&self) -> usize {
        crate::popcount::count(&self.words)
    }

    /// True when the set has no member or one (an early exit on the second member found).
    pub fn at_most_one(&self) -> bool {
        let mut seen = false;
        for &w in &self.words {
            if w != 0 {
                if seen || w & (w - 1) != 0 {
                    return false;
                }
                seen = true;
            }
        }
        true
    }

    /// True when no provider is a member.
    #[inline]
    pub fn is_empty(&self) -> bool {
        // A member in the first word (the common answer on the call path) without a call.
        match self.words.first() {
            Some(&w) if w != 0 => false,
            _ => !crate::words::any(&self.words),
        }
    }

    /// True when `i` is a member.
    pub fn contains(&self, i: usize) -> bool {
        i < self.len && self.words[i / WORD] & (1 << (i % WORD)) != 0
    }

    /// Adds `i` (ignored when out of range).
    pub fn insert(&mut self, i: usize) {
        if i < self.len {
            self.words[i / WORD] |= 1 << (i % WORD);
        }
    }

    /// Removes `i`.
    pub fn remove(&mut self, i: usize) {
        if i < self.len {
            self.words[i / WORD] &= !(1 << (i % WORD));
        }
    }

    /// `self = self AND other`.
    pub fn and_assign(&mut self, other: &BitSet) {
        debug_assert_eq!(self.len, other.len, "bitsets over different snapshots");
        crate::words::and(&mut self.words, &other.words);
    }

    /// `self = self AND other`, and whether a member is left (one pass, instead of
    /// [`BitSet::intersects`] then [`BitSet::and_assign`] when an empty result is acceptable).
    pub fn and_assign_any(&mut self, other: &BitSet) -> bool {
        debug_assert_eq!(self.len, other.len, "bitsets over different snapshots");
        crate::words::and_any(&mut self.words, &other.words)
    }

    /// `self = self AND NOT other`.
    pub fn and_not_assign(&mut self, other: &BitSet) {
        debug_assert_eq!(self.len, other.len, "bitsets over different snapshots");
        crate::words::and_not(&mut self.words, &other.words);
    }

    /// `self = self OR other`.
    pub fn or_assign(&mut self, other: &BitSet) {
        debug_assert_eq!(self.len, other.len, "bitsets over different snapshots");
        crate::words::or(&mut self.words, &other.words);
    }

    /// True when `self AND other` is not empty (eight words tested at a time, as
    /// [`BitSet::any_mask`]).
    #[inline]
    pub fn intersects(&self, other: &BitSet) -> bool {
        // A shared member in the first word (the common answer) without a call.
        match (self.words.first(), other.words.first()) {
            (Some(a), Some(b)) if a & b != 0 => true,
            _ => crate::words::any_and(&self.words, &other.words),
        }
    }

    /// The number of members of `self AND other`.
    pub fn count_and(&self, other: &BitSet) -> usize {
        crate::popcount::count_and(&self.words, &other.words)
    }

    /// True when every member of `self` is in `other`.
    pub fn is_subset(&self, other: &BitSet) -> bool {
        self.words
            .iter()
            .zip(&other.words)
            .all(|(a, b)| a & !b == 0)
    }

    /// True when some word `self[w] AND f(w)` is non-zero; `f` gives word `w` of any
    /// combination of prepared sets (e.g. `|w| region[w] & !degraded[w]`).
    pub fn any_with(&self, mut f: impl FnMut(usize) -> u64) -> bool {
        self.words.iter().enumerate().any(|(w, a)| a & f(w) != 0)
    }

    /// The number of members of `self AND f`, word by word, as in [`BitSet::any_with`].
    pub fn count_with(&self, mut f: impl FnMut(usize) -> u64) -> usize {
        self.words
            .iter()
            .enumerate()
            .map(|(w, a)| (a & f(w)).count_ones() as usize)
            .sum()
    }

    /// `self[w] &= f(w)` for every word, as in [`BitSet::any_with`].
    pub fn and_with(&mut self, mut f: impl FnMut(usize) -> u64) {
        for (w, a) in self.words.iter_mut().enumerate() {
            *a &= f(w);
        }
    }

    /// `self &= mask`, in one pass over slices (no per-word dispatch or bounds check).
    /// Every operand of `mask` must range over this set's providers (same word count);
    /// returns `false`, changing nothing, when one does not (the caller then takes its
    /// general path).
    #[inline]
    pub fn and_mask(&mut self, mask: WordMask<'_>) -> bool {
        let n = self.words.len();
        if !mask.fits(n) {
            return false;
        }
        let c = &mut self.words[..];
        // One kernel per operand combination (crate::words: vectorized, AVX2 when present).
        use crate::words as k;
        match (mask.and, mask.also, mask.not) {
            (None, None, None) => {}
            (Some(a), None, None) | (None, Some(a), None) => k::and(c, a),
            (None, None, Some(x)) => k::and_not(c, x),
            (Some(a), None, Some(x)) | (None, Some(a), Some(x)) => k::and_and_not(c, a, x),
            (Some(a), Some(b), None) => k::and_and(c, a, b),
            (Some(a), Some(b), Some(x)) => k::and_and_and_not(c, a, b, x),
        }
        true
    }

    /// Whether `self AND mask` has a member (stops at the first non-zero word), as
    /// [`BitSet::and_mask`]: `None` when an operand does not range over this set's providers.
    #[inline]
    pub fn any_mask(&self, mask: WordMask<'_>) -> Option<bool> {
        let n = self.words.len();
        if !mask.fits(n) {
            return None;
        }
        let c = &self.words[..];
        use crate::words as k;
        Some(match (mask.and, mask.also, mask.not) {
            (None, None, None) => k::any(c),
            (Some(a), None, None) | (None, Some(a), None) => k::any_and(c, a),
            (None, None, Some(x)) => k::any_and_not(c, x),
            (Some(a), None, Some(x)) | (None, Some(a), Some(x)) => k::any_and_and_not(c, a, x),
            (Some(a), Some(b), None) => k::any_and_and(c, a, b),
            (Some(a), Some(b), Some(x)) => k::any_and_and_and_not(c, a, b, x),
        })
    }

    /// The members in increasing order.
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            words: &self.words,
            word_index: 0,
            current: self.words.first().copied().unwrap_or(0),
        }
    }

    /// The lowest member.
    pub fn first(&self) -> Option<usize> {
        self.iter().next()
    }

    /// The `n`-th member (0-based) in increasing order, found by popcount over words.
    pub fn nth(&self, n: usize) -> Option<usize> {
        crate::popcount::nth(&self.words, n)
    }
}

/// The words of `and AND also AND NOT not` for a fused pass ([`BitSet::and_mask`],
/// [`BitSet::any_mask`]): each operand a set's words, an absent one no constraint. Routers
/// build it from prepared dense sets so a pass over the candidates is one loop over
/// slices instead of a per-word closure.
#[derive(Debug, Clone, Copy, Default)]
pub struct WordMask<'a> {
    /// Words every member must be in.
    pub and: Option<&'a [u64]>,
    /// Words every member must also be in.
    pub also: Option<&'a [u64]>,
    /// Words no member may be in.
    pub not: Option<&'a [u64]>,
}

impl WordMask<'_> {
    /// True when every operand has `n` words.
    fn fits(&self, n: usize) -> bool {
        [self.and, self.also, self.not]
            .iter()
            .all(|o| o.is_none_or(|o| o.len() == n))
    }
}

/// Iterator over the members of a [`BitSet`].
pub struct Iter<'a> {
    words: &'a [u64],
    word_index: usize,
    current: u64,
}

impl Iterator for Iter<'_> {
    type Item = usize;
    fn next(&mut self) -> Option<usize> {
        loop {
            if self.current != 0 {
                let bit = self.current.trailing_zeros() as usize;
                self.current &= self.current - 1;
                return Some(self.word_index * WORD + bit);
            }
            self.word_index += 1;
            self.current = *self.words.get(self.word_index)?;
        }
    }
}

impl<'a> IntoIterator for &'a BitSet {
    type Item = usize;
    type IntoIter = Iter<'a>;
    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl fmt::Debug for BitSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BitSet(len={}, ", self.len)?;
        f.debug_set().entries(self.iter()).finish()?;
        f.write_str(")")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn full_trims_tail_bits() {
        let s = BitSet::full(70);
        assert_eq!(s.count(), 70);
        assert_eq!(s.words()[1], (1 << 6) - 1);
        assert!(BitSet::full(0).is_empty());
    }

    #[test]
    fn nth_and_iter_agree() {
        let s = BitSet::from_indexes(200, [3, 64, 65, 130, 199]);
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![3, 64, 65, 130, 199]);
        assert_eq!(s.nth(0), Some(3));
        assert_eq!(s.nth(2), Some(65));
        assert_eq!(s.nth(4), Some(199));
        assert_eq!(s.nth(5), None);
    }

    #[test]
    fn reset_and_copy_reuse_the_buffer() {
        let mut s = BitSet::full(1000);
        let cap = s.words.capacity();
        s.reset_full(500);
        assert_eq!(s.count(), 500);
        s.copy_from(&BitSet::from_indexes(900, [899]));
        assert_eq!(s.words.capacity(), cap);
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![899]);
    }

    #[test]
    fn fused_scans_find_one_member_anywhere_in_long_sets() {
        for len in [1, 63, 64, 65, 511, 512, 513, 1000, 1300] {
            let all = BitSet::full(len);
            let none = BitSet::empty(len);
            for i in (0..len).step_by(37).chain([len - 1]) {
                let one = BitSet::from_indexes(len, [i]);
                let keep = WordMask {
                    and: Some(all.words()),
                    ..WordMask::default()
                };
                assert_eq!(one.any_mask(keep), Some(true), "{len} {i}");
                let drop = WordMask {
                    not: Some(one.words()),
                    ..WordMask::default()
                };
                assert_eq!(one.any_mask(drop), Some(false), "{len} {i}");
                assert_eq!(none.any_mask(keep), Some(false));
                let mut fused = all.clone();
                assert!(fused.and_mask(WordMask {
                    and: Some(one.words()),
                    also: Some(all.words()),
                    not: Some(none.words()),
                }));
                assert_eq!(fused, one);
            }
        }
    }

    proptest! {
        #[test]
        fn operations_match_a_vec_of_bools(
            a in proptest::collection::vec(any::<bool>(), 0..300),
            seed in any::<u64>(),
        ) {
            let len = a.len();
            let b: Vec<bool> = (0..len).map(|i| (seed >> (i % 64)) & 1 == 1).collect();
            let sa = BitSet::from_fn(len, |i| a[i]);
            let sb = BitSet::from_fn(len, |i| b[i]);
            let mut and = sa.clone();
            and.and_assign(&sb);
            let mut and_not = sa.clone();
            and_not.and_not_assign(&sb);
            let mut or = sa.clone();
            or.or_assign(&sb);
            for i in 0..len {
                prop_assert_eq!(and.contains(i), a[i] && b[i]);
                prop_assert_eq!(and_not.contains(i), a[i] && !b[i]);
                prop_assert_eq!(or.contains(i), a[i] || b[i]);
            }
            prop_assert_eq!(sa.count(), a.iter().filter(|x| **x).count());
            prop_assert_eq!(sa.at_most_one(), sa.count() <= 1);
            prop_assert_eq!(sa.intersects(&sb), (0..len).any(|i| a[i] && b[i]));
            prop_assert_eq!(sa.count_and(&sb), (0..len).filter(|&i| a[i] && b[i]).count());
            prop_assert_eq!(sa.is_subset(&sb), (0..len).all(|i| !a[i] || b[i]));
            // Fused masks: every operand combination against the bit-by-bit answer.
            let sc = BitSet::from_fn(len, |i| (seed.rotate_left(17) >> (i % 64)) & 1 == 1);
            let sd = BitSet::from_fn(len, |i| (seed.rotate_left(41) >> (i % 64)) & 1 == 1);
            for k in 0..8u8 {
                let mask = WordMask {
                    and: (k & 1 != 0).then(|| sb.words()),
                    also: (k & 2 != 0).then(|| sc.words()),
                    not: (k & 4 != 0).then(|| sd.words()),
                };
                let keep = |i: usize| {
                    (k & 1 == 0 || b[i]) && (k & 2 == 0 || sc.contains(i)) && (k & 4 == 0 || !sd.contains(i))
                };
                let mut fused = sa.clone();
                prop_assert!(fused.and_mask(mask));
                for (i, &ai) in a.iter().enumerate() {
                    prop_assert_eq!(fused.contains(i), ai && keep(i));
                }
                prop_assert_eq!(sa.any_mask(mask), Some((0..len).any(|i| a[i] && keep(i))));
            }
            let short = BitSet::empty(len + 64);
            let mut unchanged = sa.clone();
            let refused = !unchanged.and_mask(WordMask { and: Some(short.words()), ..WordMask::default() });
            prop_assert!(refused);
            prop_assert_eq!(&unchanged, &sa);
            prop_assert_eq!(sa.any_mask(WordMask { not: Some(short.words()), ..WordMask::default() }), None);
            let members: Vec<usize> = (0..len).filter(|&i| a[i]).collect();
            prop_assert_eq!(sa.iter().collect::<Vec<_>>(), members.clone());
            for (n, m) in members.iter().enumerate() {
                prop_assert_eq!(sa.nth(n), Some(*m));
            }
        }
    }
}
