//! The keys a matcher reads from a URL: the derived keys (the one table of them,
//! [`Derived`]) and [`UrlKey`], a key resolved once for reading it from many URLs.

use std::sync::LazyLock;

use super::{Url, store};
use crate::intern::Lookup;

/// The keys derived from the URL's structure rather than its query parameters: the one
/// table of them. `Derived` names its rows; the parts they read (`Url::derived`), and the
/// memo slot and interned id of those stored in a URL's block (protocol, path, address;
/// see `store.rs`) all follow from it.
///
/// `port` is present only when the port is greater than zero; `address` is `host:port`, or
/// `host` alone when there is no port.
pub const DERIVED_KEYS: [&str; 5] = ["protocol", "host", "port", "path", "address"];

/// A derived key: the row `Derived::X as usize` of [`DERIVED_KEYS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Derived {
    Protocol,
    Host,
    Port,
    Path,
    Address,
}

impl Derived {
    /// Every derived key, in the rows' order.
    pub(crate) const ALL: [Derived; 5] = [
        Derived::Protocol,
        Derived::Host,
        Derived::Port,
        Derived::Path,
        Derived::Address,
    ];

    /// The key's name, as [`Url::get`] takes it.
    pub(crate) fn name(self) -> &'static str {
        DERIVED_KEYS[self as usize]
    }

    /// The derived key named `key`, if it is one.
    #[inline]
    pub(crate) fn of(key: &str) -> Option<Derived> {
        Derived::ALL.into_iter().find(|d| d.name() == key)
    }

    /// The interned id of the key's name, under which the values of the key are interned
    /// (`u32::MAX`, an inline reference, when the interner was full before: the values are
    /// then stored inline).
    #[inline]
    pub(super) fn id(self) -> u32 {
        static IDS: LazyLock<[u32; 5]> = LazyLock::new(|| {
            let lookup = Lookup::new();
            DERIVED_KEYS.map(|name| lookup.key(name).unwrap_or(u32::MAX))
        });
        IDS[self as usize]
    }
}

impl Url {
    /// The value of the derived key `key`.
    #[inline]
    pub(crate) fn derived(&self, key: Derived) -> Option<&str> {
        match key {
            Derived::Protocol => Some(self.protocol()),
            Derived::Host => Some(self.host()),
            Derived::Port => (self.port() > 0).then(|| self.port_text()),
            Derived::Path => Some(self.path()),
            Derived::Address => Some(self.address()),
        }
    }

    /// The value a matcher sees for `key`: a derived key ([`DERIVED_KEYS`]: `protocol`,
    /// `host`, `port` when greater than zero, `path`, `address`) or else the query
    /// parameter.
    pub fn get(&self, key: &str) -> Option<&str> {
        match Derived::of(key) {
            Some(d) => self.derived(d),
            None => self.param(key),
        }
    }
}

/// A key resolved once for reading it from many URLs ([`Url::get_key`]): what a
/// preparation uses when it reads one key of every provider of a snapshot.
///
/// [`Url::get`] compares the key's text with the URL's keys (a binary search, each step
/// resolving an interned key to its text); a `UrlKey` knows the derived key it names, or
/// the key's interned id, so reading a parameter of a URL whose keys are all interned (every
/// URL but those parsed past the interner's limits) is a scan of 16-bit ids, no string
/// compared. Same answers as [`Url::get`].
#[derive(Debug)]
pub struct UrlKey {
    text: Box<str>,
    kind: KeyKind,
    /// The position the key was last found at: the URLs of one service mostly have the
    /// same keys, so it is usually where the next URL has it.
    hint: std::sync::atomic::AtomicUsize,
}

impl Clone for UrlKey {
    fn clone(&self) -> Self {
        UrlKey {
            text: self.text.clone(),
            kind: self.kind,
            hint: std::sync::atomic::AtomicUsize::new(0),
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum KeyKind {
    Derived(Derived),
    /// A query parameter; its interned id when the key is interned.
    Param(Option<u32>),
}

impl UrlKey {
    /// The key `key` (a derived key or a query parameter, as [`Url::get`] takes it).
    pub fn new(key: &str) -> Self {
        let kind = match Derived::of(key) {
            Some(d) => KeyKind::Derived(d),
            None => {
                KeyKind::Param(crate::intern::find(key).filter(|&id| id <= u32::from(u16::MAX)))
            }
        };
        UrlKey {
            text: key.into(),
            kind,
            hint: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// The key's text.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl Url {
    /// The value a matcher sees for `key`: exactly [`Url::get`] of the key's text.
    #[inline]
    pub fn get_key(&self, key: &UrlKey) -> Option<&str> {
        match key.kind {
            KeyKind::Derived(d) => self.derived(d),
            KeyKind::Param(id) => self.param_key(id, key),
        }
    }

    /// The query parameter `text`, whose interned id is `id` (`None`: not interned when the
    /// key was resolved).
    fn param_key(&self, id: Option<u32>, key: &UrlKey) -> Option<&str> {
        use std::sync::atomic::Ordering::Relaxed;
        // Keys stored as references (past 16-bit ids) are looked up by text.
        let table = self.table();
        if table.wide_keys {
            return self.param(&key.text);
        }
        // Every key of this URL is an interned 16-bit id, and one text has one id: the key
        // is present exactly when its id is. A key not interned when the `UrlKey` was made
        // may have been since (a URL parsed later): look it up by text.
        let Some(id) = id else {
            return self.param(&key.text);
        };
        let id = id as u16;
        let keys = self.bytes().get(table.keys..table.keys + 2 * table.n)?;
        let hint = key.hint.load(Relaxed);
        let at = |i: usize| match (keys.get(2 * i), keys.get(2 * i + 1)) {
            (Some(&a), Some(&b)) => Some(u16::from_le_bytes([a, b])),
            _ => None,
        };
        let i = if at(hint) == Some(id) {
            hint
        } else {
            let i = find_u16(keys, id)?;
            key.hint.store(i, Relaxed);
            i
        };
        Some(store::string_at(
            self.bytes(),
            table.values + table.w * i,
            table.w,
        ))
    }
}

/// The index of the first little-endian `u16` equal to `id` in `keys`: four at a time (a
/// word-wide test for a zero lane of `word ^ id×4`), so a key absent from a URL of ~17
/// parameters costs a few word operations.
fn find_u16(keys: &[u8], id: u16) -> Option<usize> {
    const LOW: u64 = 0x0001_0001_0001_0001;
    const HIGH: u64 = 0x8000_8000_8000_8000;
    let pattern = u64::from(id) * LOW;
    let mut chunks = keys.chunks_exact(8);
    let mut base = 0;
    for c in &mut chunks {
        let x = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]) ^ pattern;
        // Exact for "some lane is zero"; which lane is found below.
        if x.wrapping_sub(LOW) & !x & HIGH != 0 {
            for lane in 0..4 {
                if (x >> (16 * lane)) as u16 == 0 {
                    return Some(base + lane);
                }
            }
        }
        base += 4;
    }
    chunks
        .remainder()
        .chunks_exact(2)
        .position(|k| u16::from_le_bytes([k[0], k[1]]) == id)
        .map(|i| base + i)
}
