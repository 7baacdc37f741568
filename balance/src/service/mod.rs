//! From routed set to one provider: balancing, failover, health and the service breaker.
//!
//! A [`Cluster`] owns the published state of one service: the chain state (routers
//! prepared over the providers), the balancers prepared over the same providers
//! ([`crate::BalanceConfig`]), the health table, the index of providers by address and the
//! service configuration, as one immutable [`Published`] value behind one [`ArcSwap`]. A
//! call loads it once, without a lock, and sees the old value or the new one whole.
//! [`Cluster::apply`] is the one way to change it: a [`ClusterChange`] (new providers, with
//! or without the edit leading to them; new routers; a new consumer; new settings; any
//! combination) is turned into the next value off the call path ([`ChainState::next`] for
//! the routing part; the balancer and health tables carried over by the edit, or by
//! provider address), then stored. Writers serialize among themselves only.
//!
//! **Several registries.** With a [`RegistryTable`] in the configuration, the published
//! state holds it prepared over the snapshot ([`Registries`]) and every call first chooses
//! one registry (Dubbo's `ZoneAwareClusterInvoker`), then routes that registry's providers
//! alone ([`Published::route`]).
//!
//! **The calls.** Two entry points, one behaviour (Dubbo's failover cluster):
//!
//! - [`Cluster::select`] for the caller's own loop: routes a request and picks one
//!   provider that is not among the ones the caller already tried; the caller reports the
//!   outcome with [`Cluster::report_success`] / [`Cluster::report_failure`] and, on a
//!   failure, selects again with the failed provider excluded. It reuses a [`Caller`]
//!   (buffers, random source, the routed set kept for retries).
//! - [`Cluster::call`] (async) runs that loop around a closure: attempts, retries on other
//!   providers, a timeout per attempt, in-flight counting and health reports, with buffers
//!   from a per-thread cache.
//!
//! **Health.** After `failure_threshold` consecutive failures a provider is degraded for
//! `cooldown`, marked in the chain state's [`routechain_core::DegradedSet`] so routers (the
//! IDC-weight router's degraded filter) and the chain-level `skip_degraded` see it at once,
//! without rebuilding anything; when the cool-down ends the provider is back on probation
//! (one success clears it, one failure degrades it again). When every provider of a call's
//! routed set is degraded the call fails fast with [`SelectError::ServiceUnavailable`] (the
//! service breaker) until a cool-down ends. Health is carried over to new providers by the
//! edit, or by provider address.
//!
//! **No shared write per call.** A [`Selected`] keeps the published value it was selected
//! from alive, but not through the value's own reference count, which every thread's every
//! call would then increment and decrement on one cache line. Each [`Caller`] keeps a small
//! handle on the value (its own allocation, aligned to its own cache lines); a call reads
//! the published value through an `arc-swap` guard (no reference count), compares its
//! address with the handle's and clones the handle: a reference count only this caller
//! writes. The handle is re-pointed when a new value is published (in place when no
//! [`Selected`] of the caller still holds it, else one small allocation).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::{ArcSwap, Guard};

use crate::health::{Clock, HealthChange, HealthTable, SystemClock};
use crate::lb::SnapshotBalance;
use routechain_core::{ChainState, Change, NoProvider, PrepareError};
use routechain_core::{Provider, RandomSource, Request, SnapshotEdit};

mod budget;
mod by_address;
mod call;
mod caller;
mod config;
pub mod params;
mod pool;
pub mod registries;
#[cfg(test)]
mod tests;
#[doc(hidden)]
pub use pool::{PerThread, Pooled};

pub use budget::RetryBudget;
pub use call::{CallError, InvokeError, Invoked};
pub use caller::Caller;
use caller::Handle;
pub use config::{
    ClusterMode, DEFAULT_FORKS, DEFAULT_RETRIES, DEFAULT_TIMEOUT, MethodCall, OverrideKeys,
    OverrideLayer, ServiceConfig,
};
use params::CallParams;
pub use registries::{
    Choice, MAX_REGISTRIES, REGISTRY_ZONE, REGISTRY_ZONE_FORCE, Reason, Registries, RegistryInfo,
    RegistryTable,
};

