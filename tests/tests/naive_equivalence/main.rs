//! The naive baseline of the benchmarks (`routechain_testkit::naive`) and the real chain
//! return the same providers for the same requests, router by router and for the full chain,
//! so the benchmark compares like with like. Not timed.

use std::collections::BTreeSet;
use std::sync::Arc;

use routechain::core::{CallState, Request, Snapshot};
use routechain_testkit::{self as testkit, naive};

const SEED: u64 = 42;

/// What routechain returns for `request` (an empty set for NoProvider).
fn routed(state: &routechain::core::ChainState, request: &Request, seed: u64) -> BTreeSet<usize> {
    let mut call = CallState::seeded(seed);
    match state.route(request, &mut call) {
        Ok(()) => call.candidates.iter().collect(),
        Err(_) => BTreeSet::new(),
    }
}

fn indexes(v: &[&naive::Provider]) -> BTreeSet<usize> {
    v.iter().map(|p| p.index).collect()
}

struct Fixture {
    snapshot: Arc<Snapshot>,
    providers: Vec<naive::Provider>,
    consumer: std::collections::HashMap<String, String>,
    requests: Vec<Request>,
}

fn fixture(n: usize) -> Fixture {
    let snapshot = Arc::new(testkit::snapshot(n, SEED));
    let providers = naive::from_snapshot(&snapshot);
    let mut requests = testkit::requests(300, SEED);
    // Requests the generated mix has rarely or never: no group, an unknown group, an
    // unknown tag, a forced tag, an empty tag.
    requests.push(Request::new().with_method("search"));
    requests.push(
        Request::new()
            .with_method("get")
            .with_attribute("group", "idx_none"),
    );
    requests.push(
        Request::new()
            .with_method("get")
            .with_attribute("group", "idx_user")
            .with_attachment("dubbo.tag", "nosuchtag"),
    );
    requests.push(
        Request::new()
            .with_method("search")
            .with_attachment("dubbo.tag", "nosuchtag")
            .with_attachment("dubbo.force.tag", "true"),
    );
    requests.push(
        Request::new()
            .with_method("get")
            .with_attachment("dubbo.tag", "canary")
            .with_attribute("group", "idx_order"),
    );
    requests.push(
        Request::new()
            .with_method("update")
            .with_attachment("group", "idx_geo"),
    );
    Fixture {
        snapshot,
        providers,
        consumer: naive::consumer_params(&testkit::consumer()),
        requests,
    }
}

/// Builds the chain through the default registry.
fn state(name: &str, yaml: &str, snapshot: &Arc<Snapshot>) -> routechain::core::ChainState {
    testkit::build_state(yaml, snapshot.clone())
        .unwrap_or_else(|e| panic!("chain {name} does not load:\n{}", e.render()))
}

#[test]
fn each_router_matches_its_naive_version() {
    for n in [100, 1_000] {
        let f = fixture(n);
        let all = || f.providers.iter().collect::<Vec<_>>();
        for (name, yaml) in testkit::CHAINS {
            let state = state(name, &yaml(), &f.snapshot);
            let mut outcomes = BTreeSet::new();
            for (k, request) in f.requests.iter().enumerate() {
                let got = routed(&state, request, k as u64);
                let expected: Vec<BTreeSet<usize>> = match name {
                    "tag" => vec![indexes(&naive::tag(all(), request, &f.consumer))],
                    "condition" => vec![indexes(&naive::condition(all(), request))],
                    "group" => vec![indexes(&naive::group(all(), request))],
                    "idc-weight" => [0, 99]
                        .iter()
                        .map(|&d| indexes(&naive::idc_weight(all(), &f.consumer, d)))
                        .collect(),
                    other => panic!("no naive version of {other}"),
                };
                assert!(
                    expected.contains(&got),
                    "{name} at {n} providers, request {k} {request:?}: routechain {} providers, naive {:?}",
                    got.len(),
                    expected.iter().map(BTreeSet::len).collect::<Vec<_>>()
                );
                outcomes.insert(got);
            }
            assert!(outcomes.len() > 1, "{name}: every request routed alike");
        }
    }
}

#[test]
fn full_chain_matches_the_naive_chain() {
    for n in [100, 1_000, 10_000] {
        let f = fixture(n);
        let state = state("full", &testkit::full_chain_yaml(), &f.snapshot);
        let (mut mt, mut zf, mut empty) = (0, 0, 0);
        for (k, request) in f.requests.iter().enumerate() {
            let got = routed(&state, request, k as u64);
            let to_mt = indexes(&naive::full_chain(&f.providers, request, &f.consumer, 0));
            let to_zf = indexes(&naive::full_chain(&f.providers, request, &f.consumer, 99));
            assert!(
                got == to_mt || got == to_zf,
                "full chain at {n} providers, request {k} {request:?}: routechain {got:?}, \
                 naive (mt) {to_mt:?}, naive (zf) {to_zf:?}"
            );
            if got.is_empty() {
                empty += 1;
            } else if to_mt != to_zf {
                if got == to_mt { mt += 1 } else { zf += 1 }
            }
        }
        // Both beijing IDCs are drawn, and most calls find a provider.
        assert!(mt > 10 && zf > 10, "{n}: mt {mt}, zf {zf}");
        assert!(
            empty < f.requests.len() / 4,
            "{n}: {empty} calls found nothing"
        );
    }
}
