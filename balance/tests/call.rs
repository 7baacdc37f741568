//! `Cluster::call`: Dubbo's failover in async code — retries on another provider, a
//! timeout per attempt, exclusion of tried providers, in-flight guards that survive
//! cancellation, health reports and the breaker.

use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use routechain_balance::*;
use routechain_core::*;

fn service(n: usize, config: ServiceConfig) -> Arc<Cluster> {
    let text: String = (0..n)
        .map(|i| format!("dubbo://10.0.0.{}:20880/svc\n", i + 1))
        .collect();
    let snapshot = Arc::new(Snapshot::parse_lines(1, &text).unwrap());
    let state = ChainState::new(None, snapshot, Url::empty(), vec![]).unwrap();
    Arc::new(Cluster::with_clock(
        state,
        config,
        Arc::new(ManualClock::new()),
    ))
}

fn health(threshold: u32) -> HealthConfig {
    HealthConfig {
        failure_threshold: threshold,
        cooldown: Duration::from_secs(30),
        ..HealthConfig::default()
    }
}

#[tokio::test]
async fn a_failed_attempt_is_retried_on_another_provider() {
    let svc = service(4, ServiceConfig::default());
    let seen = Mutex::new(Vec::new());
    let reply = svc
        .call(&Request::new(), |target| {
            let first = {
                let mut seen = seen.lock().unwrap();
                seen.push(target.index());
                seen.len() == 1
            };
            async move {
                if first {
                    Err(CallError::Retryable("connection refused"))
                } else {
                    Ok(target.address().to_string())
                }
            }
        })
        .await
        .unwrap();
    let seen = seen.into_inner().unwrap();
    assert_eq!(reply.attempts, 2);
    assert_eq!(seen.len(), 2);
    assert_ne!(seen[0], seen[1], "the retry goes to another provider");
    assert_eq!(reply.provider.index(), seen[1]);
    assert_eq!(reply.value, reply.provider.address());
    // Health learned both outcomes.
    assert_eq!(svc.health(seen[0]).failures, 1);
    assert_eq!(svc.health(seen[1]).failures, 0);
}

#[tokio::test]
async fn tried_providers_are_excluded_until_none_is_left() {
    let config = ServiceConfig {
        retries: Some(9),
        ..ServiceConfig::default()
    };
    let svc = service(4, config);
    let seen = Mutex::new(Vec::new());
    let err = svc
        .call(&Request::new(), |target| {
            seen.lock().unwrap().push(target.index());
            async { Err::<(), _>(CallError::Retryable("down")) }
        })
        .await
        .unwrap_err();
    match err {
        InvokeError::Failed {
            last: CallError::Retryable("down"),
            attempts: 4,
            stopped: Some(SelectError::Exhausted { tried: 4 }),
        } => {}
        other => panic!("{other:?}"),
    }
    let mut seen = seen.into_inner().unwrap();
    seen.sort();
    assert_eq!(seen, [0, 1, 2, 3], "each provider tried once");
}

