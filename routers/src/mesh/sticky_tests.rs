//! `hash_key` on mesh weights: a user keeps its subset, users split as the weights say, a
//! weight change moves only the users at the margin, a request without the value draws at
//! random, and a bad key is a located error.

use routechain_core::{BitSet, FastRng, Request, RouteContext, Snapshot};
use serde_json::json;

use super::*;

fn rule(weights: (u32, u32)) -> String {
    format!(
        "kind: DestinationRule\nmetadata: {{ name: shop }}\nspec:\n  subsets:\n    - {{ name: blue, labels: {{ env: blue }} }}\n    - {{ name: green, labels: {{ env: green }} }}\n---\nkind: VirtualService\nmetadata: {{ name: shop }}\nspec:\n  dubbo:\n    - routedetail:\n        - name: split\n          route:\n            - {{ weight: {}, destination: {{ subset: blue }} }}\n            - {{ weight: {}, destination: {{ subset: green }} }}\n",
        weights.0, weights.1
    )
}

fn compile(entry: &Value, rule: &str) -> Result<MeshRule, Vec<RuleError>> {
    let doc = YamlDoc::parse_stream("r", rule).unwrap();
    let ep = FieldPath::root().key("routers").index(0);
    let root = FieldPath::root();
    let spec = RouterSpec {
        type_name: "mesh",
        entry: routechain_core::RuleDoc::new(entry, &ep),
        rule: doc.rule_doc(&root),
        base_dir: None,
        service: None,
    };
    check(&spec).result
}

fn snapshot() -> Snapshot {
    Snapshot::parse_lines(
        1,
        "dubbo://10.0.0.1:1/s?application=shop&env=blue\ndubbo://10.0.0.2:1/s?application=shop&env=green\n",
    )
    .unwrap()
}

/// The provider (0 blue, 1 green) `request` is routed to, and the explain text, with the
/// call's random source seeded by `seed`.
fn side(
    prepared: &PreparedMesh,
    snapshot: &Snapshot,
    request: &Request,
    seed: u64,
) -> (usize, String) {
    let mut candidates = BitSet::full(snapshot.len());
    let mut rng = FastRng::seeded(seed);
    let mut builder = RouteContext::builder(request, snapshot)
        .rng(&mut rng)
        .explain(true);
    prepared.route(&mut builder.context(), &mut candidates);
    let got: Vec<usize> = candidates.iter().collect();
    assert_eq!(got.len(), 1, "{got:?}");
    (got[0], builder.reason().to_string())
}

fn sides(weights: (u32, u32), users: u32) -> Vec<usize> {
    let entry = json!({"type": "mesh", "hash_key": "attachments[uid]"});
    let rule = compile(&entry, &rule(weights)).unwrap();
    let snapshot = snapshot();
    let prepared = PreparedMesh::build(&rule, &snapshot, None);
    (0..users)
        .map(|u| {
            let r = Request::new().with_attachment("uid", format!("u{u}"));
            let (a, reason) = side(&prepared, &snapshot, &r, 1);
            let (b, _) = side(&prepared, &snapshot, &r, 2);
            assert_eq!(a, b, "user {u} keeps its subset whatever the random source");
            assert!(reason.contains(", sticky)"), "{reason}");
            a
        })
        .collect()
}

#[test]
fn weighted_destinations_are_sticky_with_a_hash_key() {
    let users = 20_000;
    let before = sides((70, 30), users);
    let after = sides((80, 30), users);
    let share =
        |s: &[usize]| s.iter().filter(|&&d| d == 0).count() as f64 * 100.0 / f64::from(users);
    // Users split as the weights say.
    assert!((share(&before) - 70.0).abs() <= 1.0, "{}", share(&before));
    assert!(
        (share(&after) - 80.0 * 100.0 / 110.0).abs() <= 1.0,
        "{}",
        share(&after)
    );
    // Raising blue by 10 moves only users at the margin, all towards blue, about 10%.
    let moved: Vec<_> = before.iter().zip(&after).filter(|(x, y)| x != y).collect();
    assert!(
        moved.iter().all(|(_, y)| **y == 0),
        "users move only to the raised side"
    );
    let moved = moved.len() as f64 * 100.0 / f64::from(users);
    assert!(moved <= 10.0, "{moved}% moved");
}

#[test]
fn without_the_value_or_the_key_the_draw_is_random() {
    let snapshot = snapshot();
    let entry = json!({"type": "mesh", "hash_key": ["attributes[user]", "consumer.host"]});
    let rule = compile(&entry, &rule((50, 50))).unwrap();
    let prepared = PreparedMesh::build(&rule, &snapshot, None);
    // consumer.host is empty and attributes[user] absent: random, and the trace says so.
    let (_, reason) = side(&prepared, &snapshot, &Request::new(), 1);
    assert!(
        reason.contains(
            "hash_key attributes[user], consumer.host has no value in the request: random draws"
        ),
        "{reason}"
    );
    assert!(!reason.contains("sticky"), "{reason}");
    let seen: std::collections::BTreeSet<usize> = (0..64)
        .map(|seed| side(&prepared, &snapshot, &Request::new(), seed).0)
        .collect();
    assert_eq!(seen.len(), 2, "random draws reach both subsets");
    // With the value: one subset whatever the seed.
    let r = Request::new().with_attribute("user", "alice");
    let seen: std::collections::BTreeSet<usize> = (0..64)
        .map(|seed| side(&prepared, &snapshot, &r, seed).0)
        .collect();
    assert_eq!(seen.len(), 1);
}

#[test]
fn a_bad_hash_key_is_located() {
    let entry = json!({"type": "mesh", "hash_key": ["attributes[user]", "user"]});
    let errors = compile(&entry, &rule((50, 50))).unwrap_err();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].path.to_string(), "routers[0].hash_key[1]");
    assert!(
        errors[0].message.contains("invalid hash key \"user\""),
        "{}",
        errors[0].message
    );
}
