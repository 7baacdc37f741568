//! From routed set to one provider: balancing, failover, health and the service breaker.
//!
//! A [`Service`] owns the live [`Chain`], the balancers ([`BalanceConfig`]) and the health
//! tracker. [`Service::select`] routes a request, then picks one provider that is not
//! among the ones a retrying caller already tried (Dubbo's failover cluster; seed 000:
//! remove the failed node, try the next). [`Service::report_success`] and
//! [`Service::report_failure`] feed the health tracker: after `failure_threshold`
//! consecutive failures a provider is degraded for `cooldown`, marked in the chain state's
//! [`DegradedSet`] so routers (the IDC-weight router's degraded filter) and the chain-level
//! `skip_degraded` see it at once, without rebuilding anything; when the cool-down ends the
//! provider is back on probation (one success clears it, one failure degrades it again).
//! When every provider of a call's routed set is degraded the call fails fast with
//! [`SelectError::ServiceUnavailable`] (seed 003's "切服") until a cool-down ends.
//!
//! Per-snapshot state (weights, in-flight counters, round-robin weights, hash rings, health
//! counters) is built once when the chain's state changes, off the hot path; health is
//! carried over to the new snapshot by provider address.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;

use crate::health::{Clock, HealthChange, HealthConfig, HealthTable, SystemClock};
use crate::lb::{BalanceConfig, SnapshotBalance};
use routechain_core::DegradedSet;
use routechain_core::RandomSource;
use routechain_core::Request;
use routechain_core::{CallState, Chain, ChainState, NoProvider};
use routechain_core::{Provider, Snapshot};

/// Dubbo's default number of retries after the first attempt (failover cluster).
pub const DEFAULT_RETRIES: u32 = 2;

/// How a service balances, fails over and tracks health.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceConfig {
    /// The balancers (chain default and per-method overrides).
    pub balance: BalanceConfig,
    /// Drop degraded providers from every routed set (chain-level `skip_degraded`).
    pub skip_degraded: bool,
    /// Retries after the first attempt in [`Service::invoke`] (default 2: three attempts).
    pub retries: u32,
    /// Failure threshold and cool-down.
    pub health: HealthConfig,
}

impl Default for ServiceConfig {
    fn default() -> Self {
        ServiceConfig {
            balance: BalanceConfig::default(),
            skip_degraded: false,
            retries: DEFAULT_RETRIES,
            health: HealthConfig::default(),
        }
    }
}

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

/// The per-state view: chain state plus balancer and health state over its snapshot.
#[derive(Debug)]
struct View {
    state: Arc<ChainState>,
    balance: Arc<SnapshotBalance>,
    health: Arc<HealthTable>,
    /// (address, index), sorted: exclusion and reports by address.
    by_address: Arc<[(Box<str>, u32)]>,
    config: Arc<ServiceConfig>,
}

impl View {
    fn indexes_of<'a>(&'a self, address: &'a str) -> impl Iterator<Item = usize> + 'a {
        let start = self
            .by_address
            .partition_point(|(a, _)| a.as_ref() < address);
        self.by_address[start..]
            .iter()
            .take_while(move |(a, _)| a.as_ref() == address)
            .map(|(_, i)| *i as usize)
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

    /// Marks in `degraded` (a set over `snapshot`) every provider whose address is degraded
    /// in this view's state.
    fn carry_degraded(&self, snapshot: &Snapshot, degraded: &DegradedSet) {
        for (i, p) in snapshot.providers().iter().enumerate() {
            if self
                .indexes_of(p.address())
                .any(|j| self.state.degraded().contains(j))
            {
                degraded.mark(i);
            }
        }
    }
}

/// One selected provider, bound to the snapshot it was selected from.
#[derive(Debug, Clone)]
pub struct Selected {
    view: Arc<View>,
    index: usize,
}

impl Selected {
    /// The provider's index in its snapshot.
    pub fn index(&self) -> usize {
        self.index
    }
    /// The provider.
    pub fn provider(&self) -> &Provider {
        &self.view.state.snapshot().providers()[self.index]
    }
    /// The provider's address (`host:port`).
    pub fn address(&self) -> &str {
        self.provider().address()
    }
    /// The generation of the chain state it was selected from.
    pub fn generation(&self) -> u64 {
        self.view.state.generation()
    }
    /// The chain state it was selected from.
    pub fn state(&self) -> &Arc<ChainState> {
        &self.view.state
    }
    /// Counts the call as in flight (for `leastactive` and `p2c`) until the guard drops.
    pub fn begin(&self) -> InFlight {
        self.view.balance.begin(self.index);
        InFlight {
            balance: self.view.balance.clone(),
            index: self.index,
        }
    }
}

/// An in-flight call on one provider; dropping it ends the call.
#[derive(Debug)]
pub struct InFlight {
    balance: Arc<SnapshotBalance>,
    index: usize,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.balance.end(self.index);
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
    view: ArcSwap<View>,
    rebuild: Mutex<()>,
    /// Bumped whenever a provider is degraded or let back in.
    health_epoch: AtomicU64,
    /// The health epoch of the last breaker trip (`u64::MAX`: none yet).
    tripped_epoch: AtomicU64,
    counters: Counters,
}

/// The outcome of [`Service::invoke`].
#[derive(Debug)]
pub struct Invoked<T> {
    /// What the successful attempt returned.
    pub value: T,
    /// The provider that answered.
    pub provider: Selected,
    /// Attempts made (1 = no failover).
    pub attempts: u32,
}

/// Why [`Service::invoke`] gave up.
#[derive(Debug, thiserror::Error)]
pub enum InvokeError<E> {
    /// No provider could be selected for the first attempt.
    #[error(transparent)]
    Select(SelectError),
    /// Every attempt failed; `last` is the last attempt's error.
    #[error("all {attempts} attempt(s) failed")]
    Failed {
        /// The last error.
        last: E,
        /// Attempts made.
        attempts: u32,
        /// Why no further attempt was made, when that was not the retry limit.
        stopped: Option<SelectError>,
    },
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
        let view = Arc::new(build_view(state, None, config));
        Service {
            chain,
            clock,
            view: ArcSwap::new(view),
            rebuild: Mutex::new(()),
            health_epoch: AtomicU64::new(0),
            tripped_epoch: AtomicU64::new(u64::MAX),
            counters: Counters::default(),
        }
    }

