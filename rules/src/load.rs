//! Loading a chain from files: chain file, provider list, request.
//!
//! Each step reports every problem it finds, located by file, line and column; nothing here
//! panics on data.

use std::path::Path;
use std::sync::Arc;

use routechain_balance::Service;
use routechain_core::{Chain, ChainState, PrepareError, Registry, Request, Snapshot, Url};

use crate::request::RequestSpec;
use crate::{ChainFile, LocatedError, Location};

/// Why a chain could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// Problems in the chain file, its rule files, the provider list or the request.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Invalid(Vec<LocatedError>),
    /// A router refused to prepare the snapshot.
    #[error(transparent)]
    Prepare(#[from] PrepareError),
}

impl LoadError {
    /// Every problem, rendered with the source line and a caret where known.
    pub fn render(&self) -> String {
        match self {
            LoadError::Invalid(errors) => errors
                .iter()
                .map(LocatedError::render)
                .collect::<Vec<_>>()
                .join("\n"),
            LoadError::Prepare(e) => e.to_string(),
        }
    }
}

impl From<Vec<LocatedError>> for LoadError {
    fn from(errors: Vec<LocatedError>) -> Self {
        LoadError::Invalid(errors)
    }
}

/// Reads a provider list: one URL per line; blank lines and `#` comments skipped. Every bad
/// line is reported with its line and column.
pub fn load_providers(path: &Path, generation: u64) -> Result<Snapshot, LoadError> {
    let origin = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|e| vec![crate::chain_file::io_error(&origin, &e)])?;
    parse_providers(&origin, &text, generation)
}

/// Parses a provider list from text; `origin` names it in errors.
pub fn parse_providers(origin: &str, text: &str, generation: u64) -> Result<Snapshot, LoadError> {
    Snapshot::parse_lines(generation, text).map_err(|errors| {
        LoadError::Invalid(
            errors
                .into_iter()
                .map(|e| LocatedError {
                    origin: origin.to_string(),
                    location: Location {
                        line: e.line,
                        column: e.source.column,
                    },
                    field: None,
                    message: format!("invalid provider URL: {}", e.source.reason),
                    source_line: text.lines().nth(e.line - 1).map(str::to_string),
                })
                .collect(),
        )
    })
}

/// Reads a request in the JSON format of the CLI (`-` reads standard input).
pub fn load_request(path: &Path) -> Result<Request, LoadError> {
    let origin = path.display().to_string();
    let text = if path == Path::new("-") {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut s)
            .map_err(|e| vec![crate::chain_file::io_error("<stdin>", &e)])?;
        s
    } else {
        std::fs::read_to_string(path).map_err(|e| vec![crate::chain_file::io_error(&origin, &e)])?
    };
    parse_request(&origin, &text)
}

/// Parses a request from JSON text.
pub fn parse_request(origin: &str, text: &str) -> Result<Request, LoadError> {
    let located = |line: usize, column: usize, message: String| {
        LoadError::Invalid(vec![LocatedError {
            origin: origin.to_string(),
            location: Location {
                line: line.max(1),
                column: column.max(1),
            },
            field: None,
            message,
            source_line: text.lines().nth(line.saturating_sub(1)).map(str::to_string),
        }])
    };
    let spec: RequestSpec = serde_json::from_str(text)
        .map_err(|e| located(e.line(), e.column(), format!("invalid request: {e}")))?;
    spec.into_request().map_err(|e| {
        located(
            1,
            1,
            format!(
                "invalid consumer URL {:?} at column {}: {}",
                e.input, e.column, e.reason
            ),
        )
    })
}

/// Compiles the chain file's routers and prepares them over `snapshot`. The consumer is
/// `consumer`, else the chain file's `consumer`, else an empty URL.
pub fn build_state(
    chain: &ChainFile,
    registry: &Registry,
    snapshot: Arc<Snapshot>,
    consumer: Option<Arc<Url>>,
) -> Result<ChainState, LoadError> {
    let entries = chain.compile(registry)?;
    let consumer = consumer
        .or_else(|| chain.consumer.clone().map(Arc::new))
        .unwrap_or_else(|| Arc::new(Url::empty()));
    Ok(ChainState::new(
        chain.service.as_deref().map(Arc::from),
        snapshot,
        consumer,
        entries,
    )?)
}

/// Builds a [`Service`] (routing, balancing, failover, health) from a chain file: its
/// routers over `snapshot`, and its `load_balance`, `methods`, `skip_degraded`, `retries`
/// and `health` settings.
pub fn build_service(
    chain: &ChainFile,
    registry: &Registry,
    snapshot: Arc<Snapshot>,
    consumer: Option<Arc<Url>>,
) -> Result<Service, LoadError> {
    let state = build_state(chain, registry, snapshot, consumer)?;
    Ok(Service::new(
        Arc::new(Chain::new(state)),
        chain.service_config.clone(),
    ))
}
