//! Reading a provider file of any size: streamed line by line ([`crate::input::for_each_line`])
//! and parsed on every core, so a million providers (hundreds of megabytes of text) costs the
//! parsed providers plus a few batches of lines in flight, never the whole file.
//!
//! The reading thread cuts the lines into batches of [`BATCH_LINES`] and hands them, through a
//! bounded channel, to one parsing thread per core (files under [`PARALLEL_FROM`] bytes are
//! parsed on the calling thread); the parsed batches are put back in file order, so the
//! providers' indexes and the order of the reported problems are those of the file.

use std::path::Path;
use std::sync::{Mutex, mpsc};

use routechain_core::{ProviderLine, Url};

use crate::located::SourceExcerpt;
use crate::{LocatedError, Location};

/// Lines per batch handed to a parsing thread.
const BATCH_LINES: usize = 4096;
/// Files smaller than this are parsed on the calling thread.
const PARALLEL_FROM: u64 = 4 << 20;

/// A run of lines: their text back to back, each with its number and end.
#[derive(Default)]
struct Batch {
    number: usize,
    text: String,
    lines: Vec<(usize, usize)>,
}

/// Parsed providers and bad lines of one batch.
type Parsed = (usize, Vec<Url>, Vec<LocatedError>);

/// Parses line `line` (its `text`) of a provider list into `providers` or `errors`
/// ([`ProviderLine`]: blank lines and `#` comments skipped, a bad URL located at its line
/// and column).
fn parse_line(
    origin: &str,
    line: usize,
    text: &str,
    providers: &mut Vec<Url>,
    errors: &mut Vec<LocatedError>,
) {
    let Some(line) = ProviderLine::new(line, text) else {
        return;
    };
    match line.parse() {
        Ok(url) => providers.push(url),
        Err(e) => {
            let column = e.column.max(1);
            errors.push(LocatedError {
                origin: origin.to_string(),
                location: Location {
                    line: e.line,
                    column,
                },
                field: None,
                message: format!("invalid provider URL: {}", e.reason),
                source_line: Some(Box::new(SourceExcerpt::around(text, column))),
            });
        }
    }
}

/// The providers of the file at `path` in file order, or every bad line (or the file's one
/// reading problem).
pub(crate) fn read(path: &Path, origin: &str) -> Result<Vec<Url>, Vec<LocatedError>> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let large = std::fs::metadata(path).is_ok_and(|m| m.len() >= PARALLEL_FROM);
    let (providers, errors) = if threads > 1 && large {
        read_parallel(path, origin, threads)?
    } else {
        let mut providers = Vec::new();
        let mut errors = Vec::new();
        crate::input::for_each_line(path, origin, |line, text| {
            parse_line(origin, line, text, &mut providers, &mut errors)
        })
        .map_err(|e| vec![e])?;
        (providers, errors)
    };
    if errors.is_empty() {
        Ok(providers)
    } else {
        Err(errors)
    }
}

fn read_parallel(
    path: &Path,
    origin: &str,
    threads: usize,
) -> Result<(Vec<Url>, Vec<LocatedError>), Vec<LocatedError>> {
    let (to_parse, batches) = mpsc::sync_channel::<Batch>(2 * threads);
    let batches = Mutex::new(batches);
    let (to_collect, parsed) = mpsc::channel::<Parsed>();
    std::thread::scope(|s| {
        for _ in 0..threads {
            let to_collect = to_collect.clone();
            let batches = &batches;
            s.spawn(move || {
                loop {
                    // The lock is held only to take the next batch.
                    let next = batches
                        .lock()
                        .map_err(|_| ())
                        .and_then(|r| r.recv().map_err(|_| ()));
                    let Ok(batch) = next else { break };
                    let mut providers = Vec::with_capacity(batch.lines.len());
                    let mut errors = Vec::new();
                    let mut start = 0;
                    for &(line, end) in &batch.lines {
                        let text = &batch.text[start..end];
                        parse_line(origin, line, text, &mut providers, &mut errors);
                        start = end;
                    }
                    if to_collect.send((batch.number, providers, errors)).is_err() {
                        break;
                    }
                }
            });
        }
        drop(to_collect);
        let mut batch = Batch::default();
        let mut number = 0;
        let read = crate::input::for_each_line(path, origin, |line, text| {
            batch.text.push_str(text);
            batch.lines.push((line, batch.text.len()));
            if batch.lines.len() == BATCH_LINES {
                batch.number = number;
                number += 1;
                let full = std::mem::take(&mut batch);
                // The parsers stop only when this sender is dropped.
                let _ = to_parse.send(full);
            }
        });
        if !batch.lines.is_empty() {
            batch.number = number;
            let _ = to_parse.send(batch);
        }
        drop(to_parse);
        let mut done: Vec<Parsed> = parsed.iter().collect();
        read.map_err(|e| vec![e])?;
        done.sort_unstable_by_key(|(n, _, _)| *n);
        let mut providers = Vec::with_capacity(done.iter().map(|(_, p, _)| p.len()).sum());
        let mut errors = Vec::new();
        for (_, p, e) in done {
            providers.extend(p);
            errors.extend(e);
        }
        Ok((providers, errors))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sequential(path: &Path) -> Result<(Vec<Url>, Vec<LocatedError>), Vec<LocatedError>> {
        let mut providers = Vec::new();
        let mut errors = Vec::new();
        crate::input::for_each_line(path, "f", |line, text| {
            parse_line("f", line, text, &mut providers, &mut errors)
        })
        .map_err(|e| vec![e])?;
        Ok((providers, errors))
    }

    #[test]
    fn parallel_parsing_keeps_the_file_order_of_providers_and_problems() {
        let mut text = String::new();
        for i in 0..3 * BATCH_LINES + 17 {
            match i % 1000 {
                7 => text.push_str("# comment\n"),
                500 => text.push_str(&format!("  dubbo://h:{i}x/bad\r\n")),
                _ => text.push_str(&format!(
                    "dubbo://10.0.{}.{}:20880/s?i={i}\n",
                    i / 256,
                    i % 256
                )),
            }
        }
        let path = std::env::temp_dir().join(format!("routechain-pf-{}.txt", std::process::id()));
        std::fs::write(&path, &text).unwrap();
        let (p1, e1) = sequential(&path).unwrap();
        let (p2, e2) = read_parallel(&path, "f", 3).unwrap();
        assert_eq!(p1, p2);
        assert_eq!(e1, e2);
        assert_eq!(e2.len(), 12);
        assert_eq!(
            e2[0].location,
            Location {
                line: 501,
                column: 13
            }
        );
        assert_eq!(p2[1000].param("i"), Some("1002"));
        // A reading problem is the only problem.
        let mut bytes = text.into_bytes();
        bytes.extend_from_slice(b"\xff\n");
        std::fs::write(&path, &bytes).unwrap();
        let e = read_parallel(&path, "f", 3).unwrap_err();
        let _ = std::fs::remove_file(&path);
        assert_eq!(e.len(), 1);
        assert!(e[0].message.contains("invalid UTF-8"), "{}", e[0]);
    }
}
