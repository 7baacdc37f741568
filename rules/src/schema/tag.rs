//! The tag rule: the document Dubbo keeps under `<provider-app>.tag-router`, as written
//! ([`RawTagRule`]) and compiled ([`TagRule`]: address patterns parsed, regexes compiled).
//!
//! ```yaml
//! configVersion: v3.0
//! force: false            # only refuses the fallback when a dynamic tag's addresses match nothing
//! enabled: true
//! key: demo-provider
//! tags:
//!   - name: gray
//!     addresses: ["10.0.0.1:20880", "10.0.1.*", "10.0.2.0/24", "0.0.0.0:20881"]
//!   - name: beta|team1            # hierarchical: a request for beta|team1|x falls back to it
//!     match:                      # used when `addresses` is empty (configVersion v3.0 only)
//!       - key: env
//!         value: {exact: beta}    # exact | prefix | regex | wildcard | empty | noempty
//! ```
//!
//! Every problem (no `tags`, a bad address pattern or CIDR, an unknown match kind, an
//! invalid regex, a mistyped field) is reported at once, each with its field path.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv6Addr};

use routechain_core::{FieldPath, RuleDoc, RuleError};
use serde::Deserialize;
use serde_json::Value;

pub use super::dubbo::DubboBool;
use super::dubbo::is_enabled;

/// The tag rule as written. Unknown fields are errors (they are typos: Dubbo reads no other).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawTagRule {
    /// `configVersion`: `v3.0` enables `match`; older versions only know `addresses`.
    #[serde(default)]
    pub config_version: Option<String>,
    /// `scope` (informational for tag rules).
    #[serde(default)]
    pub scope: Option<String>,
    /// `key`: the provider application the rule is for (informational).
    #[serde(default)]
    pub key: Option<String>,
    /// `enabled` (default true): a disabled rule leaves static-tag routing.
    #[serde(default)]
    pub enabled: Option<DubboBool>,
    /// `force` (default false): a dynamic tag whose addresses match nothing returns empty.
    #[serde(default)]
    pub force: Option<DubboBool>,
    /// `runtime` (parsed; the tag router always routes per request).
    #[serde(default)]
    pub runtime: Option<DubboBool>,
    /// `valid` (default true): `false` disables the rule, as in Dubbo.
    #[serde(default)]
    pub valid: Option<DubboBool>,
    /// `dynamic` (parsed, ignored as in Dubbo).
    #[serde(default)]
    pub dynamic: Option<DubboBool>,
    /// `priority` (parsed, ignored: the chain file orders routers).
    #[serde(default)]
    pub priority: Option<i64>,
    /// `tags`: required and non-empty.
    #[serde(default)]
    pub tags: Option<Vec<RawTag>>,
}

/// One tag as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTag {
    /// `name`: the tag requests carry in `dubbo.tag`; `|` separates levels.
    #[serde(default)]
    pub name: Option<String>,
    /// `addresses`: address patterns.
    #[serde(default)]
    pub addresses: Option<Vec<String>>,
    /// `match`: parameter conditions, used when `addresses` is empty (v3.0 rules).
    #[serde(default, rename = "match")]
    pub matches: Option<Vec<RawParamMatch>>,
}

/// One `match` entry as written: `{key, value: {kind: text}}`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawParamMatch {
    /// The provider URL parameter.
    #[serde(default)]
    pub key: Option<String>,
    /// The string match, kind → text (validated by hand so that every unknown kind is
    /// reported).
    #[serde(default)]
    pub value: Option<BTreeMap<String, Value>>,
}

/// A compiled tag rule.
#[derive(Debug, Clone)]
pub struct TagRule {
    /// `enabled` and `valid`: when false the router does static-tag routing only.
    pub enabled: bool,
    /// The rule's `force`.
    pub force: bool,
    /// `runtime` as written (default true).
    pub runtime: bool,
    /// `key`, if written.
    pub key: Option<String>,
    /// `configVersion`, if written.
    pub config_version: Option<String>,
    /// The tags in document order.
    pub tags: Vec<TagSpec>,
}

impl TagRule {
    /// True when `match` entries are honoured: Dubbo reads them only when `configVersion`
    /// starts with `v3.0`.
    pub fn uses_match(&self) -> bool {
        self.config_version
            .as_deref()
            .is_some_and(|v| v.starts_with("v3.0"))
    }
}

