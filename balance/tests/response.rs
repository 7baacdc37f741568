//! `shortestresponse` and `adaptive` through `Cluster::call` on a manual clock: each
//! attempt's elapsed time reaches the balancer, which then sends the calls to the faster
//! provider; a provider named `loadbalance` in its URL gets the same.

use std::sync::Arc;
use std::time::Duration;

use routechain_balance::lb::LoadBalanceKind;
use routechain_balance::*;
use routechain_core::*;

/// Two providers; `extra` is appended to both URLs.
fn service(config: ServiceConfig, extra: &str) -> (Cluster, Arc<ManualClock>) {
    let providers = format!(
        "dubbo://10.0.0.1:20880/svc?x=1{extra}\n\
         dubbo://10.0.0.2:20880/svc?x=1{extra}\n"
    );
    let snapshot = Arc::new(Snapshot::parse_lines(1, &providers).unwrap());
    let state = ChainState::new(None, snapshot, Url::empty(), vec![]).unwrap();
    let clock = Arc::new(ManualClock::new());
    (Cluster::with_clock(state, config, clock.clone()), clock)
}

fn with_kind(kind: LoadBalanceKind) -> ServiceConfig {
    ServiceConfig {
        balance: BalanceConfig::new(BalancerSpec::new(kind)),
        ..ServiceConfig::default()
    }
}

/// Calls `n` times, each attempt taking 200 µs on provider 0 and 5 ms on provider 1
/// (the manual clock moves by that much); the calls that went to provider 0.
async fn calls_to_fast(svc: &Cluster, clock: &ManualClock, n: usize) -> usize {
    let request = Request::new().with_method("m");
    let mut fast = 0;
    for _ in 0..n {
        let out = svc
            .call(&request, |s: Selected| {
                let d = if s.index() == 0 {
                    Duration::from_micros(200)
                } else {
                    Duration::from_millis(5)
                };
                clock.advance(d);
                async move { Ok::<_, CallError<()>>(s.index()) }
            })
            .await
            .unwrap();
        fast += usize::from(out.value == 0);
    }
    fast
}

#[tokio::test]
async fn shortestresponse_sends_the_calls_to_the_faster_provider() {
    let (svc, clock) = service(with_kind(LoadBalanceKind::ShortestResponse), "");
    let fast = calls_to_fast(&svc, &clock, 1000).await;
    // Once each has answered, the estimates (200 µs against 5 ms, nothing in flight
    // between sequential calls) never tie again.
    assert!(fast >= 998, "{fast}");
    let published = svc.load();
    let shared = published.balance().shared();
    assert_eq!(shared.estimate(0), 200);
    assert_eq!(shared.estimate(1), 5000);
}

#[tokio::test]
async fn shortestresponse_restarts_its_averages_every_thirty_seconds() {
    let (svc, clock) = service(with_kind(LoadBalanceKind::ShortestResponse), "");
    calls_to_fast(&svc, &clock, 10).await;
    assert_ne!(svc.load().balance().shared().estimate(0), 0);
    clock.advance(Duration::from_secs(31));
    // The next pick restarts the window: no answer since, no estimate.
    let mut caller = Caller::seeded(1);
    svc.select(&Request::new(), &[], &mut caller).unwrap();
    let published = svc.load();
    let shared = published.balance().shared();
    assert_eq!((shared.estimate(0), shared.estimate(1)), (0, 0));
}

#[tokio::test]
async fn adaptive_is_fed_by_the_calls_and_named_by_the_providers() {
    // The consumer names no balancer; the providers' URLs say `adaptive`.
    let (svc, clock) = service(ServiceConfig::default(), "&loadbalance=adaptive");
    assert!(svc.load().balance().timed());
    // Dubbo's load favours the provider with the most answers (success ratio × weight
    // in the divisor): the first one picked keeps the calls while the other has been
    // picked within two timeouts (2 s; 100 calls take at most 0.5 s of the clock here).
    let fast = calls_to_fast(&svc, &clock, 100).await;
    assert!(fast <= 1 || fast >= 99, "{fast}");
    let published = svc.load();
    let shared = published.balance().shared();
    let counts: Vec<_> = (0..2)
        .map(|i| shared.responses().get(i).unwrap().counts())
        .collect();
    // Every call was picked by the balancer (two candidates) and answered.
    assert_eq!(counts[0].0 + counts[1].0, 100, "{counts:?}");
    assert_eq!(counts[0].1 + counts[1].1, 100, "{counts:?}");
    assert_eq!(counts[0].2 + counts[1].2, 0, "{counts:?}");
    assert_eq!(shared.responses().timeout(), 1000);
}

#[test]
fn balancers_that_read_no_response_times_keep_none() {
    let (svc, _) = service(with_kind(LoadBalanceKind::P2c), "");
    assert!(!svc.load().balance().timed());
}
