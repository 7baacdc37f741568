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

use std::borrow::Cow;
use std::fmt;

/// The keys derived from the URL's structure rather than its query parameters.
///
/// `port` is present only when the port is greater than zero; `address` is `host:port`, or
/// `host` alone when there is no port.
pub const DERIVED_KEYS: [&str; 5] = ["protocol", "host", "port", "path", "address"];

/// A span `start..end` into a URL's text buffer.
#[derive(Clone, Copy, PartialEq, Eq, Default)]
struct Span(u32, u32);

/// A parsed Dubbo-style URL.
///
/// Stored compactly (the snapshot holds one per provider): the raw text, plus one buffer
/// holding every decoded part and parameter, addressed by 32-bit spans.
#[derive(Clone, PartialEq, Eq)]
pub struct Url {
    raw: Box<str>,
    text: Box<str>,
    protocol: Span,
    username: Option<Span>,
    password: Option<Span>,
    host: Span,
    port_text: Span,
    address: Span,
    path: Span,
    /// Sorted by key, one entry per key (last occurrence wins).
    params: Box<[(Span, Span)]>,
    port: u16,
}

/// Builds the compact buffer of a URL.
struct Assembler {
    text: String,
}

impl Assembler {
    fn push(&mut self, s: &str) -> Span {
        let start = self.text.len() as u32;
        self.text.push_str(s);
        Span(start, self.text.len() as u32)
    }

    /// `host:port` (IPv6 hosts in brackets), or the host alone when there is no port,
    /// written straight into the buffer.
    fn push_address(&mut self, host: &str, port: u16, port_text: &str) -> Span {
        let start = self.text.len() as u32;
        let ipv6 = host.contains(':');
        if ipv6 {
            self.text.push('[');
        }
        self.text.push_str(host);
        if ipv6 {
            self.text.push(']');
        }
        if port > 0 {
            self.text.push(':');
            self.text.push_str(port_text);
        }
        Span(start, self.text.len() as u32)
    }
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

#[allow(clippy::too_many_arguments)]
fn assemble<S: AsRef<str>>(
    raw: Option<&str>,
    protocol: &str,
    username: Option<&str>,
    password: Option<&str>,
    host: &str,
    port: u16,
    path: &str,
    mut params: Vec<(S, S)>,
) -> Url {
    normalize_params(&mut params);
    let port_text = PortText::new(port);
    let port_text = port_text.as_str();
    let capacity = protocol.len()
        + username.map_or(0, str::len)
        + password.map_or(0, str::len)
        + host.len() * 2
        + port_text.len() * 2
        + 3
        + path.len()
        + params
            .iter()
            .map(|(k, v)| k.as_ref().len() + v.as_ref().len())
            .sum::<usize>();
    let mut a = Assembler {
        text: String::with_capacity(capacity),
    };
    let protocol_span = a.push(protocol);
    let username = username.map(|u| a.push(u));
    let password = password.map(|p| a.push(p));
    let host_span = a.push(host);
    let port_span = a.push(port_text);
    let address = a.push_address(host, port, port_text);
    let path_span = a.push(path);
    let params: Box<[(Span, Span)]> = params
        .iter()
        .map(|(k, v)| (a.push(k.as_ref()), a.push(v.as_ref())))
        .collect();
    let mut url = Url {
        raw: raw.unwrap_or("").into(),
        text: a.text.into_boxed_str(),
        protocol: protocol_span,
        username,
        password,
        host: host_span,
        port_text: port_span,
        address,
        path: path_span,
        params,
        port,
    };
    if raw.is_none() {
        url.raw = url.to_string().into();
    }
    url
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
        assemble::<&str>(Some(""), "", None, None, "", 0, "", Vec::new())
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
        let params: Vec<(&str, &str)> = params.into_iter().collect();
        assemble(
            None,
            protocol,
            None,
            None,
            host,
            port,
            path.trim_start_matches('/'),
            params,
        )
    }

    /// Heap bytes held by this URL (raw text, decoded buffer, parameter table).
    pub fn heap_bytes(&self) -> usize {
        self.raw.len() + self.text.len() + self.params.len() * std::mem::size_of::<(Span, Span)>()
    }

    fn span(&self, span: Span) -> &str {
        &self.text[span.0 as usize..span.1 as usize]
    }

