//! Routing a call through the full chain of real built-in routers (tag → condition → group
//! → IDC-weight, built from chain-file text through the default registry) and picking a
//! provider allocates nothing once the call state's buffers have grown.

use std::sync::Arc;

use routechain::core::{CallState, Chain};
use routechain::testkit;

#[test]
fn full_chain_and_pick_allocate_nothing_per_call() {
    let yaml = testkit::full_chain_yaml();
    let snapshot = Arc::new(testkit::snapshot(10_000, 42));
    let chain = Chain::new(
        testkit::build_state(&yaml, snapshot).unwrap_or_else(|e| panic!("{}", e.render())),
    );
    let requests = testkit::requests(64, 42);
    let mut call = CallState::seeded(7);
    // Grow the buffers.
    chain.load().route(&requests[0], &mut call).ok();
    let mut routed = 0usize;
    let mut failed = 0usize;
    let mut picked = 0usize;
    let info = allocation_counter::measure(|| {
        for i in 0..2_000 {
            let state = chain.load();
            match state.route(&requests[i % requests.len()], &mut call) {
                Ok(()) => {
                    routed += 1;
                    if testkit::pick_uniform(&call.candidates, &mut call.rng).is_some() {
                        picked += 1;
                    }
                }
                Err(e) => {
                    failed += 1;
                    std::hint::black_box(e);
                }
            }
        }
    });
    assert_eq!(info.count_total, 0, "allocations while routing: {info:?}");
    // The loop exercised real routing (and the failures, if any, were NoProvider).
    assert!(routed > 1_500, "routed {routed}, failed {failed}");
    assert_eq!(picked, routed);
}
