//! Immutable, indexed provider lists.
//!
//! A [`Snapshot`] is the provider list as one value: index = position, plus a generation
//! number. A new provider list builds a new snapshot; everything a router prepares is
//! prepared against one snapshot and replaced with it.
//!
//! Each provider is a [`Url`], itself a reference-counted block: a new snapshot that keeps
//! most providers of the old one (one registered, one removed) shares their parsed URLs
//! (clones, [`Url::ptr_eq`]) instead of parsing or copying them again
//! ([`Snapshot::from_shared`]).

use crate::url::{Url, UrlError};

/// One provider endpoint (Dubbo: invoker), described by its URL.
pub type Provider = Url;

/// An immutable, indexed provider list with a generation number.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    generation: u64,
    providers: Box<[Provider]>,
}

/// A line of a provider list that holds a URL (not blank, not a `#` comment): the one
/// grammar of a provider list, whoever reads it (a text, a streamed file, a file source).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProviderLine<'a> {
    /// 1-based line number.
    pub number: usize,
    /// The blanks before the URL.
    pub indent: &'a str,
    /// The URL's text, trimmed.
    pub text: &'a str,
}

impl<'a> ProviderLine<'a> {
    /// Line `number` (1-based) of a list, without its line break: `None` for a blank line
    /// or a `#` comment. (A byte-order mark is the text's, not a line's: see
    /// [`provider_lines`].)
    pub fn new(number: usize, line: &'a str) -> Option<Self> {
        let text = line.trim();
        if text.is_empty() || text.starts_with('#') {
            return None;
        }
        Some(ProviderLine {
            number,
            indent: &line[..line.len() - line.trim_start().len()],
            text,
        })
    }

    /// The provider of this line ([`Url::parse_provider`]), or the problem located in the
    /// line.
    pub fn parse(&self) -> Result<Url, ProviderLineError> {
        Url::parse_provider(self.text).map_err(|e| self.locate(e))
    }

    /// `error` (of parsing this line's text) located in the line: its column counts
    /// characters from the line's start (the indentation may be Unicode blanks).
    pub fn locate(&self, error: UrlError) -> ProviderLineError {
        ProviderLineError {
            line: self.number,
            column: self.indent.chars().count() + error.column,
            reason: error.reason,
        }
    }
}

/// The lines of a provider list's text that hold a URL: lines end at `\n`, `\r\n` or a
/// lone `\r`; a leading byte-order mark is skipped.
pub fn provider_lines(text: &str) -> impl Iterator<Item = ProviderLine<'_>> {
    let mut rest = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut number = 0;
    std::iter::from_fn(move || {
        while !rest.is_empty() {
            let end = rest
                .bytes()
                .position(|b| b == b'\n' || b == b'\r')
                .unwrap_or(rest.len());
            let line = &rest[..end];
            let brk = if rest[end..].starts_with("\r\n") {
                2
            } else {
                usize::from(end < rest.len())
            };
            // The breaks are ASCII: `end + brk` is a character boundary.
            rest = &rest[end + brk..];
            number += 1;
            if let Some(l) = ProviderLine::new(number, line) {
                return Some(l);
            }
        }
        None
    })
}

/// A provider line that did not parse: where, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{line}:{column}: invalid provider URL: {reason}")]
pub struct ProviderLineError {
    /// 1-based line number.
    pub line: usize,
    /// 1-based column, in characters from the line's start.
    pub column: usize,
    /// What is wrong.
    pub reason: String,
}

/// The bad lines of a provider list ([`Snapshot::parse_lines`]), every one of them: one
/// `origin:line:column: invalid provider URL: reason` per line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.lines.iter().map(|e| format!("{}:{e}", self.origin)).collect::<Vec<_>>().join("\n"))]
pub struct ProviderListError {
    /// What names the list in messages: `<text>` as parsed; a caller that read the text
    /// from a file sets it to the file's name.
    pub origin: String,
    /// The bad lines, in order.
    pub lines: Vec<ProviderLineError>,
}

impl Snapshot {
    /// A snapshot of `providers` with the given generation.
    pub fn new(generation: u64, providers: impl IntoIterator<Item = Provider>) -> Self {
        Self::from_shared(generation, providers.into_iter().collect::<Box<[_]>>())
    }

    /// A snapshot of providers already shared (clones of an older snapshot's, or of a
    /// source's cache of parsed URLs): nothing is parsed or copied.
    pub fn from_shared(generation: u64, providers: impl Into<Box<[Provider]>>) -> Self {
        Snapshot {
            generation,
            providers: providers.into(),
        }
    }

