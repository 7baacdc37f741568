//! The choice `leastactive` and `shortestresponse` share, as Dubbo's two classes do: the
//! candidates with the least key; one → it; several → weighted random among them by
//! their weights at `now` (uniform when their weights are equal or zero). Two passes over
//! the candidates, no list.

use routechain_core::{Candidates, RandomSource};

use super::Shared;

/// The candidate with the least `key` (ties weighted random), and how many candidates
/// there were. `None` without candidates.
pub(super) fn least_by<K: Ord + Copy>(
    shared: &Shared,
    candidates: &Candidates,
    rng: &mut dyn RandomSource,
    now: i64,
    key: impl Fn(usize) -> K,
) -> (Option<usize>, u32) {
    let mut seen = 0u32;
    let mut least: Option<K> = None;
    let mut count = 0u64;
    let mut total_weight = 0u64;
    let mut first_weight = 0u64;
    let mut same_weight = true;
    let mut first = None;
    for i in candidates {
        seen += 1;
        let k = key(i);
        let w = u64::from(shared.weight(i, now));
        if least.is_none_or(|l| k < l) {
            least = Some(k);
            count = 1;
            first = Some(i);
            total_weight = w;
            first_weight = w;
            same_weight = true;
        } else if least == Some(k) {
            count += 1;
            total_weight += w;
            if w != first_weight {
                same_weight = false;
            }
        }
    }
    let (Some(first), Some(least)) = (first, least) else {
        return (None, seen);
    };
    if count == 1 {
        return (Some(first), seen);
    }
    if !same_weight && total_weight > 0 {
        let mut offset = rng.below(total_weight);
        for i in candidates {
            if key(i) == least {
                let w = u64::from(shared.weight(i, now));
                if offset < w {
                    return (Some(i), seen);
                }
                offset -= w;
            }
        }
    } else {
        let mut k = rng.below(count);
        for i in candidates {
            if key(i) == least {
                if k == 0 {
                    return (Some(i), seen);
                }
                k -= 1;
            }
        }
    }
    // The keys moved between the passes (live counters): the first least candidate seen.
    (Some(first), seen)
}
