//! Incremental provider updates route exactly as a fresh preparation.
//!
//! Every built-in router's chain is carried through seeded series of provider updates
//! (removals at random positions, appended providers) with `ChainState::with_edit`, and
//! after each update a mix of requests must route exactly as through the same chain
//! prepared from scratch over the same snapshot (`testkit::edits`). The routers listed in
//! [`DERIVING`] must also have derived their state by edit rather than prepared it again.

use routechain_testkit::{self as testkit, edits};

/// The chains checked: each built-in router alone with a rule that uses its features over
/// the testkit's providers, and the full chain.
fn chains() -> Vec<(&'static str, String)> {
    let mut chains: Vec<(&str, String)> = testkit::CHAINS
        .iter()
        .map(|(name, text)| (*name, text()))
        .collect();
    chains.push(("mesh", testkit::mesh_chain_yaml()));
    chains.push(("full", testkit::full_chain_yaml()));
    chains
}

/// The router names (as traces show them) that derive their state by edit.
const DERIVING: &[&str] = &[];

#[test]
fn every_chain_routes_after_each_edit_exactly_as_a_fresh_preparation() {
    let requests = testkit::requests(60, 3);
    for (name, chain) in chains() {
        for (seed, (n, max_change)) in [(0usize, 5usize), (1, 1), (64, 40), (300, 3), (130, 70)]
            .into_iter()
            .enumerate()
        {
            let updates = edits::churn(n, 6, max_change, seed as u64);
            let derived = edits::assert_edits_route_as_prepare(
                &chain,
                testkit::snapshot(n, seed as u64 + 11),
                &updates,
                &requests,
            );
            for (step, routers) in derived.iter().enumerate() {
                for want in DERIVING {
                    let present = chain.contains(&format!("type: {want}"));
                    assert!(
                        !present || routers.iter().any(|r| r.starts_with(want)),
                        "chain {name}, {n} providers, update {step}: router {want} prepared \
                         from scratch instead of deriving its state by edit ({routers:?})"
                    );
                }
            }
        }
    }
}
