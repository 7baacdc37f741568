//! Dubbo-style URLs: the description of a provider (Dubbo: invoker) or of the consumer.
//!
//! `protocol://[user[:password]@]host[:port]/path?k=v&...` with percent-decoding of the
//! path and of parameter keys and values, IPv6 hosts in brackets, and repeated keys where
//! the last one wins (as in Dubbo). Parsing happens once, when a provider list or a
//! consumer is set; matchers read the parsed fields, never the raw text.
//!
//! Decoding: [`Url::parse`] decodes `%XX` escapes once (with the `percent-encoding` crate);
//! a `%` that does not start an escape (`discount=100%`) is kept as written, as Java
//! Dubbo keeps it, and `+` stays `+` (only Java's `URLDecoder`, used on whole registry
//! node names, turns `+` into a space). [`Url::parse_as_written`] decodes nothing, like
//! Dubbo's `URLStrParser.parseDecodedStr`: what a Dubbo consumer does with a registry node
//! name after decoding it once.
//!
//! Memory: a snapshot holds one `Url` per provider, so a `Url` is one reference-counted
//! heap block behind an 8-byte pointer (see `store.rs` for its layout) of 3-byte
//! references (4 in a URL past 8 MiB), each naming a string of the process-wide
//! interner ([`Url::interned`]: every key; the protocol, path and the values that repeat
//! across providers) or a string stored inline in the block (the values unique to a provider: address, `timestamp`, `pid`...).
//! The raw text is not kept when the canonical rendering gives it back (protocol, user
//! info, address, path, parameters sorted by key as `k=v` joined by `&`: how registries
//! write provider URLs); [`Url::raw`] and [`Display`](fmt::Display) then render it from the
//! parts. A generated provider URL of ~330 characters and 15–17 parameters takes about 156
//! bytes (13 of header, 5 per parameter: a 16-bit key id and a 3-byte value reference, then
//! the inline strings), plus 16 for the block's reference count and length and 8 for the
//! `Url` pointer (`cargo bench -p routechain-benches --bench memory`; BENCHMARKS.md,
//! "Memory"). Reading a part or a parameter is lock-free and allocation-free.

use std::borrow::Cow;
use std::fmt;

use triomphe::ThinArc;

use crate::intern::Lookup;

mod key;
mod parse;
mod store;
pub(crate) use key::Derived;
pub use key::{DERIVED_KEYS, UrlKey};
pub use parse::UrlError;
use store::{Builder, Parts};

/// A parsed Dubbo-style URL.
///
/// Stored compactly (the snapshot holds one per provider): one reference-counted heap block
/// of interned-string ids and inline strings (see the module documentation). Cloning a
/// `Url` increments the block's count (no copy, no allocation), so a URL is shared as a
/// `Url`, never as an `Arc<Url>`; [`Url::ptr_eq`] tells whether two are the same block.
#[derive(Clone)]
pub struct Url {
    /// The block: [`triomphe::ThinArc`], one allocation holding the reference count, the
    /// length and the bytes behind an 8-byte pointer (`std::sync::Arc<[u8]>` would hold a
    /// 16-byte pointer and a weak count nothing uses). Immutable once built.
    data: ThinArc<(), u8>,
}

/// What the process-wide table of interned URL strings holds ([`Url::interned`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interned {
    /// Strings interned.
    pub strings: usize,
    /// Heap bytes: the text, the id table and the look-up table.
    pub heap_bytes: usize,
}

/// Where a URL's parameter table is in its block (see `store.rs`).
struct Table {
    /// The first key.
    keys: usize,
    /// The first value.
    values: usize,
    /// Number of parameters.
    n: usize,
    /// Width of a reference (3 or 4).
    w: usize,
    /// Keys are references (else 16-bit ids).
    wide_keys: bool,
}

/// The decimal text of a port, without allocating.
struct PortText {
    buf: [u8; 5],
    len: usize,
}

