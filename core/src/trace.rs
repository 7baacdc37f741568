//! Explain traces: what each router did to one call, and why.

use serde::Serialize;

/// Whether a router answered from state prepared off the call path or evaluated the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Evaluation {
    /// Answered from precomputed results (does not depend on the request).
    Cached,
    /// Evaluated per call from the request, over prepared bitsets.
    Runtime,
}

impl std::fmt::Display for Evaluation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Evaluation::Cached => "cached",
            Evaluation::Runtime => "runtime",
        })
    }
}

/// One router's step in a call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TraceStep {
    /// The router's name (type and scope).
    pub router: String,
    /// Its priority in the chain.
    pub priority: i32,
    /// Cached or runtime.
    pub evaluation: Evaluation,
    /// Candidates before the router ran.
    pub before: usize,
    /// Candidates after it ran.
    pub after: usize,
    /// What it did, in words.
    pub reason: String,
}

/// The steps of one call, in chain order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Trace {
    /// One entry per router that ran.
    pub steps: Vec<TraceStep>,
}
