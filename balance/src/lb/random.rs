//! `random` (Dubbo's `RandomLoadBalance`, the default): weighted random over the
//! candidates.
//!
//! The total weight is `Σ class_weight × popcount(candidates & class)`, word by word, summed
//! into at most 64 blocks of words in one pass ([`popcount::weighted_blocks`], with the
//! CPU's `POPCNT` when it has one); after one draw the block holding it is found among the
//! block sums, the word inside that block by the same per-word sums, and only that word's
//! bits are walked: O(words × classes) once, no list, no allocation. With more than
//! [`super::MAX_WEIGHT_CLASSES`] distinct weights it walks the candidates (Dubbo's loop).

use routechain_core::{Candidates, RandomSource, Request, popcount};

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

/// Blocks the weighted pass sums into (a stack array: no allocation). The draw is first
/// located among the block sums, then word by word inside one block, then bit by bit inside
/// one word, so the words are counted once plus at most one block again.
const BLOCKS: usize = 64;
/// The fewest words per block: below it the per-block bookkeeping costs more than the
/// words it saves recounting.
const MIN_BLOCK: usize = 16;

impl Weights {
    /// Dubbo's weighted random pick: with a positive total weight, provider `i` with
    /// probability `weight(i) / total`; with a zero total, uniform. Draw for draw the same
    /// choice as Dubbo's loop over the candidates in index order.
    pub fn pick(&self, candidates: &Candidates, rng: &mut dyn RandomSource) -> Option<usize> {
        if candidates.at_most_one() {
            return candidates.first();
        }
        let Some(classes) = &self.classes else {
            return self.pick_by_walk(candidates, rng);
        };
        let words = candidates.words();
        let k = classes.weights.len();
        let block = words.len().div_ceil(BLOCKS).max(MIN_BLOCK);
        let mut sums = [0u64; BLOCKS];
        let total =
            popcount::weighted_blocks(words, &classes.masks, &classes.weights, block, &mut sums);
        if total == 0 {
            return candidates.nth(rng.below(candidates.count() as u64) as usize);
        }
        let mut offset = rng.below(total);
        let b = sums.iter().position(|&s| {
            if offset < s {
                true
            } else {
                offset -= s;
                false
            }
        })?;
        let start = b * block;
        let end = (start + block).min(words.len());
        let (w, mut offset) = popcount::find_word(
            &words[start..end],
            classes.masks.get(start * k..end * k)?,
            &classes.weights,
            offset,
        )?;
        let w = start + w;
        let mut bits = words[w];
        while bits != 0 {
            let i = w * 64 + bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let weight = u64::from(self.get(i));
            if offset < weight {
                return Some(i);
            }
            offset -= weight;
        }
        candidates.first()
    }

    /// The pick without classes (too many distinct weights): Dubbo's loop, on the bitset.
    fn pick_by_walk(&self, candidates: &Candidates, rng: &mut dyn RandomSource) -> Option<usize> {
        let total = self.total(candidates);
        if total == 0 {
            return candidates.nth(rng.below(candidates.count() as u64) as usize);
        }
        let mut offset = rng.below(total);
        for i in candidates {
            let weight = u64::from(self.get(i));
            if offset < weight {
                return Some(i);
            }
            offset -= weight;
        }
        candidates.first()
    }
}