/// A change of a service's published state: [`Change`] with new [`ServiceConfig`] settings
/// as its `config`. Applied whole by [`Cluster::apply`].
pub type ClusterChange = Change<ServiceConfig>;

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
    /// The call's `registry_zone_force=true` and no registry of its zone has a provider.
    #[error(
        "no provider available: no registry of {} has providers (registry_zone_force=true)",
        zone.as_deref().map_or("the call's registry_zone".into(), |z| format!("zone {z}"))
    )]
    ZoneForced {
        /// The call's zone when a registry names it (`None`: no registry is in that zone;
        /// kept as the registry's string, so a failed call allocates nothing).
        zone: Option<Arc<str>>,
    },
    /// Several registries, none with a provider of the snapshot.
    #[error("no provider available: no registry has providers")]
    NoRegistry,
}

/// A service's published state: the chain state, the balancer and health tables over its
/// snapshot, the index of providers by address and the configuration. Immutable once
/// published (its counters are atomics); read it with [`Cluster::load`].
#[derive(Debug)]
pub struct Published {
    state: Arc<ChainState>,
    balance: Arc<SnapshotBalance>,
    health: Arc<HealthTable>,
    /// The snapshot's positions sorted by (address, position): exclusion and reports by
    /// address (see [`by_address`]).
    by_address: Arc<[u32]>,
    config: Arc<ServiceConfig>,
    /// The call parameters merged from the consumer's settings, the providers' URLs and
    /// the override rules (and the balancer slots they need).
    params: Arc<CallParams>,
    /// The configuration's registries prepared over the snapshot.
    registries: Option<Arc<Registries>>,
}

impl Published {
    /// The first published state of a service; providers warming up at `now` (ms since the
    /// epoch) join the warm-up table.
    fn new(state: ChainState, config: ServiceConfig, now: i64) -> Self {
        let state = Arc::new(state);
        let by_address = by_address::index(state.snapshot());
        if state.degraded().len() != state.snapshot().len() {
            tracing::warn!(
                degraded = state.degraded().len(),
                providers = state.snapshot().len(),
                "the chain state's degraded set does not match its snapshot"
            );
        }
        let params = CallParams::new(state.snapshot(), &config);
        Published {
            balance: balance(
                SnapshotBalance::new_at(state.snapshot(), params.balance(), now),
                &params,
            ),
            health: Arc::new(HealthTable::new(state.degraded().clone())),
            by_address,
            registries: registries::prepared(&config, state.snapshot(), None),
            config: Arc::new(config),
            params: Arc::new(params),
            state,
        }
    }

    /// The state after `change` (see [`Cluster::apply`]) at `now` (ms since the epoch).
    fn next(&self, change: ClusterChange, now: i64) -> Result<Self, PrepareError> {
        let state = Arc::new(self.state.next(&change)?);
        let config = change.config.map_or_else(|| self.config.clone(), Arc::new);
        let snapshot = state.snapshot();
        if Arc::ptr_eq(snapshot, self.state.snapshot()) {
            // Same providers, same degraded set: the tables stay, the balancers are
            // prepared again only for new balancer settings.
            let reread = !self.params.reads_overrides_of(&config);
            let params = if Arc::ptr_eq(&config, &self.config) {
                self.params.clone()
            } else if reread {
                // Another override layer: the providers' keys rank anew.
                Arc::new(CallParams::new(snapshot, &config))
            } else {
                Arc::new(self.params.configured(&config))
            };
            let balance = if params.balance() == self.params.balance() && !reread {
                self.balance.clone()
            } else {
                balance(
                    SnapshotBalance::new_at(snapshot, params.balance(), now),
                    &params,
                )
            };
            let kept = self.registries.as_ref().map(|r| (r, self.state.snapshot()));
            return Ok(Published {
                balance,
                health: self.health.clone(),
                by_address: self.by_address.clone(),
                registries: registries::prepared(&config, snapshot, kept),
                config,
                params,
                state,
            });
        }
        let edit = match &change.providers {
            Some((_, Some(e)))
                if e.old_len() == self.by_address.len()
                    && e.new_len() == snapshot.len()
                    && e.new_len() == state.degraded().len() =>
            {
                Some(e)
            }
            _ => None,
        };
        Ok(match edit {
            Some(edit) => self.edited(state, config, edit, now),
            None => self.replaced(state, config, now),
        })
    }

