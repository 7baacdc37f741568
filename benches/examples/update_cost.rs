//! Issue 20's update costs at scale, timed once each (median of a few runs) in wall time and
//! in this process's CPU time (so a figure taken on the shared machine can be read without
//! the other processes' load):
//!
//! - parsing `N` provider URLs;
//! - preparing each router of the full chain alone, and the full chain, over `N` providers;
//! - a [`LiveChain`] at `N` providers applying one provider added, then one removed
//!   (parse of the new URL, the edit of the snapshot, the routers', balancers' and health
//!   tables' edits, swap), with the list pushed as `N` URL texts (each looked up in the
//!   text cache) and as shared URLs (as a registry source pushes them), and a full
//!   provider-list replacement.
//!
//! Run: `cargo run --release -p routechain-benches --example update_cost -- 100000`.

use std::sync::Arc;
use std::time::Instant;

use routechain::core::{Snapshot, Url};
use routechain::live::{ProviderText, Update};
use routechain_testkit::{self as testkit, cpu_seconds};

/// Runs `f` `runs` times; prints and returns the median wall time in ms, and the total CPU.
fn time<T>(name: &str, runs: usize, mut f: impl FnMut() -> T) -> f64 {
    let mut walls = Vec::with_capacity(runs);
    let cpu = cpu_seconds();
    for _ in 0..runs {
        let t = Instant::now();
        let out = f();
        walls.push(t.elapsed().as_secs_f64() * 1e3);
        drop(out);
    }
    walls.sort_by(f64::total_cmp);
    let median = walls[walls.len() / 2];
    println!(
        "{name}: median {median:.2} ms (min {:.2}, max {:.2}) over {runs}, cpu {:.2} s total",
        walls[0],
        walls[walls.len() - 1],
        cpu_seconds() - cpu
    );
    median
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000);
    let seed = 7;
    let lines = testkit::provider_lines(n + 1, seed);
    let urls: Vec<String> = lines.lines().map(str::to_string).collect();
    time(&format!("parse {n} URLs"), 3, || {
        urls[..n]
            .iter()
            .map(|u| Url::parse(u).expect("valid"))
            .collect::<Vec<_>>()
    });
    let snapshot = Arc::new(testkit::snapshot(n, seed));
    for (name, chain) in testkit::CHAINS {
        let text = chain();
        time(&format!("prepare {name} alone at {n}"), 3, || {
            testkit::build_state(&text, snapshot.clone()).expect("prepares")
        });
    }
    let full = testkit::full_chain_yaml();
    time(&format!("prepare full chain at {n}"), 3, || {
        testkit::build_state(&full, snapshot.clone()).expect("prepares")
    });

    // A live chain at n providers: one added, one removed, as a registry pushes them (the
    // whole list, as text).
    let live = testkit::live_full_chain(
        "update_cost.chain.yaml",
        Snapshot::new(1, testkit::providers(n, seed)),
    );
    let push = |k: usize| Update::Providers {
        origin: "update_cost".into(),
        text: ProviderText::Urls(urls[..k].to_vec()),
    };
    // Warm the live chain's state from the text form once.
    live.apply(push(n));
    // The pushes are built before the clock starts: a source hands over a list it holds.
    let mut pushes: Vec<Update> = (0..6)
        .map(|i| push(if i % 2 == 0 { n + 1 } else { n }))
        .collect();
    pushes.reverse();
    let mut size = n;
    time(
        &format!("live: one provider added/removed at {n}, pushed as {n} URL texts"),
        6,
        || {
            size = if size == n { n + 1 } else { n };
            let reports = live.apply(pushes.pop().expect("six pushes"));
            assert_eq!(live.chain().load().snapshot().len(), size, "{reports:?}");
            reports
        },
    );
    // As a registry source pushes them (the ZooKeeper source reads its nodes by name on
    // its own thread): the providers kept are the URLs already serving, one is new.
    let serving: Vec<Arc<Url>> = live.chain().load().snapshot().providers().to_vec();
    let extra = Arc::new(Url::parse(&urls[n]).expect("valid"));
    let mut lists: Vec<Vec<Arc<Url>>> = (0..10)
        .map(|i| {
            let mut l = serving.clone();
            if i % 2 == 0 {
                l.push(extra.clone());
            }
            l
        })
        .collect();
    lists.reverse();
    let mut size = n;
    time(
        &format!("live: one provider added/removed at {n}, shared URLs (registry source)"),
        10,
        || {
            size = if size == n { n + 1 } else { n };
            let reports =
                live.apply_shared_providers("update_cost", lists.pop().expect("ten lists"));
            assert_eq!(live.chain().load().snapshot().len(), size, "{reports:?}");
            reports
        },
    );
    // The same with no router: what the live chain and the service do themselves (the
    // edit of the list and snapshot, the balancer tables, health, the swap).
    let bare = routechain::live::LiveChain::with_providers(
        routechain::rules::ChainFile::parse("bare.chain.yaml", "routers: []\n", None)
            .expect("an empty chain parses"),
        routechain::registry(),
        routechain::live::LiveOptions {
            consumer: Some(Arc::new(testkit::consumer())),
            ..routechain::live::LiveOptions::default()
        },
        Snapshot::from_shared(1, serving.clone()),
    )
    .expect("an empty chain builds");
    let mut lists: Vec<Vec<Arc<Url>>> = (0..10)
        .map(|i| {
            let mut l = serving.clone();
            if i % 2 == 0 {
                l.push(extra.clone());
            }
            l
        })
        .collect();
    lists.reverse();
    let mut size = n;
    time(
        &format!("live, no router: one provider added/removed at {n}, shared URLs"),
        10,
        || {
            size = if size == n { n + 1 } else { n };
            let reports =
                bare.apply_shared_providers("update_cost", lists.pop().expect("ten lists"));
            assert_eq!(bare.chain().load().snapshot().len(), size, "{reports:?}");
            reports
        },
    );
    let state = live.chain().load();
    let edited: Vec<String> = state
        .edited_routers()
        .map(|(name, edited)| format!("{name} {}", if edited { "edited" } else { "prepared" }))
        .collect();
    println!("live: routers after the last update: {}", edited.join(", "));
    let other: Vec<String> = testkit::provider_lines(n, seed + 1)
        .lines()
        .map(str::to_string)
        .collect();
    let mut lists: Vec<Update> = (0..4)
        .map(|i| Update::Providers {
            origin: "update_cost".into(),
            text: ProviderText::Urls(if i % 2 == 0 {
                other.clone()
            } else {
                urls[..n].to_vec()
            }),
        })
        .collect();
    time(&format!("live: whole list replaced at {n}"), 4, || {
        live.apply(lists.pop().expect("four lists"))
    });
}
