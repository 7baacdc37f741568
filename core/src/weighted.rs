//! Weighted picks shared by routers: the sticky key of a request, the sticky or random pick
//! over weights in a fixed order, and health-aware weights (Envoy-style spillover with an
//! overprovisioning factor, priority levels, a panic threshold).
//!
//! - [`StickyKey`]: `attributes[user]`, `attachments[K]`, `arguments[N]` (the balancer's
//!   `hash_key` syntax) or `consumer.host`, one or several; [`StickyKey::hash`] is a stable
//!   64-bit hash of the request's values, computed without building a string.
//! - [`pick`]: picks an index by weight. A [`Draw::Random`] draw is uniform in
//!   `0..total`; a [`Draw::Sticky`] hash is *scaled* onto `0..total`
//!   (`hash × total / 2⁶⁴`), so each user keeps a fixed position along the weights: raising
//!   one weight moves only the users at the margin. (Envoy takes `hash mod total`; a modulus
//!   that changes with the total re-shuffles almost every user, the opposite of what it
//!   intends, so the position is scaled instead.)
//! - [`availability`], [`effective_weight`], [`priority_loads`], [`in_panic`]: the
//!   spillover arithmetic, in integers (millionths), exact and the same on every platform.
//!
//! Nothing here allocates; every function is O(number of weights).

use crate::request::Request;
use crate::rng::RandomSource;
use crate::rule::{FieldPath, RuleError};
use crate::url::Url;

/// Full availability: the unit of [`availability`] (one millionth per step).
pub const UNIT: u64 = 1_000_000;

/// Where a sticky key's value is read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyPart {
    /// `arguments[n]`: the argument's string form.
    Argument(usize),
    /// `attachments[k]`.
    Attachment(Box<str>),
    /// `attributes[k]`.
    Attribute(Box<str>),
    /// `consumer.host`: the call's consumer host (the request's consumer, else the chain's).
    ConsumerHost,
}

impl KeyPart {
    /// Parses `arguments[N]`, `attachments[K]`, `attributes[K]` or `consumer.host`; the
    /// error says what is expected.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if text == "consumer.host" {
            return Ok(KeyPart::ConsumerHost);
        }
        let inner = |prefix: &str| {
            text.strip_prefix(prefix)
                .and_then(|r| r.strip_prefix('['))
                .and_then(|r| r.strip_suffix(']'))
                .map(str::trim)
        };
        if let Some(n) = inner("arguments") {
            return n.parse::<usize>().map(KeyPart::Argument).map_err(|_| {
                format!("invalid argument index {n:?} in hash key {text:?}: expected arguments[N]")
            });
        }
        for (prefix, attachment) in [("attachments", true), ("attributes", false)] {
            if let Some(k) = inner(prefix) {
                if k.is_empty() {
                    return Err(format!("empty key in hash key {text:?}"));
                }
                return Ok(if attachment {
                    KeyPart::Attachment(k.into())
                } else {
                    KeyPart::Attribute(k.into())
                });
            }
        }
        Err(format!(
            "invalid hash key {text:?}: expected attributes[KEY], attachments[KEY], arguments[N] or consumer.host"
        ))
    }
}

impl std::fmt::Display for KeyPart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeyPart::Argument(n) => write!(f, "arguments[{n}]"),
            KeyPart::Attachment(k) => write!(f, "attachments[{k}]"),
            KeyPart::Attribute(k) => write!(f, "attributes[{k}]"),
            KeyPart::ConsumerHost => f.write_str("consumer.host"),
        }
    }
}

/// A sticky key: the request values whose stable hash replaces the random draw of a
/// weighted pick, so one user always lands on the same side of the split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StickyKey {
    parts: Box<[KeyPart]>,
}

impl StickyKey {
    /// A key of the given parts, hashed in order (at least one).
    pub fn new(parts: Vec<KeyPart>) -> Option<Self> {
        (!parts.is_empty()).then(|| StickyKey {
            parts: parts.into_boxed_slice(),
        })
    }

    /// Parses one part (see [`KeyPart::parse`]).
    pub fn parse(text: &str) -> Result<Self, String> {
        Ok(StickyKey {
            parts: Box::new([KeyPart::parse(text)?]),
        })
    }

