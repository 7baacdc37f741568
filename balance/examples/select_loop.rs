//! Runs `Cluster::select` in a loop, for counting instructions per pick with a tool that
//! the machine's load does not distort (`valgrind --tool=callgrind`): the difference
//! between two iteration counts, divided by the difference of the counts, is the cost of
//! one select. The setup is `benches/balance.rs`'s: a one-router chain keeping half the
//! providers (weights 100 / 150 / 200), then the balancer.
//!
//! ```sh
//! cargo build --release -p routechain-balance --example select_loop
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null \
//!   target/release/examples/select_loop roundrobin 1000 10000
//! ```
//!
//! Arguments: the balancer name, the number of providers, the number of selects.

use std::hint::black_box;
use std::sync::Arc;

use routechain_balance::*;
use routechain_core::*;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: select_loop BALANCER PROVIDERS SELECTS";
    let (Some(kind), Some(n), Some(selects)) = (
        args.get(1).and_then(|k| LoadBalanceKind::parse(k)),
        args.get(2).and_then(|n| n.parse::<usize>().ok()),
        args.get(3).and_then(|n| n.parse::<u64>().ok()),
    ) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let text: String = (0..n)
        .map(|i| {
            format!(
                "dubbo://10.{}.{}.{}:20880/svc?zone={}&weight={}\n",
                i / 65536,
                (i / 256) % 256,
                i % 256,
                i % 2,
                100 + (i % 3) * 50
            )
        })
        .collect();
    let snapshot = Arc::new(Snapshot::parse_lines(1, &text).expect("valid provider URLs"));
    let zone0 = BitSet::from_fn(n, |i| i % 2 == 0);
    let keep = ChainEntry::new(
        "zone",
        0,
        Arc::new(router_fn("zone", move |_, c| c.and_assign(&zone0))),
    );
    let state = ChainState::new(None, snapshot, Url::empty(), vec![keep]).expect("a valid chain");
    let config = ServiceConfig {
        balance: BalanceConfig::new(BalancerSpec::new(kind)),
        ..ServiceConfig::default()
    };
    let service = Cluster::new(state, config);
    let request = Request::new()
        .with_method("get")
        .with_argument(serde_json::json!("user-42"));
    let mut call = Caller::seeded(1);
    let mut sum = 0usize;
    for _ in 0..selects {
        match service.select(black_box(&request), &[], &mut call) {
            Ok(s) => sum = sum.wrapping_add(s.index()),
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(1);
            }
        }
    }
    println!("{kind} {n} {selects} {sum}");
}
