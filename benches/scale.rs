#![allow(missing_docs)] // `criterion_group!` generates an undocumented function.
//! Scale: URL parsing throughput, and what a provider-list change costs at
//! 100,000 providers when the parsed providers of the previous snapshot are reused.
//!
//! ```sh
//! cargo bench -p routechain-benches --bench scale
//! ```

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use routechain::core::Url;
use routechain_testkit as testkit;

const SEED: u64 = 42;

/// One URL at a time, cycling through 1,000 generated provider URLs (~330 characters,
/// 15–17 parameters each).
fn url_parse(c: &mut Criterion) {
    let lines: Vec<String> = testkit::provider_lines(1_000, SEED)
        .lines()
        .map(str::to_string)
        .collect();
    let mut group = c.benchmark_group("scale-url-parse");
    group.warm_up_time(Duration::from_millis(500));
    group.measurement_time(Duration::from_secs(3));
    group.throughput(Throughput::Elements(1));
    let mut i = 0;
    group.bench_function(BenchmarkId::from_parameter("provider-url"), |b| {
        b.iter(|| {
            i = (i + 1) % lines.len();
            black_box(Url::parse(black_box(&lines[i])))
        })
    });
    group.finish();
}

criterion_group!(benches, url_parse);
criterion_main!(benches);
