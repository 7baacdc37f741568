//! Cluster: select with exclusion (failover), health tracking, cool-down and probation,
//! the service breaker, `skip_degraded`, and health carried over a snapshot change.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use routechain_balance::*;
use routechain_core::*;

fn providers(n: usize) -> String {
    (0..n)
        .map(|i| format!("dubbo://10.0.0.{}:20880/svc?zone={}\n", i + 1, i % 2))
        .collect()
}

fn service(
    n: usize,
    config: ServiceConfig,
    entries: Vec<ChainEntry>,
) -> (Cluster, Arc<ManualClock>) {
    let snapshot = Arc::new(Snapshot::parse_lines(1, &providers(n)).unwrap());
    let state = ChainState::new(None, snapshot, Url::empty(), entries).unwrap();
    let clock = Arc::new(ManualClock::new());
    let svc = Cluster::with_clock(state, config, clock.clone());
    (svc, clock)
}

fn health(threshold: u32, secs: u64) -> HealthConfig {
    HealthConfig {
        failure_threshold: threshold,
        cooldown: Duration::from_secs(secs),
        ..HealthConfig::default()
    }
}

/// A router that keeps providers whose `zone` equals the request's `zone` attribute.
fn zone_router() -> ChainEntry {
    ChainEntry::new(
        "zone",
        0,
        Arc::new(router_fn("zone", |cx, c| {
            if let Some(z) = cx.request().attributes.get("zone") {
                let s = cx.snapshot();
                for i in 0..s.len() {
                    if s.providers()[i].get("zone") != Some(z) {
                        c.remove(i);
                    }
                }
            }
        })),
    )
}

/// Runs [`Cluster::call`] with a synchronous attempt to completion on this thread (no
/// runtime: the attempts are ready futures and no timer is armed).
fn call_now<T: Default, E>(
    svc: &Cluster,
    request: &Request,
    mut attempt: impl FnMut(&Selected) -> Result<T, CallError<E>>,
) -> Result<Invoked<T>, InvokeError<E>> {
    let fut = std::pin::pin!(svc.call(request, |s| std::future::ready(attempt(&s))));
    match fut.poll(&mut std::task::Context::from_waker(std::task::Waker::noop())) {
        std::task::Poll::Ready(result) => result,
        std::task::Poll::Pending => panic!("a call of ready attempts completes at once"),
    }
}

#[test]
fn select_excludes_tried_providers_until_the_routed_set_is_exhausted() {
    let (svc, _) = service(6, ServiceConfig::default(), vec![zone_router()]);
    let req = Request::new().with_attribute("zone", "1");
    let mut call = Caller::seeded(1);
    let mut tried = Vec::new();
    for _ in 0..3 {
        let s = svc.select(&req, &tried, &mut call).unwrap();
        assert_eq!(s.provider().get("zone"), Some("1"));
        assert!(tried.iter().all(|t: &Selected| t.index() != s.index()));
        tried.push(s);
    }
    let mut seen: Vec<usize> = tried.iter().map(Selected::index).collect();
    seen.sort();
    assert_eq!(seen, [1, 3, 5]);
    assert_eq!(
        svc.select(&req, &tried, &mut call).unwrap_err(),
        SelectError::Exhausted { tried: 3 }
    );
}

#[test]
fn call_fails_over_with_two_retries_by_default() {
    let (svc, _) = service(4, ServiceConfig::default(), vec![]);
    let req = Request::new();
    // Every provider fails: 1 + 2 retries = 3 distinct providers tried.
    let mut seen = Vec::new();
    let err = call_now(&svc, &req, |s| -> Result<(), CallError<&str>> {
        seen.push(s.index());
        Err(CallError::Retryable("down"))
    })
    .unwrap_err();
    assert!(
        matches!(
            err,
            InvokeError::Failed {
                attempts: 3,
                stopped: None,
                ..
            }
        ),
        "{err:?}"
    );
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 3);
    // The first attempt fails, the retry succeeds on another provider.
    let mut first = None;
    let ok = call_now(&svc, &req, |s| {
        if first.is_none() {
            first = Some(s.index());
            Err(CallError::Retryable("down"))
        } else {
            Ok(s.index())
        }
    })
    .unwrap();
    assert_eq!(ok.attempts, 2);
    assert_ne!(Some(ok.value), first);
}

