//! The compact storage of one [`Url`]: one heap block per URL, its strings named by
//! interned ids or stored inline.
//!
//! Layout of the block (little-endian):
//!
//! | bytes | what |
//! |---|---|
//! | 0 | flags: user name, password, raw text kept, host written in brackets, wide keys |
//! | 1..3 | port (`u16`) |
//! | 3..7 | number of parameters `n` |
//! | 7..11, 11..15, 15..19 | protocol, path, address (`host:port`) |
//! | then 4 each | user name, password, raw text (only those the flags name) |
//! | then `6 · n` | parameters sorted by key: `n` keys (16-bit ids), then `n` values |
//! | or `8 · n` | with wide keys (a key id past 16 bits, or an inline key): key, value |
//! | rest | inline strings: a LEB128 length, then the UTF-8 bytes |
//!
//! Every string field is a 32-bit reference: an id of the process-wide
//! [interner](crate::intern) (high bit clear) or, high bit set, the offset of an inline
//! string in the block. The raw text is kept only when the URL's canonical rendering
//! (protocol, user info, address, path, parameters sorted, `k=v` joined by `&`) differs from
//! the text it was parsed from; for the URLs a registry writes it does not.

use super::Url;
use crate::intern::{self, Lookup};

/// High bit of a reference: the low bits are an inline string's offset in the block.
pub(super) const INLINE: u32 = 1 << 31;

pub(super) const HAS_USERNAME: u8 = 1;
pub(super) const HAS_PASSWORD: u8 = 2;
pub(super) const HAS_RAW: u8 = 4;
pub(super) const BRACKETED: u8 = 8;
pub(super) const WIDE_KEYS: u8 = 16;

pub(super) const PORT: usize = 1;
pub(super) const N_PARAMS: usize = 3;
pub(super) const PROTOCOL: usize = 7;
pub(super) const PATH: usize = 11;
pub(super) const ADDRESS: usize = 15;
/// End of the fixed header.
pub(super) const FIXED: usize = 19;

/// The ids of the derived keys, interned first (see [`super::DERIVED_KEYS`]).
pub(super) const KEY_PROTOCOL: usize = 0;
pub(super) const KEY_PATH: usize = 3;
pub(super) const KEY_ADDRESS: usize = 4;

pub(super) fn read_u16(data: &[u8], at: usize) -> u16 {
    data.get(at..at + 2)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u16::from_le_bytes)
}

pub(super) fn read_u32(data: &[u8], at: usize) -> u32 {
    data.get(at..at + 4)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u32::from_le_bytes)
}

/// The string a reference names, in `data`.
pub(super) fn string(data: &[u8], r: u32) -> &str {
    if r & INLINE == 0 {
        intern::resolve(r)
    } else {
        inline(data, (r & !INLINE) as usize)
    }
}

fn inline(data: &[u8], mut at: usize) -> &str {
    let mut len = 0usize;
    let mut shift = 0;
    while let Some(&b) = data.get(at) {
        at += 1;
        len |= usize::from(b & 0x7f) << shift;
        shift += 7;
        if b & 0x80 == 0 || shift > 28 {
            break;
        }
    }
    data.get(at..at.saturating_add(len))
        .and_then(|b| std::str::from_utf8(b).ok())
        .unwrap_or("")
}

