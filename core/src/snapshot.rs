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

/// A provider line that did not parse, with its 1-based line number.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {source}")]
pub struct ProviderLineError {
    /// 1-based line number in the provider text.
    pub line: usize,
    /// The URL error; its column is within the line.
    #[source]
    pub source: UrlError,
}

impl Snapshot {
    /// A snapshot of `providers` with the given generation.
    pub fn new(generation: u64, providers: impl IntoIterator<Item = Provider>) -> Self {
        Snapshot {
            generation,
            providers: providers.into_iter().collect(),
        }
    }

    /// A snapshot of providers already shared (clones of an older snapshot's, or of a
    /// source's cache of parsed URLs): nothing is parsed or copied.
    pub fn from_shared(generation: u64, providers: impl Into<Box<[Provider]>>) -> Self {
        Snapshot {
            generation,
            providers: providers.into(),
        }
    }

    /// Parses a provider list in the text format of the CLI: one URL per line; blank lines
    /// and lines starting with `#` are skipped; every other line is a distinct provider,
    /// even when two lines are equal. Returns every bad line at once.
    pub fn parse_lines(generation: u64, text: &str) -> Result<Self, Vec<ProviderLineError>> {
        let mut providers = Vec::new();
        let mut errors = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let trimmed = line.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            match Url::parse(trimmed) {
                Ok(url) => providers.push(url),
                Err(mut source) => {
                    // The column counts characters: the indentation may be Unicode blanks.
                    source.column += line[..line.len() - line.trim_start().len()].chars().count();
                    errors.push(ProviderLineError {
                        line: n + 1,
                        source,
                    });
                }
            }
        }
        if errors.is_empty() {
            Ok(Snapshot::new(generation, providers))
        } else {
            Err(errors)
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
        assert_eq!(e.len(), 2);
        assert_eq!((e[0].line, e[0].source.column), (2, 13));
        assert_eq!(e[1].line, 3);
    }
}
