//! Address patterns of dynamic tags (Dubbo's `NetUtils.matchIpExpression`, plus the tag
//! router's `0.0.0.0:port`): parsed once when the rule compiles, matched against each
//! provider's host and port when the router prepares.

use std::net::{IpAddr, Ipv6Addr};

use ipnet::IpNet;

/// One segment of an IP pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Segment {
    /// `*`.
    Any,
    /// `lo-hi`, inclusive.
    Range(u16, u16),
    /// A number (an IPv4 octet or an IPv6 hextet: 16 bits keep a compiled pattern small).
    Exact(u16),
}

impl Segment {
    fn matches(self, v: u16) -> bool {
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
    Cidr(IpNet),
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
        /// The segments (boxed: an IPv6 pattern is rare, and the box keeps every pattern
        /// of a rule of a million addresses at 32 bytes).
        segments: Box<[Segment; 8]>,
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
            let net = (bits.parse::<u8>().ok())
                .and_then(|b| IpNet::new(network, b).ok())
                .ok_or_else(|| {
                    (
                        lead + slash + 1,
                        format!("invalid CIDR {pattern:?}: prefix length must be 0 to {max}"),
                    )
                })?;
            return Ok(AddressPattern::Cidr(net));
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
            AddressPattern::Cidr(net) => at.ip.is_some_and(|ip| net.contains(&ip)),
            AddressPattern::V4 { segments, port } => match at.ip {
                Some(IpAddr::V4(h)) => {
                    port_ok(port)
                        && segments
                            .iter()
                            .zip(h.octets())
                            .all(|(s, o)| s.matches(u16::from(o)))
                }
                _ => false,
            },
            AddressPattern::V6 { segments, port } => match at.ip {
                Some(IpAddr::V6(h)) => {
                    port_ok(port) && segments.iter().zip(h.segments()).all(|(s, o)| s.matches(o))
                }
                _ => false,
            },
            AddressPattern::Host { name, port } => {
                port_ok(port) && at.host.eq_ignore_ascii_case(name)
            }
        }
    }
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

fn parse_segment(s: &str, radix: u32, max: u16) -> Result<Segment, String> {
    let num = |t: &str| {
        u16::from_str_radix(t, radix)
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
            *s = Segment::Exact(v);
        }
        return Ok(AddressPattern::V6 {
            segments: Box::new(segments),
            port,
        });
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
    Ok(AddressPattern::V6 {
        segments: Box::new(segments),
        port,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pattern_is_small() {
        // A rule of a million exact addresses keeps a million patterns.
        assert!(std::mem::size_of::<AddressPattern>() <= 32);
    }

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
}
