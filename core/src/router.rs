//! The router contract.
//!
//! A [`Router`] is a compiled rule. Off the call path, whenever the provider snapshot (or the
//! consumer) changes, the chain asks it to [`Router::prepare`] a [`PreparedRouter`]: compiled
//! matchers resolved into bitsets, attribute value → bitset indexes, precomputed answers.
//! Per call, the prepared router narrows the candidate bitset in place from that state,
//! reading the request through a [`RouteContext`]. Per call nothing allocates, locks or
//! re-parses provider strings.

use std::fmt;
use std::sync::Arc;

use crate::bitset::{BitSet, Candidates};
use crate::degraded::DegradedSet;
use crate::request::Request;
use crate::rng::RandomSource;
use crate::snapshot::Snapshot;
use crate::trace::Evaluation;
use crate::url::Url;

/// What a router sees when it prepares: the snapshot, the chain's consumer and service.
#[derive(Debug, Clone, Copy)]
pub struct PrepareContext<'a> {
    /// The providers.
    pub snapshot: &'a Snapshot,
    /// The consumer the chain is built for (requests may carry another; see
    /// [`RouteContext::consumer_is_prepared`]).
    pub consumer: &'a Url,
    /// The service the chain routes, if known.
    pub service: Option<&'a str>,
}

/// A router preparation that failed (a plugin that refused the snapshot, say).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("router {router} could not prepare snapshot generation {generation}: {reason}")]
pub struct PrepareError {
    /// The router's name.
    pub router: String,
    /// The snapshot generation.
    pub generation: u64,
    /// Why.
    pub reason: String,
}

/// A compiled rule: builds per-snapshot state off the call path.
pub trait Router: Send + Sync + 'static {
    /// The name shown in traces and errors, e.g. `condition(service)` or `tag`.
    fn name(&self) -> &str;

    /// Prepares the per-snapshot state. Called when the snapshot, the consumer or the rule
    /// changes, never per call.
    fn prepare(&self, cx: &PrepareContext<'_>) -> Result<Arc<dyn PreparedRouter>, PrepareError>;
}

/// A router's state for one snapshot: answers each call.
pub trait PreparedRouter: Send + Sync + 'static {
    /// Narrows `candidates` in place for this call. Must not allocate (except to write the
    /// explain reason, which only happens when a trace is recorded) and must not lock.
    fn route(&self, cx: &mut RouteContext<'_>, candidates: &mut Candidates) -> Evaluation;

    /// Called off the call path once this state is part of a chain state, with that state's
    /// live degraded set (again when a later state over the same snapshot reuses it). A
    /// router that counts degraded providers per group registers a
    /// [`DegradedSet::tally`] here. The default does nothing.
    fn attach(&self, degraded: &Arc<DegradedSet>) {
        let _ = degraded;
    }
}

/// What a prepared router sees per call.
pub struct RouteContext<'a> {
    pub(crate) request: &'a Request,
    pub(crate) consumer: &'a Url,
    pub(crate) consumer_is_prepared: bool,
    pub(crate) snapshot: &'a Snapshot,
    pub(crate) degraded: &'a DegradedSet,
    pub(crate) rng: &'a mut dyn RandomSource,
    pub(crate) scratch: &'a mut BitSet,
    pub(crate) reason: Option<&'a mut String>,
}

impl<'a> RouteContext<'a> {
    /// Builds a context by hand: for router unit tests and for hosts that drive a
    /// prepared router outside a chain.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        request: &'a Request,
        consumer: &'a Url,
        consumer_is_prepared: bool,
        snapshot: &'a Snapshot,
        degraded: &'a DegradedSet,
        rng: &'a mut dyn RandomSource,
        scratch: &'a mut BitSet,
        reason: Option<&'a mut String>,
    ) -> Self {
        RouteContext {
            request,
            consumer,
            consumer_is_prepared,
            snapshot,
            degraded,
            rng,
            scratch,
            reason,
        }
    }

    /// The request.
    pub fn request(&self) -> &'a Request {
        self.request
    }
    /// The consumer of this call: the request's, or the chain's when the request has none.
    pub fn consumer(&self) -> &'a Url {
        self.consumer
    }
    /// True when this call's consumer is the one the router prepared for, so answers
    /// precomputed from the consumer URL hold.
    pub fn consumer_is_prepared(&self) -> bool {
        self.consumer_is_prepared
    }
    /// The snapshot the candidates range over.
    pub fn snapshot(&self) -> &'a Snapshot {
        self.snapshot
    }
    /// The live degraded set (health), over the same snapshot.
    pub fn degraded(&self) -> &'a DegradedSet {
        self.degraded
    }
    /// The call's random source.
    pub fn rng(&mut self) -> &mut dyn RandomSource {
        &mut *self.rng
    }
    /// A scratch bitset sized to the snapshot, for routers that must keep a copy of their
    /// input (its content on entry is unspecified).
    pub fn scratch(&mut self) -> &mut BitSet {
        &mut *self.scratch
    }
    /// True when the call records an explain trace.
    pub fn explaining(&self) -> bool {
        self.reason.is_some()
    }
    /// Records the reason for this router's decision, when a trace is recorded. Pass
    /// `format_args!(..)`: nothing is formatted otherwise.
    pub fn explain(&mut self, args: fmt::Arguments<'_>) {
        if let Some(reason) = self.reason.as_deref_mut() {
            use fmt::Write as _;
            if !reason.is_empty() {
                reason.push_str("; ");
            }
            let _ = reason.write_fmt(args);
        }
    }
}

/// A router made from a closure, for tests and examples: the closure runs per call.
pub struct FnRouter<F> {
    name: String,
    f: Arc<F>,
}

/// Makes a router from a closure `f(&mut RouteContext, &mut Candidates)`.
pub fn router_fn<F>(name: impl Into<String>, f: F) -> FnRouter<F>
where
    F: Fn(&mut RouteContext<'_>, &mut Candidates) + Send + Sync + 'static,
{
    FnRouter {
        name: name.into(),
        f: Arc::new(f),
    }
}

struct FnPrepared<F>(Arc<F>);

impl<F> PreparedRouter for FnPrepared<F>
where
    F: Fn(&mut RouteContext<'_>, &mut Candidates) + Send + Sync + 'static,
{
    fn route(&self, cx: &mut RouteContext<'_>, candidates: &mut Candidates) -> Evaluation {
        (self.0)(cx, candidates);
        Evaluation::Runtime
    }
}

impl<F> Router for FnRouter<F>
where
    F: Fn(&mut RouteContext<'_>, &mut Candidates) + Send + Sync + 'static,
{
    fn name(&self) -> &str {
        &self.name
    }
    fn prepare(&self, _cx: &PrepareContext<'_>) -> Result<Arc<dyn PreparedRouter>, PrepareError> {
        Ok(Arc::new(FnPrepared(self.f.clone())))
    }
}
