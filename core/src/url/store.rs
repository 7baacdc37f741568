//! The compact storage of one [`Url`]: one heap block per URL, its strings named by
//! interned ids or stored inline.
//!
//! The block is a [`triomphe::ThinArc`]: its reference count and length (8 bytes each),
//! then the bytes below, padded to 8.
//!
//! Layout of the bytes (little-endian):
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

/// The most parameter positions [`MEMO`] remembers.
const REMEMBERED: usize = 64;
/// The memo's slots: the parameter positions, then the derived keys (protocol, path...).
const SLOTS: usize = REMEMBERED + super::DERIVED_KEYS.len();
/// Values remembered per position (direct-mapped by [`way`]).
const WAYS: usize = 8;

/// One parameter position of the URLs parsed on this thread: the interned key last seen
/// there and interned values seen there, each with its text.
#[derive(Clone, Copy)]
struct Slot {
    key: u32,
    /// The key's text; `None`: nothing remembered at this position.
    key_text: Option<&'static str>,
    /// Interned value ids with their text, at [`way`] of the text.
    values: [(u32, &'static str); WAYS],
}

const EMPTY_SLOT: Slot = Slot {
    key: 0,
    key_text: None,
    values: [(u32::MAX, ""); WAYS],
};

/// The way of a value's text: its length and last byte, mixed (values of one key differ
/// in these far more often than not).
#[inline]
fn way(text: &str) -> usize {
    let last = text.as_bytes().last().copied().unwrap_or(0) as usize;
    (text.len().wrapping_mul(5) ^ last) % WAYS
}

/// A parse-time cache of one thread, taken by a [`Builder`] while it builds and given back
/// when it is dropped: calls never read it.
///
/// The URLs of one provider list repeat their keys in the same order and most values
/// across providers, so the interned key at a parameter's position and an interned value
/// seen at that position before usually name this parameter: comparing texts with them
/// costs less than hashing. Only interned references are remembered (an inline one belongs
/// to its own URL), with their `&'static` text, so a hit resolves nothing. The builder's
/// scratch lists are kept here too, so a parse allocates only the URL's block. One
/// allocation per thread (64 positions and the 5 derived keys, 8 values each: ≈ 14 KB),
/// never grown.
#[derive(Default)]
struct Memo {
    slots: Vec<Slot>,
    tail: Vec<u8>,
    params: Vec<(u32, u32)>,
}

thread_local! {
    static MEMO: std::cell::Cell<Memo> = std::cell::Cell::new(Memo::default());
}

/// The order of two keys, decided on the first byte when it differs (without a call to
/// compare the rest).
#[inline]
fn key_order(a: &str, b: &str) -> std::cmp::Ordering {
    match (a.as_bytes().first(), b.as_bytes().first()) {
        (Some(x), Some(y)) if x != y => x.cmp(y),
        _ => a.cmp(b),
    }
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
    /// This thread's memo (see [`Memo`]), given back on drop.
    slots: Vec<Slot>,
}

impl Drop for Builder<'_> {
    fn drop(&mut self) {
        let mut tail = std::mem::take(&mut self.tail);
        let mut params = std::mem::take(&mut self.params);
        tail.clear();
        params.clear();
        let slots = std::mem::take(&mut self.slots);
        // (A thread being torn down has no memo to give back to.)
        let _ = MEMO.try_with(|m| {
            m.set(Memo {
                slots,
                tail,
                params,
            })
        });
    }
}

impl<'l> Builder<'l> {
    pub(super) fn new(lookup: &'l Lookup, params: usize) -> Self {
        let mut memo = MEMO.try_with(|m| m.take()).unwrap_or_default();
        if memo.slots.len() != SLOTS {
            memo.slots = vec![EMPTY_SLOT; SLOTS];
        }
        memo.tail.reserve(48);
        memo.params.reserve(params);
        Builder {
            lookup,
            tail: memo.tail,
            params: memo.params,
            slots: memo.slots,
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

    /// A value of one of the derived keys (remembered per key, as parameters are per
    /// position).
    pub(super) fn derived(&mut self, key: usize, s: &str) -> u32 {
        let at = REMEMBERED + key;
        let w = way(s);
        if let Some(&(id, text)) = self.slots.get(at).map(|slot| &slot.values[w])
            && id != u32::MAX
            && text == s
        {
            return id;
        }
        let id = self.value(intern::derived_key(key), s);
        if id & INLINE == 0
            && let Some(slot) = self.slots.get_mut(at)
        {
            slot.values[w] = (id, intern::resolve(id));
        }
        id
    }

    /// One query parameter, in the order written.
    pub(super) fn param(&mut self, k: &str, v: &str) {
        let at = self.params.len();
        // The key last seen at this position on this thread, and a value seen there: when
        // they are this text, no look-up is needed.
        let pair = match self.slots.get(at) {
            Some(slot) if slot.key_text == Some(k) => {
                let key = slot.key;
                let w = way(v);
                match slot.values[w] {
                    (id, text) if id != u32::MAX && text == v => (key, id),
                    _ => {
                        let value = self.value(key, v);
                        if value & INLINE == 0 {
                            self.slots[at].values[w] = (value, intern::resolve(value));
                        }
                        (key, value)
                    }
                }
            }
            _ => {
                let key = self.key(k);
                let value = self.value(key, v);
                if key & INLINE == 0
                    && let Some(slot) = self.slots.get_mut(at)
                {
                    *slot = EMPTY_SLOT;
                    slot.key = key;
                    slot.key_text = Some(intern::resolve(key));
                    if value & INLINE == 0 {
                        slot.values[way(v)] = (value, intern::resolve(value));
                    }
                }
                (key, value)
            }
        };
        self.params.push(pair);
    }

    /// The address as the input wrote it, when that is its rendering (`host:port`, brackets
    /// around a host holding `:`, the port's canonical digits), and whether it is bracketed.
    pub(super) fn address_as_written(&mut self, address: &str, bracketed: bool) -> (u32, bool) {
        (self.derived(KEY_ADDRESS, address), bracketed)
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
        if sorted {
            return;
        }
        // Each key's text read once (on the stack for up to 64 parameters).
        const STACK: usize = 64;
        let n = self.params.len();
        let mut stack = [("", (0u32, 0u32)); STACK];
        let mut heap = Vec::new();
        let keyed: &mut [(&str, (u32, u32))] = if n <= STACK {
            &mut stack[..n]
        } else {
            heap.resize(n, ("", (0, 0)));
            &mut heap
        };
        for (slot, &param) in keyed.iter_mut().zip(&self.params) {
            *slot = (string(&self.tail, param.0), param);
        }
        if keyed.windows(2).all(|w| key_order(w[0].0, w[1].0).is_lt()) {
            return;
        }
        // Stable: occurrences of one key stay in the order written; keep the last.
        keyed.sort_by(|a, b| key_order(a.0, b.0));
        self.params.clear();
        let mut last: Option<&str> = None;
        for &(k, param) in keyed.iter() {
            if last == Some(k) {
                if let Some(p) = self.params.last_mut() {
                    *p = param;
                }
            } else {
                self.params.push(param);
                last = Some(k);
            }
        }
    }

    /// The URL's block, with `raw` kept when given.
    pub(super) fn finish(&self, parts: &Parts, raw: Option<&str>) -> Url {
        let optional = [parts.username, parts.password, raw.map(|_| 0)];
        // Keys are 16-bit ids unless one is not (an id past 16 bits, an inline key).
        let wide = self.params.iter().any(|&(k, _)| k >= u32::from(u16::MAX));
        let per_param = if wide { 8 } else { 6 };
        debug_assert_eq!(PROTOCOL + 12, FIXED);
        let head = FIXED + 4 * optional.iter().flatten().count() + per_param * self.params.len();
        let raw_at = head + self.tail.len();
        let total = raw_at + raw.map_or(0, |r| varint_len(r.len()) + r.len());
        let reloc = |r: u32| {
            if r & INLINE != 0 { r + head as u32 } else { r }
        };
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
        // Written in place into a buffer of the block's final size (fixed-size stores, no
        // growth), on the stack for the URLs a registry writes, then copied into the block:
        // the URL's one allocation.
        const STACK: usize = 512;
        let mut stack = [0u8; STACK];
        let mut heap = Vec::new();
        let data: &mut [u8] = if total <= STACK {
            &mut stack[..total]
        } else {
            heap.resize(total, 0);
            &mut heap
        };
        data[0] = flags;
        data[PORT..PORT + 2].copy_from_slice(&parts.port.to_le_bytes());
        data[N_PARAMS..N_PARAMS + 4].copy_from_slice(&(self.params.len() as u32).to_le_bytes());
        let mut at = PROTOCOL;
        let mut put = |data: &mut [u8], bytes: &[u8]| {
            data[at..at + bytes.len()].copy_from_slice(bytes);
            at += bytes.len();
        };
        for r in [parts.protocol, parts.path, parts.address] {
            put(data, &reloc(r).to_le_bytes());
        }
        for r in [parts.username, parts.password].into_iter().flatten() {
            put(data, &reloc(r).to_le_bytes());
        }
        if raw.is_some() {
            put(data, &(INLINE | raw_at as u32).to_le_bytes());
        }
        let n = self.params.len();
        let table = &mut data[at..at + per_param * n];
        if wide {
            for (out, &(k, v)) in table.chunks_exact_mut(8).zip(&self.params) {
                out[..4].copy_from_slice(&reloc(k).to_le_bytes());
                out[4..].copy_from_slice(&reloc(v).to_le_bytes());
            }
        } else {
            let (keys, values) = table.split_at_mut(2 * n);
            for ((key, value), &(k, v)) in keys
                .chunks_exact_mut(2)
                .zip(values.chunks_exact_mut(4))
                .zip(&self.params)
            {
                // Interned ids below 2^16 (checked above).
                key.copy_from_slice(&(k as u16).to_le_bytes());
                value.copy_from_slice(&reloc(v).to_le_bytes());
            }
        }
        data[head..raw_at].copy_from_slice(&self.tail);
        if let Some(r) = raw {
            let mut len = Vec::with_capacity(5);
            push_varint(&mut len, r.len());
            data[raw_at..raw_at + len.len()].copy_from_slice(&len);
            data[raw_at + len.len()..].copy_from_slice(r.as_bytes());
        }
        Url {
            data: triomphe::ThinArc::from_header_and_slice((), data),
        }
    }
}