#[test]
fn consecutive_failures_degrade_then_cooldown_then_probation() {
    let config = ServiceConfig {
        health: health(3, 30),
        ..ServiceConfig::default()
    };
    let (svc, clock) = service(2, config, vec![]);
    svc.report_failure(0);
    svc.report_failure(0);
    svc.report_success(0);
    svc.report_failure(0);
    svc.report_failure(0);
    assert!(!svc.is_degraded(0), "a success resets the count");
    svc.report_failure("10.0.0.1:20880");
    assert!(svc.is_degraded(0));
    assert!(
        svc.state().degraded().contains(0),
        "the chain state's set is marked"
    );
    assert_eq!(svc.stats().degradations, 1);
    clock.advance(Duration::from_secs(29));
    let mut call = Caller::seeded(1);
    svc.select(&Request::new(), &[], &mut call).unwrap();
    assert!(svc.is_degraded(0));
    clock.advance(Duration::from_secs(1));
    svc.select(&Request::new(), &[], &mut call).unwrap();
    assert!(!svc.is_degraded(0), "cool-down over");
    assert!(svc.health(0).probation);
    // Half-open: one failure degrades again at once, for two cool-downs (the second
    // ejection).
    svc.report_failure(0);
    assert!(svc.is_degraded(0));
    clock.advance(Duration::from_secs(30));
    svc.select(&Request::new(), &[], &mut call).unwrap();
    assert!(svc.is_degraded(0));
    clock.advance(Duration::from_secs(30));
    svc.select(&Request::new(), &[], &mut call).unwrap();
    svc.report_success(0);
    assert_eq!(
        svc.health(0),
        ProviderHealth {
            ejections: 2,
            ..ProviderHealth::default()
        }
    );
    assert_eq!(svc.stats().recoveries, 1);
    // Healthy again: it takes the full threshold to degrade it.
    svc.report_failure(0);
    svc.report_failure(0);
    assert!(!svc.is_degraded(0));
}

#[test]
fn skip_degraded_drops_degraded_providers_from_every_routed_set() {
    for skip in [false, true] {
        let config = ServiceConfig {
            skip_degraded: skip,
            health: health(1, 30),
            ..ServiceConfig::default()
        };
        let (svc, _) = service(3, config, vec![]);
        svc.report_failure(1);
        let mut call = Caller::seeded(5);
        let mut hits = [0; 3];
        for _ in 0..3000 {
            hits[svc.select(&Request::new(), &[], &mut call).unwrap().index()] += 1;
        }
        assert_eq!(hits[1] == 0, skip, "skip_degraded={skip}: {hits:?}");
    }
}

#[test]
fn routers_see_the_degraded_set_without_a_rebuild() {
    // A router that drops degraded providers, as the IDC-weight router's filter does.
    let filter = ChainEntry::new(
        "healthy",
        0,
        Arc::new(router_fn("healthy", |cx, c| {
            let d = cx.degraded();
            c.and_with(|w| !d.word(w));
        })),
    );
    let config = ServiceConfig {
        health: health(1, 30),
        ..ServiceConfig::default()
    };
    let (svc, _) = service(2, config, vec![filter]);
    let generation = svc.state().generation();
    svc.report_failure(0);
    let mut call = Caller::seeded(2);
    for _ in 0..100 {
        assert_eq!(
            svc.select(&Request::new(), &[], &mut call).unwrap().index(),
            1
        );
    }
    assert_eq!(svc.state().generation(), generation, "no rebuild");
}

#[test]
fn breaker_opens_when_every_routed_provider_is_degraded_and_closes_after_cooldown() {
    let config = ServiceConfig {
        health: health(2, 10),
        ..ServiceConfig::default()
    };
    let (svc, clock) = service(4, config, vec![zone_router()]);
    let zone1 = Request::new().with_attribute("zone", "1");
    let zone0 = Request::new().with_attribute("zone", "0");
    for i in [1, 3] {
        svc.report_failure(i);
        svc.report_failure(i);
    }
    let mut call = Caller::seeded(1);
    clock.advance(Duration::from_secs(4));
    match svc.select(&zone1, &[], &mut call) {
        Err(SelectError::ServiceUnavailable {
            providers,
            retry_after,
        }) => {
            assert_eq!(providers, 2);
            assert_eq!(retry_after, Duration::from_secs(6));
        }
        other => panic!("{other:?}"),
    }
    assert!(svc.select(&zone1, &[], &mut call).is_err());
    // Another routed set is unaffected.
    assert_eq!(svc.select(&zone0, &[], &mut call).unwrap().index() % 2, 0);
    assert!(svc.select(&zone1, &[], &mut call).is_err());
    assert_eq!(svc.stats().breaker_trips, 1, "one health change, one trip");
    assert_eq!(svc.stats().rejected, 3);
    clock.advance(Duration::from_secs(6));
    let s = svc.select(&zone1, &[], &mut call).unwrap();
    assert_eq!(s.index() % 2, 1);
    assert_eq!(svc.stats().rejected, 3);
    // Both fail again on probation: a new trip.
    svc.report_failure(1);
    svc.report_failure(3);
    assert!(svc.select(&zone1, &[], &mut call).is_err());
    assert_eq!(svc.stats().breaker_trips, 2);
}