#[tokio::test]
async fn retries_follow_the_configuration_and_the_method() {
    let mut config = ServiceConfig::default();
    config.methods.insert(
        "once".into(),
        MethodCall {
            retries: Some(0),
            ..MethodCall::default()
        },
    );
    let svc = service(5, config);
    let failing = |_: Selected| async { Err::<(), _>(CallError::Retryable("down")) };
    let err = svc.call(&Request::new(), failing).await.unwrap_err();
    assert!(
        matches!(
            err,
            InvokeError::Failed {
                attempts: 3,
                stopped: None,
                ..
            }
        ),
        "2 retries by default: {err:?}"
    );
    let once = Request::new().with_method("once");
    let err = svc.call(&once, failing).await.unwrap_err();
    assert!(
        matches!(err, InvokeError::Failed { attempts: 1, .. }),
        "{err:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn each_attempt_has_its_own_timeout() {
    let mut config = ServiceConfig {
        timeout: Some(Duration::from_millis(100)),
        ..ServiceConfig::default()
    };
    config.methods.insert(
        "report".into(),
        MethodCall {
            timeout: Some(Duration::from_secs(5)),
            ..MethodCall::default()
        },
    );
    let svc = service(3, config);
    // The first attempt hangs; it is dropped after 100 ms and the second one answers.
    let hung = Mutex::new(None);
    let started = tokio::time::Instant::now();
    let reply = svc
        .call(&Request::new(), |target| {
            let hang = {
                let mut hung = hung.lock().unwrap();
                let first = hung.is_none();
                hung.get_or_insert(target.index());
                first
            };
            async move {
                if hang {
                    std::future::pending::<()>().await;
                }
                Ok::<_, CallError<()>>(target.index())
            }
        })
        .await
        .unwrap();
    assert_eq!(reply.attempts, 2);
    assert_eq!(started.elapsed(), Duration::from_millis(100));
    let hung = hung.into_inner().unwrap().unwrap();
    assert_ne!(reply.value, hung);
    assert_eq!(svc.health(hung).failures, 1, "a timeout is a failure");
    assert_eq!(
        svc.in_flight(hung),
        0,
        "the timed-out attempt is not counted"
    );
    // Every attempt times out: the last error says so.
    let err = svc
        .call(&Request::new(), |_| {
            std::future::pending::<Result<(), CallError<()>>>()
        })
        .await
        .unwrap_err();
    assert!(
        matches!(
            err.last(),
            Some(CallError::Timeout(d)) if *d == Duration::from_millis(100)
        ),
        "{err:?}"
    );
    // A method with a longer timeout: a 2 s attempt completes.
    let report = Request::new().with_method("report");
    let reply = svc
        .call(&report, |_| async {
            tokio::time::sleep(Duration::from_secs(2)).await;
            Ok::<_, CallError<()>>("done")
        })
        .await
        .unwrap();
    assert_eq!(reply.attempts, 1);
}

#[tokio::test]
async fn a_cancelled_call_leaves_nothing_in_flight() {
    let config = ServiceConfig {
        balance: BalanceConfig::new(BalancerSpec::new(LoadBalanceKind::LeastActive)),
        timeout: Some(Duration::ZERO),
        ..ServiceConfig::default()
    };
    let svc = service(2, config);
    let (tx, rx) = tokio::sync::oneshot::channel();
    let tx = Mutex::new(Some(tx));
    let task = {
        let svc = svc.clone();
        tokio::spawn(async move {
            svc.call(&Request::new(), |target| {
                if let Some(tx) = tx.lock().unwrap().take() {
                    let _ = tx.send(target.index());
                }
                // Never answers: the call is cancelled from outside.
                std::future::pending::<Result<(), CallError<()>>>()
            })
            .await
        })
    };
    let busy = rx.await.unwrap();
    assert_eq!(svc.in_flight(busy), 1, "counted while the attempt runs");
    // leastactive steers new calls away from the busy provider meanwhile.
    let mut call = Caller::seeded(1);
    for _ in 0..10 {
        let s = svc.select(&Request::new(), &[], &mut call).unwrap();
        assert_ne!(s.index(), busy);
    }
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
    assert_eq!(svc.in_flight(busy), 0, "the dropped future ended the count");
    assert_eq!(
        svc.health(busy).failures,
        0,
        "a cancelled attempt reports nothing"
    );
}

#[tokio::test]
async fn a_final_error_ends_the_call_without_retry_and_health_sees_an_answer() {
    let config = ServiceConfig {
        health: health(1),
        ..ServiceConfig::default()
    };
    let svc = service(3, config);
    let calls = Mutex::new(0);
    let err = svc
        .call(&Request::new(), |_| {
            *calls.lock().unwrap() += 1;
            async { Err::<(), _>(CallError::Final("no such user")) }
        })
        .await
        .unwrap_err();
    assert_eq!(*calls.lock().unwrap(), 1);
    assert!(
        matches!(
            err,
            InvokeError::Failed {
                last: CallError::Final("no such user"),
                attempts: 1,
                stopped: None
            }
        ),
        "{err:?}"
    );
    assert_eq!(svc.stats().degradations, 0);
    assert_eq!(
        err.to_string(),
        "the call failed after 1 attempt(s): no such user"
    );
}

#[tokio::test]
async fn failures_degrade_providers_and_the_breaker_refuses_the_call() {
    let config = ServiceConfig {
        health: health(1),
        ..ServiceConfig::default()
    };
    let svc = service(3, config);
    // Three attempts, three providers, each degraded by its failure.
    let err = svc
        .call(&Request::new(), |_| async {
            Err::<(), _>(CallError::Retryable("down"))
        })
        .await
        .unwrap_err();
    assert!(matches!(err, InvokeError::Failed { attempts: 3, .. }));
    assert_eq!(svc.stats().degradations, 3);
    assert!((0..3).all(|i| svc.is_degraded(i)));
    // Every routed provider is degraded: refused at once, the closure never runs.
    let err = svc
        .call(&Request::new(), |_| async {
            panic!("no attempt when the breaker is open");
            #[allow(unreachable_code)]
            Ok::<(), CallError<()>>(())
        })
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            InvokeError::Select(SelectError::ServiceUnavailable { providers: 3, .. })
        ),
        "{err:?}"
    );
    assert_eq!(svc.stats().breaker_trips, 1);
}

