#![allow(missing_docs)] // `criterion_group!` generates an undocumented function.

//! Routing benchmarks: the built-in routers alone (tag, condition, group, IDC-weight, mesh), the full chain (tag → condition → group →
//! IDC-weight), the full chain plus a pick, the naive baseline, updates and threads, at 100
//! to 100,000 generated providers. See BENCHMARKS.md for the results and how to read them.
//!
//! Run: `cargo bench -p routechain-benches --bench routing` (a filter after `--` selects benchmarks,
//! e.g. `-- route-full`). Every chain is built through the default registry from chain-file
//! text ([`routechain_testkit`]), exactly as a user's chain file is. A chain whose router
//! type is not registered is skipped with a note on standard error.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use routechain::balance::{
    BalanceConfig, BalancerSpec, Caller, Cluster, LoadBalanceKind, ServiceConfig, SnapshotBalance,
};
use routechain::core::{CallState, ChainState, Change, RandomSource, Request, Snapshot};
use routechain_testkit::{self as testkit, naive};

/// Provider counts.
const SIZES: [usize; 4] = [100, 1_000, 10_000, 100_000];
/// The generator seed of every benchmark.
const SEED: u64 = 42;
/// Requests cycled through per benchmark (a realistic mix, see `testkit::requests`).
const REQUESTS: usize = 64;

/// Sampling per provider count: fewer samples at 100,000 so the whole run stays short.
fn tune(group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>, n: usize) {
    if n >= 100_000 {
        group.sample_size(10);
        group.warm_up_time(Duration::from_millis(500));
        group.measurement_time(Duration::from_secs(2));
    } else {
        group.sample_size(30);
        group.warm_up_time(Duration::from_millis(500));
        group.measurement_time(Duration::from_millis(1500));
    }
}

fn state_for(name: &str, yaml: &str, snapshot: &Arc<Snapshot>) -> Option<ChainState> {
    if !testkit::chain_available(yaml) {
        eprintln!("skipping {name}: a router type of this chain is not registered yet");
        return None;
    }
    match testkit::build_state(yaml, snapshot.clone()) {
        Ok(state) => Some(state),
        Err(e) => {
            eprintln!("skipping {name}: the chain does not load: {}", e.render());
            None
        }
    }
}

/// Routes the cycled requests through the state `chain` publishes (loaded per call, as a
/// route-only caller does); with `balance`, its weighted random balancer
/// (Dubbo's default `random`) then picks one provider.
fn bench_route(
    c: &mut Criterion,
    group_name: &str,
    n: usize,
    chain: &Cluster,
    requests: &[Request],
    balance: Option<&SnapshotBalance>,
) {
    let spec = BalancerSpec::new(LoadBalanceKind::Random);
    let mut group = c.benchmark_group(group_name);
    tune(&mut group, n);
    let mut call = CallState::seeded(SEED);
    let mut i = 0usize;
    group.bench_function(BenchmarkId::from_parameter(n), |b| {
        b.iter(|| {
            let request = &requests[i % requests.len()];
            i = i.wrapping_add(1);
            let published = chain.load();
            let state = published.state();
            let routed = state.route(request, &mut call).is_ok();
            if let (Some(balance), true) = (balance, routed) {
                black_box(balance.pick(0, &spec, request, &call.candidates, &mut call.rng));
            }
            black_box(routed)
        })
    });
    group.finish();
}

