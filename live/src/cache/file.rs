//! The cache file: its format, written atomically (a temporary file, synced, renamed over
//! the old one), read back with its checksum, format version and reference checked.
//!
//! ```text
//! routechain-cache 1
//! reference <group>/<interface>:<version>[ from <scope>]
//! written <unix milliseconds>
//! providers <n>
//! <provider URL>                        (n lines)
//! rule <bytes> <kind> <key>             (per rule node, then its text and a newline)
//! <text>
//! checksum <xxh3-64 of every byte above, 16 hex digits>
//! ```

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use xxhash_rust::xxh3::Xxh3;

use routechain_core::Url;

use crate::RuleKey;

/// The first line of a cache file; the number is the format version.
const MAGIC: &str = "routechain-cache ";
/// The format version this build writes and reads.
pub const FORMAT: u32 = 1;

/// Why a cache file was not used.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// The file is not a routechain cache file.
    #[error("{path}: not a routechain cache file")]
    NotCache {
        /// The file.
        path: PathBuf,
    },
    /// The file is of another format version.
    #[error("{path}: cache format version {found}, this routechain reads version {FORMAT}")]
    Version {
        /// The file.
        path: PathBuf,
        /// The version it was written in.
        found: String,
    },
    /// The file holds another reference's state.
    #[error("{path}: written for the reference {found}, not {expected}")]
    Foreign {
        /// The file.
        path: PathBuf,
        /// The reference it holds.
        found: String,
        /// The reference followed.
        expected: String,
    },
    /// The checksum does not match: the file is partial or was altered.
    #[error("{path}: checksum mismatch (a partial or corrupt file)")]
    Checksum {
        /// The file.
        path: PathBuf,
    },
    /// The checksum matches but the content does not read (a bug, or a hand-made file).
    #[error("{path}: line {line}: {reason}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// The line.
        line: usize,
        /// What is wrong.
        reason: String,
    },
}

/// What a cache file holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cached {
    /// The reference it was written for (`group/interface:version`).
    pub reference: String,
    /// When it was written, in milliseconds since the Unix epoch.
    pub written_ms: u64,
    /// The provider URLs.
    pub providers: Vec<String>,
    /// The config-center nodes and their text.
    pub rules: Vec<(RuleKey, String)>,
}

