//! From routed set to one provider: balancing, failover, health and the service breaker.
//!
//! A [`Service`] owns the live [`Chain`], the balancers ([`crate::BalanceConfig`]) and the
//! health tracker. [`Service::select`] routes a request, then picks one provider that is not
//! among the ones a retrying caller already tried (Dubbo's failover cluster: drop the failed
//! provider, try the next of the same list). [`Service::call`] (async) and
//! [`Service::invoke`] (synchronous) run the whole failover loop: attempts, retries on other
//! providers, a timeout per attempt, in-flight counting and health reports.
//! [`Service::report_success`] and [`Service::report_failure`] feed the health tracker:
//! after `failure_threshold` consecutive failures a provider is degraded for `cooldown`,
//! marked in the chain state's [`DegradedSet`] so routers (the IDC-weight router's degraded
//! filter) and the chain-level `skip_degraded` see it at once, without rebuilding anything;
//! when the cool-down ends the provider is back on probation (one success clears it, one
//! failure degrades it again). When every provider of a call's routed set is degraded the
//! call fails fast with [`SelectError::ServiceUnavailable`] (the service breaker) until a
//! cool-down ends.
//!
//! **Published once.** Everything a call reads — the chain state, the balancers prepared
//! over its snapshot (weights, in-flight counters, round-robin weights, hash rings), the
//! health table and the configuration — is one immutable *view* behind one [`ArcSwap`],
//! built completely by the writer ([`Service::update`], [`Service::set_config`],
//! [`Service::update_snapshot`]) before it is stored. A call loads the view once and
//! never takes a lock: writers serialize among themselves only. Health is carried over to
//! a new snapshot by provider address.
//!
//! **No shared write per call.** A [`Selected`] keeps the view it was selected from alive,
//! but not through the view's own reference count, which every thread's every call would
//! then increment and decrement on one cache line. Each caller's [`CallState`] keeps a
//! small handle on the view (its own allocation, aligned to its own cache lines), and a
//! call reads the published view through an `arc-swap` guard (no reference count), compares
//! its address with the handle's and clones the handle: a reference count only this caller
//! writes. The handle is re-pointed when a new view is published (in place when no
//! [`Selected`] of the caller still holds it, else one small allocation).

use std::any::Any;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::{ArcSwap, Guard};

use crate::health::{Clock, HealthChange, HealthTable, SystemClock};
use crate::lb::SnapshotBalance;
use routechain_core::DegradedSet;
use routechain_core::RandomSource;
use routechain_core::Request;
use routechain_core::{CallState, Chain, ChainState, NoProvider};
use routechain_core::{Provider, Snapshot, SnapshotEdit};

mod by_address;
mod call;
mod config;
mod pool;
#[cfg(test)]
mod tests;
pub use pool::{PerThread, Pooled};

pub use call::{CallError, InvokeError, Invoked};
pub use config::{DEFAULT_RETRIES, DEFAULT_TIMEOUT, MethodCall, ServiceConfig};

/// Why no provider was selected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectError {
    /// Routing left no provider.
    #[error(transparent)]
    NoProvider(#[from] NoProvider),
    /// Every provider of the routed set is degraded: the breaker is open.
    #[error(
        "service unavailable: all {providers} routed provider(s) are degraded; retry in {retry_after:?}"
    )]
    ServiceUnavailable {
        /// The size of the routed set.
        providers: usize,
        /// Until the earliest cool-down ends.
        retry_after: Duration,
    },
    /// Every provider of the routed set was already tried by this call.
    #[error("no provider left to try: all {tried} provider(s) of the routed set failed")]
    Exhausted {
        /// How many providers were excluded.
        tried: usize,
    },
}

/// What a view prepares over a chain state's snapshot and degraded set: built before the
/// state is wrapped in its `Arc` and swapped in.
#[derive(Debug)]
struct Prepared {
    balance: Arc<SnapshotBalance>,
    health: Arc<HealthTable>,
    /// The snapshot's positions sorted by (address, position): exclusion and reports by
    /// address (see [`by_address`]).
    by_address: Arc<[u32]>,
}

