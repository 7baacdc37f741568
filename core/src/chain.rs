//! The chain: routers sorted once by priority, prepared for one snapshot.
//!
//! A [`ChainState`] is one immutable value: the snapshot, the consumer, every router's
//! prepared state and the live degraded set. [`ChainState::new`] builds the first one;
//! [`ChainState::next`] derives the next one from it and a [`Change`] (new providers, with
//! or without the [`SnapshotEdit`] leading to them; new routers; a new consumer), off the
//! call path. Whoever serves the state publishes it whole (`routechain-balance`'s service
//! keeps it behind one `ArcSwap`, with its balancer and health tables), so a call sees the
//! old state or the new one; an update that fails leaves the previous state serving.

use std::sync::Arc;

use crate::bitset::{BitSet, Candidates};
use crate::degraded::DegradedSet;
use crate::edit::SnapshotEdit;
use crate::metrics::{ChainMetrics, PickCounter, RouterCounters};
use crate::request::Request;
use crate::rng::{FastRng, RandomSource};
use crate::router::{PrepareContext, PrepareError, PreparedRouter, RouteContext, Router};
use crate::snapshot::Snapshot;
use crate::trace::{Trace, TraceStep};
use crate::url::Url;

/// One router of a chain, as configured.
#[derive(Clone)]
pub struct ChainEntry {
    /// The router type (`condition`, `tag`, a plugin's name...).
    pub kind: Arc<str>,
    /// Lower runs first; ties keep configuration order.
    pub priority: i32,
    /// The compiled router.
    pub router: Arc<dyn Router>,
}

impl ChainEntry {
    /// An entry.
    pub fn new(kind: impl Into<Arc<str>>, priority: i32, router: Arc<dyn Router>) -> Self {
        ChainEntry {
            kind: kind.into(),
            priority,
            router,
        }
    }
}

impl std::fmt::Debug for ChainEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChainEntry")
            .field("kind", &self.kind)
            .field("priority", &self.priority)
            .field("router", &self.router.name())
            .finish()
    }
}

struct Step {
    /// Index into `entries`.
    entry: usize,
    name: Arc<str>,
    priority: i32,
    prepared: Arc<dyn PreparedRouter>,
    /// True when `prepared` was derived from the previous state's by a snapshot edit.
    edited: bool,
    /// This router's counters, when the state carries metrics.
    counters: Option<Arc<RouterCounters>>,
}

impl Step {
    /// Counts what the router reported on this call ([`RouteContext::note_fallback`],
    /// [`RouteContext::note_failure`]).
    #[cold]
    fn count_outcome(&self, outcome: u8) {
        if let Some(c) = &self.counters {
            if outcome & RouteContext::FALLBACK != 0 {
                c.count_fallback();
            }
            if outcome & RouteContext::FAILURE != 0 {
                c.count_failure();
            }
        }
    }

    /// Counts and logs a call this router emptied (not on the success path).
    #[cold]
    fn emptied(&self, state: &ChainState) {
        if let Some(c) = &self.counters {
            c.count_no_provider();
        }
        tracing::debug!(
            service = state.service.as_deref().unwrap_or(""),
            generation = state.generation,
            router = &*self.name,
            priority = self.priority,
            "no provider: the router emptied the candidate set"
        );
    }
}

/// The call ended with no provider left.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoProvider {
    /// The snapshot itself is empty.
    #[error("no provider available: the provider list is empty")]
    EmptySnapshot,
    /// A router emptied the candidate set.
    #[error("no provider available: router {router} (priority {priority}) left none")]
    EmptiedBy {
        /// The router's name.
        router: Arc<str>,
        /// Its position in the sorted chain.
        position: usize,
        /// Its priority.
        priority: i32,
    },
}

/// The per-caller, reusable buffers of a call: candidates, scratch and the random source.
/// Keep one per task or thread and reuse it: after the first call routing allocates nothing.
#[derive(Debug, Clone)]
pub struct CallState<R: RandomSource = FastRng> {
    /// The routed set after [`ChainState::route`].
    pub candidates: Candidates,
    scratch: BitSet,
    /// The random source for per-call draws.
    pub rng: R,
}

impl CallState<FastRng> {
    /// A call state with an entropy-seeded generator.
    pub fn new() -> Self {
        Self::with_rng(FastRng::from_entropy())
    }
    /// A call state with a fixed seed (repeatable draws).
    pub fn seeded(seed: u64) -> Self {
        Self::with_rng(FastRng::seeded(seed))
    }
}

