//! Churn figures from ZooKeeper and Nacos side by side (both started here, on the same
//! machine): `providers` registered, then `changes` registrations and removals paced over
//! `seconds` while two threads route through the live chain each registry's source feeds.
//! For each: whether every applied state is one the registry went through, in order (its
//! providers exactly those after the first `k` changes, `k` never going back), the time
//! from the last change to the applied final state, the wrongly routed calls, and the
//! routing latency idle and during the churn (`testkit::churn`, which `zk_churn` and the
//! churn test share).
//!
//! ZooKeeper is written with routechain's admin; Nacos with the official Python SDK, as
//! Dubbo's Nacos registry registers instances (the reference follows every version and
//! group, so several Nacos services, each pushed on its own).
//!
//! Run: `cargo run --release -p routechain-benches --example registry_churn -- [providers] [changes] [seconds] [zookeeper|nacos|both]`.

use std::time::Duration;

use routechain_testkit::churn::{self, Churn, ChurnTarget, NacosTarget, Outcome, ZkTarget};
use routechain_testkit::nacos::Nacos;
use routechain_testkit::zookeeper::ZooKeeper;

/// The figures of one run, one line each.
fn figures(spec: &Churn, o: &mut Outcome) -> Vec<(&'static str, String)> {
    // Every applied state is a prefix of the changes, and prefixes never go back.
    let mut last = 0;
    let mut order = "yes".to_string();
    for a in &o.applied {
        match a.prefix {
            Some(k) if k >= last => last = k,
            Some(k) => {
                order = format!("no: generation {} went back to change {k}", a.generation);
                break;
            }
            None => {
                order = format!(
                    "no: generation {} ({} providers) is no registry state",
                    a.generation, a.providers
                );
                break;
            }
        }
    }
    // The same, service by service (version and group): each service's providers a state
    // that service went through, never going back.
    let mut last: Vec<usize> = vec![0; o.services.len()];
    let mut by_service = "yes".to_string();
    for a in &o.applied {
        let Some(ks) = &a.service_prefixes else {
            by_service = format!("no: generation {} is no registry state", a.generation);
            break;
        };
        if let Some(i) = (0..ks.len()).find(|&i| ks[i] < last[i]) {
            by_service = format!(
                "no: generation {} went back in service {}",
                a.generation, o.services[i]
            );
            break;
        }
        last.clone_from(ks);
    }
    let ns = |v: &mut Vec<u64>, p: f64| format!("{} ns", churn::percentile(v, p));
    let (idle_n, churn_n) = (o.idle_ns.len(), o.churn_ns.len());
    vec![
        (
            "initial providers registered in",
            format!("{:.1?}", o.register_time),
        ),
        ("states applied", o.applied.len().to_string()),
        ("each one the registry went through, in order", order),
        (
            "each service's, in order (of the services)",
            format!("{by_service} ({})", o.services.len()),
        ),
        (
            "last change -> final state applied",
            o.settle_time(spec.changes)
                .map_or("never".into(), |d| format!("{d:.1?}")),
        ),
        (
            "calls checked / wrong",
            format!("{} / {}", o.checked_calls, o.bad_calls),
        ),
        ("other reports", o.other_reports.len().to_string()),
        (
            "routing idle: calls, p50, p99, p99.9",
            format!(
                "{idle_n}, {}, {}, {}",
                ns(&mut o.idle_ns, 50.0),
                ns(&mut o.idle_ns, 99.0),
                ns(&mut o.idle_ns, 99.9)
            ),
        ),
        (
            "routing during churn: calls, p50, p99, p99.9",
            format!(
                "{churn_n}, {}, {}, {}",
                ns(&mut o.churn_ns, 50.0),
                ns(&mut o.churn_ns, 99.0),
                ns(&mut o.churn_ns, 99.9)
            ),
        ),
    ]
}

fn main() {
    let arg = |i: usize, default: u64| {
        std::env::args()
            .nth(i)
            .and_then(|a| a.parse().ok())
            .unwrap_or(default)
    };
    let which = std::env::args().nth(4).unwrap_or_else(|| "both".into());
    let spec = Churn {
        providers: arg(1, 10_000) as usize,
        changes: arg(2, 1_000) as usize,
        over: Duration::from_secs(arg(3, 10)),
        routing_threads: 2,
        idle: Duration::from_secs(3),
    };
    println!("{spec:?}");
    let mut columns: Vec<(&str, Vec<(&'static str, String)>)> = Vec::new();
    if which != "nacos" {
        let zk = ZooKeeper::start("registry-churn");
        let mut target = ZkTarget::connect(&zk.address());
        let mut o = churn::run_on(&mut target as &mut dyn ChurnTarget, &spec);
        columns.push(("zookeeper", figures(&spec, &mut o)));
    }
    if which != "zookeeper" {
        let nacos = Nacos::start("registry-churn");
        let mut target = NacosTarget::connect(&nacos.address());
        let mut o = churn::run_on(&mut target, &spec);
        columns.push(("nacos", figures(&spec, &mut o)));
    }
    let width = 46;
    print!("{:width$}", "");
    for (name, _) in &columns {
        print!("  {name:<34}");
    }
    println!();
    for row in 0..columns.first().map_or(0, |c| c.1.len()) {
        print!("{:width$}", columns[0].1[row].0);
        for (_, c) in &columns {
            print!("  {:<34}", c[row].1);
        }
        println!();
    }
}