    /// Parses a provider list: one URL per line ([`provider_lines`], [`ProviderLine`]);
    /// blank lines and lines starting with `#` are skipped; every other line is a distinct
    /// provider, even when two lines are equal. Returns every bad line at once.
    pub fn parse_lines(generation: u64, text: &str) -> Result<Self, ProviderListError> {
        let mut providers = Vec::new();
        let mut lines = Vec::new();
        for line in provider_lines(text) {
            match line.parse() {
                Ok(url) => providers.push(url),
                Err(e) => lines.push(e),
            }
        }
        if lines.is_empty() {
            Ok(Snapshot::new(generation, providers))
        } else {
            Err(ProviderListError {
                origin: "<text>".to_string(),
                lines,
            })
        }
    }

    /// The generation number.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The providers, by index (each shared: cloning one is a reference count).
    pub fn providers(&self) -> &[Provider] {
        &self.providers
    }

    /// The provider at `index`.
    pub fn get(&self, index: usize) -> Option<&Provider> {
        self.providers.get(index)
    }

    /// The number of providers.
    pub fn len(&self) -> usize {
        self.providers.len()
    }

    /// True when there is no provider.
    pub fn is_empty(&self) -> bool {
        self.providers.is_empty()
    }

    /// Bytes held by the snapshot: the provider table and every URL's block (with its
    /// reference count; shared URLs counted in full here).
    pub fn memory_bytes(&self) -> usize {
        self.providers.len() * std::mem::size_of::<Provider>()
            + self.providers.iter().map(|p| p.heap_bytes()).sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_lines_skips_blanks_and_comments_and_keeps_duplicates() {
        let s = Snapshot::parse_lines(
            1,
            "# comment\n\ndubbo://10.0.0.1:20880/a\n  \ndubbo://10.0.0.1:20880/a\n",
        )
        .unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s.generation(), 1);
    }

    #[test]
    fn parse_lines_reports_every_bad_line() {
        let e = Snapshot::parse_lines(1, "dubbo://h:1/a\n  dubbo://h:x/a\ndubbo://[::1/a\n")
            .unwrap_err();
        assert_eq!(e.lines.len(), 2);
        assert_eq!((e.lines[0].line, e.lines[0].column), (2, 13));
        assert_eq!(e.lines[1].line, 3);
        let e = ProviderListError {
            origin: "p.txt".into(),
            ..e
        };
        assert_eq!(
            e.to_string(),
            "p.txt:2:13: invalid provider URL: invalid port \"x\"\n\
             p.txt:3:9: invalid provider URL: IPv6 host without closing ']'"
        );
    }

    /// Every line ending and a byte-order mark; the mistyped and hostless URLs of a
    /// provider list (issue: `dubbo//h` read as the host `dubbo`) are located at their line.
    #[test]
    fn lines_end_alike_and_a_provider_needs_a_protocol_and_a_host() {
        let text = "\u{feff}dubbo://a:1/s\r\n# c\rdubbo://b:1/s\n\n\u{3000}dubbo://c:1/s";
        let s = Snapshot::parse_lines(1, text).unwrap();
        let hosts: Vec<&str> = s.providers().iter().map(|p| p.host()).collect();
        assert_eq!(hosts, ["a", "b", "c"]);
        let numbers: Vec<usize> = provider_lines(text).map(|l| l.number).collect();
        assert_eq!(numbers, [1, 3, 5]);
        for (line, column, reason) in [
            (
                "dubbo//10.0.0.1:20880/com.acme.OrderService?a=1",
                6,
                "expected `://`",
            ),
            ("  dubbo:/10.0.0.1:20880/s", 8, "expected `://`"),
            ("10.0.0.1:20880/s", 1, "starts with its protocol"),
            ("dubbo:///com.acme.OrderService", 9, "no host"),
            ("dubbo://user@/s", 9, "no host"),
            ("dub bo://h/s", 4, "whitespace"),
        ] {
            let e = Snapshot::parse_lines(1, &format!("dubbo://ok:1/s\n{line}\n")).unwrap_err();
            assert_eq!(e.lines.len(), 1, "{line}");
            let e = &e.lines[0];
            assert_eq!((e.line, e.column), (2, column), "{line}: {e}");
            assert!(e.reason.contains(reason), "{line}: {e}");
        }
        // A line's own BOM is text only on line 1.
        assert!(Snapshot::parse_lines(1, "dubbo://a:1/s\n\u{feff}dubbo://b:1/s").is_err());
    }
}
