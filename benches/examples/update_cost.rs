//! Update costs at scale, timed once each (median of a few runs) in wall time and
//! in this process's CPU time (so a figure taken on the shared machine can be read without
//! the other processes' load):
//!
//! - parsing `N` provider URLs;
//! - preparing each router of the full chain alone, and the full chain, over `N` providers,
//!   and the balancer's per-snapshot tables (the rest of a full rebuild of a service);
//! - a [`LiveChain`] at `N` providers applying one provider added, then one removed
//!   (parse of the new URL, the edit of the snapshot, the routers', balancers' and health
//!   tables' edits, swap), with the list pushed as `N` URL texts (each looked up in the
//!   text cache; each push after a pause in which the previous one's leftovers are freed,
//!   as a source pushes, and back to back) and as shared URLs (as a registry source pushes
//!   them), with no router, and a full provider-list replacement;
//! - each router's incremental update ([`ChainState::with_edit`], one provider removed and
//!   one added at `N`) against its preparation from scratch, for the single-router chains
//!   and the full chain (see [`edit_costs`]).
//!
//! Run: `cargo run --release -p routechain-benches --example update_cost -- 100000`.

use std::sync::Arc;

use routechain::core::{ChainState, DegradedSet, Snapshot, Url};
use routechain::live::{ProviderText, Update};
use routechain_testkit::{self as testkit, time_median, time_median_settled};

/// Times ten pushes of `serving` to `live` as shared URLs (as a registry source pushes
/// them), alternately with and without `extra` appended: one provider added, then removed.
fn time_shared_pushes(
    name: &str,
    live: &routechain::live::LiveChain,
    serving: &[Url],
    extra: &Url,
) {
    let n = serving.len();
    let mut lists: Vec<Vec<Url>> = (0..10)
        .map(|i| {
            let mut l = serving.to_vec();
            if i % 2 == 0 {
                l.push(extra.clone());
            }
            l
        })
        .collect();
    lists.reverse();
    let mut size = n;
    time_median(name, 10, || {
        size = if size == n { n + 1 } else { n };
        let reports = live.apply_providers("update_cost", lists.pop().expect("ten lists"));
        assert_eq!(live.chain().load().snapshot().len(), size, "{reports:?}");
        reports
    });
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000);
    let seed = 7;
    let lines = testkit::provider_lines(n + 1, seed);
    let urls: Vec<String> = lines.lines().map(str::to_string).collect();
    time_median(&format!("parse {n} URLs"), 3, || {
        urls[..n]
            .iter()
            .map(|u| Url::parse(u).expect("valid"))
            .collect::<Vec<_>>()
    });
    let snapshot = Arc::new(testkit::snapshot(n, seed));
    for (name, chain) in testkit::CHAINS {
        let text = chain();
        time_median(&format!("prepare {name} alone at {n}"), 3, || {
            testkit::build_state(&text, snapshot.clone()).expect("prepares")
        });
    }
    let full = testkit::full_chain_yaml();
    time_median(&format!("prepare full chain at {n}"), 3, || {
        testkit::build_state(&full, snapshot.clone()).expect("prepares")
    });
    // What a full rebuild of a service adds to the chain's preparation: the balancer's
    // per-snapshot tables (weights and weight classes, in-flight counters) for the default
    // balancing.
    let balance = routechain::balance::BalanceConfig::default();
    time_median(
        &format!("balancer tables (default balancing) at {n}"),
        3,
        || routechain::balance::SnapshotBalance::new(&snapshot, &balance),
    );

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
    // Each is applied after a pause, as a source pushes (when a provider comes or goes):
    // what the previous push left (its 100,000 strings, the replaced state) is freed on the
    // drop thread meanwhile, not on the other core while this push runs.
    let mut size = n;
    for (label, pause) in [
        ("", std::time::Duration::from_millis(100)),
        (", back to back", std::time::Duration::ZERO),
    ] {
        let mut pushes: Vec<Update> = (0..6)
            .map(|i| push(if i % 2 == 0 { n + 1 } else { n }))
            .collect();
        pushes.reverse();
        time_median_settled(
            &format!("live: one provider added/removed at {n}, pushed as {n} URL texts{label}"),
            6,
            pause,
            || {
                size = if size == n { n + 1 } else { n };
                let reports = live.apply(pushes.pop().expect("six pushes"));
                assert_eq!(live.chain().load().snapshot().len(), size, "{reports:?}");
                reports
            },
        );
    }
    // As a registry source pushes them (the ZooKeeper source reads its nodes by name on
    // its own thread): the providers kept are the URLs already serving, one is new.
    let serving: Vec<Url> = live.chain().load().snapshot().providers().to_vec();
    let extra = Url::parse(&urls[n]).expect("valid");
    time_shared_pushes(
        &format!("live: one provider added/removed at {n}, shared URLs (registry source)"),
        &live,
        &serving,
        &extra,
    );
    // The same with no router: what the live chain and the service do themselves (the
    // edit of the list and snapshot, the balancer tables, health, the swap).
    let bare = testkit::live_bare_chain(Snapshot::from_shared(1, serving.clone()));
    time_shared_pushes(
        &format!("live, no router: one provider added/removed at {n}, shared URLs"),
        &bare,
        &serving,
        &extra,
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
    time_median(&format!("live: whole list replaced at {n}"), 4, || {
        live.apply(lists.pop().expect("four lists"))
    });

    edit_costs(n, seed, &snapshot);
}

