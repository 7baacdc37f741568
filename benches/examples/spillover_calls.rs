//! Routes N calls through the IDC-weight router at 10,000 providers, with or without
//! `spillover` + `panic_threshold`, for a load-independent cost comparison under callgrind
//! (instructions per call = (Ir(N calls) − Ir(0 calls)) / N; see BENCHMARKS.md):
//!
//! ```text
//! cargo build --release -p routechain-benches --example spillover_calls
//! valgrind --tool=callgrind target/release/examples/spillover_calls on 10 20000
//! ```
//!
//! Arguments: `off|on`, every how many providers one is live-degraded (0: none), calls.

use std::sync::Arc;

use routechain::balance::{Cluster, ServiceConfig};
use routechain::core::CallState;
use routechain_testkit as testkit;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: spillover_calls off|on DEGRADED_EVERY CALLS";
    let (Some(mode), Some(degraded), Some(calls)) = (
        args.get(1),
        args.get(2).and_then(|a| a.parse::<usize>().ok()),
        args.get(3).and_then(|a| a.parse::<usize>().ok()),
    ) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let n = 10_000;
    let snapshot = Arc::new(testkit::snapshot(n, 42));
    let requests = testkit::requests(64, 42);
    let extra = if mode == "on" {
        "spillover: {overprovisioning: 1.4}\npanic_threshold: 50\n"
    } else {
        ""
    };
    let rule = format!("{}{extra}", testkit::IDC_RULE_YAML);
    let yaml = format!(
        "service: com.example.search.IndexService\nrouters:\n  - type: idc-weight\n    priority: 300\n    rule:\n{}",
        rule.lines()
            .map(|l| format!("      {l}\n"))
            .collect::<String>()
    );
    let state = match testkit::build_state(&yaml, snapshot) {
        Ok(state) => state,
        Err(e) => {
            eprintln!("{}", e.render());
            std::process::exit(2);
        }
    };
    if degraded > 0 {
        for i in (0..n).step_by(degraded) {
            state.degraded().mark(i);
        }
    }
    let service = Cluster::new(state, ServiceConfig::default());
    let mut call = CallState::seeded(42);
    let mut routed = 0usize;
    for i in 0..calls {
        let published = service.load();
        routed += usize::from(
            published
                .state()
                .route(&requests[i % requests.len()], &mut call)
                .is_ok(),
        );
    }
    println!("{routed} of {calls} calls routed");
}