/// One compiled tag.
#[derive(Debug, Clone)]
pub struct TagSpec {
    /// The tag name.
    pub name: String,
    /// The address patterns (empty when the tag has none).
    pub addresses: Vec<AddressPattern>,
    /// The `match` entries, all of which must hold (`None` when absent).
    pub matches: Option<Vec<ParamMatch>>,
}

/// One compiled `match` entry.
#[derive(Debug, Clone)]
pub struct ParamMatch {
    /// The provider URL parameter.
    pub key: String,
    /// The string match; `None` (no `value`) never matches, as in Dubbo.
    pub value: Option<StringMatch>,
}

impl ParamMatch {
    /// True when the provider's parameter value (`None` when absent) satisfies the entry.
    pub fn is_match(&self, input: Option<&str>) -> bool {
        self.value.as_ref().is_some_and(|v| v.is_match(input))
    }
}

/// Dubbo's `StringMatch`: the first kind that is set and applicable decides.
#[derive(Debug, Clone, Default)]
pub struct StringMatch {
    /// `exact`: equal.
    pub exact: Option<String>,
    /// `prefix`: starts with.
    pub prefix: Option<String>,
    /// `regex`: the whole value matches (anchored at both ends, as Java's `String.matches`).
    pub regex: Option<regex::Regex>,
    /// `wildcard`: `*` matches any present value, anything else must be equal (Dubbo
    /// supports only `*`).
    pub wildcard: Option<String>,
    /// `empty`: absent or empty.
    pub empty: bool,
    /// `noempty`: present and non-empty.
    pub noempty: bool,
}

impl StringMatch {
    /// Dubbo's decision: exact, prefix, regex and wildcard apply only to a present value; a
    /// kind that does not apply passes to the next; `empty`, then `noempty`; else false.
    pub fn is_match(&self, input: Option<&str>) -> bool {
        match input {
            Some(v) if self.exact.is_some() => self.exact.as_deref() == Some(v),
            Some(v) if self.prefix.is_some() => {
                self.prefix.as_deref().is_some_and(|p| v.starts_with(p))
            }
            Some(v) if self.regex.is_some() => self.regex.as_ref().is_some_and(|r| r.is_match(v)),
            Some(v) if self.wildcard.is_some() => {
                self.wildcard.as_deref().is_some_and(|w| w == "*" || w == v)
            }
            _ if self.empty => input.is_none_or(str::is_empty),
            _ if self.noempty => input.is_some_and(|v| !v.is_empty()),
            _ => false,
        }
    }
}

/// The match kinds a `value` may hold.
pub const MATCH_KINDS: [&str; 6] = ["exact", "prefix", "regex", "wildcard", "empty", "noempty"];

/// One segment of an IP pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Segment {
    /// `*`.
    Any,
    /// `lo-hi`, inclusive.
    Range(u32, u32),
    /// A number.
    Exact(u32),
}

impl Segment {
    fn matches(self, v: u32) -> bool {
        match self {
            Segment::Any => true,
            Segment::Range(lo, hi) => lo <= v && v <= hi,
            Segment::Exact(n) => n == v,
        }
    }
}

/// A compiled address pattern of a dynamic tag (Dubbo's `NetUtils.matchIpExpression`, plus
/// the `0.0.0.0:port` form of the tag router).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AddressPattern {
    /// `*` or `*.*.*.*`: every provider.
    Any,
    /// `0.0.0.0:port`: every provider on that port.
    AnyHostPort(u16),
    /// `ip/prefix` (IPv4 or IPv6); the port is not checked.
    Cidr {
        /// The network address.
        network: IpAddr,
        /// The prefix length.
        prefix: u8,
    },
    /// An IPv4 pattern: four segments (`*`, `a-b`, a number), optional `:port`.
    V4 {
        /// The segments.
        segments: [Segment; 4],
        /// The port, when given.
        port: Option<u16>,
    },
    /// An IPv6 pattern: eight hexadecimal segments (`*`, `a-b`, a number) or an address in
    /// any IPv6 notation; `[..]:port` for a port.
    V6 {
        /// The segments.
        segments: [Segment; 8],
        /// The port, when given.
        port: Option<u16>,
    },
    /// A host name (no `*` or `-` expression), compared case-insensitively with the
    /// provider's host; optional `:port`.
    Host {
        /// The name.
        name: String,
        /// The port, when given.
        port: Option<u16>,
    },
}

