#![allow(missing_docs)] // `criterion_group!` generates an undocumented function.

//! What the call-path metrics cost: the full chain (tag → condition → group → IDC-weight,
//! 10,000 providers) through `Cluster::select` and through `ChainState::route`, with the
//! chain state carrying a `ChainMetrics` (on) and without (off), measured in the same run;
//! and `Cluster::select` with metrics on from 1 and 2 threads (the sharded counters must not
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
use routechain::balance::{Caller, Cluster, ServiceConfig};
use routechain::core::{ChainMetrics, Request};
use routechain_testkit as testkit;

const N: usize = 10_000;
const SEED: u64 = 42;

/// Two services over the same full chain and snapshot: metrics off, metrics on.
fn services() -> (Cluster, Cluster, Vec<Request>) {
    let yaml = testkit::full_chain_yaml();
    let snapshot = Arc::new(testkit::snapshot(N, SEED));
    let off =
        testkit::build_state(&yaml, snapshot.clone()).unwrap_or_else(|e| panic!("{}", e.render()));
    let on = testkit::build_state(&yaml, snapshot)
        .unwrap_or_else(|e| panic!("{}", e.render()))
        .with_metrics(Some(Arc::new(ChainMetrics::new())));
    let service = |s| Cluster::new(s, ServiceConfig::default());
    (service(off), service(on), testkit::requests(64, SEED))
}

fn select(service: &Cluster, requests: &[Request], call: &mut Caller, i: usize) -> bool {
    service
        .select(&requests[i % requests.len()], &[], call)
        .is_ok()
}

fn route(service: &Cluster, requests: &[Request], call: &mut Caller, i: usize) -> bool {
    service
        .load()
        .state()
        .route(&requests[i % requests.len()], call)
        .is_ok()
}

type Op = fn(&Cluster, &[Request], &mut Caller, usize) -> bool;

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
            let mut call = Caller::seeded(SEED);
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
    if benchmarking() {
        interleaved(&off, &on, &requests);
    }
}

/// True under `cargo bench` (criterion is given `--bench`); `cargo test --all-targets` runs
/// each criterion benchmark once as a test, and then the long hand-timed runs are skipped.
fn benchmarking() -> bool {
    std::env::args().any(|a| a == "--bench")
}