    /// The tables over `state`, whose snapshot follows this one's by `edit` (checked by the
    /// caller): the balancers, the address index and the health table carried over by the
    /// edit, the added providers' health taken by address from this state (as
    /// [`Published::replaced`] does for every provider).
    fn edited(
        &self,
        state: Arc<ChainState>,
        config: Arc<ServiceConfig>,
        edit: &SnapshotEdit,
        now: i64,
    ) -> Self {
        let snapshot = state.snapshot();
        let params = Arc::new(self.params.edited(edit, snapshot, &config));
        let balance = balance(
            self.balance
                .edited_at(edit, snapshot, params.balance(), now),
            &params,
        );
        let by_address = by_address::index_edited(&self.by_address, edit, snapshot);
        let health = Arc::new(self.health.edited(edit, state.degraded().clone()));
        let providers = snapshot.providers();
        for i in edit.added() {
            if let Some(j) = self.indexes_of(providers[i].address()).next() {
                health.set(i, self.health.get(j));
            }
        }
        Published {
            registries: registries::prepared(&config, snapshot, None),
            state,
            balance,
            health,
            by_address,
            config,
            params,
        }
    }

    /// The tables over `state`, whose snapshot replaces this one's: every provider takes the
    /// health of the first provider of this state at its address, and its degraded mark.
    fn replaced(&self, state: Arc<ChainState>, config: Arc<ServiceConfig>, now: i64) -> Self {
        let snapshot = state.snapshot();
        let by_address = by_address::index(snapshot);
        let health = Arc::new(HealthTable::new(state.degraded().clone()));
        let was = self.state.degraded();
        by_address::join(
            &self.by_address,
            self.state.snapshot(),
            &by_address,
            snapshot,
            |i, olds| {
                health.set(i, self.health.get(olds[0] as usize));
                if olds.iter().any(|&j| was.contains(j as usize)) {
                    state.degraded().mark(i);
                }
            },
        );
        let params = CallParams::new(snapshot, &config);
        Published {
            balance: balance(
                SnapshotBalance::new_at(snapshot, params.balance(), now),
                &params,
            ),
            health,
            by_address,
            registries: registries::prepared(&config, snapshot, None),
            config,
            params: Arc::new(params),
            state,
        }
    }

    /// The chain state: what calls route on.
    pub fn state(&self) -> &Arc<ChainState> {
        &self.state
    }

    /// The configuration.
    pub fn config(&self) -> &Arc<ServiceConfig> {
        &self.config
    }

    /// The call parameters: the consumer's settings merged with the providers' URLs and
    /// the override rules, resolved per method (see [`params`]).
    pub fn params(&self) -> &Arc<CallParams> {
        &self.params
    }