/// The published view: chain state plus balancer and health state over its snapshot, and
/// the configuration. Immutable once stored (its counters are atomics).
#[derive(Debug)]
struct View {
    state: Arc<ChainState>,
    balance: Arc<SnapshotBalance>,
    health: Arc<HealthTable>,
    by_address: Arc<[u32]>,
    config: Arc<ServiceConfig>,
    /// Set once a newer view replaced this one: a pooled caller handle on it is dropped
    /// rather than kept (it would keep the old snapshot alive).
    retired: AtomicBool,
}

impl View {
    fn new(state: Arc<ChainState>, prepared: Prepared, config: Arc<ServiceConfig>) -> Self {
        View {
            state,
            balance: prepared.balance,
            health: prepared.health,
            by_address: prepared.by_address,
            config,
            retired: AtomicBool::new(false),
        }
    }

    fn indexes_of<'a>(&'a self, address: &'a str) -> impl Iterator<Item = usize> + 'a {
        by_address::positions_of(&self.by_address, self.state.snapshot(), address)
    }

    /// The address of provider `i` (empty past the end: the health table follows the
    /// degraded set, whose size may differ from the snapshot's).
    fn address(&self, i: usize) -> &str {
        self.state
            .snapshot()
            .providers()
            .get(i)
            .map_or("", |p| p.address())
    }

    /// Marks in `degraded` (a set over `snapshot`, whose address index is `index`) every
    /// provider whose address is degraded in this view's state.
    fn carry_degraded(&self, snapshot: &Snapshot, index: &[u32], degraded: &DegradedSet) {
        let was = self.state.degraded();
        by_address::join(
            &self.by_address,
            self.state.snapshot(),
            index,
            snapshot,
            |i, old| {
                if old.iter().any(|&j| was.contains(j as usize)) {
                    degraded.mark(i);
                }
            },
        );
    }
}

/// One caller's handle on a published view, kept in its [`CallState`]
/// (`routed.layer`): see the module documentation. Aligned to two cache lines so that its
/// reference count shares a line with nothing another thread writes (the allocator may
/// place two callers' small allocations side by side).
#[derive(Debug)]
#[repr(align(128))]
struct Handle {
    view: Arc<View>,
}

/// True when `layer` (a caller's `routed.layer`) is a handle on a view that a newer one
/// replaced: a pooled call state drops it rather than keep an old snapshot alive.
pub(crate) fn handle_is_stale(layer: &Arc<dyn Any + Send + Sync>) -> bool {
    layer
        .downcast_ref::<Handle>()
        .is_some_and(|h| h.view.retired.load(Ordering::Relaxed))
}

/// One selected provider, bound to the snapshot it was selected from.
#[derive(Debug, Clone)]
pub struct Selected {
    handle: Arc<Handle>,
    index: usize,
}

impl Selected {
    fn view(&self) -> &View {
        &self.handle.view
    }
    /// The provider's index in its snapshot.
    pub fn index(&self) -> usize {
        self.index
    }
    /// The provider.
    pub fn provider(&self) -> &Provider {
        &self.view().state.snapshot().providers()[self.index]
    }
    /// The provider's address (`host:port`).
    pub fn address(&self) -> &str {
        self.provider().address()
    }
    /// The generation of the chain state it was selected from.
    pub fn generation(&self) -> u64 {
        self.view().state.generation()
    }
    /// The chain state it was selected from.
    pub fn state(&self) -> &Arc<ChainState> {
        &self.view().state
    }
    /// Counts the call as in flight (for `leastactive` and `p2c`) until the guard drops.
    pub fn begin(&self) -> InFlight {
        self.view().balance.begin(self.index);
        InFlight {
            handle: self.handle.clone(),
            index: self.index,
        }
    }
}