    /// The text this URL was parsed from (or rendered to, for [`Url::from_parts`]).
    pub fn raw(&self) -> &str {
        &self.raw
    }
    /// The protocol (`dubbo`, `tri`, `mock`...); empty when the URL had none.
    pub fn protocol(&self) -> &str {
        self.span(self.protocol)
    }
    /// The user name before `@`, if any.
    pub fn username(&self) -> Option<&str> {
        self.username.map(|s| self.span(s))
    }
    /// The password after `user:`, if any.
    pub fn password(&self) -> Option<&str> {
        self.password.map(|s| self.span(s))
    }
    /// The host, without brackets for IPv6.
    pub fn host(&self) -> &str {
        self.span(self.host)
    }
    /// The port; 0 when the URL had none.
    pub fn port(&self) -> u16 {
        self.port
    }
    /// `host:port` (IPv6 hosts in brackets), or the host alone when there is no port.
    pub fn address(&self) -> &str {
        self.span(self.address)
    }
    /// The path without its leading `/`.
    pub fn path(&self) -> &str {
        self.span(self.path)
    }
    /// A query parameter (not the derived keys).
    pub fn param(&self, key: &str) -> Option<&str> {
        self.params
            .binary_search_by(|(k, _)| self.span(*k).cmp(key))
            .ok()
            .map(|i| self.span(self.params[i].1))
    }
    /// Every query parameter, sorted by key.
    pub fn params(&self) -> impl ExactSizeIterator<Item = (&str, &str)> + '_ {
        self.params
            .iter()
            .map(|(k, v)| (self.span(*k), self.span(*v)))
    }
    /// The value a matcher sees for `key`: a derived key (`protocol`, `host`, `port` when
    /// greater than zero, `path`, `address`) or else the query parameter.
    pub fn get(&self, key: &str) -> Option<&str> {
        match key {
            "protocol" => Some(self.span(self.protocol)),
            "host" => Some(self.span(self.host)),
            "port" => (self.port > 0).then(|| self.span(self.port_text)),
            "path" => Some(self.span(self.path)),
            "address" => Some(self.span(self.address)),
            _ => self.param(key),
        }
    }
}

/// Sorts the parameters by key and keeps the last occurrence of each key (as Dubbo does).
fn normalize_params<S: AsRef<str>>(params: &mut Vec<(S, S)>) {
    // Stable sort keeps occurrence order within a key; keep the last one.
    params.sort_by(|a, b| a.0.as_ref().cmp(b.0.as_ref()));
    let mut kept = 0;
    for read in 0..params.len() {
        if kept > 0 && params[kept - 1].0.as_ref() == params[read].0.as_ref() {
            params.swap(kept - 1, read);
        } else {
            params.swap(kept, read);
            kept += 1;
        }
    }
    params.truncate(kept);
}

/// The query bytes the parameter scanner stops at: `&`, `=` and `%`.
static QUERY_SPECIAL: [bool; 256] = {
    let mut table = [false; 256];
    table[b'&' as usize] = true;
    table[b'=' as usize] = true;
    table[b'%' as usize] = true;
    table
};

/// [`normalize_params`] for spans into `text`.
fn normalize_spans(params: &mut Vec<(Span, Span)>, text: &str) {
    let key = |span: &Span| &text[span.0 as usize..span.1 as usize];
    params.sort_by(|a, b| key(&a.0).cmp(key(&b.0)));
    let mut kept = 0;
    for read in 0..params.len() {
        if kept > 0 && key(&params[kept - 1].0) == key(&params[read].0) {
            params[kept - 1] = params[read];
        } else {
            params[kept] = params[read];
            kept += 1;
        }
    }
    params.truncate(kept);
}