impl Default for CallState<FastRng> {
    fn default() -> Self {
        Self::new()
    }
}

impl<R: RandomSource> CallState<R> {
    /// A call state with the given random source.
    pub fn with_rng(rng: R) -> Self {
        CallState {
            candidates: BitSet::default(),
            scratch: BitSet::default(),
            rng,
        }
    }
}

/// Everything a call needs, immutable: snapshot, consumer, prepared routers, degraded set.
pub struct ChainState {
    generation: u64,
    service: Option<Arc<str>>,
    snapshot: Arc<Snapshot>,
    consumer: Url,
    degraded: Arc<DegradedSet>,
    entries: Arc<[ChainEntry]>,
    steps: Box<[Step]>,
    metrics: Option<Arc<ChainMetrics>>,
    /// Per provider index, its pick counter (when the metrics count picks per provider).
    picks: Option<Box<[Arc<PickCounter>]>>,
}

impl std::fmt::Debug for ChainState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChainState")
            .field("generation", &self.generation)
            .field("providers", &self.snapshot.len())
            .field("consumer", &self.consumer)
            .field("routers", &self.router_names().collect::<Vec<_>>())
            .finish()
    }
}

/// A change of a [`ChainState`]: any combination of its parts, applied at once by
/// [`ChainState::next`]. `C` is what the layer serving the state changes beside it
/// (`routechain-balance`'s `ServiceConfig`); the chain ignores it.
#[derive(Debug, Clone)]
pub struct Change<C = ()> {
    /// A new provider snapshot, with the edit leading to it from the current one when known
    /// ([`Snapshot::edit_to`]): the routers, and the serving layer's tables, then carry
    /// their state over by the edit ([`PreparedRouter::prepare_edit`]) in proportion to
    /// what changed; without one (or when it does not lead from the current snapshot to
    /// this one) everything prepares over the new snapshot.
    pub providers: Option<(Arc<Snapshot>, Option<SnapshotEdit>)>,
    /// New routers, in configuration order: a router that is the same `Arc` as before keeps
    /// its prepared state (or derives it by the edit); the others prepare.
    pub entries: Option<Arc<[ChainEntry]>>,
    /// A new consumer URL: every router prepares.
    pub consumer: Option<Url>,
    /// A new service name (`Some(None)`: unnamed): every router prepares.
    pub service: Option<Option<Arc<str>>>,
    /// New settings of the serving layer.
    pub config: Option<C>,
}

impl<C> Default for Change<C> {
    fn default() -> Self {
        Change {
            providers: None,
            entries: None,
            consumer: None,
            service: None,
            config: None,
        }
    }
}

impl<C> Change<C> {
    /// New providers in place of the current ones.
    pub fn providers(snapshot: Arc<Snapshot>) -> Self {
        Change {
            providers: Some((snapshot, None)),
            ..Change::default()
        }
    }

    /// New providers following the current ones by `edit` ([`Snapshot::edit_to`]).
    pub fn edit(snapshot: Arc<Snapshot>, edit: SnapshotEdit) -> Self {
        Change {
            providers: Some((snapshot, Some(edit))),
            ..Change::default()
        }
    }

    /// New routers.
    pub fn entries(entries: impl Into<Arc<[ChainEntry]>>) -> Self {
        Change {
            entries: Some(entries.into()),
            ..Change::default()
        }
    }

    /// New settings of the serving layer.
    pub fn config(config: C) -> Self {
        Change {
            config: Some(config),
            ..Change::default()
        }
    }
}

impl ChainState {
    /// Builds and prepares a state. Routers are sorted by (priority, position in `entries`).
    pub fn new(
        service: Option<Arc<str>>,
        snapshot: Arc<Snapshot>,
        consumer: Url,
        entries: impl Into<Arc<[ChainEntry]>>,
    ) -> Result<Self, PrepareError> {
        let entries = entries.into();
        let degraded = Arc::new(DegradedSet::new(snapshot.len()));
        Self::assemble(
            1,
            service,
            snapshot,
            consumer,
            degraded,
            entries,
            Prior::None,
            None,
        )
    }