impl PortText {
    fn new(port: u16) -> Self {
        let mut buf = [0u8; 5];
        let mut len = 0;
        if port > 0 {
            let mut digits = [0u8; 5];
            let mut p = port;
            while p > 0 {
                digits[len] = b'0' + (p % 10) as u8;
                p /= 10;
                len += 1;
            }
            for i in 0..len {
                buf[i] = digits[len - 1 - i];
            }
        }
        PortText { buf, len }
    }

    fn as_str(&self) -> &str {
        // Only ASCII digits were written.
        std::str::from_utf8(&self.buf[..self.len]).unwrap_or("")
    }
}

impl Url {
    /// An empty URL: no protocol, no host, no parameters. Used as the consumer when none is set.
    pub fn empty() -> Self {
        Url::from_parts("", "", 0, "", [])
    }

    /// Builds a URL from its parts (used by generators and tests); the parameters are
    /// stored as given, last occurrence of a key winning.
    pub fn from_parts<'a>(
        protocol: &str,
        host: &str,
        port: u16,
        path: &str,
        params: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Self {
        let lookup = Lookup::new();
        let params = params.into_iter();
        let mut b = Builder::new(&lookup, params.size_hint().0);
        let protocol = b.derived(Derived::Protocol, protocol);
        let port_text = PortText::new(port);
        let (address, bracketed) = b.address(host, port, port_text.as_str());
        let path = b.derived(Derived::Path, path.trim_start_matches('/'));
        for (k, v) in params {
            b.param(k, v);
        }
        b.normalize(false);
        b.finish(
            &Parts {
                protocol,
                path,
                address,
                username: None,
                password: None,
                port,
                bracketed,
            },
            None,
        )
    }

    /// Heap bytes held by this URL: its one block as allocated (reference count, length and
    /// bytes, padded to 8), counted in full by each holder of a clone; the interned strings
    /// it names are the process's, counted by [`Url::interned`].
    pub fn heap_bytes(&self) -> usize {
        // triomphe's layout: `ArcInner { count: AtomicUsize, data: HeaderSlice {
        // HeaderWithLength { header: (), length: usize }, [u8] } }`, each level padded to
        // its alignment (`url::tests::heap_bytes_is_what_the_allocator_gave` checks it).
        let word = std::mem::size_of::<usize>();
        2 * word + self.bytes().len().next_multiple_of(word)
    }

    /// The process-wide table of the strings URLs name by id (every parameter key, and the
    /// values that repeat across providers): shared by every URL of the process, and never
    /// freed (an id, once given, names its string for the life of the process).
    pub fn interned() -> Interned {
        Interned {
            strings: crate::intern::len(),
            heap_bytes: crate::intern::heap_bytes(),
        }
    }

    /// True when `a` and `b` are clones of one block. Two URLs parsed from one text are
    /// distinct blocks (and equal, `==`); this tells shared from merely equal, in O(1).
    pub fn ptr_eq(a: &Url, b: &Url) -> bool {
        std::ptr::eq(a.data.ptr(), b.data.ptr())
    }

    /// The number of clones of this URL's block alive (its reference count).
    pub fn strong_count(url: &Url) -> usize {
        ThinArc::strong_count(&url.data)
    }

    /// The address of this URL's block: a key for the identity of a shared URL (equal to
    /// another's exactly when [`Url::ptr_eq`]), valid while a clone of it is alive.
    pub fn block_addr(&self) -> usize {
        self.data.ptr() as usize
    }

    /// The block's bytes (see `store.rs`).
    #[inline]
    fn bytes(&self) -> &[u8] {
        &self.data.slice
    }

    fn flags(&self) -> u8 {
        self.bytes().first().copied().unwrap_or(0)
    }

    /// The reference `i` of the header (protocol, path, address, then the optional ones).
    #[inline]
    fn field(&self, i: usize) -> &str {
        let w = store::ref_width(self.flags());
        store::string_at(self.bytes(), store::REFS + w * i, w)
    }

