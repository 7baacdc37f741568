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
//! [interner](crate::intern) (every
//! key; the protocol, path and the values that repeat across providers) or a string stored
//! inline in the block (the values unique to a provider: address, `timestamp`, `pid`...).
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

mod store;
use store::{Builder, Parts};

/// The keys derived from the URL's structure rather than its query parameters.
///
/// `port` is present only when the port is greater than zero; `address` is `host:port`, or
/// `host` alone when there is no port.
pub const DERIVED_KEYS: [&str; 5] = ["protocol", "host", "port", "path", "address"];

/// The longest URL parsed (the block's inline offsets are 31-bit).
const MAX_URL_LEN: usize = 256 << 20;

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

/// A URL that could not be parsed, with the input and the byte position of the problem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid URL {input:?} at column {column}: {reason}")]
pub struct UrlError {
    /// The text that failed to parse.
    pub input: String,
    /// 1-based character column of the problem within `input`.
    pub column: usize,
    /// What is wrong.
    pub reason: String,
}

impl Url {
    /// An empty URL: no protocol, no host, no parameters. Used as the consumer when none is set.
    pub fn empty() -> Self {
        Url::from_parts("", "", 0, "", [])
    }

    /// Parses a Dubbo-style URL. Never panics; a malformed URL is an error naming the
    /// input and the column.
    pub fn parse(input: &str) -> Result<Self, UrlError> {
        Parser {
            input,
            decode: true,
        }
        .parse()
    }