    /// The chain.
    pub fn chain(&self) -> &Arc<Chain> {
        &self.chain
    }

    /// The configuration (the current view's: it changes with the view, under the rebuild
    /// lock).
    pub fn config(&self) -> Arc<ServiceConfig> {
        self.view.load().config.clone()
    }

    /// Replaces the configuration (balancers, `skip_degraded`, retries, health); balancer
    /// state is rebuilt, health is kept.
    pub fn set_config(&self, config: ServiceConfig) {
        let _serial = self.rebuild.lock().unwrap_or_else(|p| p.into_inner());
        let old = self.view.load_full();
        let view = build_view(self.chain.state(), Some(&old), Arc::new(config));
        self.view.store(Arc::new(view));
    }

    /// Builds a new chain state from the current one with `f` and swaps it in together with
    /// `config` (when given; `None` keeps the current configuration): a call made through
    /// this service sees the old state with the old configuration or the new state with the
    /// new one, never a mix. When `f` fails nothing changes and the previous state and
    /// configuration keep serving.
    ///
    /// The balancer and health state over the new state is built here, off the call path;
    /// health is carried over by provider address, and when the new state has a new
    /// degraded set the degraded providers are marked in it before the swap, so routers
    /// see them from the first call.
    pub fn update<E>(
        &self,
        config: Option<ServiceConfig>,
        f: impl FnOnce(&ChainState) -> Result<ChainState, E>,
    ) -> Result<Arc<ChainState>, E> {
        let _serial = self.rebuild.lock().unwrap_or_else(|p| p.into_inner());
        let old = self.view.load_full();
        let state = self.chain.update(|cur| {
            let next = f(cur)?;
            if !Arc::ptr_eq(next.degraded(), cur.degraded()) {
                old.carry_degraded(next.snapshot(), next.degraded());
            }
            Ok(next)
        })?;
        let config = config.map_or_else(|| old.config.clone(), Arc::new);
        // Calls that see the new state before this view is stored wait for it in
        // `current` (the rebuild lock is held until then).
        self.view
            .store(Arc::new(build_view(state.clone(), Some(&old), config)));
        Ok(state)
    }

    /// The clock.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// The current chain state.
    pub fn state(&self) -> Arc<ChainState> {
        self.current().state.clone()
    }

    /// Counters since start.
    pub fn stats(&self) -> ServiceStats {
        let c = &self.counters;
        ServiceStats {
            breaker_trips: c.breaker_trips.load(Ordering::Relaxed),
            rejected: c.rejected.load(Ordering::Relaxed),
            degradations: c.degradations.load(Ordering::Relaxed),
            recoveries: c.recoveries.load(Ordering::Relaxed),
        }
    }

    /// The current view; rebuilt (once, under a mutex) when the chain's state changed.
    fn current(&self) -> Arc<View> {
        let state = self.chain.load();
        let view = self.view.load();
        if Arc::ptr_eq(&view.state, &*state) {
            return Arc::clone(&view);
        }
        drop(view);
        let _serial = self.rebuild.lock().unwrap_or_else(|p| p.into_inner());
        let old = self.view.load_full();
        let state = self.chain.state();
        if Arc::ptr_eq(&old.state, &state) {
            return old;
        }
        let view = Arc::new(build_view(state, Some(&old), old.config.clone()));
        self.view.store(view.clone());
        view
    }