/// An in-flight call on one provider; dropping it ends the call.
#[derive(Debug)]
pub struct InFlight {
    /// The caller's handle (not the balancer's `Arc`: its count would be written by every
    /// thread's calls).
    handle: Arc<Handle>,
    index: usize,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.handle.view.balance.end(self.index);
    }
}

/// Which provider a health report is about.
#[derive(Debug, Clone, Copy)]
pub enum Target<'a> {
    /// The provider a [`Selected`] names (by index in its own snapshot, by address in a
    /// newer one).
    Selected(&'a Selected),
    /// An index in the current snapshot.
    Index(usize),
    /// Every provider with this address in the current snapshot.
    Address(&'a str),
}

impl<'a> From<&'a Selected> for Target<'a> {
    fn from(s: &'a Selected) -> Self {
        Target::Selected(s)
    }
}
impl From<usize> for Target<'_> {
    fn from(i: usize) -> Self {
        Target::Index(i)
    }
}
impl<'a> From<&'a str> for Target<'a> {
    fn from(a: &'a str) -> Self {
        Target::Address(a)
    }
}

/// Counters of a service since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServiceStats {
    /// Times the breaker opened: the first refusal after a change in provider health (a
    /// provider degraded or let back in) counts as one trip.
    pub breaker_trips: u64,
    /// Calls refused with [`SelectError::ServiceUnavailable`].
    pub rejected: u64,
    /// Providers degraded by the tracker.
    pub degradations: u64,
    /// Providers on probation that succeeded.
    pub recoveries: u64,
}

#[derive(Debug, Default)]
struct Counters {
    breaker_trips: AtomicU64,
    rejected: AtomicU64,
    degradations: AtomicU64,
    recoveries: AtomicU64,
}

/// A routed, balanced, health-tracked service: see the module documentation.
#[derive(Debug)]
pub struct Service {
    chain: Arc<Chain>,
    clock: Arc<dyn Clock>,
    /// The one published view every call reads.
    view: ArcSwap<View>,
    /// Serializes the writers; a call never takes it.
    writers: Mutex<()>,
    /// Set by a writer from before it swaps the chain state until its view is stored: a
    /// call that meanwhile sees the chain ahead of the view keeps the current view.
    publishing: AtomicBool,
    /// Taken (never waited for by a call) by the one call that builds the view of a chain
    /// state swapped in behind the service's back (`Chain::update` directly).
    catching_up: AtomicBool,
    /// Bumped whenever a provider is degraded or let back in.
    health_epoch: AtomicU64,
    /// The health epoch of the last breaker trip (`u64::MAX`: none yet).
    tripped_epoch: AtomicU64,
    counters: Counters,
}

/// Clears a flag when dropped (also when a writer's closure panics).
struct ClearOnDrop<'a>(&'a AtomicBool);

impl Drop for ClearOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

impl Service {
    /// A service over `chain` with `config`, on the system clock.
    pub fn new(chain: Arc<Chain>, config: ServiceConfig) -> Self {
        Self::with_clock(chain, config, Arc::new(SystemClock::new()))
    }

    /// A service with an injected clock (tests move it by hand).
    pub fn with_clock(chain: Arc<Chain>, config: ServiceConfig, clock: Arc<dyn Clock>) -> Self {
        let config = Arc::new(config);
        let state = chain.state();
        let prepared = prepare(&state, None, &config);
        let view = Arc::new(View::new(state, prepared, config));
        Service {
            chain,
            clock,
            view: ArcSwap::new(view),
            writers: Mutex::new(()),
            publishing: AtomicBool::new(false),
            catching_up: AtomicBool::new(false),
            health_epoch: AtomicU64::new(0),
            tripped_epoch: AtomicU64::new(u64::MAX),
            counters: Counters::default(),
        }
    }

    /// The chain. Route-only callers may read it (`chain().load()`); change it through
    /// [`Service::update`] so the balancers and health are published with the new state
    /// (a state swapped in directly is picked up by a later call, which builds its view).
    pub fn chain(&self) -> &Arc<Chain> {
        &self.chain
    }

