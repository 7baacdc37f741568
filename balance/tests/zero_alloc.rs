//! Routing a call allocates nothing once the call state's buffers have grown.

use std::sync::Arc;

use routechain_balance::*;
use routechain_core::*;

#[test]
fn routing_allocates_nothing() {
    let text: String = (0..1000)
        .map(|i| {
            format!(
                "dubbo://10.0.{}.{}:20880/svc?g={}\n",
                i / 250,
                i % 250,
                i % 7
            )
        })
        .collect();
    let snapshot = Arc::new(Snapshot::parse_lines(1, &text).unwrap());
    let keep: Arc<dyn Router> = Arc::new(router_fn("odd", |cx, c| {
        c.and_with(|_| 0xAAAA_AAAA_AAAA_AAAA);
        let _ = cx.rng().below(10);
        cx.explain(format_args!("kept odd indexes"));
    }));
    let chain = arc_swap::ArcSwap::from_pointee(
        ChainState::new(
            None,
            snapshot,
            Url::empty(),
            vec![ChainEntry::new("odd", 0, keep)],
        )
        .unwrap(),
    );
    let request = Request::new().with_method("get").with_attribute("g", "3");
    let mut call = CallState::seeded(9);
    chain.load().route(&request, &mut call).unwrap(); // grows the buffers
    let info = allocation_counter::measure(|| {
        for _ in 0..1000 {
            let state = chain.load();
            state.route(&request, &mut call).unwrap();
        }
    });
    assert_eq!(info.count_total, 0, "{info:?}");
    assert_eq!(call.candidates.count(), 500);
}

#[test]
fn selecting_allocates_nothing_for_any_balancer() {
    // The service's weights, then `get`'s own (`get.weight`, a table of its own).
    for own in ["", "&methods=get&get.weight="] {
        let text: String = (0..300)
            .map(|i| {
                let w = 50 + (i % 3) * 50;
                let own = if own.is_empty() {
                    String::new()
                } else {
                    format!("{own}{}", 300 - w)
                };
                format!(
                    "dubbo://10.0.{}.{}:20880/svc?weight={w}{own}\n",
                    i / 250,
                    i % 250,
                )
            })
            .collect();
        let snapshot = Arc::new(Snapshot::parse_lines(1, &text).unwrap());
        for kind in LoadBalanceKind::ALL {
            let state = ChainState::new(None, snapshot.clone(), Url::empty(), vec![]).unwrap();
            let config = ServiceConfig {
                balance: BalanceConfig::new(BalancerSpec::new(kind)),
                skip_degraded: true,
                ..ServiceConfig::default()
            };
            let service = Cluster::new(state, config);
            let params = service.load().params().clone();
            assert_eq!(
                params.weight_table(params.method(Some("get"))).is_some(),
                !own.is_empty()
            );
            service.report_failure(3);
            let request = Request::new()
                .with_method("get")
                .with_argument(serde_json::json!(42));
            let mut call = Caller::seeded(9);
            let first = service.select(&request, &[], &mut call).unwrap();
            let info = allocation_counter::measure(|| {
                for _ in 0..1000 {
                    let s = service
                        .select(&request, std::slice::from_ref(&first), &mut call)
                        .unwrap();
                    let _guard = s.begin();
                    service.report_success(&s);
                }
            });
            assert_eq!(info.count_total, 0, "{kind} {own}: {info:?}");
        }
    }
}

#[test]
fn calling_allocates_nothing_once_warm() {
    let text: String = (0..300)
        .map(|i| format!("dubbo://10.0.{}.{}:20880/svc\n", i / 250, i % 250))
        .collect();
    let snapshot = Arc::new(Snapshot::parse_lines(1, &text).unwrap());
    let plain = ServiceConfig {
        balance: BalanceConfig::new(BalancerSpec::new(LoadBalanceKind::LeastActive)),
        ..ServiceConfig::default()
    };
    // A latency-aware balancer, ejection by rates and a retry budget: each attempt is
    // timed and counted, still without allocating.
    let counted = ServiceConfig {
        balance: BalanceConfig::new(BalancerSpec::new(LoadBalanceKind::Adaptive)),
        health: HealthConfig {
            failure_percentage: Some(90),
            slow_call: Some(std::time::Duration::from_secs(5)),
            ..HealthConfig::default()
        },
        retry_budget: Some(RetryBudget {
            percent: 100,
            ..RetryBudget::default()
        }),
        ..ServiceConfig::default()
    };
    for config in [plain, counted] {
        calls_allocate_nothing(&snapshot, config);
    }
}

fn calls_allocate_nothing(snapshot: &Arc<Snapshot>, config: ServiceConfig) {
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    let state = ChainState::new(None, snapshot.clone(), Url::empty(), vec![]).unwrap();
    let service = Cluster::new(state, config);
    let request = Request::new().with_method("get");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let _runtime = rt.enter(); // the per-attempt timeout needs the time driver
    // One call: the first attempt fails over, the second answers (polled by hand, so only
    // the call itself is measured, not a runtime's scheduling).
    let one_call = || {
        let mut first = true;
        let fut = pin!(service.call(&request, |target| {
            let fail = std::mem::take(&mut first);
            std::future::ready(if fail {
                Err(CallError::Retryable(()))
            } else {
                Ok(target.index())
            })
        }));
        let mut cx = Context::from_waker(Waker::noop());
        match fut.poll(&mut cx) {
            Poll::Ready(Ok(r)) => assert_eq!(r.attempts, 2),
            other => panic!("{other:?}"),
        }
    };
    one_call(); // grows this thread's cached buffers
    let info = allocation_counter::measure(|| {
        for _ in 0..1000 {
            one_call();
        }
    });
    assert_eq!(info.count_total, 0, "{info:?}");
}