    /// A rule's `hash_key` value: one part as a string, or a non-empty list of them. Every
    /// bad part is reported at its path below `path` (`hash_key[1]`).
    pub fn from_value(value: &serde_json::Value, path: &FieldPath) -> Result<Self, Vec<RuleError>> {
        use serde_json::Value;
        let items: Vec<(FieldPath, &Value)> = match value {
            Value::Array(items) => items
                .iter()
                .enumerate()
                .map(|(i, item)| (path.index(i), item))
                .collect(),
            other => vec![(path.clone(), other)],
        };
        let mut errors = Vec::new();
        let mut parts = Vec::new();
        for (p, item) in items {
            match item.as_str().map(KeyPart::parse) {
                Some(Ok(part)) => parts.push(part),
                Some(Err(message)) => errors.push(RuleError::new(p, message)),
                None => errors.push(RuleError::new(
                    p,
                    format!(
                        "a hash key is a string such as attributes[user] or consumer.host, found {item}"
                    ),
                )),
            }
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        StickyKey::new(parts).ok_or_else(|| {
            vec![RuleError::new(
                path.clone(),
                "`hash_key` must name at least one part",
            )]
        })
    }

    /// The parts.
    pub fn parts(&self) -> &[KeyPart] {
        &self.parts
    }

    /// The stable hash of the request's values for this key (`consumer` is the call's
    /// consumer), or `None` when the request has none of them (the pick is then random).
    /// One part hashes exactly as [`crate::stable_hash`] of its value; parts are separated
    /// by a byte no UTF-8 text contains. No allocation.
    pub fn hash(&self, request: &Request, consumer: &Url) -> Option<u64> {
        let mut h = StableHasher::new();
        let mut any = false;
        for (i, part) in self.parts.iter().enumerate() {
            if i > 0 {
                h.write(&[0xff]);
            }
            match part {
                KeyPart::Argument(n) => {
                    any |= request
                        .with_argument_str(*n, |s| h.write(s.as_bytes()))
                        .is_some();
                }
                KeyPart::Attachment(k) => {
                    if let Some(v) = request.attachments.get(k) {
                        h.write(v.as_bytes());
                        any = true;
                    }
                }
                KeyPart::Attribute(k) => {
                    if let Some(v) = request.attributes.get(k) {
                        h.write(v.as_bytes());
                        any = true;
                    }
                }
                KeyPart::ConsumerHost => {
                    let host = consumer.host();
                    if !host.is_empty() {
                        h.write(host.as_bytes());
                        any = true;
                    }
                }
            }
        }
        any.then(|| h.finish())
    }
}

impl std::fmt::Display for StickyKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, p) in self.parts.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{p}")?;
        }
        Ok(())
    }
}

/// [`crate::stable_hash`], fed in pieces.
#[derive(Debug, Clone, Copy)]
pub struct StableHasher(u64);

impl StableHasher {
    /// An empty hasher.
    pub fn new() -> Self {
        StableHasher(0xcbf2_9ce4_8422_2325)
    }
    /// Feeds bytes.
    pub fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= *b as u64;
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
    /// The hash of everything fed (FNV-1a, then the splitmix64 finalizer).
    pub fn finish(&self) -> u64 {
        let mut h = self.0;
        h ^= h >> 30;
        h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
        h ^= h >> 27;
        h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
        h ^ (h >> 31)
    }
}

impl Default for StableHasher {
    fn default() -> Self {
        Self::new()
    }
}

/// The draw of a weighted pick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Draw {
    /// A uniform random point in `0..total`, from the call's random source.
    Random,
    /// A stable hash, scaled onto `0..total` ([`scale`]).
    Sticky(u64),
}

/// `hash` scaled onto `0..total`: `⌊hash × total / 2⁶⁴⌋`. A hash keeps its relative
/// position as `total` changes, so a weight change moves only the hashes at the margin.
#[inline]
pub fn scale(hash: u64, total: u64) -> u64 {
    ((u128::from(hash) * u128::from(total)) >> 64) as u64
}

/// What a weighted pick chose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Picked {
    /// The index chosen.
    pub index: usize,
    /// The point drawn, in `0..total`.
    pub point: u64,
    /// The total weight.
    pub total: u64,
}

/// Picks an index in `0..len` by `weight(i)`, walking the weights in index order: index `i`
/// owns the points `[w₀+…+wᵢ₋₁, w₀+…+wᵢ)`, so a zero weight is never picked. `None` when
/// every weight is zero. Two passes over the weights; no allocation. The total must fit in a
/// `u64` (callers' weights are far below that).
#[inline]
pub fn pick(
    len: usize,
    weight: impl Fn(usize) -> u64,
    draw: Draw,
    rng: &mut dyn RandomSource,
) -> Option<Picked> {
    let total = (0..len).fold(0u64, |s, i| s.saturating_add(weight(i)));
    if total == 0 {
        return None;
    }
    let point = match draw {
        Draw::Random => rng.below(total),
        Draw::Sticky(h) => scale(h, total),
    };
    let index = pick_at(len, weight, point)?;
    Some(Picked {
        index,
        point,
        total,
    })
}

