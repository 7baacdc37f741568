//! The balancers against Dubbo's behaviour: weights, sequences, distributions, the ring.

use super::consistenthash::{digest_hash, md5_of};
use super::*;
use routechain_core::CallState;
use routechain_core::FastRng;
use routechain_core::{BitSet, Snapshot};

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

/// Java's `Integer.parseInt` and `Math.max(weight, 0)`, value by value.
#[test]
fn a_weight_param_reads_as_dubbo_reads_it() {
    use WeightParam::*;
    let cases = [
        ("0", Weight(0)),
        ("+7", Weight(7)),
        ("2147483647", Weight(i32::MAX as u32)),
        ("-5", Negative),
        ("-2147483648", Negative),
        ("2147483648", OutOfRange),
        ("99999999999999999999999", OutOfRange),
        ("-99999999999999999999999", OutOfRange),
        ("abc", NotANumber),
        ("1.5", NotANumber),
        (" 5", NotANumber),
        ("", NotANumber),
    ];
    for (value, want) in cases {
        assert_eq!(parse_weight(value), want, "{value:?}");
    }
    let s = snapshot(&[Some(-5), Some(3_000_000_000), Some(i32::MAX as i64)]);
    let w = Weights::new(&s);
    assert_eq!(
        (0..3).map(|i| w.get(i)).collect::<Vec<_>>(),
        [0, DEFAULT_WEIGHT, i32::MAX as u32]
    );
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
        // The exact pick (the sampling stages' fallback) draw for draw; the sampling stages
        // draw differently and are tested for their distribution in `sampling_tests.rs`.
        for _ in 0..20 {
            proptest::prop_assert_eq!(w.pick_exact(&cands, &mut a), naive_pick(&weights, &cands, &mut b));
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
