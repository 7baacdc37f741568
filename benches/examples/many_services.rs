//! Many services: one process holding 500 services of 200 providers each
//! (100,000 providers, one [`LiveChain`] per service with the full chain, all built from one
//! [`ChainTemplate`]), and what an update to one service costs there against the same update
//! to a process holding that service alone. Prints the memory the services hold: resident
//! (from `/proc/self/status`) and counted by the allocator (the bytes still allocated, as
//! `benches/memory.rs` counts the 1,000,000-provider figure), and the median wall time of
//! one provider added/removed in one service.
//!
//! Then where the memory goes: the same build in fresh processes (this program run again
//! with `--part`), each reporting its resident growth and its allocated bytes, so that no
//! part reuses memory another freed:
//!
//! - `urls`: the providers' parsed URLs alone (one `Url` block each, interned strings included);
//! - `empty`: the live chains with no provider, built from one template (what a service
//!   costs whatever its size);
//! - `separate`: the same, each service parsing its own chain file and building its own
//!   registry (as `testkit::live_full_chain` does: the cost a template saves);
//! - `distinct`: the same from one template, each service for a reference of its own (an
//!   interface per service, as a consumer's references are: each compiles its routers);
//! - `shared`: the parsed URLs and the live chains fed them as shared URLs (as the
//!   ZooKeeper source pushes them: no text cache);
//! - `text`: the live chains fed their lists as URL texts (the first figure above).
//!
//! Run: `cargo run --release -p routechain-benches --example many_services -- [services] [providers]`.

use std::time::Instant;

use routechain::core::{Snapshot, Url};
use routechain::live::{ChainTemplate, LiveChain, LiveOptions, ProviderText, ServiceKey, Update};
use routechain::rules::ChainFile;
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

/// The full chain, parsed and compiled once for every service.
fn template() -> ChainTemplate {
    let file = ChainFile::parse("many.chain.yaml", &testkit::full_chain_yaml(), None)
        .expect("the full chain parses");
    ChainTemplate::new(file, routechain::registry()).expect("the full chain builds")
}

/// A service of `template` with no provider, with its own consumer URL.
fn empty(template: &ChainTemplate) -> LiveChain {
    template
        .live_chain(LiveOptions {
            consumer: Some(testkit::consumer()),
            ..LiveOptions::default()
        })
        .expect("the full chain builds")
}

fn service(template: &ChainTemplate, lines: &[String]) -> LiveChain {
    let live = empty(template);
    live.apply(push(lines));
    live
}

