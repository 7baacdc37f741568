//! The condition router's state carried over provider edits against a fresh preparation
//! over the new snapshot, over random providers, rules and edits: every then-part and
//! destination set, its per-call form (the fixed part, each `$name` term's presence,
//! pattern sets and value index) and the key presence equal, set by set.

use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;
use routechain_core::{FieldPath, PrepareContext, ProviderSet, RuleDoc, Snapshot, Url};
use serde_json::{Value, json};

use super::super::{DynPat, DynSet, PreparedAction, PreparedCondition, SetExpr};
use crate::condition::rule::{ConditionRule, RawConditionRule};

/// Then-parts over the random providers' keys: exact values, globs with prefixes and
/// suffixes, ranges, negations, derived keys, `$name` references (one a glob in a consumer),
/// a key few providers have (`rare`), one only added providers have (`late`: it appears in
/// the snapshot for the first time with an edit) and one none has.
const THENS: [&str; 16] = [
    "late = l1,l2 & k1 != b",
    "late = $k2,l* & k2 = *",
    "k1 = a",
    "k1 = a*,*b & k2 != x",
    "k1 = 10~100,300~",
    "k2 = $k2",
    "k1 = $k1 & k2 != $k2,x",
    "rare = *",
    "rare = r1 & k1 != a",
    "host = 10.0.0.1*,*.3",
    "address = *:2088*",
    "port = 20880 & k1 = *",
    "nokey = 1",
    "k2 = $zone & rare != $k1",
    "",
    "k1 != 25 & rare = $rare",
];

/// Values of `k1`, `k2` and `rare` (`None`: the provider has no such param).
const K1: [Option<&str>; 8] = [
    Some("a"),
    Some("ab"),
    Some("b"),
    Some("10"),
    Some("25"),
    Some("300"),
    Some(""),
    None,
];
const K2: [Option<&str>; 4] = [Some("x"), Some("y"), Some("yx"), None];
const RARE: [Option<&str>; 6] = [Some("r1"), Some("r2"), None, None, None, None];

const CONSUMERS: [&str; 3] = [
    "consumer://10.0.0.9/svc?k1=a&k2=y&zone=y*&rare=r2",
    "consumer://10.0.0.3/svc?k1=*&k2=x",
    "consumer://10.9.9.9/svc",
];

/// One random provider: its `k1`, `k2` and `rare` values, its host and port.
type Random = (usize, usize, usize, u8, bool);

/// Provider `p`, with `late` = `rare`'s value when `late`.
fn url((k1, k2, rare, host, port): Random, late: bool) -> Url {
    let late = if late {
        RARE[rare].map(|r| r.replace('r', "l"))
    } else {
        None
    };
    let mut params = Vec::new();
    for (key, value) in [
        ("k1", K1[k1]),
        ("k2", K2[k2]),
        ("rare", RARE[rare]),
        ("late", late.as_deref()),
    ] {
        if let Some(v) = value {
            params.push(format!("{key}={v}"));
        }
    }
    let port = if port { 20880 } else { 20990 };
    Url::parse(&format!(
        "dubbo://10.0.{}.{host}:{port}/svc?{}",
        host % 3,
        params.join("&")
    ))
    .expect("a valid provider URL")
}

fn compile(doc: Value) -> Arc<ConditionRule> {
    let root = FieldPath::root();
    let raw: RawConditionRule = RuleDoc::new(&doc, &root).parse().expect("fields");
    Arc::new(ConditionRule::compile(raw, &root).expect("the rule compiles"))
}

/// A rule of random conditions: v3.0 `=> then` texts, or v3.1 destinations.
fn rule(thens: &[usize], v31: bool) -> Arc<ConditionRule> {
    if v31 {
        let to: Vec<Value> = thens
            .iter()
            .map(|&t| json!({"match": THENS[t], "weight": 100}))
            .collect();
        compile(json!({"configVersion": "v3.1", "conditions": [{"to": to}]}))
    } else {
        let conditions: Vec<String> = thens.iter().map(|&t| format!("=> {}", THENS[t])).collect();
        compile(json!({ "conditions": conditions }))
    }
}

