//! The router contract: a typed trait router authors implement, and the object-safe twins
//! the chain stores.
//!
//! A router type implements [`TypedRouter`]: its rule as written ([`TypedRouter::Raw`], read
//! by serde), its compiled rule ([`TypedRouter::Rule`]) and its per-snapshot state
//! ([`TypedRouter::Prepared`]), and four steps:
//!
//! 1. [`TypedRouter::compile`] (once per rule): raw rule → compiled rule, every problem
//!    reported at once, located by field path;
//! 2. [`TypedRouter::default_priority`] (once per rule): where the router runs unless the
//!    chain entry says otherwise;
//! 3. [`TypedRouter::prepare`] (off the call path, whenever the provider snapshot, the
//!    consumer or the rule changes): compiled matchers resolved into bitsets, the prepared
//!    state ([`TypedRouter::Prepared`]) holding whatever the call needs;
//! 4. [`TypedRouter::route`] (per call): narrows the candidate bitset in place from the
//!    prepared state, reading the request through a [`RouteContext`]. Nothing allocates,
//!    locks or re-parses provider strings.
//!
//! [`crate::Registry::register_typed`] wraps the type in a [`TypedFactory`], which derives the
//! object-safe [`RouterFactory`], [`Router`] and [`PreparedRouter`]:
//! the rule document is deserialized (a type error names its field path), an entry without a
//! rule passes every provider (unless [`TypedRouter::without_rule`] says otherwise), and a
//! failed preparation becomes a [`PrepareError`] naming the router and the snapshot
//! generation. Type erasure happens once per snapshot (the prepared state is boxed as an
//! `Arc<dyn PreparedRouter>`); per call there is exactly one dynamic call per router.
//!
//! ```
//! use std::sync::Arc;
//! use routechain_core::{BitSet, Candidates, Evaluation, PrepareContext, Registry,
//!                       RouteContext, RouterSpec, RuleError, TypedRouter};
//!
//! /// Keeps the providers whose `zone` parameter is the rule's `zone`.
//! struct Zone;
//! #[derive(serde::Deserialize)]
//! struct RawZone { zone: String }
//!
//! impl TypedRouter for Zone {
//!     type Raw = RawZone;
//!     type Rule = String;
//!     type Prepared = BitSet;
//!     fn default_priority(&self, _rule: Option<&String>) -> i32 { 10 }
//!     fn compile(&self, raw: RawZone, _spec: &RouterSpec<'_>) -> Result<String, Vec<RuleError>> {
//!         Ok(raw.zone)
//!     }
//!     fn prepare(zone: &Arc<String>, cx: &PrepareContext<'_>) -> Result<BitSet, String> {
//!         let p = cx.snapshot.providers();
//!         Ok(BitSet::from_fn(p.len(), |i| p[i].get("zone") == Some(zone.as_str())))
//!     }
//!     fn route(zone: &BitSet, _: &mut RouteContext<'_>, c: &mut Candidates) -> Evaluation {
//!         c.and_assign(zone);
//!         Evaluation::Cached
//!     }
//! }
//!
//! let mut registry = Registry::new();
//! registry.register_typed("zone", Zone);
//! ```

use std::fmt;
use std::sync::Arc;

use serde::de::DeserializeOwned;

use crate::bitset::{BitSet, Candidates};
use crate::degraded::DegradedSet;
use crate::edit::SnapshotEdit;
use crate::registry::{RouterFactory, RouterSpec};
use crate::request::Request;
use crate::rng::{FastRng, RandomSource};
use crate::rule::{RuleDoc, RuleError};
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

