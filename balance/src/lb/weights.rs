//! Provider weights per snapshot, grouped into *weight classes* (one bitset per distinct
//! weight) so the total weight of a candidate set is a few popcounts.

use routechain_core::{BitSet, Candidates, Snapshot};

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
    /// (weight, providers with that weight), non-zero weights only; `None` when there are
    /// more than [`MAX_WEIGHT_CLASSES`] distinct weights.
    pub(super) classes: Option<Box<[(u64, BitSet)]>>,
}

impl Weights {
    /// The weights of `snapshot`'s providers.
    pub fn new(snapshot: &Snapshot) -> Self {
        let weights: Box<[u32]> = snapshot.providers().iter().map(provider_weight).collect();
        let mut distinct: Vec<u32> = weights.iter().copied().filter(|w| *w > 0).collect();
        distinct.sort_unstable();
        distinct.dedup();
        let classes = (distinct.len() <= MAX_WEIGHT_CLASSES).then(|| {
            distinct
                .iter()
                .map(|&w| {
                    (
                        w as u64,
                        BitSet::from_fn(weights.len(), |i| weights[i] == w),
                    )
                })
                .collect()
        });
        Weights { weights, classes }
    }

    /// The weight of provider `i` (0 past the end).
    pub fn get(&self, i: usize) -> u32 {
        self.weights.get(i).copied().unwrap_or(0)
    }

    /// The number of weight classes, `None` when the weights are too varied for classes.
    pub fn class_count(&self) -> Option<usize> {
        self.classes.as_ref().map(|c| c.len())
    }

    /// The total weight of the candidates.
    pub fn total(&self, candidates: &Candidates) -> u64 {
        match &self.classes {
            Some(classes) => classes
                .iter()
                .map(|(w, set)| w * candidates.count_and(set) as u64)
                .sum(),
            None => candidates.iter().map(|i| self.get(i) as u64).sum(),
        }
    }
}