    /// The configuration of the current view.
    pub fn config(&self) -> Arc<ServiceConfig> {
        self.current().config.clone()
    }

    /// Takes the writers' lock and raises `publishing`, once no call is catching up.
    fn begin_write(&self) -> (std::sync::MutexGuard<'_, ()>, ClearOnDrop<'_>) {
        let serial = self.writers.lock().unwrap_or_else(|p| p.into_inner());
        self.publishing.store(true, Ordering::SeqCst);
        // A call that took `catching_up` before it saw `publishing` finishes its (short,
        // rare) build; later ones see `publishing` and keep the current view.
        while self.catching_up.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
        (serial, ClearOnDrop(&self.publishing))
    }

    /// Replaces the configuration (balancers, `skip_degraded`, retries, timeouts, health);
    /// balancer state is rebuilt, health is kept.
    pub fn set_config(&self, config: ServiceConfig) {
        let _write = self.begin_write();
        let old = self.view.load_full();
        let config = Arc::new(config);
        let prepared = prepare(&old.state, Some(&old), &config);
        self.view
            .store(Arc::new(View::new(old.state.clone(), prepared, config)));
        old.retired.store(true, Ordering::Relaxed);
    }

    /// Builds a new chain state from the current one with `f` and publishes it together
    /// with `config` (when given; `None` keeps the current configuration): a call made
    /// through this service sees the old state with the old configuration or the new state
    /// with the new one, never a mix. When `f` fails nothing changes and the previous state
    /// and configuration keep serving.
    ///
    /// The balancer and health state over the new state is built here, off the call path,
    /// before anything is stored; health is carried over by provider address, and when the
    /// new state has a new degraded set the degraded providers are marked in it first, so
    /// routers see them from the first call. Calls never wait for an update: until the
    /// new view is stored they use the previous one.
    pub fn update<E>(
        &self,
        config: Option<ServiceConfig>,
        f: impl FnOnce(&ChainState) -> Result<ChainState, E>,
    ) -> Result<Arc<ChainState>, E> {
        self.publish(config, None, f)
    }

    /// [`Service::update`] for a new snapshot that follows the current one by `edit`
    /// (providers removed, survivors kept in order, new ones appended:
    /// [`routechain_core::Snapshot::edit_to`]): `f` gets the current state and the new
    /// snapshot's degraded set, carried over by the edit ([`DegradedSet::edited`]), and
    /// builds the new state (typically [`ChainState::with_edit`]).
    ///
    /// What the service holds per provider follows the edit too, in time proportional to
    /// the snapshot's length in words plus the changed providers, with no string copied:
    /// each surviving provider keeps its health (failures, cool-down, probation) and its
    /// degraded mark; an added provider takes the health of the provider that had its
    /// address, if any (as [`Service::update`] carries everything over); the address
    /// index is carried and the added providers merged in. When the new state's snapshot
    /// does not follow the current one by `edit` (their lengths disagree), everything is
    /// carried over by address as [`Service::update`] does.
    pub fn update_edited<E>(
        &self,
        config: Option<ServiceConfig>,
        edit: &SnapshotEdit,
        f: impl FnOnce(&ChainState, Arc<DegradedSet>) -> Result<ChainState, E>,
    ) -> Result<Arc<ChainState>, E> {
        self.publish(config, Some(edit), |cur| {
            let degraded = if cur.degraded().len() == edit.old_len() {
                cur.degraded().edited(edit)
            } else {
                DegradedSet::new(edit.new_len())
            };
            f(cur, Arc::new(degraded))
        })
    }

    /// Replaces the provider list by an edited snapshot ([`Service::update_edited`] with
    /// [`ChainState::with_edit`]): routers, balancers and health follow the edit.
    pub fn update_snapshot_edit(
        &self,
        snapshot: Arc<Snapshot>,
        edit: &SnapshotEdit,
    ) -> Result<(), routechain_core::PrepareError> {
        self.update_edited(None, edit, |s, degraded| {
            s.with_edit(snapshot, edit, degraded)
        })
        .map(|_| ())
    }