/// A router type, written once with its own types: the contract router authors implement.
///
/// [`crate::Registry::register_typed`] registers it under a type name; the chain sees it
/// through the object-safe [`Router`] / [`PreparedRouter`] that [`TypedFactory`] derives.
pub trait TypedRouter: Send + Sync + 'static {
    /// The rule as written in YAML (serde reads it from the rule document; a type error
    /// names its field path).
    type Raw: DeserializeOwned;
    /// The compiled rule: matchers compiled, names resolved, nothing left to re-check per call.
    type Rule: Send + Sync + 'static;
    /// The state prepared for one snapshot and consumer.
    type Prepared: Send + Sync + 'static;

    /// The priority when the chain entry names none (lower runs first); `rule` is `None` for
    /// an entry without a rule. It may depend on the rule (Dubbo runs service-scope condition
    /// rules at 140, application-scope ones at 150).
    fn default_priority(&self, rule: Option<&Self::Rule>) -> i32;

    /// Entry fields this type accepts besides the common ones (`type`, `priority`, `rule`,
    /// `rule_file`, `application`); any other field is an error.
    fn extra_fields(&self) -> &'static [&'static str] {
        &[]
    }

    /// Whether [`TypedRouter::compile`] or [`TypedRouter::without_rule`] read
    /// [`RouterSpec::service`] (see [`crate::RouterFactory::reads_service`]); default `true`.
    /// A router that compiles its rule alike for every service returns `false`.
    fn reads_service(&self) -> bool {
        true
    }

    /// The name shown in traces and errors for a compiled rule; by default the type name the
    /// entry asked for (`tag`), and for an entry without a rule always the type name.
    fn name(&self, type_name: &str, rule: &Self::Rule) -> String {
        let _ = rule;
        type_name.to_string()
    }

    /// Compiles a rule as written, reporting every problem at once, each located by its
    /// absolute field path ([`RouterSpec::rule_path`] is the document's; [`RouterSpec::error`]
    /// joins a relative path to it).
    fn compile(&self, raw: Self::Raw, spec: &RouterSpec<'_>) -> Result<Self::Rule, Vec<RuleError>>;

    /// The rule of an entry without one (or whose config-center rule was deleted): `None`
    /// (the default) passes every provider; a router with built-in defaults returns them.
    fn without_rule(&self, spec: &RouterSpec<'_>) -> Result<Option<Self::Rule>, Vec<RuleError>> {
        let _ = spec;
        Ok(None)
    }

    /// Prepares the per-snapshot state from the compiled rule, off the call path (keep a
    /// clone of the `Arc` in the state when routing needs the rule). An error refuses the
    /// snapshot (the previous chain state keeps serving); the router name and the snapshot
    /// generation are added to it.
    fn prepare(rule: &Arc<Self::Rule>, cx: &PrepareContext<'_>) -> Result<Self::Prepared, String>;

    /// Narrows `candidates` in place for one call. Must not allocate (except to write the
    /// explain reason, which only happens when a trace is recorded) and must not lock.
    fn route(
        prepared: &Self::Prepared,
        cx: &mut RouteContext<'_>,
        candidates: &mut Candidates,
    ) -> Evaluation;

    /// Routes a call whose input is every provider (the chain's first router, when no trace
    /// is recorded): `candidates` ranges over the snapshot but its words are unspecified,
    /// and the router must write every word of the routed set — e.g. copy its prepared set
    /// instead of filling the set and ANDing into it. The result must be exactly what
    /// [`TypedRouter::route`] leaves from the full set, which is the default: fill, then
    /// route.
    #[inline]
    fn route_from_full(
        prepared: &Self::Prepared,
        cx: &mut RouteContext<'_>,
        candidates: &mut Candidates,
    ) -> Evaluation {
        candidates.fill();
        Self::route(prepared, cx, candidates)
    }

    /// Called off the call path once a prepared state is part of a chain state, with that
    /// state's live degraded set ([`PreparedRouter::attach`]). The default does nothing.
    fn attach(prepared: &Self::Prepared, degraded: &Arc<DegradedSet>) {
        let _ = (prepared, degraded);
    }

    /// Derives the state for `cx.snapshot` from `prepared`, the state for the snapshot
    /// before it, when `cx.snapshot` follows from that one by `edit` (old providers
    /// removed, the rest kept in order, new ones appended: [`SnapshotEdit`]), touching only
    /// what changed: carry each bitset over with [`SnapshotEdit::bitset`] (or
    /// [`ProviderSet::edited`](crate::ProviderSet::edited),
    /// [`ValueIndex::edited`](crate::ValueIndex::edited)) and evaluate the rule on the
    /// added providers only. The consumer and the rule are the ones `prepared` was
    /// prepared with.
    ///
    /// The result must route every request exactly as [`TypedRouter::prepare`] over
    /// `cx.snapshot` would (`routechain-testkit`'s `assert_edits_route_as_prepare` checks
    /// it). `None`, the default, prepares from scratch; an error refuses the snapshot as
    /// in `prepare`.
    fn prepare_edit(
        prepared: &Self::Prepared,
        rule: &Arc<Self::Rule>,
        edit: &SnapshotEdit,
        cx: &PrepareContext<'_>,
    ) -> Option<Result<Self::Prepared, String>> {
        let _ = (prepared, rule, edit, cx);
        None
    }
}

/// A compiled rule as the chain stores it: builds per-snapshot state off the call path.
///
/// Implemented for every [`TypedRouter`] through [`TypedFactory`]; implement it directly
/// only for routers that are not typed (the plugin loader's, say).
pub trait Router: Send + Sync + 'static {
    /// The name shown in traces and errors, e.g. `condition(service)` or `tag`.
    fn name(&self) -> &str;

    /// The priority the chain runs this router at when its entry names none (lower first).
    fn default_priority(&self) -> i32;

    /// Prepares the per-snapshot state. Called when the snapshot, the consumer or the rule
    /// changes, never per call.
    fn prepare(&self, cx: &PrepareContext<'_>) -> Result<Arc<dyn PreparedRouter>, PrepareError>;
}

/// A router's state for one snapshot: answers each call.
pub trait PreparedRouter: Send + Sync + 'static {
    /// Narrows `candidates` in place for this call. Must not allocate (except to write the
    /// explain reason, which only happens when a trace is recorded) and must not lock.
    fn route(&self, cx: &mut RouteContext<'_>, candidates: &mut Candidates) -> Evaluation;

    /// Routes a call whose input is every provider: `candidates` ranges over the snapshot
    /// but its words are unspecified, and the router must write every word of the routed
    /// set ([`TypedRouter::route_from_full`]). The chain calls it for its first router when
    /// no trace is recorded, so the full set is never written only to be narrowed. The
    /// default fills the set, then routes.
    fn route_from_full(
        &self,
        cx: &mut RouteContext<'_>,
        candidates: &mut Candidates,
    ) -> Evaluation {
        candidates.fill();
        self.route(cx, candidates)
    }

    /// Called off the call path once this state is part of a chain state, with that state's
    /// live degraded set (again when a later state over the same snapshot reuses it). A
    /// router that counts degraded providers per group registers a
    /// [`DegradedSet::tally`] here. The default does nothing.
    fn attach(&self, degraded: &Arc<DegradedSet>) {
        let _ = degraded;
    }

    /// The state for `cx.snapshot`, which follows this state's snapshot by `edit`, derived
    /// from this one in proportion to what changed ([`TypedRouter::prepare_edit`]), or
    /// `None` when the router cannot (the chain then calls [`Router::prepare`]). An error
    /// (a reason; the chain adds the router and the generation) refuses the snapshot.
    fn prepare_edit(
        &self,
        edit: &SnapshotEdit,
        cx: &PrepareContext<'_>,
    ) -> Option<Result<Arc<dyn PreparedRouter>, String>> {
        let _ = (edit, cx);
        None
    }
}

/// Derives the object-safe [`RouterFactory`], [`Router`] and [`PreparedRouter`] for a
/// [`TypedRouter`]; [`crate::Registry::register_typed`] registers one.
pub struct TypedFactory<T: TypedRouter> {
    type_name: Arc<str>,
    router: Arc<T>,
}

impl<T: TypedRouter> TypedFactory<T> {
    /// A factory for `router` under `type_name`.
    pub fn new(type_name: impl Into<Arc<str>>, router: T) -> Self {
        TypedFactory {
            type_name: type_name.into(),
            router: Arc::new(router),
        }
    }

    /// A chain router for an already compiled rule (`None`: every provider passes), named
    /// and prioritised as [`RouterFactory::build`] would: for tests and hosts that compile
    /// rules themselves.
    pub fn router(&self, rule: Option<T::Rule>) -> Arc<dyn Router> {
        self.compiled(&self.type_name, rule)
    }

    /// Reads and compiles a rule document outside a chain file (as an entry's rule with no
    /// other field): for tests and hosts.
    pub fn compile(&self, doc: RuleDoc<'_>) -> Result<T::Rule, Vec<RuleError>> {
        let entry = serde_json::Value::Null;
        let spec = RouterSpec {
            type_name: &self.type_name,
            entry: RuleDoc::new(&entry, doc.path),
            rule: Some(doc),
            base_dir: None,
            service: None,
        };
        let raw: T::Raw = doc.parse().map_err(|e| vec![e])?;
        self.router.compile(raw, &spec)
    }

    fn compiled(&self, type_name: &str, rule: Option<T::Rule>) -> Arc<dyn Router> {
        match rule {
            Some(rule) => Arc::new(Compiled::<T> {
                name: self.router.name(type_name, &rule),
                priority: self.router.default_priority(Some(&rule)),
                rule: Arc::new(rule),
            }),
            None => Arc::new(PassEverything {
                name: type_name.into(),
                priority: self.router.default_priority(None),
            }),
        }
    }
}

impl<T: TypedRouter> fmt::Debug for TypedFactory<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("TypedFactory")
            .field(&self.type_name)
            .finish()
    }
}

