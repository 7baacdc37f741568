//! Load balancers: pick one provider from the routed candidates, Dubbo's names and behaviour.
//!
//! | name | Dubbo class | what it does | file |
//! |---|---|---|---|
//! | `random` (default) | `RandomLoadBalance` | weighted random by the provider's `weight` param (default 100) | [`random`] |
//! | `roundrobin` | `RoundRobinLoadBalance` | smooth weighted round robin | [`roundrobin`] |
//! | `leastactive` | `LeastActiveLoadBalance` | fewest in-flight calls; ties weighted random | [`leastactive`] |
//! | `consistenthash` | `ConsistentHashLoadBalance` | ketama ring (MD5, 160 virtual nodes), key from the request | [`consistenthash`] |
//! | `p2c` | `P2CLoadBalance` | two distinct random candidates, the one with fewer in-flight calls | [`p2c`] |
//! | `shortestresponse` | `ShortestResponseLoadBalance` | shortest average succeeded response × (in-flight + 1) over a 30 s window; ties weighted random | [`shortestresponse`] |
//! | `adaptive` | `AdaptiveLoadBalance` | two distinct random candidates, the one with the lower load (latency EWMA, in-flight, success ratio, weight) | [`adaptive`] |
//!
//! Each algorithm is a type implementing [`Balancer`], in its own file. Everything a
//! balancer needs that depends only on the providers is prepared once per snapshot in a
//! [`SnapshotBalance`]: what all balancers share ([`Shared`]: the weights, grouped into a
//! few *weight classes*, each a bitset, and the in-flight counters, atomics) and one
//! prepared balancer per configured slot ([`SlotBalancer`]: round-robin current weights,
//! consistent-hash rings over **all** providers). The latency-aware balancers read the
//! response statistics [`Shared`] keeps when a slot uses one of them
//! ([`response::Responses`], fed by [`Shared::record`]). A pick reads the candidate bitset
//! directly; it never builds a list and never allocates. The slot's balancer is reached by
//! a `match` over [`SlotBalancer`]: static dispatch, no virtual call per pick.
//!
//! Adding an algorithm: a file here with its type and `impl Balancer`, a [`LoadBalanceKind`]
//! variant (its chain-file name), a [`SlotBalancer`] variant and its line in
//! [`SlotBalancer::new`], and a row in `docs/load-balancing.md`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use routechain_core::{Candidates, RandomSource, Request, Snapshot, SnapshotEdit};

pub mod adaptive;
mod config;
pub mod consistenthash;
mod least;
pub mod leastactive;
pub mod p2c;
pub mod random;
pub mod response;
pub mod roundrobin;
pub mod shortestresponse;
pub mod warmup;
mod weights;

#[cfg(test)]
mod sampling_tests;
#[cfg(test)]
mod tests;

pub use adaptive::Adaptive;
pub use config::{BalanceConfig, BalancerSpec};
pub use consistenthash::{ConsistentHash, Ring};
pub use leastactive::LeastActive;
pub use p2c::P2c;
pub use random::Random;
pub use response::Responses;
pub use roundrobin::RoundRobin;
pub use shortestresponse::ShortestResponse;
pub use warmup::WarmTable;
pub use weights::{WeightParam, Weights, parse_weight, provider_weight};

/// The weight of a provider without a (valid) `weight` param, as in Dubbo.
pub const DEFAULT_WEIGHT: u32 = 100;
/// Virtual nodes per provider on the consistent-hash ring (Dubbo's `hash.nodes` default).
pub const DEFAULT_HASH_NODES: u32 = 160;
/// With more distinct non-zero weights than this, `random` walks the candidates one by one.
pub const MAX_WEIGHT_CLASSES: usize = 8;

/// A load-balancing algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum LoadBalanceKind {
    /// Weighted random (Dubbo's default).
    #[default]
    Random,
    /// Smooth weighted round robin.
    RoundRobin,
    /// Fewest in-flight calls, ties broken by weighted random.
    LeastActive,
    /// Ketama consistent hashing on a request key.
    ConsistentHash,
    /// Power of two choices over in-flight calls.
    P2c,
    /// Shortest estimated response (succeeded average × in-flight), ties weighted random.
    ShortestResponse,
    /// Power of two choices over Dubbo's adaptive load.
    Adaptive,
}

