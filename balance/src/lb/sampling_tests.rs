//! The weighted pick's sampling stages draw exactly Dubbo's distribution (chi-square tests
//! with fixed seeds, each stage alone and the whole pick, over several weight mixes and
//! candidate sets), and balancer tables carried through a snapshot edit pick exactly as
//! freshly built ones.

use std::sync::Arc;

use proptest::prelude::*;
use routechain_core::{BitSet, FastRng, RandomSource, Request, Snapshot};

use super::*;

/// A snapshot of providers with the given weights (distinct addresses from `first`).
fn weighted(first: usize, weights: &[u32]) -> Snapshot {
    let text: String = weights
        .iter()
        .enumerate()
        .map(|(i, w)| {
            let a = first + i;
            format!(
                "dubbo://10.{}.{}.{}:20880/svc?weight={w}\n",
                a >> 16 & 255,
                a >> 8 & 255,
                a & 255
            )
        })
        .collect();
    Snapshot::parse_lines(1, &text).unwrap()
}

/// Dubbo's probabilities over `cands`: by weight, uniform when every weight is zero.
fn expected(weights: &[u32], cands: &BitSet) -> Vec<f64> {
    let total: u64 = cands.iter().map(|i| u64::from(weights[i])).sum();
    let count = cands.count() as f64;
    (0..weights.len())
        .map(|i| match (cands.contains(i), total) {
            (false, _) => 0.0,
            (true, 0) => 1.0 / count,
            (true, t) => weights[i] as f64 / t as f64,
        })
        .collect()
}

/// Asserts `counts` (of `draws` draws) fit `probs`: never a zero-probability index, and a
/// Pearson chi-square below the 0.9995 quantile (Wilson–Hilferty) for the degrees of
/// freedom. Deterministic: the draws come from fixed seeds.
fn assert_fits(what: &str, counts: &[usize], probs: &[f64]) {
    let draws: usize = counts.iter().sum();
    let mut stat = 0.0;
    let mut cells = 0usize;
    for (i, (&c, &p)) in counts.iter().zip(probs).enumerate() {
        if p == 0.0 {
            assert_eq!(
                c, 0,
                "{what}: index {i} has probability 0 but was drawn {c} times"
            );
            continue;
        }
        let e = p * draws as f64;
        stat += (c as f64 - e).powi(2) / e;
        cells += 1;
    }
    if cells <= 1 {
        return;
    }
    let df = (cells - 1) as f64;
    let z = 3.29;
    let h = 2.0 / (9.0 * df);
    let critical = df * (1.0 - h + z * h.sqrt()).powi(3);
    assert!(
        stat < critical,
        "{what}: chi-square {stat:.1} ≥ {critical:.1} (df {df})"
    );
}

/// The weight mixes: the benchmark's (mostly 100, some 50 and 200), with zero weights,
/// more distinct weights than classes, equal weights.
fn mixes() -> Vec<(&'static str, Vec<u32>)> {
    let n = 300;
    vec![
        (
            "50/100/200",
            (0..n)
                .map(|i| [100, 100, 50, 100, 200, 100, 100, 100][i % 8])
                .collect(),
        ),
        (
            "with zeros",
            (0..n).map(|i| [100, 0, 300, 100, 0, 50][i % 6]).collect(),
        ),
        (
            "varied (no classes)",
            (0..n).map(|i| 100 + (i * 7 % 31) as u32).collect(),
        ),
        ("equal", vec![100; n]),
    ]
}

/// Candidate sets over `n` providers: every provider, a dense half, a sparse few percent,
/// a handful across words, and "degraded excluded" (every tenth left out, as the service
/// removes degraded providers before the pick).
fn sets(n: usize) -> Vec<(&'static str, BitSet)> {
    let mut rng = FastRng::seeded(3);
    vec![
        ("all", BitSet::full(n)),
        ("half", BitSet::from_fn(n, |_| rng.below(2) == 0)),
        ("sparse", BitSet::from_fn(n, |i| i % 29 == 3)),
        ("few", BitSet::from_indexes(n, [5, 70, 140, 299])),
        ("degraded excluded", BitSet::from_fn(n, |i| i % 10 != 0)),
    ]
}