/// Off and on alternating in blocks of `CALLS`, `ROUNDS` rounds: the median ns per call of
/// each, the median of the per-round on/off ratios (each round's two blocks ran back to
/// back, under the same load) and the ratio of the fastest blocks (the least disturbed).
fn interleaved(off: &Cluster, on: &Cluster, requests: &[Request]) {
    const CALLS: usize = 50_000;
    const ROUNDS: usize = 41;
    let mut report = serde_json::Map::new();
    for (name, op) in [("select", select as Op), ("route", route as Op)] {
        let mut times = [Vec::new(), Vec::new()];
        let mut call = Caller::seeded(SEED);
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
        let mut ratios: Vec<f64> = times[1]
            .iter()
            .zip(&times[0])
            .map(|(on, off)| on / off)
            .collect();
        let paired = median(&mut ratios);
        let min = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
        let (off_min, on_min) = (min(&times[0]), min(&times[1]));
        let (off_ns, on_ns) = (median(&mut times[0]), median(&mut times[1]));
        println!(
            "metrics {name} (full chain, {N} providers), {ROUNDS} rounds of {CALLS} calls off/on back to back: median off {off_ns:.1} ns, on {on_ns:.1} ns per call; median of the per-round on/off ratios {paired:.3}; fastest blocks off {off_min:.1} ns, on {on_min:.1} ns: {:.3}",
            on_min / off_min
        );
        report.insert(
            name.into(),
            serde_json::json!({"off_ns": off_ns, "on_ns": on_ns, "paired_ratio": paired,
                               "off_min_ns": off_min, "on_min_ns": on_min,
                               "min_ratio": on_min / off_min}),
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
    let (off, on, requests) = services();
    let mut group = c.benchmark_group("metrics-threads");
    group.sample_size(20);
    group.warm_up_time(Duration::from_millis(500));
    group.measurement_time(Duration::from_secs(3));
    for (label, service) in [("select-off", &off), ("select-on", &on)] {
        for threads in [1usize, 2] {
            // One element = one call per thread: criterion reports calls per second.
            group.throughput(Throughput::Elements(threads as u64));
            group.bench_function(BenchmarkId::new(label, threads), |b| {
                b.iter_custom(|iters| {
                    let start = Instant::now();
                    std::thread::scope(|s| {
                        for t in 0..threads {
                            let requests = &requests;
                            s.spawn(move || {
                                let mut call = Caller::seeded(SEED + t as u64);
                                for i in 0..iters as usize {
                                    black_box(select(service, requests, &mut call, i + t * 7));
                                }
                            });
                        }
                    });
                    start.elapsed()
                })
            });
        }
    }
    group.finish();
    if benchmarking() {
        // Five rounds, off and on alternately, so both see the same machine; the figure to
        // quote is each one's median scaling over the rounds.
        let mut reports = Vec::new();
        let mut scaling: [Vec<(f64, f64)>; 2] = [Vec::new(), Vec::new()];
        for _ in 0..5 {
            for (k, (label, service)) in [("select-off", &off), ("select-on", &on)]
                .into_iter()
                .enumerate()
            {
                let report = cpu_scaling(label, service, &requests);
                scaling[k].push((
                    report["wall_scaling"].as_f64().unwrap_or(0.0),
                    report["cpu_scaling"].as_f64().unwrap_or(0.0),
                ));
                reports.push(report);
            }
        }
        for (label, runs) in ["select-off", "select-on"].iter().zip(&mut scaling) {
            let median = |mut v: Vec<f64>| {
                v.sort_by(f64::total_cmp);
                v[v.len() / 2]
            };
            println!(
                "metrics-threads {label}: median of 5 rounds: wall-clock scaling {:.2}×, CPU-time scaling {:.2}×",
                median(runs.iter().map(|r| r.0).collect()),
                median(runs.iter().map(|r| r.1).collect()),
            );
        }
        write_threads_report(&reports);
    }
}

/// This thread's (time on a CPU, time waiting for one) in nanoseconds, from Linux's
/// `/proc/thread-self/schedstat`; `None` elsewhere.
fn thread_sched_ns() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let mut it = text.split_whitespace().map(|v| v.parse::<u64>().ok());
    Some((it.next()??, it.next()??))
}

/// `Cluster::select`, 1,000,000 calls per thread from 1 and 2 threads, with each thread's
/// CPU time, for one service (`label`: metrics off or on). Wall-clock scaling = (calls/s, 2
/// threads) / (calls/s, 1 thread); on a machine shared with other work the wall clock cannot
/// show scaling, but CPU time per call can show contention (two threads writing one cache
/// line would make each call cost more CPU). CPU-time scaling = 2 × (CPU per call, 1 thread)
/// / (CPU per call, 2 threads): 2.0 when the threads do not slow each other down.
fn cpu_scaling(label: &str, service: &Cluster, requests: &[Request]) -> serde_json::Value {
    const CALLS: usize = 1_000_000;
    let mut cpu_per_call = [0f64; 2];
    let mut calls_per_s = [0f64; 2];
    let mut rows = Vec::new();
    for threads in [1usize, 2] {
        let start = Instant::now();
        let per_thread: Vec<Option<(u64, u64)>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    s.spawn(move || {
                        let mut call = Caller::seeded(SEED + t as u64);
                        let before = thread_sched_ns();
                        for i in 0..CALLS {
                            black_box(select(service, requests, &mut call, i + t * 7));
                        }
                        let after = thread_sched_ns();
                        before.zip(after).map(|(b, a)| (a.0 - b.0, a.1 - b.1))
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let wall = start.elapsed().as_secs_f64();
        let calls = (CALLS * threads) as f64;
        let cpu: u64 = per_thread.iter().flatten().map(|t| t.0).sum();
        let wait: u64 = per_thread.iter().flatten().map(|t| t.1).sum();
        cpu_per_call[threads - 1] = cpu as f64 / calls;
        calls_per_s[threads - 1] = calls / wall;
        println!(
            "metrics-threads {label} threads={threads}: {:.0} calls/s wall-clock, {:.0} ns CPU per call, {:.0} ms waiting for a core",
            calls / wall,
            cpu as f64 / calls,
            wait as f64 / 1e6
        );
        rows.push(
            serde_json::json!({"threads": threads, "calls_per_s": calls / wall,
            "cpu_ns_per_call": cpu as f64 / calls, "wait_ms": wait as f64 / 1e6}),
        );
    }
    let wall_scaling = calls_per_s[1] / calls_per_s[0];
    let cpu_scaling = 2.0 * cpu_per_call[0] / cpu_per_call[1];
    println!(
        "metrics-threads {label}: wall-clock scaling {wall_scaling:.2}×, CPU-time scaling 2 × {:.0} / {:.0} = {cpu_scaling:.2}×",
        cpu_per_call[0], cpu_per_call[1],
    );
    serde_json::json!({"service": label, "runs": rows,
        "wall_scaling": wall_scaling, "cpu_scaling": cpu_scaling})
}

/// Writes the thread-scaling runs to `$CARGO_TARGET_DIR/criterion/metrics_threads_cpu.json`.
fn write_threads_report(reports: &[serde_json::Value]) {
    let dir = std::path::Path::new(
        &std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".into()),
    )
    .join("criterion");
    let _ = std::fs::create_dir_all(&dir);
    let _ = std::fs::write(
        dir.join("metrics_threads_cpu.json"),
        serde_json::Value::Array(reports.to_vec()).to_string(),
    );
}

criterion_group!(benches, on_off, threads);
criterion_main!(benches);
