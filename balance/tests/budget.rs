//! The retry budget through `Cluster::call` on a manual clock: retries stop at the share
//! of the calls plus the reserve, a refused retry ends the call with its own error and is
//! counted, and the budget comes back as the window slides.

use std::sync::Arc;
use std::time::Duration;

use routechain_balance::*;
use routechain_core::*;

fn service(budget: Option<RetryBudget>) -> (Cluster, Arc<ManualClock>) {
    let providers: String = (1..=3)
        .map(|i| format!("dubbo://10.0.0.{i}:20880/svc\n"))
        .collect();
    let snapshot = Arc::new(Snapshot::parse_lines(1, &providers).unwrap());
    let state = ChainState::new(None, snapshot, Url::empty(), vec![]).unwrap();
    let clock = Arc::new(ManualClock::new());
    let config = ServiceConfig {
        retries: Some(2),
        retry_budget: budget,
        health: HealthConfig {
            failure_threshold: u32::MAX,
            ..HealthConfig::default()
        },
        ..ServiceConfig::default()
    };
    (Cluster::with_clock(state, config, clock.clone()), clock)
}

/// One call whose attempts all fail: its attempts and whether the budget refused a retry.
async fn failing_call(svc: &Cluster) -> (u32, bool) {
    match svc
        .call(&Request::new(), |_s: Selected| async {
            Err::<(), _>(CallError::Retryable("down"))
        })
        .await
    {
        Err(InvokeError::Failed { attempts, .. }) => (attempts, false),
        Err(e @ InvokeError::RetryBudgetExhausted { .. }) => {
            assert!(
                e.to_string().starts_with("the retry budget is spent"),
                "{e}"
            );
            let InvokeError::RetryBudgetExhausted { attempts, last } = e else {
                unreachable!()
            };
            assert_eq!(last, CallError::Retryable("down"));
            (attempts, true)
        }
        other => panic!("{other:?}"),
    }
}

async fn succeeding_call(svc: &Cluster) {
    svc.call(&Request::new(), |_s: Selected| async {
        Ok::<_, CallError<()>>(())
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn retries_stop_at_the_budget_and_the_refusal_is_its_own_error() {
    let budget = RetryBudget {
        percent: 20,
        min_per_second: 1,
        ttl: Duration::from_secs(10),
    };
    let (svc, clock) = service(Some(budget));
    // 100 calls that succeed: 20 retries, plus 10 for the reserve.
    for _ in 0..100 {
        succeeding_call(&svc).await;
    }
    // Each failing call counts too (a 20% share each) and wants two retries.
    let mut retries = 0;
    let mut refused = 0;
    for _ in 0..30 {
        let (attempts, was_refused) = failing_call(&svc).await;
        retries += attempts - 1;
        refused += u32::from(was_refused);
    }
    // 130 calls: 26 + 10 = 36 retries in all; as the budget grows by one retry every
    // fifth call, 14 of the failing calls get fewer than their two retries.
    assert_eq!(retries, 36);
    assert_eq!(refused, 14);
    assert_eq!(svc.stats().retries_refused, u64::from(refused));
    let (attempts, was_refused) = failing_call(&svc).await;
    assert_eq!((attempts, was_refused), (1, true));
    // Past the window the reserve is back (no calls counted yet): 10 retries.
    clock.advance(Duration::from_secs(11));
    let mut retries = 0;
    for _ in 0..10 {
        retries += failing_call(&svc).await.0 - 1;
    }
    // 10 calls: 2 + 10 = 12 retries.
    assert_eq!(retries, 12);
}

#[tokio::test]
async fn without_a_budget_every_call_retries_its_retries() {
    let (svc, _) = service(None);
    for _ in 0..200 {
        assert_eq!(failing_call(&svc).await, (3, false));
    }
    assert_eq!(svc.stats().retries_refused, 0);
}
