//! The process-wide string interner of provider URLs: parameter keys, and the values that
//! repeat across providers, stored once per process and named by a 32-bit id.
//!
//! A snapshot of a million providers holds a few hundred distinct keys and values (`side`,
//! `application`, `version=1.0.0`, the service name...) a million times each; each
//! [`Url`](crate::Url) names them by id (3 bytes) instead of holding their text. The table is
//! shared by every snapshot and every service of the process, and append-only: an id, once
//! given, names the same string for the life of the process.
//!
//! - **Reads are lock-free.** An id resolves through a fixed array of chunks (each a
//!   [`OnceLock`], chunk `c` holding `1024 << c` entries) to a `&'static str`: two atomic
//!   loads, no lock, no allocation — what a routed call does when it reads a parameter.
//! - **Look-ups are lock-free.** Finding the id of a text (while parsing a URL) probes an
//!   open-addressing table of atomic slots (hash tag + id) published behind an `ArcSwap`.
//! - **Inserts take a mutex**, only when a string is new to the process: at snapshot build
//!   time, never per call. The table is rebuilt twice as large (and swapped in) when half
//!   full; a reader of the old table that misses takes the mutex and looks again.
//!
//! **What is interned.** Every key (they are few). A value is interned only while its key
//! has had fewer than [`VALUES_PER_KEY`] distinct values interned: values that repeat across
//! providers (`region`, `version`, `methods`, the service name) stay far below that; values
//! unique to a provider (`timestamp`, `pid`, an address) pass it after a few thousand
//! providers, and from then on every value of that key is stored in the URL itself, without
//! a look-up (the ids given before still resolve). Fallback: past [`MAX_STRINGS`]
//! strings or [`MAX_BYTES`] bytes of text nothing new is interned and every new string is
//! stored in its URL, so hostile input (a new key per provider) cannot grow the table
//! without bound. The hash is `ahash` keyed from the standard library's per-process random
//! keys, so colliding texts cannot be chosen in advance.
//!
//! **Why by hand.** The interner crates of the field (`lasso`, `string-interner`) resolve
//! through a lock or a `&mut`/single-threaded handle (`lasso`'s `ThreadedRodeo` resolves
//! through a sharded concurrent map, taking a shard's read lock per resolve), and none caps the
//! growth per key: a routed call resolves ids lock-free on every thread, and registry values
//! unique to each provider must stop being interned. Both needs together are this module's ~300
//! lines.

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, OnceLock};

use arc_swap::ArcSwap;

/// A key stops interning new values once it has had this many distinct values interned.
pub(crate) const VALUES_PER_KEY: u32 = 4096;
/// The most strings the process interns; past it every new string stays in its URL.
pub(crate) const MAX_STRINGS: u32 = 1 << 20;
/// The most bytes of text the process interns; past it every new string stays in its URL.
pub(crate) const MAX_BYTES: usize = 64 << 20;

/// log2 of the first chunk's size.
const BASE_BITS: u32 = 10;
/// Number of chunks: `1024 · (2^CHUNKS − 1)` ids, more than [`MAX_STRINGS`].
const CHUNKS: usize = 12;

/// One interned string.
struct Entry {
    text: &'static str,
    /// Distinct values interned for this string as a key.
    values: AtomicU32,
}

/// id → entry: chunk `c` holds ids `1024·(2^c − 1) ..`, `1024 << c` of them.
static CHUNK_TABLE: [OnceLock<Box<[OnceLock<Entry>]>>; CHUNKS] =
    [const { OnceLock::new() }; CHUNKS];

/// The look-up table: a slot is 0 (empty) or `hash tag << 32 | (id + 1)`.
struct Index {
    slots: Box<[AtomicU64]>,
}

struct Writer {
    /// Strings interned so far (the next id).
    len: u32,
    /// Bytes of interned text.
    text_bytes: usize,
    /// Entries in the published index.
    indexed: usize,
}

struct Interner {
    hasher: ahash::RandomState,
    index: ArcSwap<Index>,
    writer: Mutex<Writer>,
}

static INTERNER: LazyLock<Interner> = LazyLock::new(|| {
    // Per-process random keys, from the standard library's randomly keyed SipHash.
    let std_keys = std::collections::hash_map::RandomState::new();
    let seed = |i: u64| std_keys.hash_one(i);
    Interner {
        hasher: ahash::RandomState::with_seeds(seed(0), seed(1), seed(2), seed(3)),
        index: ArcSwap::from_pointee(Index::with_capacity(4096)),
        writer: Mutex::new(Writer {
            len: 0,
            text_bytes: 0,
            indexed: 0,
        }),
    }
});

