//! The side-by-side comparison (`examples/tower_vs_balance.rs`) compares equals: every side
//! answers every call from a live provider of the set it should reach, the routechain side
//! obeys the chain (untagged calls only to the eight routed providers, both IDCs of the
//! route table; `gray` calls only to the gray providers), and the load driver counts what
//! the providers served.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::greeter::HelloReply;
use common::greeter::greeter_client::GreeterClient;
use common::versus::{self, GRAY, LAYOUT, Limit, ROUTED};
use common::{Provider, who};

/// Each provider's count of served calls.
fn served(providers: &[Provider]) -> Vec<u64> {
    providers.iter().map(Provider::served).collect()
}

/// What each provider served since `before`.
fn since(providers: &[Provider], before: &[u64]) -> Vec<u64> {
    served(providers)
        .iter()
        .zip(before)
        .map(|(now, then)| now - then)
        .collect()
}

type Reply = Result<tonic::Response<HelloReply>, tonic::Status>;

/// The providers that answered `calls` calls made by `call`, with their counts.
async fn answers<F, Fut>(calls: usize, call: F) -> BTreeMap<String, usize>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Reply>,
{
    let mut seen = BTreeMap::new();
    for _ in 0..calls {
        let reply = call().await.expect("an answer");
        *seen.entry(who(&reply)).or_default() += 1;
    }
    seen
}

fn names(range: std::ops::Range<usize>) -> Vec<&'static str> {
    LAYOUT[range].iter().map(|p| p.0).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_side_answers_from_live_providers_and_the_layer_obeys_the_chain() {
    let providers = versus::start_providers().await;
    let routed = &providers[ROUTED];
    let full_chain = versus::live(versus::FULL_CHAIN, &providers);
    let empty_chain = versus::live(versus::EMPTY_CHAIN, routed);
    let balanced = versus::balanced(routed);
    let full = versus::layered(&full_chain);
    let empty = versus::layered(&empty_chain);
    let calls = 400;

    // The balanced channel: every call answered by one of the eight it was given, each of
    // them reached, and the providers served exactly the calls made.
    let before = served(&providers);
    let seen = answers(calls, || {
        let mut c = balanced.clone();
        async move { c.say_hello(versus::request(None)).await }
    })
    .await;
    assert_eq!(seen.keys().map(String::as_str).collect::<Vec<_>>(), {
        let mut n = names(ROUTED);
        n.sort_unstable();
        n
    });
    let delta = since(&providers, &before);
    assert_eq!(delta.iter().sum::<u64>(), calls as u64);
    assert!(delta[ROUTED.end..].iter().all(|&d| d == 0), "{delta:?}");

    // The layer with the full chain: the same eight providers for the same untagged calls
    // (never a gray, batch or shanghai one), mt and zf about half each.
    let before = served(&providers);
    let seen = answers(calls, || {
        let mut c = full.clone();
        async move { c.say_hello(versus::request(None)).await }
    })
    .await;
    let routed_names = names(ROUTED);
    assert!(
        seen.keys().all(|n| routed_names.contains(&n.as_str())),
        "{seen:?}"
    );
    assert_eq!(
        seen.len(),
        ROUTED.len(),
        "every routed provider answers: {seen:?}"
    );
    let mt: usize = seen
        .iter()
        .filter(|(n, _)| n.starts_with("mt-"))
        .map(|(_, c)| c)
        .sum();
    assert!(
        (calls * 4 / 10..=calls * 6 / 10).contains(&mt),
        "mt took {mt} of {calls}"
    );
    let delta = since(&providers, &before);
    assert_eq!(delta.iter().sum::<u64>(), calls as u64);
    assert!(delta[ROUTED.end..].iter().all(|&d| d == 0), "{delta:?}");

    // Tagged gray: the gray providers only (tag router), whatever the IDC draw.
    let before = served(&providers);
    let seen = answers(100, || {
        let mut c = full.clone();
        async move { c.say_hello(versus::request(Some("gray"))).await }
    })
    .await;
    assert_eq!(
        seen.keys().map(String::as_str).collect::<Vec<_>>(),
        names(GRAY),
        "{seen:?}"
    );
    let delta = since(&providers, &before);
    assert_eq!(delta[GRAY].iter().sum::<u64>(), 100, "{delta:?}");

    // The empty chain, over the eight: each of them, nothing else.
    let before = served(&providers);
    let seen = answers(calls, || {
        let mut c = empty.clone();
        async move { c.say_hello(versus::request(None)).await }
    })
    .await;
    assert_eq!(seen.len(), ROUTED.len(), "{seen:?}");
    assert!(seen.keys().all(|n| routed_names.contains(&n.as_str())));
    let delta = since(&providers, &before);
    assert_eq!(delta[ROUTED].iter().sum::<u64>(), calls as u64);

    // The load driver, by time and by count: every call it counts was served by one of the
    // eight, none failed, each latency kept.
    let limits = [Limit::Time(Duration::from_millis(300)), Limit::Calls(100)];
    for limit in limits {
        for client in [
            Side::Balanced(balanced.clone()),
            Side::Layer(full.clone()),
            Side::Layer(empty.clone()),
        ] {
            let before = served(&providers);
            let run = match client {
                Side::Balanced(c) => {
                    versus::drive(8, limit, move || {
                        let mut c = c.clone();
                        async move { c.say_hello(versus::request(None)).await.is_ok() }
                    })
                    .await
                }
                Side::Layer(c) => {
                    versus::drive(8, limit, move || {
                        let mut c = c.clone();
                        async move { c.say_hello(versus::request(None)).await.is_ok() }
                    })
                    .await
                }
            };
            assert_eq!(run.errors, 0);
            match limit {
                Limit::Time(_) => assert!(run.calls > 0),
                Limit::Calls(n) => assert_eq!(run.calls, n),
            }
            assert_eq!(run.latencies.len() as u64, run.calls);
            assert!(run.quantile(0.5) <= run.quantile(0.99));
            let delta = since(&providers, &before);
            assert_eq!(delta[ROUTED].iter().sum::<u64>(), run.calls);
            assert!(delta[ROUTED.end..].iter().all(|&d| d == 0), "{delta:?}");
        }
    }
}

/// A client of either kind, for the driver's loop.
enum Side {
    Balanced(GreeterClient<tonic::transport::Channel>),
    Layer(GreeterClient<routechain_tower::RouteService<routechain_tower::HttpConnector>>),
}
