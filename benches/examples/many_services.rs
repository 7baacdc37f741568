//! Issue 20's "many services": one process holding 500 services of 200 providers each
//! (100,000 providers, one [`LiveChain`] per service with the full chain), and what an update
//! to one service costs there against the same update to a process holding that service
//! alone. Prints the resident memory (from `/proc/self/status`) before and after building
//! the services, and the median wall time of one provider added/removed in one service.
//!
//! Run: `cargo run --release -p routechain-benches --example many_services -- [services] [providers]`.

use std::time::Instant;

use routechain::core::Snapshot;
use routechain::live::{LiveChain, ProviderText, Update};
use routechain_testkit as testkit;

/// This process's resident set size in bytes (`VmRSS`).
fn rss() -> usize {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<usize>().ok())
        .map_or(0, |kb| kb * 1024)
}

fn service(lines: &[String]) -> LiveChain {
    let live = testkit::live_full_chain("many.chain.yaml", Snapshot::new(1, Vec::new()));
    live.apply(push(lines));
    live
}

fn push(lines: &[String]) -> Update {
    Update::Providers {
        origin: "many_services".into(),
        text: ProviderText::Urls(lines.to_vec()),
    }
}

/// The median wall time (ms) of `runs` updates of `live` alternating between `lines[..n]`
/// and `lines[..n + 1]` (the pushes built before the clock starts).
fn one_change(live: &LiveChain, lines: &[String], n: usize, runs: usize) -> f64 {
    let mut pushes: Vec<Update> = (0..runs)
        .map(|i| push(&lines[..if i % 2 == 0 { n + 1 } else { n }]))
        .collect();
    pushes.reverse();
    let mut times = Vec::with_capacity(runs);
    while let Some(update) = pushes.pop() {
        let t = Instant::now();
        std::hint::black_box(live.apply(update));
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

fn main() {
    let arg = |i: usize, default: usize| {
        std::env::args()
            .nth(i)
            .and_then(|a| a.parse().ok())
            .unwrap_or(default)
    };
    let (services, per) = (arg(1, 500), arg(2, 200));
    // Each service its own providers (distinct addresses), one spare line for the change.
    let all: Vec<String> = testkit::provider_lines(services * (per + 1), 7)
        .lines()
        .map(str::to_string)
        .collect();
    let alone = service(&all[..per]);
    let alone_ms = one_change(&alone, &all[..per + 1], per, 21);
    drop(alone);

    let before = rss();
    let t = Instant::now();
    let chains: Vec<LiveChain> = (0..services)
        .map(|s| service(&all[s * (per + 1)..s * (per + 1) + per]))
        .collect();
    let built = t.elapsed();
    let bytes = rss().saturating_sub(before);
    let s = services / 2;
    let many_ms = one_change(
        &chains[s],
        &all[s * (per + 1)..(s + 1) * (per + 1)],
        per,
        21,
    );
    println!(
        "{services} services x {per} providers: built in {:.2} s, resident +{:.1} MB ({:.0} B per provider)",
        built.as_secs_f64(),
        bytes as f64 / 1e6,
        bytes as f64 / (services * per) as f64
    );
    println!(
        "one provider added/removed in one service: {many_ms:.3} ms with {services} services, {alone_ms:.3} ms alone (median of 21)"
    );
}