    /// The optional field `flag` (user name, password, raw text), if present.
    fn optional(&self, flag: u8) -> Option<&str> {
        let flags = self.flags();
        if flags & flag == 0 {
            return None;
        }
        let before = flags & (flag - 1) & (store::HAS_USERNAME | store::HAS_PASSWORD);
        Some(self.field(store::OPTIONAL + before.count_ones() as usize))
    }

    /// Where the parameter table is, read once for the reads of a call.
    #[inline]
    fn table(&self) -> Table {
        let flags = self.flags();
        let w = store::ref_width(flags);
        let optional = flags & (store::HAS_USERNAME | store::HAS_PASSWORD | store::HAS_RAW);
        let mut start = store::REFS + w * (store::OPTIONAL + optional.count_ones() as usize);
        let n = if flags & store::MANY_PARAMS == 0 {
            usize::from(self.bytes().get(store::N_PARAMS).copied().unwrap_or(0))
        } else {
            start += 4;
            store::read_u32(self.bytes(), start - 4) as usize
        };
        let key_width = if flags & store::WIDE_KEYS != 0 { w } else { 2 };
        Table {
            keys: start,
            values: start + key_width * n,
            n,
            w,
            wide_keys: flags & store::WIDE_KEYS != 0,
        }
    }

    /// The key and value of parameter `i` (sorted order) of `table` (this URL's).
    #[inline]
    fn param_at(&self, table: &Table, i: usize) -> (&str, &str) {
        let data = self.bytes();
        let key = if table.wide_keys {
            store::string_at(data, table.keys + table.w * i, table.w)
        } else {
            store::string(data, u32::from(store::read_u16(data, table.keys + 2 * i)))
        };
        (
            key,
            store::string_at(data, table.values + table.w * i, table.w),
        )
    }