impl fmt::Display for Url {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.raw.is_empty() {
            return f.write_str(&self.raw);
        }
        if !self.protocol().is_empty() {
            write!(f, "{}://", self.protocol())?;
        }
        f.write_str(self.address())?;
        if !self.path().is_empty() {
            write!(f, "/{}", self.path())?;
        }
        for (i, (k, v)) in self.params().enumerate() {
            write!(f, "{}{}={}", if i == 0 { '?' } else { '&' }, k, v)?;
        }
        Ok(())
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
        let (protocol, rest, rest_start) = match before_query.find("://") {
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
        let (authority, path, path_start) = match rest.find('/') {
            Some(p) => (&rest[..p], &rest[p + 1..], rest_start + p + 1),
            None => (rest, "", rest_start + rest.len()),
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
        let (host, port) = self.host_port(hostport, hostport_start)?;
        if protocol.is_empty() && host.is_empty() {
            return Err(self.err(0, "no protocol and no host"));
        }
        let path = self.decode(path, path_start)?;
        // One buffer for every part: the structural parts, then each parameter key and
        // value in the order written; the parameter table is sorted afterwards (by key,
        // last occurrence winning) without moving any text.
        let port_text = PortText::new(port);
        let port_text = port_text.as_str();
        let mut a = Assembler {
            text: String::with_capacity(s.len() + host.len() + 2 * port_text.len() + 3),
        };
        let protocol_span = a.push(protocol);
        let username = username.map(|u| a.push(&u));
        let password = password.map(|p| a.push(&p));
        let host_span = a.push(&host);
        let port_span = a.push(port_text);
        let address = a.push_address(&host, port, port_text);
        let path_span = a.push(&path);
        let mut params: Vec<(Span, Span)> = Vec::new();
        if let Some(query) = query {
            // One pass over the query's bytes: `&` ends a parameter, its first `=` splits
            // key from value, and a `%` marks the part that needs decoding.
            let bytes = query.as_bytes();
            params.reserve_exact(16);
            let mut part_start = 0;
            let mut eq: Option<usize> = None;
            let mut key_percent = false;
            let mut value_percent = false;
            let mut i = 0;
            loop {
                // Runs of ordinary bytes are skipped with one table lookup each.
                while i < bytes.len() && !QUERY_SPECIAL[bytes[i] as usize] {
                    i += 1;
                }
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
                                a.push(&self.decode(k, offset)?)
                            } else {
                                a.push(k)
                            };
                            let v = if v_percent {
                                a.push(&self.decode(v, v_off)?)
                            } else {
                                a.push(v)
                            };
                            params.push((k, v));
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
        let text = a.text;
        let key = |span: &Span| &text[span.0 as usize..span.1 as usize];
        if !params.windows(2).all(|w| key(&w[0].0) < key(&w[1].0)) {
            normalize_spans(&mut params, &text);
        }
        Ok(Url {
            raw: s.into(),
            text: text.into_boxed_str(),
            protocol: protocol_span,
            username,
            password,
            host: host_span,
            port_text: port_span,
            address,
            path: path_span,
            params: params.into_boxed_slice(),
            port,
        })
    }

    fn host_port<'a>(&self, hp: &'a str, start: usize) -> Result<(Cow<'a, str>, u16), UrlError> {
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
        Ok((host, port))
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
mod tests {
    use super::*;

    #[test]
    fn parses_a_dubbo_provider_url() {
        let u = Url::parse("dubbo://10.20.3.3:20880/com.foo.BarService?region=hz&dubbo.tag=gray")
            .unwrap();
        assert_eq!(u.protocol(), "dubbo");
        assert_eq!(u.host(), "10.20.3.3");
        assert_eq!(u.port(), 20880);
        assert_eq!(u.path(), "com.foo.BarService");
        assert_eq!(u.address(), "10.20.3.3:20880");
        assert_eq!(u.get("port"), Some("20880"));
        assert_eq!(u.get("region"), Some("hz"));
        assert_eq!(u.get("dubbo.tag"), Some("gray"));
        assert_eq!(u.get("missing"), None);
    }

    #[test]
    fn port_zero_is_absent_and_address_is_host() {
        let u = Url::parse("consumer://10.0.0.1/svc?application=a").unwrap();
        assert_eq!(u.port(), 0);
        assert_eq!(u.get("port"), None);
        assert_eq!(u.address(), "10.0.0.1");
    }

    #[test]
    fn ipv6_percent_decoding_and_last_key_wins() {
        let u = Url::parse("tri://[::1]:50051/a%2Fb?k=1&k=2&n%61me=v%20x&flag").unwrap();
        assert_eq!(u.host(), "::1");
        assert_eq!(u.address(), "[::1]:50051");
        assert_eq!(u.path(), "a/b");
        assert_eq!(u.param("k"), Some("2"));
        assert_eq!(u.param("name"), Some("v x"));
        assert_eq!(u.param("flag"), Some("flag"));
    }

    #[test]
    fn user_info_is_split() {
        let u = Url::parse("zookeeper://admin:secret@127.0.0.1:2181").unwrap();
        assert_eq!(u.username(), Some("admin"));
        assert_eq!(u.password(), Some("secret"));
        assert_eq!(u.host(), "127.0.0.1");
    }

    #[test]
    fn malformed_urls_are_located_errors() {
        for (input, column) in [
            ("dubbo://10.0.0.1:99999/x", 18),
            ("dubbo://10.0.0.1:/x", 18),
            ("dubbo://[::1/x", 9),
            ("dubbo://h/x?a=%ff", 15),
            ("dubbo://h/x?=v", 13),
            ("dub bo://h", 4),
            ("://h", 1),
            ("", 1),
            ("dubbo://::1:80/x", 9),
        ] {
            let e = Url::parse(input).expect_err(input);
            assert_eq!(e.column, column, "{input}: {e}");
            assert_eq!(e.input, input);
        }
    }

    #[test]
    fn a_bare_percent_is_kept_and_parse_as_written_decodes_nothing() {
        let u = Url::parse("dubbo://h:1/x?discount=100%&a=%zz&b=50%25&c=a+b").unwrap();
        assert_eq!(u.param("discount"), Some("100%"));
        assert_eq!(u.param("a"), Some("%zz"));
        assert_eq!(u.param("b"), Some("50%"));
        assert_eq!(u.param("c"), Some("a+b"));
        let w = Url::parse_as_written("dubbo://h:1/x%2Fy?b=50%25&m=a%2Cb").unwrap();
        assert_eq!(w.path(), "x%2Fy");
        assert_eq!(w.param("b"), Some("50%25"));
        assert_eq!(w.param("m"), Some("a%2Cb"));
    }

    #[test]
    fn from_parts_renders_and_reparses() {
        let u = Url::from_parts("dubbo", "10.0.0.9", 20880, "svc", [("b", "2"), ("a", "1")]);
        assert_eq!(u.raw(), "dubbo://10.0.0.9:20880/svc?a=1&b=2");
        assert_eq!(Url::parse(u.raw()).unwrap().param("b"), Some("2"));
    }

    #[test]
    fn last_of_many_duplicates_wins_in_any_order() {
        let u = Url::parse("dubbo://h:1/x?b=1&a=1&b=2&a=%32&c&b=3").unwrap();
        let params: Vec<_> = u.params().collect();
        assert_eq!(params, vec![("a", "2"), ("b", "3"), ("c", "c")]);
        // Already sorted input takes the no-sort path; equal neighbours still collapse.
        let u = Url::parse("dubbo://h:1/x?a=1&a=2&b=1").unwrap();
        assert_eq!(u.params().collect::<Vec<_>>(), vec![("a", "2"), ("b", "1")]);
        assert_eq!(u.to_string(), "dubbo://h:1/x?a=1&a=2&b=1");
        assert_eq!(u.get("port"), Some("1"));
        assert_eq!(u.address(), "h:1");
    }

    /// The query as Dubbo reads it, written the obvious way: split on `&`, the first `=`
    /// splits key from value (a bare key is its own value), decode, last key wins.
    fn reference_params(query: &str) -> Option<Vec<(String, String)>> {
        let mut map = std::collections::BTreeMap::new();
        for part in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = part.split_once('=').unwrap_or((part, part));
            if k.is_empty() {
                return None;
            }
            let decode = |t: &str| {
                percent_encoding::percent_decode_str(t)
                    .decode_utf8()
                    .ok()
                    .map(|d| d.into_owned())
            };
            map.insert(decode(k)?, decode(v)?);
        }
        Some(map.into_iter().collect())
    }

    proptest::proptest! {
        #[test]
        fn query_parameters_match_the_reference(query in "[a-c=&%2-4]{0,24}") {
            let url = Url::parse(&format!("dubbo://10.0.0.1:20880/svc?{query}"));
            match (url, reference_params(&query)) {
                (Ok(url), Some(expected)) => {
                    let got: Vec<(String, String)> =
                        url.params().map(|(k, v)| (k.to_string(), v.to_string())).collect();
                    proptest::prop_assert_eq!(got, expected);
                }
                (Err(_), None) => {}
                (url, expected) => proptest::prop_assert!(false, "{url:?} vs {expected:?}"),
            }
        }

        #[test]
        fn parse_never_panics(s in "\\PC*") {
            let _ = Url::parse(&s);
        }

        #[test]
        fn parse_never_panics_on_url_like(s in "[a-z]{0,5}(://)?\\[?[0-9a-f:.%]{0,12}\\]?(:[0-9]{0,6})?(/[a-z%0-9]{0,5})?(\\?[a-z=&%0-9]{0,12})?") {
            let _ = Url::parse(&s);
        }
    }
}