/// A writer that hashes what it writes.
struct Hashing<W> {
    inner: W,
    hash: Xxh3,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hash.update(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Writes `providers` and `rules` for `reference` to `path`: to a temporary file next to
/// it, synced, then renamed over it, so a reader sees the old file or the new one whole.
pub fn write(
    path: &Path,
    reference: &str,
    written_ms: u64,
    providers: &[Url],
    rules: &[(&RuleKey, &str)],
) -> Result<(), CacheError> {
    let io_error = |source| CacheError::Io {
        path: path.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io_error)?;
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp-{}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    let result = (|| {
        let file = std::fs::File::create(&tmp)?;
        let mut out = Hashing {
            inner: io::BufWriter::with_capacity(1 << 16, file),
            hash: Xxh3::new(),
        };
        writeln!(out, "{MAGIC}{FORMAT}")?;
        writeln!(out, "reference {reference}")?;
        writeln!(out, "written {written_ms}")?;
        writeln!(out, "providers {}", providers.len())?;
        for url in providers {
            writeln!(out, "{url}")?;
        }
        for (key, text) in rules {
            writeln!(out, "rule {} {} {}", text.len(), key.router_type, key.key)?;
            out.write_all(text.as_bytes())?;
            out.write_all(b"\n")?;
        }
        let digest = out.hash.digest();
        let mut inner = out.inner;
        writeln!(inner, "checksum {digest:016x}")?;
        let file = inner.into_inner().map_err(io::IntoInnerError::into_error)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(io_error)
}

/// Reads the cache file at `path` written for `reference`: `Ok(None)` when there is none.
pub fn read(path: &Path, reference: &str) -> Result<Option<Cached>, CacheError> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(CacheError::Io {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    parse(path, &bytes, reference).map(Some)
}

fn parse(path: &Path, bytes: &[u8], reference: &str) -> Result<Cached, CacheError> {
    let path_buf = || path.to_path_buf();
    let Some(first) = bytes.split(|b| *b == b'\n').next() else {
        return Err(CacheError::NotCache { path: path_buf() });
    };
    let Some(version) = std::str::from_utf8(first)
        .ok()
        .and_then(|l| l.strip_prefix(MAGIC))
    else {
        return Err(CacheError::NotCache { path: path_buf() });
    };
    if version != FORMAT.to_string() {
        return Err(CacheError::Version {
            path: path_buf(),
            found: version.to_string(),
        });
    }
    // The last line is the checksum of everything before it.
    let body_end = bytes
        .strip_suffix(b"\n")
        .and_then(|b| memchr::memrchr(b'\n', b))
        .map_or(0, |i| i + 1);
    let checksum = std::str::from_utf8(&bytes[body_end..])
        .ok()
        .and_then(|l| l.trim_end().strip_prefix("checksum "))
        .and_then(|h| u64::from_str_radix(h, 16).ok());
    let body = &bytes[..body_end];
    if checksum != Some(xxhash_rust::xxh3::xxh3_64(body)) {
        return Err(CacheError::Checksum { path: path_buf() });
    }
    let mut lines = Lines {
        path,
        rest: body,
        line: 0,
    };
    lines.next_line()?;
    let found = lines.field("reference")?;
    if found != reference {
        return Err(CacheError::Foreign {
            path: path_buf(),
            found,
            expected: reference.to_string(),
        });
    }
    let written_ms = lines.number("written")?;
    let n = lines.number("providers")?;
    let mut providers = Vec::with_capacity(usize::try_from(n).unwrap_or(0).min(1 << 20));
    for _ in 0..n {
        providers.push(lines.next_line()?.to_string());
    }
    let mut rules = Vec::new();
    while !lines.rest.is_empty() {
        let head = lines.field("rule")?;
        let mut parts = head.splitn(3, ' ');
        let (Some(len), Some(kind), Some(key)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(lines.malformed("a rule line is `rule <bytes> <kind> <key>`"));
        };
        let len: usize = len
            .parse()
            .map_err(|_| lines.malformed("a rule's length is not a number"))?;
        let text = lines.take(len)?;
        rules.push((RuleKey::new(key, kind), text));
    }
    Ok(Cached {
        reference: found,
        written_ms,
        providers,
        rules,
    })
}

/// The body of a cache file, read line by line.
struct Lines<'a> {
    path: &'a Path,
    rest: &'a [u8],
    line: usize,
}

impl<'a> Lines<'a> {
    fn malformed(&self, reason: &str) -> CacheError {
        CacheError::Malformed {
            path: self.path.to_path_buf(),
            line: self.line,
            reason: reason.to_string(),
        }
    }

    fn next_line(&mut self) -> Result<&'a str, CacheError> {
        let Some(end) = memchr::memchr(b'\n', self.rest) else {
            return Err(self.malformed("the file ends early"));
        };
        self.line += 1;
        let line =
            std::str::from_utf8(&self.rest[..end]).map_err(|_| self.malformed("not UTF-8"))?;
        self.rest = &self.rest[end + 1..];
        Ok(line)
    }

    fn field(&mut self, name: &str) -> Result<String, CacheError> {
        let line = self.next_line()?;
        match line.strip_prefix(name).and_then(|r| r.strip_prefix(' ')) {
            Some(v) => Ok(v.to_string()),
            None => Err(self.malformed(&format!("expected `{name} ...`"))),
        }
    }

    fn number(&mut self, name: &str) -> Result<u64, CacheError> {
        self.field(name)?
            .parse()
            .map_err(|_| self.malformed(&format!("`{name}` is not a number")))
    }

    /// `len` bytes of text and the newline after them.
    fn take(&mut self, len: usize) -> Result<String, CacheError> {
        if self.rest.len() <= len || self.rest[len] != b'\n' {
            return Err(self.malformed("a rule's text is shorter than its length"));
        }
        let text = std::str::from_utf8(&self.rest[..len])
            .map_err(|_| self.malformed("a rule's text is not UTF-8"))?
            .to_string();
        self.line += text.matches('\n').count() + 1;
        self.rest = &self.rest[len + 1..];
        Ok(text)
    }
}

/// `ms` since the Unix epoch as UTC, `2026-12-05T16:30:00Z`.
pub fn utc(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Days to a civil date (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}
