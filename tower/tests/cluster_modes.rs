//! The cluster modes (`cluster:` in the chain file, Dubbo's `cluster=`) through the tower
//! layer, on real tonic providers on 127.0.0.1: failfast, failsafe, forking, broadcast.

mod common;

use std::sync::Arc;

use common::greeter::HelloRequest;
use common::greeter::greeter_client::GreeterClient;
use common::{Provider, who};
use routechain::live::LiveChain;
use routechain_tower::{HttpConnector, RoutedTo};

/// A chain of `settings` (round robin, health that never degrades in these tests) over
/// `providers`, and a Greeter client through the layer.
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
             health: {{failure_threshold: 1000, cooldown: 60s}}\nrouters: []\n{settings}\n"
        ),
        providers,
    )
}

fn hello() -> tonic::Request<HelloRequest> {
    common::idempotent_hello()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failfast_makes_one_attempt_where_failover_retries() {
    let busy = Provider::start_with("busy", "", Some(tonic::Code::Unavailable)).await;
    let ok = Provider::start("ok", "").await;
    let (_live, mut failover) = client("cluster: failover", &[&busy, &ok]);
    for _ in 0..10 {
        assert_eq!(who(&failover.say_hello(hello()).await.unwrap()), "ok");
    }
    let (_live, mut failfast) = client("cluster: failfast", &[&busy, &ok]);
    let mut refused = 0;
    for _ in 0..10 {
        match failfast.say_hello(hello()).await {
            Ok(reply) => assert_eq!(who(&reply), "ok"),
            Err(status) => {
                assert_eq!(status.code(), tonic::Code::Unavailable);
                assert_eq!(status.message(), "busy refuses");
                refused += 1;
            }
        }
    }
    assert_eq!(
        refused, 5,
        "round robin: every other call meets busy, and stops there"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failsafe_answers_the_default_reply_when_the_attempt_fails() {
    let gone = Provider::start("gone", "").await;
    let ok = Provider::start("ok", "").await;
    let (_live, mut failsafe) = client("methods:\n  SayHello: {cluster: failsafe}", &[&gone, &ok]);
    gone.kill().await;
    let (mut defaults, mut answers) = (0, 0);
    for _ in 0..10 {
        let reply = failsafe
            .say_hello(hello())
            .await
            .expect("failsafe never fails");
        if reply.get_ref().message.is_empty() {
            let routed = reply.extensions().get::<RoutedTo>().expect("routed");
            assert_eq!(routed.provider.address(), gone.address);
            defaults += 1;
        } else {
            assert_eq!(who(&reply), "ok");
            answers += 1;
        }
    }
    assert_eq!(
        (defaults, answers),
        (5, 5),
        "no failover: the dead one's calls default"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forking_calls_forks_providers_at_once_and_the_first_answer_wins() {
    let a = Provider::start("a", "").await;
    let b = Provider::start("b", "").await;
    let c = Provider::start("c", "").await;
    let (_live, mut forking) = client("cluster: forking\nforks: 2", &[&a, &b, &c]);
    for _ in 0..12 {
        let reply = forking.say_hello(hello()).await.unwrap();
        assert_eq!(reply.extensions().get::<RoutedTo>().unwrap().attempts, 2);
    }
    // Two providers per call (the slower one may be dropped before it answers).
    let served = a.served() + b.served() + c.served();
    assert!((12..=24).contains(&served), "{served}");
    // A dead provider among the forks: the other one answers every call.
    c.kill().await;
    for _ in 0..6 {
        let reply = forking.say_hello(hello()).await.unwrap();
        assert!(["a", "b"].contains(&who(&reply).as_str()));
    }
    // Every fork failing fails the call.
    a.kill().await;
    b.kill().await;
    let status = forking.say_hello(hello()).await.expect_err("all dead");
    assert_eq!(status.code(), tonic::Code::Unavailable);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broadcast_calls_every_provider_and_fails_if_one_fails() {
    let a = Provider::start("a", "").await;
    let b = Provider::start("b", "").await;
    let c = Provider::start("c", "").await;
    let (_live, mut all) = client("cluster: broadcast", &[&a, &b, &c]);
    for _ in 0..4 {
        let reply = all.say_hello(hello()).await.unwrap();
        assert_eq!(reply.extensions().get::<RoutedTo>().unwrap().attempts, 3);
    }
    assert_eq!((a.served(), b.served(), c.served()), (4, 4, 4));
    let busy = Provider::start_with("busy", "", Some(tonic::Code::Unavailable)).await;
    let (_live, mut with_busy) = client("cluster: broadcast", &[&a, &busy, &c]);
    let status = with_busy.say_hello(hello()).await.expect_err("busy failed");
    assert_eq!(status.code(), tonic::Code::Unavailable);
    assert_eq!(
        (a.served(), busy.served(), c.served()),
        (5, 1, 5),
        "all called"
    );
}
