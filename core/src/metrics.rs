//! Call-path counters of one chain: routing decisions per router, calls and failovers.
//!
//! A [`ChainMetrics`] is attached to a [`crate::ChainState`] (and carried by every state a
//! [`crate::ChainState::next`] derives from it); the chain counts, per router, the calls it
//! emptied (`no_provider`), the calls on which it took its fallback or force path
//! ([`crate::RouteContext::note_fallback`]) and the calls on which it failed and was
//! isolated ([`crate::RouteContext::note_failure`], the plugin router); a balancing layer
//! (`routechain-balance`'s `Cluster`) counts calls and failovers. An exporter (the
//! `metrics` feature of `routechain-live`, Prometheus through `prometheus-client`) sums them
//! when it is scraped.
//!
//! **Cost on the call path.** Every counter is sharded: one cache-line padded slot per
//! shard, a thread always writes the shard it was given on its first count (a round-robin
//! number kept in a `const` thread-local, no allocation), so two threads never contend for
//! one cache line as long as there are no more threads than shards (the shard count is the
//! machine's parallelism rounded up to a power of two, at least 4, at most 64). A count is
//! one relaxed `fetch_add` on an uncontended line; reading sums the shards (scrape time).
//! The per-router counters are resolved when a chain state is assembled (off the call
//! path), so a call never looks a router up by name, takes a lock or allocates.
//!
//! **Memory.** The counters of a chain are packed: one padded block per shard (15
//! counters, 128 bytes on x86-64) holds the chain's call counters and the counters of its
//! first four routers, so a chain of up to four routers costs one block per shard (512
//! bytes with 4 shards), not one padded set per router; a fifth router name opens another
//! block, for five more. A process serving hundreds of services holds one [`ChainMetrics`]
//! per service.
//!
//! Counters are monotonic for the life of the [`ChainMetrics`]: a router replaced by a rule
//! change keeps counting under its name, so a rate over them stays meaningful across
//! updates.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crossbeam_utils::CachePadded;

/// The shard of the current thread, assigned round-robin on its first count.
#[inline]
fn shard_of_thread() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SHARD: Cell<usize> = const { Cell::new(usize::MAX) };
    }
    SHARD.with(|s| {
        let v = s.get();
        if v != usize::MAX {
            return v;
        }
        let v = NEXT.fetch_add(1, Ordering::Relaxed);
        s.set(v);
        v
    })
}

fn shard_count() -> usize {
    std::thread::available_parallelism()
        .map_or(4, |n| n.get())
        .next_power_of_two()
        .clamp(4, 64)
}

/// `K` counters, sharded: one padded array of `K` atomics per shard. Clones share the
/// counters (the routers' counter sets share their chain's blocks).
#[derive(Clone)]
struct Sharded<const K: usize> {
    shards: Arc<[CachePadded<[AtomicU64; K]>]>,
}

impl<const K: usize> Sharded<K> {
    fn new() -> Self {
        Sharded {
            shards: (0..shard_count())
                .map(|_| CachePadded::new(std::array::from_fn(|_| AtomicU64::new(0))))
                .collect(),
        }
    }

    #[inline]
    fn add(&self, k: usize) {
        // The shard count is a power of two.
        let shard = &self.shards[shard_of_thread() & (self.shards.len() - 1)];
        shard[k].fetch_add(1, Ordering::Relaxed);
    }

    fn sum(&self, k: usize) -> u64 {
        self.shards
            .iter()
            .map(|s| s[k].load(Ordering::Relaxed))
            .fold(0u64, u64::wrapping_add)
    }
}

impl<const K: usize> std::fmt::Debug for Sharded<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries((0..K).map(|k| self.sum(k))).finish()
    }
}

const CALLS: usize = 0;
const FAILOVERS: usize = 1;
const EMPTY_LIST: usize = 2;

const NO_PROVIDER: usize = 0;
const FALLBACK: usize = 1;
const FAILURE: usize = 2;

/// Counter sets of three per block: a block is one padded line (15 counters) per shard,
/// holding the chain's call counters and the counters of four routers, or the counters of
/// five more routers.
const BLOCK_SLOTS: usize = 5;
/// Counters per block.
const BLOCK: usize = BLOCK_SLOTS * 3;

/// The block counters are allocated in, and its next free set of three.
#[derive(Debug)]
struct Blocks {
    current: Sharded<BLOCK>,
    next: usize,
}

