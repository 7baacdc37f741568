//! Reading input files safely: a size limit, located UTF-8 errors, one byte-order-mark
//! policy, and only what ends.
//!
//! Every file routechain reads (chain files, rule files, provider lists, requests) goes
//! through this module:
//! - a file given on the command line ([`read_input`], [`for_each_line`]) may be a regular
//!   file, a FIFO or a pipe (process substitution, `<(…)`), or `-` for standard input;
//! - a file named inside another file (a chain file's `rule_file`, `overrides`: [`read_text`])
//!   must be a regular file: a FIFO there would block the reader, on the word of a file;
//! - a device such as `/dev/zero` (which never ends) or a directory is refused with a clear
//!   error;
//! - a chain, rule or request file larger than the limit is refused (the limit is
//!   [`max_file_size`], [`DEFAULT_MAX_FILE_SIZE`] unless [`set_max_file_size`] changed it:
//!   `routechain --max-file-size`): a regular file before it is read, a stream as soon as it
//!   passes the limit; a provider list in a regular file has no size limit (a million
//!   providers is a large but legitimate file), a streamed one has (it may never end);
//! - invalid UTF-8 is reported at the line and column of the first bad byte;
//! - a UTF-8 byte-order mark at the start is accepted and skipped, for every kind of file.

use std::io::Read;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::located::{LocatedError, Location, SourceExcerpt, location_of_byte};

/// The default size limit of an input file: 16 MiB.
pub const DEFAULT_MAX_FILE_SIZE: u64 = 16 * 1024 * 1024;

static MAX_FILE_SIZE: AtomicU64 = AtomicU64::new(DEFAULT_MAX_FILE_SIZE);

/// The size limit, in bytes, of every input file this process reads.
pub fn max_file_size() -> u64 {
    MAX_FILE_SIZE.load(Ordering::Relaxed)
}

/// Sets the size limit, in bytes, of every input file this process reads (a process-wide
/// setting: the command line sets it once from `--max-file-size`).
pub fn set_max_file_size(bytes: u64) {
    MAX_FILE_SIZE.store(bytes, Ordering::Relaxed);
}

/// Parses a size such as `16MiB`, `512KiB`, `1GiB`, `64MB`, `1000` (bytes).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let unit_bytes: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" => 1_000,
        "kib" => 1 << 10,
        "m" | "mb" => 1_000_000,
        "mib" => 1 << 20,
        "g" | "gb" => 1_000_000_000,
        "gib" => 1 << 30,
        other => {
            return Err(format!(
                "unknown size unit {other:?}; use B, KiB, MiB or GiB"
            ));
        }
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?} is not a size such as 16MiB"))?;
    n.checked_mul(unit_bytes)
        .ok_or_else(|| format!("{text:?} is too large"))
}

/// An error about a whole file, located at 1:1.
pub fn file_error(origin: &str, message: impl Into<String>) -> LocatedError {
    LocatedError {
        origin: origin.to_string(),
        location: Location { line: 1, column: 1 },
        field: None,
        message: message.into(),
        source_line: None,
    }
}

/// The command-line name of standard input.
pub const STDIN: &str = "-";

/// Whether `path` is the command-line name of standard input (`-`).
pub fn is_stdin(path: &Path) -> bool {
    path.as_os_str() == STDIN
}

/// The name of a command-line input in errors: `<stdin>` for `-`, else the path.
pub fn origin_of(path: &Path) -> String {
    if is_stdin(path) {
        "<stdin>".to_string()
    } else {
        path.display().to_string()
    }
}

/// Reads a command-line input as UTF-8 text of at most [`max_file_size`] bytes: `-` is
/// standard input; a regular file, a FIFO or a pipe is read; errors name it by
/// [`origin_of`].
pub fn read_input(path: &Path) -> Result<String, LocatedError> {
    let origin = origin_of(path);
    if is_stdin(path) {
        return read_limited(std::io::stdin().lock(), &origin, max_file_size());
    }
    read(path, &origin, max_file_size(), Accept::Pipes)
}

/// Reads a regular file of at most [`max_file_size`] bytes as UTF-8 text (see the module
/// documentation); `origin` names it in errors.
pub fn read_text(path: &Path, origin: &str) -> Result<String, LocatedError> {
    read_text_with_limit(path, origin, max_file_size())
}

/// Reads a regular file of at most `limit` bytes as UTF-8 text, like [`read_text`].
pub fn read_text_with_limit(path: &Path, origin: &str, limit: u64) -> Result<String, LocatedError> {
    read(path, origin, limit, Accept::Regular)
}

