//! The hostile-rule preparation targets (`benches/hostile.rs`) timed once each, in wall time
//! and in this process's CPU time (user + system, from `/proc/self/stat`), so a figure taken
//! on a shared machine can be read without the other processes' load: on a loaded 2-core
//! machine the wall time of the criterion benchmark is several times the CPU time.
//!
//! Run: `cargo run --release -p routechain-benches --example hostile_prepare`.

use std::sync::Arc;
use std::time::Instant;

use routechain::core::Snapshot;
use routechain::rules::ChainFile;
use routechain_testkit::cpu_seconds;
use routechain_testkit::hostile::{self, providers};

fn time(name: &str, chain: &str, snapshot: &Arc<Snapshot>) {
    let file = ChainFile::parse("bench.chain.yaml", chain, None).expect("the chain parses");
    for _ in 0..3 {
        let (wall, cpu) = (Instant::now(), cpu_seconds());
        let state = routechain::rules::load::build_state(
            &file,
            &routechain::registry(),
            snapshot.clone(),
            None,
        )
        .expect("the chain prepares");
        println!(
            "{name}: wall {:.3} s, cpu {:.2} s",
            wall.elapsed().as_secs_f64(),
            cpu_seconds() - cpu
        );
        drop(state);
    }
}

fn main() {
    let p10k = providers(10_000);
    for terms in [10_000, 100_000] {
        time(
            &format!("one-condition-terms/{terms} (10,000 providers)"),
            &hostile::one_condition_terms(terms),
            &p10k,
        );
    }
    let p100k = providers(100_000);
    time(
        "conditions-10k (100,000 providers)",
        &hostile::conditions(10_000),
        &p100k,
    );
    time(
        "conditions-10k-globs (100,000 providers)",
        &hostile::glob_conditions(10_000),
        &p100k,
    );
}
