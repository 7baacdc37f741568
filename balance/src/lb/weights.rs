//! Provider weights per snapshot, grouped into *weight classes* (one mask per distinct
//! weight) so the total weight of a candidate set is a few popcounts per word, plus what the
//! sampling fast path of the weighted pick needs (the largest weight, the total over every
//! provider: see [`super::random`]).
//!
//! [`Weights::edited`] carries the per-provider weights to a snapshot derived by a
//! [`SnapshotEdit`], reading only the added providers' `weight` params, and builds the
//! classes from them again (one pass over the table, no URL read).

use routechain_core::{Candidates, Snapshot, SnapshotEdit, popcount};

use super::{DEFAULT_WEIGHT, MAX_WEIGHT_CLASSES};

/// The static weight Dubbo gives a provider: its `weight` param as [`parse_weight`] reads
/// it, absent → 100 (warm-up, which lowers it for a while, is [`super::warmup`]'s).
pub fn provider_weight(provider: &routechain_core::Provider) -> u32 {
    weight_of(provider.get("weight"))
}

/// A `weight` param as Dubbo reads it: `URL.getMethodParameter(method, "weight", 100)` parses
/// it with Java's `Integer.parseInt` (an optional sign and ASCII digits, no blanks, within
/// −2³¹..2³¹−1) and `AbstractLoadBalance.getWeight` returns `Math.max(weight, 0)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WeightParam {
    /// An integer from 0 to 2³¹−1: the weight.
    Weight(u32),
    /// A negative integer: weight 0 (never picked while a candidate weighs more).
    Negative,
    /// An integer outside −2³¹..2³¹−1.
    OutOfRange,
    /// Not an integer.
    NotANumber,
}

/// Reads a `weight` param value (see [`WeightParam`]).
pub fn parse_weight(value: &str) -> WeightParam {
    use std::num::IntErrorKind::{NegOverflow, PosOverflow};
    match value.parse::<i32>() {
        Ok(w) => u32::try_from(w).map_or(WeightParam::Negative, WeightParam::Weight),
        Err(e) if matches!(e.kind(), PosOverflow | NegOverflow) => WeightParam::OutOfRange,
        Err(_) => WeightParam::NotANumber,
    }
}

/// The weight of a `weight` param value. A value that is not an int (out of range or not a
/// number) makes Dubbo's `Integer.parseInt` throw inside `getWeight`, which fails every
/// weighted pick over a set holding the provider; routechain reads it as absent (100)
/// instead of failing the service's calls, and `routechain check --providers` warns (RC206).
fn weight_of(value: Option<&str>) -> u32 {
    match value.map(parse_weight) {
        Some(WeightParam::Weight(w)) => w,
        Some(WeightParam::Negative) => 0,
        Some(WeightParam::OutOfRange | WeightParam::NotANumber) | None => DEFAULT_WEIGHT,
    }
}

/// Per-snapshot weights: each provider's weight, and the providers grouped by weight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Weights {
    weights: Box<[u32]>,
    /// The providers grouped by their (non-zero) weight; `None` when there are more than
    /// [`MAX_WEIGHT_CLASSES`] distinct weights.
    pub(super) classes: Option<Classes>,
    /// The largest weight (0 when every weight is zero).
    pub(super) max: u32,
    /// The sum of every provider's weight.
    pub(super) sum: u64,
    /// `2³² mod len`: the rejection threshold of an exact 32-bit uniform draw in
    /// `0..len` (Lemire's method), for the sampling fast path.
    pub(super) threshold: u32,
    /// True when the pick samples before counting: some weight is positive, the provider
    /// count fits 32 bits (at least two), and the weights are not too skewed
    /// (`len × max ≤ SKEW × sum`).
    pub(super) sampling: bool,
}

/// The weighted pick samples when `len × max weight ≤ SKEW × Σ weights`: a proposal over
/// every provider is then accepted by weight at least a quarter as often as by membership.
const SKEW: u128 = 4;

/// Weight classes laid out for the per-call counting kernels
/// ([`popcount::weighted_blocks`]): the class masks of one word side by side, so a pass
/// over the candidates reads one contiguous run of masks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Classes {
    /// The distinct non-zero weights, increasing.
    pub(super) weights: Box<[u64]>,
    /// `masks[w * k + j]`: word `w` of the providers whose weight is `weights[j]`
    /// (`k = weights.len()`).
    pub(super) masks: Box<[u64]>,
}