fn read(path: &Path, origin: &str, limit: u64, accept: Accept) -> Result<String, LocatedError> {
    let (file, len) = open(path, origin, accept)?;
    if len.is_some_and(|len| len > limit) {
        return Err(too_large(origin, limit));
    }
    read_limited(file, origin, limit)
}

/// What [`open`] accepts besides a regular file.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Accept {
    /// Regular files only.
    Regular,
    /// FIFOs and pipes too.
    Pipes,
}

/// Opens `path` if it is a regular file (with its length) or, when `accept` allows, a FIFO
/// or pipe (no length: it ends when its writer closes it).
fn open(
    path: &Path,
    origin: &str,
    accept: Accept,
) -> Result<(std::fs::File, Option<u64>), LocatedError> {
    let meta =
        std::fs::metadata(path).map_err(|e| file_error(origin, format!("cannot read: {e}")))?;
    let pipe = is_fifo(&meta) && accept == Accept::Pipes;
    if !meta.is_file() && !pipe {
        let kind = if meta.is_dir() {
            "a directory"
        } else {
            match accept {
                Accept::Regular => "not a regular file (a FIFO, socket or device)",
                Accept::Pipes => "not a regular file or a pipe (a socket or device)",
            }
        };
        let read = match accept {
            Accept::Regular => "routechain reads only regular files",
            Accept::Pipes => "routechain reads regular files, pipes and standard input (`-`)",
        };
        return Err(file_error(origin, format!("cannot read: {kind}; {read}")));
    }
    let file =
        std::fs::File::open(path).map_err(|e| file_error(origin, format!("cannot read: {e}")))?;
    Ok((file, meta.is_file().then_some(meta.len())))
}

#[cfg(unix)]
fn is_fifo(meta: &std::fs::Metadata) -> bool {
    std::os::unix::fs::FileTypeExt::is_fifo(&meta.file_type())
}

#[cfg(not(unix))]
fn is_fifo(_: &std::fs::Metadata) -> bool {
    false
}

/// Streams a regular file, a pipe or (`-`) standard input line by line, without holding it
/// whole (a provider list of a million providers is hundreds of megabytes): calls
/// `each(line number, line)` for every line, without its break. Lines end as in
/// [`crate::located::lines`] (`\n`, `\r\n`, a lone `\r`); a byte-order mark at the start is
/// skipped; invalid UTF-8 stops the reading with the error [`decode`] gives for the whole
/// file. A regular file has no size limit; a pipe or standard input, which may never end,
/// is refused past [`max_file_size`].
pub fn for_each_line(
    path: &Path,
    origin: &str,
    mut each: impl FnMut(usize, &str),
) -> Result<(), LocatedError> {
    use std::io::BufRead;
    let (input, limit): (Box<dyn Read>, u64) = if is_stdin(path) {
        (Box::new(std::io::stdin().lock()), max_file_size())
    } else {
        let (file, len) = open(path, origin, Accept::Pipes)?;
        (Box::new(file), len.map_or_else(max_file_size, |_| u64::MAX))
    };
    let mut reader = std::io::BufReader::with_capacity(1 << 20, input);
    let mut lines = LineState {
        origin,
        number: 0,
        start: 0,
    };
    // A line split across two reads.
    let mut carry: Vec<u8> = Vec::new();
    // The last read ended with `\r`: a `\n` starting the next one belongs to that break.
    let mut after_cr = false;
    // File offset of the current read's first byte.
    let mut read_at = 0u64;
    loop {
        let chunk = reader
            .fill_buf()
            .map_err(|e| file_error(origin, format!("cannot read: {e}")))?;
        if chunk.is_empty() {
            break;
        }
        let len = chunk.len();
        let mut pos = usize::from(after_cr && chunk[0] == b'\n');
        after_cr = false;
        if pos == 1 {
            lines.start = read_at + 1;
        }
        while let Some(i) = memchr::memchr2(b'\n', b'\r', &chunk[pos..]) {
            let end = pos + i;
            if carry.is_empty() {
                lines.emit(&chunk[pos..end], &mut each)?;
            } else {
                carry.extend_from_slice(&chunk[pos..end]);
                lines.emit(&carry, &mut each)?;
                carry.clear();
            }
            pos = end + 1;
            if chunk[end] == b'\r' {
                match chunk.get(end + 1) {
                    Some(b'\n') => pos += 1,
                    Some(_) => {}
                    None => after_cr = true,
                }
            }
            lines.start = read_at + pos as u64;
        }
        carry.extend_from_slice(&chunk[pos..]);
        reader.consume(len);
        read_at += len as u64;
        if read_at > limit {
            return Err(too_large(origin, limit));
        }
    }
    if !carry.is_empty() {
        lines.emit(&carry, &mut each)?;
    }
    Ok(())
}