    /// The state after `change`, one generation on, counting into this state's metrics;
    /// this state is untouched (it serves until the new one is published). What `change`
    /// leaves out is kept: a router that is the same `Arc` as before keeps its prepared
    /// state over the same snapshot and consumer, or derives it by the providers' edit
    /// ([`PreparedRouter::prepare_edit`], falling back to a fresh prepare), and the degraded
    /// set follows the edit ([`DegradedSet::edited`]); new providers without an edit get a
    /// new degraded set. The result routes exactly as a state built by [`ChainState::new`]
    /// from the same parts would.
    pub fn next<C>(&self, change: &Change<C>) -> Result<Self, PrepareError> {
        // The current snapshot given again is no provider change: the degraded set (which
        // the serving layer's health table marks) stays the same set.
        let providers = change
            .providers
            .as_ref()
            .filter(|(s, _)| !Arc::ptr_eq(s, &self.snapshot));
        let (snapshot, degraded, prior) = match providers {
            None => (
                self.snapshot.clone(),
                self.degraded.clone(),
                Prior::Same(self),
            ),
            Some((snapshot, Some(edit)))
                if edit.old_len() == self.snapshot.len() && edit.new_len() == snapshot.len() =>
            {
                let degraded = if self.degraded.len() == edit.old_len() {
                    self.degraded.edited(edit)
                } else {
                    DegradedSet::new(snapshot.len())
                };
                (
                    snapshot.clone(),
                    Arc::new(degraded),
                    Prior::Edited(self, edit),
                )
            }
            Some((snapshot, _)) => (
                snapshot.clone(),
                Arc::new(DegradedSet::new(snapshot.len())),
                Prior::None,
            ),
        };
        let fresh = change.consumer.is_some() || change.service.is_some();
        Self::assemble(
            self.generation + 1,
            change
                .service
                .clone()
                .unwrap_or_else(|| self.service.clone()),
            snapshot,
            change
                .consumer
                .clone()
                .unwrap_or_else(|| self.consumer.clone()),
            degraded,
            change
                .entries
                .clone()
                .unwrap_or_else(|| self.entries.clone()),
            if fresh { Prior::None } else { prior },
            self.metrics.clone(),
        )
    }

    // Private: every field of the state it assembles, from `new` and `next`.
    #[allow(clippy::too_many_arguments)]
    fn assemble(
        generation: u64,
        service: Option<Arc<str>>,
        snapshot: Arc<Snapshot>,
        consumer: Url,
        degraded: Arc<DegradedSet>,
        entries: Arc<[ChainEntry]>,
        prior: Prior<'_>,
        metrics: Option<Arc<ChainMetrics>>,
    ) -> Result<Self, PrepareError> {
        let mut order: Vec<usize> = (0..entries.len()).collect();
        order.sort_by_key(|&i| entries[i].priority); // stable: ties keep file order
        let cx = PrepareContext {
            snapshot: &snapshot,
            consumer: &consumer,
            service: service.as_deref(),
        };
        let mut steps = Vec::with_capacity(order.len());
        for i in order {
            let entry = &entries[i];
            let before = |old: &ChainState| {
                old.steps
                    .iter()
                    .find(|s| Arc::ptr_eq(&old.entries[s.entry].router, &entry.router))
                    .map(|s| s.prepared.clone())
            };
            let derived = match prior {
                Prior::None => None,
                Prior::Same(old) => before(old),
                Prior::Edited(old, edit) => {
                    match before(old).and_then(|p| p.prepare_edit(edit, &cx)) {
                        Some(Ok(p)) => Some(p),
                        Some(Err(reason)) => {
                            return Err(PrepareError {
                                router: entry.router.name().to_string(),
                                generation: snapshot.generation(),
                                reason,
                            });
                        }
                        None => None,
                    }
                }
            };
            let edited = derived.is_some() && matches!(prior, Prior::Edited(..));
            let prepared = match derived {
                Some(p) => p,
                None => entry.router.prepare(&cx)?,
            };
            prepared.attach(&degraded);
            let counters = metrics
                .as_ref()
                .map(|m| m.router_of_kind(entry.router.name(), &entry.kind));
            steps.push(Step {
                entry: i,
                // The counters' name when counted (one string per router for the life of
                // the metrics), else the router's.
                name: counters
                    .as_ref()
                    .map_or_else(|| Arc::from(entry.router.name()), |c| c.name().clone()),
                priority: entry.priority,
                prepared,
                edited,
                counters,
            });
        }
        let picks = match prior {
            // Survivors keep their counters; only the added providers are looked up.
            Prior::Edited(old, edit) if old.picks.is_some() && metrics.is_some() => {
                old.picks.as_deref().and_then(|p| {
                    let added = pick_counters(
                        metrics.as_deref(),
                        snapshot.providers()[edit.added()].iter(),
                    )?;
                    let mut added = added.into_vec().into_iter();
                    Some(
                        edit.table(p, |_| added.next().expect("one counter per added provider"))
                            .into_boxed_slice(),
                    )
                })
            }
            Prior::Same(old) if old.picks.is_some() => old.picks.clone(),
            _ => pick_counters(metrics.as_deref(), snapshot.providers().iter()),
        };
        Ok(ChainState {
            generation,
            service,
            snapshot,
            consumer,
            degraded,
            entries,
            picks,
            steps: steps.into_boxed_slice(),
            metrics,
        })
    }

