//! Parses N generated provider URLs (~330 characters, 15–17 parameters, a unique address
//! and timestamp each), for a load-independent cost of `Url::parse` under callgrind
//! (instructions per URL = (Ir(N) − Ir(0)) / N; see BENCHMARKS.md, "Updates"):
//!
//! ```text
//! cargo build --release -p routechain-benches --example url_parse
//! for n in 0 30000; do
//!   valgrind --tool=callgrind --callgrind-out-file=/dev/null \
//!     target/release/examples/url_parse $n 2>&1 | grep Collected
//! done
//! ```
//!
//! The 30,000 lines are generated in every run; only the first N are parsed.

use std::hint::black_box;

use routechain::core::Url;
use routechain_testkit as testkit;

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(30_000);
    let text = testkit::provider_lines(30_000, 42);
    let mut bytes = 0;
    for line in text.lines().take(n) {
        match Url::parse(black_box(line)) {
            Ok(url) => bytes += black_box(url).heap_bytes(),
            Err(e) => panic!("generated URL does not parse: {e}"),
        }
    }
    println!("{n} URLs parsed, {bytes} heap bytes");
}
