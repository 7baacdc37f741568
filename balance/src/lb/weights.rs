//! Provider weights per snapshot, grouped into *weight classes* (one mask per distinct
//! weight) so the total weight of a candidate set is a few popcounts per word.

use routechain_core::{Candidates, Snapshot, popcount};

use super::{DEFAULT_WEIGHT, MAX_WEIGHT_CLASSES};

/// The weight Dubbo gives a provider: its `weight` param, negative → 0, absent or not an
/// integer → 100. (Dubbo's warm-up reduction from `timestamp`/`warmup` is not applied: see
/// `docs/load-balancing.md`.)
pub fn provider_weight(provider: &routechain_core::Provider) -> u32 {
    match provider.get("weight").map(|w| w.trim().parse::<i64>()) {
        Some(Ok(w)) => w.clamp(0, u32::MAX as i64) as u32,
        _ => DEFAULT_WEIGHT,
    }
}

/// Per-snapshot weights: each provider's weight, and the providers grouped by weight.
#[derive(Debug, Clone)]
pub struct Weights {
    weights: Box<[u32]>,
    /// The providers grouped by their (non-zero) weight; `None` when there are more than
    /// [`MAX_WEIGHT_CLASSES`] distinct weights.
    pub(super) classes: Option<Classes>,
}

/// Weight classes laid out for the per-call counting kernels
/// ([`popcount::weighted_blocks`]): the class masks of one word side by side, so a pass
/// over the candidates reads one contiguous run of masks.
#[derive(Debug, Clone)]
pub(super) struct Classes {
    /// The distinct non-zero weights, increasing.
    pub(super) weights: Box<[u64]>,
    /// `masks[w * k + j]`: word `w` of the providers whose weight is `weights[j]`
    /// (`k = weights.len()`).
    pub(super) masks: Box<[u64]>,
}

impl Weights {
    /// The weights of `snapshot`'s providers.
    pub fn new(snapshot: &Snapshot) -> Self {
        let weights: Box<[u32]> = snapshot
            .providers()
            .iter()
            .map(|p| provider_weight(p))
            .collect();
        let mut distinct: Vec<u32> = weights.iter().copied().filter(|w| *w > 0).collect();
        distinct.sort_unstable();
        distinct.dedup();
        let classes = (distinct.len() <= MAX_WEIGHT_CLASSES).then(|| {
            let k = distinct.len();
            let mut masks = vec![0u64; weights.len().div_ceil(64) * k];
            for (i, &w) in weights.iter().enumerate() {
                if let Ok(j) = distinct.binary_search(&w) {
                    masks[(i / 64) * k + j] |= 1 << (i % 64);
                }
            }
            Classes {
                weights: distinct.iter().map(|&w| u64::from(w)).collect(),
                masks: masks.into_boxed_slice(),
            }
        });
        Weights { weights, classes }
    }

    /// The weight of provider `i` (0 past the end).
    pub fn get(&self, i: usize) -> u32 {
        self.weights.get(i).copied().unwrap_or(0)
    }

    /// The number of weight classes, `None` when the weights are too varied for classes.
    pub fn class_count(&self) -> Option<usize> {
        self.classes.as_ref().map(|c| c.weights.len())
    }

    /// The total weight of the candidates.
    pub fn total(&self, candidates: &Candidates) -> u64 {
        match &self.classes {
            Some(c) => {
                let words = candidates.words();
                let mut sum = [0u64];
                popcount::weighted_blocks(words, &c.masks, &c.weights, words.len().max(1), &mut sum)
            }
            None => candidates.iter().map(|i| self.get(i) as u64).sum(),
        }
    }
}