    /// Builds the next state with `f` and publishes it with its view: prepared by `edit`
    /// from the current view when the new snapshot follows the current one by it, else
    /// carried over by address.
    fn publish<E>(
        &self,
        config: Option<ServiceConfig>,
        edit: Option<&SnapshotEdit>,
        f: impl FnOnce(&ChainState) -> Result<ChainState, E>,
    ) -> Result<Arc<ChainState>, E> {
        let _write = self.begin_write();
        let old = self.view.load_full();
        let config = config.map_or_else(|| old.config.clone(), Arc::new);
        let mut prepared = None;
        let state = self.chain.update(|cur| {
            let next = f(cur)?;
            let edit = edit.filter(|e| {
                e.old_len() == cur.snapshot().len()
                    && e.new_len() == next.snapshot().len()
                    && e.new_len() == next.degraded().len()
                    && Arc::ptr_eq(old.state.snapshot(), cur.snapshot())
                    && old.by_address.len() == e.old_len()
            });
            match edit {
                Some(e) => prepared = Some(prepare_edited(&next, &old, &config, e)),
                None => {
                    let index = address_index(&next, Some(&old));
                    if !Arc::ptr_eq(next.degraded(), cur.degraded()) {
                        old.carry_degraded(next.snapshot(), &index, next.degraded());
                    }
                    prepared = Some(prepare_indexed(&next, Some(&old), &config, index));
                }
            }
            Ok(next)
        })?;
        let prepared = prepared.unwrap_or_else(|| prepare(&state, Some(&old), &config));
        self.view
            .store(Arc::new(View::new(state.clone(), prepared, config)));
        old.retired.store(true, Ordering::Relaxed);
        Ok(state)
    }

    /// Replaces the provider list: a new degraded set carrying every degraded provider over
    /// by address, published with the snapshot in one update.
    pub fn update_snapshot(
        &self,
        snapshot: Arc<Snapshot>,
    ) -> Result<(), routechain_core::PrepareError> {
        let degraded = Arc::new(DegradedSet::new(snapshot.len()));
        self.update(None, |s| s.with_snapshot(snapshot, degraded))
            .map(|_| ())
    }

    /// The clock.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// The current chain state.
    pub fn state(&self) -> Arc<ChainState> {
        self.current().state.clone()
    }

    /// Counters since start. The call-path counters (calls, failovers, routing decisions
    /// per router) are the chain state's [`routechain_core::ChainMetrics`], when it carries
    /// them ([`ChainState::metrics`]): [`Service::select`] counts a call on a first attempt
    /// (`exclude` empty) and a failover on a retry that selected a provider.
    pub fn stats(&self) -> ServiceStats {
        let c = &self.counters;
        ServiceStats {
            breaker_trips: c.breaker_trips.load(Ordering::Relaxed),
            rejected: c.rejected.load(Ordering::Relaxed),
            degradations: c.degradations.load(Ordering::Relaxed),
            recoveries: c.recoveries.load(Ordering::Relaxed),
        }
    }

    /// The current view: one atomic load through a guard (no reference count written), no
    /// lock. When the chain was swapped behind the service's back, one call builds the view
    /// of the new state (the others keep the current view meanwhile).
    fn current(&self) -> Guard<Arc<View>> {
        let view = self.view.load();
        if Arc::ptr_eq(&view.state, &*self.chain.load()) {
            return view;
        }
        Guard::from_inner(self.catch_up(Guard::into_inner(view)))
    }