    /// The text this URL was parsed from (or rendered to, for [`Url::from_parts`]):
    /// borrowed when it was kept, else rendered from the parts (the canonical rendering
    /// equals the text parsed; see the module documentation).
    pub fn raw(&self) -> Cow<'_, str> {
        match self.optional(store::HAS_RAW) {
            Some(raw) => Cow::Borrowed(raw),
            None => {
                let mut out = String::with_capacity(self.bytes().len() * 2);
                self.render(&mut |s| {
                    out.push_str(s);
                    true
                });
                Cow::Owned(out)
            }
        }
    }

    /// Writes the canonical rendering through `sink`, stopping when it returns false;
    /// returns whether every piece was taken.
    fn render(&self, sink: &mut impl FnMut(&str) -> bool) -> bool {
        let protocol = self.protocol();
        if !(protocol.is_empty() || sink(protocol) && sink("://")) {
            return false;
        }
        if let Some(user) = self.username() {
            if !sink(user) {
                return false;
            }
            if let Some(password) = self.password() {
                if !(sink(":") && sink(password)) {
                    return false;
                }
            }
            if !sink("@") {
                return false;
            }
        }
        if !sink(self.address()) {
            return false;
        }
        let path = self.path();
        if !(path.is_empty() || sink("/") && sink(path)) {
            return false;
        }
        for (i, (k, v)) in self.params().enumerate() {
            if !(sink(if i == 0 { "?" } else { "&" }) && sink(k) && sink("=") && sink(v)) {
                return false;
            }
        }
        true
    }

    /// Whether the canonical rendering is exactly `text` (compared piece by piece, without
    /// allocating).
    fn renders_as(&self, text: &str) -> bool {
        let mut rest = text;
        self.render(&mut |s| match rest.strip_prefix(s) {
            Some(r) => {
                rest = r;
                true
            }
            None => false,
        }) && rest.is_empty()
    }

    /// The protocol (`dubbo`, `tri`, `mock`...); empty when the URL had none.
    pub fn protocol(&self) -> &str {
        self.field(store::PROTOCOL)
    }
    /// The user name before `@`, if any.
    pub fn username(&self) -> Option<&str> {
        self.optional(store::HAS_USERNAME)
    }
    /// The password after `user:`, if any.
    pub fn password(&self) -> Option<&str> {
        self.optional(store::HAS_PASSWORD)
    }
    /// The host, without brackets for IPv6.
    pub fn host(&self) -> &str {
        let address = self.address();
        let host = match self.port() {
            0 => address,
            _ => {
                let digits = PortText::new(self.port()).len;
                address
                    .get(..address.len().saturating_sub(digits + 1))
                    .unwrap_or("")
            }
        };
        if self.flags() & store::BRACKETED != 0 {
            host.get(1..host.len().saturating_sub(1)).unwrap_or("")
        } else {
            host
        }
    }
    /// The port; 0 when the URL had none.
    pub fn port(&self) -> u16 {
        match self.bytes().get(store::PORT..store::PORT + 2) {
            Some(&[a, b]) => u16::from_le_bytes([a, b]),
            _ => 0,
        }
    }
    /// The port's decimal text (empty when there is none): the end of the address.
    fn port_text(&self) -> &str {
        let address = self.address();
        let digits = PortText::new(self.port()).len;
        address
            .get(address.len().saturating_sub(digits)..)
            .unwrap_or("")
    }
    /// `host:port` (IPv6 hosts in brackets), or the host alone when there is no port.
    pub fn address(&self) -> &str {
        self.field(store::ADDRESS)
    }
    /// The path without its leading `/`.
    pub fn path(&self) -> &str {
        self.field(store::PATH)
    }
    /// A query parameter (not the derived keys).
    pub fn param(&self, key: &str) -> Option<&str> {
        let table = self.table();
        let (mut low, mut high) = (0, table.n);
        while low < high {
            let mid = low + (high - low) / 2;
            let (k, v) = self.param_at(&table, mid);
            match k.cmp(key) {
                std::cmp::Ordering::Less => low = mid + 1,
                std::cmp::Ordering::Greater => high = mid,
                std::cmp::Ordering::Equal => return Some(v),
            }
        }
        None
    }
    /// Every query parameter, sorted by key.
    pub fn params(&self) -> impl ExactSizeIterator<Item = (&str, &str)> + '_ {
        let table = self.table();
        (0..table.n).map(move |i| self.param_at(&table, i))
    }
}

impl PartialEq for Url {
    /// Equal parts and equal text (whether each string is interned or inline does not
    /// matter; nor whether the two are one block, see [`Url::ptr_eq`]). Allocation-free: a
    /// routed call compares its consumer with the chain's.
    fn eq(&self, other: &Self) -> bool {
        if Url::ptr_eq(self, other) || self.bytes() == other.bytes() {
            return true;
        }
        let parts = self.port() == other.port()
            && self.protocol() == other.protocol()
            && self.username() == other.username()
            && self.password() == other.password()
            && self.address() == other.address()
            && self.path() == other.path()
            && self.params().eq(other.params());
        // Equal parts render alike; a kept raw text is compared with the other's.
        parts
            && match (
                self.optional(store::HAS_RAW),
                other.optional(store::HAS_RAW),
            ) {
                (None, None) => true,
                (Some(a), Some(b)) => a == b,
                (Some(a), None) => other.renders_as(a),
                (None, Some(b)) => self.renders_as(b),
            }
    }
}

impl Eq for Url {}

impl fmt::Display for Url {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(raw) = self.optional(store::HAS_RAW) {
            return f.write_str(raw);
        }
        if self.render(&mut |s| f.write_str(s).is_ok()) {
            Ok(())
        } else {
            Err(fmt::Error)
        }
    }
}

impl fmt::Debug for Url {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Url({self})")
    }
}

impl std::str::FromStr for Url {
    type Err = UrlError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Url::parse(s)
    }
}

#[cfg(test)]
mod tests;