impl Blocks {
    /// A set of three counters: the next free one of the current block, else the first of
    /// a new block.
    fn take(&mut self) -> (Sharded<BLOCK>, usize) {
        if self.next == BLOCK_SLOTS {
            self.current = Sharded::new();
            self.next = 0;
        }
        let base = self.next * 3;
        self.next += 1;
        (self.current.clone(), base)
    }
}

/// The label the counters of calls that found an empty provider list (no router ran) are
/// reported under, in place of a router name.
pub const EMPTY_LIST_ROUTER: &str = "(empty provider list)";

/// The counters of one router of a chain, by its name: see the module documentation.
#[derive(Debug)]
pub(crate) struct RouterCounters {
    name: Arc<str>,
    kind: Arc<str>,
    /// The block this router's three counters are in, from `base` on.
    block: Sharded<BLOCK>,
    base: usize,
}

impl RouterCounters {
    /// Records a call this router emptied.
    #[inline]
    pub(crate) fn count_no_provider(&self) {
        self.block.add(self.base + NO_PROVIDER);
    }
    /// Records a call on which this router took its fallback or force path.
    #[inline]
    pub(crate) fn count_fallback(&self) {
        self.block.add(self.base + FALLBACK);
    }
    /// Records a call on which this router failed and was isolated.
    #[inline]
    pub(crate) fn count_failure(&self) {
        self.block.add(self.base + FAILURE);
    }

    fn sum(&self, k: usize) -> u64 {
        self.block.sum(self.base + k)
    }

    /// The router's name.
    pub(crate) fn name(&self) -> &Arc<str> {
        &self.name
    }
}

/// What one router's counters hold, summed over the shards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouterStats {
    /// The router's name (`condition(service)`, `tag`...).
    pub router: Arc<str>,
    /// The router type of the chain entry (`condition`, `plugin`...).
    pub kind: Arc<str>,
    /// Calls it emptied.
    pub no_provider: u64,
    /// Calls on which it took its fallback or force path.
    pub fallback: u64,
    /// Calls on which it failed and was isolated (plugin routers).
    pub failures: u64,
}

/// How many calls picked one provider (by address), when per-provider picks are counted
/// ([`ChainMetrics::with_provider_picks`]).
///
/// One slot per shard, **not** padded (a padded slot per shard per provider would take
/// kilobytes per provider): two threads picking the same provider at once write neighbouring
/// words of one cache line. That is why per-provider counting is an option, off by default.
#[derive(Debug)]
pub(crate) struct PickCounter {
    address: Arc<str>,
    shards: Box<[AtomicU64]>,
}

impl PickCounter {
    /// Records a pick.
    #[inline]
    pub fn count(&self) {
        let shard = shard_of_thread() & (self.shards.len() - 1);
        self.shards[shard].fetch_add(1, Ordering::Relaxed);
    }

    fn sum(&self) -> u64 {
        self.shards
            .iter()
            .map(|s| s.load(Ordering::Relaxed))
            .fold(0u64, u64::wrapping_add)
    }
}

/// The call-path counters of one chain: see the module documentation.
#[derive(Debug)]
pub struct ChainMetrics {
    /// The first block: the call counters are its first set of three.
    calls: Sharded<BLOCK>,
    /// Where the next router's counters go.
    blocks: Mutex<Blocks>,
    /// Per-provider pick counters by address (`None`: not counted, the default).
    picks: Option<Mutex<Vec<Arc<PickCounter>>>>,
    /// Every router that was part of a state carrying these metrics, by name, in the order
    /// first seen. Locked only when a state is assembled and when the counters are read.
    routers: Mutex<Vec<Arc<RouterCounters>>>,
}

impl Default for ChainMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl ChainMetrics {
    /// Counters at zero.
    pub fn new() -> Self {
        let calls = Sharded::new();
        ChainMetrics {
            blocks: Mutex::new(Blocks {
                current: calls.clone(),
                next: 1,
            }),
            calls,
            picks: None,
            routers: Mutex::new(Vec::new()),
        }
    }

    /// Counters at zero that also count picks per provider address (high-cardinality: one
    /// series per address ever seen, and two threads picking the same provider at once
    /// write neighbouring words of one cache line: off by default).
    pub fn with_provider_picks() -> Self {
        ChainMetrics {
            picks: Some(Mutex::new(Vec::new())),
            ..Self::new()
        }
    }

    /// True when picks are counted per provider.
    pub fn counts_provider_picks(&self) -> bool {
        self.picks.is_some()
    }

