//! What a service of `n` providers holds per part, counted by the
//! allocator (bytes still allocated): each router's prepared state, the balancer's tables,
//! the health table, a `Cluster`, and a template-built `LiveChain` fed shared URLs.
//! Each figure is the part at `n` providers minus the same part at 0.
//!
//! Run: `cargo run --release -p routechain-benches --example state_parts -- [n] [services]`.

use std::sync::Arc;

use routechain::balance::{BalanceConfig, Cluster, HealthTable, ServiceConfig, SnapshotBalance};
use routechain::core::{DegradedSet, Snapshot, Url};
use routechain::live::{ChainTemplate, LiveOptions};
use routechain::rules::ChainFile;
use routechain_testkit as testkit;

fn counted<T>(f: impl FnOnce() -> T) -> (T, i64, u64) {
    let mut out = None;
    let info = allocation_counter::measure(|| out = Some(f()));
    (
        out.expect("ran"),
        info.bytes_current,
        info.count_current as u64,
    )
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(200);
    let services: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(100);
    let _ = Url::parse(testkit::CONSUMER);
    let urls = testkit::providers(n, 7);
    let full = Arc::new(Snapshot::new(1, urls.clone()));
    let empty = Arc::new(Snapshot::new(1, Vec::new()));
    let row = |what: &str, a: (i64, u64), b: (i64, u64)| {
        println!(
            "{what:<28} {:>8} B {:>4} blocks   (at 0: {:>6} B {:>3} blocks)  {:>6.1} B/provider",
            a.0 - b.0,
            a.1 as i64 - b.1 as i64,
            b.0,
            b.1,
            (a.0 - b.0) as f64 / n as f64
        );
    };
    println!("at {n} providers, part at n minus part at 0:");
    let mut chains: Vec<(String, String)> = testkit::CHAINS
        .iter()
        .map(|(name, yaml)| (name.to_string(), yaml()))
        .collect();
    chains.push(("full".to_string(), testkit::full_chain_yaml()));
    for (name, yaml) in &chains {
        // Warm-up (process-wide tables).
        drop(testkit::build_state(yaml, full.clone()));
        let (s1, a1, c1) = counted(|| testkit::build_state(yaml, full.clone()));
        let (s0, a0, c0) = counted(|| testkit::build_state(yaml, empty.clone()));
        row(&format!("state: {name}"), (a1, c1), (a0, c0));
        drop((s1, s0));
    }
    let cfg = BalanceConfig::default();
    let (x1, a1, c1) = counted(|| SnapshotBalance::new(&full, &cfg));
    let (x0, a0, c0) = counted(|| SnapshotBalance::new(&empty, &cfg));
    row("SnapshotBalance", (a1, c1), (a0, c0));
    drop((x1, x0));
    let (x1, a1, c1) = counted(|| DegradedSet::new(n));
    let (x0, a0, c0) = counted(|| DegradedSet::new(0));
    row("DegradedSet", (a1, c1), (a0, c0));
    drop((x1, x0));
    let (x1, a1, c1) = counted(|| HealthTable::new(Arc::new(DegradedSet::new(n))));
    let (x0, a0, c0) = counted(|| HealthTable::new(Arc::new(DegradedSet::new(0))));
    row("HealthTable (+DegradedSet)", (a1, c1), (a0, c0));
    drop((x1, x0));
    let yaml = testkit::full_chain_yaml();
    let st1 = testkit::build_state(&yaml, full.clone()).expect("builds");
    let st0 = testkit::build_state(&yaml, empty.clone()).expect("builds");
    let (x1, a1, c1) = counted(|| Cluster::new(st1, ServiceConfig::default()));
    let (x0, a0, c0) = counted(|| Cluster::new(st0, ServiceConfig::default()));
    row("Cluster (published tables)", (a1, c1), (a0, c0));
    drop((x1, x0));

    // Live chains from one template, fed shared URLs (as `many_services --part shared`).
    let file = ChainFile::parse("many.chain.yaml", &yaml, None).expect("parses");
    let template = ChainTemplate::new(file, routechain::registry()).expect("builds");
    let options = || LiveOptions {
        consumer: Some(testkit::consumer()),
        ..LiveOptions::default()
    };
    drop(template.live_chain(options()));
    let lists: Vec<Vec<Url>> = (0..services)
        .map(|s| testkit::providers(n, 100 + s as u64))
        .collect();
    let (empties, a0, c0) = counted(|| {
        (0..services)
            .map(|_| template.live_chain(options()).expect("builds"))
            .collect::<Vec<_>>()
    });
    let ((), a1, c1) = counted(|| {
        for (live, list) in empties.iter().zip(&lists) {
            live.apply_providers("state_parts", list.clone());
        }
    });
    println!(
        "live chain (template), empty: {:.0} B {:.1} blocks per service; providers applied: +{:.0} B +{:.1} blocks per service = {:.1} B/provider",
        a0 as f64 / services as f64,
        c0 as f64 / services as f64,
        a1 as f64 / services as f64,
        c1 as f64 / services as f64,
        a1 as f64 / services as f64 / n as f64
    );
    drop(empties);
}