impl<T: TypedRouter> RouterFactory for TypedFactory<T> {
    fn extra_fields(&self) -> &'static [&'static str] {
        self.router.extra_fields()
    }

    fn reads_service(&self) -> bool {
        self.router.reads_service()
    }

    fn build(&self, spec: &RouterSpec<'_>) -> Result<Arc<dyn Router>, Vec<RuleError>> {
        let rule = match spec.rule {
            Some(doc) => {
                let raw: T::Raw = doc.parse().map_err(|e| vec![e])?;
                Some(self.router.compile(raw, spec)?)
            }
            None => self.router.without_rule(spec)?,
        };
        Ok(self.compiled(spec.type_name, rule))
    }
}

/// A typed router with its compiled rule: the [`Router`] the chain stores.
struct Compiled<T: TypedRouter> {
    name: String,
    priority: i32,
    rule: Arc<T::Rule>,
}

impl<T: TypedRouter> Router for Compiled<T> {
    fn name(&self) -> &str {
        &self.name
    }

    fn default_priority(&self) -> i32 {
        self.priority
    }

    fn prepare(&self, cx: &PrepareContext<'_>) -> Result<Arc<dyn PreparedRouter>, PrepareError> {
        match T::prepare(&self.rule, cx) {
            Ok(state) => Ok(Arc::new(Prepared::<T> {
                state,
                rule: self.rule.clone(),
            })),
            Err(reason) => Err(PrepareError {
                router: self.name.clone(),
                generation: cx.snapshot.generation(),
                reason,
            }),
        }
    }
}

