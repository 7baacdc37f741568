//! The IDC-weight router's state carried over provider edits ([`PreparedIdcWeight::edited`])
//! against a fresh preparation over the new snapshot, over random providers and edits:
//! the same sets under the same names (rule names at the same positions), the same
//! param-degraded set, the same counts with and without live health, the same local
//! decision, and the same routing and explain traces from several consumers.

use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;
use routechain_core::{
    CallState, ChainEntry, ChainState, Change, DegradedSet, FieldPath, PrepareContext, Request,
    Snapshot, SnapshotEdit, Trace, Url,
};
use routechain_rules::YamlDoc;

use super::*;

/// Rule variants: route table, spillover and panic; IDCs by subnet with `selected` and
/// `force`; regions from the rule's listing (no region param) with IDCs by param or subnet.
const RULES: [&str; 3] = [
    "idcs: {beijing: [mt, zf], shanghai: [sh]}
route_tables: {beijing: {mt: 40, zf: 60}}
cross_region: [shanghai]
spillover: {overprovisioning: 1.4}
panic_threshold: 40
",
    "idc_param: rack
idcs: {beijing: [mt, zf], shanghai: [sh]}
idc_cidrs: {mt: [\"10.1.0.0/16\"], zf: [\"10.2.0.0/16\"]}
selected: {mt: zf}
cross_region: [shanghai]
force: true
",
    "region_param: zone
idcs: {beijing: [mt, zf], shanghai: [sh]}
idc_cidrs: {sh: [\"10.3.0.0/16\"]}
spillover: {}
panic_threshold: 60
cross_region: [shanghai]
",
];

/// Region and IDC values (mixed case on purpose; `None`: no param), names the rule does not
/// list among them.
const REGIONS: [Option<&str>; 5] = [
    Some("beijing"),
    Some("ShangHai"),
    Some("other"),
    Some("Other"),
    None,
];
const IDCS: [Option<&str>; 8] = [
    Some("mt"),
    Some("ZF"),
    Some("sh"),
    Some("o1"),
    Some("O1"),
    Some("o2"),
    Some("o3"),
    None,
];

const CONSUMERS: [&str; 4] = [
    "consumer://10.1.0.9/svc?region=beijing&idc=mt&zone=beijing&rack=mt",
    "consumer://10.2.0.9/svc?region=beijing",
    "consumer://10.9.0.9/svc?region=other&idc=o1&zone=other",
    "consumer://10.3.0.9/svc?idc=o2",
];

/// One random provider: region, IDC, degraded by param, subnet.
type Random = (usize, usize, bool, u8);

fn url((region, idc, degraded, subnet): Random, i: usize) -> Url {
    let mut params = Vec::new();
    for key in ["region", "zone"] {
        if let Some(r) = REGIONS[region] {
            params.push(format!("{key}={r}"));
        }
    }
    for key in ["idc", "rack"] {
        if let Some(d) = IDCS[idc] {
            params.push(format!("{key}={d}"));
        }
    }
    if degraded {
        params.push("degraded=true".into());
    }
    Url::parse(&format!(
        "dubbo://10.{subnet}.{}.{}:20880/svc?{}",
        i / 250,
        i % 250,
        params.join("&")
    ))
    .expect("a valid provider URL")
}

fn compile(text: &str) -> Arc<IdcWeightRule> {
    let doc = YamlDoc::parse("rule.yaml", text).expect("YAML");
    let root = FieldPath::root();
    let raw: RawIdcWeightRule = doc
        .rule_doc(&root)
        .expect("a rule")
        .parse()
        .expect("fields");
    Arc::new(IdcWeightRule::compile(raw, &root).expect("the rule compiles"))
}

/// Each name's providers and counts (healthy, total) as `live` sees them.
fn by_name(
    p: &PreparedIdcWeight,
    regions: bool,
    live: &DegradedSet,
) -> BTreeMap<String, (Vec<usize>, u32, u32)> {
    let sets = if regions { &p.regions } else { &p.idcs };
    (0..sets.len())
        .map(|k| {
            let set = sets.set(k);
            let c = if regions {
                p.region_counts(k, live, None)
            } else {
                p.idc_counts(k, live, None)
            };
            (
                sets.name(k).to_ascii_lowercase(),
                (set.to_bitset().iter().collect(), c.healthy, c.total),
            )
        })
        .collect()
}

/// The local decision by names.
fn local_names(p: &PreparedIdcWeight) -> String {
    let target = p.local.target.target().map(|t| t.map(|k| p.idc_name(k)));
    format!(
        "{:?} {:?} {:?}",
        p.local.region.map(|r| p.regions.name(r)),
        std::mem::discriminant(&p.local.target),
        target
    )
}

fn check(
    rule: usize,
    old: &[Random],
    removed: Vec<u32>,
    added: &[Random],
    marks: &[usize],
) -> Result<(), TestCaseError> {
    let rule = compile(RULES[rule]);
    let before = Snapshot::new(1, old.iter().enumerate().map(|(i, &p)| url(p, i)));
    let added_urls: Vec<Url> = added
        .iter()
        .enumerate()
        .map(|(j, &p)| url(p, 1000 + j))
        .collect();
    let (after, edit): (Snapshot, SnapshotEdit) = before.edited(2, removed, added_urls);
    for consumer in CONSUMERS {
        let consumer = Url::parse(consumer).expect("a valid consumer URL");
        let cx = |snapshot| PrepareContext {
            snapshot,
            consumer: &consumer,
            service: None,
        };
        let old_state = PreparedIdcWeight::build(&rule, &cx(&before));
        let edited = old_state.edited(&edit, &cx(&after));
        let fresh = PreparedIdcWeight::build(&rule, &cx(&after));
        prop_assert_eq!(&edited.degraded, &fresh.degraded);
        prop_assert_eq!(edited.any_degraded, fresh.any_degraded);
        for k in 0..rule.idcs.len() {
            prop_assert_eq!(edited.idcs.name(k), fresh.idcs.name(k));
        }
        for r in 0..rule.regions.len() {
            prop_assert_eq!(edited.regions.name(r), fresh.regions.name(r));
        }
        prop_assert_eq!(local_names(&edited), local_names(&fresh));
        // Counts without live health, then with the tallies attached to live sets marked
        // alike (some marks on param-degraded providers, which the tallies skip).
        let (a, b) = (
            Arc::new(DegradedSet::new(after.len())),
            Arc::new(DegradedSet::new(after.len())),
        );
        for regions in [false, true] {
            prop_assert_eq!(by_name(&edited, regions, &a), by_name(&fresh, regions, &b));
        }
        IdcWeightRouter::attach(&edited, &a);
        IdcWeightRouter::attach(&fresh, &b);
        for &m in marks {
            a.mark(m % after.len().max(1));
            b.mark(m % after.len().max(1));
        }
        for regions in [false, true] {
            prop_assert_eq!(by_name(&edited, regions, &a), by_name(&fresh, regions, &b));
        }
    }
    Ok(())
}

/// The same edit through chain states: `ChainState::with_edit` against a fresh state, both
/// with the same live marks, routing calls from several consumers with explain traces.
fn check_chain(
    rule: usize,
    old: &[Random],
    removed: Vec<u32>,
    added: &[Random],
    marks: &[usize],
) -> Result<(), TestCaseError> {
    let router = crate::test_support::build(IdcWeightRouter, "idc-weight", Some(RULES[rule]))
        .expect("the rule compiles");
    let consumer = Url::parse(CONSUMERS[0]).expect("a valid consumer URL");
    let entries = || {
        vec![ChainEntry::new(
            "idc-weight",
            DEFAULT_PRIORITY,
            router.clone(),
        )]
    };
    let before = Arc::new(Snapshot::new(
        1,
        old.iter().enumerate().map(|(i, &p)| url(p, i)),
    ));
    let added_urls: Vec<Url> = added
        .iter()
        .enumerate()
        .map(|(j, &p)| url(p, 1000 + j))
        .collect();
    let state = ChainState::new(None, before.clone(), consumer.clone(), entries())
        .expect("the chain prepares");
    let (after, edit) = before.edited(2, removed, added_urls);
    let after = Arc::new(after);
    let edited = state
        .next(&Change::<()>::edit(after.clone(), edit))
        .expect("the edit prepares");
    prop_assert!(edited.edited_routers().all(|(_, e)| e));
    let fresh = ChainState::new(None, after.clone(), consumer, entries()).expect("prepares");
    for &m in marks {
        edited.degraded().mark(m % after.len().max(1));
        fresh.degraded().mark(m % after.len().max(1));
    }
    for (k, c) in CONSUMERS.iter().enumerate() {
        let mut request = Request::new().with_argument(serde_json::json!(k));
        if k > 0 {
            request = request.with_consumer(Url::parse(c).expect("a valid URL"));
        }
        for seed in 0..4 {
            let (mut x, mut y) = (CallState::seeded(seed), CallState::seeded(seed));
            let (mut tx, mut ty) = (Trace::default(), Trace::default());
            let rx = edited.route_traced(&request, &mut x, &mut tx);
            let ry = fresh.route_traced(&request, &mut y, &mut ty);
            prop_assert_eq!(rx, ry);
            prop_assert_eq!(
                x.candidates.iter().collect::<Vec<_>>(),
                y.candidates.iter().collect::<Vec<_>>()
            );
            prop_assert_eq!(tx, ty);
        }
    }
    Ok(())
}

fn random() -> impl Strategy<Value = Random> {
    (0usize..5, 0usize..8, proptest::bool::weighted(0.2), 0u8..4)
}

proptest! {
    #[test]
    fn an_edited_state_equals_a_fresh_preparation(
        rule in 0usize..RULES.len(),
        old in proptest::collection::vec(random(), 0..90),
        removed in proptest::collection::vec(0u32..100, 0..30),
        added in proptest::collection::vec(random(), 0..20),
        marks in proptest::collection::vec(0usize..200, 0..12),
    ) {
        check(rule, &old, removed.clone(), &added, &marks)?;
        check_chain(rule, &old, removed, &added, &marks)?;
    }
}
