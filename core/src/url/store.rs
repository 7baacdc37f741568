//! The compact storage of one [`Url`]: one heap block per URL, its strings named by
//! interned ids or stored inline.
//!
//! The block is a [`triomphe::ThinArc`]: its reference count and length (8 bytes each),
//! then the bytes below, padded to 8.
//!
//! Layout of the bytes (little-endian), where `w` is the width of a reference: 3 bytes,
//! or 4 with the wide-references flag:
//!
//! | bytes | what |
//! |---|---|
//! | 0 | flags: user name, password, raw text kept, host written in brackets, wide keys, wide references, many parameters |
//! | 1..3 | port (`u16`) |
//! | 3 | number of parameters `n` (below 255; else the flag "many parameters") |
//! | 4, 4 + w, 4 + 2w | protocol, path, address (`host:port`): a reference each |
//! | then w each | user name, password, raw text (only those the flags name) |
//! | then 4 | `n` (`u32`), only with the flag "many parameters" |
//! | then `2 · n` | parameter keys sorted (16-bit interned ids) |
//! | or `w · n` | with wide keys (a key id past 16 bits, or an inline key): key references |
//! | then `w · n` | the parameters' value references, in the keys' order |
//! | rest | inline strings: a LEB128 length, then the UTF-8 bytes |
//!
//! A reference names a string: an id of the process-wide [interner](crate::intern) (top
//! bit clear) or, top bit set, the offset of an inline string in the block. In 3 bytes
//! (the common case) the id or offset has 23 bits: the interner gives at most 2^20 ids, and
//! a block's inline strings start below 8 MiB unless the URL is that long; a URL with an id
//! or offset past 23 bits (a raw text of 8 MiB...) has every reference in 4 bytes (31 bits),
//! flagged. A 3-byte reference at `at` is read as the little-endian `u32` at `at − 1`
//! shifted right by 8 (the byte before it always exists), so both widths are one load. The
//! raw text is kept only when the URL's canonical rendering (protocol, user info, address,
//! path, parameters sorted, `k=v` joined by `&`) differs from the text it was parsed from;
//! for the URLs a registry writes it does not.

use super::{Derived, Url};
use crate::intern::{self, Lookup};

/// Top bit of a reference (in its 32-bit form): the low bits are an inline string's
/// offset in the block.
pub(super) const INLINE: u32 = 1 << 31;
/// The largest id or offset a 3-byte reference holds, plus one.
pub(super) const NARROW_LIMIT: u32 = 1 << 23;

pub(super) const HAS_USERNAME: u8 = 1;
pub(super) const HAS_PASSWORD: u8 = 2;
pub(super) const HAS_RAW: u8 = 4;
pub(super) const BRACKETED: u8 = 8;
pub(super) const WIDE_KEYS: u8 = 16;
/// Every reference in 4 bytes (else 3).
pub(super) const WIDE_REFS: u8 = 32;
/// The parameter count is the `u32` before the parameter table (else the byte at
/// [`N_PARAMS`]).
pub(super) const MANY_PARAMS: u8 = 64;

pub(super) const PORT: usize = 1;
pub(super) const N_PARAMS: usize = 3;
/// The first reference: protocol, path, address, then the optional ones.
pub(super) const REFS: usize = 4;
/// Reference positions (in references from [`REFS`]).
pub(super) const PROTOCOL: usize = 0;
pub(super) const PATH: usize = 1;
pub(super) const ADDRESS: usize = 2;
/// The first optional reference.
pub(super) const OPTIONAL: usize = 3;
/// The most parameters counted in the byte at [`N_PARAMS`].
const FEW_PARAMS: usize = 254;

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

/// The width of the block's references: 3 bytes, or 4 with [`WIDE_REFS`].
#[inline]
pub(super) fn ref_width(flags: u8) -> usize {
    3 + usize::from(flags & WIDE_REFS != 0)
}

/// The reference of width `w` (3 or 4) at `at` in `data`: whether it is inline, and its
/// id or offset.
#[inline]
pub(super) fn ref_at(data: &[u8], at: usize, w: usize) -> (bool, u32) {
    // A 3-byte reference is the top three bytes of the `u32` ending with it (`at` ≥ 1: the
    // flags come first); its top bit lands on the `u32`'s top bit.
    let before = 4 - w;
    let raw = read_u32(data, at.wrapping_sub(before));
    (raw & INLINE != 0, (raw & !INLINE) >> (8 * before as u32))
}

