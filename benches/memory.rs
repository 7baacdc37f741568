//! Memory of the routing state at 100,000 providers, measured with a counting global
//! allocator (`allocation-counter`): the bytes still allocated after building the snapshot,
//! and after preparing each chain over it (compiled rules + prepared indexes).
//!
//! Run: `cargo bench -p routechain-benches --bench memory`. Prints a table and writes
//! `target/criterion/memory.json` (under `$CARGO_TARGET_DIR` when set) for `scripts/bench_chart.py`. Kept apart from the timing
//! benchmarks so their allocations go through the system allocator, uncounted.

use std::sync::Arc;

use routechain_testkit as testkit;

const N: usize = 100_000;
const SEED: u64 = 42;

fn main() {
    // `cargo bench` passes `--bench`; a filter that does not name this binary skips it.
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args
        .iter()
        .any(|a| !a.starts_with("--") && !"memory".contains(a.as_str()))
    {
        return;
    }
    let providers = testkit::providers(N, SEED);
    let mut snapshot = None;
    let snapshot_info = allocation_counter::measure(|| {
        snapshot = Some(Arc::new(routechain::core::Snapshot::new(
            1,
            providers.clone(),
        )));
    });
    drop(providers);
    let snapshot = snapshot.expect("measured closure ran");
    let snapshot_bytes = snapshot_info.bytes_current.max(0) as u64;
    let reported = snapshot.memory_bytes() as u64;

    let mut rows = vec![("snapshot".to_string(), snapshot_bytes)];
    let mut chains: Vec<(String, String)> = testkit::CHAINS
        .iter()
        .map(|(name, yaml)| (name.to_string(), yaml()))
        .collect();
    chains.push(("full".to_string(), testkit::full_chain_yaml()));
    let mut full_state_bytes = None;
    for (name, yaml) in &chains {
        if !testkit::chain_available(yaml) {
            eprintln!("skipping {name}: a router type of this chain is not registered yet");
            continue;
        }
        let mut state = None;
        let info = allocation_counter::measure(|| {
            state = Some(testkit::build_state(yaml, snapshot.clone()));
        });
        match state {
            Some(Ok(state)) => {
                let bytes = info.bytes_current.max(0) as u64;
                rows.push((format!("state: {name}"), bytes));
                if name == "full" {
                    full_state_bytes = Some(bytes);
                }
                drop(state);
            }
            Some(Err(e)) => eprintln!("skipping {name}: {}", e.render()),
            None => {}
        }
    }

    println!("memory at {N} providers (bytes still allocated after building):");
    println!("{:<24} {:>14} {:>12}", "what", "bytes", "bytes/provider");
    for (what, bytes) in &rows {
        println!("{what:<24} {bytes:>14} {:>12.1}", *bytes as f64 / N as f64);
    }
    println!(
        "Snapshot::memory_bytes() = {reported} ({:.1}/provider)",
        reported as f64 / N as f64
    );
    let total = snapshot_bytes + full_state_bytes.unwrap_or(0);
    println!(
        "routing state (snapshot + full chain) = {total} bytes = {:.1} bytes/provider{}",
        total as f64 / N as f64,
        if full_state_bytes.is_none() {
            " (full chain not available: snapshot only)"
        } else {
            ""
        }
    );

    let json = serde_json::json!({
        "providers": N,
        "snapshot_bytes": snapshot_bytes,
        "snapshot_memory_bytes_reported": reported,
        "full_chain_state_bytes": full_state_bytes,
        "total_bytes_per_provider": total as f64 / N as f64,
        "rows": rows.iter().map(|(w, b)| serde_json::json!({"what": w, "bytes": b})).collect::<Vec<_>>(),
    });
    let dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"))
        .join("criterion");
    if std::fs::create_dir_all(&dir).is_ok() {
        let _ = std::fs::write(
            dir.join("memory.json"),
            serde_json::to_string_pretty(&json).unwrap_or_default(),
        );
    }
}
