//! `hash_key` on v3.1 weighted destinations: a user keeps its destination, users split as
//! the weights say, a weight change moves only the users at the margin, and a v3.0 rule
//! refuses the field.

use std::sync::Arc;

use routechain_core::{CallState, ChainEntry, ChainState, Request, Snapshot, Trace, Url};

use super::ConditionRouter;

fn state(weights: (u32, u32), extra: &str) -> ChainState {
    let rule = format!(
        "configVersion: v3.1\n{extra}conditions:\n  - from: {{match: \"\"}}\n    to:\n      - {{match: \"env=blue\", weight: {}}}\n      - {{match: \"env=green\", weight: {}}}\n",
        weights.0, weights.1
    );
    let router = crate::test_support::build(ConditionRouter, "condition", Some(&rule))
        .unwrap_or_else(|e| panic!("{rule}: {e:?}"));
    let providers = "dubbo://10.0.0.1:1/svc?env=blue\ndubbo://10.0.0.2:1/svc?env=green\n";
    ChainState::new(
        None,
        Arc::new(Snapshot::parse_lines(1, providers).unwrap()),
        Url::parse("consumer://10.9.0.1/svc").unwrap(),
        vec![ChainEntry::new("condition", 140, router)],
    )
    .unwrap()
}

/// The destination (0 blue, 1 green) of each of `users` users.
fn sides(state: &ChainState, users: u32) -> Vec<usize> {
    let mut a = CallState::seeded(1);
    let mut b = CallState::seeded(2);
    (0..users)
        .map(|u| {
            let r = Request::new().with_attachment("uid", format!("u{u}"));
            state.route(&r, &mut a).unwrap();
            state.route(&r, &mut b).unwrap();
            let side = a.candidates.first().unwrap();
            assert_eq!(b.candidates.first(), Some(side), "user {u} keeps its side");
            side
        })
        .collect()
}

#[test]
fn weighted_destinations_are_sticky_with_a_hash_key() {
    let key = "hash_key: \"attachments[uid]\"\n";
    let before = sides(&state((70, 30), key), 20_000);
    let after = sides(&state((80, 30), key), 20_000);
    let blue = |s: &[usize]| s.iter().filter(|&&d| d == 0).count() as f64 / 200.0;
    assert!((blue(&before) - 70.0).abs() <= 1.0, "{}", blue(&before));
    assert!(
        (blue(&after) - 80.0 * 100.0 / 110.0).abs() <= 1.0,
        "{}",
        blue(&after)
    );
    let moved: Vec<_> = before.iter().zip(&after).filter(|(x, y)| x != y).collect();
    assert!(
        moved.iter().all(|(_, y)| **y == 0),
        "users move only to the raised side"
    );
    let moved = moved.len() as f64 / 200.0;
    assert!(moved <= 10.0, "{moved}% moved");
    let mut call = CallState::seeded(1);
    let mut trace = Trace::default();
    let s = state((70, 30), key);
    s.route_traced(
        &Request::new().with_attachment("uid", "u1"),
        &mut call,
        &mut trace,
    )
    .unwrap();
    assert!(
        trace.steps[0].reason.contains("of 100, sticky)"),
        "{}",
        trace.steps[0].reason
    );
}

#[test]
fn hash_key_is_refused_on_v30_and_checked_on_v31() {
    let v30 = "conditions: [\"=> env=blue\"]\nhash_key: \"attributes[user]\"\n";
    let errors = match crate::test_support::build(ConditionRouter, "condition", Some(v30)) {
        Err(e) => e,
        Ok(_) => panic!("accepted"),
    };
    assert_eq!(errors[0].path.to_string(), "hash_key");
    assert!(errors[0].message.contains("v3.1"), "{}", errors[0].message);
    let bad =
        "configVersion: v3.1\nhash_key: [\"user\"]\nconditions:\n  - to: [{match: \"env=blue\"}]\n";
    let errors = match crate::test_support::build(ConditionRouter, "condition", Some(bad)) {
        Err(e) => e,
        Ok(_) => panic!("accepted"),
    };
    assert_eq!(errors[0].path.to_string(), "hash_key[0]");
}