/// A typed router's state for one snapshot, with the rule it was prepared from (for
/// [`TypedRouter::prepare_edit`]): the [`PreparedRouter`] the chain calls.
struct Prepared<T: TypedRouter> {
    state: T::Prepared,
    rule: Arc<T::Rule>,
}

impl<T: TypedRouter> PreparedRouter for Prepared<T> {
    #[inline]
    fn route(&self, cx: &mut RouteContext<'_>, candidates: &mut Candidates) -> Evaluation {
        T::route(&self.state, cx, candidates)
    }

    #[inline]
    fn route_from_full(
        &self,
        cx: &mut RouteContext<'_>,
        candidates: &mut Candidates,
    ) -> Evaluation {
        T::route_from_full(&self.state, cx, candidates)
    }

    fn attach(&self, degraded: &Arc<DegradedSet>) {
        T::attach(&self.state, degraded);
    }

    fn prepare_edit(
        &self,
        edit: &SnapshotEdit,
        cx: &PrepareContext<'_>,
    ) -> Option<Result<Arc<dyn PreparedRouter>, String>> {
        let state = T::prepare_edit(&self.state, &self.rule, edit, cx)?;
        Some(state.map(|state| {
            Arc::new(Prepared::<T> {
                state,
                rule: self.rule.clone(),
            }) as Arc<dyn PreparedRouter>
        }))
    }
}

/// An entry without a rule: every provider passes.
struct PassEverything {
    name: Arc<str>,
    priority: i32,
}

impl Router for PassEverything {
    fn name(&self) -> &str {
        &self.name
    }

    fn default_priority(&self) -> i32 {
        self.priority
    }

    fn prepare(&self, _cx: &PrepareContext<'_>) -> Result<Arc<dyn PreparedRouter>, PrepareError> {
        Ok(Arc::new(PassEverythingPrepared(self.name.clone())))
    }
}

struct PassEverythingPrepared(Arc<str>);

impl PreparedRouter for PassEverythingPrepared {
    fn route(&self, cx: &mut RouteContext<'_>, _candidates: &mut Candidates) -> Evaluation {
        cx.explain(format_args!("no {} rule: every provider passes", self.0));
        Evaluation::Cached
    }