    /// Replaces the provider list: a new degraded set carrying every degraded provider over
    /// by address, swapped in with the snapshot in one update.
    pub fn update_snapshot(
        &self,
        snapshot: Arc<Snapshot>,
    ) -> Result<(), routechain_core::PrepareError> {
        let old = self.current();
        let degraded = Arc::new(DegradedSet::new(snapshot.len()));
        old.carry_degraded(&snapshot, &degraded);
        self.chain
            .update(|s| s.with_snapshot(snapshot, degraded))
            .map(|_| ())
    }

    /// Routes `request` and picks one provider that is not in `exclude` (the providers a
    /// retrying caller already tried).
    ///
    /// In order: cool-downs that ended are released (probation); the request is routed —
    /// or, for a retry (`exclude` not empty, same `call`, same chain state, no provider
    /// degraded or let back in since), the first attempt's routed set is reused, as seed 000
    /// retries on the same list (when health changed, routers route again and see it);
    /// when every
    /// routed provider is degraded the breaker refuses the call
    /// ([`SelectError::ServiceUnavailable`]); with `skip_degraded` degraded providers leave
    /// the set; the excluded providers leave it (by index, or by address when they were
    /// selected from an older snapshot); the method's balancer picks one. Allocation-free
    /// once `call`'s buffers have grown (an `Arc` clone only).
    pub fn select<R: RandomSource>(
        &self,
        request: &Request,
        exclude: &[Selected],
        call: &mut CallState<R>,
    ) -> Result<Selected, SelectError> {
        let view = self.current();
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
            // A retry: the same routed set as the first attempt (seed 000: remove the
            // failed node and try the next of the same list), not a new routing draw.
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
            if Arc::ptr_eq(s.view.state.snapshot(), view.state.snapshot()) {
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
        Ok(Selected { view, index })
    }

    /// Resolves a target to indexes of `view`.
    fn with_target(&self, view: &View, target: Target<'_>, mut f: impl FnMut(usize)) {
        match target {
            Target::Selected(s) if Arc::ptr_eq(&s.view.health, &view.health) => f(s.index),
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

    /// True when provider `i` of the current snapshot is degraded.
    pub fn is_degraded(&self, i: usize) -> bool {
        self.current().state.degraded().contains(i)
    }

    /// Calls `attempt` on a selected provider, failing over to another provider of the
    /// same routed set on error, up to `retries` more times (Dubbo's failover cluster).
    /// Every attempt's outcome is reported to the health tracker.
    pub fn invoke<T, E, R: RandomSource>(
        &self,
        request: &Request,
        call: &mut CallState<R>,
        mut attempt: impl FnMut(&Selected) -> Result<T, E>,
    ) -> Result<Invoked<T>, InvokeError<E>> {
        // The retries of the configuration the first attempt is selected under.
        let max = self.current().config.retries.saturating_add(1);
        let mut tried: Vec<Selected> = Vec::new();
        let mut last = None;
        for n in 1..=max {
            let selected = match self.select(request, &tried, call) {
                Ok(s) => s,
                Err(e) => {
                    return Err(match last {
                        None => InvokeError::Select(e),
                        Some(last) => InvokeError::Failed {
                            last,
                            attempts: n - 1,
                            stopped: Some(e),
                        },
                    });
                }
            };
            let result = {
                let _in_flight = selected.begin();
                attempt(&selected)
            };
            match result {
                Ok(value) => {
                    self.report_success(&selected);
                    return Ok(Invoked {
                        value,
                        provider: selected,
                        attempts: n,
                    });
                }
                Err(e) => {
                    self.report_failure(&selected);
                    last = Some(e);
                    tried.push(selected);
                }
            }
        }
        match last {
            Some(last) => Err(InvokeError::Failed {
                last,
                attempts: max,
                stopped: None,
            }),
            None => Err(InvokeError::Select(SelectError::Exhausted { tried: 0 })),
        }
    }
}

fn address_index(snapshot: &Snapshot) -> Arc<[(Box<str>, u32)]> {
    let mut v: Vec<(Box<str>, u32)> = snapshot
        .providers()
        .iter()
        .enumerate()
        .map(|(i, p)| (Box::from(p.address()), i as u32))
        .collect();
    v.sort();
    v.into()
}

fn build_view(state: Arc<ChainState>, old: Option<&View>, config: Arc<ServiceConfig>) -> View {
    let same_snapshot = old.is_some_and(|o| Arc::ptr_eq(o.state.snapshot(), state.snapshot()));
    let same_config = old.is_some_and(|o| o.config.balance == config.balance);
    let balance = match old {
        Some(o) if same_snapshot && same_config => o.balance.clone(),
        _ => Arc::new(SnapshotBalance::new(state.snapshot(), &config.balance)),
    };
    let by_address = match old {
        Some(o) if same_snapshot => o.by_address.clone(),
        _ => address_index(state.snapshot()),
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
                for (i, p) in state.snapshot().providers().iter().enumerate() {
                    if let Some(j) = o.indexes_of(p.address()).next() {
                        table.set(i, o.health.get(j));
                    }
                }
            }
            table
        }
    };
    View {
        state,
        balance,
        health,
        by_address,
        config,
    }
}