    /// The pick counter of every provider of `addresses` (in order), created at zero on
    /// first use; `None` when picks are not counted per provider. Off the call path: a
    /// chain state resolves them once per snapshot (O(providers × log addresses)).
    pub(crate) fn pick_counters<'a>(
        &self,
        addresses: impl Iterator<Item = &'a str>,
    ) -> Option<Box<[Arc<PickCounter>]>> {
        let picks = self.picks.as_ref()?;
        let mut known = picks.lock().unwrap_or_else(|p| p.into_inner());
        let shards = shard_count();
        Some(
            addresses
                .map(|a| match known.binary_search_by(|c| (*c.address).cmp(a)) {
                    Ok(i) => known[i].clone(),
                    Err(i) => {
                        let c = Arc::new(PickCounter {
                            address: Arc::from(a),
                            shards: (0..shards).map(|_| AtomicU64::new(0)).collect(),
                        });
                        known.insert(i, c.clone());
                        c
                    }
                })
                .collect(),
        )
    }

    /// Picks per provider address, sorted by address (empty when not counted).
    pub fn provider_picks(&self) -> Vec<(Arc<str>, u64)> {
        let Some(picks) = &self.picks else {
            return Vec::new();
        };
        let known = picks.lock().unwrap_or_else(|p| p.into_inner());
        known.iter().map(|c| (c.address.clone(), c.sum())).collect()
    }

    /// The counters of the router named `name` of type `kind` (created at zero on first use;
    /// new counters share the kind, and the chain's steps share the counters' name,
    /// [`RouterCounters::name`]). Off the call path: a chain state resolves its routers'
    /// counters once, when it is assembled.
    pub(crate) fn router_of_kind(&self, name: &str, kind: &Arc<str>) -> Arc<RouterCounters> {
        let mut routers = self.routers.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(r) = routers.iter().find(|r| &*r.name == name) {
            return r.clone();
        }
        let (block, base) = self.blocks.lock().unwrap_or_else(|p| p.into_inner()).take();
        let r = Arc::new(RouterCounters {
            name: Arc::from(name),
            kind: kind.clone(),
            block,
            base,
        });
        routers.push(r.clone());
        r
    }

    /// Records a call (its first attempt).
    #[inline]
    pub fn count_call(&self) {
        self.calls.add(CALLS);
    }
    /// Records a failover: a retry of a call selected another provider.
    #[inline]
    pub fn count_failover(&self) {
        self.calls.add(FAILOVERS);
    }
    /// Records a call that found an empty provider list.
    #[inline]
    pub(crate) fn count_empty_list(&self) {
        self.calls.add(EMPTY_LIST);
    }

    /// Calls counted so far.
    pub fn calls(&self) -> u64 {
        self.calls.sum(CALLS)
    }
    /// Failovers counted so far.
    pub fn failovers(&self) -> u64 {
        self.calls.sum(FAILOVERS)
    }
    /// Calls that found an empty provider list.
    pub fn empty_list(&self) -> u64 {
        self.calls.sum(EMPTY_LIST)
    }

    /// Every router's counters, in the order the routers were first seen.
    pub fn routers(&self) -> Vec<RouterStats> {
        let routers = self.routers.lock().unwrap_or_else(|p| p.into_inner());
        routers
            .iter()
            .map(|r| RouterStats {
                router: r.name.clone(),
                kind: r.kind.clone(),
                no_provider: r.sum(NO_PROVIDER),
                fallback: r.sum(FALLBACK),
                failures: r.sum(FAILURE),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_from_many_threads_sum_exactly() {
        let m = Arc::new(ChainMetrics::new());
        let r = m.router_of_kind("tag", &"tag".into());
        std::thread::scope(|s| {
            for _ in 0..8 {
                let (m, r) = (&m, &r);
                s.spawn(move || {
                    for _ in 0..10_000 {
                        m.count_call();
                        r.count_fallback();
                    }
                    m.count_failover();
                    r.count_no_provider();
                    r.count_failure();
                    m.count_empty_list();
                });
            }
        });
        assert_eq!(m.calls(), 80_000);
        assert_eq!(m.failovers(), 8);
        assert_eq!(m.empty_list(), 8);
        let routers = m.routers();
        assert_eq!(routers.len(), 1);
        assert_eq!(
            (
                routers[0].fallback,
                routers[0].no_provider,
                routers[0].failures
            ),
            (80_000, 8, 8)
        );
    }

    #[test]
    fn picks_are_counted_per_address_only_when_asked() {
        assert!(
            ChainMetrics::new()
                .pick_counters(["a:1"].into_iter())
                .is_none()
        );
        let m = ChainMetrics::with_provider_picks();
        let first = m.pick_counters(["b:1", "a:1"].into_iter()).unwrap();
        first[0].count();
        first[1].count();
        first[1].count();
        // A later snapshot: the same address, the same counter.
        let second = m.pick_counters(["a:1", "c:1"].into_iter()).unwrap();
        second[0].count();
        assert!(Arc::ptr_eq(&first[1], &second[0]));
        let picks: Vec<(String, u64)> = m
            .provider_picks()
            .into_iter()
            .map(|(a, n)| (a.to_string(), n))
            .collect();
        assert_eq!(
            picks,
            [("a:1".into(), 3), ("b:1".into(), 1), ("c:1".into(), 0)]
        );
    }

    #[test]
    fn routers_sharing_a_block_count_apart() {
        // The call counters and four routers fill the first block; the fifth and later
        // routers go to a second one. Every counter counts alone.
        let m = ChainMetrics::new();
        let routers: Vec<_> = (0..12)
            .map(|i| m.router_of_kind(&format!("r{i}"), &"mock".into()))
            .collect();
        let same = |a: &Sharded<BLOCK>, b: &Sharded<BLOCK>| Arc::ptr_eq(&a.shards, &b.shards);
        assert!(same(&routers[0].block, &m.calls));
        assert!(same(&routers[3].block, &m.calls));
        assert!(!same(&routers[4].block, &m.calls));
        assert!(same(&routers[4].block, &routers[8].block));
        assert!(!same(&routers[9].block, &routers[8].block));
        for (i, r) in routers.iter().enumerate() {
            for _ in 0..i {
                r.count_no_provider();
            }
            for _ in 0..2 * i {
                r.count_fallback();
            }
            for _ in 0..3 * i {
                r.count_failure();
            }
        }
        m.count_call();
        m.count_failover();
        m.count_failover();
        assert_eq!((m.calls(), m.failovers(), m.empty_list()), (1, 2, 0));
        for (i, r) in m.routers().iter().enumerate() {
            let i = i as u64;
            assert_eq!(&*r.router, format!("r{i}"));
            assert_eq!((r.no_provider, r.fallback, r.failures), (i, 2 * i, 3 * i));
        }
    }

    #[test]
    fn a_router_name_is_one_counter_set_whoever_asks() {
        let m = ChainMetrics::new();
        let a = m.router_of_kind("condition(service)", &"condition".into());
        let b = m.router_of_kind("condition(service)", &"condition".into());
        assert!(Arc::ptr_eq(&a, &b));
        m.router_of_kind("tag", &"tag".into());
        let names: Vec<_> = m.routers().into_iter().map(|r| r.router).collect();
        assert_eq!(names, [Arc::from("condition(service)"), Arc::from("tag")]);
    }

    #[test]
    fn each_thread_writes_only_its_own_shard_and_consecutive_threads_differ() {
        // Two threads count on a fresh counter at the same time; each reports the thread
        // number it was given. Every count of a thread must land in the shard its number
        // names (one cache line per thread), and the shard a count lands in is read back
        // from the counter itself, not from the number.
        let counter = Sharded::<1>::new();
        let len = counter.shards.len();
        let barrier = std::sync::Barrier::new(2);
        let numbers = std::thread::scope(|s| {
            let run = || {
                let n = shard_of_thread();
                barrier.wait();
                for _ in 0..1000 {
                    counter.add(0);
                }
                n
            };
            let a = s.spawn(run);
            let b = s.spawn(run);
            [a.join().unwrap(), b.join().unwrap()]
        });
        let written: Vec<(usize, u64)> = counter
            .shards
            .iter()
            .enumerate()
            .map(|(i, s)| (i, s[0].load(Ordering::Relaxed)))
            .filter(|&(_, c)| c > 0)
            .collect();
        let mut expected: Vec<usize> = numbers.iter().map(|n| n & (len - 1)).collect();
        expected.sort_unstable();
        expected.dedup();
        let shards: Vec<usize> = written.iter().map(|&(i, _)| i).collect();
        assert_eq!(
            shards, expected,
            "counts landed outside the threads' shards"
        );
        assert_eq!(written.iter().map(|&(_, c)| c).sum::<u64>(), 2000);
        // Threads numbered within one round of the shards never share a line: the two
        // threads here were numbered apart by at most the other tests' threads in between.
        if numbers[0].abs_diff(numbers[1]) < len {
            assert_eq!(written.len(), 2, "two live threads share one shard");
            assert!(written.iter().all(|&(_, c)| c == 1000));
        }
        assert!(shard_count() >= 4 && shard_count().is_power_of_two());
        assert!(std::mem::align_of::<CachePadded<[AtomicU64; 3]>>() >= 64);
    }
}
