//! Outlier ejection and the retry budget through the tower layer, on real tonic providers
//! on 127.0.0.1: a provider whose error rate reaches `failure_percentage` is ejected and
//! the calls go to the others; the cap keeps the last provider in; a retry the budget
//! refuses ends the call with its own error.

mod common;

use std::sync::Arc;

use common::greeter::HelloRequest;
use common::greeter::greeter_client::GreeterClient;
use common::{Provider, who};
use routechain::live::LiveChain;
use routechain_tower::HttpConnector;

fn client(
    settings: &str,
    providers: &[&Provider],
) -> (
    Arc<LiveChain>,
    GreeterClient<routechain_tower::RouteService<HttpConnector>>,
) {
    common::layer_client(
        &format!(
            "service: helloworld.Greeter\nload_balance: roundrobin\ntimeout: 60s\n\
             skip_degraded: true\nrouters: []\n{settings}\n"
        ),
        providers,
    )
}

fn hello() -> tonic::Request<HelloRequest> {
    common::idempotent_hello()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_over_the_error_rate_is_ejected_and_the_others_take_the_calls() {
    let busy = Provider::start_with("busy", "", Some(tonic::Code::Unavailable)).await;
    let a = Provider::start("a", "").await;
    let b = Provider::start("b", "").await;
    let (live, mut client) = client(
        "cluster: failfast\n\
         health: {failure_threshold: 1000, cooldown: 60s, min_requests: 4, failure_percentage: 50}",
        &[&busy, &a, &b],
    );
    // Round robin: busy gets every third call and fails it; its fourth failure ejects it.
    let mut failed = 0;
    for _ in 0..12 {
        if client.say_hello(hello()).await.is_err() {
            failed += 1;
        }
    }
    assert_eq!(failed, 4);
    let svc = live.service();
    assert!(svc.is_degraded(0), "busy is ejected");
    assert_eq!(svc.stats().degradations, 1);
    // Out: every call answers, from the two others.
    for _ in 0..20 {
        let reply = client.say_hello(hello()).await.expect("busy is out");
        assert!(["a", "b"].contains(&who(&reply).as_str()));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cap_keeps_providers_in_when_every_one_fails() {
    let x = Provider::start_with("x", "", Some(tonic::Code::Unavailable)).await;
    let y = Provider::start_with("y", "", Some(tonic::Code::Unavailable)).await;
    let z = Provider::start_with("z", "", Some(tonic::Code::Unavailable)).await;
    let w = Provider::start_with("w", "", Some(tonic::Code::Unavailable)).await;
    let (live, mut client) = client(
        "cluster: failfast\nhealth: {failure_threshold: 2, cooldown: 60s, max_ejection_percent: 50}",
        &[&x, &y, &z, &w],
    );
    for _ in 0..40 {
        let status = client.say_hello(hello()).await.unwrap_err();
        // Never the breaker: half the providers stay in.
        assert_eq!(status.code(), tonic::Code::Unavailable);
        assert!(status.message().ends_with("refuses"), "{status:?}");
    }
    let svc = live.service();
    assert_eq!((0..4).filter(|&i| svc.is_degraded(i)).count(), 2);
    assert_eq!(svc.stats().rejected, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_the_budget_refuses_ends_the_call_with_its_own_error() {
    let x = Provider::start_with("x", "", Some(tonic::Code::Unavailable)).await;
    let y = Provider::start_with("y", "", Some(tonic::Code::Unavailable)).await;
    // Half a retry per call, no reserve, over a minute.
    let (live, mut client) = client(
        "retries: 2\nhealth: {failure_threshold: 1000}\n\
         retry_budget: {percent: 50, min_per_second: 0, ttl: 60s}",
        &[&x, &y],
    );
    // The first call earns no whole retry: it stops after its first attempt.
    let status = client.say_hello(hello()).await.unwrap_err();
    assert_eq!(
        status.metadata().get("routechain-error").unwrap(),
        "retry-budget"
    );
    assert!(
        status
            .message()
            .starts_with("the retry budget is spent: no retry after 1 attempt(s)"),
        "{}",
        status.message()
    );
    // The second makes one retry, the budget refuses its second.
    let status = client.say_hello(hello()).await.unwrap_err();
    assert_eq!(
        status.metadata().get("routechain-error").unwrap(),
        "retry-budget"
    );
    assert!(
        status.message().contains("no retry after 2 attempt(s)"),
        "{}",
        status.message()
    );
    assert_eq!(x.served() + y.served(), 3);
    assert_eq!(live.service().stats().retries_refused, 2);
}
