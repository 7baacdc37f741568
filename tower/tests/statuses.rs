//! Failover on gRPC statuses, the breaker, and a plain-HTTP caller: real tonic providers on
//! 127.0.0.1, the provider list given directly (the ZooKeeper tests are in zookeeper.rs).

mod common;

use std::sync::Arc;

use common::greeter::HelloRequest;
use common::greeter::greeter_client::GreeterClient;
use common::{Provider, who};
use routechain::live::{LiveChain, LiveOptions};
use routechain::rules::ChainFile;
use routechain_tower::{HttpConnector, Idempotent, RouteConfig, RouteError, RouteLayer, RoutedTo};
use tower_layer::Layer;
use tower_service::Service as _;

const CHAIN: &str = "
service: helloworld.Greeter
load_balance: roundrobin
retries: 2
health: {failure_threshold: 100, cooldown: 60s}
routers: []
";

fn live(providers: &[&Provider]) -> Arc<LiveChain> {
    let file = ChainFile::parse("statuses.chain.yaml", CHAIN, None).expect("chain parses");
    let urls = providers
        .iter()
        .map(|p| p.url.parse().expect("provider URL"))
        .collect::<Vec<_>>();
    Arc::new(
        LiveChain::with_providers(
            file,
            routechain::registry(),
            LiveOptions::default(),
            routechain::core::Snapshot::new(1, urls),
        )
        .expect("chain builds"),
    )
}

fn hello(idempotent: bool) -> tonic::Request<HelloRequest> {
    let mut r = tonic::Request::new(HelloRequest { name: "x".into() });
    if idempotent {
        r.extensions_mut().insert(Idempotent);
    }
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idempotent_call_fails_over_on_unavailable_and_another_gets_the_status() {
    let busy = Provider::start_with("busy", "", Some(tonic::Code::Unavailable)).await;
    let ok = Provider::start("ok", "").await;
    let live = live(&[&busy, &ok]);
    let channel = RouteLayer::new(live.service().clone()).layer(HttpConnector::new());
    let mut client = GreeterClient::new(channel);

    let (mut answered, mut refused) = (0, 0);
    for _ in 0..20 {
        match client.say_hello(hello(false)).await {
            Ok(reply) => {
                assert_eq!(who(&reply), "ok");
                answered += 1;
            }
            Err(status) => {
                assert_eq!(status.code(), tonic::Code::Unavailable);
                assert_eq!(
                    status.message(),
                    "busy refuses",
                    "the provider's own status"
                );
                refused += 1;
            }
        }
    }
    assert_eq!(
        (answered, refused),
        (10, 10),
        "round robin; no failover without the marker"
    );

    for _ in 0..20 {
        let reply = client.say_hello(hello(true)).await.expect("failed over");
        assert_eq!(who(&reply), "ok");
        let attempts = reply.extensions().get::<RoutedTo>().unwrap().attempts;
        assert!(attempts <= 2, "{attempts}");
    }
    assert!(busy.served() > 10, "idempotent calls tried busy first too");

    // A method configured idempotent needs no marker.
    let config = RouteConfig::default().idempotent_method("SayHello");
    let channel =
        RouteLayer::with_config(live.service().clone(), config).layer(HttpConnector::new());
    let mut client = GreeterClient::new(channel);
    for _ in 0..10 {
        assert_eq!(who(&client.say_hello(hello(false)).await.unwrap()), "ok");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_provider_dead_ends_in_unavailable_then_the_breaker_refuses_at_once() {
    let a = Provider::start("a", "").await;
    let b = Provider::start("b", "").await;
    let file = ChainFile::parse(
        "breaker.chain.yaml",
        // A timeout far above any delay of a loaded machine: every failure below is a
        // transport error of a provider that is gone, never a slow attempt.
        "service: helloworld.Greeter\nretries: 1\ntimeout: 60s\nhealth: {failure_threshold: 1, cooldown: 60s}\nrouters: []\n",
        None,
    )
    .unwrap();
    let urls = [&a, &b]
        .iter()
        .map(|p| p.url.parse().unwrap())
        .collect::<Vec<_>>();
    let live = LiveChain::with_providers(
        file,
        routechain::registry(),
        LiveOptions::default(),
        routechain::core::Snapshot::new(1, urls),
    )
    .unwrap();
    let channel = RouteLayer::new(live.service().clone()).layer(HttpConnector::new());
    let mut client = GreeterClient::new(channel);
    assert!(client.say_hello(hello(false)).await.is_ok());
    // Both gone (listeners and connections closed) before the next call starts.
    a.kill().await;
    b.kill().await;
    let status = client.say_hello(hello(false)).await.expect_err("both dead");
    assert_eq!(status.code(), tonic::Code::Unavailable);
    assert_eq!(status.metadata().get("routechain-error").unwrap(), "failed");
    assert!(
        status.message().starts_with("all 2 attempt(s) failed"),
        "{}",
        status.message()
    );
    assert!(
        !status.message().contains("timed out"),
        "a transport error, not a timeout: {}",
        status.message()
    );
    let status = client.say_hello(hello(false)).await.expect_err("breaker");
    assert_eq!(
        status.metadata().get("routechain-error").unwrap(),
        "breaker"
    );
    assert!(live.service().stats().breaker_trips >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_http_caller_gets_a_route_error() {
    let a = Provider::start("a", "").await;
    let live = live(&[&a]);
    a.kill().await;
    let mut channel = RouteLayer::new(live.service().clone()).layer(HttpConnector::new());
    let request = http::Request::post("/not/grpc")
        .body(http_body_util::Full::new(bytes::Bytes::from_static(b"x")))
        .unwrap();
    type Body = http_body_util::Full<bytes::Bytes>;
    std::future::poll_fn(|cx| {
        tower_service::Service::<http::Request<Body>>::poll_ready(&mut channel, cx)
    })
    .await
    .unwrap();
    match channel.call(request).await {
        Err(RouteError::Failed {
            attempts: 1,
            last,
            stopped: Some(routechain::balance::SelectError::Exhausted { tried: 1 }),
        }) => assert!(last.to_string().starts_with(&a.address), "{last}"),
        other => panic!("expected a transport failure, got {other:?}"),
    }
}