fn members(set: &ProviderSet) -> Vec<usize> {
    set.to_bitset().iter().collect()
}

/// A set expression's sets, comparable.
fn shape(set: &SetExpr) -> String {
    let dynamic = set.dynamic.as_ref().map(|d: &DynSet| {
        let terms: Vec<String> = d
            .terms
            .iter()
            .map(|t| {
                let pats = |ps: &[DynPat]| -> Vec<String> {
                    ps.iter()
                        .map(|p| match p {
                            DynPat::Fixed(s) => format!("{:?}", members(s)),
                            DynPat::Ref(n) => format!("${n}"),
                        })
                        .collect()
                };
                let index: BTreeMap<&str, Vec<usize>> = t
                    .index
                    .values()
                    .map(|(v, s)| (v, s.to_bitset(t.index.len()).iter().collect()))
                    .collect();
                format!(
                    "{} present {:?} matches {:?} mismatches {:?} index {index:?} missing {:?}",
                    t.term.name,
                    members(&t.present),
                    pats(&t.matches),
                    pats(&t.mismatches),
                    members(t.index.missing())
                )
            })
            .collect();
        format!("fixed {:?} terms {terms:?}", members(&d.fixed))
    });
    format!(
        "never {} prepared {:?} dynamic {dynamic:?}",
        set.never,
        members(&set.prepared)
    )
}

fn shapes(p: &PreparedCondition) -> Vec<String> {
    let mut out: Vec<String> = p
        .conditions
        .iter()
        .flat_map(|c| match &c.action {
            PreparedAction::Then(s) => vec![shape(s)],
            PreparedAction::Destinations(ds) => ds.iter().map(|(s, _)| shape(s)).collect(),
            PreparedAction::Blocklist | PreparedAction::TrafficDisabled => vec![],
        })
        .collect();
    let keys: BTreeMap<&str, Vec<usize>> = p.keys.iter().map(|(k, s)| (&**k, members(s))).collect();
    out.push(format!("keys {keys:?}"));
    out
}

fn cx<'a>(snapshot: &'a Snapshot, consumer: &'a Url) -> PrepareContext<'a> {
    PrepareContext {
        snapshot,
        consumer,
        service: None,
    }
}

fn random() -> impl Strategy<Value = Random> {
    (
        0usize..8,
        0usize..4,
        0usize..6,
        0u8..40,
        proptest::bool::weighted(0.8),
    )
}

proptest! {
    #[test]
    fn an_edited_state_equals_a_fresh_preparation(
        thens in proptest::collection::vec(0usize..THENS.len(), 1..5),
        v31 in proptest::bool::ANY,
        old in proptest::collection::vec(random(), 0..80),
        removed in proptest::collection::vec(0u32..90, 0..30),
        added in proptest::collection::vec(random(), 0..15),
        edits in 1usize..4,
    ) {
        let rule = rule(&thens, v31);
        for consumer in CONSUMERS {
            let consumer = Url::parse(consumer).expect("a valid consumer URL");
            let mut snapshot = Snapshot::new(1, old.iter().map(|&p| url(p, false)));
            let mut state = PreparedCondition::build(&rule, &cx(&snapshot, &consumer));
            // A few edits in a row, each carried from the last.
            for e in 0..edits {
                let shift = e as u32 * 7;
                let gone: Vec<u32> = removed.iter().map(|r| r + shift).collect();
                let new: Vec<Url> = added
                    .iter()
                    .skip(e)
                    .map(|&p| url(p, true))
                    .collect();
                let (next, edit) = snapshot.edited(e as u64 + 2, gone, new);
                let edited = state.edited(&edit, &cx(&next, &consumer)).expect("the state carries over");
                let fresh = PreparedCondition::build(&rule, &cx(&next, &consumer));
                prop_assert_eq!(shapes(&edited), shapes(&fresh));
                snapshot = next;
                state = edited;
            }
        }
    }
}
