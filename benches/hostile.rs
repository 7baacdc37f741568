#![allow(missing_docs)] // `criterion_group!` generates an undocumented function.

//! Hostile-input benchmarks: per-request routing whatever the request carries, and
//! rule preparation for rules built to be expensive. Targets: any request routes in ≤ 1 ms
//! at 10,000 providers; 1 condition with 100,000 `&` terms prepares over 10,000 providers in
//! ≤ 1 s; 10,000 conditions prepare over 100,000 providers in ≤ 2 s.
//!
//! Run: `cargo bench -p routechain-benches --bench hostile` (a filter after `--` selects,
//! e.g. `-- tag-pipes`). Results and the CLI memory figures: BENCHMARKS.md, "Hostile input".

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};

/// The sizes of the targets, divided by 10 in an unoptimized build (`cargo test
/// --all-targets` runs every benchmark once as a test).
fn scaled(n: usize) -> usize {
    if cfg!(debug_assertions) { n / 10 } else { n }
}
use routechain::core::{CallState, ChainState, Request, Snapshot};
use routechain::rules::ChainFile;
use routechain_testkit::hostile::{self, providers};

fn state(chain: &str, snapshot: &Arc<Snapshot>) -> ChainState {
    let file = ChainFile::parse("bench.chain.yaml", chain, None).expect("the chain parses");
    routechain::rules::load::build_state(&file, &routechain::registry(), snapshot.clone(), None)
        .unwrap_or_else(|e| panic!("the chain prepares: {}", e.render()))
}

const TAG_CHAIN: &str = "routers:
  - type: tag
    rule: {force: false, enabled: true, tags: [{name: a, addresses: [\"10.0.0.9\"]}, {name: t1, addresses: [\"10.0.0.1\"]}]}
  - type: condition
    rule:
      conditions:
        - \"attachments[x] = a*b*c*d & method = get* => region = r1,r2\"
";

/// One request through a tag and a condition router at 10,000 providers, whatever its
/// attachments: a hierarchical tag of `a` and N `|`, a 400 KB tag, a 400 KB attachment
/// against a several-`*` glob.
fn per_request(c: &mut Criterion) {
    let snapshot = providers(10_000);
    let state = state(TAG_CHAIN, &snapshot);
    let mut group = c.benchmark_group("hostile-request");
    group.sample_size(20);
    group.warm_up_time(Duration::from_millis(300));
    group.measurement_time(Duration::from_secs(2));
    let cases: Vec<(&str, Request)> = vec![
        (
            "tag-pipes-100k",
            Request::new().with_attachment("dubbo.tag", format!("a{}", "|".repeat(100_000))),
        ),
        (
            "tag-pipes-400k",
            Request::new().with_attachment("dubbo.tag", format!("a{}", "|".repeat(400_000))),
        ),
        (
            "tag-400KB",
            Request::new().with_attachment("dubbo.tag", "a".repeat(400_000)),
        ),
        (
            "glob-400KB",
            Request::new()
                .with_method("getX")
                .with_attachment("x", "ab".repeat(200_000)),
        ),
    ];
    for (name, request) in &cases {
        let mut call = CallState::new();
        group.bench_with_input(BenchmarkId::new(*name, 10_000), request, |b, r| {
            b.iter(|| black_box(state.route(r, &mut call).is_ok()))
        });
    }
    group.finish();
}

/// Preparing a condition rule built to be expensive.
fn preparation(c: &mut Criterion) {
    let mut group = c.benchmark_group("hostile-prepare");
    group.sample_size(10);
    group.warm_up_time(Duration::from_millis(100));
    group.measurement_time(Duration::from_secs(5));
    let mut bench = |id: BenchmarkId, chain: &str, snapshot: &Arc<Snapshot>| {
        let file = ChainFile::parse("bench.chain.yaml", chain, None).unwrap();
        group.bench_function(id, |b| {
            b.iter(|| {
                routechain::rules::load::build_state(
                    &file,
                    &routechain::registry(),
                    snapshot.clone(),
                    None,
                )
                .unwrap()
            })
        });
    };
    let p10k = providers(scaled(10_000));
    for terms in [scaled(10_000), scaled(100_000)] {
        bench(
            BenchmarkId::new("one-condition-terms", terms),
            &hostile::one_condition_terms(terms),
            &p10k,
        );
    }
    // The same shapes on keys every provider has, with glob and range patterns: each
    // pattern is decided over the key's distinct values (10,000 hosts), found through the
    // values sorted (a glob's literal prefix or suffix, a range's bounds), not by testing
    // every value against every pattern.
    let terms = scaled(100_000);
    bench(
        BenchmarkId::new("one-condition-glob-terms", terms),
        &hostile::one_condition_glob_terms(terms),
        &p10k,
    );
    let p100k = providers(scaled(100_000));
    bench(
        BenchmarkId::new("conditions-10k-globs", scaled(100_000)),
        &hostile::glob_conditions(scaled(10_000)),
        &p100k,
    );
    bench(
        BenchmarkId::new("conditions-10k", scaled(100_000)),
        &hostile::conditions(scaled(10_000)),
        &p100k,
    );
    group.finish();
}

criterion_group!(benches, per_request, preparation);
criterion_main!(benches);