impl LoadBalanceKind {
    /// Every kind, in documentation order.
    pub const ALL: [LoadBalanceKind; 7] = [
        LoadBalanceKind::Random,
        LoadBalanceKind::RoundRobin,
        LoadBalanceKind::LeastActive,
        LoadBalanceKind::ConsistentHash,
        LoadBalanceKind::P2c,
        LoadBalanceKind::ShortestResponse,
        LoadBalanceKind::Adaptive,
    ];

    /// The name used in chain files (Dubbo's `loadbalance` value).
    pub fn name(self) -> &'static str {
        match self {
            LoadBalanceKind::Random => "random",
            LoadBalanceKind::RoundRobin => "roundrobin",
            LoadBalanceKind::LeastActive => "leastactive",
            LoadBalanceKind::ConsistentHash => "consistenthash",
            LoadBalanceKind::P2c => "p2c",
            LoadBalanceKind::ShortestResponse => "shortestresponse",
            LoadBalanceKind::Adaptive => "adaptive",
        }
    }

    /// True for the algorithms that read the service's response times.
    pub fn reads_responses(self) -> bool {
        matches!(
            self,
            LoadBalanceKind::ShortestResponse | LoadBalanceKind::Adaptive
        )
    }

    /// The kind named `name` (exact, lower case, as Dubbo's extension names).
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == name)
    }
}