#[test]
fn every_sampling_stage_draws_dubbos_distribution() {
    let draws = 60_000;
    for (mix, w) in mixes() {
        let s = weighted(0, &w);
        let weights = Weights::new(&s);
        assert!(weights.sampling, "{mix}: the mix samples");
        for (set, cands) in sets(w.len()) {
            let probs = expected(&w, &cands);
            let what = format!("{mix}, {set}");
            // Stage 1 alone: its accepted draws.
            let mut rng = FastRng::seeded(11);
            let mut counts = vec![0usize; w.len()];
            let mut accepted = 0;
            for _ in 0..draws * 4 {
                if let Some(i) = weights.sample_all(&cands, 64, &mut rng) {
                    counts[i] += 1;
                    accepted += 1;
                    if accepted == draws {
                        break;
                    }
                }
            }
            assert!(accepted > 0, "{what}: stage 1 never accepted");
            assert_fits(&format!("{what}, over every provider"), &counts, &probs);
            // Stage 2 alone.
            let mut counts = vec![0usize; w.len()];
            for _ in 0..draws {
                if let Some(Some(i)) = weights.sample_candidates(&cands, &mut rng) {
                    counts[i] += 1;
                }
            }
            assert_fits(&format!("{what}, among the candidates"), &counts, &probs);
            // The whole pick (stages and fallback), and the exact pick alone.
            let mut counts = vec![0usize; w.len()];
            let mut exact = vec![0usize; w.len()];
            for _ in 0..draws {
                counts[weights.pick(&cands, &mut rng).unwrap()] += 1;
                exact[weights.pick_exact(&cands, &mut rng).unwrap()] += 1;
            }
            assert_fits(&format!("{what}, pick"), &counts, &probs);
            assert_fits(&format!("{what}, exact pick"), &exact, &probs);
        }
    }
}

#[test]
fn sampling_keeps_dubbos_special_cases() {
    // A single candidate is returned whatever its weight; every weight zero is uniform;
    // an empty set picks nothing.
    let w = [100, 0, 0, 0, 200, 0];
    let s = weighted(0, &w);
    let weights = Weights::new(&s);
    let mut rng = FastRng::seeded(5);
    let one = BitSet::from_indexes(6, [2]);
    for _ in 0..100 {
        assert_eq!(weights.pick(&one, &mut rng), Some(2));
    }
    assert_eq!(weights.pick(&BitSet::empty(6), &mut rng), None);
    let zeros = BitSet::from_indexes(6, [1, 3, 5]);
    let mut counts = vec![0usize; 6];
    for _ in 0..30_000 {
        counts[weights.pick(&zeros, &mut rng).unwrap()] += 1;
    }
    assert_fits(
        "every candidate weighs zero",
        &counts,
        &expected(&w, &zeros),
    );
    // A candidate set longer than the snapshot: positions past it are never drawn by the
    // stages (they weigh zero, as in the exact pick).
    let longer = BitSet::from_indexes(200, [0, 4, 150]);
    for _ in 0..1000 {
        assert!(matches!(weights.pick(&longer, &mut rng), Some(0 | 4)));
    }
}

#[test]
fn skewed_weights_skip_sampling_and_stay_exact() {
    let mut w = vec![1u32; 200];
    w[7] = 100_000;
    let s = weighted(0, &w);
    let weights = Weights::new(&s);
    assert!(!weights.sampling);
    let cands = BitSet::from_fn(200, |i| i % 3 != 2);
    let mut rng = FastRng::seeded(8);
    let mut counts = vec![0usize; 200];
    for _ in 0..50_000 {
        counts[weights.pick(&cands, &mut rng).unwrap()] += 1;
    }
    assert_fits("skewed", &counts, &expected(&w, &cands));
}