#[test]
fn call_futures_are_send_and_work_on_a_multi_thread_runtime() {
    fn assert_send<T: Send>(t: T) -> T {
        t
    }
    let svc = service(8, ServiceConfig::default());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    let total: u32 = rt.block_on(async {
        let tasks: Vec<_> = (0..200)
            .map(|i| {
                let svc = svc.clone();
                tokio::spawn(assert_send(async move {
                    let request = Request::new().with_attribute("n", i.to_string());
                    svc.call(&request, |target| async move {
                        tokio::task::yield_now().await;
                        if target.index() % 2 == 0 {
                            Err(CallError::Retryable("even providers fail"))
                        } else {
                            Ok(1u32)
                        }
                    })
                    .await
                    .map(|r| r.value)
                    .unwrap_or(0)
                }))
            })
            .collect();
        let mut total = 0;
        for t in tasks {
            total += t.await.unwrap();
        }
        total
    });
    // With 4 of 8 providers failing, a call fails only when its 3 attempts all land on
    // failing providers; most succeed, and nothing stays counted in flight.
    assert!(total > 150, "{total}");
    assert!((0..8).all(|i| svc.in_flight(i) == 0));
}

#[test]
fn outside_a_tokio_runtime_attempts_run_untimed_instead_of_panicking() {
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    let svc = service(3, ServiceConfig::default());
    let request = Request::new();
    let fut = pin!(svc.call(&request, |target| async move {
        Ok::<_, CallError<()>>(target.index())
    }));
    let mut cx = Context::from_waker(Waker::noop());
    match fut.poll(&mut cx) {
        Poll::Ready(Ok(reply)) => assert_eq!(reply.attempts, 1),
        other => panic!("{other:?}"),
    }
}

/// A service over provider URLs written out (`params` per provider).
fn service_of(urls: &[&str], config: ServiceConfig) -> Arc<Cluster> {
    let snapshot = Arc::new(Snapshot::parse_lines(1, &urls.join("\n")).unwrap());
    let state = ChainState::new(None, snapshot, Url::empty(), vec![]).unwrap();
    Arc::new(Cluster::with_clock(
        state,
        config,
        Arc::new(ManualClock::new()),
    ))
}

/// An override layer: a consumer-side rule set these keys on every provider.
#[derive(Debug)]
struct RuleSet(&'static [&'static str]);

impl OverrideKeys for RuleSet {
    fn keys(&self, _: &Provider, each: &mut dyn FnMut(&str)) {
        self.0.iter().for_each(|k| each(k));
    }
}