/// A provider's host and port, parsed once per snapshot for address matching.
#[derive(Debug, Clone, Copy)]
pub struct HostPort<'a> {
    /// The host as written in the provider URL (IPv6 without brackets).
    pub host: &'a str,
    /// The host as an IP address, when it is one.
    pub ip: Option<IpAddr>,
    /// The port (0 when the URL has none).
    pub port: u16,
}

impl<'a> HostPort<'a> {
    /// Parses `host`.
    pub fn new(host: &'a str, port: u16) -> Self {
        HostPort {
            host,
            ip: host.parse().ok(),
            port,
        }
    }
}

impl AddressPattern {
    /// Parses a pattern; the error is (character offset, message).
    pub fn parse(text: &str) -> Result<Self, (usize, String)> {
        // The tag router's own check compares the raw text with "0.0.0.0:<port>".
        if let Some(p) = text.strip_prefix("0.0.0.0:")
            && let Ok(port) = parse_port(p)
        {
            return Ok(AddressPattern::AnyHostPort(port));
        }
        let lead = text.len() - text.trim_start().len();
        let pattern = text.trim();
        if pattern.is_empty() {
            return Err((0, "empty address pattern".into()));
        }
        if pattern == "*" || pattern == "*.*.*.*" {
            return Ok(AddressPattern::Any);
        }
        if let Some(slash) = pattern.find('/') {
            let (addr, bits) = (&pattern[..slash], &pattern[slash + 1..]);
            let network: IpAddr = addr.parse().map_err(|_| {
                (
                    lead,
                    format!("invalid CIDR {pattern:?}: {addr:?} is not an IP address"),
                )
            })?;
            let max = if network.is_ipv4() { 32 } else { 128 };
            let prefix = bits
                .parse::<u8>()
                .ok()
                .filter(|b| *b <= max)
                .ok_or_else(|| {
                    (
                        lead + slash + 1,
                        format!("invalid CIDR {pattern:?}: prefix length must be 0 to {max}"),
                    )
                })?;
            return Ok(AddressPattern::Cidr { network, prefix });
        }
        // Split off a port: `[v6]:port`, `[v6]`, `host:port` (one colon); several colons
        // without brackets are an IPv6 address without port.
        let (host, port, host_at) = if let Some(rest) = pattern.strip_prefix('[') {
            let Some(close) = rest.find(']') else {
                return Err((lead, format!("{pattern:?}: `[` without `]`")));
            };
            let after = &rest[close + 1..];
            let port = match after.strip_prefix(':') {
                Some(p) => Some(parse_port(p).map_err(|m| (lead + close + 3, m))?),
                None if after.is_empty() => None,
                None => {
                    return Err((
                        lead + close + 2,
                        format!("{pattern:?}: expected `:port` after `]`"),
                    ));
                }
            };
            (&rest[..close], port, lead + 1)
        } else if pattern.matches(':').count() == 1 {
            let colon = pattern.find(':').unwrap_or(pattern.len());
            let port = parse_port(&pattern[colon + 1..]).map_err(|m| (lead + colon + 1, m))?;
            (&pattern[..colon], Some(port), lead)
        } else {
            (pattern, None, lead)
        };
        let expression = host.contains('*') || host.contains('-');
        if host.contains(':') {
            return parse_v6(host, port).map_err(|m| (host_at, m));
        }
        let looks_v4 = host.split('.').count() == 4
            && host.split('.').all(|s| {
                !s.is_empty()
                    && s.chars()
                        .all(|c| c.is_ascii_digit() || c == '*' || c == '-')
            });
        if looks_v4 {
            let mut segments = [Segment::Any; 4];
            for (i, s) in host.split('.').enumerate() {
                segments[i] = parse_segment(s, 10, 255).map_err(|m| (host_at, m))?;
            }
            return Ok(AddressPattern::V4 { segments, port });
        }
        if expression {
            return Err((
                host_at,
                format!(
                    "{host:?} is not an IP pattern: use four segments like 10.0.*.* or 10.0.0.1-10"
                ),
            ));
        }
        Ok(AddressPattern::Host {
            name: host.to_string(),
            port,
        })
    }