/// A tag rule with address and `match` tags (as `tests/tests/edits.rs` checks).
const TAG_RULE_YAML: &str = "configVersion: v3.0
force: false
tags:
  - name: gray
    addresses: ['10.0.0.1-20', '10.0.1.*:20880']
  - name: canary|blue
    match:
      - {key: env, value: {exact: staging}}
  - name: v2
    match:
      - {key: version, value: {exact: '2.0.0'}}
";

/// Incremental updates: for each single-router chain and the full chain, the time of
/// [`ChainState::with_edit`] carrying the state over `snapshot` to one with a provider
/// removed (in the middle) and one added (at the end), next to the chain's preparation
/// from scratch over that snapshot. A router without `prepare_edit` prepares from scratch
/// inside `with_edit`; the line says which routers derived.
fn edit_costs(n: usize, seed: u64, snapshot: &Arc<Snapshot>) {
    let mut chains: Vec<(String, String)> = testkit::CHAINS
        .iter()
        .map(|(name, text)| (name.to_string(), text()))
        .collect();
    chains.push(("mesh".into(), testkit::mesh_chain_yaml()));
    chains.push((
        "tag (rule with addresses and match)".into(),
        testkit::chain_of(&[("tag", 100, Some(TAG_RULE_YAML))]),
    ));
    chains.push((
        "affinity".into(),
        testkit::chain_of(&[(
            "affinity",
            130,
            Some("configVersion: v3.1\naffinityAware: {key: region, ratio: 40}\n"),
        )]),
    ));
    chains.push(("mock".into(), testkit::chain_of(&[("mock", -100, None)])));
    chains.push(("full chain".into(), testkit::full_chain_yaml()));
    let added = testkit::providers(1, seed + 2).remove(0);
    let (next, edit) = snapshot.edited(snapshot.generation() + 1, vec![n as u32 / 2], vec![added]);
    let next = Arc::new(next);
    for (name, text) in chains {
        let state: ChainState = testkit::build_state(&text, snapshot.clone()).expect("prepares");
        let prepare = time_median(&format!("prepare {name} at {n}"), 3, || {
            testkit::build_state(&text, next.clone()).expect("prepares")
        });
        let mut derived = Vec::new();
        let edited = time_median(
            &format!("edit (1 removed + 1 added) {name} at {n}"),
            7,
            || {
                let degraded = Arc::new(DegradedSet::new(next.len()));
                let s = state
                    .with_edit(next.clone(), &edit, degraded)
                    .expect("the edit prepares");
                derived = s
                    .edited_routers()
                    .map(|(r, e)| format!("{r}: {}", if e { "derived" } else { "prepared" }))
                    .collect();
                s
            },
        );
        println!(
            "  {name}: prepare {prepare:.2} ms -> edit {edited:.3} ms ({:.0}x) [{}]",
            prepare / edited.max(1e-6),
            derived.join(", ")
        );
    }
}
