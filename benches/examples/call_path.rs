//! Routes N calls through the full chain (tag → condition → group → IDC-weight) at a given
//! provider count, optionally followed by the `random` balancer's pick or made through
//! `Cluster::select`, for a load-independent cost comparison under callgrind (instructions
//! per call = (Ir(N calls) − Ir(0 calls)) / N; see BENCHMARKS.md, "Instructions per call"):
//!
//! ```text
//! cargo build --release -p routechain-benches --example call_path
//! for n in 0 20000; do
//!   valgrind --tool=callgrind --callgrind-out-file=/dev/null \
//!     target/release/examples/call_path pick 10000 $n 2>&1 | grep Collected
//! done
//! ```
//!
//! `registries` routes the full chain after Dubbo's zone-aware choice between two registries
//! (weights 30 and 70, a third of the providers in both) in the cluster's published state
//! (`Published::route`): the registry step's cost.
//!
//! Arguments: `chain|pick|select|registries`, the provider count, the number of calls; `chain` with a
//! fourth argument `time` also prints the wall time per call, the best of 20 batches of the
//! calls (a quick look on a shared machine, where the best batch is the least disturbed;
//! criterion's `route-full` is the figure of record).

use std::hint::black_box;
use std::sync::Arc;

use routechain::balance::Caller;
use routechain::balance::{
    BalanceConfig, BalancerSpec, Cluster, LoadBalanceKind, RegistryInfo, RegistryTable,
    ServiceConfig, SnapshotBalance,
};
use routechain::core::CallState;
use routechain_testkit as testkit;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: call_path chain|pick|select|registries PROVIDERS CALLS";
    let (Some(mode), Some(n), Some(calls)) = (
        args.get(1).map(String::as_str),
        args.get(2).and_then(|a| a.parse::<usize>().ok()),
        args.get(3).and_then(|a| a.parse::<usize>().ok()),
    ) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let snapshot = Arc::new(testkit::snapshot(n, 42));
    let requests = testkit::requests(64, 42);
    let state = match testkit::build_state(&testkit::full_chain_yaml(), snapshot.clone()) {
        Ok(state) => state,
        Err(e) => {
            eprintln!("{}", e.render());
            std::process::exit(2);
        }
    };
    let config = ServiceConfig {
        registries: (mode == "registries").then(|| two_registries(state.snapshot())),
        ..ServiceConfig::default()
    };
    // The service publishes the state; `chain` and `pick` route on it (one guard per call).
    let service = Cluster::new(state, config);
    let mut call = Caller::seeded(42);
    let mut routed = 0usize;
    if mode == "chain" && args.get(4).map(String::as_str) == Some("time") {
        let published = service.load();
        let state = published.state();
        let mut best = f64::INFINITY;
        for _ in 0..20 {
            let start = std::time::Instant::now();
            for i in 0..calls {
                let request = &requests[i % requests.len()];
                routed += usize::from(state.route(request, &mut call).is_ok());
            }
            best = best.min(start.elapsed().as_nanos() as f64 / calls.max(1) as f64);
        }
        println!("{n} providers: best batch {best:.0} ns per call ({routed} calls routed)");
        return;
    }
    match mode {
        "chain" | "pick" | "registries" => {
            let balance = SnapshotBalance::new(&snapshot, &BalanceConfig::default());
            let spec = BalancerSpec::new(LoadBalanceKind::Random);
            let call: &mut CallState = &mut call;
            for i in 0..calls {
                let request = &requests[i % requests.len()];
                let published = service.load();
                let result = if mode == "registries" {
                    published.route(request, call, None).is_ok()
                } else {
                    published.state().route(request, call).is_ok()
                };
                if result {
                    routed += 1;
                    if mode == "pick" {
                        black_box(balance.pick(0, &spec, request, &call.candidates, &mut call.rng));
                    }
                }
            }
        }
        "select" => {
            for i in 0..calls {
                let request = &requests[i % requests.len()];
                routed += usize::from(service.select(request, &[], &mut call).is_ok());
            }
        }
        _ => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    }
    println!("{routed} of {calls} calls routed");
}

/// Two registries chosen among per call: `a` (weight 30) lists the providers at
/// `i % 3 != 0`, `b` (weight 70) those at `i % 3 != 1`.
fn two_registries(snapshot: &routechain::core::Snapshot) -> Arc<RegistryTable> {
    let info = |name: &str, weight| RegistryInfo {
        name: name.into(),
        preferred: false,
        zone: None,
        weight,
        weighted: true,
    };
    let mut table = RegistryTable::new(vec![info("a", 30), info("b", 70)], None);
    for (i, p) in snapshot.providers().iter().enumerate() {
        for r in 0..2 {
            if i % 3 != r {
                table.insert(p.address(), r);
            }
        }
    }
    Arc::new(table)
}
