//! The call-path counters (`routechain_core::ChainMetrics`) as a `Cluster` and its chain
//! count them: calls, failovers, no provider and fallbacks per router, router failures; and
//! that counting allocates nothing.

use std::sync::Arc;

use routechain_balance::*;
use routechain_core::*;

/// A chain of two routers over `n` providers: `pick` keeps the providers whose index is the
/// request's `keep` attribute modulo 10 (empties the set when it is `none`, notes a
/// fallback when it is `fallback`, a failure when it is `fail`), then `pass` keeps all.
fn chain(n: usize, metrics: Option<Arc<ChainMetrics>>) -> ChainState {
    let text: String = (0..n)
        .map(|i| format!("dubbo://10.0.{}.{}:20880/svc\n", i / 250, i % 250))
        .collect();
    let snapshot = Arc::new(Snapshot::parse_lines(1, &text).unwrap());
    let pick: Arc<dyn Router> = Arc::new(router_fn("pick", |cx, c| {
        match cx.request().attributes.get("keep") {
            Some("none") => c.and_with(|_| 0),
            Some("fallback") => cx.note_fallback(),
            Some("fail") => cx.note_failure(),
            _ => {}
        }
    }));
    let pass: Arc<dyn Router> = Arc::new(router_fn("pass", |_, _| {}));
    ChainState::new(
        None,
        snapshot,
        Url::empty(),
        vec![
            ChainEntry::new("pick", 0, pick),
            ChainEntry::new("plugin", 1, pass),
        ],
    )
    .unwrap()
    .with_metrics(metrics)
}

fn router<'a>(stats: &'a [RouterStats], name: &str) -> &'a RouterStats {
    stats.iter().find(|r| &*r.router == name).unwrap()
}

#[test]
fn every_call_path_counter_counts_what_it_says() {
    let metrics = Arc::new(ChainMetrics::new());
    let service = Cluster::new(chain(20, Some(metrics.clone())), ServiceConfig::default());
    let mut call = Caller::seeded(1);
    let plain = Request::new();
    // Three calls; the third fails over once.
    for _ in 0..2 {
        service.select(&plain, &[], &mut call).unwrap();
    }
    let first = service.select(&plain, &[], &mut call).unwrap();
    service
        .select(&plain, std::slice::from_ref(&first), &mut call)
        .unwrap();
    // A call that the router `pick` empties, one on which it falls back, one it fails.
    let none = Request::new().with_attribute("keep", "none");
    assert!(matches!(
        service.select(&none, &[], &mut call),
        Err(SelectError::NoProvider(NoProvider::EmptiedBy { .. }))
    ));
    service
        .select(
            &Request::new().with_attribute("keep", "fallback"),
            &[],
            &mut call,
        )
        .unwrap();
    service
        .select(
            &Request::new().with_attribute("keep", "fail"),
            &[],
            &mut call,
        )
        .unwrap();
    assert_eq!(metrics.calls(), 6);
    assert_eq!(metrics.failovers(), 1);
    let stats = metrics.routers();
    let pick = router(&stats, "pick");
    assert_eq!((pick.no_provider, pick.fallback, pick.failures), (1, 1, 1));
    assert_eq!(&*pick.kind, "pick");
    let pass = router(&stats, "pass");
    assert_eq!((pass.no_provider, pass.fallback, pass.failures), (0, 0, 0));
    assert_eq!(&*pass.kind, "plugin");
    // Route-only callers count routing decisions (not calls: those are the service's).
    service.load().state().route(&none, &mut call).unwrap_err();
    assert_eq!(router(&metrics.routers(), "pick").no_provider, 2);
    assert_eq!(metrics.calls(), 6);
    // An empty provider list counts under no router.
    service
        .apply(Change::providers(Arc::new(Snapshot::new(2, vec![]))))
        .unwrap();
    assert!(service.select(&plain, &[], &mut call).is_err());
    assert_eq!(metrics.empty_list(), 1);
    // The metrics followed the update, and one that prepares every router again.
    assert!(Arc::ptr_eq(service.state().metrics().unwrap(), &metrics));
    service
        .apply(ClusterChange {
            service: Some(Some("svc".into())),
            consumer: Some(Url::parse("consumer://10.9.9.9/svc").unwrap()),
            ..ClusterChange::default()
        })
        .unwrap();
    assert!(Arc::ptr_eq(service.state().metrics().unwrap(), &metrics));
    assert_eq!(metrics.calls(), 7);
}

#[test]
fn breaker_trips_are_counted_by_the_service() {
    let clock = Arc::new(ManualClock::new());
    let metrics = Arc::new(ChainMetrics::new());
    let service = Cluster::with_clock(
        chain(2, Some(metrics)),
        ServiceConfig::default(),
        clock.clone(),
    );
    let mut call = Caller::seeded(1);
    service.degrade(0);
    service.degrade(1);
    for _ in 0..3 {
        assert!(matches!(
            service.select(&Request::new(), &[], &mut call),
            Err(SelectError::ServiceUnavailable { .. })
        ));
    }
    assert_eq!(service.stats().breaker_trips, 1);
    assert_eq!(service.stats().rejected, 3);
    assert_eq!(service.state().degraded().count(), 2);
}

#[test]
fn counting_allocates_nothing() {
    counting_allocates_nothing_with(ChainMetrics::new());
    // Picks per provider too (the option).
    counting_allocates_nothing_with(ChainMetrics::with_provider_picks());
}

fn counting_allocates_nothing_with(metrics: ChainMetrics) {
    let metrics = Arc::new(metrics);
    let service = Cluster::new(chain(300, Some(metrics.clone())), ServiceConfig::default());
    let requests = [
        Request::new(),
        Request::new().with_attribute("keep", "fallback"),
        Request::new().with_attribute("keep", "fail"),
        Request::new().with_attribute("keep", "none"),
    ];
    let mut call = Caller::seeded(9);
    let first = service.select(&requests[0], &[], &mut call).unwrap();
    let info = allocation_counter::measure(|| {
        for _ in 0..250 {
            for r in &requests {
                if let Ok(s) = service.select(r, &[], &mut call) {
                    service
                        .select(r, std::slice::from_ref(&s), &mut call)
                        .unwrap();
                }
            }
            let _ = &first;
        }
    });
    assert_eq!(info.count_total, 0, "{info:?}");
    assert_eq!(metrics.calls(), 1001);
    assert_eq!(metrics.failovers(), 750);
    assert_eq!(router(&metrics.routers(), "pick").no_provider, 250);
    if metrics.counts_provider_picks() {
        let picks: u64 = metrics.provider_picks().iter().map(|(_, n)| n).sum();
        assert_eq!(picks, 1 + 750 * 2, "every successful select picked one");
    }
    // A thread that counts for the first time (its shard is assigned then) allocates
    // nothing either.
    let info = std::thread::scope(|s| {
        s.spawn(|| allocation_counter::measure(|| metrics.count_call()))
            .join()
            .unwrap()
    });
    assert_eq!(info.count_total, 0, "{info:?}");
}
