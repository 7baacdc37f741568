//! Load balancers: pick one provider from the routed candidates, Dubbo's names and behaviour.
//!
//! | name | Dubbo class | what it does |
//! |---|---|---|
//! | `random` (default) | `RandomLoadBalance` | weighted random by the provider's `weight` param (default 100) |
//! | `roundrobin` | `RoundRobinLoadBalance` | smooth weighted round robin |
//! | `leastactive` | `LeastActiveLoadBalance` | fewest in-flight calls; ties weighted random |
//! | `consistenthash` | `ConsistentHashLoadBalance` | ketama ring (MD5, 160 virtual nodes), key from the request |
//! | `p2c` | `P2CLoadBalance` | two distinct random candidates, the one with fewer in-flight calls |
//!
//! Everything a balancer needs that depends only on the providers is precomputed once per
//! snapshot in a [`SnapshotBalance`]: the weights (grouped into a few *weight classes*, each a
//! bitset), the in-flight counters (atomics), the round-robin current weights (atomics) and
//! the consistent-hash ring over **all** providers. A pick reads the candidate bitset
//! directly; it never builds a list and never allocates:
//!
//! - `random`: the total weight is `Σ class_weight × popcount(candidates & class)`, word by
//!   word; one draw, then the word holding the draw is found by the same per-word sums and
//!   only that word's bits are walked. O(words × classes + 64). With more than
//!   [`MAX_WEIGHT_CLASSES`] distinct weights it walks the candidates (Dubbo's loop).
//! - `p2c`: two `nth` lookups by popcount, O(words).
//! - `roundrobin` and `leastactive` must read every candidate's counter (that is what the
//!   algorithms are), so they are O(candidates), over atomics, without allocating.
//! - `consistenthash`: the ring is built per snapshot over every provider; a pick does a
//!   binary search for the key's hash and walks clockwise, skipping points whose provider is
//!   not a candidate. The first candidate point reached is exactly the point Dubbo's ring,
//!   built over the routed set only, would return (a provider's points depend only on its
//!   address), so results equal Dubbo's while nothing is rebuilt per routed set.

use std::sync::atomic::{AtomicI64, AtomicU32, Ordering};

use routechain_core::RandomSource;
use routechain_core::Request;
use routechain_core::Snapshot;
use routechain_core::{BitSet, Candidates};

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
}

impl LoadBalanceKind {
    /// Every kind, in documentation order.
    pub const ALL: [LoadBalanceKind; 5] = [
        LoadBalanceKind::Random,
        LoadBalanceKind::RoundRobin,
        LoadBalanceKind::LeastActive,
        LoadBalanceKind::ConsistentHash,
        LoadBalanceKind::P2c,
    ];

    /// The name used in chain files (Dubbo's `loadbalance` value).
    pub fn name(self) -> &'static str {
        match self {
            LoadBalanceKind::Random => "random",
            LoadBalanceKind::RoundRobin => "roundrobin",
            LoadBalanceKind::LeastActive => "leastactive",
            LoadBalanceKind::ConsistentHash => "consistenthash",
            LoadBalanceKind::P2c => "p2c",
        }
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

/// One piece of a consistent-hash key, read from the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HashKeyPart {
    /// `arguments[n]`: the argument's string form (as [`Request::with_argument_str`]).
    Argument(usize),
    /// `attachments[k]`.
    Attachment(String),
    /// `attributes[k]`.
    Attribute(String),
}

impl HashKeyPart {
    /// Parses `arguments[0]`, `attachments[user]` or `attributes[user]`; the error says what
    /// is expected.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let inner = |prefix: &str| {
            text.strip_prefix(prefix)
                .and_then(|r| r.strip_prefix('['))
                .and_then(|r| r.strip_suffix(']'))
        };
        if let Some(n) = inner("arguments") {
            return n
                .trim()
                .parse::<usize>()
                .map(HashKeyPart::Argument)
                .map_err(|_| {
                    format!(
                        "invalid argument index {n:?} in hash key {text:?}: expected arguments[N]"
                    )
                });
        }
        for (prefix, make) in [
            (
                "attachments",
                HashKeyPart::Attachment as fn(String) -> HashKeyPart,
            ),
            ("attributes", HashKeyPart::Attribute),
        ] {
            if let Some(k) = inner(prefix) {
                let k = k.trim();
                if k.is_empty() {
                    return Err(format!("empty key in hash key {text:?}"));
                }
                return Ok(make(k.to_string()));
            }
        }
        Err(format!(
            "invalid hash key {text:?}: expected arguments[N], attachments[KEY] or attributes[KEY]"
        ))
    }
}

impl std::fmt::Display for HashKeyPart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HashKeyPart::Argument(n) => write!(f, "arguments[{n}]"),
            HashKeyPart::Attachment(k) => write!(f, "attachments[{k}]"),
            HashKeyPart::Attribute(k) => write!(f, "attributes[{k}]"),
        }
    }
}