fn routing(c: &mut Criterion) {
    let requests = testkit::requests(REQUESTS, SEED);
    for n in SIZES {
        let snapshot = Arc::new(testkit::snapshot(n, SEED));
        for (name, yaml) in testkit::CHAINS {
            if let Some(state) = state_for(name, &yaml(), &snapshot) {
                let chain = Cluster::new(state, ServiceConfig::default());
                bench_route(c, &format!("route-{name}"), n, &chain, &requests, None);
            }
        }
        // The mesh router alone (not in `testkit::CHAINS`: the naive baseline has no mesh).
        if let Some(state) = state_for("mesh", &testkit::mesh_chain_yaml(), &snapshot) {
            bench_route(
                c,
                "route-mesh",
                n,
                &Cluster::new(state, ServiceConfig::default()),
                &requests,
                None,
            );
        }
        if let Some(state) = state_for("full", &testkit::full_chain_yaml(), &snapshot) {
            let chain = Cluster::new(state, ServiceConfig::default());
            bench_route(c, "route-full", n, &chain, &requests, None);
            let balance = SnapshotBalance::new(&snapshot, &BalanceConfig::default());
            bench_route(c, "route-full-pick", n, &chain, &requests, Some(&balance));

            // What an application calls: `Cluster::select` (route, breaker check, pick).
            let service = &chain;
            let mut group = c.benchmark_group("route-full-select");
            tune(&mut group, n);
            let mut call = Caller::seeded(SEED);
            let mut i = 0usize;
            group.bench_function(BenchmarkId::from_parameter(n), |b| {
                b.iter(|| {
                    let request = &requests[i % requests.len()];
                    i = i.wrapping_add(1);
                    black_box(
                        service
                            .select(request, &[], &mut call)
                            .map(|s| s.index())
                            .ok(),
                    )
                })
            });
            group.finish();
        }

        // The naive baseline over the same providers and requests.
        let providers = naive::from_snapshot(&snapshot);
        let consumer = naive::consumer_params(&testkit::consumer());
        let mut group = c.benchmark_group("route-naive");
        tune(&mut group, n);
        let mut rng = routechain::core::FastRng::seeded(SEED);
        let mut i = 0usize;
        group.bench_function(BenchmarkId::from_parameter(n), |b| {
            b.iter(|| {
                let request = &requests[i % requests.len()];
                i = i.wrapping_add(1);
                let routed = naive::full_chain(&providers, request, &consumer, rng.below(100));
                black_box(routed.len())
            })
        });
        group.finish();
    }
}

/// The condition router for a request that carries another consumer than the chain's:
/// `$name` then-parts resolved per call, with a plain consumer value (one `ValueIndex`
/// lookup) and a glob value (decided per distinct provider value).
fn per_call_consumer(c: &mut Criterion) {
    let yaml = "service: com.example.search.IndexService
routers:
  - type: condition
    priority: 140
    rule:
      conditions:
        - \"=> region = $region & idc != $idc\"
";
    let caller = |params: &str| {
        routechain::core::Url::parse(&format!(
            "consumer://10.201.0.1/com.example.search.IndexService?application=other&{params}"
        ))
        .expect("consumer URL")
    };
    for n in [1_000, 10_000] {
        let snapshot = Arc::new(testkit::snapshot(n, SEED));
        let Some(state) = state_for("condition-per-call-consumer", yaml, &snapshot) else {
            return;
        };
        let chain = Cluster::new(state, ServiceConfig::default());
        for (name, params) in [
            ("value", "region=shanghai&idc=sh1"),
            ("glob", "region=sh*&idc=*1"),
        ] {
            let requests = [Request::new().with_consumer(caller(params))];
            bench_route(
                c,
                &format!("route-condition-per-call-consumer-{name}"),
                n,
                &chain,
                &requests,
                None,
            );
        }
    }
}