#[test]
fn a_retry_reuses_the_routed_set_of_the_first_attempt() {
    // A router that keeps one provider drawn at random per call.
    let one = ChainEntry::new(
        "one",
        0,
        Arc::new(router_fn("one", |cx, c| {
            let keep = cx.rng().below(4) as usize;
            c.and_with(|w| if w == 0 { 1 << keep } else { 0 });
        })),
    );
    let (svc, _) = service(4, ServiceConfig::default(), vec![one]);
    let mut call = Caller::seeded(7);
    for _ in 0..50 {
        let first = svc.select(&Request::new(), &[], &mut call).unwrap();
        // Not a new draw: the routed set was {first}, minus first = nothing.
        assert_eq!(
            svc.select(&Request::new(), std::slice::from_ref(&first), &mut call)
                .unwrap_err(),
            SelectError::Exhausted { tried: 1 }
        );
    }
}

#[test]
fn health_is_carried_over_by_address_when_the_snapshot_changes() {
    let config = ServiceConfig {
        health: health(1, 30),
        ..ServiceConfig::default()
    };
    let (svc, _) = service(3, config, vec![]);
    svc.report_failure("10.0.0.2:20880");
    let mut call = Caller::seeded(1);
    let before = svc.select(&Request::new(), &[], &mut call).unwrap();
    // New list: 10.0.0.2 moved to index 0, a new provider appended.
    let text =
        "dubbo://10.0.0.2:20880/svc\ndubbo://10.0.0.1:20880/svc\ndubbo://10.0.0.9:20880/svc\n";
    svc.apply(Change::providers(Arc::new(
        Snapshot::parse_lines(2, text).unwrap(),
    )))
    .unwrap();
    let state = svc.state();
    assert!(state.degraded().contains(0), "marked before the swap");
    assert!(!state.degraded().contains(1));
    assert!(svc.health(0).degraded_until > 0);
    // And again, with new settings in the same change.
    let text = "dubbo://10.0.0.9:20880/svc\ndubbo://10.0.0.2:20880/svc\n";
    let snap = Arc::new(Snapshot::parse_lines(3, text).unwrap());
    svc.apply(ClusterChange {
        config: Some(ServiceConfig {
            health: health(2, 30),
            ..ServiceConfig::default()
        }),
        ..Change::providers(snap)
    })
    .unwrap();
    let s = svc.select(&Request::new(), &[], &mut call).unwrap();
    assert!(svc.state().degraded().contains(1));
    assert!(!svc.state().degraded().contains(0));
    let _ = s;
    // A report naming a Selected of an old snapshot lands by address.
    assert_eq!(before.generation(), 1);
    svc.report_success(&before);
}

#[test]
fn update_swaps_the_state_and_the_configuration_together() {
    let config = ServiceConfig {
        health: health(1, 30),
        ..ServiceConfig::default()
    };
    let (svc, _) = service(3, config, vec![]);
    svc.report_failure("10.0.0.2:20880");
    let rr = ServiceConfig {
        balance: BalanceConfig::new(BalancerSpec::new(LoadBalanceKind::RoundRobin)),
        skip_degraded: true,
        retries: Some(0),
        health: health(1, 30),
        ..ServiceConfig::default()
    };
    // New list (10.0.0.2 moved to index 0) and new settings in one swap.
    let text = "dubbo://10.0.0.2:20880/svc\ndubbo://10.0.0.1:20880/svc\n\
                dubbo://10.0.0.3:20880/svc\ndubbo://10.0.0.4:20880/svc\n";
    let snap = Arc::new(Snapshot::parse_lines(2, text).unwrap());
    let generation = svc
        .apply(ClusterChange {
            config: Some(rr.clone()),
            ..Change::providers(snap)
        })
        .unwrap()
        .generation();
    assert_eq!(svc.state().generation(), generation);
    assert_eq!(*svc.config(), rr);
    // The degraded provider is marked in the new state before any call.
    assert!(svc.state().degraded().contains(0));
    // Round robin over the healthy providers (skip_degraded), in Dubbo's exact order.
    let mut call = Caller::seeded(1);
    let seq: Vec<usize> = (0..6)
        .map(|_| svc.select(&Request::new(), &[], &mut call).unwrap().index())
        .collect();
    assert_eq!(seq, [1, 2, 3, 1, 2, 3]);
    // `retries: 0`: one attempt only.
    let failed = call_now(&svc, &Request::new(), |_| {
        Err::<(), _>(CallError::Retryable("down"))
    });
    assert!(
        matches!(failed, Err(InvokeError::Failed { attempts: 1, .. })),
        "{failed:?}"
    );
    // A failing update changes neither the state nor the configuration.
    let refused = svc.apply(ClusterChange {
        config: Some(ServiceConfig::default()),
        ..Change::entries(vec![ChainEntry::new(
            "failing",
            0,
            Arc::new(FailingPrepare),
        )])
    });
    assert_eq!(refused.unwrap_err().reason, "refused");
    assert_eq!(svc.state().generation(), generation);
    assert_eq!(*svc.config(), rr);
    // No new settings keeps the configuration.
    svc.apply(Change::entries(svc.state().entries().clone()))
        .unwrap();
    assert_eq!(svc.state().generation(), generation + 1);
    assert_eq!(*svc.config(), rr);
}