/// A configured balancer: the algorithm and its options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BalancerSpec {
    /// The algorithm.
    pub kind: LoadBalanceKind,
    /// `consistenthash`: the key parts, concatenated (Dubbo's `hash.arguments`, default the
    /// first argument). Parts missing from a request are skipped, as Dubbo skips absent
    /// arguments.
    pub hash_key: Vec<HashKeyPart>,
    /// `consistenthash`: virtual nodes per provider (Dubbo's `hash.nodes`, default 160;
    /// rounded down to a multiple of 4 as Dubbo does).
    pub hash_nodes: u32,
}

impl Default for BalancerSpec {
    fn default() -> Self {
        BalancerSpec::new(LoadBalanceKind::Random)
    }
}

impl BalancerSpec {
    /// A balancer of `kind` with the default options.
    pub fn new(kind: LoadBalanceKind) -> Self {
        BalancerSpec {
            kind,
            hash_key: vec![HashKeyPart::Argument(0)],
            hash_nodes: DEFAULT_HASH_NODES,
        }
    }
}

/// The balancers of a service: a default, and overrides per method.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BalanceConfig {
    /// The chain's balancer (`load_balance`), used for methods without an override.
    pub default: BalancerSpec,
    /// `methods.<name>.load_balance`, sorted by method name.
    methods: Vec<(String, BalancerSpec)>,
}

impl BalanceConfig {
    /// A configuration with `default` for every method.
    pub fn new(default: BalancerSpec) -> Self {
        BalanceConfig {
            default,
            methods: Vec::new(),
        }
    }

    /// Adds (or replaces) the balancer of `method`.
    pub fn with_method(mut self, method: impl Into<String>, spec: BalancerSpec) -> Self {
        let method = method.into();
        match self
            .methods
            .binary_search_by(|(m, _)| m.as_str().cmp(&method))
        {
            Ok(i) => self.methods[i].1 = spec,
            Err(i) => self.methods.insert(i, (method, spec)),
        }
        self
    }

    /// The method overrides, sorted by method name.
    pub fn methods(&self) -> impl Iterator<Item = (&str, &BalancerSpec)> + '_ {
        self.methods.iter().map(|(m, s)| (m.as_str(), s))
    }

    /// The slot of `method`: 0 for the default, `1 + i` for the `i`-th override. Per-slot
    /// state (round-robin weights, rings) lives in the [`SnapshotBalance`].
    pub fn slot(&self, method: Option<&str>) -> usize {
        method
            .and_then(|m| {
                self.methods
                    .binary_search_by(|(k, _)| k.as_str().cmp(m))
                    .ok()
            })
            .map_or(0, |i| i + 1)
    }

    /// The balancer of slot `slot`.
    pub fn spec(&self, slot: usize) -> &BalancerSpec {
        match slot {
            0 => &self.default,
            n => self.methods.get(n - 1).map_or(&self.default, |(_, s)| s),
        }
    }

    /// The number of slots (default plus overrides).
    pub fn slots(&self) -> usize {
        1 + self.methods.len()
    }
}

/// The weight Dubbo gives a provider: its `weight` param, negative → 0, absent or not an
/// integer → 100. (Dubbo's warm-up reduction from `timestamp`/`warmup` is not applied: see
/// `docs/load-balancing.md`.)
pub fn provider_weight(provider: &routechain_core::Provider) -> u32 {
    match provider.get("weight").map(|w| w.trim().parse::<i64>()) {
        Some(Ok(w)) => w.clamp(0, u32::MAX as i64) as u32,
        _ => DEFAULT_WEIGHT,
    }
}

/// Per-snapshot weights: each provider's weight, and the providers grouped by weight.
#[derive(Debug, Clone)]
pub struct Weights {
    weights: Box<[u32]>,
    /// (weight, providers with that weight), non-zero weights only; `None` when there are
    /// more than [`MAX_WEIGHT_CLASSES`] distinct weights.
    classes: Option<Box<[(u64, BitSet)]>>,
}

impl Weights {
    /// The weights of `snapshot`'s providers.
    pub fn new(snapshot: &Snapshot) -> Self {
        let weights: Box<[u32]> = snapshot.providers().iter().map(provider_weight).collect();
        let mut distinct: Vec<u32> = weights.iter().copied().filter(|w| *w > 0).collect();
        distinct.sort_unstable();
        distinct.dedup();
        let classes = (distinct.len() <= MAX_WEIGHT_CLASSES).then(|| {
            distinct
                .iter()
                .map(|&w| {
                    (
                        w as u64,
                        BitSet::from_fn(weights.len(), |i| weights[i] == w),
                    )
                })
                .collect()
        });
        Weights { weights, classes }
    }

