//! `random` (Dubbo's `RandomLoadBalance`, the default): weighted random over the
//! candidates.
//!
//! The total weight is `Σ class_weight × popcount(candidates & class)`, word by word; after
//! one draw the word holding it is found by the same per-word sums and only that word's
//! bits are walked: O(words × classes + 64), no list. With more than
//! [`super::MAX_WEIGHT_CLASSES`] distinct weights it walks the candidates (Dubbo's loop).

use routechain_core::{BitSet, Candidates, RandomSource, Request};

use super::{Balancer, LoadBalanceKind, Shared, Weights};

/// Weighted random: provider `i` with probability `weight(i) / total`; uniform when every
/// weight is zero. Keeps no state of its own.
#[derive(Debug, Clone, Copy, Default)]
pub struct Random;

impl Balancer for Random {
    fn kind(&self) -> LoadBalanceKind {
        LoadBalanceKind::Random
    }

    #[inline]
    fn pick(
        &self,
        shared: &Shared,
        _request: &Request,
        candidates: &Candidates,
        rng: &mut dyn RandomSource,
    ) -> Option<usize> {
        shared.weights().pick(candidates, rng)
    }
}

impl Weights {
    fn word_total(&self, classes: &[(u64, BitSet)], w: usize, word: u64) -> u64 {
        classes
            .iter()
            .map(|(weight, set)| {
                let class_word = set.words().get(w).copied().unwrap_or(0);
                weight * (word & class_word).count_ones() as u64
            })
            .sum()
    }

    /// Dubbo's weighted random pick: with a positive total weight, provider `i` with
    /// probability `weight(i) / total`; with a zero total, uniform.
    pub fn pick(&self, candidates: &Candidates, rng: &mut dyn RandomSource) -> Option<usize> {
        let count = candidates.count();
        if count <= 1 {
            return candidates.first();
        }
        let total = self.total(candidates);
        if total == 0 {
            return candidates.nth(rng.below(count as u64) as usize);
        }
        let mut offset = rng.below(total);
        let (words, start) = match &self.classes {
            Some(classes) => {
                // Find the word holding the draw by per-word sums, then walk its bits.
                let mut found = None;
                for (w, &word) in candidates.words().iter().enumerate() {
                    if word == 0 {
                        continue;
                    }
                    let t = self.word_total(classes, w, word);
                    if offset < t {
                        found = Some(w);
                        break;
                    }
                    offset -= t;
                }
                let w = found?;
                (&candidates.words()[w..=w], w)
            }
            None => (candidates.words(), 0),
        };
        for (k, &word) in words.iter().enumerate() {
            let mut bits = word;
            while bits != 0 {
                let i = (start + k) * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let weight = self.get(i) as u64;
                if offset < weight {
                    return Some(i);
                }
                offset -= weight;
            }
        }
        candidates.first()
    }
}