/// The index owning `point` along the cumulative weights (see [`pick`]); `None` when
/// `point` is past the total.
#[inline]
pub fn pick_at(len: usize, weight: impl Fn(usize) -> u64, point: u64) -> Option<usize> {
    let mut cumulative = 0u64;
    for i in 0..len {
        cumulative = cumulative.saturating_add(weight(i));
        if point < cumulative {
            return Some(i);
        }
    }
    None
}

/// A set's availability in millionths of [`UNIT`]:
/// `min(1, overprovisioning × healthy / total)`, with the factor in thousandths
/// (`1400` for 1.4). A set with no provider has none.
#[inline]
pub fn availability(overprovisioning_milli: u32, healthy: u64, total: u64) -> u64 {
    if total == 0 {
        return 0;
    }
    let scaled = u128::from(overprovisioning_milli) * u128::from(healthy);
    let whole = 1000 * u128::from(total);
    // Fully available (the common case) without a division.
    if scaled >= whole {
        return UNIT;
    }
    // Below 1, so `scaled × UNIT` < `whole × UNIT` fits a u64 whenever `whole` does ×10⁶.
    match u64::try_from(scaled * u128::from(UNIT)) {
        Ok(numerator) if u64::try_from(whole).is_ok() => numerator / whole as u64,
        _ => (scaled * u128::from(UNIT) / whole) as u64,
    }
}

/// A weight scaled by an [`availability`]: `weight × availability` (units: weight
/// millionths), so a fully available set keeps `weight × UNIT`.
#[inline]
pub fn effective_weight(weight: u64, availability: u64) -> u64 {
    weight.saturating_mul(availability)
}

/// Envoy's priority-level loads, in millionths of [`UNIT`] summing to exactly `UNIT`:
/// with `aᵢ` the [`availability`] of level `i` (0 = the most preferred) and
/// `total = min(UNIT, Σ aᵢ)`, walking the levels in order each takes
/// `min(remaining, aᵢ × UNIT / total)`; the rounding remainder goes to the first level with
/// any availability. So the first level keeps everything while its availability is full
/// (healthy share ≥ 1/overprovisioning) and spills proportionally below. When no level has
/// any availability, level 0 takes everything. `load(i)` receives each level's load.
pub fn priority_loads(
    len: usize,
    availability: impl Fn(usize) -> u64,
    mut load: impl FnMut(usize, u64),
) {
    let sum = (0..len).fold(0u64, |s, i| s.saturating_add(availability(i)));
    let total = sum.min(UNIT);
    if total == 0 {
        for i in 0..len {
            load(i, if i == 0 { UNIT } else { 0 });
        }
        return;
    }
    let mut remaining = UNIT;
    let mut first = None;
    let mut assigned = 0u64;
    // First pass: the remainder's owner.
    for i in 0..len {
        let a = availability(i);
        if a > 0 && first.is_none() {
            first = Some(i);
        }
        let l = (u128::from(a) * u128::from(UNIT) / u128::from(total)) as u64;
        let l = l.min(remaining);
        remaining -= l;
        assigned += l;
    }
    let remainder = UNIT - assigned;
    let mut remaining = UNIT;
    for i in 0..len {
        let a = availability(i);
        let l = ((u128::from(a) * u128::from(UNIT) / u128::from(total)) as u64).min(remaining);
        remaining -= l;
        load(i, if Some(i) == first { l + remainder } else { l });
    }
}

