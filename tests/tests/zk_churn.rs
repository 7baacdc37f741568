//! Provider churn against a real ZooKeeper: 50,000 providers registered, then
//! 1,000 registrations and removals in 10 s while routing threads run. Asserts correctness
//! only: every applied state is exactly a state the registry went through, in order, the
//! last one holds every change, and every checked call was routed to a provider the rule
//! allows. The timings (time to the final state, routing p99 idle and during the churn)
//! are printed by `cargo run --release -p routechain-benches --example zk_churn`.

use std::time::Duration;

use routechain_testkit::churn::{self, Churn};
use routechain_testkit::zookeeper::ZooKeeper;

#[test]
fn every_state_applied_during_churn_at_50000_providers_is_one_the_registry_went_through() {
    let zk = ZooKeeper::start("churn");
    let spec = Churn {
        providers: 50_000,
        changes: 1_000,
        over: Duration::from_secs(10),
        routing_threads: 2,
        idle: Duration::from_millis(500),
    };
    let outcome = churn::run(&zk.address(), &spec);
    assert!(
        outcome.other_reports.is_empty(),
        "nothing refused or skipped: {:?}",
        outcome.other_reports
    );
    assert!(!outcome.applied.is_empty());
    assert_eq!(outcome.applied[0].prefix, Some(0), "the initial registry");
    let mut last = 0;
    for a in &outcome.applied {
        let Some(k) = a.prefix else {
            panic!(
                "generation {} ({} providers) is no state the registry went through",
                a.generation, a.providers
            );
        };
        assert!(
            k >= last,
            "generation {} went back to change {k}",
            a.generation
        );
        last = k;
    }
    assert_eq!(
        last, spec.changes,
        "the last applied state holds every change"
    );
    assert_eq!(
        outcome.applied.last().map(|a| a.providers),
        Some(spec.providers),
        "as many registered as removed"
    );
    assert!(outcome.checked_calls > 0, "the routing threads ran");
    assert_eq!(
        outcome.bad_calls, 0,
        "every checked call routed to shanghai providers"
    );
    eprintln!(
        "{} states applied during the churn; settled {:?} after the last change",
        outcome.applied.len(),
        outcome.settle_time(spec.changes)
    );
}
