//! [`TextKey`]: a provider text (a URL pushed as text, a ZooKeeper node name) known by a
//! keyed 128-bit hash instead of by the text itself.
//!
//! The live chain's text cache and the ZooKeeper source's node cache look up every entry
//! of a pushed list (100,000 URLs of ~330 characters is 33 MB) to find the providers they
//! already parsed. Keyed by the text, they held a copy of every text (~330 bytes per
//! provider, more than the parsed provider itself) and compared each looked-up text with
//! its copy byte for byte. Keyed by a 128-bit hash of the text they hold 16 bytes per
//! provider and compare 16 bytes.
//!
//! # Why a hash is an acceptable key
//!
//! Two different texts with the same key would be taken for the same provider. That is
//! accepted on these grounds:
//!
//! - **The key is keyed.** The hash is xxh3's 128-bit hash (`xxhash-rust`, a well-kept
//!   crate; about 10 GB/s, so hashing is not the cost of an update) under a *secret drawn
//!   at random once per process* (192 bytes, from the standard library's randomly keyed
//!   SipHash). Which texts collide depends on that secret, which never leaves the process,
//!   so nobody writing provider URLs into a registry can choose texts that collide (and
//!   whoever writes those URLs decides where calls go anyway).
//! - **The chance is negligible.** For texts that are not crafted, the keys behave as
//!   random 128-bit values: a list of `n` texts holds two with the same key with
//!   probability about `n² / 2¹²⁹`, about 1.5 × 10⁻²⁷ at 1,000,000 providers; a new text
//!   meets one of 1,000,000 cached keys with probability about 3 × 10⁻³³. At one pushed
//!   list of a million providers per second that is one collision in about 10¹⁹ years.
//! - **What a collision would do.** No crash and no wrong state elsewhere: the text that
//!   collides would be taken for the provider parsed from the other text (that provider
//!   listed twice, the colliding one missing) until the next list in which only one of
//!   the two appears. With a different secret in every process, a restart clears it.
//!
//! A cryptographic hash (SHA-256, a keyed BLAKE3) would remove even that chance, at
//! several times the cost per byte, for no practical gain at these odds.

use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::OnceLock;

/// A provider text known by its keyed 128-bit hash (see the module documentation).
/// Aligned to 8 bytes (two words, not a `u128`), so a cache entry of a key, a pointer and
/// a 32-bit counter takes 32 bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct TextKey([u64; 2]);

impl TextKey {
    /// The key of `text`, under this process's secret.
    pub(crate) fn of(text: &str) -> Self {
        let h = xxhash_rust::xxh3::xxh3_128_with_secret(text.as_bytes(), secret());
        TextKey([h as u64, (h >> 64) as u64])
    }
}

impl Hash for TextKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // Already a keyed hash: one word is as good as any hash of it.
        state.write_u64(self.0[0]);
    }
}

/// The bytes of xxh3's secret (its default size).
const SECRET_LEN: usize = 192;

/// This process's secret: drawn once, at the first key.
fn secret() -> &'static [u8; SECRET_LEN] {
    static SECRET: OnceLock<[u8; SECRET_LEN]> = OnceLock::new();
    SECRET.get_or_init(|| {
        // The standard library's `RandomState` is keyed from the operating system's
        // random source; its SipHash of a counter gives the secret's words.
        let random = std::collections::hash_map::RandomState::new();
        let mut secret = [0u8; SECRET_LEN];
        for (i, word) in secret.chunks_exact_mut(8).enumerate() {
            word.copy_from_slice(&random.hash_one(i as u64).to_le_bytes());
        }
        secret
    })
}

/// The hasher of maps keyed by [`TextKey`]: it passes the key's first word through.
/// Hand-written (a few lines) because hashing a hash again would only cost time.
#[derive(Default, Clone, Copy)]
pub(crate) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `TextKey`s are hashed with it (through `write_u64`); anything else still
        // spreads, folded 8 bytes at a time.
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(word))
                .wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// Builds [`KeyHasher`]s.
#[derive(Default, Clone, Copy)]
pub(crate) struct BuildKeyHasher;

impl BuildHasher for BuildKeyHasher {
    type Hasher = KeyHasher;

    fn build_hasher(&self) -> KeyHasher {
        KeyHasher::default()
    }
}

/// A map keyed by [`TextKey`].
pub(crate) type KeyMap<V> = std::collections::HashMap<TextKey, V, BuildKeyHasher>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_texts_have_equal_keys_and_different_texts_different_ones() {
        let a = TextKey::of("dubbo://10.0.0.1:20880/svc?application=shop");
        assert_eq!(
            a,
            TextKey::of("dubbo://10.0.0.1:20880/svc?application=shop")
        );
        assert_ne!(
            a,
            TextKey::of("dubbo://10.0.0.1:20880/svc?application=shoq")
        );
        // Long texts (xxh3's long-input path, as provider URLs are) and one byte apart.
        let long = format!("dubbo://10.0.0.1:20880/svc?{}", "k=v&".repeat(100));
        let mut other = long.clone();
        other.push('x');
        assert_ne!(TextKey::of(&long), TextKey::of(&other));
        assert_eq!(TextKey::of(&long), TextKey::of(&long.clone()));
    }

    #[test]
    fn the_secret_is_drawn_at_random() {
        // Not xxh3's default secret (whose hashes anyone can compute), not all one value.
        let text = "dubbo://10.0.0.1:20880/svc?application=shop";
        let h = xxhash_rust::xxh3::xxh3_128(text.as_bytes());
        assert_ne!(TextKey::of(text), TextKey([h as u64, (h >> 64) as u64]));
        let s = secret();
        assert!(s.iter().any(|&b| b != s[0]));
    }
}