    /// The weight of provider `i` (0 past the end).
    pub fn get(&self, i: usize) -> u32 {
        self.weights.get(i).copied().unwrap_or(0)
    }

    /// The number of weight classes, `None` when the weights are too varied for classes.
    pub fn class_count(&self) -> Option<usize> {
        self.classes.as_ref().map(|c| c.len())
    }

    /// The total weight of the candidates.
    pub fn total(&self, candidates: &Candidates) -> u64 {
        match &self.classes {
            Some(classes) => classes
                .iter()
                .map(|(w, set)| w * candidates.count_and(set) as u64)
                .sum(),
            None => candidates.iter().map(|i| self.get(i) as u64).sum(),
        }
    }

    fn word_total(&self, classes: &[(u64, BitSet)], w: usize, word: u64) -> u64 {
        classes
            .iter()
            .map(|(weight, set)| {
                let class_word = set.words().get(w).copied().unwrap_or(0);
                weight * (word & class_word).count_ones() as u64
            })
            .sum()
    }

    /// Dubbo's weighted random pick: with a positive total weight, provider `i` with
    /// probability `weight(i) / total`; with a zero total, uniform.
    pub fn pick(&self, candidates: &Candidates, rng: &mut dyn RandomSource) -> Option<usize> {
        let count = candidates.count();
        if count <= 1 {
            return candidates.first();
        }
        let total = self.total(candidates);
        if total == 0 {
            return candidates.nth(rng.below(count as u64) as usize);
        }
        let mut offset = rng.below(total);
        let (words, start) = match &self.classes {
            Some(classes) => {
                // Find the word holding the draw by per-word sums, then walk its bits.
                let mut found = None;
                for (w, &word) in candidates.words().iter().enumerate() {
                    if word == 0 {
                        continue;
                    }
                    let t = self.word_total(classes, w, word);
                    if offset < t {
                        found = Some(w);
                        break;
                    }
                    offset -= t;
                }
                let w = found?;
                (&candidates.words()[w..=w], w)
            }
            None => (candidates.words(), 0),
        };
        for (k, &word) in words.iter().enumerate() {
            let mut bits = word;
            while bits != 0 {
                let i = (start + k) * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let weight = self.get(i) as u64;
                if offset < weight {
                    return Some(i);
                }
                offset -= weight;
            }
        }
        candidates.first()
    }
}

/// The ketama ring of one snapshot: every provider's virtual nodes, sorted by hash.
#[derive(Debug, Clone)]
pub struct Ring {
    /// (hash, provider index), sorted by hash then index.
    points: Box<[(u32, u32)]>,
    nodes: u32,
}

/// MD5 of `bytes`' pieces, as Dubbo's `ConsistentHashSelector.md5`.
fn md5_of(parts: &[&[u8]]) -> [u8; 16] {
    let mut ctx = md5::Context::new();
    for p in parts {
        ctx.consume(p);
    }
    ctx.compute().0
}

/// Dubbo's `hash(digest, number)`: little-endian u32 from bytes `4n..4n+4`.
fn digest_hash(digest: &[u8; 16], number: usize) -> u32 {
    let b = &digest[number * 4..number * 4 + 4];
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

impl Ring {
    /// Builds the ring over every provider of `snapshot`: for each provider, `nodes / 4`
    /// MD5 digests of `address + i`, four points each (Dubbo's construction).
    pub fn new(snapshot: &Snapshot, nodes: u32) -> Self {
        let per = (nodes / 4) as usize;
        let mut points = Vec::with_capacity(snapshot.len() * per * 4);
        let mut buf = [0u8; 20];
        for (index, provider) in snapshot.providers().iter().enumerate() {
            let address = provider.address().as_bytes();
            for r in 0..per {
                let digest = md5_of(&[address, fmt_usize(&mut buf, r)]);
                for h in 0..4 {
                    points.push((digest_hash(&digest, h), index as u32));
                }
            }
        }
        points.sort_unstable();
        Ring {
            points: points.into_boxed_slice(),
            nodes,
        }
    }

    /// The virtual nodes per provider it was built with.
    pub fn nodes(&self) -> u32 {
        self.nodes
    }

    /// The number of points.
    pub fn len(&self) -> usize {
        self.points.len()
    }

    /// True when the ring has no point.
    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    /// The candidate owning `hash`: the first point clockwise from `hash` (wrapping) whose
    /// provider is a candidate. Among points of equal hash the last candidate in provider
    /// order wins, as Dubbo's `TreeMap.put` keeps the last invoker put.
    pub fn lookup(&self, hash: u32, candidates: &Candidates) -> Option<usize> {
        let n = self.points.len();
        if n == 0 {
            return None;
        }
        let start = self.points.partition_point(|&(h, _)| h < hash);
        let mut k = 0;
        while k < n {
            let (h, idx) = self.points[(start + k) % n];
            if candidates.contains(idx as usize) {
                let mut best = idx;
                let mut j = k + 1;
                while j < n {
                    let (h2, idx2) = self.points[(start + j) % n];
                    if h2 != h {
                        break;
                    }
                    if candidates.contains(idx2 as usize) {
                        best = idx2;
                    }
                    j += 1;
                }
                return Some(best as usize);
            }
            k += 1;
        }
        None
    }

    /// The hash of the request's key (Dubbo: `hash(md5(key), 0)`), computed without building
    /// the key string.
    pub fn key_hash(request: &Request, key: &[HashKeyPart]) -> u32 {
        let mut ctx = md5::Context::new();
        for part in key {
            match part {
                HashKeyPart::Argument(n) => {
                    request.with_argument_str(*n, |s| ctx.consume(s.as_bytes()));
                }
                HashKeyPart::Attachment(k) => {
                    if let Some(v) = request.attachments.get(k) {
                        ctx.consume(v.as_bytes());
                    }
                }
                HashKeyPart::Attribute(k) => {
                    if let Some(v) = request.attributes.get(k) {
                        ctx.consume(v.as_bytes());
                    }
                }
            }
        }
        digest_hash(&ctx.compute().0, 0)
    }
}

/// `n` in decimal, written at the end of `buf` (20 digits hold any `u64`).
fn fmt_usize(buf: &mut [u8; 20], mut n: usize) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    &buf[i..]
}

