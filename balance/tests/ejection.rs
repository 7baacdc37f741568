//! Outlier ejection through `Cluster::call` and `Cluster::select` on a manual clock: the
//! error rate and the slow-call rate over a window eject a provider (a degraded one, what
//! routers and the breaker read), the cap keeps most of the providers in, and the
//! ejection time grows each time.

use std::sync::Arc;
use std::time::Duration;

use routechain_balance::*;
use routechain_core::*;

fn service(n: usize, health: HealthConfig) -> (Cluster, Arc<ManualClock>) {
    let providers: String = (1..=n)
        .map(|i| format!("dubbo://10.0.0.{i}:20880/svc\n"))
        .collect();
    let snapshot = Arc::new(Snapshot::parse_lines(1, &providers).unwrap());
    let state = ChainState::new(None, snapshot, Url::empty(), vec![]).unwrap();
    let clock = Arc::new(ManualClock::new());
    let config = ServiceConfig {
        health,
        retries: Some(0),
        skip_degraded: true,
        ..ServiceConfig::default()
    };
    (Cluster::with_clock(state, config, clock.clone()), clock)
}

/// One call; provider `bad` fails every `nth` of its attempts (`nth` 1: always; `seen`
/// counts them) and every attempt takes `took(index)` on the clock. The provider called.
async fn call_once(
    svc: &Cluster,
    clock: &ManualClock,
    seen: &mut usize,
    bad: usize,
    nth: usize,
    took: impl Fn(usize) -> Duration,
) -> usize {
    let mut called = usize::MAX;
    let _ = svc
        .call(&Request::new(), |s: Selected| {
            called = s.index();
            clock.advance(took(s.index()));
            let fail = s.index() == bad && {
                *seen += 1;
                *seen % nth == 0
            };
            async move {
                if fail {
                    Err(CallError::Retryable("refused"))
                } else {
                    Ok(())
                }
            }
        })
        .await;
    called
}

#[tokio::test]
async fn an_error_rate_over_the_window_ejects_and_the_ejection_grows() {
    let health = HealthConfig {
        failure_threshold: 1000,
        cooldown: Duration::from_secs(5),
        min_requests: 20,
        failure_percentage: Some(40),
        ..HealthConfig::default()
    };
    let (svc, clock) = service(3, health);
    // Provider 1 fails every other call: 50% ≥ 40% once it has had 20 calls.
    let mut on_bad = 0;
    let mut calls = 0;
    while !svc.is_degraded(1) {
        calls += 1;
        call_once(&svc, &clock, &mut on_bad, 1, 2, |_| {
            Duration::from_millis(1)
        })
        .await;
        assert!(calls < 1000);
    }
    assert_eq!(on_bad, 20, "ejected at its 20th call");
    assert_eq!(svc.stats().degradations, 1);
    // Out: no call reaches it for the first ejection's 5 s.
    for _ in 0..100 {
        assert_ne!(
            call_once(&svc, &clock, &mut 0, 9, 1, |_| Duration::ZERO).await,
            1
        );
    }
    clock.advance(Duration::from_secs(5));
    let mut caller = Caller::seeded(3);
    svc.select(&Request::new(), &[], &mut caller).unwrap();
    assert!(!svc.is_degraded(1));
    assert!(svc.health(1).probation);
    // On probation one failure ejects it again, for 10 s this time.
    svc.report_failure(1usize);
    assert!(svc.is_degraded(1));
    assert_eq!(svc.health(1).ejections, 2);
    let now = svc.clock().now();
    assert_eq!(
        Duration::from_nanos(svc.health(1).degraded_until) - now,
        Duration::from_secs(10)
    );
}

#[tokio::test]
async fn slow_calls_eject_and_the_cap_keeps_the_rest_in() {
    let health = HealthConfig {
        min_requests: 5,
        slow_call: Some(Duration::from_millis(100)),
        slow_call_percentage: 60,
        max_ejection_percent: 50,
        ..HealthConfig::default()
    };
    let (svc, clock) = service(4, health);
    // Every provider is slow: only half of them may be ejected.
    for _ in 0..400 {
        call_once(&svc, &clock, &mut 0, 9, 1, |_| Duration::from_millis(150)).await;
    }
    let ejected = (0..4).filter(|&i| svc.is_degraded(i)).count();
    assert_eq!(ejected, 2);
    // The others still take the calls: no breaker.
    assert_eq!(svc.stats().rejected, 0);
}

#[tokio::test]
async fn fast_calls_and_few_failures_eject_nothing() {
    let health = HealthConfig {
        min_requests: 5,
        failure_percentage: Some(50),
        slow_call: Some(Duration::from_millis(100)),
        ..HealthConfig::default()
    };
    let (svc, clock) = service(3, health);
    // Provider 0 fails one call in three: under 50% at every count.
    let mut seen = 0;
    for _ in 0..300 {
        call_once(&svc, &clock, &mut seen, 0, 3, |_| Duration::from_millis(99)).await;
    }
    assert!(seen > 50);
    assert!((0..3).all(|i| !svc.is_degraded(i)));
    assert_eq!(svc.stats().degradations, 0);
}