    /// The caller's handle on the current view (see the module documentation): when
    /// `layer` already points at the published view, a clone of it — a reference count
    /// only this caller writes; otherwise it is re-pointed first.
    #[inline]
    fn handle(&self, layer: &mut Option<Arc<dyn Any + Send + Sync>>) -> Arc<Handle> {
        let published = self.view.load();
        if Arc::ptr_eq(&published.state, &*self.chain.load())
            && let Some(h) = layer
            && h.downcast_ref::<Handle>()
                .is_some_and(|h| Arc::ptr_eq(&h.view, &published))
            && let Ok(h) = Arc::clone(h).downcast::<Handle>()
        {
            return h;
        }
        self.rebind(layer, published)
    }

    /// Re-points the caller's handle at the current view (one reference count on the
    /// view, taken only when the published view changed for this caller).
    #[cold]
    fn rebind(
        &self,
        layer: &mut Option<Arc<dyn Any + Send + Sync>>,
        published: Guard<Arc<View>>,
    ) -> Arc<Handle> {
        let view = Guard::into_inner(published);
        let view = if Arc::ptr_eq(&view.state, &*self.chain.load()) {
            view
        } else {
            self.catch_up(view)
        };
        if let Some(mut h) = layer.take().and_then(|h| h.downcast::<Handle>().ok())
            && let Some(handle) = Arc::get_mut(&mut h)
        {
            handle.view = view;
            *layer = Some(h.clone());
            return h;
        }
        let h = Arc::new(Handle { view });
        *layer = Some(h.clone());
        h
    }

    #[cold]
    fn catch_up(&self, view: Arc<View>) -> Arc<View> {
        if self.publishing.load(Ordering::SeqCst) || self.catching_up.swap(true, Ordering::SeqCst) {
            return view;
        }
        let _flag = ClearOnDrop(&self.catching_up);
        if self.publishing.load(Ordering::SeqCst) {
            return view;
        }
        let current = self.view.load_full();
        let state = self.chain.state();
        if Arc::ptr_eq(&current.state, &state) {
            return current;
        }
        let prepared = prepare(&state, Some(&current), &current.config);
        let next = Arc::new(View::new(state, prepared, current.config.clone()));
        let prev = self.view.compare_and_swap(&current, next.clone());
        if Arc::ptr_eq(&*prev, &current) {
            current.retired.store(true, Ordering::Relaxed);
            next
        } else {
            Arc::clone(&*prev)
        }
    }

