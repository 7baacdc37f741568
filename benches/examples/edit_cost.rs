//! The cost of one provider change by edit against a full preparation, per router chain
//! (the condition and IDC-weight routers' `prepare_edit`), at `N` providers: each chain of
//! `testkit::CHAINS`, the full chain and a condition rule with a `$host` reference prepared
//! over `N` providers, then carried by
//! `ChainState::next` over one provider removed and one added (median of a few runs,
//! wall time and this process's CPU time).
//!
//! Run: `cargo run --release -p routechain-benches --example edit_cost -- 100000`.

use std::sync::Arc;

use routechain::core::Change;
use routechain_testkit::{self as testkit, time_median};

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000);
    let seed = 7;
    let snapshot = Arc::new(testkit::snapshot(n, seed));
    let added = testkit::providers(1, seed + 1);
    // One provider removed from the middle, one appended.
    let (next, edit) = snapshot.edited(2, vec![(n / 2) as u32], added);
    let next = Arc::new(next);
    let change = Change::<()>::edit(next.clone(), edit);
    let mut chains: Vec<(&str, String)> = testkit::CHAINS
        .iter()
        .map(|(name, text)| (*name, text()))
        .collect();
    chains.push(("full", testkit::full_chain_yaml()));
    // A `$name` reference to a key with a value per provider: the per-call form keeps a
    // value index of `host` (one set per provider), which an edit copies whole.
    chains.push((
        "condition ($host)",
        format!(
            "service: {}\nrouters:\n  - type: condition\n    rule:\n      conditions: \
             [\"method = search => host != $host & region = shanghai\"]\n",
            testkit::SERVICE
        ),
    ));
    for (name, text) in chains {
        let state = testkit::build_state(&text, snapshot.clone()).expect("prepares");
        let full = time_median(&format!("{name}: prepare at {n}"), 5, || {
            testkit::build_state(&text, next.clone()).expect("prepares")
        });
        let edited = time_median(
            &format!("{name}: edit (1 removed, 1 added) at {n}"),
            11,
            || state.next(&change).expect("the edit prepares"),
        );
        let state = state.next(&change).expect("the edit prepares");
        let derived: Vec<String> = state
            .edited_routers()
            .map(|(r, e)| format!("{r}{}", if e { "" } else { " (prepared)" }))
            .collect();
        println!(
            "{name}: edit / prepare = {:.3} ({})",
            edited / full,
            derived.join(", ")
        );
    }
}
