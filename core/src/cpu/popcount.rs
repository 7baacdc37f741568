//! Population counts over bitset words, with the CPU's `POPCNT` instruction when it has one.
//!
//! Counting members is what the per-call path does most after the routers' ANDs: the
//! balancer's exact weighted pick sums `weight × popcount(candidates & class)` over every
//! word, its sampling stage counts members by blocks of words, `p2c` and the uniform pick
//! find the n-th member. On the default `x86_64` target Rust
//! compiles `u64::count_ones` without the `POPCNT` instruction (the baseline x86-64 has
//! none): a 12-instruction bit trick per word. Building with `-C target-cpu=x86-64-v2`
//! fixes it, but users build with defaults. So these kernels are compiled twice and
//! dispatched at run time as the parent module describes (`core/src/cpu.rs`, the one place
//! that allows `unsafe`).

kernels! {
    "popcnt", with_popcnt;

    /// The number of set bits in `words`.
    fn count(words: &[u64]) -> usize {
        words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// The number of set bits in every `step`-th word of `words` (words `0, step, 2 step,
    /// …`): a density estimate from a few words.
    fn count_strided(words: &[u64], step: usize) -> usize {
        if step == 0 {
            return 0;
        }
        words.iter().step_by(step).map(|w| w.count_ones() as usize).sum()
    }

    /// The number of set bits in `a AND b` (over the shorter of the two).
    fn count_and(a: &[u64], b: &[u64]) -> usize {
        a.iter().zip(b).map(|(a, b)| (a & b).count_ones() as usize).sum()
    }

    /// The position of the `n`-th set bit (0-based) of `words`.
    fn nth(words: &[u64], n: usize) -> Option<usize> {
        let mut n = n;
        for (w, &word) in words.iter().enumerate() {
            let ones = word.count_ones() as usize;
            if n < ones {
                let mut word = word;
                for _ in 0..n {
                    word &= word - 1;
                }
                return Some(w * 64 + word.trailing_zeros() as usize);
            }
            n -= ones;
        }
        None
    }

    /// Member counts by blocks of words: `sums[b]` becomes the number of set bits in words
    /// `b × block .. (b + 1) × block`; the total is returned. Only `sums.len()` blocks are
    /// counted, so `sums` needs `words.len().div_ceil(block)` entries to cover every word.
    fn count_blocks(words: &[u64], block: usize, sums: &mut [u64]) -> u64 {
        if block == 0 {
            return 0;
        }
        let mut total = 0u64;
        let mut start = 0;
        for sum in sums.iter_mut() {
            if start >= words.len() {
                break;
            }
            let end = (start + block).min(words.len());
            let s = super::count_run(&words[start..end]);
            start = end;
            *sum = s;
            total += s;
        }
        total
    }

    /// Weighted member counts by blocks of words, for a weighted pick over weight classes.
    ///
    /// `masks` holds `k = weights.len()` class masks per word, interleaved (`masks[w * k + j]`
    /// is word `w` of class `j`). For each block of `block` words of `candidates`, `sums[b]`
    /// becomes `Σ_words Σ_j weights[j] × popcount(candidate word & class word)`; the total is
    /// returned. `sums` needs `candidates.len().div_ceil(block)` entries (extra blocks are
    /// left alone).
    fn weighted_blocks(
        candidates: &[u64],
        masks: &[u64],
        weights: &[u64],
        block: usize,
        sums: &mut [u64]
    ) -> u64 {
        match weights.len() {
            _ if block == 0 => 0,
            0 => 0,
            1 => super::blocks_k::<1>(candidates, masks, weights, block, sums),
            2 => super::blocks_k::<2>(candidates, masks, weights, block, sums),
            3 => super::blocks_k::<3>(candidates, masks, weights, block, sums),
            4 => super::blocks_k::<4>(candidates, masks, weights, block, sums),
            5 => super::blocks_k::<5>(candidates, masks, weights, block, sums),
            6 => super::blocks_k::<6>(candidates, masks, weights, block, sums),
            7 => super::blocks_k::<7>(candidates, masks, weights, block, sums),
            _ => super::blocks_k::<8>(candidates, masks, weights, block, sums),
        }
    }

    /// The word of `candidates` holding the weighted point `offset` (as in
    /// [`weighted_blocks`]; `masks` starts at the same word as `candidates`), and the offset
    /// left inside that word; `None` when `offset` is past the words' total weight.
    fn find_word(
        candidates: &[u64],
        masks: &[u64],
        weights: &[u64],
        offset: u64
    ) -> Option<(usize, u64)> {
        let k = weights.len();
        if k == 0 {
            return None;
        }
        let mut offset = offset;
        for (w, (&x, m)) in candidates.iter().zip(masks.chunks_exact(k)).enumerate() {
            if x == 0 {
                continue;
            }
            let t = super::word_weight(x, m, weights);
            if offset < t {
                return Some((w, offset));
            }
            offset -= t;
        }
        None
    }
}

/// [`weighted_blocks`] for `K` classes (`weights.len() == K`, at most 8): the class loop
/// unrolled, one pass over the words.
#[inline(always)]
fn blocks_k<const K: usize>(
    candidates: &[u64],
    masks: &[u64],
    weights: &[u64],
    block: usize,
    sums: &mut [u64],
) -> u64 {
    let Ok(weights) = <[u64; K]>::try_from(&weights[..K.min(weights.len())]) else {
        return 0;
    };
    let n = candidates.len().min(masks.len() / K);
    let (candidates, masks) = (&candidates[..n], &masks[..n * K]);
    let mut total = 0u64;
    let mut w = 0;
    for sum in sums.iter_mut() {
        if w >= n {
            break;
        }
        let end = (w + block).min(n);
        let mut s = 0u64;
        for (&x, m) in candidates[w..end]
            .iter()
            .zip(masks[w * K..end * K].chunks_exact(K))
        {
            for j in 0..K {
                s += weights[j] * u64::from((x & m[j]).count_ones());
            }
        }
        w = end;
        *sum = s;
        total += s;
    }
    total
}

/// The set bits of a run of words.
#[inline(always)]
fn count_run(words: &[u64]) -> u64 {
    words.iter().map(|w| u64::from(w.count_ones())).sum()
}

/// `Σ weights[j] × popcount(x & masks[j])`: the weight of one candidate word.
#[inline(always)]
fn word_weight(x: u64, masks: &[u64], weights: &[u64]) -> u64 {
    masks
        .iter()
        .zip(weights)
        .map(|(m, w)| w * u64::from((x & m).count_ones()))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn dispatched_kernels_match_the_plain_ones(
            a in proptest::collection::vec(any::<u64>(), 0..40),
            b in proptest::collection::vec(any::<u64>(), 0..40),
            n in 0usize..3000,
            block in 1usize..6,
            offset in any::<u64>(),
        ) {
            prop_assert_eq!(count(&a), plain::count(&a));
            prop_assert_eq!(count(&a), a.iter().map(|w| w.count_ones() as usize).sum::<usize>());
            prop_assert_eq!(count_and(&a, &b), plain::count_and(&a, &b));
            prop_assert_eq!(
                count_strided(&a, block),
                a.iter().step_by(block).map(|w| w.count_ones() as usize).sum::<usize>()
            );
            prop_assert_eq!(nth(&a, n), plain::nth(&a, n));
            let mut counts = vec![0u64; a.len().div_ceil(block)];
            let mut plain_counts = counts.clone();
            prop_assert_eq!(count_blocks(&a, block, &mut counts), count(&a) as u64);
            prop_assert_eq!(plain::count_blocks(&a, block, &mut plain_counts), count(&a) as u64);
            prop_assert_eq!(&counts, &plain_counts);
            for (b, c) in counts.iter().enumerate() {
                let end = ((b + 1) * block).min(a.len());
                prop_assert_eq!(*c, count(&a[b * block..end]) as u64);
            }
            // Three classes: masks derived from `b`, disjoint.
            let weights = [50u64, 100, 200];
            let masks: Vec<u64> = a
                .iter()
                .enumerate()
                .flat_map(|(w, _)| {
                    let m = b.get(w).copied().unwrap_or(0);
                    [m & 0x5555_5555_5555_5555, m & 0xaaaa_aaaa_aaaa_aaaa, !m]
                })
                .collect();
            let mut sums = vec![0u64; a.len().div_ceil(block)];
            let mut plain_sums = sums.clone();
            let total = weighted_blocks(&a, &masks, &weights, block, &mut sums);
            let plain_total = plain::weighted_blocks(&a, &masks, &weights, block, &mut plain_sums);
            prop_assert_eq!(total, plain_total);
            prop_assert_eq!(&sums, &plain_sums);
            prop_assert_eq!(sums.iter().sum::<u64>(), total);
            let by_bits: u64 = a
                .iter()
                .enumerate()
                .flat_map(|(w, &x)| (0..64).filter(move |i| x >> i & 1 == 1).map(move |i| (w, i)))
                .map(|(w, i)| {
                    (0..3).filter(|&j| masks[w * 3 + j] >> i & 1 == 1).map(|j| weights[j]).sum::<u64>()
                })
                .sum();
            prop_assert_eq!(total, by_bits);
            let off = if total > 0 { offset % total } else { offset };
            prop_assert_eq!(
                find_word(&a, &masks, &weights, off),
                plain::find_word(&a, &masks, &weights, off)
            );
            prop_assert_eq!(find_word(&a, &masks, &weights, off).is_some(), off < total);
        }
    }
}