    /// The balancers prepared over the snapshot (weights, warm-up, in-flight counters).
    pub fn balance(&self) -> &Arc<SnapshotBalance> {
        &self.balance
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
}

/// The balancers `b` with the weight tables of the methods `params` gives weights of their
/// own (`<method>.weight`).
fn balance(b: SnapshotBalance, params: &CallParams) -> Arc<SnapshotBalance> {
    let tables: Vec<Box<[u32]>> = params.method_weight_tables(b.weights().table()).collect();
    Arc::new(if tables.is_empty() {
        b
    } else {
        b.with_method_weights(tables)
    })
}

/// One selected provider, bound to the published state it was selected from.
#[derive(Debug, Clone)]
pub struct Selected {
    handle: Arc<Handle>,
    index: usize,
}

impl Selected {
    fn published(&self) -> &Published {
        &self.handle.published
    }
    /// The provider's index in its snapshot.
    pub fn index(&self) -> usize {
        self.index
    }
    /// The provider.
    pub fn provider(&self) -> &Provider {
        &self.published().state.snapshot().providers()[self.index]
    }
    /// The provider's address (`host:port`).
    pub fn address(&self) -> &str {
        self.provider().address()
    }
    /// The generation of the chain state it was selected from.
    pub fn generation(&self) -> u64 {
        self.published().state.generation()
    }
    /// The chain state it was selected from.
    pub fn state(&self) -> &Arc<ChainState> {
        &self.published().state
    }
    /// The retries of a call of `method` whose first attempt went to this provider: the
    /// effective value ([`params`]: the consumer's, the override rules', Dubbo's default),
    /// for a caller running its own failover loop.
    pub fn retries(&self, method: Option<&str>) -> u32 {
        let params = &self.published().params;
        params.retries(params.method(method), Some(self.index)).0
    }

    /// The timeout of an attempt of `method` on this provider (`None`: no timeout), the
    /// effective value ([`params`]).
    pub fn timeout(&self, method: Option<&str>) -> Option<Duration> {
        let params = &self.published().params;
        params.timeout(params.method(method), Some(self.index)).0
    }