    /// True when a provider at `at` matches.
    pub fn matches(&self, at: &HostPort<'_>) -> bool {
        let port_ok = |p: &Option<u16>| p.is_none_or(|p| p == at.port);
        match self {
            AddressPattern::Any => true,
            AddressPattern::AnyHostPort(p) => *p == at.port,
            AddressPattern::Cidr { network, prefix } => match (network, at.ip) {
                (IpAddr::V4(n), Some(IpAddr::V4(h))) => {
                    prefix_eq(&n.octets(), &h.octets(), *prefix)
                }
                (IpAddr::V6(n), Some(IpAddr::V6(h))) => {
                    prefix_eq(&n.octets(), &h.octets(), *prefix)
                }
                _ => false,
            },
            AddressPattern::V4 { segments, port } => match at.ip {
                Some(IpAddr::V4(h)) => {
                    port_ok(port)
                        && segments
                            .iter()
                            .zip(h.octets())
                            .all(|(s, o)| s.matches(u32::from(o)))
                }
                _ => false,
            },
            AddressPattern::V6 { segments, port } => match at.ip {
                Some(IpAddr::V6(h)) => {
                    port_ok(port)
                        && segments
                            .iter()
                            .zip(h.segments())
                            .all(|(s, o)| s.matches(u32::from(o)))
                }
                _ => false,
            },
            AddressPattern::Host { name, port } => {
                port_ok(port) && at.host.eq_ignore_ascii_case(name)
            }
        }
    }
}

fn prefix_eq(a: &[u8], b: &[u8], prefix: u8) -> bool {
    let full = usize::from(prefix / 8);
    let rem = prefix % 8;
    if a[..full] != b[..full] {
        return false;
    }
    if rem == 0 {
        return true;
    }
    let mask = 0xffu8 << (8 - rem);
    a[full] & mask == b[full] & mask
}

fn parse_port(text: &str) -> Result<u16, String> {
    let canonical = !text.is_empty()
        && text.chars().all(|c| c.is_ascii_digit())
        && (text == "0" || !text.starts_with('0'));
    text.parse::<u16>()
        .ok()
        .filter(|_| canonical)
        .ok_or_else(|| format!("invalid port {text:?}: expected a number 0 to 65535"))
}

fn parse_segment(s: &str, radix: u32, max: u32) -> Result<Segment, String> {
    let num = |t: &str| {
        u32::from_str_radix(t, radix)
            .ok()
            .filter(|n| *n <= max && !t.is_empty() && !t.starts_with('+'))
            .ok_or_else(|| format!("invalid address segment {s:?}"))
    };
    if s == "*" {
        Ok(Segment::Any)
    } else if let Some((lo, hi)) = s.split_once('-') {
        Ok(Segment::Range(num(lo)?, num(hi)?))
    } else {
        Ok(Segment::Exact(num(s)?))
    }
}

fn parse_v6(host: &str, port: Option<u16>) -> Result<AddressPattern, String> {
    if !(host.contains('*') || host.contains('-')) {
        let ip: Ipv6Addr = host
            .parse()
            .map_err(|_| format!("{host:?} is not an IPv6 address"))?;
        let mut segments = [Segment::Any; 8];
        for (s, v) in segments.iter_mut().zip(ip.segments()) {
            *s = Segment::Exact(u32::from(v));
        }
        return Ok(AddressPattern::V6 { segments, port });
    }
    let parts: Vec<&str> = host.split(':').collect();
    if parts.len() != 8 {
        return Err(format!(
            "{host:?}: an IPv6 pattern with `*` or `-` needs all eight segments, like 234e:0:4567:0:0:0:3d:*"
        ));
    }
    let mut segments = [Segment::Any; 8];
    for (i, p) in parts.iter().enumerate() {
        segments[i] = parse_segment(p, 16, 0xffff)?;
    }
    Ok(AddressPattern::V6 { segments, port })
}

