//! The routers' word passes over bitsets (AND, AND NOT, and the early-exit "is anything
//! left" scans), with the CPU's AVX2 when it has one.
//!
//! After the routers' prepared sets, what a call costs is these passes: each router ANDs the
//! candidates with one or two prepared sets, and scans whether a set has a candidate before
//! it narrows. The default `x86_64` target compiles them with SSE2 (two words per
//! instruction, about 2.75 instructions per word for an AND); AVX2 (every x86-64 CPU since
//! 2013–2015) works four words per instruction and takes unaligned memory operands, so a
//! pass costs about a third of the instructions. As with [`crate::popcount`], each kernel is
//! compiled twice and dispatched at run time as the parent module describes
//! (`core/src/cpu.rs`, the one place that allows `unsafe`).
//!
//! Every kernel works on the first `n` words, `n` the shortest operand's length (callers pass
//! operands of one length; [`crate::BitSet::and_mask`] checks it).

kernels! {
    "avx2", with_avx2;

    /// `c &= a`.
    fn and(c: &mut [u64], a: &[u64]) -> () {
        let n = c.len().min(a.len());
        for (c, a) in c[..n].iter_mut().zip(&a[..n]) {
            *c &= a;
        }
    }

    /// `c |= a`.
    fn or(c: &mut [u64], a: &[u64]) -> () {
        let n = c.len().min(a.len());
        for (c, a) in c[..n].iter_mut().zip(&a[..n]) {
            *c |= a;
        }
    }

    /// `c &= !x`.
    fn and_not(c: &mut [u64], x: &[u64]) -> () {
        let n = c.len().min(x.len());
        for (c, x) in c[..n].iter_mut().zip(&x[..n]) {
            *c &= !x;
        }
    }

    /// `c &= a & !x`.
    fn and_and_not(c: &mut [u64], a: &[u64], x: &[u64]) -> () {
        let n = c.len().min(a.len()).min(x.len());
        for (c, (a, x)) in c[..n].iter_mut().zip(a[..n].iter().zip(&x[..n])) {
            *c &= a & !x;
        }
    }

    /// `c &= a & b`.
    fn and_and(c: &mut [u64], a: &[u64], b: &[u64]) -> () {
        let n = c.len().min(a.len()).min(b.len());
        for (c, (a, b)) in c[..n].iter_mut().zip(a[..n].iter().zip(&b[..n])) {
            *c &= a & b;
        }
    }

    /// `c &= a & b & !x`.
    fn and_and_and_not(c: &mut [u64], a: &[u64], b: &[u64], x: &[u64]) -> () {
        let n = c.len().min(a.len()).min(b.len()).min(x.len());
        for (c, ((a, b), x)) in c[..n].iter_mut().zip(a[..n].iter().zip(&b[..n]).zip(&x[..n])) {
            *c &= a & b & !x;
        }
    }

    /// `c &= a`, and whether `c` has a bit left (one pass).
    fn and_any(c: &mut [u64], a: &[u64]) -> bool {
        let n = c.len().min(a.len());
        let mut acc = 0u64;
        for (c, a) in c[..n].iter_mut().zip(&a[..n]) {
            *c &= a;
            acc |= *c;
        }
        acc != 0
    }

    /// Whether `c` has a bit set (stops early).
    fn any(c: &[u64]) -> bool {
        super::any_word(c.len(), |i| c[i])
    }

    /// Whether `c & a` has a bit set (stops early).
    fn any_and(c: &[u64], a: &[u64]) -> bool {
        let n = c.len().min(a.len());
        let (c, a) = (&c[..n], &a[..n]);
        super::any_word(n, |i| c[i] & a[i])
    }

    /// Whether `c & !x` has a bit set (stops early).
    fn any_and_not(c: &[u64], x: &[u64]) -> bool {
        let n = c.len().min(x.len());
        let (c, x) = (&c[..n], &x[..n]);
        super::any_word(n, |i| c[i] & !x[i])
    }

    /// Whether `c & a & !x` has a bit set (stops early).
    fn any_and_and_not(c: &[u64], a: &[u64], x: &[u64]) -> bool {
        let n = c.len().min(a.len()).min(x.len());
        let (c, a, x) = (&c[..n], &a[..n], &x[..n]);
        super::any_word(n, |i| c[i] & a[i] & !x[i])
    }

    /// Whether `c & a & b` has a bit set (stops early).
    fn any_and_and(c: &[u64], a: &[u64], b: &[u64]) -> bool {
        let n = c.len().min(a.len()).min(b.len());
        let (c, a, b) = (&c[..n], &a[..n], &b[..n]);
        super::any_word(n, |i| c[i] & a[i] & b[i])
    }

    /// Whether `c & a & b & !x` has a bit set (stops early).
    fn any_and_and_and_not(c: &[u64], a: &[u64], b: &[u64], x: &[u64]) -> bool {
        let n = c.len().min(a.len()).min(b.len()).min(x.len());
        let (c, a, b, x) = (&c[..n], &a[..n], &b[..n], &x[..n]);
        super::any_word(n, |i| c[i] & a[i] & b[i] & !x[i])
    }
}

