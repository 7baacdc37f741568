//! `random` (Dubbo's `RandomLoadBalance`, the default): weighted random over the
//! candidates.
//!
//! Dubbo's distribution: with a positive total weight, candidate `i` with probability
//! `weight(i) / Σ weight(candidates)`; with a zero total, uniform. A pick draws from it in
//! up to three stages, each *exact* — whatever it returns is distributed exactly as Dubbo's
//! distribution — and each a bounded number of tries, after which the next stage starts
//! afresh:
//!
//! 1. **Sampling over every provider** (rejection sampling, no pass over the words): a
//!    provider drawn uniformly among all of the snapshot's is accepted when it is a
//!    candidate and then with probability `weight / max weight` (a second draw, only for a
//!    candidate lighter than the heaviest). An accepted draw is a candidate with probability
//!    proportional to its weight. One random word makes two proposals (two exact 32-bit
//!    draws, Lemire's method); each costs a multiplication and a bit test, so this stage
//!    wins whenever the candidates are not a tiny share of the providers.
//! 2. **Sampling among the candidates**: one pass counts the candidates by blocks of words
//!    ([`popcount::count_blocks`]); a candidate drawn uniformly (block, then word, then bit)
//!    is accepted with probability `weight / max weight`. One popcount per word instead of
//!    one per word and weight class.
//! 3. **The exact pick** ([`Weights::pick_exact`]): the total weight is
//!    `Σ class_weight × popcount(candidates & class)`, word by word, summed into at most 64
//!    blocks of words in one pass ([`popcount::weighted_blocks`]); the block holding the
//!    draw is found among the block sums, the word inside that block by the same per-word
//!    sums, and only that word's bits are walked: draw for draw the same choice as Dubbo's
//!    loop over the candidates in index order. With more than
//!    [`super::MAX_WEIGHT_CLASSES`] distinct weights it walks the candidates (Dubbo's loop).
//!
//! Why the mixture is exact: a stage's tries are independent, each accepting candidate `i`
//! with probability `c × weight(i)` (the same `c` for every candidate) or rejecting; so the
//! first accepted try is `i` with probability `weight(i) / Σ weight` whatever the number of
//! tries allowed, and when every try rejects the next stage draws afresh from the same
//! distribution. A zero-weight candidate is never accepted: when every candidate weighs
//! zero the stages reject and the exact pick draws uniformly, as Dubbo. A single candidate
//! is returned whatever its weight (Dubbo's `invokers.size() == 1`). The sampling stages
//! are used only when the weights are not too skewed (the largest at most four times the
//! mean over all providers); otherwise the exact pick runs directly.
//! No list, no allocation.

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
    fn pick_at(
        &self,
        shared: &Shared,
        _request: &Request,
        candidates: &Candidates,
        rng: &mut dyn RandomSource,
        now: i64,
    ) -> Option<usize> {
        if now == 0 {
            shared.weights().pick(candidates, rng)
        } else {
            shared.pick_warm(candidates, rng, now)
        }
    }
}

/// Draws of the static pick [`Shared::pick_warm`] makes before it walks the candidates.
const WARM_TRIES: usize = 8;

impl Shared {
    /// The weighted random pick while providers warm up: candidate `i` with probability
    /// `weight(i, now) / Σ weight(candidates, now)` (Dubbo's `RandomLoadBalance` over
    /// `getWeight`). A static pick (probability `static(i) / Σ static`) is accepted with
    /// probability `weight(i, now) / static(i)` — 1 for a provider not warming — so an
    /// accepted draw is `i` with probability proportional to its weight now; after
    /// eight rejections (most of the weight warming), Dubbo's loop over the
    /// candidates with the weights now. Exact either way (see the module documentation).
    pub fn pick_warm(
        &self,
        candidates: &Candidates,
        rng: &mut dyn RandomSource,
        now: i64,
    ) -> Option<usize> {
        if candidates.at_most_one() {
            return candidates.first();
        }
        for _ in 0..WARM_TRIES {
            let i = self.weights().pick(candidates, rng)?;
            let (s, w) = (self.weights().get(i), self.weight(i, now));
            if w == s || (w > 0 && rng.below(u64::from(s)) < u64::from(w)) {
                return Some(i);
            }
        }
        let total: u64 = candidates
            .iter()
            .map(|i| u64::from(self.weight(i, now)))
            .sum();
        if total == 0 {
            return candidates.nth(rng.below(candidates.count() as u64) as usize);
        }
        let mut offset = rng.below(total);
        for i in candidates {
            let w = u64::from(self.weight(i, now));
            if offset < w {
                return Some(i);
            }
            offset -= w;
        }
        candidates.first()
    }
}

/// Blocks the weighted pass sums into (a stack array: no allocation). The draw is first
/// located among the block sums, then word by word inside one block, then bit by bit inside
/// one word, so the words are counted once plus at most one block again.
const BLOCKS: usize = 64;
/// The fewest words per block: below it the per-block bookkeeping costs more than the
/// words it saves recounting.
const MIN_BLOCK: usize = 16;
/// The fewest proposals of the sampling over every provider, when it runs.
const MIN_PROPOSALS: u64 = 32;
/// Words of the candidate set counted to estimate its density (evenly spread).
const PROBE_WORDS: usize = 8;
/// The draws of the sampling among the candidates: each is accepted with probability
/// `mean candidate weight / max weight` (≥ 1/4 where sampling is used, ~1/2 typically),
/// so sixteen all rejected is rare.
const CANDIDATE_DRAWS: usize = 16;