    /// Parses a URL whose parts are already decoded: path, user info and parameter keys
    /// and values are taken as written, `%` included (Dubbo's
    /// `URLStrParser.parseDecodedStr`, what Dubbo's consumer applies to a provider node
    /// name after decoding it once).
    pub fn parse_as_written(input: &str) -> Result<Self, UrlError> {
        Parser {
            input,
            decode: false,
        }
        .parse()
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
        let protocol = b.derived(store::KEY_PROTOCOL, protocol);
        let port_text = PortText::new(port);
        let (address, bracketed) = b.address(host, port, port_text.as_str());
        let path = b.derived(store::KEY_PATH, path.trim_start_matches('/'));
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
    /// it names are the process's, counted by [`crate::intern::heap_bytes`].
    pub fn heap_bytes(&self) -> usize {
        // triomphe's layout: `ArcInner { count: AtomicUsize, data: HeaderSlice {
        // HeaderWithLength { header: (), length: usize }, [u8] } }`, each level padded to
        // its alignment (`url::tests::heap_bytes_is_what_the_allocator_gave` checks it).
        let word = std::mem::size_of::<usize>();
        2 * word + self.bytes().len().next_multiple_of(word)
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
    /// The value a matcher sees for `key`: a derived key (`protocol`, `host`, `port` when
    /// greater than zero, `path`, `address`) or else the query parameter.
    pub fn get(&self, key: &str) -> Option<&str> {
        match key {
            "protocol" => Some(self.protocol()),
            "host" => Some(self.host()),
            "port" => (self.port() > 0).then(|| self.port_text()),
            "path" => Some(self.path()),
            "address" => Some(self.address()),
            _ => self.param(key),
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
    Protocol,
    Host,
    Port,
    Path,
    Address,
    /// A query parameter; its interned id when the key is interned.
    Param(Option<u32>),
}

impl UrlKey {
    /// The key `key` (a derived key or a query parameter, as [`Url::get`] takes it).
    pub fn new(key: &str) -> Self {
        let kind = match key {
            "protocol" => KeyKind::Protocol,
            "host" => KeyKind::Host,
            "port" => KeyKind::Port,
            "path" => KeyKind::Path,
            "address" => KeyKind::Address,
            _ => KeyKind::Param(crate::intern::find(key).filter(|&id| id <= u32::from(u16::MAX))),
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
            KeyKind::Protocol => Some(self.protocol()),
            KeyKind::Host => Some(self.host()),
            KeyKind::Port => (self.port() > 0).then(|| self.port_text()),
            KeyKind::Path => Some(self.path()),
            KeyKind::Address => Some(self.address()),
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

/// The query bytes the parameter scanner stops at: `&`, `=` and `%`.
static QUERY_SPECIAL: [bool; 256] = {
    let mut table = [false; 256];
    table[b'&' as usize] = true;
    table[b'=' as usize] = true;
    table[b'%' as usize] = true;
    table
};

/// `a < b` for two non-empty keys, deciding on the first byte when it differs (consecutive
/// keys of a sorted query usually do) without a call to compare the rest.
#[inline]
fn key_less(a: &str, b: &str) -> bool {
    match (a.as_bytes().first(), b.as_bytes().first()) {
        (Some(x), Some(y)) if x != y => x < y,
        _ => a < b,
    }
}

/// The position of the first `://` in `s` (what `s.find("://")` gives), found from the
/// colons of `s` (the first one, in a URL with a protocol).
#[inline]
fn find_scheme_end(s: &str) -> Option<usize> {
    let bytes = s.as_bytes();
    let mut from = 0;
    while let Some(c) = s[from..].find(':') {
        let at = from + c;
        if bytes[at..].starts_with(b"://") {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

/// The position of the first `&`, `=` or `%` of `bytes` at or after `i` (`bytes.len()`
/// when none): eight bytes per step, each tested for the three bytes at once (a word-wide
/// zero-byte test of the word XOR each byte repeated), then the table for the last bytes.
#[inline]
fn next_special(bytes: &[u8], mut i: usize) -> usize {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    // High bit set in each byte of `x` equal to `b`, at least at the lowest such byte (a
    // false positive can only follow a true one, so the lowest set bit is exact).
    let equal = |x: u64, b: u8| {
        let y = x ^ (LO * u64::from(b));
        y.wrapping_sub(LO) & !y & HI
    };
    while let Some(chunk) = bytes.get(i..i + 8) {
        let Ok(chunk) = <[u8; 8]>::try_from(chunk) else {
            break;
        };
        let x = u64::from_le_bytes(chunk);
        let found = equal(x, b'&') | equal(x, b'=') | equal(x, b'%');
        if found != 0 {
            return i + (found.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < bytes.len() && !QUERY_SPECIAL[bytes[i] as usize] {
        i += 1;
    }
    i
}

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

struct Parser<'a> {
    input: &'a str,
    /// Percent-decode the parts (else take them as written).
    decode: bool,
}

impl Parser<'_> {
    fn err(&self, byte_pos: usize, reason: impl Into<String>) -> UrlError {
        // Characters that start before `byte_pos` (which may fall inside a character).
        let column = self
            .input
            .char_indices()
            .take_while(|(i, _)| *i < byte_pos)
            .count()
            + 1;
        UrlError {
            input: self.input.to_string(),
            column,
            reason: reason.into(),
        }
    }

    fn parse(&self) -> Result<Url, UrlError> {
        let s = self.input;
        if s.trim().is_empty() {
            return Err(self.err(0, "empty URL"));
        }
        if s.len() > MAX_URL_LEN {
            return Err(self.err(0, "URL longer than 256 MiB"));
        }
        // Printable ASCII (the usual case) holds no whitespace or control character; only
        // other text needs the per-character check.
        // (An OR over every byte, without an early exit, so the compiler vectorizes it.)
        let outside = s.bytes().fold(0u8, |acc, b| {
            acc | u8::from(b.wrapping_sub(0x21) > 0x7e - 0x21)
        });
        if outside != 0 {
            if let Some(pos) = s.find(|c: char| c.is_whitespace() || c.is_control()) {
                return Err(self.err(pos, "whitespace or control character in URL"));
            }
        }
        // Query.
        let (before_query, query, query_start) = match s.find('?') {
            Some(q) => (&s[..q], Some(&s[q + 1..]), q + 1),
            None => (s, None, s.len()),
        };
        // Protocol.
        let (protocol, rest, rest_start) = match find_scheme_end(before_query) {
            Some(0) => return Err(self.err(0, "empty protocol before \"://\"")),
            Some(p) => {
                let proto = &before_query[..p];
                if let Some(bad) = proto
                    .bytes()
                    .position(|c| !(c.is_ascii_alphanumeric() || b"+-._".contains(&c)))
                {
                    return Err(self.err(bad, "invalid character in protocol"));
                }
                (proto, &before_query[p + 3..], p + 3)
            }
            None => ("", before_query, 0),
        };
        // Path.
        let (authority, path, path_start, slash) = match rest.find('/') {
            Some(p) => (&rest[..p], &rest[p + 1..], rest_start + p + 1, true),
            None => (rest, "", rest_start + rest.len(), false),
        };
        // User info.
        let (userinfo, hostport, hostport_start) = match authority.rfind('@') {
            Some(at) => (
                Some(&authority[..at]),
                &authority[at + 1..],
                rest_start + at + 1,
            ),
            None => (None, authority, rest_start),
        };
        let (username, password) = match userinfo {
            Some(ui) => {
                let (u, p) = match ui.find(':') {
                    Some(c) => (&ui[..c], Some(&ui[c + 1..])),
                    None => (ui, None),
                };
                (
                    Some(self.decode(u, rest_start)?),
                    p.map(|p| self.decode(p, rest_start)).transpose()?,
                )
            }
            None => (None, None),
        };
        // Whether rendering the parts gives the input back (then the raw text is not kept):
        // nothing decoded, a canonical port, no empty path after `/`, no empty or bare
        // parameter, keys written in strictly increasing order.
        let borrowed = |c: &Option<Cow<'_, str>>| !matches!(c, Some(Cow::Owned(_)));
        let mut canonical = borrowed(&username) && borrowed(&password);
        let (host, port, port_canonical) = self.host_port(hostport, hostport_start)?;
        // (A host in brackets is rendered in brackets only when it holds a `:`.)
        let host_port_canonical = port_canonical
            && matches!(host, Cow::Borrowed(_))
            && hostport.starts_with('[') == host.contains(':');
        canonical &= host_port_canonical && !(slash && path.is_empty());
        if protocol.is_empty() && host.is_empty() {
            return Err(self.err(0, "no protocol and no host"));
        }
        let path = self.decode(path, path_start)?;
        canonical &= matches!(path, Cow::Borrowed(_));
        // Every string is interned (keys; values that repeat across providers) or written
        // once into the URL's one block as the input is scanned; the parameter table is
        // sorted afterwards (by key, last occurrence winning).
        let port_text = PortText::new(port);
        let port_text = port_text.as_str();
        let lookup = Lookup::new();
        let mut b = Builder::new(&lookup, if query.is_some() { 24 } else { 0 });
        let mut sorted = true;
        let protocol = b.derived(store::KEY_PROTOCOL, protocol);
        // User info stays in the URL: credentials are not shared through a process-wide table.
        let username = username.map(|u| b.inline(&u));
        let password = password.map(|p| b.inline(&p));
        // The address as written is the rendered one when the host and port are canonical.
        let (address, bracketed) = if host_port_canonical {
            b.address_as_written(hostport, host.contains(':'))
        } else {
            b.address(&host, port, port_text)
        };
        let path = b.derived(store::KEY_PATH, &path);
        if let Some(query) = query {
            // One pass over the query's bytes: `&` ends a parameter, its first `=` splits
            // key from value, and a `%` marks the part that needs decoding.
            let bytes = query.as_bytes();
            let mut part_start = 0;
            let mut eq: Option<usize> = None;
            let mut key_percent = false;
            let mut value_percent = false;
            // The keys as written (the last one): already increasing needs no sort.
            let mut previous: Option<Cow<'_, str>> = None;
            let mut i = 0;
            loop {
                // Runs of ordinary bytes are skipped eight at a time.
                i = next_special(bytes, i);
                match bytes.get(i) {
                    None | Some(b'&') => {
                        if i > part_start {
                            let offset = query_start + part_start;
                            let (k, v, v_off, v_percent) = match eq {
                                Some(e) => (
                                    &query[part_start..e],
                                    &query[e + 1..i],
                                    query_start + e + 1,
                                    value_percent,
                                ),
                                None => {
                                    let part = &query[part_start..i];
                                    (part, part, offset, key_percent)
                                }
                            };
                            if k.is_empty() {
                                return Err(self.err(offset, "parameter with an empty key"));
                            }
                            let k = if key_percent {
                                self.decode(k, offset)?
                            } else {
                                Cow::Borrowed(k)
                            };
                            let v = if v_percent {
                                self.decode(v, v_off)?
                            } else {
                                Cow::Borrowed(v)
                            };
                            b.param(&k, &v);
                            if let Some(p) = &previous {
                                sorted &= key_less(p, &k);
                            }
                            canonical &= eq.is_some()
                                && matches!((&k, &v), (Cow::Borrowed(_), Cow::Borrowed(_)));
                            previous = Some(k);
                        } else {
                            // An empty parameter (`&&`, a trailing `&`, a bare `?`).
                            canonical = false;
                        }
                        if i == bytes.len() {
                            break;
                        }
                        part_start = i + 1;
                        eq = None;
                        key_percent = false;
                        value_percent = false;
                    }
                    Some(b'=') if eq.is_none() => eq = Some(i),
                    Some(b'%') if eq.is_none() => key_percent = true,
                    Some(b'%') => value_percent = true,
                    Some(_) => {}
                }
                i += 1;
            }
        }
        b.normalize(sorted);
        let parts = Parts {
            protocol,
            path,
            address,
            username,
            password,
            port,
            bracketed,
        };
        // The raw text is kept only when the canonical rendering does not give it back.
        canonical &= sorted;
        let url = b.finish(&parts, (!canonical).then_some(s));
        debug_assert_eq!(canonical, url.renders_as(s), "{s}");
        Ok(url)
    }

    /// The host, the port (0 when none) and whether the port was written as rendered
    /// (absent, or its decimal digits without a sign or leading zeros).
    fn host_port<'a>(
        &self,
        hp: &'a str,
        start: usize,
    ) -> Result<(Cow<'a, str>, u16, bool), UrlError> {
        let (host, port_text, port_start) = if let Some(stripped) = hp.strip_prefix('[') {
            let close = stripped
                .find(']')
                .ok_or_else(|| self.err(start, "IPv6 host without closing ']'"))?;
            let host = &stripped[..close];
            if host.is_empty()
                || !host
                    .bytes()
                    .all(|c| c.is_ascii_hexdigit() || b":.%".contains(&c))
            {
                return Err(self.err(start + 1, "invalid IPv6 host"));
            }
            let after = &stripped[close + 1..];
            let port = match after.strip_prefix(':') {
                Some(p) => Some(p),
                None if after.is_empty() => None,
                None => return Err(self.err(start + close + 2, "unexpected text after ']'")),
            };
            (Cow::Borrowed(host), port, start + close + 3)
        } else {
            match hp.rfind(':') {
                Some(c) if hp[..c].contains(':') => {
                    return Err(self.err(start, "IPv6 host must be written in brackets"));
                }
                Some(c) => (
                    self.decode(&hp[..c], start)?,
                    Some(&hp[c + 1..]),
                    start + c + 1,
                ),
                None => (self.decode(hp, start)?, None, start),
            }
        };
        let port = match port_text {
            None => 0,
            Some("") => return Err(self.err(port_start, "empty port after ':'")),
            Some(p) => p
                .parse::<u16>()
                .map_err(|_| self.err(port_start, format!("invalid port {p:?}")))?,
        };
        // Rendered as written: decimal digits without a sign or a leading zero.
        let canonical = port_text.is_none_or(|p| {
            port > 0 && !p.starts_with('0') && p.bytes().all(|b| b.is_ascii_digit())
        });
        Ok((host, port, canonical))
    }

    /// Percent-decodes `text` when this parser decodes and `text` holds a `%`; else borrows it.
    fn decode<'a>(&self, text: &'a str, start: usize) -> Result<Cow<'a, str>, UrlError> {
        if !self.decode || !text.as_bytes().contains(&b'%') {
            return Ok(Cow::Borrowed(text));
        }
        // `percent_decode_str` keeps a `%` that does not start a valid escape as it is
        // (Java's `URLDecoder` would throw): a bare `%` in a value is data, as in Dubbo.
        percent_encoding::percent_decode_str(text)
            .decode_utf8()
            .map_err(|_| self.err(start, "percent-encoding is not UTF-8"))
    }
}

#[cfg(test)]
mod tests;