    /// This state counting its routing decisions into `metrics` (`None`: not counting):
    /// each router's counters are resolved now, by name. Every state [`ChainState::next`]
    /// derives from it carries them on.
    pub fn with_metrics(mut self, metrics: Option<Arc<ChainMetrics>>) -> Self {
        for step in self.steps.iter_mut() {
            let entry = &self.entries[step.entry];
            step.counters = metrics
                .as_ref()
                .map(|m| m.router_of_kind(entry.router.name(), &entry.kind));
            if let Some(c) = &step.counters {
                step.name = c.name().clone();
            }
        }
        self.picks = pick_counters(metrics.as_deref(), self.snapshot.providers().iter());
        self.metrics = metrics;
        self
    }

    /// Counts a pick of provider `i` when the metrics count picks per provider (a balancing
    /// layer calls it for the provider it selected).
    #[inline]
    pub fn count_pick(&self, i: usize) {
        if let Some(c) = self.picks.as_deref().and_then(|p| p.get(i)) {
            c.count();
        }
    }

    /// The call-path counters this state counts into, if any.
    pub fn metrics(&self) -> Option<&Arc<ChainMetrics>> {
        self.metrics.as_ref()
    }

    /// Each router's name in run order, with whether its prepared state was derived by
    /// [`ChainState::next`] from the previous state's ([`PreparedRouter::prepare_edit`])
    /// rather than prepared from scratch: for update logs and tests.
    pub fn edited_routers(&self) -> impl Iterator<Item = (&str, bool)> + '_ {
        self.steps.iter().map(|s| (&*s.name, s.edited))
    }

    /// The state's generation (one more with every [`ChainState::next`]).
    pub fn generation(&self) -> u64 {
        self.generation
    }
    /// The service, if named.
    pub fn service(&self) -> Option<&str> {
        self.service.as_deref()
    }
    /// The provider snapshot the indexes refer to.
    pub fn snapshot(&self) -> &Arc<Snapshot> {
        &self.snapshot
    }
    /// The consumer the routers prepared for.
    pub fn consumer(&self) -> &Url {
        &self.consumer
    }
    /// The live degraded set over this snapshot.
    pub fn degraded(&self) -> &Arc<DegradedSet> {
        &self.degraded
    }
    /// The entries, in configuration order.
    pub fn entries(&self) -> &Arc<[ChainEntry]> {
        &self.entries
    }
    /// The router names in the order they run.
    pub fn router_names(&self) -> impl Iterator<Item = &str> + '_ {
        self.steps.iter().map(|s| &*s.name)
    }
    /// The entry index (configuration order) of each step, in the order they run.
    pub fn run_order(&self) -> impl Iterator<Item = usize> + '_ {
        self.steps.iter().map(|s| s.entry)
    }

    /// Routes `request`: on success `call.candidates` holds the routed set. No lock, and
    /// after the call state's buffers have grown to the snapshot, no allocation.
    pub fn route<R: RandomSource>(
        &self,
        request: &Request,
        call: &mut CallState<R>,
    ) -> Result<(), NoProvider> {
        self.run(request, call, None, None)
    }

    /// Routes like [`ChainState::route`] and records what every router did.
    pub fn route_traced<R: RandomSource>(
        &self,
        request: &Request,
        call: &mut CallState<R>,
        trace: &mut Trace,
    ) -> Result<(), NoProvider> {
        self.route_within(request, call, None, Some(trace))
    }

    /// Routes like [`ChainState::route`] starting from `within` (the providers of the
    /// registry the cluster layer chose for the call; a set over this snapshot) instead of
    /// every provider; routers see it as [`RouteContext::within`]. With `trace`, records
    /// what every router did after the steps already in it.
    pub fn route_within<R: RandomSource>(
        &self,
        request: &Request,
        call: &mut CallState<R>,
        within: Option<&BitSet>,
        trace: Option<&mut Trace>,
    ) -> Result<(), NoProvider> {
        self.run(request, call, within, trace)
    }

    // Inlined into each entry point: `route`'s call path folds its `None`s away (instructions
    // per call under callgrind, benches/examples/call_path.rs).
    #[inline(always)]
    fn run<R: RandomSource>(
        &self,
        request: &Request,
        call: &mut CallState<R>,
        within: Option<&BitSet>,
        mut trace: Option<&mut Trace>,
    ) -> Result<(), NoProvider> {
        let n = self.snapshot.len();
        // The first router writes the candidates from the full set itself
        // (`route_from_full`: a copy of its prepared set, not a fill and an AND); a traced
        // call, which counts the input first, and a chain of no router start full.
        let from_full = trace.is_none() && !self.steps.is_empty() && within.is_none();
        if from_full {
            call.candidates.resize_unfilled(n);
        } else if let Some(within) = within {
            call.candidates.copy_from(within);
        } else {
            call.candidates.reset_full(n);
        }
        if call.scratch.len() != n {
            call.scratch.reset_full(n);
        }
        if n == 0 {
            if let Some(m) = &self.metrics {
                m.count_empty_list();
            }
            tracing::debug!(
                service = self.service.as_deref().unwrap_or(""),
                generation = self.generation,
                "no provider: the provider list is empty"
            );
            return Err(NoProvider::EmptySnapshot);
        }
        let (consumer, consumer_is_prepared) = match &request.consumer {
            None => (&self.consumer, true),
            Some(c) => (
                c,
                // (`==` compares the parts and the text without allocating.)
                Url::ptr_eq(c, &self.consumer) || *c == self.consumer,
            ),
        };
        for (position, step) in self.steps.iter().enumerate() {
            let mut reason = trace.is_some().then(String::new);
            let before = if trace.is_some() {
                call.candidates.count()
            } else {
                0
            };
            let mut cx = RouteContext {
                request,
                consumer,
                consumer_is_prepared,
                snapshot: &self.snapshot,
                degraded: &self.degraded,
                within,
                rng: &mut call.rng,
                scratch: &mut call.scratch,
                reason: reason.as_mut(),
                outcome: 0,
            };
            let evaluation = if position == 0 && from_full {
                step.prepared.route_from_full(&mut cx, &mut call.candidates)
            } else {
                step.prepared.route(&mut cx, &mut call.candidates)
            };
            if cx.outcome != 0 {
                step.count_outcome(cx.outcome);
            }
            if let Some(trace) = trace.as_deref_mut() {
                trace.steps.push(TraceStep {
                    router: step.name.to_string(),
                    priority: step.priority,
                    evaluation,
                    before,
                    after: call.candidates.count(),
                    reason: reason.unwrap_or_default(),
                });
            }
            if call.candidates.is_empty() {
                step.emptied(self);
                return Err(NoProvider::EmptiedBy {
                    router: step.name.clone(),
                    position,
                    priority: step.priority,
                });
            }
        }
        Ok(())
    }
}

/// The pick counters of `providers`, in order, when `metrics` count picks.
fn pick_counters<'a>(
    metrics: Option<&ChainMetrics>,
    providers: impl Iterator<Item = &'a Url>,
) -> Option<Box<[Arc<PickCounter>]>> {
    metrics?.pick_counters(providers.map(|p| p.address()))
}

/// What a new state may derive its routers' prepared states from.
#[derive(Clone, Copy)]
enum Prior<'a> {
    /// Nothing: every router prepares.
    None,
    /// A state over the same snapshot and consumer: a router that is the same `Arc` keeps
    /// its prepared state.
    Same(&'a ChainState),
    /// A state over the snapshot the new one follows from by the edit: a router that is the
    /// same `Arc` derives its state by [`PreparedRouter::prepare_edit`] when it can.
    Edited(&'a ChainState, &'a SnapshotEdit),
}
