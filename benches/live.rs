#![allow(missing_docs)] // `criterion_group!` generates an undocumented function.
//! Live updates with Dubbo override rules (`configurators`): what an override rule costs
//! when it changes (parse, apply to every provider, prepare and swap), and what override
//! rules add to a provider-list update. Off the call path: calls only load the state.
//!
//! ```sh
//! cargo bench -p routechain-benches --bench live
//! ```

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use routechain::live::{LiveChain, LiveOptions, RuleEvent, RuleKey, Update};
use routechain::rules::ChainFile;
use routechain_testkit as testkit;

const SIZES: [usize; 2] = [1_000, 10_000];
const SEED: u64 = 7;

/// A consumer-side weight rule for one provider (v2.7), and a provider-side one matched on
/// a parameter (v3.0): both are checked against every provider.
fn rule(weight: u32) -> String {
    format!(
        "configVersion: v2.7\nscope: service\nkey: com.example.search.IndexService\nconfigs:\n\
         - side: consumer\n  providerAddresses: ['10.0.0.1:20880']\n  parameters: {{weight: '{weight}'}}\n\
         - side: consumer\n  parameters: {{timeout: '{weight}'}}\n"
    )
}

fn live(n: usize) -> LiveChain {
    let file = ChainFile::parse("bench", &testkit::full_chain_yaml(), None).expect("chain");
    LiveChain::with_providers(
        file,
        routechain::registry(),
        LiveOptions::default(),
        testkit::snapshot(n, SEED),
    )
    .expect("chain builds")
}

fn overrides(c: &mut Criterion) {
    for n in SIZES {
        let key = RuleKey::new("com.example.search.IndexService::", RuleKey::CONFIGURATORS);
        let update = |w: u32| Update::Rule {
            key: key.clone(),
            event: RuleEvent::Modified(rule(w)),
            origin: "bench".into(),
        };
        let chain = live(n);
        let mut group = c.benchmark_group("live-override-rule-change");
        group.sample_size(20);
        group.warm_up_time(Duration::from_millis(500));
        group.measurement_time(Duration::from_secs(3));
        let mut w = 100;
        group.bench_function(BenchmarkId::from_parameter(n), |b| {
            b.iter(|| {
                w = if w == 100 { 200 } else { 100 };
                black_box(chain.apply(update(w)))
            })
        });
        group.finish();

        // A provider-list change, without and with override rules in force.
        let lists = [testkit::providers(n, SEED), testkit::providers(n, SEED + 1)];
        for (name, with_rule) in [("no-overrides", false), ("two-override-items", true)] {
            let chain = live(n);
            if with_rule {
                chain.apply(update(300));
            }
            let mut group = c.benchmark_group(format!("live-providers-{name}"));
            group.sample_size(20);
            group.warm_up_time(Duration::from_millis(500));
            group.measurement_time(Duration::from_secs(3));
            let mut i = 0;
            group.bench_function(BenchmarkId::from_parameter(n), |b| {
                b.iter(|| {
                    i += 1;
                    black_box(chain.apply_providers("bench", lists[i % 2].clone()))
                })
            });
            group.finish();
        }
    }
}

criterion_group!(benches, overrides);
criterion_main!(benches);