/// True when `word(i)` is non-zero for some `i < n`: the first eight words one by one (a
/// dense set answers at its first word), then eight words OR-ed per test, so a long scan
/// branches once per eight words (and vectorizes) yet still stops early.
#[inline(always)]
fn any_word(n: usize, word: impl Fn(usize) -> u64) -> bool {
    const BLOCK: usize = 8;
    if (0..n.min(BLOCK)).any(|i| word(i) != 0) {
        return true;
    }
    // (`i + BLOCK <= n` as the loop condition lets the compiler drop the bounds checks.)
    let mut i = BLOCK;
    while i + BLOCK <= n {
        let mut acc = 0;
        for j in 0..BLOCK {
            acc |= word(i + j);
        }
        if acc != 0 {
            return true;
        }
        i += BLOCK;
    }
    (i..n).any(|i| word(i) != 0)
}

#[cfg(test)]
mod tests {
    use super as k;
    use super::plain;
    use proptest::prelude::*;

    fn bits(words: &[u64]) -> Vec<bool> {
        (0..words.len() * 64)
            .map(|i| words[i / 64] >> (i % 64) & 1 == 1)
            .collect()
    }

    proptest! {
        #[test]
        fn dispatched_kernels_match_the_plain_ones_and_the_bits(
            words in proptest::collection::vec(
                (any::<u64>(), any::<u64>(), any::<u64>(), any::<u64>(), 0u8..4),
                0..70,
            ),
        ) {
            // Sparse operands too (a word kept only in one of four cases), so the scans
            // also run to the end and find a member late.
            let pick = |w: u64, k: u8, keep: u8| if k == keep { w } else { 0 };
            let c: Vec<u64> = words.iter().map(|t| t.0).collect();
            let a: Vec<u64> = words.iter().map(|t| t.1 | pick(!0, t.4, 0)).collect();
            let b: Vec<u64> = words.iter().map(|t| pick(t.2, t.4, 1) | pick(!0, t.4, 0)).collect();
            let x: Vec<u64> = words.iter().map(|t| t.3 & !pick(!0, t.4, 0)).collect();
            let sparse: Vec<u64> = words.iter().map(|t| pick(t.0, t.4, 2)).collect();
            let (cb, ab, bb, xb) = (bits(&c), bits(&a), bits(&b), bits(&x));
            let model = |f: &dyn Fn(usize) -> bool| -> Vec<bool> { (0..cb.len()).map(f).collect() };
            let run = |f: &dyn Fn(&mut [u64])| { let mut v = c.clone(); f(&mut v); bits(&v) };

            prop_assert_eq!(run(&|v| k::and(v, &a)), model(&|i| cb[i] && ab[i]));
            prop_assert_eq!(run(&|v| plain::and(v, &a)), model(&|i| cb[i] && ab[i]));
            prop_assert_eq!(run(&|v| k::or(v, &a)), model(&|i| cb[i] || ab[i]));
            prop_assert_eq!(run(&|v| k::and_not(v, &x)), model(&|i| cb[i] && !xb[i]));
            prop_assert_eq!(run(&|v| k::and_and_not(v, &a, &x)), model(&|i| cb[i] && ab[i] && !xb[i]));
            prop_assert_eq!(run(&|v| k::and_and(v, &a, &b)), model(&|i| cb[i] && ab[i] && bb[i]));
            prop_assert_eq!(
                run(&|v| k::and_and_and_not(v, &a, &b, &x)),
                model(&|i| cb[i] && ab[i] && bb[i] && !xb[i])
            );
            let mut v = c.clone();
            let left = k::and_any(&mut v, &b);
            prop_assert_eq!(bits(&v), model(&|i| cb[i] && bb[i]));
            prop_assert_eq!(left, (0..cb.len()).any(|i| cb[i] && bb[i]));

            for set in [&c, &sparse] {
                let sb = bits(set);
                let some = |f: &dyn Fn(usize) -> bool| (0..sb.len()).any(f);
                prop_assert_eq!(k::any(set), some(&|i| sb[i]));
                prop_assert_eq!(plain::any(set), some(&|i| sb[i]));
                prop_assert_eq!(k::any_and(set, &b), some(&|i| sb[i] && bb[i]));
                prop_assert_eq!(k::any_and_not(set, &x), some(&|i| sb[i] && !xb[i]));
                prop_assert_eq!(k::any_and_and_not(set, &b, &x), some(&|i| sb[i] && bb[i] && !xb[i]));
                prop_assert_eq!(k::any_and_and(set, &a, &b), some(&|i| sb[i] && ab[i] && bb[i]));
                prop_assert_eq!(
                    k::any_and_and_and_not(set, &a, &b, &x),
                    some(&|i| sb[i] && ab[i] && bb[i] && !xb[i])
                );
            }
        }
    }

    #[test]
    fn a_single_bit_anywhere_is_found() {
        for len in [1, 7, 8, 9, 16, 17, 63, 64, 65, 200] {
            for at in 0..len {
                let mut v = vec![0u64; len];
                v[at] = 1 << (at % 64);
                assert!(k::any(&v), "{len} {at}");
                assert!(k::any_and(&v, &vec![!0; len]), "{len} {at}");
                let mut c = vec![!0u64; len];
                assert!(k::and_any(&mut c, &v));
                assert_eq!(c, v);
            }
            assert!(!k::any(&vec![0; len]));
        }
    }
}
