//! Injectable randomness for per-call draws (weighted destinations, route tables, balancers).
//!
//! Routing never reaches for a global RNG: the caller's [`crate::CallState`] owns one, so a
//! test seeds it and asserts exact sequences, and concurrent callers never contend.

/// A source of random 64-bit words.
pub trait RandomSource: Send {
    /// The next random word.
    fn next_u64(&mut self) -> u64;

    /// A uniform integer in `0..n` (`n > 0`), without modulo bias (Lemire's method).
    fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0);
        if n <= 1 {
            return 0;
        }
        let threshold = n.wrapping_neg() % n;
        loop {
            let m = (self.next_u64() as u128) * (n as u128);
            if (m as u64) >= threshold {
                return (m >> 64) as u64;
            }
        }
    }

    /// A uniform float in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// A small, fast, seedable generator (wyrand). Not cryptographic.
#[derive(Debug, Clone)]
pub struct FastRng {
    state: u64,
}

impl FastRng {
    /// A generator with a fixed seed: the same seed gives the same sequence.
    pub fn seeded(seed: u64) -> Self {
        FastRng { state: seed }
    }

    /// A generator seeded from the clock and a stack address (different per thread and call).
    pub(crate) fn from_entropy() -> Self {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        let local = 0u8;
        let addr = &local as *const u8 as u64;
        let mut rng = FastRng::seeded(t ^ addr.rotate_left(32));
        rng.next_u64();
        rng
    }
}

impl RandomSource for FastRng {
    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0xa076_1d64_78bd_642f);
        let t = (self.state as u128).wrapping_mul((self.state ^ 0xe703_7ed1_a0b4_28db) as u128);
        ((t >> 64) ^ t) as u64
    }
}

/// Replays a fixed list of words, cycling: for tests that need exact draws.
#[derive(Debug, Clone)]
pub struct SequenceRng {
    values: Vec<u64>,
    next: usize,
}

impl SequenceRng {
    /// Replays `values` in order, from the start again when exhausted.
    pub fn new(values: Vec<u64>) -> Self {
        assert!(!values.is_empty(), "SequenceRng needs at least one value");
        SequenceRng { values, next: 0 }
    }
}

impl RandomSource for SequenceRng {
    fn next_u64(&mut self) -> u64 {
        let v = self.values[self.next % self.values.len()];
        self.next += 1;
        v
    }
}

/// A stable 64-bit hash of bytes (FNV-1a then a finalizer), the same on every platform and
/// run: used where one caller must always land on the same choice.
pub fn stable_hash(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= *b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    // splitmix64 finalizer to spread the low bits.
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_is_repeatable_and_below_is_in_range() {
        let mut a = FastRng::seeded(7);
        let mut b = FastRng::seeded(7);
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
            assert!(a.below(13) < 13);
            b.below(13);
        }
    }

    #[test]
    fn below_is_uniform_enough() {
        let mut r = FastRng::seeded(1);
        let mut counts = [0u32; 10];
        for _ in 0..100_000 {
            counts[r.below(10) as usize] += 1;
        }
        for c in counts {
            assert!((9_500..10_500).contains(&c), "{counts:?}");
        }
    }

    /// The values are fixed forever (a change would move callers hashed to an IDC): they
    /// were computed by an independent implementation of FNV-1a 64 plus the splitmix64
    /// finalizer (a few lines of Python, not this code).
    #[test]
    fn stable_hash_is_fixed() {
        let cases: [(&[u8], u64); 5] = [
            (b"", 0xf52a_15e9_a9b5_e89b),
            (b"10.0.0.1", 0x7fb1_b600_f0f5_c6d3),
            (b"10.0.0.2", 0x8a40_36ee_4789_2109),
            (b"10.9.0.7", 0xcdc8_36c1_2aa6_3103),
            (b"consumer-host.example", 0x2855_d1c0_1259_4406),
        ];
        for (bytes, want) in cases {
            assert_eq!(
                stable_hash(bytes),
                want,
                "{:?}",
                String::from_utf8_lossy(bytes)
            );
        }
    }
}