impl Weights {
    /// Dubbo's weighted random pick: with a positive total weight, provider `i` with
    /// probability `weight(i) / total`; with a zero total, uniform; a single candidate
    /// whatever its weight. `None` only when `candidates` is empty. Sampling first, the
    /// exact pick when sampling gives up (see the module documentation).
    #[inline]
    pub fn pick(&self, candidates: &Candidates, rng: &mut dyn RandomSource) -> Option<usize> {
        if self.sampling {
            let proposals = self.proposals(candidates);
            if proposals > 0
                && let Some(i) = self.sample_all(candidates, proposals, rng)
            {
                return Some(i);
            }
            if let Some(picked) = self.sample_candidates(candidates, rng) {
                return picked;
            }
        }
        self.pick_exact(candidates, rng)
    }

    /// Accepts candidate `i` with probability `weight(i) / max` (a draw only when
    /// `0 < weight(i) < max`).
    #[inline]
    fn accept(&self, i: usize, rng: &mut dyn RandomSource) -> bool {
        let w = self.get(i);
        w == self.max || (w > 0 && rng.below(u64::from(self.max)) < u64::from(w))
    }

    /// How many proposals stage 1 makes for `candidates`, 0 to skip it: a few evenly
    /// spread words estimate the candidates' density `d`; a proposal is accepted with
    /// probability about `d × mean weight / max weight`, so about `E = 1 / that` proposals
    /// pick one. Stage 1 runs when `E` is at most a quarter of the words (a proposal costs
    /// a few instructions, stage 2's count a few per word), with `3 E` proposals (all
    /// rejected about 5% of the time). Only a function of the candidate set, never of the
    /// draws, so the stage stays exact whatever it returns.
    #[inline]
    pub(super) fn proposals(&self, candidates: &Candidates) -> u64 {
        let words = candidates.words();
        if words.is_empty() {
            return 0;
        }
        let step = words.len().div_ceil(PROBE_WORDS);
        let probed = words.len().div_ceil(step) as u64;
        let bits = popcount::count_strided(words, step) as u64;
        if bits == 0 {
            return 0;
        }
        // E = 64 × probed × len × max / (bits × sum), in u128 (no overflow).
        let expected = (64 * u128::from(probed) * self.len() as u128 * u128::from(self.max))
            / (u128::from(bits) * u128::from(self.sum).max(1));
        if expected * 4 > words.len() as u128 {
            return 0;
        }
        (3 * expected as u64).max(MIN_PROPOSALS)
    }

    /// Stage 1: proposals uniform over every provider, accepted when a candidate and by
    /// weight. `None` when every proposal was rejected.
    #[inline]
    pub(super) fn sample_all(
        &self,
        candidates: &Candidates,
        proposals: u64,
        rng: &mut dyn RandomSource,
    ) -> Option<usize> {
        let words = candidates.words();
        let len = self.len() as u64;
        for _ in 0..proposals.div_ceil(2) {
            let r = rng.next_u64();
            for half in [r as u32, (r >> 32) as u32] {
                // Lemire: `half × len / 2³²` is uniform in `0..len` once the low part is at
                // least `2³² mod len`.
                let m = u64::from(half) * len;
                if (m as u32) < self.threshold {
                    continue;
                }
                let i = (m >> 32) as usize;
                let member = words.get(i / 64).is_some_and(|w| (w >> (i % 64)) & 1 == 1);
                if member && self.accept(i, rng) {
                    return Some(i);
                }
            }
        }
        None
    }

    /// Stage 2: a candidate drawn uniformly (counted by blocks once), accepted by weight.
    /// `Some(pick)` when decided (`Some(None)`: no candidate; a single candidate is
    /// returned as is), `None` when every draw was rejected.
    pub(super) fn sample_candidates(
        &self,
        candidates: &Candidates,
        rng: &mut dyn RandomSource,
    ) -> Option<Option<usize>> {
        let words = candidates.words();
        let block = words.len().div_ceil(BLOCKS).max(MIN_BLOCK);
        let mut sums = [0u64; BLOCKS];
        let count = popcount::count_blocks(words, block, &mut sums);
        if count <= 1 {
            return Some(candidates.first());
        }
        for _ in 0..CANDIDATE_DRAWS {
            let mut n = rng.below(count);
            let b = sums.iter().position(|&s| {
                if n < s {
                    true
                } else {
                    n -= s;
                    false
                }
            })?;
            let start = b * block;
            let end = (start + block).min(words.len());
            let i = start * 64 + popcount::nth(&words[start..end], n as usize)?;
            if self.accept(i, rng) {
                return Some(Some(i));
            }
        }
        None
    }

    /// The exact pick, without sampling: draw for draw the same choice as Dubbo's loop over
    /// the candidates in index order (one draw in `0..total`, or in `0..count` when every
    /// candidate weighs zero).
    pub fn pick_exact(&self, candidates: &Candidates, rng: &mut dyn RandomSource) -> Option<usize> {
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
