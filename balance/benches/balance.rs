//! The cost of `Cluster::select` (route + balance) per balancer, against routing alone, at
//! 100 / 1,000 / 10,000 providers with a routed set of about half the providers.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{BenchmarkId, Criterion, criterion_main};
use routechain_balance::*;
use routechain_core::*;

fn service(n: usize, kind: LoadBalanceKind) -> Cluster {
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
    let snapshot = Arc::new(Snapshot::parse_lines(1, &text).unwrap());
    let zone0 = BitSet::from_fn(n, |i| i % 2 == 0);
    let keep = ChainEntry::new(
        "zone",
        0,
        Arc::new(router_fn("zone", move |_, c| c.and_assign(&zone0))),
    );
    let state = ChainState::new(None, snapshot, Url::empty(), vec![keep]).unwrap();
    let config = ServiceConfig {
        balance: BalanceConfig::new(BalancerSpec::new(kind)),
        ..ServiceConfig::default()
    };
    Cluster::new(state, config)
}

fn bench(c: &mut Criterion) {
    let request = Request::new()
        .with_method("get")
        .with_argument(serde_json::json!("user-42"));
    for n in [100, 1_000, 10_000] {
        let mut group = c.benchmark_group(format!("select/{n}"));
        {
            let svc = service(n, LoadBalanceKind::Random);
            let mut call = Caller::seeded(1);
            group.bench_function("route only", |b| {
                b.iter(|| {
                    let published = svc.load();
                    published
                        .state()
                        .route(black_box(&request), &mut call)
                        .unwrap();
                })
            });
        }
        for kind in LoadBalanceKind::ALL {
            let svc = service(n, kind);
            let mut call = Caller::seeded(1);
            group.bench_with_input(BenchmarkId::from_parameter(kind), &kind, |b, _| {
                b.iter(|| {
                    svc.select(black_box(&request), &[], &mut call)
                        .unwrap()
                        .index()
                })
            });
        }
        group.finish();
    }
}

/// The criterion group (its generated function carries no docs).
mod group {
    #![allow(missing_docs)]
    criterion::criterion_group!(benches, super::bench);
}

criterion_main!(group::benches);