    /// Counts the call as in flight (for `leastactive` and `p2c`) until the guard drops.
    pub fn begin(&self) -> InFlight {
        self.published().balance.begin(self.index);
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
        self.handle.published.balance.end(self.index);
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
pub struct ClusterStats {
    /// Times the breaker opened: the first refusal after a change in provider health (a
    /// provider degraded or let back in) counts as one trip.
    pub breaker_trips: u64,
    /// Calls refused with [`SelectError::ServiceUnavailable`].
    pub rejected: u64,
    /// Providers degraded by the tracker.
    pub degradations: u64,
    /// Providers on probation that succeeded.
    pub recoveries: u64,
    /// Retries the retry budget refused ([`InvokeError::RetryBudgetExhausted`]).
    pub retries_refused: u64,
}

#[derive(Debug, Default)]
struct Counters {
    breaker_trips: AtomicU64,
    rejected: AtomicU64,
    degradations: AtomicU64,
    recoveries: AtomicU64,
    retries_refused: AtomicU64,
}

/// The client side of one service over its providers, Dubbo's *cluster* (the component that
/// joins a service's provider list into one callee): it routes each call through the chain,
/// balances among the routed providers, fails over to another one, tracks their health and
/// trips the breaker. Named so that it does not shadow `tower::Service` in a tonic client's
/// code. See the module documentation.
#[doc(alias = "Service")]
#[derive(Debug)]
pub struct Cluster {
    clock: Arc<dyn Clock>,
    /// The one published state every call reads.
    published: ArcSwap<Published>,
    /// Serializes the writers; a call never takes it.
    writers: Mutex<()>,
    /// Bumped whenever a provider is degraded or let back in.
    health_epoch: AtomicU64,
    /// The health epoch of the last breaker trip (`u64::MAX`: none yet).
    tripped_epoch: AtomicU64,
    counters: Counters,
    /// The retry budget's counts (read when the configuration has a budget).
    budget: budget::BudgetCounts,
}

impl Cluster {
    /// A service serving `state` with `config`, on the system clock.
    pub fn new(state: ChainState, config: ServiceConfig) -> Self {
        Self::with_clock(state, config, Arc::new(SystemClock::new()))
    }

    /// A service with an injected clock (tests move it by hand).
    pub fn with_clock(state: ChainState, config: ServiceConfig, clock: Arc<dyn Clock>) -> Self {
        let now = clock.epoch_millis();
        Cluster {
            clock,
            published: ArcSwap::from_pointee(Published::new(state, config, now)),
            writers: Mutex::new(()),
            health_epoch: AtomicU64::new(0),
            tripped_epoch: AtomicU64::new(u64::MAX),
            counters: Counters::default(),
            budget: budget::BudgetCounts::default(),
        }
    }

    /// Applies `change` (see [`Change`]): derives the next published state from the current
    /// one and stores it, so a call sees the old state with the old configuration or the new
    /// state with the new one, never a mix. When a router fails to prepare nothing changes
    /// and the current state keeps serving.
    ///
    /// Everything is built here, off the call path, before it is stored; calls never wait
    /// for an update. With new providers and the edit leading to them
    /// ([`routechain_core::Snapshot::edit_to`]), routers, balancers, the address index and
    /// the health table follow the edit, in time proportional to the snapshot's length in
    /// words plus the changed providers: each surviving provider keeps its health (failures,
    /// cool-down, probation) and its degraded mark, an added provider takes the health of
    /// the provider that had its address, if any. Without an edit, health and degraded
    /// marks are carried over by address before the new state is published, so routers see
    /// them from the first call. Health is kept over new
    /// settings; balancer state is rebuilt when the balancer settings change.
    pub fn apply(&self, change: ClusterChange) -> Result<Arc<ChainState>, PrepareError> {
        let _serial = self.writers.lock().unwrap_or_else(|p| p.into_inner());
        let next = Arc::new(
            self.published
                .load()
                .next(change, self.clock.epoch_millis())?,
        );
        let state = next.state.clone();
        self.published.store(next);
        tracing::debug!(generation = state.generation(), "service state published");
        Ok(state)
    }

    /// The published state, without a lock or a reference count written. Hold it for the
    /// whole call so the routed indexes refer to its snapshot.
    pub fn load(&self) -> Guard<Arc<Published>> {
        self.published.load()
    }

    /// The current chain state.
    pub fn state(&self) -> Arc<ChainState> {
        self.published.load().state.clone()
    }

    /// The current configuration.
    pub fn config(&self) -> Arc<ServiceConfig> {
        self.published.load().config.clone()
    }

    /// The clock.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// Counters since start. The call-path counters (calls, failovers, routing decisions
    /// per router) are the chain state's [`routechain_core::ChainMetrics`], when it carries
    /// them ([`ChainState::metrics`]): [`Cluster::select`] counts a call on a first attempt
    /// (`exclude` empty) and a failover on a retry that selected a provider.
    pub fn stats(&self) -> ClusterStats {
        let c = &self.counters;
        ClusterStats {
            breaker_trips: c.breaker_trips.load(Ordering::Relaxed),
            rejected: c.rejected.load(Ordering::Relaxed),
            degradations: c.degradations.load(Ordering::Relaxed),
            recoveries: c.recoveries.load(Ordering::Relaxed),
            retries_refused: c.retries_refused.load(Ordering::Relaxed),
        }
    }

    /// Routes `request` and picks one provider that is not in `exclude` (the providers a
    /// retrying caller already tried).
    ///
    /// In order: cool-downs that ended are released (probation); the request is routed —
    /// or, for a retry (`exclude` not empty, same `caller`, same chain state, no provider
    /// degraded or let back in since), the first attempt's routed set is reused, as Dubbo's
    /// failover retries on the same list (when health changed, routers route again and see
    /// it); when every routed provider is degraded the breaker refuses the call
    /// ([`SelectError::ServiceUnavailable`]); with `skip_degraded` degraded providers leave
    /// the set; the excluded providers leave it (by index, or by address when they were
    /// selected from an older snapshot); the method's balancer picks one. Lock-free, and
    /// allocation-free once `caller`'s buffers have grown and it holds a handle on the
    /// published state (see the module documentation: the `Arc` cloned for the
    /// [`Selected`] is `caller`'s own).
    pub fn select<R: RandomSource>(
        &self,
        request: &Request,
        exclude: &[Selected],
        caller: &mut Caller<R>,
    ) -> Result<Selected, SelectError> {
        self.select_as(request, exclude, caller, true)
    }

    /// [`Cluster::select`]; `failover: false` for the further providers of one attempt
    /// round (`forking`, `broadcast`), which the metrics do not count as failovers.
    pub(super) fn select_as<R: RandomSource>(
        &self,
        request: &Request,
        exclude: &[Selected],
        caller: &mut Caller<R>,
        failover: bool,
    ) -> Result<Selected, SelectError> {
        let handle = caller.handle(self);
        let published = &*handle.published;
        if exclude.is_empty()
            && let Some(m) = published.state.metrics()
        {
            m.count_call();
        }
        let now = self.clock.now();
        if published.health.expire(now) > 0 {
            self.health_epoch.fetch_add(1, Ordering::Relaxed);
        }
        // The state's address and generation: an address reused by a later state has
        // another generation.
        let routed_on = (
            (
                Arc::as_ptr(&published.state) as usize,
                published.state.generation(),
            ),
            self.health_epoch.load(Ordering::Relaxed),
        );
        let retry_same_set = !exclude.is_empty()
            && caller.routed_on == routed_on
            && caller.routed.len() == published.state.snapshot().len();
        if retry_same_set {
            // A retry: the same routed set as the first attempt (Dubbo: remove the failed
            // provider and try the next of the same list), not a new routing draw.
            caller.call.candidates.copy_from(&caller.routed);
        } else {
            published.route(request, &mut caller.call, None)?;
            caller.routed.copy_from(&caller.call.candidates);
            caller.routed_on = routed_on;
        }
        let call = &mut caller.call;
        let candidates = &mut call.candidates;
        let degraded = published.state.degraded();
        if degraded.any() {
            let healthy = candidates.count_with(|w| !degraded.word(w));
            if healthy == 0 {
                let epoch = self.health_epoch.load(Ordering::Relaxed);
                if self.tripped_epoch.swap(epoch, Ordering::Relaxed) != epoch {
                    self.counters.breaker_trips.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!("breaker open: every routed provider is degraded");
                }
                self.counters.rejected.fetch_add(1, Ordering::Relaxed);
                let retry_after = published
                    .health
                    .next_expiry()
                    .map_or(Duration::ZERO, |t| t.saturating_sub(now));
                return Err(SelectError::ServiceUnavailable {
                    providers: candidates.count(),
                    retry_after,
                });
            }
            if published.config.skip_degraded {
                candidates.and_with(|w| !degraded.word(w));
            }
        }
        for s in exclude {
            if Arc::ptr_eq(s.published().state.snapshot(), published.state.snapshot()) {
                candidates.remove(s.index);
            } else {
                for i in published.indexes_of(s.address()) {
                    candidates.remove(i);
                }
            }
        }
        if candidates.is_empty() {
            return Err(SelectError::Exhausted {
                tried: exclude.len(),
            });
        }
        let params = &*published.params;
        // Dubbo reads `loadbalance` from the routed list's first provider.
        let routed = &caller.routed;
        let method = params.method(request.method.as_deref());
        let (slot, _) = params.slot(method, || routed.first());
        let balance = params.balance();
        // The wall clock only while some provider is warming up or a balancer reads
        // response times.
        let warm = published.balance.shared().warm();
        let timed = published.balance.timed();
        let now = if warm.active() {
            let epoch = self.clock.epoch_millis();
            match warm.now(epoch) {
                // The last warm-up just ended: the static weights, the time still read.
                0 if timed => epoch,
                n => n,
            }
        } else if timed {
            self.clock.epoch_millis()
        } else {
            0
        };
        let index = published
            .balance
            .pick_in(
                params.weight_table(method),
                slot,
                balance.spec(slot),
                request,
                candidates,
                &mut call.rng,
                now,
            )
            .ok_or(SelectError::Exhausted {
                tried: exclude.len(),
            })?;
        if let Some(m) = published.state.metrics() {
            if failover && !exclude.is_empty() {
                m.count_failover();
            }
            published.state.count_pick(index);
        }
        Ok(Selected { handle, index })
    }

    /// Resolves a target to indexes of `published`.
    fn with_target(&self, published: &Published, target: Target<'_>, mut f: impl FnMut(usize)) {
        match target {
            Target::Selected(s) if Arc::ptr_eq(&s.published().health, &published.health) => {
                f(s.index)
            }
            Target::Selected(s) => published.indexes_of(s.address()).for_each(f),
            Target::Index(i) => f(i),
            Target::Address(a) => published.indexes_of(a).for_each(f),
        }
    }

    /// Records a successful call: the provider's failure count resets; on probation it is
    /// healthy again; with rates counted (`health.failure_percentage`, `health.slow_call`)
    /// it counts in the provider's window, where a slow-call rate reached ejects it.
    pub fn report_success<'a>(&self, target: impl Into<Target<'a>>) {
        let published = self.published.load();
        let config = &published.config.health;
        let now = if config.counts_rates() {
            self.clock.now()
        } else {
            Duration::ZERO
        };
        self.with_target(&published, target.into(), |i| {
            match published.health.success(i, now, config) {
                HealthChange::Recovered => {
                    self.counters.recoveries.fetch_add(1, Ordering::Relaxed);
                    tracing::info!(provider = published.address(i), "provider recovered");
                }
                HealthChange::Degraded => {
                    self.health_epoch.fetch_add(1, Ordering::Relaxed);
                    self.counters.degradations.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(
                        provider = published.address(i),
                        "provider ejected: slow calls"
                    );
                }
                HealthChange::None => {}
            }
        });
    }

    /// Records how long an attempt on `target` took and whether the provider answered (an
    /// application error included) or failed, for the balancers that read response times
    /// (`shortestresponse`, `adaptive`) and for the slow-call rate (`health.slow_call`);
    /// [`Cluster::call`] reports every attempt, before its success or failure. Health
    /// learns the outcome from [`Cluster::report_success`] / [`Cluster::report_failure`].
    pub fn report_response<'a>(
        &self,
        target: impl Into<Target<'a>>,
        elapsed: Duration,
        answered: bool,
    ) {
        let published = self.published.load();
        let slow = published
            .config
            .health
            .slow_call
            .is_some_and(|s| elapsed >= s);
        if !published.balance.timed() && !slow {
            return;
        }
        let (epoch, now) = (self.clock.epoch_millis(), self.clock.now());
        self.with_target(&published, target.into(), |i| {
            published
                .balance
                .shared()
                .record(i, elapsed, answered, epoch);
            if slow {
                published.health.slow(i, now, &published.config.health);
            }
        });
    }