impl Index {
    fn with_capacity(capacity: usize) -> Self {
        Index {
            slots: (0..capacity).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// The id of `text` (hashed to `hash`), if this table has it.
    fn find(&self, hash: u64, text: &str) -> Option<u32> {
        let mask = self.slots.len() - 1;
        let tag = hash >> 32;
        let mut i = hash as usize & mask;
        loop {
            let slot = self.slots[i].load(Ordering::Acquire);
            if slot == 0 {
                return None;
            }
            if slot >> 32 == tag {
                let id = (slot as u32).wrapping_sub(1);
                if resolve(id) == text {
                    return Some(id);
                }
            }
            i = (i + 1) & mask;
        }
    }

    /// Stores `id` (whose text hashes to `hash`) in the first empty slot.
    fn put(&self, hash: u64, id: u32) {
        let mask = self.slots.len() - 1;
        let mut i = hash as usize & mask;
        while self.slots[i].load(Ordering::Relaxed) != 0 {
            i = (i + 1) & mask;
        }
        self.slots[i].store((hash >> 32) << 32 | u64::from(id + 1), Ordering::Release);
    }
}

/// The chunk and position of `id`.
fn locate(id: u32) -> (usize, usize) {
    let x = id as usize + (1 << BASE_BITS);
    let chunk = (usize::BITS - 1 - x.leading_zeros() - BASE_BITS) as usize;
    (chunk, x - (1 << (chunk as u32 + BASE_BITS)))
}

fn entry(id: u32) -> Option<&'static Entry> {
    let (chunk, at) = locate(id);
    CHUNK_TABLE.get(chunk)?.get()?.get(at)?.get()
}

/// The text of an interned id: lock-free and allocation-free (an id this module did not
/// give resolves to `""`).
pub(crate) fn resolve(id: u32) -> &'static str {
    entry(id).map_or("", |e| e.text)
}

impl Interner {
    fn hash(&self, text: &str) -> u64 {
        self.hasher.hash_one(text)
    }

    /// Interns `text` (as a value of `key` when given), or `None` when a limit says it stays
    /// in its URL.
    fn insert(&self, text: &str, key: Option<u32>) -> Option<u32> {
        let hash = self.hash(text);
        // A poisoned lock only means another thread panicked mid-insert; the table is
        // consistent at every step (an id is published after its entry).
        let mut w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let index = self.index.load();
        if let Some(id) = index.find(hash, text) {
            return Some(id);
        }
        let key_entry = match key {
            Some(k) => {
                let e = entry(k)?;
                if e.values.load(Ordering::Relaxed) >= VALUES_PER_KEY {
                    return None;
                }
                Some(e)
            }
            None => None,
        };
        if w.len >= MAX_STRINGS || w.text_bytes + text.len() > MAX_BYTES {
            return None;
        }
        let id = w.len;
        let (chunk, at) = locate(id);
        let slots = CHUNK_TABLE[chunk].get_or_init(|| {
            (0..1usize << (chunk as u32 + BASE_BITS))
                .map(|_| OnceLock::new())
                .collect()
        });
        let text: &'static str = Box::leak(text.to_owned().into_boxed_str());
        let _ = slots[at].set(Entry {
            text,
            values: AtomicU32::new(0),
        });
        w.len += 1;
        w.text_bytes += text.len();
        if let Some(e) = key_entry {
            e.values.fetch_add(1, Ordering::Relaxed);
        }
        if (w.indexed + 1) * 2 > index.slots.len() {
            // Twice as large, every id re-placed, then published whole.
            let bigger = Index::with_capacity(index.slots.len() * 2);
            for old in 0..id {
                bigger.put(self.hash(resolve(old)), old);
            }
            bigger.put(hash, id);
            self.index.store(Arc::new(bigger));
        } else {
            index.put(hash, id);
        }
        w.indexed += 1;
        Some(id)
    }
}

/// A view of the look-up table, loaded once and used for every string of one URL.
pub(crate) struct Lookup {
    index: arc_swap::Guard<Arc<Index>>,
}

impl Lookup {
    /// The current table.
    pub(crate) fn new() -> Self {
        Lookup {
            index: INTERNER.index.load(),
        }
    }