/// Per-slot state of a snapshot: what the slot's algorithm keeps between calls.
#[derive(Debug)]
enum SlotState {
    None,
    RoundRobin(Box<[AtomicI64]>),
    Ring(std::sync::Arc<Ring>),
}

/// Everything the balancers keep for one snapshot: weights, in-flight counters,
/// round-robin state and consistent-hash rings, one per configured slot.
#[derive(Debug)]
pub struct SnapshotBalance {
    weights: Weights,
    active: Box<[AtomicU32]>,
    slots: Box<[SlotState]>,
}

impl SnapshotBalance {
    /// Precomputes the balancers of `config` over `snapshot`. Rings with the same number of
    /// virtual nodes are shared between slots.
    pub fn new(snapshot: &Snapshot, config: &BalanceConfig) -> Self {
        let n = snapshot.len();
        let mut rings: Vec<std::sync::Arc<Ring>> = Vec::new();
        let slots = (0..config.slots())
            .map(|slot| {
                let spec = config.spec(slot);
                match spec.kind {
                    LoadBalanceKind::RoundRobin => {
                        SlotState::RoundRobin((0..n).map(|_| AtomicI64::new(0)).collect())
                    }
                    LoadBalanceKind::ConsistentHash => {
                        let ring = match rings.iter().find(|r| r.nodes == spec.hash_nodes) {
                            Some(r) => r.clone(),
                            None => {
                                let r = std::sync::Arc::new(Ring::new(snapshot, spec.hash_nodes));
                                rings.push(r.clone());
                                r
                            }
                        };
                        SlotState::Ring(ring)
                    }
                    _ => SlotState::None,
                }
            })
            .collect();
        SnapshotBalance {
            weights: Weights::new(snapshot),
            active: (0..n).map(|_| AtomicU32::new(0)).collect(),
            slots,
        }
    }

    /// The weights.
    pub fn weights(&self) -> &Weights {
        &self.weights
    }

    /// In-flight calls on provider `i`.
    pub fn active(&self, i: usize) -> u32 {
        self.active.get(i).map_or(0, |a| a.load(Ordering::Relaxed))
    }

