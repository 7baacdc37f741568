//! Loading a chain from files: chain file, provider list, request.
//!
//! Each step reports every problem it finds, located by file, line and column; nothing here
//! panics on data.

use std::path::Path;
use std::sync::Arc;

use routechain_balance::Cluster;
use routechain_core::{ChainState, FieldPath, PrepareError, Registry, Request, Snapshot, Url};

use crate::request::RequestSpec;
use crate::{ChainFile, LocatedError, Location};

/// Why a chain could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// Problems in the chain file, its rule files, the provider list or the request.
    #[error("{}", crate::located::display_all(.0))]
    Invalid(Vec<LocatedError>),
    /// A router refused to prepare the snapshot.
    #[error(transparent)]
    Prepare(#[from] PrepareError),
}

impl LoadError {
    /// Every problem, rendered with the source excerpt and a caret where known; at most
    /// [`crate::located::MAX_PROBLEMS_PER_ORIGIN`] per file (see [`crate::located::render_all`]).
    pub fn render(&self) -> String {
        match self {
            LoadError::Invalid(errors) => crate::located::render_all(errors),
            LoadError::Prepare(e) => e.to_string(),
        }
    }
}

impl From<Vec<LocatedError>> for LoadError {
    fn from(errors: Vec<LocatedError>) -> Self {
        LoadError::Invalid(errors)
    }
}

impl From<crate::LocatedErrors> for LoadError {
    fn from(errors: crate::LocatedErrors) -> Self {
        LoadError::Invalid(errors.0)
    }
}

/// Reads a provider list: one URL per line; blank lines and `#` comments skipped. Every bad
/// line is reported with its line and column. A regular file, a pipe or (`-`) standard
/// input is read; a regular file has no size limit (see [`crate::input`]).
pub fn load_providers(path: &Path, generation: u64) -> Result<Snapshot, LoadError> {
    // Streamed and parsed on every core (`provider_file`); the same lines, providers and
    // locations as `Snapshot::parse_lines` over the whole text.
    let origin = crate::input::origin_of(path);
    let providers = crate::provider_file::read(path, &origin)?;
    Ok(Snapshot::new(generation, providers))
}

/// Reads a request in the JSON format of the CLI (`-` reads standard input), at most
/// [`crate::input::max_file_size`] bytes.
pub fn load_request(path: &Path) -> Result<Request, LoadError> {
    let text = crate::input::read_input(path).map_err(|e| vec![e])?;
    parse_request(&crate::input::origin_of(path), &text)
}

/// Parses a request from JSON text. An error names the field path (`attachments.x`) and the
/// line and column; a leading byte-order mark is skipped.
pub fn parse_request(origin: &str, text: &str) -> Result<Request, LoadError> {
    let text = crate::input::strip_bom(text);
    let located = |line: usize, column: usize, field: Option<FieldPath>, message: String| {
        LoadError::Invalid(vec![LocatedError::in_source(
            origin,
            text,
            json_location(text, line, column),
            field,
            message,
        )])
    };
    // serde_json ends its messages with the position, which is already in front.
    let message = |e: &serde_json::Error| {
        let message = e.to_string();
        let suffix = format!(" at line {} column {}", e.line(), e.column());
        format!(
            "invalid request: {}",
            message.strip_suffix(&suffix).unwrap_or(&message)
        )
    };
    let mut de = serde_json::Deserializer::from_str(text);
    let spec: RequestSpec = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().iter().fold(FieldPath::root(), |path, segment| {
            use serde_path_to_error::Segment;
            match segment {
                Segment::Seq { index } => path.index(*index),
                Segment::Map { key } | Segment::Enum { variant: key } => path.key(key),
                Segment::Unknown => path,
            }
        });
        let inner = e.inner();
        located(
            inner.line(),
            inner.column(),
            (!path.is_root()).then_some(path),
            message(inner),
        )
    })?;
    // Nothing but blanks after the request.
    de.end()
        .map_err(|e| located(e.line(), e.column(), None, message(&e)))?;
    spec.into_request().map_err(|e| {
        located(
            1,
            1,
            Some(FieldPath::root().key("consumer")),
            format!(
                "invalid consumer URL {:?} at column {}: {}",
                e.input, e.column, e.reason
            ),
        )
    })
}

