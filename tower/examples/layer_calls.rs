//! Makes N tonic calls over the in-memory channel of `benches/layer.rs` (a channel that
//! answers at once, without I/O), directly or through the layer at 10,000 providers, for a
//! load-independent comparison under callgrind: instructions per call =
//! (Ir(N calls) − Ir(0 calls)) / N, and the layer's added cost is the difference between
//! `layer` and `direct` (see BENCHMARKS.md, "Tower layer"):
//!
//! ```text
//! cargo build --release -p routechain-tower --example layer_calls
//! for mode in direct layer; do for n in 0 5000; do
//!   valgrind --tool=callgrind --callgrind-out-file=/dev/null \
//!     target/release/examples/layer_calls $mode $n 2>&1 | grep Collected
//! done; done
//! ```
#![allow(missing_docs)]

#[path = "../tests/common/mod.rs"]
mod common;

use common::greeter::greeter_client::GreeterClient;
use common::instant::{Instant, live, request};
use routechain_tower::RouteLayer;
use tower_layer::Layer;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(mode), Some(calls)) = (
        args.get(1).map(String::as_str),
        args.get(2).and_then(|a| a.parse::<usize>().ok()),
    ) else {
        eprintln!("usage: layer_calls direct|layer CALLS");
        std::process::exit(2);
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    // The one provider the chain leaves is never contacted: the channel answers in memory.
    let live = live("127.0.0.1:9");
    rt.block_on(async {
        match mode {
            "direct" => {
                let mut client = GreeterClient::new(Instant::new());
                for _ in 0..calls {
                    client.say_hello(request()).await.expect("an answer");
                }
            }
            "layer" => {
                let mut client = GreeterClient::new(
                    RouteLayer::new(live.service().clone()).layer(Instant::new()),
                );
                // One warm-up call (the channel cache, the pools), as in the benchmark.
                client.say_hello(request()).await.expect("an answer");
                for _ in 0..calls {
                    client.say_hello(request()).await.expect("an answer");
                }
            }
            _ => {
                eprintln!("usage: layer_calls direct|layer CALLS");
                std::process::exit(2);
            }
        }
    });
    println!("{calls} calls");
}
