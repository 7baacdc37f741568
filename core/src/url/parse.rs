//! Parsing a URL's text into its block: one pass over the text, strings interned or
//! written inline as they are read (see the module documentation of [`Url`]).

use std::borrow::Cow;

use super::store::{Builder, Parts};
use super::{Derived, PortText, Url};
use crate::intern::Lookup;

/// The longest URL parsed (the block's inline offsets are 31-bit).
const MAX_URL_LEN: usize = 256 << 20;

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

    /// Parses a provider's URL: [`Url::parse`], and the URL must start with its protocol
    /// and `://` and name a host. (`Url::parse` takes `dubbo//10.0.0.1:20880/svc` as the
    /// host `dubbo` with the path `10.0.0.1:20880/svc`, as Dubbo reads a URL without a
    /// protocol; in a provider list that is a typing mistake, not a provider.)
    pub fn parse_provider(input: &str) -> Result<Self, UrlError> {
        let parser = Parser {
            input,
            decode: true,
        };
        let bytes = input.as_bytes();
        let scheme = bytes
            .iter()
            .take_while(|&&c| c.is_ascii_alphanumeric() || b"+-._".contains(&c))
            .count();
        let after = &bytes[scheme..];
        let mistyped = scheme > 0
            && bytes[0].is_ascii_alphabetic()
            && !after.starts_with(b"://")
            && (after.starts_with(b"/")
                || after.starts_with(b":") && !after.get(1).is_some_and(u8::is_ascii_digit));
        if mistyped {
            return Err(parser.err(
                scheme,
                format!("expected `://` after the protocol `{}`", &input[..scheme]),
            ));
        }
        let url = parser.parse()?;
        if url.protocol().is_empty() {
            return Err(parser.err(
                0,
                "a provider URL starts with its protocol and `://` (dubbo://host:port/service)",
            ));
        }
        if url.host().is_empty() {
            return Err(parser.err(scheme + 3, "no host after `://`"));
        }
        Ok(url)
    }
}

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
        let protocol = b.derived(Derived::Protocol, protocol);
        // User info stays in the URL: credentials are not shared through a process-wide table.
        let username = username.map(|u| b.inline(&u));
        let password = password.map(|p| b.inline(&p));
        // The address as written is the rendered one when the host and port are canonical.
        let (address, bracketed) = if host_port_canonical {
            b.address_as_written(hostport, host.contains(':'))
        } else {
            b.address(&host, port, port_text)
        };
        let path = b.derived(Derived::Path, &path);
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