/// Compiles a tag rule document, reporting every problem at once.
pub fn compile(doc: &RuleDoc<'_>) -> Result<TagRule, Vec<RuleError>> {
    let raw: RawTagRule = doc.parse().map_err(|e| vec![e])?;
    let mut errors = Vec::new();
    let root = doc.path;
    let tags_path = root.key("tags");
    let raw_tags = match raw.tags {
        Some(t) if !t.is_empty() => t,
        Some(_) => {
            errors.push(RuleError::new(
                tags_path,
                "`tags` is empty: a tag rule needs at least one tag",
            ));
            return Err(errors);
        }
        None => {
            errors.push(RuleError::new(
                root.clone(),
                "missing field `tags`: a tag rule needs at least one tag",
            ));
            return Err(errors);
        }
    };
    let mut tags = Vec::with_capacity(raw_tags.len());
    for (i, t) in raw_tags.into_iter().enumerate() {
        let tpath = tags_path.index(i);
        let name = match t.name {
            Some(n) if !n.is_empty() => n,
            _ => {
                errors.push(RuleError::new(
                    tpath.clone(),
                    "a tag needs a non-empty `name`",
                ));
                String::new()
            }
        };
        let mut addresses = Vec::new();
        for (j, a) in t.addresses.unwrap_or_default().iter().enumerate() {
            match AddressPattern::parse(a) {
                Ok(p) => addresses.push(p),
                Err((offset, message)) => errors.push(RuleError::at_offset(
                    tpath.key("addresses").index(j),
                    offset,
                    message,
                )),
            }
        }
        let matches = t.matches.map(|ms| {
            ms.into_iter()
                .enumerate()
                .map(|(k, m)| compile_match(&tpath.key("match").index(k), m, &mut errors))
                .collect()
        });
        tags.push(TagSpec {
            name,
            addresses,
            matches,
        });
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let rule = TagRule {
        enabled: is_enabled(raw.enabled, raw.valid),
        force: DubboBool::or(raw.force, false),
        runtime: DubboBool::or(raw.runtime, true),
        key: raw.key,
        config_version: raw.config_version,
        tags,
    };
    if !rule.uses_match() && rule.tags.iter().any(|t| t.matches.is_some()) {
        tracing::warn!(
            config_version = rule.config_version.as_deref().unwrap_or(""),
            "tag rule: `match` is read only when configVersion starts with v3.0; ignored"
        );
    }
    Ok(rule)
}

fn compile_match(path: &FieldPath, m: RawParamMatch, errors: &mut Vec<RuleError>) -> ParamMatch {
    let key = match m.key {
        Some(k) if !k.is_empty() => k,
        _ => {
            errors.push(RuleError::new(
                path.clone(),
                "a match entry needs a non-empty `key`",
            ));
            String::new()
        }
    };
    let value = m.value.map(|kinds| {
        let vpath = path.key("value");
        let mut sm = StringMatch::default();
        for (kind, v) in kinds {
            let kpath = vpath.key(kind.as_str());
            if !MATCH_KINDS.contains(&kind.as_str()) {
                errors.push(RuleError::new(
                    vpath.clone(),
                    format!("unknown field `{kind}`: a match value is one of {MATCH_KINDS:?}"),
                ));
                continue;
            }
            // As in Dubbo, a null kind is not set.
            let text = match v {
                Value::Null => continue,
                Value::String(s) => s,
                Value::Bool(b) => b.to_string(),
                Value::Number(n) => n.to_string(),
                _ => {
                    errors.push(RuleError::new(kpath, format!("`{kind}` must be a string")));
                    continue;
                }
            };
            match kind.as_str() {
                "exact" => sm.exact = Some(text),
                "prefix" => sm.prefix = Some(text),
                "wildcard" => sm.wildcard = Some(text),
                "empty" => sm.empty = true,
                "noempty" => sm.noempty = true,
                _ => match regex::Regex::new(&text)
                    .and_then(|_| regex::Regex::new(&format!("^(?:{text})$")))
                {
                    Ok(r) => sm.regex = Some(r),
                    Err(e) => errors.push(RuleError::new(
                        kpath,
                        format!("invalid regex {text:?}: {}", regex_reason(&e)),
                    )),
                },
            }
        }
        sm
    });
    ParamMatch { key, value }
}

/// The one-line reason of a regex error (its display spans several lines).
fn regex_reason(e: &regex::Error) -> String {
    let text = e.to_string();
    text.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(|l| l.trim().trim_start_matches("error: ").to_string())
        .unwrap_or(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hp(host: &str, port: u16) -> HostPort<'_> {
        HostPort::new(host, port)
    }

    #[test]
    fn address_patterns_follow_dubbo() {
        // (pattern, host, port, expected)
        let cases: &[(&str, &str, u16, bool)] = &[
            ("*", "anything", 1, true),
            ("*.*.*.*", "10.0.0.1", 1, true),
            ("10.0.0.1", "10.0.0.1", 20880, true),
            ("10.0.0.1", "10.0.0.2", 20880, false),
            ("10.0.0.1:20880", "10.0.0.1", 20880, true),
            ("10.0.0.1:20880", "10.0.0.1", 20881, false),
            ("10.0.*.*", "10.0.7.9", 1, true),
            ("10.0.*.*", "10.1.7.9", 1, false),
            ("10.0.0.1-10", "10.0.0.10", 1, true),
            ("10.0.0.1-10", "10.0.0.11", 1, false),
            ("10.0.0.1-10:7", "10.0.0.5", 7, true),
            ("10.0.0.1-10:7", "10.0.0.5", 8, false),
            ("10.0.0.0/24", "10.0.0.200", 1, true),
            ("10.0.0.0/24", "10.0.1.1", 1, false),
            ("10.0.0.0/8", "10.200.1.1", 1, true),
            ("0.0.0.0:20880", "10.9.9.9", 20880, true),
            ("0.0.0.0:20880", "10.9.9.9", 20881, false),
            ("0.0.0.0", "10.9.9.9", 20880, false),
            ("10.0.0.1", "::1", 1, false),
            ("[::1]:20880", "::1", 20880, true),
            ("[::1]", "0:0:0:0:0:0:0:1", 5, true),
            ("234e:0:4567:0:0:0:3d:*", "234e:0:4567::3d:ff", 1, true),
            ("234e:0:4567:0:0:0:3d:0-f", "234e:0:4567::3d:10", 1, false),
            ("fe80::/16", "fe80::1", 1, true),
            ("host-a.example", "HOST-A.example", 1, false),
            ("hosta.example", "HOSTA.example", 1, true),
            ("hosta.example:9", "hosta.example", 8, false),
        ];
        for &(p, host, port, want) in cases {
            match AddressPattern::parse(p) {
                Ok(pat) => assert_eq!(pat.matches(&hp(host, port)), want, "{p} vs {host}:{port}"),
                Err(e) => assert!(!want, "{p} failed to parse: {e:?}"),
            }
        }
    }

    #[test]
    fn bad_patterns_are_errors() {
        for p in [
            "10.0.0.0/33",
            "10.0.0/8",
            "300.0.0.1",
            "10.0.*",
            "10.0.0.1:99999",
            "10.0.0.1:x",
            "10.0.0.1-x",
            "[::1",
            "1:2:3:*",
            "",
        ] {
            assert!(
                AddressPattern::parse(p).is_err(),
                "{p:?} should be rejected"
            );
        }
    }

    #[test]
    fn string_match_follows_dubbo_precedence() {
        let re = |r: &str| regex::Regex::new(&format!("^(?:{r})$")).unwrap();
        let exact = StringMatch {
            exact: Some("a".into()),
            ..Default::default()
        };
        assert!(exact.is_match(Some("a")));
        assert!(!exact.is_match(Some("ab")));
        assert!(!exact.is_match(None));
        let exact_or_empty = StringMatch {
            exact: Some("a".into()),
            empty: true,
            ..Default::default()
        };
        assert!(
            exact_or_empty.is_match(None),
            "exact does not apply to an absent value"
        );
        assert!(!exact_or_empty.is_match(Some("b")));
        let regex = StringMatch {
            regex: Some(re("v[0-9]+")),
            ..Default::default()
        };
        assert!(regex.is_match(Some("v12")));
        assert!(
            !regex.is_match(Some("xv12")),
            "regex must match the whole value"
        );
        let wildcard = StringMatch {
            wildcard: Some("*".into()),
            ..Default::default()
        };
        assert!(wildcard.is_match(Some("")));
        assert!(!wildcard.is_match(None));
        let glob = StringMatch {
            wildcard: Some("a*".into()),
            ..Default::default()
        };
        assert!(
            !glob.is_match(Some("ab")),
            "Dubbo's wildcard only knows `*` alone"
        );
        assert!(glob.is_match(Some("a*")));
        let noempty = StringMatch {
            noempty: true,
            ..Default::default()
        };
        assert!(noempty.is_match(Some("x")));
        assert!(!noempty.is_match(Some("")));
        assert!(!StringMatch::default().is_match(Some("x")));
    }
}