/// The position of [`for_each_line`] in its file.
struct LineState<'a> {
    origin: &'a str,
    /// Lines emitted so far.
    number: usize,
    /// File offset of the line being read.
    start: u64,
}

impl LineState<'_> {
    fn emit(
        &mut self,
        bytes: &[u8],
        each: &mut impl FnMut(usize, &str),
    ) -> Result<(), LocatedError> {
        self.number += 1;
        let text = std::str::from_utf8(bytes).map_err(|e| {
            let valid = std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or_default();
            let column = valid.chars().count() + 1;
            LocatedError {
                origin: self.origin.to_string(),
                location: Location {
                    line: self.number,
                    column,
                },
                field: None,
                message: format!(
                    "invalid UTF-8: byte 0x{:02x} at byte offset {}",
                    bytes[valid.len()],
                    self.start + valid.len() as u64
                ),
                source_line: Some(Box::new(SourceExcerpt::around(valid, column))),
            }
        })?;
        let text = if self.number == 1 {
            strip_bom(text)
        } else {
            text
        };
        each(self.number, text);
        Ok(())
    }
}

fn too_large(origin: &str, limit: u64) -> LocatedError {
    let mib = if limit >= 1 << 20 && limit % (1 << 20) == 0 {
        format!(" ({} MiB)", limit >> 20)
    } else {
        String::new()
    };
    file_error(
        origin,
        format!(
            "cannot read: larger than the limit of {limit} bytes{mib}; raise it with --max-file-size"
        ),
    )
}

/// Reads at most `limit` bytes: a stream, or a file that grows while read, is refused as
/// soon as it passes the limit.
fn read_limited(reader: impl Read, origin: &str, limit: u64) -> Result<String, LocatedError> {
    let mut bytes = Vec::new();
    reader
        .take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| file_error(origin, format!("cannot read: {e}")))?;
    if bytes.len() as u64 > limit {
        return Err(too_large(origin, limit));
    }
    decode(origin, bytes)
}

/// Decodes UTF-8, locating the first invalid byte; a leading byte-order mark is dropped.
pub fn decode(origin: &str, bytes: Vec<u8>) -> Result<String, LocatedError> {
    let mut text = String::from_utf8(bytes).map_err(|e| {
        let bytes = e.as_bytes();
        let valid = &bytes[..e.utf8_error().valid_up_to()];
        // The valid prefix is UTF-8 by definition.
        let valid = std::str::from_utf8(valid).unwrap_or_default();
        let location = location_of_byte(valid, valid.len());
        let line_start = valid.rfind(['\n', '\r']).map_or(0, |i| i + 1);
        LocatedError {
            origin: origin.to_string(),
            location,
            field: None,
            message: format!(
                "invalid UTF-8: byte 0x{:02x} at byte offset {}",
                bytes[valid.len()],
                valid.len()
            ),
            source_line: Some(Box::new(SourceExcerpt::around(
                &valid[line_start..],
                location.column,
            ))),
        }
    })?;
    if text.starts_with('\u{feff}') {
        text.drain(..'\u{feff}'.len_utf8());
    }
    Ok(text)
}