/// The string named by the reference of width `w` (3 or 4) at `at` in `data`.
#[inline]
pub(super) fn string_at(data: &[u8], at: usize, w: usize) -> &str {
    match ref_at(data, at, w) {
        (false, id) => intern::resolve(id),
        (true, offset) => inline(data, offset as usize),
    }
}

/// The string a reference (in its 32-bit form) names, in `data`.
pub(super) fn string(data: &[u8], r: u32) -> &str {
    if r & INLINE == 0 {
        intern::resolve(r)
    } else {
        inline(data, (r & !INLINE) as usize)
    }
}

/// The reference `r` (32-bit form) as stored in `w` bytes (the low `w` bytes of the
/// result; 3: `r`'s id or offset is below [`NARROW_LIMIT`], its top bit moved to bit 23).
#[inline]
fn encode(r: u32, w: usize) -> u32 {
    if w == 3 {
        debug_assert!(r & !INLINE < NARROW_LIMIT);
        (r & !INLINE) | ((r & INLINE) >> 8)
    } else {
        r
    }
}

/// Writes the reference `r` (32-bit form) in `out`'s `w` bytes.
#[cfg(test)]
fn put_ref(out: &mut [u8], r: u32, w: usize) {
    put_refs(out, w, [r].into_iter());
}