/// Runs `f`, returning its value and the bytes it left allocated (on this thread: the live
/// chains free what they replace on the applying thread at these sizes).
fn counted<T>(f: impl FnOnce() -> T) -> (T, i64) {
    let mut out = None;
    let info = allocation_counter::measure(|| out = Some(f()));
    (out.expect("measured closure ran"), info.bytes_current)
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

/// The lines of service `s` (each service its own providers, distinct addresses, and one
/// spare line after them for the change).
fn lines_of(all: &[String], s: usize, per: usize) -> &[String] {
    &all[s * (per + 1)..s * (per + 1) + per]
}

/// One part of the breakdown, built in this (fresh) process: prints its resident growth and
/// the bytes it left allocated.
fn part(name: &str, all: &[String], services: usize, per: usize) {
    let template = template();
    // Let anything freed off the update path go first.
    let settle = || std::thread::sleep(std::time::Duration::from_millis(300));
    let before = rss();
    let (keep, allocated) = counted(|| {
        let mut keep: Vec<Box<dyn std::any::Any>> = Vec::new();
        match name {
            "urls" | "shared" => {
                let urls: Vec<Vec<Url>> = (0..services)
                    .map(|s| {
                        lines_of(all, s, per)
                            .iter()
                            .map(|l| Url::parse(l).expect("valid"))
                            .collect()
                    })
                    .collect();
                if name == "shared" {
                    for list in &urls {
                        let live = empty(&template);
                        live.apply_providers("many_services", list.clone());
                        keep.push(Box::new(live));
                    }
                }
                keep.push(Box::new(urls));
            }
            "empty" => {
                for _ in 0..services {
                    keep.push(Box::new(empty(&template)));
                }
            }
            "distinct" => {
                for s in 0..services {
                    let reference = ServiceKey::parse(&format!("com.example.Service{s}"));
                    let options = LiveOptions {
                        consumer: Some(testkit::consumer()),
                        ..LiveOptions::default()
                    };
                    let live = template.live_chain_for(&reference, options);
                    keep.push(Box::new(live.expect("the full chain builds")));
                }
            }
            "separate" => {
                for _ in 0..services {
                    keep.push(Box::new(testkit::live_full_chain(
                        "many.chain.yaml",
                        Snapshot::new(1, Vec::new()),
                    )));
                }
            }
            _ => {
                for s in 0..services {
                    keep.push(Box::new(service(&template, lines_of(all, s, per))));
                }
            }
        }
        keep
    });
    settle();
    println!("part {name} {} {allocated}", rss().saturating_sub(before));
    drop(keep);
}

/// Runs this program again with `--part name` and returns the resident growth and the
/// allocated bytes it reports.
fn measure_part(name: &str, services: usize, per: usize) -> Option<(f64, f64)> {
    let out = std::process::Command::new(std::env::current_exe().ok()?)
        .args([
            services.to_string(),
            per.to_string(),
            "--part".into(),
            name.into(),
        ])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix(&format!("part {name} ")))?;
    let mut figures = line.split_whitespace().map(|b| b.parse::<f64>().ok());
    Some((figures.next()??, figures.next()??))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg =
        |i: usize, default: usize| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(default);
    let (services, per) = (arg(1, 500), arg(2, 200));
    let all: Vec<String> = testkit::provider_lines(services * (per + 1), 7)
        .lines()
        .map(str::to_string)
        .collect();
    if args.get(3).map(String::as_str) == Some("--part") {
        part(
            args.get(4).map_or("text", String::as_str),
            &all,
            services,
            per,
        );
        return;
    }
    let template = template();
    let alone = service(&template, lines_of(&all, 0, per));
    let alone_ms = one_change(&alone, &all[..per + 1], per, 21);
    drop(alone);

    let before = rss();
    let t = Instant::now();
    let (chains, allocated) = counted(|| {
        (0..services)
            .map(|s| service(&template, lines_of(&all, s, per)))
            .collect::<Vec<LiveChain>>()
    });
    let built = t.elapsed();
    let bytes = rss().saturating_sub(before);
    let s = services / 2;
    let many_ms = one_change(
        &chains[s],
        &all[s * (per + 1)..(s + 1) * (per + 1)],
        per,
        21,
    );
    let n = (services * per) as f64;
    println!(
        "{services} services x {per} providers: built in {:.2} s, resident +{:.1} MB ({:.0} B per provider), allocated {:.1} MB ({:.0} B per provider)",
        built.as_secs_f64(),
        bytes as f64 / 1e6,
        bytes as f64 / n,
        allocated as f64 / 1e6,
        allocated as f64 / n
    );
    println!(
        "one provider added/removed in one service: {many_ms:.3} ms with {services} services, {alone_ms:.3} ms alone (median of 21)"
    );
    drop(chains);

    let names = ["urls", "empty", "separate", "distinct", "shared", "text"];
    let parts: Vec<Option<(f64, f64)>> = names
        .iter()
        .map(|p| measure_part(p, services, per))
        .collect();
    let [
        Some(urls),
        Some(empty),
        Some(separate),
        Some(distinct),
        Some(shared),
        Some(text),
    ] = parts[..]
    else {
        println!("breakdown: a part did not run ({parts:?})");
        return;
    };
    println!(
        "where it goes (each part in a fresh process), per provider: resident growth, allocated bytes"
    );
    let rows = [
        (
            "the providers' parsed URLs (Url blocks, interned strings)",
            urls,
        ),
        (
            "each live chain with no provider, from one template (per service / providers per service)",
            empty,
        ),
        (
            "the rest of a live chain (snapshot, routers, balancer, health, lists)",
            (shared.0 - urls.0 - empty.0, shared.1 - urls.1 - empty.1),
        ),
        (
            "the text cache (lists pushed as text; each text known by a hash)",
            (text.0 - shared.0, text.1 - shared.1),
        ),
        ("total, lists pushed as text", text),
    ];
    for (what, (resident, allocated)) in rows {
        println!("  {:>7.0} B {:>7.0} B  {what}", resident / n, allocated / n);
    }
    let kb = |b: f64| b / services as f64 / 1e3;
    println!(
        "  a live chain with no provider: {:.1} KB resident, {:.1} KB allocated per service from one template; {:.1} KB, {:.1} KB each for a reference of its own; {:.1} KB, {:.1} KB each built separately",
        kb(empty.0),
        kb(empty.1),
        kb(distinct.0),
        kb(distinct.1),
        kb(separate.0),
        kb(separate.1),
    );
}
