//! Warm-up through `Cluster::select`: a provider whose `timestamp` is recent weighs what
//! Dubbo's `getWeight` gives it, the weights move with the clock without a new snapshot,
//! and once every warm-up is over the picks use the static weights again.

use std::sync::Arc;
use std::time::Duration;

use routechain_balance::lb::{LoadBalanceKind, WarmTable};
use routechain_balance::*;
use routechain_core::*;

const NOW: i64 = 1_800_000_000_000;

/// `a` started 60 s before `NOW` (10-minute warm-up: weight 10 of 100), `b` long ago.
fn service(kind: LoadBalanceKind, extra_a: &str) -> (Cluster, Arc<ManualClock>) {
    let providers = format!(
        "dubbo://10.0.0.1:20880/svc?timestamp={}{extra_a}\n\
         dubbo://10.0.0.2:20880/svc?timestamp=1700000000000\n",
        NOW - 60_000
    );
    let snapshot = Arc::new(Snapshot::parse_lines(1, &providers).unwrap());
    let state = ChainState::new(None, snapshot, Url::empty(), vec![]).unwrap();
    let clock = Arc::new(ManualClock::at_epoch(NOW));
    let config = ServiceConfig {
        balance: BalanceConfig::new(BalancerSpec::new(kind)),
        ..ServiceConfig::default()
    };
    (Cluster::with_clock(state, config, clock.clone()), clock)
}

/// Picks of provider 0 among `n` selects.
fn picks_of_first(svc: &Cluster, n: usize) -> usize {
    let mut caller = Caller::seeded(11);
    let request = Request::new().with_method("m");
    (0..n)
        .filter(|_| svc.select(&request, &[], &mut caller).unwrap().index() == 0)
        .count()
}

#[test]
fn roundrobin_follows_the_warmup_weight_exactly() {
    let (svc, clock) = service(LoadBalanceKind::RoundRobin, "");
    // Weights 10 and 100: 10 of every 110 picks.
    assert_eq!(picks_of_first(&svc, 1100), 100);
    // Five minutes in: 50 and 100.
    clock.advance(Duration::from_secs(240));
    assert_eq!(picks_of_first(&svc, 1500), 500);
    // Warm: 100 and 100, and the table is over (no clock read any more).
    clock.advance(Duration::from_secs(300));
    assert_eq!(picks_of_first(&svc, 1000), 500);
    assert!(!svc.load().balance().shared().warm().active());
}

#[test]
fn random_draws_in_proportion_to_the_weight_now() {
    let (svc, clock) = service(LoadBalanceKind::Random, "");
    let n = 110_000;
    let share = picks_of_first(&svc, n) as f64 / n as f64;
    assert!((share - 10.0 / 110.0).abs() < 0.005, "{share}");
    clock.advance(Duration::from_secs(240));
    let share = picks_of_first(&svc, n) as f64 / n as f64;
    assert!((share - 50.0 / 150.0).abs() < 0.006, "{share}");
}

#[test]
fn a_provider_own_warmup_and_weight_are_read() {
    // warmup=120000 (2 min), weight=300: 60 s in, 150.
    let (svc, _) = service(LoadBalanceKind::RoundRobin, "&warmup=120000&weight=300");
    assert_eq!(picks_of_first(&svc, 2500), 1500);
}

#[test]
fn warmup_multiplies_a_methods_own_weight() {
    // Service weight 0, `m.weight=300`: 60 s into 10 minutes, 30 for `m` (Dubbo warms the
    // method-level weight); a call of another method never picks it.
    let (svc, _) = service(
        LoadBalanceKind::RoundRobin,
        "&weight=0&methods=m&m.weight=300",
    );
    assert_eq!(picks_of_first(&svc, 1300), 300);
    let mut caller = Caller::seeded(3);
    let other = Request::new().with_method("n");
    for _ in 0..100 {
        assert_eq!(svc.select(&other, &[], &mut caller).unwrap().index(), 1);
    }
}

#[test]
fn a_clock_ahead_of_ours_weighs_one() {
    let providers = format!(
        "dubbo://10.0.0.1:20880/svc?timestamp={}\ndubbo://10.0.0.2:20880/svc\n",
        NOW + 5_000
    );
    let snapshot = Snapshot::parse_lines(1, &providers).unwrap();
    let table = WarmTable::new(&snapshot, NOW);
    assert_eq!(table.at(0, 100, NOW), 1);
    assert_eq!(table.at(1, 100, NOW), 100);
    assert_eq!(
        table.at(0, 100, NOW + 5_000),
        100,
        "uptime 0 keeps the weight (Dubbo)"
    );
}

#[test]
fn warmup_is_carried_by_an_edit() {
    let (svc, clock) = service(LoadBalanceKind::RoundRobin, "");
    let old = svc.state().snapshot().clone();
    // A third provider registers at NOW; the edit carries the warming first one.
    let mut next: Vec<Provider> = old.providers().to_vec();
    next.push(
        Url::parse_provider(&format!(
            "dubbo://10.0.0.3:20880/svc?timestamp={NOW}&warmup=600000"
        ))
        .unwrap(),
    );
    clock.advance(Duration::from_secs(60));
    let (snapshot, edit) = old.edit_to(2, &next);
    svc.apply(ClusterChange::edit(Arc::new(snapshot), edit))
        .unwrap();
    let warm: Vec<usize> = svc
        .load()
        .balance()
        .shared()
        .warm()
        .warming()
        .map(|(i, _, _)| i)
        .collect();
    assert_eq!(warm, [0, 2]);
    // 120 s and 60 s in: 20, 100, 10 → 20 of every 130.
    assert_eq!(picks_of_first(&svc, 1300), 200);
}

#[test]
fn picks_while_a_provider_warms_allocate_nothing() {
    for kind in LoadBalanceKind::ALL {
        let (svc, _) = service(kind, "");
        assert!(svc.load().balance().shared().warm().active());
        let mut caller = Caller::seeded(5);
        let request = Request::new().with_method("m");
        for _ in 0..10 {
            svc.select(&request, &[], &mut caller).unwrap();
        }
        let info = allocation_counter::measure(|| {
            for _ in 0..1000 {
                svc.select(&request, &[], &mut caller).unwrap();
            }
        });
        assert_eq!(info.count_total, 0, "{kind}: {info:?}");
    }
}