fn push_varint(out: &mut Vec<u8>, mut n: usize) {
    while n >= 0x80 {
        out.push((n as u8 & 0x7f) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn varint_len(mut n: usize) -> usize {
    let mut len = 1;
    while n >= 0x80 {
        n >>= 7;
        len += 1;
    }
    len
}

/// The most parameters [`PREVIOUS`] remembers.
const REMEMBERED: usize = 64;

thread_local! {
    /// The parameters (key and value references, in the order written) of the previous URL
    /// parsed on this thread. The URLs of one provider list repeat most keys and values in
    /// the same order, so the parameter at the same position usually names the same interned
    /// strings: comparing with them costs less than hashing. Only interned references are
    /// reused (an inline one belongs to its own URL). A parse-time cache: calls never read it.
    static PREVIOUS: std::cell::RefCell<Vec<(u32, u32)>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The structural parts of a URL being built (references into the builder).
pub(super) struct Parts {
    pub protocol: u32,
    pub path: u32,
    pub address: u32,
    pub username: Option<u32>,
    pub password: Option<u32>,
    pub port: u16,
    pub bracketed: bool,
}

/// Builds one URL's block: strings are interned through `lookup` or written to the tail.
pub(super) struct Builder<'l> {
    lookup: &'l Lookup,
    tail: Vec<u8>,
    params: Vec<(u32, u32)>,
}

impl<'l> Builder<'l> {
    pub(super) fn new(lookup: &'l Lookup, params: usize) -> Self {
        Builder {
            lookup,
            tail: Vec::with_capacity(48),
            params: Vec::with_capacity(params),
        }
    }

    /// Writes `s` to the tail.
    pub(super) fn inline(&mut self, s: &str) -> u32 {
        let at = self.tail.len();
        push_varint(&mut self.tail, s.len());
        self.tail.extend_from_slice(s.as_bytes());
        INLINE | at as u32
    }

    /// A key: interned, or inline past the interner's limits.
    pub(super) fn key(&mut self, s: &str) -> u32 {
        match self.lookup.key(s) {
            Some(id) => id,
            None => self.inline(s),
        }
    }

    /// A value of `key`: interned while the key's values repeat, else inline.
    pub(super) fn value(&mut self, key: u32, s: &str) -> u32 {
        if key & INLINE == 0 {
            if let Some(id) = self.lookup.value(key, s) {
                return id;
            }
        }
        self.inline(s)
    }

    /// A value of one of the derived keys.
    pub(super) fn derived(&mut self, key: usize, s: &str) -> u32 {
        self.value(intern::derived_key(key), s)
    }

    /// One query parameter, in the order written.
    pub(super) fn param(&mut self, k: &str, v: &str) {
        // The parameter at this position in the previous URL parsed on this thread: when its
        // interned key (and value) are this text, no look-up is needed.
        let previous = PREVIOUS.with(|p| p.borrow().get(self.params.len()).copied());
        let (k, v) = match previous {
            Some((pk, pv)) if pk & INLINE == 0 && intern::resolve(pk) == k => {
                if pv & INLINE == 0 && intern::resolve(pv) == v {
                    (pk, pv)
                } else {
                    (pk, self.value(pk, v))
                }
            }
            _ => {
                let k = self.key(k);
                (k, self.value(k, v))
            }
        };
        self.params.push((k, v));
    }

    /// Keeps this URL's parameters, in the order written, for the next URL parsed on this
    /// thread (see [`PREVIOUS`]).
    pub(super) fn remember(&self) {
        PREVIOUS.with(|p| {
            let mut p = p.borrow_mut();
            p.clear();
            // One fixed allocation per thread (512 bytes): a URL of more parameters is not
            // remembered.
            if p.capacity() < REMEMBERED {
                p.reserve_exact(REMEMBERED);
            }
            if self.params.len() <= REMEMBERED {
                p.extend_from_slice(&self.params);
            }
        });
    }

    /// `host:port` (brackets around a host holding `:`), or the host alone without a port.
    pub(super) fn address(&mut self, host: &str, port: u16, port_text: &str) -> (u32, bool) {
        let bracketed = host.contains(':');
        let len =
            host.len() + 2 * usize::from(bracketed) + usize::from(port > 0) * (1 + port_text.len());
        let mut stack = [0u8; 64];
        let mut heap = Vec::new();
        let buf: &mut [u8] = if len <= stack.len() {
            &mut stack[..len]
        } else {
            heap.resize(len, 0);
            &mut heap
        };
        let mut at = 0;
        let mut put = |s: &str| {
            buf[at..at + s.len()].copy_from_slice(s.as_bytes());
            at += s.len();
        };
        if bracketed {
            put("[");
        }
        put(host);
        if bracketed {
            put("]");
        }
        if port > 0 {
            put(":");
            put(port_text);
        }
        // Only whole strings were copied in.
        let address = std::str::from_utf8(buf).unwrap_or_default();
        (self.derived(KEY_ADDRESS, address), bracketed)
    }

    /// Sorts the parameters by key, the last occurrence of a key winning (as Dubbo does);
    /// nothing to do when the caller saw the keys written in strictly increasing order.
    pub(super) fn normalize(&mut self, sorted: bool) {
        let tail = &self.tail;
        let key = |r: u32| string(tail, r);
        if sorted || self.params.windows(2).all(|w| key(w[0].0) < key(w[1].0)) {
            return;
        }
        // Stable: occurrences of one key stay in the order written; keep the last.
        self.params.sort_by(|a, b| key(a.0).cmp(key(b.0)));
        let mut kept = 0;
        for read in 0..self.params.len() {
            if kept > 0 && key(self.params[kept - 1].0) == key(self.params[read].0) {
                self.params[kept - 1] = self.params[read];
            } else {
                self.params[kept] = self.params[read];
                kept += 1;
            }
        }
        self.params.truncate(kept);
    }

    /// The URL's block, with `raw` kept when given.
    pub(super) fn finish(&self, parts: &Parts, raw: Option<&str>) -> Url {
        let optional = [parts.username, parts.password, raw.map(|_| 0)];
        // Keys are 16-bit ids unless one is not (an id past 16 bits, an inline key).
        let wide = self.params.iter().any(|&(k, _)| k >= u32::from(u16::MAX));
        let per_param = if wide { 8 } else { 6 };
        let head = FIXED + 4 * optional.iter().flatten().count() + per_param * self.params.len();
        let raw_at = head + self.tail.len();
        let total = raw_at + raw.map_or(0, |r| varint_len(r.len()) + r.len());
        let reloc = |r: u32| {
            if r & INLINE != 0 { r + head as u32 } else { r }
        };
        let mut data = Vec::with_capacity(total);
        let flags = if parts.username.is_some() {
            HAS_USERNAME
        } else {
            0
        } | if parts.password.is_some() {
            HAS_PASSWORD
        } else {
            0
        } | if raw.is_some() { HAS_RAW } else { 0 }
            | if parts.bracketed { BRACKETED } else { 0 }
            | if wide { WIDE_KEYS } else { 0 };
        data.push(flags);
        data.extend_from_slice(&parts.port.to_le_bytes());
        data.extend_from_slice(&(self.params.len() as u32).to_le_bytes());
        for r in [parts.protocol, parts.path, parts.address] {
            data.extend_from_slice(&reloc(r).to_le_bytes());
        }
        for r in [parts.username, parts.password].into_iter().flatten() {
            data.extend_from_slice(&reloc(r).to_le_bytes());
        }
        if raw.is_some() {
            data.extend_from_slice(&(INLINE | raw_at as u32).to_le_bytes());
        }
        if wide {
            for &(k, v) in &self.params {
                data.extend_from_slice(&reloc(k).to_le_bytes());
                data.extend_from_slice(&reloc(v).to_le_bytes());
            }
        } else {
            for &(k, _) in &self.params {
                // Interned ids below 2^16 (checked above).
                data.extend_from_slice(&(k as u16).to_le_bytes());
            }
            for &(_, v) in &self.params {
                data.extend_from_slice(&reloc(v).to_le_bytes());
            }
        }
        data.extend_from_slice(&self.tail);
        if let Some(r) = raw {
            push_varint(&mut data, r.len());
            data.extend_from_slice(r.as_bytes());
        }
        Url {
            data: data.into_boxed_slice(),
        }
    }
}