/// The location of serde_json's position (`line` counts `\n` only, `column` counts bytes)
/// in the lines and characters every location uses ([`crate::located::location_of_byte`]).
fn json_location(text: &str, line: usize, column: usize) -> Location {
    let line_start = match line {
        0 | 1 => 0,
        n => text
            .match_indices('\n')
            .nth(n - 2)
            .map_or(text.len(), |(i, _)| i + 1),
    };
    crate::located::location_of_byte(text, line_start + column.saturating_sub(1))
}

/// Compiles the chain file's routers and prepares them over `snapshot`. The consumer is
/// `consumer`, else the chain file's `consumer`, else an empty URL.
pub fn build_state(
    chain: &ChainFile,
    registry: &Registry,
    snapshot: Arc<Snapshot>,
    consumer: Option<Url>,
) -> Result<ChainState, LoadError> {
    let entries = chain.compile(registry)?;
    let consumer = consumer
        .or_else(|| chain.consumer.clone())
        .unwrap_or_else(Url::empty);
    Ok(ChainState::new(
        chain.service.as_deref().map(Arc::from),
        snapshot,
        consumer,
        entries,
    )?)
}

/// Builds a [`Cluster`] (routing, balancing, failover, health) from a chain file: its
/// routers over `snapshot`, and its `load_balance`, `methods`, `skip_degraded`, `retries`
/// and `health` settings.
pub fn build_service(
    chain: &ChainFile,
    registry: &Registry,
    snapshot: Arc<Snapshot>,
    consumer: Option<Url>,
) -> Result<Cluster, LoadError> {
    let state = build_state(chain, registry, snapshot, consumer)?;
    Ok(Cluster::new(state, chain.service_config.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_streamed_provider_file_reads_as_its_text_does() {
        let cases: [&[u8]; 6] = [
            b"\xef\xbb\xbfdubbo://10.0.0.1:20880/a?x=1\r\n# c\r\n\r\n  dubbo://10.0.0.2:20880/a\n",
            b"dubbo://h:1/a\r\xe3\x80\x80dubbo://h:x/a\rdubbo://[::1/a\r\n",
            b"dubbo://h:1/a\n\tdubbo://h:1/a?=v",
            b"dubbo://h:1/a\ndubbo://h:1/\xff\n",
            b"dubbo//10.0.0.1:20880/s\n  dubbo:///s\ndubbo://h:1/a\n",
            b"",
        ];
        let dir = std::env::temp_dir();
        for (i, bytes) in cases.iter().enumerate() {
            let path = dir.join(format!("routechain-load-{}-{i}.txt", std::process::id()));
            std::fs::write(&path, bytes).unwrap();
            let origin = path.display().to_string();
            let streamed = load_providers(&path, 3);
            let whole = crate::input::decode(&origin, bytes.to_vec())
                .map(|text| Snapshot::parse_lines(3, &text));
            let _ = std::fs::remove_file(&path);
            match (streamed, whole) {
                (Ok(a), Ok(Ok(b))) => {
                    assert_eq!(a.providers(), b.providers(), "case {i}");
                    assert_eq!(a.generation(), 3);
                }
                (Err(LoadError::Invalid(a)), Ok(Err(b))) => {
                    let a: Vec<_> = a
                        .iter()
                        .map(|e| (e.location.line, e.location.column, e.message.clone()))
                        .collect();
                    let b: Vec<_> = b
                        .lines
                        .iter()
                        .map(|e| {
                            (
                                e.line,
                                e.column,
                                format!("invalid provider URL: {}", e.reason),
                            )
                        })
                        .collect();
                    assert_eq!(a, b, "case {i}")
                }
                (Err(LoadError::Invalid(a)), Err(b)) => assert_eq!(a, vec![b], "case {i}"),
                (a, b) => panic!("case {i}: {a:?} vs {b:?}"),
            }
        }
    }
}