    /// Routes `request` and picks one provider that is not in `exclude` (the providers a
    /// retrying caller already tried).
    ///
    /// In order: cool-downs that ended are released (probation); the request is routed —
    /// or, for a retry (`exclude` not empty, same `call`, same chain state, no provider
    /// degraded or let back in since), the first attempt's routed set is reused, as Dubbo's
    /// failover retries on the same list (when health changed, routers route again and see
    /// it); when every routed provider is degraded the breaker refuses the call
    /// ([`SelectError::ServiceUnavailable`]); with `skip_degraded` degraded providers leave
    /// the set; the excluded providers leave it (by index, or by address when they were
    /// selected from an older snapshot); the method's balancer picks one. Lock-free, and
    /// allocation-free once `call`'s buffers have grown and it holds a handle on the
    /// current view (see the module documentation: the `Arc` cloned for the [`Selected`]
    /// is `call`'s own).
    pub fn select<R: RandomSource>(
        &self,
        request: &Request,
        exclude: &[Selected],
        call: &mut CallState<R>,
    ) -> Result<Selected, SelectError> {
        let handle = self.handle(&mut call.routed.layer);
        let view = &*handle.view;
        if exclude.is_empty()
            && let Some(m) = view.state.metrics()
        {
            m.count_call();
        }
        let now = self.clock.now();
        if view.health.expire(now) > 0 {
            self.health_epoch.fetch_add(1, Ordering::Relaxed);
        }
        // The state's address and generation: an address reused by a later state has
        // another generation.
        let state_id = (Arc::as_ptr(&view.state) as usize, view.state.generation());
        let epoch = self.health_epoch.load(Ordering::Relaxed);
        let retry_same_set = !exclude.is_empty()
            && call.routed.state == state_id
            && call.routed.epoch == epoch
            && call.routed.set.len() == view.state.snapshot().len();
        if retry_same_set {
            // A retry: the same routed set as the first attempt (Dubbo: remove the failed
            // provider and try the next of the same list), not a new routing draw.
            call.candidates.copy_from(&call.routed.set);
        } else {
            view.state.route(request, call)?;
            call.routed.set.copy_from(&call.candidates);
            call.routed.state = state_id;
            call.routed.epoch = epoch;
        }
        let candidates = &mut call.candidates;
        let degraded = view.state.degraded();
        if degraded.any() {
            let healthy = candidates.count_with(|w| !degraded.word(w));
            if healthy == 0 {
                let epoch = self.health_epoch.load(Ordering::Relaxed);
                if self.tripped_epoch.swap(epoch, Ordering::Relaxed) != epoch {
                    self.counters.breaker_trips.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!("breaker open: every routed provider is degraded");
                }
                self.counters.rejected.fetch_add(1, Ordering::Relaxed);
                let retry_after = view
                    .health
                    .next_expiry()
                    .map_or(Duration::ZERO, |t| t.saturating_sub(now));
                return Err(SelectError::ServiceUnavailable {
                    providers: candidates.count(),
                    retry_after,
                });
            }
            if view.config.skip_degraded {
                candidates.and_with(|w| !degraded.word(w));
            }
        }
        for s in exclude {
            if Arc::ptr_eq(s.view().state.snapshot(), view.state.snapshot()) {
                candidates.remove(s.index);
            } else {
                for i in view.indexes_of(s.address()) {
                    candidates.remove(i);
                }
            }
        }
        if candidates.is_empty() {
            return Err(SelectError::Exhausted {
                tried: exclude.len(),
            });
        }
        let balance = &view.config.balance;
        let slot = balance.slot(request.method.as_deref());
        let index = view
            .balance
            .pick(slot, balance.spec(slot), request, candidates, &mut call.rng)
            .ok_or(SelectError::Exhausted {
                tried: exclude.len(),
            })?;
        if let Some(m) = view.state.metrics() {
            if !exclude.is_empty() {
                m.count_failover();
            }
            view.state.count_pick(index);
        }
        Ok(Selected { handle, index })
    }

    /// Resolves a target to indexes of `view`.
    fn with_target(&self, view: &View, target: Target<'_>, mut f: impl FnMut(usize)) {
        match target {
            Target::Selected(s) if Arc::ptr_eq(&s.view().health, &view.health) => f(s.index),
            Target::Selected(s) => view.indexes_of(s.address()).for_each(f),
            Target::Index(i) => f(i),
            Target::Address(a) => view.indexes_of(a).for_each(f),
        }
    }

    /// Records a successful call: the provider's failure count resets; on probation it is
    /// healthy again.
    pub fn report_success<'a>(&self, target: impl Into<Target<'a>>) {
        let view = self.current();
        self.with_target(&view, target.into(), |i| {
            if view.health.success(i) == HealthChange::Recovered {
                self.counters.recoveries.fetch_add(1, Ordering::Relaxed);
                tracing::info!(provider = view.address(i), "provider recovered");
            }
        });
    }

    /// Records a failed call: the threshold-th consecutive failure (or any failure on
    /// probation) degrades the provider for the cool-down.
    pub fn report_failure<'a>(&self, target: impl Into<Target<'a>>) {
        let view = self.current();
        let now = self.clock.now();
        self.with_target(&view, target.into(), |i| {
            if view.health.failure(i, now, &view.config.health) == HealthChange::Degraded {
                self.health_epoch.fetch_add(1, Ordering::Relaxed);
                self.counters.degradations.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(provider = view.address(i), "provider degraded");
            }
        });
    }

    /// Degrades a provider now for the cool-down, whatever its failure count.
    pub fn degrade<'a>(&self, target: impl Into<Target<'a>>) {
        let view = self.current();
        let now = self.clock.now();
        self.with_target(&view, target.into(), |i| {
            if view.health.degrade(i, now, &view.config.health) == HealthChange::Degraded {
                self.health_epoch.fetch_add(1, Ordering::Relaxed);
                self.counters.degradations.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(provider = view.address(i), "provider degraded");
            }
        });
    }

    /// The health of provider `i` of the current snapshot.
    pub fn health(&self, i: usize) -> crate::health::ProviderHealth {
        self.current().health.get(i)
    }

    /// The calls in flight on provider `i` of the current snapshot (counted by
    /// [`Selected::begin`] guards, which [`Service::call`] holds per attempt).
    pub fn in_flight(&self, i: usize) -> u32 {
        self.current().balance.active(i)
    }

    /// True when provider `i` of the current snapshot is degraded.
    pub fn is_degraded(&self, i: usize) -> bool {
        self.current().state.degraded().contains(i)
    }
}