/// Writes `refs` (32-bit form) in `out`, `w` bytes each (one loop per width, its stores of
/// constant size).
#[inline]
fn put_refs(out: &mut [u8], w: usize, refs: impl Iterator<Item = u32>) {
    fn each<const W: usize>(out: &mut [u8], refs: impl Iterator<Item = u32>) {
        for (o, r) in out.chunks_exact_mut(W).zip(refs) {
            o.copy_from_slice(&encode(r, W).to_le_bytes()[..W]);
        }
    }
    if w == 3 {
        each::<3>(out, refs);
    } else {
        each::<4>(out, refs);
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
const SLOTS: usize = REMEMBERED + Derived::ALL.len();
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
    /// The offset in the tail of the last string written there (0 when none).
    last_inline: usize,
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
            last_inline: 0,
        }
    }

    /// Writes `s` to the tail.
    pub(super) fn inline(&mut self, s: &str) -> u32 {
        let at = self.tail.len();
        self.last_inline = at;
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
    pub(super) fn derived(&mut self, key: Derived, s: &str) -> u32 {
        let at = REMEMBERED + key as usize;
        let w = way(s);
        if let Some(&(id, text)) = self.slots.get(at).map(|slot| &slot.values[w])
            && id != u32::MAX
            && text == s
        {
            return id;
        }
        let id = self.value(key.id(), s);
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
        (self.derived(Derived::Address, address), bracketed)
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
        (self.derived(Derived::Address, address), bracketed)
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
        let n_optional = optional.iter().flatten().count();
        let n = self.params.len();
        let many = n > FEW_PARAMS;
        // Keys are 16-bit ids unless one is not (an id past 16 bits, an inline key); the
        // ids and tail offsets OR-ed (below).
        let (wide_keys, ids) = self.params.iter().fold(
            (
                false,
                parts.protocol
                    | parts.path
                    | parts.address
                    | parts.username.unwrap_or(0)
                    | parts.password.unwrap_or(0),
            ),
            |(wide, ids), &(k, v)| (wide | (k >= u32::from(u16::MAX)), ids | k | v),
        );
        // Where the inline strings start with references of width `w`.
        let head = |w: usize| {
            REFS + w * (OPTIONAL + n_optional)
                + 4 * usize::from(many)
                + if wide_keys { w } else { 2 } * n
                + w * n
        };
        // 3-byte references when every id and every inline offset fits in 23 bits: the ids
        // (OR-ed; the interner's are below 2^20) and the last inline string's offset (the
        // raw text's when kept, else the tail's last string).
        let narrow_head = head(3);
        let last_offset = narrow_head
            + if raw.is_some() {
                self.tail.len()
            } else {
                self.last_inline
            };
        let narrow = ids & !INLINE < NARROW_LIMIT && last_offset < NARROW_LIMIT as usize;
        let w = if narrow { 3 } else { 4 };
        let head = head(w);
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
            | if wide_keys { WIDE_KEYS } else { 0 }
            | if narrow { 0 } else { WIDE_REFS }
            | if many { MANY_PARAMS } else { 0 };
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
        data[N_PARAMS] = if many { u8::MAX } else { n as u8 };
        // The header's references, without an iterator chain over the optional ones.
        let mut header = [
            reloc(parts.protocol),
            reloc(parts.path),
            reloc(parts.address),
            0,
            0,
            0,
        ];
        let mut count = OPTIONAL;
        for r in [
            parts.username.map(reloc),
            parts.password.map(reloc),
            raw.map(|_| INLINE | raw_at as u32),
        ]
        .into_iter()
        .flatten()
        {
            header[count] = r;
            count += 1;
        }
        let header_end = REFS + w * (OPTIONAL + n_optional);
        put_refs(
            &mut data[REFS..header_end],
            w,
            header[..count].iter().copied(),
        );
        let mut at = header_end;
        if many {
            data[at..at + 4].copy_from_slice(&(n as u32).to_le_bytes());
            at += 4;
        }
        if wide_keys {
            let keys = self.params.iter().map(|&(k, _)| reloc(k));
            put_refs(&mut data[at..at + w * n], w, keys);
            at += w * n;
        } else {
            for (key, &(k, _)) in data[at..at + 2 * n].chunks_exact_mut(2).zip(&self.params) {
                // Interned ids below 2^16 (checked above).
                key.copy_from_slice(&(k as u16).to_le_bytes());
            }
            at += 2 * n;
        }
        let values = self.params.iter().map(|&(_, v)| reloc(v));
        put_refs(&mut data[at..head], w, values);
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

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// A reference written in 3 bytes (payload below 2^23) or 4 (below 2^31) reads back,
        /// whatever the bytes around it.
        #[test]
        fn references_read_back_in_both_widths(
            narrow in 0u32..NARROW_LIMIT,
            wide in 0u32..INLINE,
            inline: bool,
            at in 1usize..8,
            fill: u8,
        ) {
            for (w, payload) in [(3, narrow), (4, wide)] {
                let mut data = vec![fill; at + w + 3];
                let r = payload | if inline { INLINE } else { 0 };
                put_ref(&mut data[at..at + w], r, w);
                proptest::prop_assert_eq!(ref_at(&data, at, w), (inline, payload));
                proptest::prop_assert!(data[..at].iter().chain(&data[at + w..]).all(|&b| b == fill));
            }
        }
    }

    #[test]
    fn references_at_the_narrow_boundaries() {
        for payload in [0, 1, (1 << 20) - 1, 1 << 20, NARROW_LIMIT - 1] {
            for inline in [false, true] {
                let mut data = [0xffu8; 8];
                let r = payload | if inline { INLINE } else { 0 };
                put_ref(&mut data[1..4], r, 3);
                assert_eq!(ref_at(&data, 1, 3), (inline, payload));
                assert_eq!(data[4], 0xff);
            }
        }
        for payload in [NARROW_LIMIT, NARROW_LIMIT + 1, INLINE - 1] {
            let mut data = [0u8; 8];
            put_ref(&mut data[1..5], payload | INLINE, 4);
            assert_eq!(ref_at(&data, 1, 4), (true, payload));
        }
    }

    /// An id past 23 bits (the interner gives none: this one is forged) makes every
    /// reference 4 bytes wide; the rest of the URL reads as before.
    #[test]
    fn an_id_past_23_bits_makes_the_references_wide() {
        let build = |forged: Option<u32>| {
            let lookup = Lookup::new();
            let mut b = Builder::new(&lookup, 4);
            let protocol = b.derived(Derived::Protocol, "dubbo");
            let (address, bracketed) = b.address("h", 1, "1");
            let path = b.derived(Derived::Path, "s");
            b.param("a", "1");
            b.param("b", "inline-value");
            b.param("c", "3");
            if let Some(id) = forged {
                b.params[2].1 = id;
            }
            let username = Some(b.inline("user"));
            b.finish(
                &Parts {
                    protocol,
                    path,
                    address,
                    username,
                    password: None,
                    port: 1,
                    bracketed,
                },
                None,
            )
        };
        for (forged, wide) in [
            (None, false),
            (Some((1 << 20) - 1), false),
            (Some(NARROW_LIMIT - 1), false),
            (Some(NARROW_LIMIT), true),
            (Some(INLINE - 1), true),
        ] {
            let u = build(forged);
            assert_eq!(u.flags() & WIDE_REFS != 0, wide, "{forged:?}");
            assert_eq!(
                (u.protocol(), u.address(), u.path(), u.username()),
                ("dubbo", "h:1", "s", Some("user"))
            );
            assert_eq!(u.param("a"), Some("1"));
            assert_eq!(u.param("b"), Some("inline-value"));
            // A forged id reads back as that id (the interner resolves it, to `""` when it
            // gave no such id), in either width.
            let c = forged.map_or("3", intern::resolve);
            assert_eq!(u.param("c"), Some(c));
        }
    }
}
