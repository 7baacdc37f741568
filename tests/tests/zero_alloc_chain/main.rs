//! Routing a call through the full chain of real built-in routers (tag → condition → group
//! → IDC-weight, built from chain-file text through the default registry) and picking a
//! provider with the real balancer — directly, and through `Cluster::select` — allocates
//! nothing once the call state's buffers have grown.

use std::sync::Arc;

use routechain::balance::Caller;
use routechain::balance::{BalanceConfig, Cluster, ServiceConfig, SnapshotBalance};
use routechain::core::CallState;
use routechain_testkit as testkit;

fn chain() -> (Cluster, Vec<routechain::core::Request>) {
    let yaml = testkit::full_chain_yaml();
    let snapshot = Arc::new(testkit::snapshot(10_000, 42));
    let state = testkit::build_state(&yaml, snapshot).unwrap_or_else(|e| panic!("{}", e.render()));
    (
        Cluster::new(state, ServiceConfig::default()),
        testkit::requests(64, 42),
    )
}

#[test]
fn full_chain_and_balancer_pick_allocate_nothing_per_call() {
    let (service, requests) = chain();
    let config = BalanceConfig::default();
    let balance = SnapshotBalance::new(service.state().snapshot(), &config);
    let spec = config.spec(0);
    let mut call = CallState::seeded(7);
    // Grow the buffers.
    service.state().route(&requests[0], &mut call).ok();
    let mut routed = 0usize;
    let mut picked = 0usize;
    let info = allocation_counter::measure(|| {
        for i in 0..2_000 {
            let request = &requests[i % requests.len()];
            let published = service.load();
            if published.state().route(request, &mut call).is_ok() {
                routed += 1;
                if let Some(p) = balance.pick(0, spec, request, &call.candidates, &mut call.rng) {
                    assert!(call.candidates.contains(p));
                    picked += 1;
                }
            }
        }
    });
    assert_eq!(info.count_total, 0, "allocations while routing: {info:?}");
    // The loop exercised real routing (the failures are NoProvider for empty groups).
    assert!(routed > 1_500, "routed {routed} of 2,000");
    assert_eq!(picked, routed);
}

#[test]
fn service_select_allocates_nothing_per_call() {
    let (service, requests) = chain();
    let mut call = Caller::seeded(7);
    service.select(&requests[0], &[], &mut call).ok(); // grows the buffers
    let mut selected = 0usize;
    let info = allocation_counter::measure(|| {
        for i in 0..2_000 {
            if let Ok(s) = service.select(&requests[i % requests.len()], &[], &mut call) {
                std::hint::black_box(s.index());
                selected += 1;
            }
        }
    });
    assert_eq!(info.count_total, 0, "allocations while selecting: {info:?}");
    assert!(selected > 1_500, "selected {selected} of 2,000");
}