/// A configuration using every algorithm, two consistent-hash slots sharing a ring.
fn every_balancer() -> BalanceConfig {
    let ch = |nodes| BalancerSpec {
        hash_nodes: nodes,
        ..BalancerSpec::new(LoadBalanceKind::ConsistentHash)
    };
    BalanceConfig::default()
        .with_method("hash", ch(16))
        .with_method("hash2", ch(16))
        .with_method("hash8", ch(8))
        .with_method("rr", BalancerSpec::new(LoadBalanceKind::RoundRobin))
        .with_method("la", BalancerSpec::new(LoadBalanceKind::LeastActive))
        .with_method("p2c", BalancerSpec::new(LoadBalanceKind::P2c))
}

/// The picks of every slot of `lb` over `sets`, from a fixed seed.
fn picks(lb: &SnapshotBalance, config: &BalanceConfig, sets: &[BitSet]) -> Vec<Option<usize>> {
    let mut rng = FastRng::seeded(21);
    let mut out = Vec::new();
    for slot in 0..config.slots() {
        for (k, cands) in sets.iter().enumerate() {
            for a in 0..6u64 {
                let request =
                    Request::new().with_argument(serde_json::Value::from(a * 31 + k as u64));
                out.push(lb.pick(slot, config.spec(slot), &request, cands, &mut rng));
            }
        }
    }
    out
}

fn ring_points(lb: &SnapshotBalance, slot: usize) -> Option<Vec<(u32, u32)>> {
    match lb.slot(slot)? {
        SlotBalancer::ConsistentHash(c) => Some(c.ring().points().to_vec()),
        _ => None,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn edited_tables_pick_exactly_as_fresh_ones(
        old in proptest::collection::vec(proptest::sample::select(vec![0u32, 50, 100, 100, 100, 200, 7, 9, 11, 13, 17, 19, 23]), 0..180),
        removed in proptest::collection::vec(0u32..200, 0..40),
        added in proptest::collection::vec(proptest::sample::select(vec![0u32, 50, 100, 200, 300, 1000, 29]), 0..40),
        density in 1u64..8,
        same_config in proptest::bool::ANY,
    ) {
        let config = every_balancer();
        let before = weighted(0, &old);
        let fresh_added = weighted(100_000, &added);
        let (after, edit) = before.edited(2, removed, fresh_added.providers().to_vec());
        let start = if same_config { config.clone() } else { BalanceConfig::default().with_method("hash", BalancerSpec { hash_nodes: 8, ..BalancerSpec::new(LoadBalanceKind::ConsistentHash) }) };
        let old_lb = SnapshotBalance::new(&before, &start);
        let edited = old_lb.edited(&edit, &after, &config);
        let fresh = SnapshotBalance::new(&after, &config);
        prop_assert_eq!(edited.weights(), fresh.weights());
        for slot in 0..config.slots() {
            prop_assert_eq!(ring_points(&edited, slot), ring_points(&fresh, slot));
        }
        let n = after.len();
        let mut rng = FastRng::seeded(density);
        let sets: Vec<BitSet> = vec![
            BitSet::full(n),
            BitSet::from_fn(n, |_| rng.below(8) < density),
            BitSet::from_fn(n, |_| rng.below(40) == 0),
        ];
        prop_assert_eq!(picks(&edited, &config, &sets), picks(&fresh, &config, &sets));
        // Slots sharing a ring still share it.
        if let (Some(SlotBalancer::ConsistentHash(a)), Some(SlotBalancer::ConsistentHash(b))) =
            (edited.slot(config.slot(Some("hash"))), edited.slot(config.slot(Some("hash2"))))
        {
            prop_assert!(Arc::ptr_eq(a.ring(), b.ring()));
        }
    }
}