impl std::fmt::Display for LoadBalanceKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Two different candidates of the `n` (at least two) drawn at random (positions `a` in
/// `0..n` and `b` in `0..n-1`, `b` moved past `a`), as Dubbo's `AdaptiveLoadBalance` and
/// power-of-two-choices draw them.
#[inline]
pub(crate) fn two_distinct(
    candidates: &Candidates,
    n: u64,
    rng: &mut dyn RandomSource,
) -> Option<(usize, usize)> {
    let a = rng.below(n);
    let mut b = rng.below(n - 1);
    if b >= a {
        b += 1;
    }
    Some((candidates.nth(a as usize)?, candidates.nth(b as usize)?))
}

/// The time now in milliseconds since the Unix epoch (the unit of a provider's
/// `timestamp`), from the system clock.
pub fn epoch_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// What every balancer of one snapshot shares: the providers' weights, the ones still
/// warming up, their in-flight call counters and, when a balancer reads them, their
/// response statistics.
///
/// A method with its own weights (`<method>.weight`) has a `Shared` of its own
/// ([`Shared::with_weights`]): its weights, the same warm-up table, counters and
/// statistics (behind `Arc`s, so a pick reads them through one pointer either way).
#[derive(Debug)]
pub struct Shared {
    weights: Weights,
    warm: Arc<WarmTable>,
    active: Arc<[AtomicU32]>,
    responses: Arc<Responses>,
}

impl Shared {
    /// The weights of `snapshot`'s providers and those warming at `now` (ms since the
    /// epoch), and a zero in-flight count for each.
    pub fn new(snapshot: &Snapshot, now: i64) -> Self {
        Shared {
            warm: Arc::new(WarmTable::new(snapshot, now)),
            weights: Weights::new(snapshot),
            active: (0..snapshot.len()).map(|_| AtomicU32::new(0)).collect(),
            responses: Arc::new(Responses::none()),
        }
    }

    /// The state of `snapshot`, derived from this one (of the snapshot `edit` started
    /// from): the weights and warm-up table carried ([`Weights::edited`],
    /// [`WarmTable::edited`]), a zero in-flight count for each provider (as
    /// [`Shared::new`]: calls in flight end on the state they started on).
    pub fn edited(&self, edit: &SnapshotEdit, snapshot: &Snapshot, now: i64) -> Self {
        Shared {
            warm: Arc::new(self.warm.edited(edit, snapshot, now)),
            weights: self.weights.edited(edit, snapshot),
            active: (0..snapshot.len()).map(|_| AtomicU32::new(0)).collect(),
            responses: Arc::new(Responses::none()),
        }
    }

    /// The same providers, warm-up, counters and statistics with other static `weights`
    /// (a method's: `<method>.weight`).
    pub fn with_weights(&self, weights: Weights) -> Self {
        Shared {
            weights,
            warm: self.warm.clone(),
            active: self.active.clone(),
            responses: self.responses.clone(),
        }
    }

    /// This state keeping response statistics for its providers from `now` (ms since the
    /// epoch) when `config` has a balancer that reads them, `adaptive` reading the
    /// config's timeout.
    pub fn with_responses(mut self, config: &BalanceConfig, now: i64) -> Self {
        if (0..config.slots()).any(|s| config.spec(s).kind.reads_responses()) {
            self.responses = Arc::new(Responses::new(self.active.len(), now, config.timeout_ms()));
        }
        self
    }

    /// The response statistics (empty unless a balancer reads them).
    #[inline]
    pub fn responses(&self) -> &Responses {
        &self.responses
    }

    /// `shortestresponse`'s estimate for provider `i` (0 without statistics).
    #[inline]
    pub fn estimate(&self, i: usize) -> u64 {
        self.responses
            .get(i)
            .map_or(0, |r| r.estimate(self.active(i)))
    }

    /// Records a call on provider `i` that ended after `elapsed` at `now` (ms since the
    /// epoch); `answered`: the provider answered (an application error included). Nothing
    /// when no balancer reads response times.
    #[inline]
    pub fn record(&self, i: usize, elapsed: std::time::Duration, answered: bool, now: i64) {
        if let Some(r) = self.responses.get(i) {
            let us = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
            r.record(us, answered, now);
        }
    }

    /// The static weights (the `weight` params, before warm-up).
    #[inline]
    pub fn weights(&self) -> &Weights {
        &self.weights
    }

    /// The providers still warming up.
    pub fn warm(&self) -> &WarmTable {
        &self.warm
    }

    /// The weight of provider `i` at `now` (ms since the epoch; 0: the static weight).
    #[inline]
    pub fn weight(&self, i: usize, now: i64) -> u32 {
        self.warm.at(i, self.weights.get(i), now)
    }

    /// In-flight calls on provider `i` (0 past the end).
    #[inline]
    pub fn active(&self, i: usize) -> u32 {
        self.active.get(i).map_or(0, |a| a.load(Ordering::Relaxed))
    }

    /// Counts a call started on provider `i`.
    pub fn begin(&self, i: usize) {
        if let Some(a) = self.active.get(i) {
            a.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Counts a call on provider `i` ended (never below zero).
    pub fn end(&self, i: usize) {
        if let Some(a) = self.active.get(i) {
            let _ = a.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| v.checked_sub(1));
        }
    }
}

/// A load-balancing algorithm, prepared over one snapshot for one balancer slot.
///
/// `pick_at` chooses one of `candidates` (a bitset over the snapshot) or returns `None`
/// only when `candidates` is empty. It runs on every call: it reads the bitset and the
/// prepared state (`self`, `shared`), draws from `rng`, and must not allocate or lock.
/// A weighted algorithm reads a provider's weight with [`Shared::weight`] at `now`, so a
/// provider warming up weighs what Dubbo's warm-up gives it.
pub trait Balancer: std::fmt::Debug + Send + Sync {
    /// The algorithm (its chain-file name).
    fn kind(&self) -> LoadBalanceKind;

    /// Picks one candidate for `request` at `now` (ms since the epoch while a provider
    /// warms up; 0: the static weights).
    fn pick_at(
        &self,
        shared: &Shared,
        request: &Request,
        candidates: &Candidates,
        rng: &mut dyn RandomSource,
        now: i64,
    ) -> Option<usize>;

    /// Picks one candidate for `request` with the static weights.
    fn pick(
        &self,
        shared: &Shared,
        request: &Request,
        candidates: &Candidates,
        rng: &mut dyn RandomSource,
    ) -> Option<usize> {
        self.pick_at(shared, request, candidates, rng, 0)
    }
}

/// The prepared balancer of one slot: one variant per algorithm, dispatched by `match`
/// (static, inlinable) rather than through a `dyn Balancer`.
#[derive(Debug)]
pub enum SlotBalancer {
    /// `random`.
    Random(Random),
    /// `roundrobin`, with its current weights.
    RoundRobin(RoundRobin),
    /// `leastactive`.
    LeastActive(LeastActive),
    /// `consistenthash`, with its ring and key.
    ConsistentHash(ConsistentHash),
    /// `p2c`.
    P2c(P2c),
    /// `shortestresponse`.
    ShortestResponse(ShortestResponse),
    /// `adaptive`.
    Adaptive(Adaptive),
}

impl SlotBalancer {
    /// Prepares the balancer of `spec` over `snapshot`. `rings` holds the rings already
    /// built over this snapshot: a ring with the same number of virtual nodes is shared.
    pub fn new(spec: &BalancerSpec, snapshot: &Snapshot, rings: &mut Vec<Arc<Ring>>) -> Self {
        match spec.kind {
            LoadBalanceKind::Random => SlotBalancer::Random(Random),
            LoadBalanceKind::RoundRobin => {
                SlotBalancer::RoundRobin(RoundRobin::new(snapshot.len()))
            }
            LoadBalanceKind::LeastActive => SlotBalancer::LeastActive(LeastActive),
            LoadBalanceKind::ConsistentHash => {
                let ring = match rings.iter().find(|r| r.nodes() == spec.hash_nodes) {
                    Some(r) => r.clone(),
                    None => {
                        let r = Arc::new(Ring::new(snapshot, spec.hash_nodes));
                        rings.push(r.clone());
                        r
                    }
                };
                SlotBalancer::ConsistentHash(ConsistentHash::new(ring, &spec.hash_key))
            }
            LoadBalanceKind::P2c => SlotBalancer::P2c(P2c),
            LoadBalanceKind::ShortestResponse => SlotBalancer::ShortestResponse(ShortestResponse),
            LoadBalanceKind::Adaptive => SlotBalancer::Adaptive(Adaptive),
        }
    }

    /// The balancer of `spec` over `snapshot`, derived from this one (prepared over the
    /// snapshot `edit` started from) when it is of the same algorithm: a consistent-hash
    /// ring drops the removed providers' points and adds the new ones' ([`Ring::edited`]);
    /// round-robin starts from zero current weights, as a fresh one. `rings` maps the old
    /// rings (by address) to the new ones already derived, so shared rings stay shared.
    /// Picks exactly as [`SlotBalancer::new`] over `snapshot`.
    pub fn edited(
        &self,
        spec: &BalancerSpec,
        edit: &SnapshotEdit,
        snapshot: &Snapshot,
        rings: &mut Vec<(*const Ring, Arc<Ring>)>,
    ) -> Self {
        match (self, spec.kind) {
            (SlotBalancer::ConsistentHash(old), LoadBalanceKind::ConsistentHash)
                if old.ring().nodes() == spec.hash_nodes =>
            {
                let key = Arc::as_ptr(old.ring());
                let ring = match rings.iter().find(|(k, _)| *k == key) {
                    Some((_, r)) => r.clone(),
                    None => {
                        let r = Arc::new(old.ring().edited(edit, snapshot));
                        rings.push((key, r.clone()));
                        r
                    }
                };
                SlotBalancer::ConsistentHash(ConsistentHash::new(ring, &spec.hash_key))
            }
            // Another algorithm (or another ring size): prepared afresh.
            _ => SlotBalancer::fresh(spec, snapshot, rings),
        }
    }

    /// [`SlotBalancer::new`] sharing a ring already derived or built with the same number
    /// of virtual nodes; a ring it builds joins `rings`.
    fn fresh(
        spec: &BalancerSpec,
        snapshot: &Snapshot,
        rings: &mut Vec<(*const Ring, Arc<Ring>)>,
    ) -> Self {
        let mut fresh: Vec<Arc<Ring>> = rings.iter().map(|(_, r)| r.clone()).collect();
        let before = fresh.len();
        let b = SlotBalancer::new(spec, snapshot, &mut fresh);
        for r in fresh.drain(before..) {
            rings.push((Arc::as_ptr(&r), r));
        }
        b
    }
}

impl Balancer for SlotBalancer {
    fn kind(&self) -> LoadBalanceKind {
        match self {
            SlotBalancer::Random(b) => b.kind(),
            SlotBalancer::RoundRobin(b) => b.kind(),
            SlotBalancer::LeastActive(b) => b.kind(),
            SlotBalancer::ConsistentHash(b) => b.kind(),
            SlotBalancer::P2c(b) => b.kind(),
            SlotBalancer::ShortestResponse(b) => b.kind(),
            SlotBalancer::Adaptive(b) => b.kind(),
        }
    }

    #[inline]
    fn pick_at(
        &self,
        shared: &Shared,
        request: &Request,
        candidates: &Candidates,
        rng: &mut dyn RandomSource,
        now: i64,
    ) -> Option<usize> {
        match self {
            SlotBalancer::Random(b) => b.pick_at(shared, request, candidates, rng, now),
            SlotBalancer::RoundRobin(b) => b.pick_at(shared, request, candidates, rng, now),
            SlotBalancer::LeastActive(b) => b.pick_at(shared, request, candidates, rng, now),
            SlotBalancer::ConsistentHash(b) => b.pick_at(shared, request, candidates, rng, now),
            SlotBalancer::P2c(b) => b.pick_at(shared, request, candidates, rng, now),
            SlotBalancer::ShortestResponse(b) => b.pick_at(shared, request, candidates, rng, now),
            SlotBalancer::Adaptive(b) => b.pick_at(shared, request, candidates, rng, now),
        }
    }
}

/// Everything the balancers keep for one snapshot: the shared weights and in-flight
/// counters, one prepared balancer per configured slot, and the weights of the methods
/// that have their own (`<method>.weight`; none for a service without).
#[derive(Debug)]
pub struct SnapshotBalance {
    shared: Shared,
    slots: Box<[SlotBalancer]>,
    /// By method weight table ([`SnapshotBalance::with_method_weights`]).
    methods: Box<[Shared]>,
}

impl SnapshotBalance {
    /// Prepares the balancers of `config` over `snapshot`, the warm-up table at the system
    /// time. Rings with the same number of virtual nodes are shared between slots.
    pub fn new(snapshot: &Snapshot, config: &BalanceConfig) -> Self {
        Self::new_at(snapshot, config, epoch_millis())
    }

    /// [`SnapshotBalance::new`] with the warm-up table at `now` (ms since the epoch).
    pub fn new_at(snapshot: &Snapshot, config: &BalanceConfig, now: i64) -> Self {
        let mut rings = Vec::new();
        let slots = (0..config.slots())
            .map(|slot| SlotBalancer::new(config.spec(slot), snapshot, &mut rings))
            .collect();
        SnapshotBalance {
            shared: Shared::new(snapshot, now).with_responses(config, now),
            slots,
            methods: Box::new([]),
        }
    }

    /// The balancers of `config` over `snapshot`, derived from these (prepared over the
    /// snapshot `edit` started from, with the same or another `config`): weights, class
    /// masks and consistent-hash rings are carried, only the changed providers are read
    /// (see [`Weights::edited`], [`Ring::edited`]). Picks exactly as
    /// [`SnapshotBalance::new`]`(snapshot, config)` (same random draws, same choices);
    /// in-flight counters and round-robin state start at zero, as in a fresh one. Time: the
    /// tables' size (per-provider tables, mask words, ring points) plus the changed
    /// providers, never a URL of a surviving provider.
    pub fn edited(&self, edit: &SnapshotEdit, snapshot: &Snapshot, config: &BalanceConfig) -> Self {
        self.edited_at(edit, snapshot, config, epoch_millis())
    }

    /// [`SnapshotBalance::edited`] with the warm-up table at `now` (ms since the epoch).
    pub fn edited_at(
        &self,
        edit: &SnapshotEdit,
        snapshot: &Snapshot,
        config: &BalanceConfig,
        now: i64,
    ) -> Self {
        let mut rings = Vec::new();
        let slots = (0..config.slots())
            .map(|slot| {
                let spec = config.spec(slot);
                match self.slots.get(slot) {
                    Some(old) => old.edited(spec, edit, snapshot, &mut rings),
                    None => SlotBalancer::fresh(spec, snapshot, &mut rings),
                }
            })
            .collect();
        SnapshotBalance {
            shared: self
                .shared
                .edited(edit, snapshot, now)
                .with_responses(config, now),
            slots,
            methods: Box::new([]),
        }
    }

    /// These balancers with per-method weight `tables` (each a weight per provider, by
    /// index), table `k` used by [`SnapshotBalance::pick_in`]`(Some(k), …)`; the warm-up
    /// table, in-flight counters and response statistics stay the service's.
    pub fn with_method_weights(mut self, tables: impl IntoIterator<Item = Box<[u32]>>) -> Self {
        self.methods = tables
            .into_iter()
            .map(|t| self.shared.with_weights(Weights::from_table(t)))
            .collect();
        self
    }

    /// The weights of method table `table` (`None`, or past the tables: the service's).
    pub fn method_weights(&self, table: Option<u16>) -> &Weights {
        self.shared_in(table).weights()
    }

    #[inline]
    fn shared_in(&self, table: Option<u16>) -> &Shared {
        match table {
            Some(k) => self.methods.get(usize::from(k)).unwrap_or(&self.shared),
            None => &self.shared,
        }
    }

    /// The weights.
    pub fn weights(&self) -> &Weights {
        self.shared.weights()
    }

    /// What the slots share (weights, in-flight counters).
    pub fn shared(&self) -> &Shared {
        &self.shared
    }

    /// The prepared balancer of `slot`.
    pub fn slot(&self, slot: usize) -> Option<&SlotBalancer> {
        self.slots.get(slot)
    }

    /// In-flight calls on provider `i`.
    pub fn active(&self, i: usize) -> u32 {
        self.shared.active(i)
    }

    /// Counts a call started on provider `i`.
    pub fn begin(&self, i: usize) {
        self.shared.begin(i)
    }

    /// Counts a call on provider `i` ended.
    pub fn end(&self, i: usize) {
        self.shared.end(i)
    }

    /// True when a balancer reads response times (a call then measures its attempts and
    /// reads the clock for its picks).
    #[inline]
    pub fn timed(&self) -> bool {
        self.shared.responses.kept()
    }

    /// Picks one candidate with the balancer of `slot` (`spec` is `config.spec(slot)`, the
    /// spec it was prepared with). `None` only when `candidates` is empty. A `spec` of
    /// another algorithm than the slot's picks by its own algorithm without slot state
    /// (`roundrobin` and `consistenthash`, which need it, fall back to weighted random).
    #[inline]
    pub fn pick(
        &self,
        slot: usize,
        spec: &BalancerSpec,
        request: &Request,
        candidates: &Candidates,
        rng: &mut dyn RandomSource,
    ) -> Option<usize> {
        self.pick_at(slot, spec, request, candidates, rng, 0)
    }

    /// [`SnapshotBalance::pick`] at `now` (ms since the epoch: providers warming up weigh
    /// what Dubbo's warm-up gives them; 0: the static weights).
    #[inline]
    pub fn pick_at(
        &self,
        slot: usize,
        spec: &BalancerSpec,
        request: &Request,
        candidates: &Candidates,
        rng: &mut dyn RandomSource,
        now: i64,
    ) -> Option<usize> {
        self.pick_in(None, slot, spec, request, candidates, rng, now)
    }

    /// [`SnapshotBalance::pick_at`] with the weights of method table `table` (see
    /// [`SnapshotBalance::with_method_weights`]; `None`: the service's).
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub fn pick_in(
        &self,
        table: Option<u16>,
        slot: usize,
        spec: &BalancerSpec,
        request: &Request,
        candidates: &Candidates,
        rng: &mut dyn RandomSource,
        now: i64,
    ) -> Option<usize> {
        let shared = self.shared_in(table);
        match self.slots.get(slot) {
            Some(b) if b.kind() == spec.kind => b.pick_at(shared, request, candidates, rng, now),
            _ => match spec.kind {
                LoadBalanceKind::LeastActive => {
                    LeastActive.pick_at(shared, request, candidates, rng, now)
                }
                LoadBalanceKind::P2c => P2c.pick_at(shared, request, candidates, rng, now),
                LoadBalanceKind::ShortestResponse => {
                    ShortestResponse.pick_at(shared, request, candidates, rng, now)
                }
                LoadBalanceKind::Adaptive => {
                    Adaptive.pick_at(shared, request, candidates, rng, now)
                }
                _ => Random.pick_at(shared, request, candidates, rng, now),
            },
        }
    }
}
