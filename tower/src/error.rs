//! The layer's errors.

use routechain_balance::SelectError;

/// A boxed error, as tower and hyper pass them around.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Why a request routed by the layer got no response. A gRPC request gets these as a
/// trailers-only `UNAVAILABLE` response instead (see [`crate::grpc`]).
#[derive(Debug, thiserror::Error)]
pub enum RouteError {
    /// No provider could be picked: routing left none, the breaker is open, or every
    /// provider of the routed set was tried.
    #[error(transparent)]
    Select(#[from] SelectError),
    /// Every attempt failed at the transport; `last` is the last attempt's error.
    #[error("all {attempts} attempt(s) failed; the last: {last}")]
    Failed {
        /// Attempts made.
        attempts: u32,
        /// The last attempt's error (with the provider's address).
        #[source]
        last: BoxError,
        /// Why no further attempt was made, when that was not the retry limit (e.g. the
        /// breaker opened, or every provider of the routed set was tried).
        stopped: Option<SelectError>,
    },
    /// An attempt failed and a retry was due, but the service's retry budget is spent
    /// (`retry_budget` in the chain file).
    #[error("the retry budget is spent: no retry after {attempts} attempt(s); the last: {last}")]
    RetryBudget {
        /// Attempts made.
        attempts: u32,
        /// The last attempt's error.
        #[source]
        last: BoxError,
    },
    /// The request body could not be read.
    #[error("cannot read the request body: {0}")]
    Body(#[source] BoxError),
}

impl RouteError {
    /// The `routechain-error` reason of a trailers-only gRPC answer.
    pub fn reason(&self) -> &'static str {
        match self {
            RouteError::Select(
                SelectError::NoProvider(_)
                | SelectError::ZoneForced { .. }
                | SelectError::NoRegistry,
            ) => "no-provider",
            RouteError::Select(SelectError::ServiceUnavailable { .. }) => "breaker",
            RouteError::Select(SelectError::Exhausted { .. }) => "exhausted",
            RouteError::Failed { .. } => "failed",
            RouteError::RetryBudget { .. } => "retry-budget",
            RouteError::Body(_) => "body",
        }
    }
}