    /// Counts a call started on provider `i`.
    pub fn begin(&self, i: usize) {
        if let Some(a) = self.active.get(i) {
            a.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Counts a call on provider `i` ended.
    pub fn end(&self, i: usize) {
        if let Some(a) = self.active.get(i) {
            let _ = a.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| v.checked_sub(1));
        }
    }

    /// Picks one candidate with the balancer of `slot` (`spec` is `config.spec(slot)`).
    /// `None` only when `candidates` is empty.
    pub fn pick(
        &self,
        slot: usize,
        spec: &BalancerSpec,
        request: &Request,
        candidates: &Candidates,
        rng: &mut dyn RandomSource,
    ) -> Option<usize> {
        match spec.kind {
            LoadBalanceKind::Random => self.weights.pick(candidates, rng),
            LoadBalanceKind::RoundRobin => match self.slots.get(slot) {
                Some(SlotState::RoundRobin(current)) => self.round_robin(current, candidates),
                _ => self.weights.pick(candidates, rng),
            },
            LoadBalanceKind::LeastActive => self.least_active(candidates, rng),
            LoadBalanceKind::ConsistentHash => match self.slots.get(slot) {
                Some(SlotState::Ring(ring)) => {
                    if candidates.count() <= 1 {
                        return candidates.first();
                    }
                    ring.lookup(Ring::key_hash(request, &spec.hash_key), candidates)
                        .or_else(|| candidates.first())
                }
                _ => self.weights.pick(candidates, rng),
            },
            LoadBalanceKind::P2c => self.p2c(candidates, rng),
        }
    }

    /// Smooth weighted round robin (nginx's, as Dubbo's): every candidate's current weight
    /// grows by its weight, the largest is chosen and loses the total.
    fn round_robin(&self, current: &[AtomicI64], candidates: &Candidates) -> Option<usize> {
        let mut total: i64 = 0;
        let mut best: Option<(usize, i64)> = None;
        for i in candidates {
            // A candidate past the snapshot (a candidate set of another size) is skipped.
            let Some(slot) = current.get(i) else {
                continue;
            };
            let w = self.weights.get(i) as i64;
            let cur = slot.fetch_add(w, Ordering::Relaxed) + w;
            total += w;
            if best.is_none_or(|(_, max)| cur > max) {
                best = Some((i, cur));
            }
        }
        let (i, _) = best?;
        if let Some(slot) = current.get(i) {
            slot.fetch_sub(total, Ordering::Relaxed);
        }
        Some(i)
    }

    /// Dubbo's least active: the candidates with the fewest in-flight calls; one → it;
    /// several → weighted random among them (uniform when their weights are equal or zero).
    fn least_active(&self, candidates: &Candidates, rng: &mut dyn RandomSource) -> Option<usize> {
        let mut least = u32::MAX;
        let mut least_count = 0u64;
        let mut total_weight = 0u64;
        let mut first_weight = 0u64;
        let mut same_weight = true;
        let mut first = None;
        for i in candidates {
            let a = self.active(i);
            let w = self.weights.get(i) as u64;
            if a < least {
                least = a;
                least_count = 1;
                first = Some(i);
                total_weight = w;
                first_weight = w;
                same_weight = true;
            } else if a == least {
                least_count += 1;
                total_weight += w;
                if w != first_weight {
                    same_weight = false;
                }
            }
        }
        let first = first?;
        if least_count == 1 {
            return Some(first);
        }
        if !same_weight && total_weight > 0 {
            let mut offset = rng.below(total_weight);
            for i in candidates {
                if self.active(i) == least {
                    let w = self.weights.get(i) as u64;
                    if offset < w {
                        return Some(i);
                    }
                    offset -= w;
                }
            }
        } else {
            let mut k = rng.below(least_count);
            for i in candidates {
                if self.active(i) == least {
                    if k == 0 {
                        return Some(i);
                    }
                    k -= 1;
                }
            }
        }
        // Counters moved between the passes: the first least-active candidate seen.
        Some(first)
    }

    /// Power of two choices: two distinct uniformly drawn candidates, the one with fewer
    /// in-flight calls (then the larger weight, then the first drawn).
    fn p2c(&self, candidates: &Candidates, rng: &mut dyn RandomSource) -> Option<usize> {
        let n = candidates.count() as u64;
        if n <= 1 {
            return candidates.first();
        }
        let a = rng.below(n);
        let mut b = rng.below(n - 1);
        if b >= a {
            b += 1;
        }
        let ia = candidates.nth(a as usize)?;
        let ib = candidates.nth(b as usize)?;
        let (aa, ab) = (self.active(ia), self.active(ib));
        Some(
            if ab < aa || (ab == aa && self.weights.get(ib) > self.weights.get(ia)) {
                ib
            } else {
                ia
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use routechain_core::CallState;
    use routechain_core::FastRng;

    fn snapshot(weights: &[Option<i64>]) -> Snapshot {
        let text: String = weights
            .iter()
            .enumerate()
            .map(|(i, w)| match w {
                Some(w) => format!("dubbo://10.0.0.{}:20880/svc?weight={w}\n", i + 1),
                None => format!("dubbo://10.0.0.{}:20880/svc\n", i + 1),
            })
            .collect();
        Snapshot::parse_lines(1, &text).unwrap()
    }

    fn counts(
        lb: &SnapshotBalance,
        config: &BalanceConfig,
        cands: &BitSet,
        calls: usize,
        seed: u64,
    ) -> Vec<usize> {
        let mut call = CallState::seeded(seed);
        let mut counts = vec![0; cands.len()];
        let req = Request::new();
        for _ in 0..calls {
            let i = lb
                .pick(0, config.spec(0), &req, cands, &mut call.rng)
                .unwrap();
            counts[i] += 1;
        }
        counts
    }

    #[test]
    fn weights_follow_dubbo_defaults() {
        let s = snapshot(&[Some(200), None, Some(-5), Some(0)]);
        let w = Weights::new(&s);
        assert_eq!(
            (0..4).map(|i| w.get(i)).collect::<Vec<_>>(),
            [200, 100, 0, 0]
        );
        let bad = Snapshot::parse_lines(1, "dubbo://h:1/s?weight=abc\n").unwrap();
        assert_eq!(Weights::new(&bad).get(0), DEFAULT_WEIGHT);
    }

    #[test]
    fn random_follows_the_weights_within_one_percent() {
        // 100 / 200 / 300 / 400, plus a zero-weight provider that is never chosen.
        let s = snapshot(&[Some(100), Some(200), Some(300), Some(400), Some(0)]);
        let config = BalanceConfig::default();
        let lb = SnapshotBalance::new(&s, &config);
        let calls = 200_000;
        let c = counts(&lb, &config, &BitSet::full(5), calls, 42);
        for (i, w) in [100.0, 200.0, 300.0, 400.0].iter().enumerate() {
            let share = c[i] as f64 / calls as f64;
            assert!((share - w / 1000.0).abs() < 0.01, "{i}: {c:?}");
        }
        assert_eq!(c[4], 0);
    }

    #[test]
    fn random_over_a_subset_matches_the_subset_weights() {
        let s = snapshot(&[Some(100), Some(300), Some(100), Some(100)]);
        let config = BalanceConfig::default();
        let lb = SnapshotBalance::new(&s, &config);
        let c = counts(&lb, &config, &BitSet::from_indexes(4, [1, 3]), 100_000, 3);
        assert_eq!(c[0] + c[2], 0);
        let share = c[1] as f64 / 100_000.0;
        assert!((share - 0.75).abs() < 0.01, "{c:?}");
    }

    #[test]
    fn random_with_every_weight_zero_is_uniform() {
        let s = snapshot(&[Some(0), Some(0), Some(0), Some(0)]);
        let config = BalanceConfig::default();
        let lb = SnapshotBalance::new(&s, &config);
        let c = counts(&lb, &config, &BitSet::full(4), 100_000, 5);
        for x in &c {
            assert!((*x as f64 / 100_000.0 - 0.25).abs() < 0.01, "{c:?}");
        }
    }

    #[test]
    fn random_without_classes_matches_random_with_classes() {
        // Ten distinct weights: more than MAX_WEIGHT_CLASSES, so the per-bit walk is used.
        let many: Vec<Option<i64>> = (1..=10).map(|w| Some(w * 10)).collect();
        let s = snapshot(&many);
        let w = Weights::new(&s);
        assert_eq!(w.class_count(), None);
        let config = BalanceConfig::default();
        let lb = SnapshotBalance::new(&s, &config);
        let calls = 200_000;
        let c = counts(&lb, &config, &BitSet::full(10), calls, 11);
        for (i, n) in c.iter().enumerate() {
            let expected = (i + 1) as f64 * 10.0 / 550.0;
            assert!(
                (*n as f64 / calls as f64 - expected).abs() < 0.01,
                "{i}: {c:?}"
            );
        }
    }

    #[test]
    fn random_across_words_picks_only_candidates() {
        let weights: Vec<Option<i64>> = (0..200)
            .map(|i| Some(if i % 3 == 0 { 50 } else { 100 }))
            .collect();
        let text: String = weights
            .iter()
            .enumerate()
            .map(|(i, w)| {
                format!(
                    "dubbo://10.0.{}.{}:1/s?weight={}\n",
                    i / 200,
                    i % 200,
                    w.unwrap()
                )
            })
            .collect();
        let s = Snapshot::parse_lines(1, &text).unwrap();
        let config = BalanceConfig::default();
        let lb = SnapshotBalance::new(&s, &config);
        let cands = BitSet::from_indexes(200, [3, 64, 130, 199]);
        let c = counts(&lb, &config, &cands, 70_000, 9);
        // weights 50, 100, 100, 100 → 1/7, 2/7, 2/7, 2/7
        assert_eq!(c.iter().sum::<usize>(), 70_000);
        for (i, expected) in [
            (3, 1.0 / 7.0),
            (64, 2.0 / 7.0),
            (130, 2.0 / 7.0),
            (199, 2.0 / 7.0),
        ] {
            assert!(
                (c[i] as f64 / 70_000.0 - expected).abs() < 0.01,
                "{i}: {}",
                c[i]
            );
        }
    }

    #[test]
    fn smooth_round_robin_gives_nginx_sequence() {
        // Weights 5, 1, 1 → a a b a c a a, repeating.
        let s = snapshot(&[Some(5), Some(1), Some(1)]);
        let config = BalanceConfig::new(BalancerSpec::new(LoadBalanceKind::RoundRobin));
        let lb = SnapshotBalance::new(&s, &config);
        let mut rng = FastRng::seeded(1);
        let req = Request::new();
        let seq: Vec<usize> = (0..14)
            .map(|_| {
                lb.pick(0, config.spec(0), &req, &BitSet::full(3), &mut rng)
                    .unwrap()
            })
            .collect();
        assert_eq!(seq, [0, 0, 1, 0, 2, 0, 0, 0, 0, 1, 0, 2, 0, 0]);
    }

    #[test]
    fn round_robin_exact_counts_per_cycle() {
        let s = snapshot(&[Some(100), Some(200), Some(300)]);
        let config = BalanceConfig::new(BalancerSpec::new(LoadBalanceKind::RoundRobin));
        let lb = SnapshotBalance::new(&s, &config);
        // 6 calls per cycle (weights 1:2:3 in units of 100): exactly 1000, 2000, 3000.
        let c = counts(&lb, &config, &BitSet::full(3), 6000, 0);
        assert_eq!(c, [1000, 2000, 3000]);
    }

    #[test]
    fn least_active_prefers_fewest_in_flight_then_weight() {
        let s = snapshot(&[Some(100), Some(100), Some(300)]);
        let config = BalanceConfig::new(BalancerSpec::new(LoadBalanceKind::LeastActive));
        let lb = SnapshotBalance::new(&s, &config);
        lb.begin(0);
        lb.begin(0);
        lb.begin(1);
        lb.begin(2);
        // 1 and 2 have 1 in flight, 0 has 2: ties between 1 (w100) and 2 (w300) → 1:3.
        let c = counts(&lb, &config, &BitSet::full(3), 40_000, 8);
        assert_eq!(c[0], 0);
        assert!((c[2] as f64 / 40_000.0 - 0.75).abs() < 0.01, "{c:?}");
        lb.end(2);
        let c = counts(&lb, &config, &BitSet::full(3), 100, 8);
        assert_eq!(c, [0, 0, 100]);
        lb.end(1);
        lb.end(1); // never goes below zero
        assert_eq!(lb.active(1), 0);
    }

    #[test]
    fn least_active_equal_weights_is_uniform_among_least() {
        let s = snapshot(&[None, None, None]);
        let config = BalanceConfig::new(BalancerSpec::new(LoadBalanceKind::LeastActive));
        let lb = SnapshotBalance::new(&s, &config);
        lb.begin(1);
        let c = counts(&lb, &config, &BitSet::full(3), 40_000, 2);
        assert_eq!(c[1], 0);
        assert!((c[0] as f64 / 40_000.0 - 0.5).abs() < 0.01, "{c:?}");
    }

    #[test]
    fn p2c_avoids_the_busiest_and_draws_distinct_pairs() {
        let s = snapshot(&[None, None, None]);
        let config = BalanceConfig::new(BalancerSpec::new(LoadBalanceKind::P2c));
        let lb = SnapshotBalance::new(&s, &config);
        for _ in 0..5 {
            lb.begin(2);
        }
        // Provider 2 loses every pair it is in: it is never chosen (pairs are distinct).
        let c = counts(&lb, &config, &BitSet::full(3), 30_000, 4);
        assert_eq!(c[2], 0);
        assert!((c[0] as f64 / 30_000.0 - 0.5).abs() < 0.01, "{c:?}");
        // Idle providers: each chosen about equally.
        let c = counts(&lb, &config, &BitSet::from_indexes(3, [0, 1]), 30_000, 4);
        assert!((c[0] as f64 / 30_000.0 - 0.5).abs() < 0.01, "{c:?}");
    }

    /// A ring built only over `subset` (what Dubbo does per routed list).
    fn dubbo_ring_lookup(s: &Snapshot, subset: &[usize], hash: u32) -> usize {
        let mut points: Vec<(u32, usize)> = Vec::new();
        for &i in subset {
            let addr = s.providers()[i].address();
            for r in 0..40 {
                let d = md5_of(&[format!("{addr}{r}").as_bytes()]);
                for h in 0..4 {
                    points.push((digest_hash(&d, h), i));
                }
            }
        }
        let mut map = std::collections::BTreeMap::new();
        for (h, i) in points {
            map.insert(h, i); // last put wins, as TreeMap.put
        }
        *map.range(hash..)
            .next()
            .or_else(|| map.iter().next())
            .unwrap()
            .1
    }

    #[test]
    fn consistent_hash_equals_a_ring_built_over_the_routed_set() {
        let s = snapshot(&[None; 12]);
        let config = BalanceConfig::new(BalancerSpec::new(LoadBalanceKind::ConsistentHash));
        let lb = SnapshotBalance::new(&s, &config);
        let subsets: [&[usize]; 3] = [&[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11], &[2, 5, 7], &[11]];
        let mut rng = FastRng::seeded(1);
        for subset in subsets {
            let cands = BitSet::from_indexes(12, subset.iter().copied());
            for user in 0..300 {
                let req = Request::new().with_argument(serde_json::json!(format!("user-{user}")));
                let got = lb.pick(0, config.spec(0), &req, &cands, &mut rng).unwrap();
                let hash = digest_hash(&md5_of(&[format!("user-{user}").as_bytes()]), 0);
                assert_eq!(
                    got,
                    dubbo_ring_lookup(&s, subset, hash),
                    "user-{user} {subset:?}"
                );
            }
        }
    }

    #[test]
    fn consistent_hash_is_sticky_and_moves_little_when_a_provider_leaves() {
        let s = snapshot(&[None; 10]);
        let spec = BalancerSpec {
            hash_key: vec![HashKeyPart::Attribute("user".into())],
            ..BalancerSpec::new(LoadBalanceKind::ConsistentHash)
        };
        let config = BalanceConfig::new(spec);
        let lb = SnapshotBalance::new(&s, &config);
        let mut rng = FastRng::seeded(1);
        let all = BitSet::full(10);
        let mut without_3 = BitSet::full(10);
        without_3.remove(3);
        let mut moved = 0;
        let mut spread = [0usize; 10];
        for user in 0..2000 {
            let req = Request::new().with_attribute("user", format!("u{user}"));
            let a = lb.pick(0, config.spec(0), &req, &all, &mut rng).unwrap();
            assert_eq!(a, lb.pick(0, config.spec(0), &req, &all, &mut rng).unwrap());
            spread[a] += 1;
            let b = lb
                .pick(0, config.spec(0), &req, &without_3, &mut rng)
                .unwrap();
            if a != 3 {
                assert_eq!(a, b, "only keys of the removed provider move");
            } else {
                moved += 1;
            }
        }
        assert!(moved > 0);
        assert!(spread.iter().all(|&n| n > 100), "{spread:?}");
    }

    #[test]
    fn hash_key_parts_parse_and_report_errors() {
        assert_eq!(
            HashKeyPart::parse("arguments[2]"),
            Ok(HashKeyPart::Argument(2))
        );
        assert_eq!(
            HashKeyPart::parse("attributes[user]"),
            Ok(HashKeyPart::Attribute("user".into()))
        );
        assert_eq!(
            HashKeyPart::parse("attachments[trace]"),
            Ok(HashKeyPart::Attachment("trace".into()))
        );
        assert!(HashKeyPart::parse("arguments[x]").is_err());
        assert!(HashKeyPart::parse("attributes[]").is_err());
        assert!(HashKeyPart::parse("user").is_err());
    }

    /// Dubbo's loop over a materialized list, drawing from the same random source.
    fn naive_pick(weights: &[u32], cands: &BitSet, rng: &mut dyn RandomSource) -> Option<usize> {
        let list: Vec<usize> = cands.iter().collect();
        if list.len() <= 1 {
            return list.first().copied();
        }
        let total: u64 = list.iter().map(|&i| weights[i] as u64).sum();
        if total == 0 {
            return Some(list[rng.below(list.len() as u64) as usize]);
        }
        let mut offset = rng.below(total);
        for &i in &list {
            let w = weights[i] as u64;
            if offset < w {
                return Some(i);
            }
            offset -= w;
        }
        None
    }

    proptest::proptest! {
        #[test]
        fn weighted_pick_equals_dubbos_loop_draw_for_draw(
            weights in proptest::collection::vec(proptest::sample::select(vec![0u32, 1, 50, 100, 200, 7, 300, 9, 11, 13, 1000]), 1..200),
            mask in proptest::collection::vec(proptest::bool::ANY, 200),
            seed in proptest::num::u64::ANY,
        ) {
            let text: String = weights
                .iter()
                .enumerate()
                .map(|(i, w)| format!("dubbo://10.0.{}.{}:1/s?weight={w}\n", i / 250, i % 250))
                .collect();
            let s = Snapshot::parse_lines(1, &text).unwrap();
            let w = Weights::new(&s);
            let cands = BitSet::from_fn(weights.len(), |i| mask[i]);
            let mut a = FastRng::seeded(seed);
            let mut b = FastRng::seeded(seed);
            for _ in 0..20 {
                proptest::prop_assert_eq!(w.pick(&cands, &mut a), naive_pick(&weights, &cands, &mut b));
            }
        }
    }

    #[test]
    fn method_slots_resolve() {
        let config = BalanceConfig::default()
            .with_method(
                "getUser",
                BalancerSpec::new(LoadBalanceKind::ConsistentHash),
            )
            .with_method("list", BalancerSpec::new(LoadBalanceKind::RoundRobin));
        assert_eq!(
            config.spec(config.slot(Some("getUser"))).kind,
            LoadBalanceKind::ConsistentHash
        );
        assert_eq!(
            config.spec(config.slot(Some("list"))).kind,
            LoadBalanceKind::RoundRobin
        );
        assert_eq!(
            config.spec(config.slot(Some("other"))).kind,
            LoadBalanceKind::Random
        );
        assert_eq!(config.slot(None), 0);
    }
}
