//! # routechain-core
//!
//! The model and the chain of routechain, depending on nothing else of routechain's:
//!
//! - [`Url`] / [`Provider`]: Dubbo-style URLs, parsed once.
//! - [`Snapshot`]: an immutable, indexed provider list with a generation;
//!   [`SnapshotEdit`]: how one follows from the one before it (providers removed, others
//!   appended), so routers update their indexes in proportion to what changed.
//! - [`Request`]: one call (consumer, method, arguments, attachments, attributes), passed
//!   explicitly — never through thread-locals.
//! - [`BitSet`] / [`Candidates`]: the working set of a call, narrowed in place (member
//!   counts with the CPU's `POPCNT`, AND passes and scans with its AVX2, when it has them).
//! - [`TypedRouter`]: the router contract authors implement (raw rule → compiled rule →
//!   prepared state → per-call route); [`Router`] / [`PreparedRouter`]: its object-safe
//!   twins the chain stores, derived by [`TypedFactory`].
//! - [`ChainState`]: routers sorted once by priority, prepared for one snapshot;
//!   [`ChainState::next`] derives the next state from it and a [`Change`].
//! - [`ProviderSet`] / [`ValueIndex`] / [`NamedSets`]: per-snapshot indexes (value →
//!   providers).
//! - [`Registry`]: router type name → factory, a value passed to the chain loader.
//! - [`DegradedSet`]: live provider health as routers see it (a bitset of atomics).
//! - [`weighted`]: sticky and random weighted picks, spillover and panic arithmetic, shared
//!   by the routers that split traffic by weight.
//! - [`RuleDoc`] / [`RuleError`]: rule documents and errors located by field path.
//! - [`ChainMetrics`]: sharded call-path counters (calls, failovers, and per router the
//!   calls it emptied, fell back on, or failed), summed when an exporter reads them.
//!
//! ```
//! use std::sync::Arc;
//! use routechain_core::{router_fn, CallState, ChainEntry, ChainState, Request, Snapshot, Url};
//!
//! let snapshot = Snapshot::parse_lines(1, "dubbo://10.0.0.1:20880/svc?zone=a\n\
//!                                          dubbo://10.0.0.2:20880/svc?zone=b\n").unwrap();
//! // A router from a closure: keep the providers whose `zone` equals the `zone` attribute.
//! let zone = router_fn("zone", |cx, candidates| {
//!     if let Some(z) = cx.request().attributes.get("zone") {
//!         let snapshot = cx.snapshot();
//!         for i in 0..snapshot.len() {
//!             if snapshot.providers()[i].get("zone") != Some(z) {
//!                 candidates.remove(i);
//!             }
//!         }
//!     }
//! });
//! let state = ChainState::new(
//!     None,
//!     Arc::new(snapshot),
//!     Url::empty(),
//!     vec![ChainEntry::new("zone", 0, Arc::new(zone))],
//! ).unwrap();
//! let mut call = CallState::seeded(1);
//! state.route(&Request::new().with_attribute("zone", "b"), &mut call).unwrap();
//! assert_eq!(call.candidates.iter().collect::<Vec<_>>(), vec![1]);
//! ```

mod bitset;
mod chain;
mod cpu;
mod degraded;
mod edit;
mod index;
mod intern;
mod metrics;
mod registry;
mod request;
mod rng;
mod router;
mod rule;
mod rule_de;
mod snapshot;
mod trace;
mod url;
pub mod weighted;

/// `serde`, re-exported: a [`TypedRouter`]'s rule as written implements its `Deserialize`.
pub use serde;
/// `serde_json`, re-exported: request arguments and rule documents are its `Value`s.
pub use serde_json;

pub use bitset::{BitSet, Candidates, WordMask};
pub use chain::{CallState, ChainEntry, ChainState, Change, NoProvider};
// The balancers' weighted picks (`routechain-balance`) count candidate bits with these
// CPU-dispatched kernels, and the kernels' `unsafe` stays in `cpu`: public for that crate,
// not part of the API.
#[doc(hidden)]
pub use cpu::popcount;
pub(crate) use cpu::words;
pub use degraded::{DegradedSet, DegradedTally};
pub use edit::SnapshotEdit;
pub use index::{NamedSets, NamedSetsBuilder, ProviderSet, SetRef, ValueIndex};
pub use metrics::{ChainMetrics, EMPTY_LIST_ROUTER, RouterStats};
pub use registry::{Registry, RouterFactory, RouterSpec};
pub use request::{Attributes, Request};
pub use rng::{FastRng, RandomSource, SequenceRng, mix64, stable_hash};
pub use router::{
    FnRouter, PrepareContext, PrepareError, PreparedRouter, RouteContext, RouteContextBuilder,
    Router, TypedFactory, TypedRouter, router_fn,
};
pub use rule::{FieldPath, PathSegment, RuleDoc, RuleError};
// How `routechain-rules` hands its YAML trees to a `RuleDoc`: public for that crate, not
// part of the API (a router reads its rule through `RuleDoc`).
#[doc(hidden)]
pub use rule::{DocNode, DocTree, tree_value};
// The messages of unknown names and out-of-range numbers, written alike by every crate of
// routechain: public for those crates, not part of the API.
#[doc(hidden)]
pub use rule::{did_you_mean, integer_range_message, is_integer, one_of, unknown_name};
pub use snapshot::{
    Provider, ProviderLine, ProviderLineError, ProviderListError, Snapshot, provider_lines,
};
pub use trace::{Evaluation, Trace, TraceStep};
pub use url::{DERIVED_KEYS, Interned, Url, UrlError, UrlKey};
pub use weighted::{Draw, KeyPart, StickyKey};
