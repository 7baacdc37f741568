//! Issue 14's preparation targets timed once each, in wall time and in this process's CPU
//! time (user + system, from `/proc/self/stat`), so a figure taken on a shared machine can
//! be read without the other processes' load: on a loaded 2-core machine the wall time of
//! the criterion benchmark (`benches/hostile.rs`) is several times the CPU time.
//!
//! Run: `cargo run --release -p routechain-benches --example hostile_prepare`.

use std::sync::Arc;
use std::time::Instant;

use routechain::core::Snapshot;
use routechain::rules::ChainFile;

/// `n` providers as in `benches/hostile.rs`.
fn providers(n: usize) -> Arc<Snapshot> {
    let text: String = (0..n)
        .map(|i| {
            format!(
                "dubbo://10.{}.{}.{}:20880/s?region=r{}&env=e{}&dubbo.tag=t{}\n",
                (i >> 16) & 255,
                (i >> 8) & 255,
                i & 255,
                i % 10,
                i % 3,
                i % 7
            )
        })
        .collect();
    Arc::new(Snapshot::parse_lines(1, &text).expect("generated providers parse"))
}

/// This process's CPU time so far, in seconds (clock ticks of 10 ms).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command name (which is in parentheses).
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are fields 14 and 15 of the line: 12 and 13 after the name.
    (ticks(11) + ticks(12)) / 100.0
}

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
        let when: Vec<String> = (0..terms).map(|i| format!("k{i} = v{i}")).collect();
        let then: Vec<String> = (0..terms).map(|i| format!("p{i} = v{i}")).collect();
        let chain = format!(
            "routers:\n  - type: condition\n    rule:\n      conditions:\n        - \"{} => {}\"\n",
            when.join(" & "),
            then.join(" & ")
        );
        time(
            &format!("one-condition-terms/{terms} (10,000 providers)"),
            &chain,
            &p10k,
        );
    }
    let p100k = providers(100_000);
    let conditions: String = (0..10_000)
        .map(|i| {
            format!(
                "        - \"method = m{i} => region = r{} & env != e{}\"\n",
                i % 10,
                i % 3
            )
        })
        .collect();
    let chain =
        format!("routers:\n  - type: condition\n    rule:\n      conditions:\n{conditions}");
    time("conditions-10k (100,000 providers)", &chain, &p100k);
    let conditions: String = (0..10_000)
        .map(|i| {
            format!(
                "        - \"method = m{i} => host = 10.{}.*,10.*.{} & address != *:{}\"\n",
                i % 256,
                i % 256,
                20_000 + i
            )
        })
        .collect();
    let chain =
        format!("routers:\n  - type: condition\n    rule:\n      conditions:\n{conditions}");
    time("conditions-10k-globs (100,000 providers)", &chain, &p100k);
}
