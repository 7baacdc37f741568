//! Each router's and each per-snapshot table's cost of one provider change at `N` providers:
//! prepared from scratch over the new snapshot against derived by the edit (one provider
//! removed from the middle, one appended), median of many runs, wall time. Under callgrind
//! with `runs` 1, `--toggle-collect='*measured*'` counts the instructions of every
//! measurement together.
//!
//! - routers: every built-in router alone with a rule using its features (the full chain's
//!   rules, plus a tag rule with address and `match` tags, a `$host` condition, mesh,
//!   affinity, mock), [`Router::prepare`] against [`PreparedRouter::prepare_edit`];
//! - tables: the balancer's tables (`SnapshotBalance`, default and consistent-hash
//!   balancing), the health table and the degraded set, new against `edited`.
//!
//! Run: `cargo run --release -p routechain-benches --example edit_table -- 100000 [runs]
//! [nohash]` (`nohash`: without the consistent-hash ring, slow under callgrind).

use std::sync::Arc;

use routechain::balance::{
    BalanceConfig, BalancerSpec, HealthTable, LoadBalanceKind, SnapshotBalance,
};
use routechain::core::{DegradedSet, PrepareContext, Snapshot};
use routechain_testkit::{self as testkit};

/// The median wall time of `runs` calls of `f`, in ms. Each call runs in [`measured`].
fn median<T>(runs: usize, mut f: impl FnMut() -> T) -> f64 {
    let mut walls: Vec<f64> = (0..runs)
        .map(|_| {
            let t = std::time::Instant::now();
            let out = measured(&mut f);
            let ms = t.elapsed().as_secs_f64() * 1e3;
            drop(out);
            ms
        })
        .collect();
    walls.sort_by(f64::total_cmp);
    walls[runs / 2]
}

/// Runs `f`: the function callgrind collects in (`--toggle-collect=*measured*`).
#[inline(never)]
fn measured<T>(f: &mut impl FnMut() -> T) -> T {
    f()
}

const TAG_RULE_YAML: &str = "configVersion: v3.0
force: false
tags:
  - name: gray
    addresses: ['10.0.0.1-20', '10.0.1.*:20880']
  - name: canary|blue
    match:
      - {key: env, value: {exact: staging}}
  - name: v2
    match:
      - {key: version, value: {exact: '2.0.0'}}
";

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let runs: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(21);
    let ring = args.next().as_deref() != Some("nohash");
    let seed = 7;
    let snapshot = Arc::new(testkit::snapshot(n, seed));
    let added = testkit::providers(1, seed + 2);
    let (next, edit) = snapshot.edited(2, vec![n as u32 / 2], added);
    let next = Arc::new(next);

    let mut chains: Vec<(String, String)> = testkit::CHAINS
        .iter()
        .map(|(name, text)| (format!("{name} (full chain's)"), text()))
        .collect();
    chains.push((
        "tag (address and match tags)".into(),
        testkit::chain_of(&[("tag", 100, Some(TAG_RULE_YAML))]),
    ));
    chains.push((
        "condition ($host)".into(),
        format!(
            "service: {}\nrouters:\n  - type: condition\n    rule:\n      conditions: \
             [\"method = search => host != $host & region = shanghai\"]\n",
            testkit::SERVICE
        ),
    ));
    chains.push(("mesh".into(), testkit::mesh_chain_yaml()));
    chains.push((
        "affinity".into(),
        testkit::chain_of(&[(
            "affinity",
            130,
            Some("configVersion: v3.1\naffinityAware: {key: region, ratio: 40}\n"),
        )]),
    ));
    chains.push(("mock".into(), testkit::chain_of(&[("mock", -100, None)])));
    println!("| router / table | rebuild at {n} (ms) | edit at {n} (ms) |");
    println!("|---|---|---|");
    for (name, text) in &chains {
        let state = testkit::build_state(text, snapshot.clone()).expect("prepares");
        let consumer = state.consumer().clone();
        let service = state.service().map(str::to_string);
        for entry in state.entries().iter() {
            let cx = PrepareContext {
                snapshot: &snapshot,
                consumer: &consumer,
                service: service.as_deref(),
            };
            let prepared = entry.router.prepare(&cx).expect("prepares");
            let cx = PrepareContext {
                snapshot: &next,
                ..cx
            };
            let rebuild = median(runs, || entry.router.prepare(&cx).expect("prepares"));
            let derives = prepared.prepare_edit(&edit, &cx).is_some();
            let edited = median(runs, || match prepared.prepare_edit(&edit, &cx) {
                Some(r) => r.expect("the edit prepares"),
                None => entry.router.prepare(&cx).expect("prepares"),
            });
            let how = if derives { "" } else { " (no edit: prepares)" };
            println!("| {name} | {rebuild:.3} | {edited:.3}{how} |");
        }
    }

    let mut configs = vec![("balancer tables (random)", BalanceConfig::default())];
    if ring {
        configs.push((
            "balancer tables (consistenthash)",
            BalanceConfig::new(BalancerSpec::new(LoadBalanceKind::ConsistentHash)),
        ));
    }
    for (name, config) in configs {
        let old = SnapshotBalance::new(&snapshot, &config);
        let rebuild = median(runs, || SnapshotBalance::new(&next, &config));
        let edited = median(runs, || old.edited(&edit, &next, &config));
        println!("| {name} | {rebuild:.3} | {edited:.3} |");
    }
    let degraded = Arc::new(DegradedSet::new(snapshot.len()));
    let rebuild = median(runs, || DegradedSet::new(next.len()));
    let edited = median(runs, || degraded.edited(&edit));
    println!("| degraded set | {rebuild:.3} | {edited:.3} |");
    let health = HealthTable::new(degraded.clone());
    let rebuild = median(runs, || {
        HealthTable::new(Arc::new(DegradedSet::new(next.len())))
    });
    let edited = median(runs, || {
        health.edited(&edit, Arc::new(DegradedSet::new(next.len())))
    });
    println!("| health table | {rebuild:.3} | {edited:.3} |");
    let providers = next.providers().to_vec();
    let rebuild = median(runs, || Snapshot::from_shared(3, providers.clone()));
    let edited = median(runs, || snapshot.edit_to(3, &providers));
    println!("| snapshot (from the list / edit_to) | {rebuild:.3} | {edited:.3} |");
}