/// Calls that hang on every provider: how long the call takes is the sum of its attempts'
/// timeouts, and the attempts count its retries.
async fn hanging(svc: &Cluster, request: &Request) -> (Duration, u32) {
    let started = tokio::time::Instant::now();
    let err = svc
        .call(request, |_| {
            std::future::pending::<Result<(), CallError<()>>>()
        })
        .await
        .unwrap_err();
    match err {
        InvokeError::Failed { attempts, .. } => (started.elapsed(), attempts),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn timeout_and_retries_come_from_the_provider_the_rules_and_the_attachments() {
    // Each provider's own timeout; `retries` in a provider URL is never read.
    let svc = service_of(
        &[
            "dubbo://10.0.0.1:1/s?timeout=100&retries=9",
            "dubbo://10.0.0.2:1/s?timeout=300&retries=9",
        ],
        ServiceConfig::default(),
    );
    let (took, attempts) = hanging(&svc, &Request::new()).await;
    assert_eq!(
        (took, attempts),
        (Duration::from_millis(400), 2),
        "one attempt per provider (2 retries, 2 providers), each with its own timeout"
    );
    // An override rule's retries and method timeout (the override layer, which live sets
    // from the rules, names them) count.
    let svc = service_of(
        &[
            "dubbo://10.0.0.1:1/s?timeout=100&get.timeout=50&retries=0",
            "dubbo://10.0.0.2:1/s?timeout=100&get.timeout=50&retries=0",
        ],
        ServiceConfig {
            retries: Some(5),
            timeout: Some(Duration::from_secs(1)),
            overrides: OverrideLayer::new(Arc::new(RuleSet(&["get.timeout", "retries"]))),
            ..ServiceConfig::default()
        },
    );
    let get = Request::new().with_method("get");
    assert_eq!(
        hanging(&svc, &get).await,
        (Duration::from_millis(50), 1),
        "override beats consumer"
    );
    // The consumer's service timeout beats the provider's (unmarked) service timeout.
    assert_eq!(
        hanging(&svc, &Request::new().with_method("put")).await,
        (Duration::from_secs(1), 1)
    );
    // Attachments come first.
    let attached = get
        .clone()
        .with_attachment("timeout", "20")
        .with_attachment("retries", "1");
    assert_eq!(
        hanging(&svc, &attached).await,
        (Duration::from_millis(40), 2)
    );
}

#[tokio::test]
async fn failsafe_returns_the_default_and_failfast_the_error() {
    let mut config = ServiceConfig::default();
    for (m, mode) in [
        ("log", ClusterMode::Failsafe),
        ("pay", ClusterMode::Failfast),
    ] {
        config.methods.insert(
            m.into(),
            MethodCall {
                cluster: Some(mode),
                ..MethodCall::default()
            },
        );
    }
    let svc = service(3, config);
    let failing = |_: Selected| async { Err::<String, _>(CallError::Retryable("down")) };
    let reply = svc
        .call(&Request::new().with_method("log"), failing)
        .await
        .unwrap();
    assert!(reply.swallowed);
    assert_eq!((reply.value.as_str(), reply.attempts), ("", 1));
    let err = svc
        .call(&Request::new().with_method("pay"), failing)
        .await
        .unwrap_err();
    assert!(
        matches!(err, InvokeError::Failed { attempts: 1, .. }),
        "{err:?}"
    );
    // A final error is the provider's answer, even failsafe.
    let err = svc
        .call(&Request::new().with_method("log"), |_| async {
            Err::<String, _>(CallError::Final("invalid"))
        })
        .await
        .unwrap_err();
    assert!(matches!(
        err,
        InvokeError::Failed {
            last: CallError::Final("invalid"),
            ..
        }
    ));
}

/// A new override layer over the same providers (a rule that sets a value the providers
/// already publish: no URL changes) re-ranks their values at once.
#[test]
fn a_new_override_layer_over_the_same_providers_reranks_their_values() {
    let consumer = ServiceConfig {
        timeout: Some(Duration::from_millis(700)),
        ..ServiceConfig::default()
    };
    let svc = service_of(&["dubbo://10.0.0.1:1/s?timeout=300"], consumer.clone());
    let timeout = |svc: &Cluster| {
        let mut caller = Caller::seeded(1);
        let s = svc.select(&Request::new(), &[], &mut caller).unwrap();
        s.timeout(None)
    };
    assert_eq!(timeout(&svc), Some(Duration::from_millis(700)));
    let ruled = ServiceConfig {
        overrides: OverrideLayer::new(Arc::new(RuleSet(&["timeout"]))),
        ..consumer
    };
    svc.apply(ClusterChange {
        config: Some(ruled),
        ..ClusterChange::default()
    })
    .unwrap();
    assert_eq!(timeout(&svc), Some(Duration::from_millis(300)));
}