impl Classes {
    /// The classes of `weights` (the per-provider table), `None` with too many distinct
    /// non-zero weights.
    fn new(weights: &[u32]) -> Option<Self> {
        // One pass keeping the few distinct weights (a run of equal weights is one compare).
        let mut distinct: Vec<u32> = Vec::with_capacity(MAX_WEIGHT_CLASSES);
        let mut last = 0;
        for &w in weights {
            if w == 0 || w == last {
                continue;
            }
            last = w;
            if !distinct.contains(&w) {
                if distinct.len() == MAX_WEIGHT_CLASSES {
                    return None;
                }
                distinct.push(w);
            }
        }
        distinct.sort_unstable();
        let k = distinct.len();
        let mut masks = vec![0u64; weights.len().div_ceil(64) * k];
        for (i, &w) in weights.iter().enumerate() {
            if let Ok(j) = distinct.binary_search(&w) {
                masks[(i / 64) * k + j] |= 1 << (i % 64);
            }
        }
        Some(Classes {
            weights: distinct.iter().map(|&w| u64::from(w)).collect(),
            masks: masks.into_boxed_slice(),
        })
    }
}

impl Weights {
    /// The weights of `snapshot`'s providers.
    pub fn new(snapshot: &Snapshot) -> Self {
        // The key resolved once: each provider's `weight` read without comparing strings.
        let key = routechain_core::UrlKey::new("weight");
        let weights: Box<[u32]> = snapshot
            .providers()
            .iter()
            .map(|p| weight_of(p.get_key(&key)))
            .collect();
        let classes = Classes::new(&weights);
        Self::with_classes(weights, classes)
    }

    /// The weights of `snapshot`, derived from these (the weights of the snapshot `edit`
    /// started from): survivors' weights are carried, only the added providers' params are
    /// read, the classes are built from the table. Equal to [`Weights::new`] of `snapshot`.
    /// Time: two passes over the per-provider table, plus the added providers.
    pub fn edited(&self, edit: &SnapshotEdit, snapshot: &Snapshot) -> Self {
        debug_assert_eq!(edit.new_len(), snapshot.len());
        let providers = snapshot.providers();
        let weights: Box<[u32]> = edit
            .table(&self.weights, |i| {
                providers.get(i).map_or(DEFAULT_WEIGHT, provider_weight)
            })
            .into_boxed_slice();
        let classes = Classes::new(&weights);
        Self::with_classes(weights, classes)
    }

    /// The weights of a per-provider table (a method's own weights: `<method>.weight`).
    pub fn from_table(weights: Box<[u32]>) -> Self {
        let classes = Classes::new(&weights);
        Self::with_classes(weights, classes)
    }

    /// The weights of a per-provider table with its classes (`None`: too varied).
    fn with_classes(weights: Box<[u32]>, classes: Option<Classes>) -> Self {
        let max = match &classes {
            // Every non-zero weight is a class: the largest is the last one.
            Some(c) => c.weights.last().map_or(0, |&w| w as u32),
            None => weights.iter().copied().max().unwrap_or(0),
        };
        let sum = weights.iter().map(|&w| u64::from(w)).sum();
        let len = u32::try_from(weights.len()).unwrap_or(0);
        let threshold = if len == 0 {
            0
        } else {
            len.wrapping_neg() % len
        };
        let sampling =
            max > 0 && len >= 2 && (len as u128) * u128::from(max) <= SKEW * u128::from(sum);
        Weights {
            weights,
            classes,
            max,
            sum,
            threshold,
            sampling,
        }
    }

    /// The number of providers.
    pub fn len(&self) -> usize {
        self.weights.len()
    }

    /// True when there is no provider.
    pub fn is_empty(&self) -> bool {
        self.weights.is_empty()
    }

    /// The weight of provider `i` (0 past the end).
    #[inline]
    pub fn get(&self, i: usize) -> u32 {
        self.weights.get(i).copied().unwrap_or(0)
    }

    /// Every provider's weight, by index.
    pub fn table(&self) -> &[u32] {
        &self.weights
    }

    /// The largest weight of any provider (0 when every weight is zero).
    pub fn max(&self) -> u32 {
        self.max
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
