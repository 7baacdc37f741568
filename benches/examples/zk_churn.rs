//! Churn figures against a real ZooKeeper (started here): 50,000 providers
//! registered, then 1,000 registrations and removals in 10 s while two routing threads
//! route through the live chain. Prints the registration time, the states applied, the
//! time from the last change to the applied final state, and the routing latency
//! percentiles idle and during the churn. The same churn is asserted correct (not timed) by
//! `tests/tests/zk_churn.rs`.
//!
//! Run: `cargo run --release -p routechain-benches --example zk_churn -- [providers] [changes] [seconds]`.

use std::time::Duration;

use routechain_testkit::churn::{self, Churn, percentile};
use routechain_testkit::zookeeper::ZooKeeper;

fn main() {
    let arg = |i: usize, default: u64| {
        std::env::args()
            .nth(i)
            .and_then(|a| a.parse().ok())
            .unwrap_or(default)
    };
    let spec = Churn {
        providers: arg(1, 50_000) as usize,
        changes: arg(2, 1_000) as usize,
        over: Duration::from_secs(arg(3, 10)),
        routing_threads: 2,
        idle: Duration::from_secs(3),
    };
    let zk = ZooKeeper::start("churn-example");
    let mut o = churn::run(&zk.address(), &spec);
    println!("{spec:?}");
    println!(
        "registered {} providers in {:?}",
        spec.providers, o.register_time
    );
    let consistent = o.applied.iter().filter(|a| a.prefix.is_some()).count();
    println!(
        "{} states applied from the initial one on, {consistent} of them states the registry went through",
        o.applied.len()
    );
    println!(
        "last change -> applied final state: {:?}",
        o.settle_time(spec.changes)
    );
    let (idle_n, churn_n) = (o.idle_ns.len(), o.churn_ns.len());
    for (name, ns, n) in [
        ("idle", &mut o.idle_ns, idle_n),
        ("churn", &mut o.churn_ns, churn_n),
    ] {
        println!(
            "routing {name}: {n} calls, p50 {} ns, p99 {} ns, p99.9 {} ns",
            percentile(ns, 50.0),
            percentile(ns, 99.0),
            percentile(ns, 99.9)
        );
    }
    println!("checked calls {}, wrong {}", o.checked_calls, o.bad_calls);
}
