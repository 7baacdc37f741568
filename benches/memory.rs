//! Memory of the routing state at 100,000 and 1,000,000 providers, measured with a counting
//! global allocator (`allocation-counter`): the bytes still allocated after parsing the
//! providers into a snapshot (their URLs, and what the process-wide interner gained), and
//! after preparing each chain over it (compiled rules + prepared indexes).
//!
//! Checks that `Snapshot::memory_bytes()` plus the interner's growth
//! (`Url::interned().heap_bytes`) agrees with the allocator to the byte, and
//! exits with an error if not.
//!
//! Run: `cargo bench -p routechain-benches --bench memory` (both sizes; 10,000 when run by
//! `cargo test`, which does not pass `--bench`), or
//! `cargo bench -p routechain-benches --bench memory -- memory 100000` (the sizes given).
//! Prints a table per size and writes `target/criterion/memory.json` (under
//! `$CARGO_TARGET_DIR` when set; the largest size at the top level, for
//! `scripts/bench_chart.py`, every size under `"sizes"`). Kept apart from the timing
//! benchmarks so their allocations go through the system allocator, uncounted.

use std::sync::Arc;

use routechain::core::Url;
use routechain_testkit as testkit;

const SIZES: [usize; 2] = [100_000, 1_000_000];
const SEED: u64 = 42;

fn main() {
    // `cargo bench` passes `--bench`; a filter that does not name this binary skips it.
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut sizes: Vec<usize> = args.iter().filter_map(|a| a.parse().ok()).collect();
    if args.iter().any(|a| {
        !a.starts_with("--") && a.parse::<usize>().is_err() && !"memory".contains(a.as_str())
    }) {
        return;
    }
    if sizes.is_empty() {
        // `cargo test --all-targets` runs this binary without `--bench`: a small size keeps
        // the agreement check in the test suite without a debug build parsing a million URLs.
        sizes = if args.iter().any(|a| a == "--bench") {
            SIZES.to_vec()
        } else {
            vec![10_000]
        };
    }
    // The interner's table and arc-swap's per-thread state exist before the first
    // measurement (process-wide, allocated once).
    let _ = routechain::core::Url::parse(testkit::CONSUMER);

    let mut reports = Vec::new();
    let mut agreed = true;
    for &n in &sizes {
        let (report, ok) = measure(n);
        agreed &= ok;
        reports.push(report);
    }
    let mut json = reports.last().cloned().unwrap_or_default();
    json["sizes"] = serde_json::Value::Array(reports);
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
    if !agreed {
        eprintln!("Snapshot::memory_bytes() + interner growth disagrees with the allocator");
        std::process::exit(1);
    }
}

/// Measures `n` providers; returns the JSON report and whether the accounting agreed.
fn measure(n: usize) -> (serde_json::Value, bool) {
    let interner_before = Url::interned().heap_bytes;
    let mut snapshot = None;
    let snapshot_info = allocation_counter::measure(|| {
        snapshot = Some(testkit::snapshot(n, SEED));
    });
    // (The `Arc` is allocated outside the measurement: the snapshot's own bytes are measured.)
    let snapshot = Arc::new(snapshot.expect("measured closure ran"));
    let snapshot_bytes = snapshot_info.bytes_current.max(0) as u64;
    let interner_growth = Url::interned().heap_bytes - interner_before;
    let reported = (snapshot.memory_bytes() + interner_growth) as u64;

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

    println!("memory at {n} providers (bytes still allocated after building):");
    println!("{:<24} {:>14} {:>12}", "what", "bytes", "bytes/provider");
    for (what, bytes) in &rows {
        println!("{what:<24} {bytes:>14} {:>12.1}", *bytes as f64 / n as f64);
    }
    println!(
        "Snapshot::memory_bytes() = {} + interner growth {interner_growth} = {reported} \
         (allocator: {snapshot_bytes}; interned strings in the process: {})",
        snapshot.memory_bytes(),
        Url::interned().strings
    );
    let total = snapshot_bytes + full_state_bytes.unwrap_or(0);
    println!(
        "routing state (snapshot + full chain) = {total} bytes = {:.1} bytes/provider{}\n",
        total as f64 / n as f64,
        if full_state_bytes.is_none() {
            " (full chain not available: snapshot only)"
        } else {
            ""
        }
    );
    let json = serde_json::json!({
        "providers": n,
        "snapshot_bytes": snapshot_bytes,
        "snapshot_memory_bytes_reported": reported,
        "interner_growth_bytes": interner_growth,
        "full_chain_state_bytes": full_state_bytes,
        "total_bytes_per_provider": total as f64 / n as f64,
        "rows": rows.iter().map(|(w, b)| serde_json::json!({"what": w, "bytes": b})).collect::<Vec<_>>(),
    });
    (json, reported == snapshot_bytes)
}