    /// The id of a key, interning it when new (`None`: past the limits, keep it inline).
    pub(crate) fn key(&self, text: &str) -> Option<u32> {
        let hash = INTERNER.hash(text);
        self.index
            .find(hash, text)
            .or_else(|| INTERNER.insert(text, None))
    }

    /// The id of a value of the interned key `key`, interning it when new, while the key has
    /// had fewer than [`VALUES_PER_KEY`] distinct values (`None`: keep it inline; past the
    /// limit every value of the key is kept inline, without a look-up).
    pub(crate) fn value(&self, key: u32, text: &str) -> Option<u32> {
        // A key whose values are unique per provider (`timestamp`) is not even looked up.
        if entry(key)?.values.load(Ordering::Relaxed) >= VALUES_PER_KEY {
            return None;
        }
        let hash = INTERNER.hash(text);
        self.index
            .find(hash, text)
            .or_else(|| INTERNER.insert(text, Some(key)))
    }
}

/// The id of `text` when it is interned, without interning it: lock-free, except that a
/// miss looks again under the insert mutex (a table being replaced may lack a new id).
pub(crate) fn find(text: &str) -> Option<u32> {
    let hash = INTERNER.hash(text);
    if let Some(id) = INTERNER.index.load().find(hash, text) {
        return Some(id);
    }
    let _w = INTERNER.writer.lock().unwrap_or_else(|e| e.into_inner());
    INTERNER.index.load().find(hash, text)
}

/// Number of strings interned in this process.
pub(crate) fn len() -> usize {
    INTERNER.writer.lock().map_or(0, |w| w.len as usize)
}

/// Heap bytes held by the interner: the interned text, the id chunks and the look-up table.
/// Shared by every snapshot of the process; not part of any one
/// [`Snapshot::memory_bytes`](crate::Snapshot::memory_bytes).
pub(crate) fn heap_bytes() -> usize {
    let Ok(w) = INTERNER.writer.lock() else {
        return 0;
    };
    let chunks: usize = CHUNK_TABLE
        .iter()
        .filter_map(OnceLock::get)
        .map(|c| c.len() * std::mem::size_of::<OnceLock<Entry>>())
        .sum();
    let index = INTERNER.index.load().slots.len() * std::mem::size_of::<AtomicU64>();
    w.text_bytes + chunks + index
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_stable_and_resolve_to_their_text() {
        let l = Lookup::new();
        let a = l.key("intern-test-key").unwrap();
        assert_eq!(l.key("intern-test-key"), Some(a));
        assert_eq!(resolve(a), "intern-test-key");
        let v = l.value(a, "intern-test-value").unwrap();
        assert_eq!(Lookup::new().value(a, "intern-test-value"), Some(v));
        assert_eq!(resolve(v), "intern-test-value");
        assert_eq!(resolve(u32::MAX - 1), "");
    }

    #[test]
    fn a_key_with_too_many_distinct_values_keeps_new_ones_inline() {
        let l = Lookup::new();
        let k = l.key("intern-test-unique").unwrap();
        let mut interned = 0;
        for i in 0..VALUES_PER_KEY + 100 {
            if Lookup::new().value(k, &format!("u{i}")).is_some() {
                interned += 1;
            }
        }
        assert_eq!(interned, VALUES_PER_KEY);
        // Past the limit every value of the key stays inline; the ids given still resolve.
        assert_eq!(l.value(k, "u0"), None);
        assert_eq!(resolve(l.key("u0").unwrap()), "u0");
    }

    #[test]
    fn locate_covers_every_id_once() {
        assert_eq!(locate(0), (0, 0));
        assert_eq!(locate(1023), (0, 1023));
        assert_eq!(locate(1024), (1, 0));
        assert_eq!(locate(3071), (1, 2047));
        assert_eq!(locate(3072), (2, 0));
        assert!(locate(MAX_STRINGS).0 < CHUNKS);
    }

    #[test]
    fn concurrent_inserts_agree_on_ids() {
        let ids: Vec<Vec<u32>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(|| {
                        (0..3000)
                            .map(|i| Lookup::new().key(&format!("intern-conc-{i}")).unwrap())
                            .collect::<Vec<u32>>()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for other in &ids[1..] {
            assert_eq!(other, &ids[0]);
        }
        for (i, id) in ids[0].iter().enumerate() {
            assert_eq!(resolve(*id), format!("intern-conc-{i}"));
        }
    }
}