    fn prepare_edit(
        &self,
        _edit: &SnapshotEdit,
        _cx: &PrepareContext<'_>,
    ) -> Option<Result<Arc<dyn PreparedRouter>, String>> {
        Some(Ok(Arc::new(PassEverythingPrepared(self.0.clone()))))
    }
}

/// What a prepared router sees per call.
pub struct RouteContext<'a> {
    pub(crate) request: &'a Request,
    pub(crate) consumer: &'a Url,
    pub(crate) consumer_is_prepared: bool,
    pub(crate) snapshot: &'a Snapshot,
    pub(crate) degraded: &'a DegradedSet,
    /// The providers the call started from ([`crate::ChainState::route_within`]).
    pub(crate) within: Option<&'a BitSet>,
    pub(crate) rng: &'a mut dyn RandomSource,
    pub(crate) scratch: &'a mut BitSet,
    pub(crate) reason: Option<&'a mut String>,
    /// What the router reported about this call ([`RouteContext::note_fallback`],
    /// [`RouteContext::note_failure`]): bits read by the chain's counters.
    pub(crate) outcome: u8,
}

impl<'a> RouteContext<'a> {
    pub(crate) const FALLBACK: u8 = 1;
    pub(crate) const FAILURE: u8 = 2;

    /// Records that the router could not apply its rule as written on this call and took
    /// its fallback or force path (a tag with no provider fell back, or was forced empty; a
    /// condition whose then-part matched nothing was ignored or forced empty...). Counted
    /// per router by the chain's metrics (`routechain_router_fallback_total`); one bit,
    /// nothing else on the call path.
    #[inline]
    pub fn note_fallback(&mut self) {
        self.outcome |= Self::FALLBACK;
    }

    /// Records that the router failed on this call and was isolated (its input kept): the
    /// plugin router's errors and caught panics. Counted per router by the chain's metrics
    /// (`routechain_plugin_failures_total`).
    #[inline]
    pub fn note_failure(&mut self) {
        self.outcome |= Self::FAILURE;
    }