/// [`prepare`] for a state whose snapshot follows `old`'s by `edit` (checked by the
/// caller): the address index and the health table carried over by the edit, the added
/// providers' health taken by address from `old` (as [`prepare`] does for every provider).
fn prepare_edited(
    state: &ChainState,
    old: &View,
    config: &ServiceConfig,
    edit: &SnapshotEdit,
) -> Prepared {
    // The balancer tables follow the edit (with the same or another configuration).
    let balance = Arc::new(old.balance.edited(edit, state.snapshot(), &config.balance));
    let by_address = by_address::index_edited(&old.by_address, edit, state.snapshot());
    let health = Arc::new(old.health.edited(edit, state.degraded().clone()));
    let providers = state.snapshot().providers();
    for i in edit.added() {
        if let Some(j) = old.indexes_of(providers[i].address()).next() {
            health.set(i, old.health.get(j));
        }
    }
    Prepared {
        balance,
        health,
        by_address,
    }
}

/// The address index over `state`'s snapshot: `old`'s when the snapshot is the same.
fn address_index(state: &ChainState, old: Option<&View>) -> Arc<[u32]> {
    match old {
        Some(o) if Arc::ptr_eq(o.state.snapshot(), state.snapshot()) => o.by_address.clone(),
        _ => by_address::index(state.snapshot()),
    }
}

/// Prepares balancers, health and the address index over `state`, reusing what `old`
/// already has for the same snapshot, configuration or degraded set.
fn prepare(state: &ChainState, old: Option<&View>, config: &ServiceConfig) -> Prepared {
    prepare_indexed(state, old, config, address_index(state, old))
}

/// [`prepare`] with the address index over `state`'s snapshot already built.
fn prepare_indexed(
    state: &ChainState,
    old: Option<&View>,
    config: &ServiceConfig,
    by_address: Arc<[u32]>,
) -> Prepared {
    let same_snapshot = old.is_some_and(|o| Arc::ptr_eq(o.state.snapshot(), state.snapshot()));
    let same_config = old.is_some_and(|o| o.config.balance == config.balance);
    let balance = match old {
        Some(o) if same_snapshot && same_config => o.balance.clone(),
        _ => Arc::new(SnapshotBalance::new(state.snapshot(), &config.balance)),
    };
    let health = match old {
        Some(o) if same_snapshot && Arc::ptr_eq(o.health.degraded(), state.degraded()) => {
            o.health.clone()
        }
        _ => {
            if state.degraded().len() != state.snapshot().len() {
                tracing::warn!(
                    degraded = state.degraded().len(),
                    providers = state.snapshot().len(),
                    "the chain state's degraded set does not match its snapshot"
                );
            }
            let table = Arc::new(HealthTable::new(state.degraded().clone()));
            if let Some(o) = old {
                // Each provider takes the health of the first old provider at its address.
                by_address::join(
                    &o.by_address,
                    o.state.snapshot(),
                    &by_address,
                    state.snapshot(),
                    |i, olds| table.set(i, o.health.get(olds[0] as usize)),
                );
            }
            table
        }
    };
    Prepared {
        balance,
        health,
        by_address,
    }
}
