//! `consistenthash` (Dubbo's `ConsistentHashLoadBalance`): a ketama ring on a key read from
//! the request.
//!
//! The ring is built once per snapshot over **every** provider: for each, `nodes / 4` MD5
//! digests of `address + i`, four points each. A pick hashes the request's key (MD5, first
//! four bytes little-endian), binary-searches the ring and walks clockwise, skipping points
//! whose provider is not a candidate. A provider's points depend only on its address, so
//! the first candidate point reached is exactly the point Dubbo's ring, built over the
//! routed set only, would return: results equal Dubbo's while nothing is rebuilt per call.

use std::sync::Arc;

use routechain_core::{Candidates, KeyPart, RandomSource, Request, Snapshot, SnapshotEdit};

use super::{Balancer, LoadBalanceKind, Shared};

/// Consistent hashing for one balancer slot: the ring (shared between slots with the same
/// number of virtual nodes) and the slot's key.
#[derive(Debug)]
pub struct ConsistentHash {
    ring: Arc<Ring>,
    key: Box<[KeyPart]>,
}

impl ConsistentHash {
    /// Hashes `key` of each request onto `ring`.
    pub fn new(ring: Arc<Ring>, key: &[KeyPart]) -> Self {
        ConsistentHash {
            ring,
            key: key.into(),
        }
    }

    /// The ring.
    pub fn ring(&self) -> &Arc<Ring> {
        &self.ring
    }
}

impl Balancer for ConsistentHash {
    fn kind(&self) -> LoadBalanceKind {
        LoadBalanceKind::ConsistentHash
    }

    /// Unweighted (Dubbo's ring ignores weights and warm-up).
    fn pick_at(
        &self,
        _shared: &Shared,
        request: &Request,
        candidates: &Candidates,
        _rng: &mut dyn RandomSource,
        _now: i64,
    ) -> Option<usize> {
        if candidates.count() <= 1 {
            return candidates.first();
        }
        self.ring
            .lookup(Ring::key_hash(request, &self.key), candidates)
            .or_else(|| candidates.first())
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
pub(crate) fn md5_of(parts: &[&[u8]]) -> [u8; 16] {
    let mut ctx = md5::Context::new();
    for p in parts {
        ctx.consume(p);
    }
    ctx.compute().0
}

/// Dubbo's `hash(digest, number)`: little-endian u32 from bytes `4n..4n+4`.
pub(crate) fn digest_hash(digest: &[u8; 16], number: usize) -> u32 {
    let b = &digest[number * 4..number * 4 + 4];
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

impl Ring {
    /// Builds the ring over every provider of `snapshot`: for each provider, `nodes / 4`
    /// MD5 digests of `address + i`, four points each (Dubbo's construction).
    pub fn new(snapshot: &Snapshot, nodes: u32) -> Self {
        Ring {
            points: Self::points_of(snapshot, 0..snapshot.len(), nodes).into_boxed_slice(),
            nodes,
        }
    }

    /// The points of `snapshot`'s providers `range`, sorted.
    fn points_of(
        snapshot: &Snapshot,
        range: std::ops::Range<usize>,
        nodes: u32,
    ) -> Vec<(u32, u32)> {
        let per = (nodes / 4) as usize;
        let mut points = Vec::with_capacity(range.len() * per * 4);
        let mut buf = [0u8; 20];
        for index in range {
            let Some(provider) = snapshot.providers().get(index) else {
                break;
            };
            let address = provider.address().as_bytes();
            for r in 0..per {
                let digest = md5_of(&[address, fmt_usize(&mut buf, r)]);
                for h in 0..4 {
                    points.push((digest_hash(&digest, h), index as u32));
                }
            }
        }
        points.sort_unstable();
        points
    }

    /// The ring of `snapshot`, derived from this one (built over the snapshot `edit` started
    /// from): the removed providers' points dropped, the survivors' renumbered (their order
    /// is kept: the map from old to new positions is monotone), the added providers' points
    /// hashed and merged in. Equal to [`Ring::new`]`(snapshot, nodes)`; only the added
    /// providers are hashed. Time: the points, plus the added providers' MD5s.
    pub fn edited(&self, edit: &SnapshotEdit, snapshot: &Snapshot) -> Self {
        // Old position → new position + 1 (0: removed), one pass over the old positions.
        let map: Vec<u32> = {
            let mut map = vec![0u32; edit.old_len()];
            let mut removed = edit.removed().iter().peekable();
            let mut next = 0u32;
            for (old, slot) in map.iter_mut().enumerate() {
                if removed.peek().is_some_and(|&&r| r as usize == old) {
                    removed.next();
                } else {
                    next += 1;
                    *slot = next;
                }
            }
            map
        };
        let added = Self::points_of(snapshot, edit.added(), self.nodes);
        let mut points = Vec::with_capacity(
            self.points.len() / edit.old_len().max(1) * edit.survivors() + added.len(),
        );
        let mut add = added.into_iter().peekable();
        for &(h, old) in self.points.iter() {
            let Some(&n) = map.get(old as usize) else {
                continue;
            };
            if n == 0 {
                continue;
            }
            let point = (h, n - 1);
            // Added points sort after survivors' points of the same hash (larger indexes).
            while let Some(&a) = add.peek() {
                if a < point {
                    points.push(a);
                    add.next();
                } else {
                    break;
                }
            }
            points.push(point);
        }
        points.extend(add);
        Ring {
            points: points.into_boxed_slice(),
            nodes: self.nodes,
        }
    }

    /// The points: (hash, provider index), sorted by hash then index.
    pub fn points(&self) -> &[(u32, u32)] {
        &self.points
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
    pub fn key_hash(request: &Request, key: &[KeyPart]) -> u32 {
        let mut ctx = md5::Context::new();
        for part in key {
            match part {
                KeyPart::Argument(n) => {
                    request.with_argument_str(*n, |s| ctx.consume(s.as_bytes()));
                }
                KeyPart::Attachment(k) => {
                    if let Some(v) = request.attachments.get(k) {
                        ctx.consume(v.as_bytes());
                    }
                }
                KeyPart::Attribute(k) => {
                    if let Some(v) = request.attributes.get(k) {
                        ctx.consume(v.as_bytes());
                    }
                }
                // The balancer sees the request only: the request's own consumer.
                KeyPart::ConsumerHost => {
                    if let Some(c) = &request.consumer {
                        ctx.consume(c.host().as_bytes());
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