/// `text` without a leading byte-order mark.
pub fn strip_bom(text: &str) -> &str {
    text.strip_prefix('\u{feff}').unwrap_or(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_utf8_is_located_at_the_bad_byte() {
        let e = decode("f", b"a: 1\nb: \"x\xffy\"\n".to_vec()).unwrap_err();
        assert_eq!(e.location, Location { line: 2, column: 6 });
        assert!(e.message.contains("0xff"), "{e}");
        assert!(e.render().contains("^"));
        // Lone `\r` line breaks count as YAML counts them.
        let e = decode("f", b"a: 1\rb: 2\r\nc: \"x\xffy\"\r".to_vec()).unwrap_err();
        assert_eq!(e.location, Location { line: 3, column: 6 });
        assert_eq!(e.source_line.unwrap().text, "c: \"x");
    }

    /// Every line [`for_each_line`] gives for `bytes` (written to a temporary file).
    fn streamed(bytes: &[u8]) -> Result<Vec<(usize, String)>, LocatedError> {
        let path = std::env::temp_dir().join(format!(
            "routechain-input-{}-{}",
            std::process::id(),
            bytes.len()
        ));
        std::fs::write(&path, bytes).unwrap();
        let mut out = Vec::new();
        let r = for_each_line(&path, "f", |n, l| out.push((n, l.to_string())));
        let _ = std::fs::remove_file(&path);
        r.map(|()| out)
    }

    #[test]
    fn streamed_lines_end_as_every_other_line_and_utf8_errors_match_decode() {
        let text = "\u{feff}a\r\nb\rc\n\nd";
        let got = streamed(text.as_bytes()).unwrap();
        let want: Vec<(usize, String)> = crate::located::lines(strip_bom(text))
            .enumerate()
            .map(|(i, l)| (i + 1, l.to_string()))
            .collect();
        assert_eq!(got, want);
        let bad = b"a: 1\rb: 2\r\nc: \"x\xffy\"\r".to_vec();
        let e = streamed(&bad).unwrap_err();
        assert_eq!(e, decode("f", bad).unwrap_err());
        // Lines longer than one read, and a `\r\n` split between two reads.
        let long = format!("{}\r\n{}\n", "x".repeat((1 << 20) - 1), "y".repeat(3 << 20));
        let got = streamed(long.as_bytes()).unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!((got[0].1.len(), got[1].1.len()), ((1 << 20) - 1, 3 << 20));
    }

    #[test]
    fn a_bom_is_dropped() {
        assert_eq!(decode("f", b"\xef\xbb\xbfa: 1".to_vec()).unwrap(), "a: 1");
        assert_eq!(strip_bom("\u{feff}x"), "x");
    }

    #[test]
    fn sizes_parse_with_units() {
        assert_eq!(parse_size("16MiB"), Ok(16 << 20));
        assert_eq!(parse_size("1000"), Ok(1000));
        assert_eq!(parse_size("2 KiB"), Ok(2048));
        assert!(parse_size("x").is_err());
        assert!(parse_size("5 parsecs").is_err());
    }

    #[test]
    fn only_regular_files_within_the_limit_are_read() {
        let e = read_text(Path::new("/dev/zero"), "/dev/zero").unwrap_err();
        assert!(e.message.contains("not a regular file"), "{e}");
        let e = read_text(Path::new("/"), "/").unwrap_err();
        assert!(e.message.contains("directory"), "{e}");
        let e = read_limited(&b"0123456789"[..], "s", 5).unwrap_err();
        assert!(
            e.message.contains("larger than the limit of 5 bytes"),
            "{e}"
        );
        assert_eq!(read_limited(&b"01234"[..], "s", 5).unwrap(), "01234");
    }

    #[test]
    fn a_fifo_is_read_as_an_argument_never_as_a_named_file() {
        let fifo = std::env::temp_dir().join(format!("routechain-fifo-{}", std::process::id()));
        let _ = std::fs::remove_file(&fifo);
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.is_ok_and(|s| s.success()), "mkfifo");
        // Named inside a file: refused without opening (which would block).
        let e = read_text(&fifo, "f").unwrap_err();
        assert!(e.message.contains("not a regular file (a FIFO"), "{e}");
        // Given as an argument: read until its writer closes it.
        let writer = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::write(&fifo, "a: 1\n"))
        };
        assert_eq!(read_input(&fifo).unwrap(), "a: 1\n");
        writer.join().unwrap().unwrap();
        // A stream of lines stops at the size limit (a regular file would not).
        let writer = {
            let fifo = fifo.clone();
            std::thread::spawn(move || {
                let line = [b'#'; 100];
                let mut f = std::fs::OpenOptions::new().write(true).open(&fifo)?;
                loop {
                    std::io::Write::write_all(&mut f, &line)?;
                }
                #[allow(unreachable_code)]
                Ok::<(), std::io::Error>(())
            })
        };
        let limit = max_file_size();
        let e = for_each_line(&fifo, "f", |_, _| {}).unwrap_err();
        assert!(
            e.message
                .contains(&format!("larger than the limit of {limit} bytes")),
            "{e}"
        );
        // The writer ends with a broken pipe once the reader is gone.
        assert!(writer.join().unwrap().is_err());
        let _ = std::fs::remove_file(&fifo);
    }
}