fn updates(c: &mut Criterion) {
    let yaml = testkit::full_chain_yaml();
    for n in SIZES {
        let lines = testkit::provider_lines(n, SEED);
        let mut group = c.benchmark_group("update-parse-urls");
        tune(&mut group, n);
        group.throughput(Throughput::Elements(n as u64));
        group.bench_function(BenchmarkId::from_parameter(n), |b| {
            b.iter_with_large_drop(|| Snapshot::parse_lines(2, black_box(&lines)))
        });
        group.finish();

        let snapshot = Arc::new(testkit::snapshot(n, SEED));
        let Some(state) = state_for("full", &yaml, &snapshot) else {
            continue;
        };
        // A changed provider list: the same list with one provider replaced.
        let mut changed: Vec<_> = snapshot.providers().to_vec();
        changed[n / 2] = testkit::providers(1, SEED + 1).remove(0);
        let changed = Arc::new(Snapshot::from_shared(2, changed));
        let mut group = c.benchmark_group("update-providers");
        tune(&mut group, n);
        group.bench_function(BenchmarkId::from_parameter(n), |b| {
            b.iter_with_large_drop(|| {
                state
                    .next(&Change::<()>::providers(changed.clone()))
                    .map(|s| s.generation())
            })
        });
        group.finish();

        // A changed rule: parse and compile the new condition rule, then prepare a state
        // where only the condition router re-prepares.
        let changed_yaml = yaml.replace("region = shanghai", "region = guangzhou");
        let registry = routechain::registry();
        let mut group = c.benchmark_group("update-rule");
        tune(&mut group, n);
        group.bench_function(BenchmarkId::from_parameter(n), |b| {
            b.iter_with_large_drop(|| {
                let file = routechain::rules::ChainFile::parse("bench", &changed_yaml, None)
                    .expect("the changed chain parses");
                let mut entries: Vec<_> = state.entries().to_vec();
                let position = file
                    .entries
                    .iter()
                    .position(|e| e.type_name == "condition")
                    .expect("the chain has a condition router");
                entries[position] = file
                    .compile_entry(
                        &registry,
                        &file.entries[position],
                        routechain::rules::chain_file::RuleOverride::Own,
                    )
                    .expect("the changed rule compiles");
                state.next(&Change::<()>::entries(entries))
            })
        });
        group.finish();
    }
}

fn threads(c: &mut Criterion) {
    let requests = testkit::requests(REQUESTS, SEED);
    let n = 10_000;
    let snapshot = Arc::new(testkit::snapshot(n, SEED));
    let Some(state) = state_for("full", &testkit::full_chain_yaml(), &snapshot) else {
        return;
    };
    let chain = Cluster::new(state, ServiceConfig::default());
    let mut group = c.benchmark_group("threads-full-10000");
    group.sample_size(20);
    group.warm_up_time(Duration::from_millis(500));
    group.measurement_time(Duration::from_secs(3));
    for threads in [1usize, 2] {
        // One element = one routed call per thread: criterion reports calls per second.
        group.throughput(Throughput::Elements(threads as u64));
        group.bench_function(BenchmarkId::from_parameter(threads), |b| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                std::thread::scope(|s| {
                    for t in 0..threads {
                        let chain = &chain;
                        let requests = &requests;
                        s.spawn(move || {
                            let mut call = CallState::seeded(SEED + t as u64);
                            for i in 0..iters as usize {
                                let published = chain.load();
                                let state = published.state();
                                let ok = state
                                    .route(&requests[(i + t * 7) % requests.len()], &mut call)
                                    .is_ok();
                                black_box(ok);
                            }
                        });
                    }
                });
                start.elapsed()
            })
        });
    }
    group.finish();
    // The CPU-time run is not a criterion benchmark: honour a criterion filter by hand.
    let filter = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    if filter.is_none_or(|f| "threads-full-10000".contains(f.as_str()) || f.contains("threads")) {
        cpu_scaling(&chain, &requests);
    }
}

/// Where criterion writes (`$CARGO_TARGET_DIR/criterion`, else `target/criterion`).
fn criterion_dir() -> std::path::PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"))
        .join("criterion")
}

/// This thread's (time on a CPU, time waiting for one) in nanoseconds, from Linux's
/// `/proc/thread-self/schedstat`; `None` elsewhere.
fn thread_sched_ns() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let mut fields = text.split_whitespace().map(|f| f.parse::<u64>().ok());
    Some((fields.next()??, fields.next()??))
}