    /// Records a failed call: the threshold-th consecutive failure (or any failure on
    /// probation) degrades the provider for the cool-down.
    pub fn report_failure<'a>(&self, target: impl Into<Target<'a>>) {
        let published = self.published.load();
        let now = self.clock.now();
        self.with_target(&published, target.into(), |i| {
            if published.health.failure(i, now, &published.config.health) == HealthChange::Degraded
            {
                self.health_epoch.fetch_add(1, Ordering::Relaxed);
                self.counters.degradations.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(provider = published.address(i), "provider degraded");
            }
        });
    }

    /// Degrades a provider now for the cool-down, whatever its failure count.
    pub fn degrade<'a>(&self, target: impl Into<Target<'a>>) {
        let published = self.published.load();
        let now = self.clock.now();
        self.with_target(&published, target.into(), |i| {
            if published.health.degrade(i, now, &published.config.health) == HealthChange::Degraded
            {
                self.health_epoch.fetch_add(1, Ordering::Relaxed);
                self.counters.degradations.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(provider = published.address(i), "provider degraded");
            }
        });
    }

    /// The health of provider `i` of the current snapshot.
    pub fn health(&self, i: usize) -> crate::health::ProviderHealth {
        self.published.load().health.get(i)
    }

    /// The calls in flight on provider `i` of the current snapshot (counted by
    /// [`Selected::begin`] guards, which [`Cluster::call`] holds per attempt).
    pub fn in_flight(&self, i: usize) -> u32 {
        self.published.load().balance.active(i)
    }

    /// True when provider `i` of the current snapshot is degraded.
    pub fn is_degraded(&self, i: usize) -> bool {
        self.published.load().state.degraded().contains(i)
    }
}