/// True when a set is in panic: its healthy share is below `threshold_percent` (0 never
/// panics). Exact: `healthy × 100 < threshold × total`.
#[inline]
pub fn in_panic(threshold_percent: u32, healthy: u64, total: u64) -> bool {
    u128::from(healthy) * 100 < u128::from(threshold_percent) * u128::from(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{FastRng, stable_hash};

    #[test]
    fn availability_and_effective_weights_are_exact() {
        // (healthy, total, availability in millionths) with the factor 1.4.
        let cases = [
            (10, 10, UNIT),
            (8, 10, UNIT),
            (72, 100, UNIT),
            (5, 7, UNIT), // 5/7 × 1.4 = 1.0 exactly
            (71, 100, 994_000),
            (7, 10, 980_000),
            (5, 10, 700_000),
            (1, 4, 350_000),
            (1, 10, 140_000),
            (0, 10, 0),
            (0, 0, 0),
        ];
        for (h, t, want) in cases {
            assert_eq!(availability(1400, h, t), want, "{h}/{t}");
        }
        // docs/group-and-idc.md's example: {mt: 50, zf: 50}, 5 of 10 mt degraded → 35 against 50.
        let mt = effective_weight(50, availability(1400, 5, 10));
        let zf = effective_weight(50, availability(1400, 10, 10));
        assert_eq!((mt, zf), (35 * UNIT, 50 * UNIT));
        let share = mt as f64 * 100.0 / (mt + zf) as f64;
        assert_eq!(format!("{share:.1}"), "41.2");
        // Factor 1: plain healthy share.
        assert_eq!(availability(1000, 3, 4), 750_000);
    }

    fn loads(avail: &[u64]) -> Vec<u64> {
        let mut out = vec![0; avail.len()];
        priority_loads(avail.len(), |i| avail[i], |i, l| out[i] = l);
        out
    }

    #[test]
    fn priority_loads_follow_envoy() {
        let a = |h: u64| availability(1400, h, 100);
        // Envoy's table: P0 healthy 100/72/71/50/25/0 % with P1 fully healthy.
        assert_eq!(loads(&[a(100), a(100)]), [UNIT, 0]);
        assert_eq!(loads(&[a(72), a(100)]), [UNIT, 0]);
        assert_eq!(loads(&[a(71), a(100)]), [994_000, 6_000]);
        assert_eq!(loads(&[a(50), a(100)]), [700_000, 300_000]);
        assert_eq!(loads(&[a(25), a(100)]), [350_000, 650_000]);
        assert_eq!(loads(&[a(0), a(100)]), [0, UNIT]);
        // Three levels: P0 20%, P1 20%, P2 100% → 28/28/44.
        assert_eq!(loads(&[a(20), a(20), a(100)]), [280_000, 280_000, 440_000]);
        // Degraded everywhere: normalized so the sum stays whole (P0 and P1 at 35%).
        assert_eq!(loads(&[a(25), a(25)]), [500_000, 500_000]);
        // Nothing available: level 0 takes everything.
        assert_eq!(loads(&[0, 0]), [UNIT, 0]);
        // Rounding remainder goes to the first available level.
        let l = loads(&[333_333, 333_333, 0]);
        assert_eq!(l.iter().sum::<u64>(), UNIT);
        assert_eq!(l, [500_000, 500_000, 0]);
        let l = loads(&[0, 100_000, 200_000]);
        assert_eq!(l, [0, 333_334, 666_666]);
    }

    #[test]
    fn panic_threshold_is_exact() {
        assert!(in_panic(50, 4, 10));
        assert!(!in_panic(50, 5, 10));
        assert!(in_panic(50, 1, 10));
        assert!(!in_panic(0, 0, 10));
        assert!(!in_panic(50, 0, 0));
        assert!(in_panic(100, 9, 10));
    }

    #[test]
    fn pick_walks_the_weights_in_order() {
        let w = [0u64, 30, 0, 70];
        let at = |p| pick_at(4, |i| w[i], p);
        assert_eq!(at(0), Some(1));
        assert_eq!(at(29), Some(1));
        assert_eq!(at(30), Some(3));
        assert_eq!(at(99), Some(3));
        assert_eq!(at(100), None);
        let mut rng = FastRng::seeded(1);
        assert_eq!(pick(2, |_| 0, Draw::Random, &mut rng), None);
        let p = pick(4, |i| w[i], Draw::Sticky(u64::MAX), &mut rng).unwrap();
        assert_eq!((p.index, p.point, p.total), (3, 99, 100));
        let p = pick(4, |i| w[i], Draw::Sticky(0), &mut rng).unwrap();
        assert_eq!((p.index, p.point), (1, 0));
    }

    #[test]
    fn random_picks_split_as_the_weights_say() {
        let w = [35u64, 50];
        let mut rng = FastRng::seeded(7);
        let mut counts = [0u32; 2];
        for _ in 0..100_000 {
            counts[pick(2, |i| w[i], Draw::Random, &mut rng).unwrap().index] += 1;
        }
        let share = f64::from(counts[0]) / 1000.0;
        assert!((share - 41.18).abs() < 1.0, "{share}");
    }

    #[test]
    fn sticky_picks_keep_users_and_move_only_the_margin() {
        let users: Vec<u64> = (0..100_000)
            .map(|u| stable_hash(format!("user-{u}").as_bytes()))
            .collect();
        let mut rng = FastRng::seeded(1);
        let side = |w: &[u64], h: u64, rng: &mut FastRng| {
            pick(w.len(), |i| w[i], Draw::Sticky(h), rng).unwrap().index
        };
        // The same user always lands on the same side; users split as the weights say.
        for (w, share) in [([50u64, 50], 50.0), ([80, 20], 80.0), ([1, 99], 1.0)] {
            let first: usize = users
                .iter()
                .filter(|&&h| side(&w, h, &mut rng) == 0)
                .count();
            let again: usize = users
                .iter()
                .filter(|&&h| side(&w, h, &mut rng) == 0)
                .count();
            assert_eq!(first, again);
            let got = first as f64 / 1000.0;
            assert!((got - share).abs() <= 1.0, "{w:?}: {got}");
        }
        // Raising one weight by 10 moves at most about 10% of users, and only towards it.
        for (before, after) in [
            ([50u64, 50], [60u64, 50]),
            ([50, 50], [50, 60]),
            ([30, 70], [40, 70]),
        ] {
            let mut moved = 0;
            for &h in &users {
                let (a, b) = (side(&before, h, &mut rng), side(&after, h, &mut rng));
                if a != b {
                    moved += 1;
                    let raised = if after[0] > before[0] { 0 } else { 1 };
                    assert_eq!(b, raised, "a user moves only to the raised side");
                }
            }
            let moved = moved as f64 / 1000.0;
            assert!(moved <= 10.0, "{before:?} → {after:?}: {moved}% moved");
            assert!(moved > 0.0);
        }
    }

    #[test]
    fn sticky_keys_parse_and_hash_request_values() {
        use crate::request::Request;
        for (text, part) in [
            ("attributes[user]", KeyPart::Attribute("user".into())),
            (
                " attachments[ tenant ] ",
                KeyPart::Attachment("tenant".into()),
            ),
            ("arguments[1]", KeyPart::Argument(1)),
            ("consumer.host", KeyPart::ConsumerHost),
        ] {
            assert_eq!(KeyPart::parse(text), Ok(part.clone()));
            assert_eq!(KeyPart::parse(&part.to_string()), Ok(part));
        }
        for bad in ["user", "attributes[]", "arguments[x]", "consumer.port"] {
            assert!(KeyPart::parse(bad).is_err(), "{bad}");
        }
        let consumer = Url::parse("consumer://10.0.0.9/svc").unwrap();
        let key = StickyKey::parse("attributes[user]").unwrap();
        let r = Request::new().with_attribute("user", "alice");
        assert_eq!(key.hash(&r, &consumer), Some(stable_hash(b"alice")));
        assert_eq!(key.hash(&Request::new(), &consumer), None);
        let host = StickyKey::parse("consumer.host").unwrap();
        assert_eq!(
            host.hash(&Request::new(), &consumer),
            Some(stable_hash(b"10.0.0.9"))
        );
        let both =
            StickyKey::new(vec![KeyPart::Attachment("t".into()), KeyPart::Argument(0)]).unwrap();
        let r = Request::new()
            .with_attachment("t", "x")
            .with_argument("y".into());
        assert!(both.hash(&r, &consumer).is_some());
        assert_ne!(both.hash(&r, &consumer), Some(stable_hash(b"xy")));
        assert_eq!(both.to_string(), "attachments[t], arguments[0]");
        let path = FieldPath::root().key("hash_key");
        let from = |v: serde_json::Value| {
            StickyKey::from_value(&v, &path).map_err(|es| {
                es.iter()
                    .map(|e| format!("{}: {}", e.path, e.message))
                    .collect::<Vec<_>>()
            })
        };
        assert_eq!(from(serde_json::json!("attributes[user]")), Ok(key));
        assert_eq!(
            from(serde_json::json!(["attachments[t]", "arguments[0]"])),
            Ok(both)
        );
        assert_eq!(
            from(serde_json::json!(["attributes[u]", 3, "x"])),
            Err(vec![
                "hash_key[1]: a hash key is a string such as attributes[user] or consumer.host, found 3".to_string(),
                "hash_key[2]: invalid hash key \"x\": expected attributes[KEY], attachments[KEY], arguments[N] or consumer.host".to_string(),
            ])
        );
        assert_eq!(
            from(serde_json::json!([])),
            Err(vec![
                "hash_key: `hash_key` must name at least one part".to_string()
            ])
        );
    }
}