/// Beside criterion's wall-clock throughput: the same 1- and 2-thread runs with each
/// thread's CPU time and run-queue wait, so the scaling can be judged on a machine shared
/// with other work (when the CPU time per call stays the same with 2 threads, the threads do
/// not slow each other down, and any missing wall-clock speed-up is time spent waiting for a
/// core). Printed, and written to `target/criterion/threads_cpu.json`.
fn cpu_scaling(chain: &Cluster, requests: &[Request]) {
    const CALLS: usize = 1_000_000;
    let mut rows = Vec::new();
    for threads in [1usize, 2] {
        let start = Instant::now();
        let per_thread: Vec<Option<(u64, u64)>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    s.spawn(move || {
                        let mut call = CallState::seeded(SEED + t as u64);
                        let before = thread_sched_ns();
                        for i in 0..CALLS {
                            let published = chain.load();
                            let state = published.state();
                            let ok = state
                                .route(&requests[(i + t * 7) % requests.len()], &mut call)
                                .is_ok();
                            black_box(ok);
                        }
                        let after = thread_sched_ns();
                        before.zip(after).map(|(b, a)| (a.0 - b.0, a.1 - b.1))
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().ok().flatten())
                .collect()
        });
        let wall = start.elapsed().as_nanos() as f64;
        let calls = (CALLS * threads) as f64;
        let cpu: u64 = per_thread.iter().flatten().map(|t| t.0).sum();
        let wait: u64 = per_thread.iter().flatten().map(|t| t.1).sum();
        let row = serde_json::json!({
            "threads": threads,
            "calls": calls,
            "wall_ns": wall,
            "calls_per_second": calls / wall * 1e9,
            "cpu_ns_per_call": cpu as f64 / calls,
            "runqueue_wait_ns": wait,
        });
        eprintln!(
            "threads={threads}: {:.0} calls/s wall-clock, {:.0} ns CPU per call, {:.0} ms waiting for a core",
            calls / wall * 1e9,
            cpu as f64 / calls,
            wait as f64 / 1e6
        );
        rows.push(row);
    }
    let dir = criterion_dir();
    if std::fs::create_dir_all(&dir).is_ok() {
        let _ = std::fs::write(
            dir.join("threads_cpu.json"),
            serde_json::to_string_pretty(&rows).unwrap_or_default(),
        );
    }
}

/// The IDC-weight router with and without `spillover` + `panic_threshold` at 10,000
/// providers, with no provider degraded and with every tenth provider live-degraded (the
/// tallies are attached to the chain's degraded set, so the counts are loads, not scans).
fn spillover(c: &mut Criterion) {
    let requests = testkit::requests(REQUESTS, SEED);
    let n = 10_000;
    let snapshot = Arc::new(testkit::snapshot(n, SEED));
    let options = "spillover: {overprovisioning: 1.4}\npanic_threshold: 50\n";
    for (health, degraded_every) in [("healthy", 0usize), ("degraded", 10)] {
        for (mode, extra) in [("off", ""), ("on", options)] {
            let rule = format!("{}{extra}", testkit::IDC_RULE_YAML);
            let yaml = format!(
                "service: com.example.search.IndexService\nrouters:\n  - type: idc-weight\n    priority: 300\n    rule:\n{}",
                rule.lines()
                    .map(|l| format!("      {l}\n"))
                    .collect::<String>()
            );
            let Some(state) = state_for("idc-spillover", &yaml, &snapshot) else {
                continue;
            };
            if degraded_every > 0 {
                for i in (0..n).step_by(degraded_every) {
                    state.degraded().mark(i);
                }
            }
            let chain = Cluster::new(state, ServiceConfig::default());
            bench_route(
                c,
                &format!("idc-spillover-{health}-{mode}"),
                n,
                &chain,
                &requests,
                None,
            );
        }
    }
}

criterion_group!(
    benches,
    routing,
    per_call_consumer,
    updates,
    threads,
    spillover
);
criterion_main!(benches);