    /// A builder for a context outside a chain: for router unit tests and for hosts that
    /// drive a prepared router themselves. See [`RouteContextBuilder`].
    pub fn builder(request: &'a Request, snapshot: &'a Snapshot) -> RouteContextBuilder<'a> {
        RouteContextBuilder {
            request,
            snapshot,
            consumer: None,
            consumer_is_prepared: true,
            degraded: None,
            rng: None,
            explain: false,
            own_consumer: Url::empty(),
            own_degraded: DegradedSet::new(snapshot.len()),
            own_rng: FastRng::seeded(1),
            scratch: BitSet::full(snapshot.len()),
            reason: String::new(),
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
    /// The providers this call may reach when the cluster layer chose one of several
    /// registries for it ([`crate::ChainState::route_within`]; `None`: every provider of
    /// the snapshot). The candidates start within it; a
    /// router whose prepared state counts providers of the whole snapshot (the IDC-weight
    /// router's health) counts within it, so the call routes as over that registry's own
    /// list.
    pub fn within(&self) -> Option<&'a BitSet> {
        self.within
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

/// Builds a [`RouteContext`] outside a chain. Everything but the request and the snapshot
/// has a default: the empty consumer URL (counted as the prepared one), no degraded
/// provider, a random source seeded with 1, a scratch bitset sized to the snapshot, and no
/// explain trace.
///
/// ```
/// use routechain_core::{BitSet, Request, RouteContext, Snapshot};
///
/// let snapshot = Snapshot::parse_lines(1, "dubbo://10.0.0.1:20880/svc\n").unwrap();
/// let request = Request::new().with_method("get");
/// let mut builder = RouteContext::builder(&request, &snapshot).explain(true);
/// let mut candidates = BitSet::full(snapshot.len());
/// let mut cx = builder.context();
/// cx.explain(format_args!("kept {}", candidates.count()));
/// # let _ = &mut candidates;
/// assert_eq!(builder.reason(), "kept 1");
/// ```
pub struct RouteContextBuilder<'a> {
    request: &'a Request,
    snapshot: &'a Snapshot,
    consumer: Option<&'a Url>,
    consumer_is_prepared: bool,
    degraded: Option<&'a DegradedSet>,
    rng: Option<&'a mut dyn RandomSource>,
    explain: bool,
    own_consumer: Url,
    own_degraded: DegradedSet,
    own_rng: FastRng,
    scratch: BitSet,
    reason: String,
}

impl<'a> RouteContextBuilder<'a> {
    /// The call's consumer, and whether it is the one the router prepared for.
    pub fn consumer(mut self, consumer: &'a Url, is_prepared: bool) -> Self {
        self.consumer = Some(consumer);
        self.consumer_is_prepared = is_prepared;
        self
    }
    /// The live degraded set (over the same snapshot).
    pub fn degraded(mut self, degraded: &'a DegradedSet) -> Self {
        self.degraded = Some(degraded);
        self
    }
    /// The random source.
    pub fn rng(mut self, rng: &'a mut dyn RandomSource) -> Self {
        self.rng = Some(rng);
        self
    }
    /// Whether to record the explain reason (read it with [`RouteContextBuilder::reason`]).
    pub fn explain(mut self, explain: bool) -> Self {
        self.explain = explain;
        self
    }
    /// A context for one call. The reason recorded by the previous context is cleared.
    pub fn context(&mut self) -> RouteContext<'_> {
        self.reason.clear();
        RouteContext {
            request: self.request,
            consumer: self.consumer.unwrap_or(&self.own_consumer),
            consumer_is_prepared: self.consumer_is_prepared,
            snapshot: self.snapshot,
            degraded: self.degraded.unwrap_or(&self.own_degraded),
            within: None,
            rng: match self.rng.as_deref_mut() {
                Some(rng) => rng,
                None => &mut self.own_rng,
            },
            scratch: &mut self.scratch,
            reason: self.explain.then_some(&mut self.reason),
            outcome: 0,
        }
    }
    /// The reason the last context recorded (empty unless [`RouteContextBuilder::explain`]).
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

/// A router made from a closure, for tests and examples: the closure runs per call.
/// [`crate::Registry::register_fn`] registers one under a type name for chain files.
pub struct FnRouter<F> {
    name: String,
    priority: i32,
    f: Arc<F>,
}

/// Makes a router from a closure `f(&mut RouteContext, &mut Candidates)`, with default
/// priority 0.
pub fn router_fn<F>(name: impl Into<String>, f: F) -> FnRouter<F>
where
    F: Fn(&mut RouteContext<'_>, &mut Candidates) + Send + Sync + 'static,
{
    FnRouter {
        name: name.into(),
        priority: 0,
        f: Arc::new(f),
    }
}

impl<F> FnRouter<F> {
    /// The same router with another default priority.
    pub fn with_priority(mut self, priority: i32) -> Self {
        self.priority = priority;
        self
    }
}

impl<F> Clone for FnRouter<F> {
    fn clone(&self) -> Self {
        FnRouter {
            name: self.name.clone(),
            priority: self.priority,
            f: self.f.clone(),
        }
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
    /// The closure holds no per-snapshot state: the same one serves the edited snapshot.
    fn prepare_edit(
        &self,
        _edit: &SnapshotEdit,
        _cx: &PrepareContext<'_>,
    ) -> Option<Result<Arc<dyn PreparedRouter>, String>> {
        Some(Ok(Arc::new(FnPrepared(self.0.clone()))))
    }
}

impl<F> Router for FnRouter<F>
where
    F: Fn(&mut RouteContext<'_>, &mut Candidates) + Send + Sync + 'static,
{
    fn name(&self) -> &str {
        &self.name
    }
    fn default_priority(&self) -> i32 {
        self.priority
    }
    fn prepare(&self, _cx: &PrepareContext<'_>) -> Result<Arc<dyn PreparedRouter>, PrepareError> {
        Ok(Arc::new(FnPrepared(self.f.clone())))
    }
}

/// Builds a closure router for every entry of its type; an entry with a rule is an error.
pub(crate) struct FnFactory<F>(pub(crate) FnRouter<F>);

impl<F> RouterFactory for FnFactory<F>
where
    F: Fn(&mut RouteContext<'_>, &mut Candidates) + Send + Sync + 'static,
{
    fn build(&self, spec: &RouterSpec<'_>) -> Result<Arc<dyn Router>, Vec<RuleError>> {
        if let Some(rule) = spec.rule {
            return Err(vec![RuleError::new(
                rule.path.clone(),
                format!("router type {:?} takes no rule", spec.type_name),
            )]);
        }
        Ok(Arc::new(self.0.clone()))
    }

    fn reads_service(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests;
