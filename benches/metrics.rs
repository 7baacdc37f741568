#![allow(missing_docs)] // `criterion_group!` generates an undocumented function.

//! What the call-path metrics cost: the full chain (tag → condition → group → IDC-weight,
//! 10,000 providers) through `Service::select` and through `ChainState::route`, with the
//! chain state carrying a `ChainMetrics` (on) and without (off), measured in the same run;
//! and `Service::select` with metrics on from 1 and 2 threads (the sharded counters must not
//! make the threads contend).
//!
//! Run: `cargo bench -p routechain-benches --bench metrics`. Besides criterion's groups
//! (`metrics-select`, `metrics-route`, `metrics-threads`), an interleaved run (off and on
//! alternating in blocks, 15 rounds; the median per-call time of each) prints the on/off
//! ratio and writes it to `target/criterion/metrics_overhead.json`: on a machine shared with
//! other work, alternating blocks see the same load, so their ratio is the figure to quote.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use routechain::balance::{Service, ServiceConfig};
use routechain::core::{CallState, Chain, ChainMetrics, Request};
use routechain_testkit as testkit;

const N: usize = 10_000;
const SEED: u64 = 42;

/// Two services over the same full chain and snapshot: metrics off, metrics on.
fn services() -> (Service, Service, Vec<Request>) {
    let yaml = testkit::full_chain_yaml();
    let snapshot = Arc::new(testkit::snapshot(N, SEED));
    let off =
        testkit::build_state(&yaml, snapshot.clone()).unwrap_or_else(|e| panic!("{}", e.render()));
    let on = testkit::build_state(&yaml, snapshot)
        .unwrap_or_else(|e| panic!("{}", e.render()))
        .with_metrics(Some(Arc::new(ChainMetrics::new())));
    let service = |s| Service::new(Arc::new(Chain::new(s)), ServiceConfig::default());
    (service(off), service(on), testkit::requests(64, SEED))
}

fn select(service: &Service, requests: &[Request], call: &mut CallState, i: usize) -> bool {
    service
        .select(&requests[i % requests.len()], &[], call)
        .is_ok()
}

fn route(service: &Service, requests: &[Request], call: &mut CallState, i: usize) -> bool {
    service
        .chain()
        .load()
        .route(&requests[i % requests.len()], call)
        .is_ok()
}

type Op = fn(&Service, &[Request], &mut CallState, usize) -> bool;

fn on_off(c: &mut Criterion) {
    let (off, on, requests) = services();
    for (group_name, op) in [
        ("metrics-select", select as Op),
        ("metrics-route", route as Op),
    ] {
        let mut group = c.benchmark_group(group_name);
        group.sample_size(30);
        group.warm_up_time(Duration::from_millis(500));
        group.measurement_time(Duration::from_secs(2));
        for (label, service) in [("off", &off), ("on", &on)] {
            let mut call = CallState::seeded(SEED);
            let mut i = 0usize;
            group.bench_function(BenchmarkId::new(format!("{N}"), label), |b| {
                b.iter(|| {
                    i = i.wrapping_add(1);
                    black_box(op(service, &requests, &mut call, i))
                })
            });
        }
        group.finish();
    }
    interleaved(&off, &on, &requests);
}

/// Off and on alternating in blocks of `CALLS`, 15 rounds: the median ns per call of each.
fn interleaved(off: &Service, on: &Service, requests: &[Request]) {
    const CALLS: usize = 200_000;
    const ROUNDS: usize = 15;
    let mut report = serde_json::Map::new();
    for (name, op) in [("select", select as Op), ("route", route as Op)] {
        let mut times = [Vec::new(), Vec::new()];
        let mut call = CallState::seeded(SEED);
        for round in 0..ROUNDS {
            // Alternate which goes first, so a load change mid-round hits both alike.
            let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
            for which in order {
                let service = [off, on][which];
                let start = Instant::now();
                for i in 0..CALLS {
                    black_box(op(service, requests, &mut call, i));
                }
                times[which].push(start.elapsed().as_nanos() as f64 / CALLS as f64);
            }
        }
        let median = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let (off_ns, on_ns) = (median(&mut times[0]), median(&mut times[1]));
        let ratio = on_ns / off_ns;
        println!(
            "metrics {name} (full chain, {N} providers), interleaved, median of {ROUNDS} rounds of {CALLS} calls: off {off_ns:.1} ns, on {on_ns:.1} ns per call: on/off {ratio:.3}"
        );
        report.insert(
            name.into(),
            serde_json::json!({"off_ns": off_ns, "on_ns": on_ns, "ratio": ratio}),
        );
    }
    let dir = std::path::Path::new(
        &std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".into()),
    )
    .join("criterion");
    let _ = std::fs::create_dir_all(&dir);
    let _ = std::fs::write(
        dir.join("metrics_overhead.json"),
        serde_json::Value::Object(report).to_string(),
    );
}

fn threads(c: &mut Criterion) {
    let (_, on, requests) = services();
    let mut group = c.benchmark_group("metrics-threads");
    group.sample_size(20);
    group.warm_up_time(Duration::from_millis(500));
    group.measurement_time(Duration::from_secs(3));
    for threads in [1usize, 2] {
        // One element = one call per thread: criterion reports calls per second.
        group.throughput(Throughput::Elements(threads as u64));
        group.bench_function(BenchmarkId::new("select-on", threads), |b| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                std::thread::scope(|s| {
                    for t in 0..threads {
                        let (on, requests) = (&on, &requests);
                        s.spawn(move || {
                            let mut call = CallState::seeded(SEED + t as u64);
                            for i in 0..iters as usize {
                                black_box(select(on, requests, &mut call, i + t * 7));
                            }
                        });
                    }
                });
                start.elapsed()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, on_off, threads);
criterion_main!(benches);
