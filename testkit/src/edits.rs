//! The check that incremental provider updates route exactly as a fresh preparation.
//!
//! [`assert_edits_route_as_prepare`] carries a chain through a series of provider edits
//! with `ChainState::next` (each router's `prepare_edit`) and, after each, routes a
//! set of requests through it and through the same chain prepared from scratch over the
//! same snapshot, with the same degraded providers and the same random seed: the routed
//! sets and outcomes must be equal. Used by `tests/tests/edits.rs` for every built-in
//! router.

use std::sync::Arc;

use routechain::core::{CallState, Change, DegradedSet, Request, Snapshot, Url};

/// One update: the old positions removed and the providers appended.
#[derive(Debug, Clone)]
pub struct Churn {
    /// Positions in the snapshot before this update.
    pub removed: Vec<u32>,
    /// New providers, appended.
    pub added: Vec<Url>,
}

/// A seeded series of `steps` updates over a snapshot of `n` providers: each removes up to
/// `max_change` providers at seeded positions and adds up to `max_change` generated ones
/// (from the testkit's generator with another seed, so their parameters vary the same way).
pub fn churn(n: usize, steps: usize, max_change: usize, seed: u64) -> Vec<Churn> {
    let mut rng = crate::Seeded::new(seed ^ 0xed17);
    let mut len = n;
    (0..steps)
        .map(|step| {
            let removes = rng.below(max_change as u64 + 1) as usize;
            let removed = (0..removes.min(len))
                .map(|_| rng.below(len.max(1) as u64) as u32)
                .collect::<Vec<_>>();
            let adds = rng.below(max_change as u64 + 1) as usize;
            let added = crate::providers(adds, seed.wrapping_add(1000 + step as u64));
            let mut distinct = removed.clone();
            distinct.sort_unstable();
            distinct.dedup();
            len = len - distinct.len() + added.len();
            Churn { removed, added }
        })
        .collect()
}

/// Builds `chain_yaml` over `base`, applies each update with `ChainState::next`,
/// and asserts after each that every request routes exactly as through the chain prepared
/// from scratch over the same snapshot (every 7th provider degraded in both, the same
/// seed per request). Returns, per update, the routers whose state was derived by edit
/// (the others prepared from scratch).
pub fn assert_edits_route_as_prepare(
    chain_yaml: &str,
    base: Snapshot,
    updates: &[Churn],
    requests: &[Request],
) -> Vec<Vec<String>> {
    let mut state = crate::build_state(chain_yaml, Arc::new(base)).expect("the chain prepares");
    let mut derived = Vec::new();
    for (step, update) in updates.iter().enumerate() {
        let added: Vec<Url> = update.added.to_vec();
        let (snapshot, edit) = state.snapshot().edited(
            state.snapshot().generation() + 1,
            update.removed.clone(),
            added,
        );
        let snapshot = Arc::new(snapshot);
        // The degraded set follows the edit; both chains' sets are set the same way below.
        state = state
            .next(&Change::<()>::edit(snapshot.clone(), edit))
            .unwrap_or_else(|e| panic!("update {step}: the edit does not prepare: {e}"));
        let fresh = crate::build_state(chain_yaml, snapshot.clone())
            .unwrap_or_else(|e| panic!("update {step}: the chain does not prepare: {e}"));
        mark_degraded(state.degraded(), step);
        mark_degraded(fresh.degraded(), step);
        for (k, request) in requests.iter().enumerate() {
            let mut a = CallState::seeded(k as u64 + 1);
            let mut b = CallState::seeded(k as u64 + 1);
            let ra = state.route(request, &mut a);
            let rb = fresh.route(request, &mut b);
            assert_eq!(
                ra,
                rb,
                "update {step} ({} removed, {} added, {} providers): request {k} {request:?}: \
                 the edited chain's outcome differs from a fresh preparation's",
                update.removed.len(),
                update.added.len(),
                snapshot.len()
            );
            assert_eq!(
                a.candidates.iter().collect::<Vec<_>>(),
                b.candidates.iter().collect::<Vec<_>>(),
                "update {step} ({} removed, {} added, {} providers): request {k} {request:?}: \
                 the edited chain routes differently from a fresh preparation",
                update.removed.len(),
                update.added.len(),
                snapshot.len()
            );
        }
        derived.push(
            state
                .edited_routers()
                .filter(|(_, edited)| *edited)
                .map(|(name, _)| name.to_string())
                .collect(),
        );
    }
    derived
}

/// Marks every 7th provider degraded (shifted by the step, so the marks move) and clears
/// the others' marks.
fn mark_degraded(set: &DegradedSet, step: usize) {
    for i in 0..set.len() {
        if i >= step % 7 && (i - step % 7) % 7 == 0 {
            set.mark(i);
        } else {
            set.clear(i);
        }
    }
}