#[test]
fn per_method_balancers_apply() {
    let config = ServiceConfig {
        balance: BalanceConfig::default()
            .with_method("get", BalancerSpec::new(LoadBalanceKind::ConsistentHash))
            .with_method("list", BalancerSpec::new(LoadBalanceKind::RoundRobin)),
        ..ServiceConfig::default()
    };
    let (svc, _) = service(5, config, vec![]);
    let mut call = Caller::seeded(1);
    let get = Request::new()
        .with_method("get")
        .with_argument(serde_json::json!("user-7"));
    let first = svc.select(&get, &[], &mut call).unwrap().index();
    for _ in 0..50 {
        assert_eq!(svc.select(&get, &[], &mut call).unwrap().index(), first);
    }
    let list = Request::new().with_method("list");
    let seq: Vec<usize> = (0..10)
        .map(|_| svc.select(&list, &[], &mut call).unwrap().index())
        .collect();
    assert_eq!(seq, [0, 1, 2, 3, 4, 0, 1, 2, 3, 4]);
}

#[test]
fn in_flight_guards_steer_least_active() {
    let config = ServiceConfig {
        balance: BalanceConfig::new(BalancerSpec::new(LoadBalanceKind::LeastActive)),
        ..ServiceConfig::default()
    };
    let (svc, _) = service(2, config, vec![]);
    let mut call = Caller::seeded(1);
    let a = svc.select(&Request::new(), &[], &mut call).unwrap();
    let _busy = a.begin();
    for _ in 0..20 {
        assert_ne!(
            svc.select(&Request::new(), &[], &mut call).unwrap().index(),
            a.index()
        );
    }
}

#[test]
fn a_retry_after_a_health_change_routes_again() {
    // Keeps provider 0 unless it is degraded, then provider 1 (a degraded filter).
    let prefer0 = ChainEntry::new(
        "prefer0",
        0,
        Arc::new(router_fn("prefer0", |cx, c| {
            let keep = if cx.degraded().contains(0) { 1 } else { 0 };
            c.and_with(|w| if w == 0 { 1 << keep } else { 0 });
        })),
    );
    let config = ServiceConfig {
        health: health(1, 30),
        ..ServiceConfig::default()
    };
    let (svc, _) = service(2, config, vec![prefer0]);
    let mut call = Caller::seeded(1);
    let first = svc.select(&Request::new(), &[], &mut call).unwrap();
    assert_eq!(first.index(), 0);
    svc.report_failure(&first); // degrades 0: health changed
    let retry = svc
        .select(&Request::new(), std::slice::from_ref(&first), &mut call)
        .unwrap();
    assert_eq!(retry.index(), 1);
    assert_eq!(svc.stats().breaker_trips, 0);
}

/// A router whose prepare fails.
struct FailingPrepare;

impl Router for FailingPrepare {
    fn name(&self) -> &str {
        "failing"
    }
    fn default_priority(&self) -> i32 {
        0
    }
    fn prepare(&self, cx: &PrepareContext<'_>) -> Result<Arc<dyn PreparedRouter>, PrepareError> {
        Err(PrepareError {
            router: "failing".into(),
            generation: cx.snapshot.generation(),
            reason: "refused".into(),
        })
    }
}
