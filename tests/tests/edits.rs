//! Incremental provider updates route exactly as a fresh preparation.
//!
//! Every built-in router's chain is carried through seeded series of provider updates
//! (removals at random positions, appended providers) with `ChainState::next`, and
//! after each update a mix of requests must route exactly as through the same chain
//! prepared from scratch over the same snapshot (`testkit::edits`). The routers listed in
//! [`DERIVING`] must also have derived their state by edit rather than prepared it again;
//! the others prepare from scratch.

use routechain::core::Request;
use routechain_testkit::{self as testkit, edits};

/// A tag rule with every kind of dynamic tag over the testkit's providers (hosts
/// `10.a.b.c:20880`; the churn's added providers reuse the first hosts, so an address is
/// often shared by a survivor and an added provider): address ranges, a wildcard with a
/// port, an exact IP, a hierarchical `match` tag, a two-entry `match`, and two address tags
/// of one name (the later one counts).
const TAG_RULE_YAML: &str = "configVersion: v3.0
force: false
tags:
  - name: gray
    addresses: ['10.0.0.1-20', '10.0.1.*:20880']
  - name: canary|blue
    match:
      - {key: env, value: {exact: staging}}
  - name: canary
    addresses: ['10.0.0.5']
  - name: v2
    match:
      - {key: version, value: {exact: '2.0.0'}}
      - {key: region, value: {prefix: bei}}
  - name: gray
    addresses: ['10.0.0.2-30', '10.0.2.0/28']
";

/// The same tag rule, forced (a dynamic tag with no candidate empties the call).
fn forced_tag_rule() -> String {
    TAG_RULE_YAML.replace("force: false", "force: true")
}

/// An affinity rule over the consumer's region (beijing, about half the providers).
const AFFINITY_RULE_YAML: &str = "configVersion: v3.1
affinityAware: {key: region, ratio: 40}
";

/// An affinity rule over the consumer's IDC (mt, about a quarter), kept only above 30%.
const AFFINITY_IDC_RULE_YAML: &str = "configVersion: v3.1
affinityAware: {key: idc, ratio: 30}
";

/// A group rule naming a default group and not forcing.
const GROUP_RULE_YAML: &str = "force: false
default_group: idx_user
";

/// The chains checked: each built-in router alone with a rule that uses its features over
/// the testkit's providers, and the full chain.
fn chains() -> Vec<(&'static str, String)> {
    let mut chains: Vec<(&str, String)> = testkit::CHAINS
        .iter()
        .map(|(name, text)| (*name, text()))
        .collect();
    chains.push(("mesh", testkit::mesh_chain_yaml()));
    chains.push(("full", testkit::full_chain_yaml()));
    let forced = forced_tag_rule();
    chains.push((
        "tag rule",
        testkit::chain_of(&[("tag", 100, Some(TAG_RULE_YAML))]),
    ));
    chains.push((
        "forced tag rule",
        testkit::chain_of(&[("tag", 100, Some(&forced))]),
    ));
    chains.push((
        "affinity",
        testkit::chain_of(&[("affinity", 130, Some(AFFINITY_RULE_YAML))]),
    ));
    chains.push((
        "affinity idc",
        testkit::chain_of(&[("affinity", 130, Some(AFFINITY_IDC_RULE_YAML))]),
    ));
    chains.push(("mock", testkit::chain_of(&[("mock", -100, None)])));
    chains.push((
        "group rule",
        testkit::chain_of(&[("group", 200, Some(GROUP_RULE_YAML))]),
    ));
    chains.push((
        "every router",
        testkit::chain_of(&[
            ("mock", -100, None),
            ("mesh", -50, Some(testkit::MESH_RULE_YAML)),
            ("tag", 100, Some(TAG_RULE_YAML)),
            ("affinity", 130, Some(AFFINITY_RULE_YAML)),
            ("condition", 140, Some(testkit::CONDITION_RULE_YAML)),
            ("group", 200, Some(GROUP_RULE_YAML)),
            ("idc-weight", 300, Some(testkit::IDC_RULE_YAML)),
        ]),
    ));
    chains
}

/// The testkit's request mix, plus requests for every tag of [`TAG_RULE_YAML`] (levels,
/// unknown tags, the request's force) and for mock providers.
fn requests() -> Vec<Request> {
    let mut requests = testkit::requests(60, 3);
    let base = || {
        Request::new()
            .with_service(testkit::SERVICE)
            .with_method("get")
            .with_attribute("group", "idx_order")
    };
    for tag in [
        "gray",
        "canary",
        "canary|blue",
        "canary|blue|x",
        "canary|red",
        "v2",
        "v2|z",
        "red",
    ] {
        requests.push(base().with_attachment("dubbo.tag", tag));
        requests.push(
            base()
                .with_attachment("dubbo.tag", tag)
                .with_attachment("dubbo.force.tag", "true"),
        );
    }
    requests.push(base().with_attachment("invocation.need.mock", "true"));
    requests.push(base().with_attachment("invocation.need.mock", "no"));
    requests
}

/// The router names (as traces show them) that derive their state by edit: the full chain's
/// routers whose preparation from scratch costs milliseconds at 100,000 providers, more
/// than a provider push's budget allows (`cargo run --release -p routechain-benches
/// --example edit_table`). The others prepare from scratch on an edit.
const DERIVING: &[&str] = &["group", "idc-weight"];

#[test]
fn every_chain_routes_after_each_edit_exactly_as_a_fresh_preparation() {
    let requests = requests();
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

mod small_universe {
    //! Property: over providers drawn from a small universe (few hosts, so addresses are
    //! shared; ports including none; two applications; mock providers; static tags, empty
    //! ones included; two regions and groups), any series of edits leaves the chain of every
    //! router routing exactly as a fresh preparation. The universe makes the rare shapes
    //! common: a key's first provider arriving and its last leaving, a group's or an IDC's
    //! last provider leaving and its first arriving.

    use proptest::prelude::*;
    use routechain::core::{Snapshot, Url};
    use routechain_testkit::edits::{self, Churn};

    use super::{
        AFFINITY_RULE_YAML, CONDITION_RULES, GROUP_RULE_YAML, IDC_RULES, TAG_RULE_YAML, requests,
    };
    use routechain_testkit as testkit;

    /// One provider's URL from its choices.
    fn url(choice: (u8, u8, u8, u8, u8, u8, u8)) -> Url {
        let (host, port, app, env, version, tag, kind) = choice;
        let port = [":20880", ":20881", ""][port as usize % 3];
        let app = ["index-provider", "other-app", ""][app as usize % 3];
        let env = ["staging", "prod"][env as usize % 2];
        let version = ["1.0.0", "1.1.0", "2.0.0"][version as usize % 3];
        let tag = ["&dubbo.tag=gray", "&dubbo.tag=", "", ""][tag as usize % 4];
        let (protocol, region, group) = match kind % 4 {
            0 => ("mock", "beijing", "idx_user"),
            1 => ("dubbo", "shanghai", "idx_order"),
            _ => ("dubbo", "beijing", "idx_user"),
        };
        let text = format!(
            "{protocol}://10.0.{}.{}{port}/{svc}?application={app}&env={env}&version={version}\
             &region={region}&idc=mt&group={group}{tag}",
            host / 3,
            host % 3 + 1,
            svc = routechain_testkit::SERVICE,
        );
        Url::parse(&text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    fn provider() -> impl Strategy<Value = Url> {
        (0u8..6, 0u8..3, 0u8..3, 0u8..2, 0u8..3, 0u8..4, 0u8..4).prop_map(url)
    }

    fn churn() -> impl Strategy<Value = Churn> {
        (
            prop::collection::vec(0u32..12, 0..4),
            prop::collection::vec(provider(), 0..4),
        )
            .prop_map(|(removed, added)| Churn { removed, added })
    }

    /// Every built-in router, the mesh rule for every application.
    fn chain() -> String {
        let host_tag_rule = format!(
            "{TAG_RULE_YAML}  - name: hosts\n    match:\n      - {{key: version, value: {{exact: '1.1.0'}}}}\n"
        );
        testkit::chain_of(&[
            ("mock", -100, None),
            ("mesh", -50, Some(routechain_testkit::MESH_RULE_YAML)),
            ("tag", 100, Some(&host_tag_rule)),
            ("affinity", 130, Some(AFFINITY_RULE_YAML)),
            ("condition", 140, Some(CONDITION_RULES[0])),
            ("group", 200, Some(GROUP_RULE_YAML)),
            ("idc-weight", 300, Some(IDC_RULES[0])),
        ])
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(160))]
        #[test]
        fn edits_route_as_a_fresh_preparation(
            base in prop::collection::vec(provider(), 0..10),
            updates in prop::collection::vec(churn(), 1..6),
        ) {
            // Removed positions past the current end are ignored by the edit (as by
            // `SnapshotEdit::new`).
            edits::assert_edits_route_as_prepare(
                &chain(),
                Snapshot::new(1, base),
                &updates,
                &requests(),
            );
        }
    }
}

/// A chain of `entries` (each a router type and its rule), at priorities 100, 101…
fn ruled_chain(entries: &[(&str, &str)]) -> String {
    let entries: Vec<(&str, i32, Option<&str>)> = entries
        .iter()
        .enumerate()
        .map(|(i, (type_name, rule))| (*type_name, 100 + i as i32, Some(*rule)))
        .collect();
    testkit::chain_of(&entries)
}

/// Condition rules over the testkit's providers: method, argument, attachment and consumer
/// conditions; exact values, globs, ranges, `host` and `address`, negations, `$name`
/// references; keys only some providers have (`dubbo.tag`, `degraded`: a churn makes them
/// appear and leave); `force`, `runtime`, application scope, v3.1 weighted destinations.
const CONDITION_RULES: [&str; 3] = [
    "configVersion: v3.0
scope: service
key: com.example.search.IndexService
force: false
conditions:
  - method = search => region = shanghai & idc = sh*
  - method = get & arguments[0] = 1~500 => timestamp = 1700000000000~1700000000040,1700000000100~
  - attachments[dubbo.tag] = gray => dubbo.tag = gray
  - host = 10.200.* => version != 2.0.0 & weight = 100,200
  - => region = $region & idc != $idc
  - method = update => address = 10.0.*:20880 & degraded = true
  - application = index-web => env = *
  - method != get => host = 10.0.0.1*,*.3 & group != idx_log,idx_ad
  - method = delete => nokey = x
",
    "configVersion: v3.0
scope: application
key: index-web
force: true
runtime: true
conditions:
  - method = delete =>
  - arguments[0] = 900~ => env = staging
  - idc = mt => idc = $idc,zf & group = idx_*
  - region = beijing => host != $host & dubbo.tag != canary
",
    "configVersion: v3.1
scope: service
key: com.example.search.IndexService
force: false
conditions:
  - from:
      match: method=search
    to:
      - match: region=beijing & idc=$idc
        weight: 200
      - match: region=shanghai & version=1.1.0
        weight: 100
      - match: dubbo.tag=canary
        weight: 50
  - to:
      - match: group=idx_user,idx_order
        weight: 300
      - match: degraded=true
        weight: 100
      - match:
        weight: 10
",
];

/// IDC-weight rules over the testkit's providers: route tables, cross regions, `selected`,
/// `force`, `local`, spillover, panic thresholds, sticky draws, IDCs from subnets (no IDC
/// param) and regions from the rule (no region param), and IDC names the rule does not list
/// (groups, one per provider's timestamp), which appear and leave as providers churn.
const IDC_RULES: [&str; 5] = [
    "idcs: {beijing: [mt, zf], shanghai: [sh1, sh2], guangzhou: [gz]}
route_tables: {beijing: {mt: 30, zf: 70}, shanghai: {sh1: 50, sh2: 50}}
cross_region: [shanghai, guangzhou]
spillover: {overprovisioning: 1.4}
panic_threshold: 50
hash_key: \"arguments[0]\"
",
    "local: {region: beijing, idc: mt}
idcs: {beijing: [mt, zf], shanghai: [sh1]}
selected: {mt: zf}
cross_region: [shanghai]
force: true
",
    "idc_param: rack
region_param: zone
idcs: {beijing: [mt, zf], shanghai: [sh1]}
idc_cidrs: {mt: [\"10.0.0.0/25\"], zf: [\"10.0.0.128/25\"], sh1: [\"10.0.1.0/24\"]}
route_tables: {beijing: {mt: 50, zf: 50}}
cross_region: [shanghai]
panic_threshold: 30
",
    "idc_param: group
region_param: env
local: {region: prod}
idcs: {prod: [idx_user, idx_order], staging: [idx_shop]}
cross_region: [staging]
spillover: {}
",
    "idc_param: timestamp
idcs: {beijing: [\"1700000000003\"], shanghai: [\"1700000000001\"]}
local: {region: beijing}
cross_region: [shanghai]
panic_threshold: 20
spillover: {overprovisioning: 2}
",
];

/// The requests of [`every_chain_routes_after_each_edit_exactly_as_a_fresh_preparation`],
/// plus calls from other consumers (the per-call forms of `$name` references and of the
/// IDC-weight router's local decision).
fn requests_with_other_consumers() -> Vec<routechain::core::Request> {
    let consumers = [
        "consumer://10.0.0.3/com.example.search.IndexService?application=index-web&region=shanghai&idc=sh*",
        "consumer://10.0.1.7/com.example.search.IndexService?application=index-web&region=guangzhou&idc=gz&timestamp=1700000000005",
        "consumer://10.0.0.200/com.example.search.IndexService?application=other&region=*",
        "consumer://10.9.9.9/com.example.search.IndexService?idc=zf&group=idx_geo&env=prod&timestamp=1700000000003",
    ];
    let mut requests = testkit::requests(40, 5);
    let others = testkit::requests(40, 6);
    for (k, r) in others.into_iter().enumerate() {
        let url = routechain::core::Url::parse(consumers[k % consumers.len()])
            .expect("a valid consumer URL");
        requests.push(r.with_consumer(url));
    }
    requests
}

#[test]
fn condition_and_idc_weight_features_route_after_each_edit_exactly_as_a_fresh_preparation() {
    let requests = requests_with_other_consumers();
    let mut chains: Vec<String> = vec![ruled_chain(&CONDITION_RULES.map(|r| ("condition", r)))];
    chains.extend(IDC_RULES.iter().map(|r| ruled_chain(&[("idc-weight", r)])));
    chains.push(ruled_chain(&[
        ("condition", CONDITION_RULES[0]),
        ("idc-weight", IDC_RULES[0]),
    ]));
    for chain in &chains {
        // The idc-weight routers derive by edit; the condition router prepares afresh.
        let deriving = chain.matches("  - type: idc-weight").count();
        for (seed, (n, steps, max_change)) in [
            (0usize, 8, 5usize),
            (1, 12, 1),
            (64, 6, 40),
            (300, 6, 3),
            (130, 6, 70),
            (20, 10, 20),
        ]
        .into_iter()
        .enumerate()
        {
            let updates = edits::churn(n, steps, max_change, seed as u64 + 40);
            let derived = edits::assert_edits_route_as_prepare(
                chain,
                testkit::snapshot(n, seed as u64 + 17),
                &updates,
                &requests,
            );
            for (step, names) in derived.iter().enumerate() {
                assert_eq!(
                    names.len(),
                    deriving,
                    "{n} providers, update {step}: an idc-weight router prepared from scratch \
                     instead of deriving its state by edit ({names:?}) in\n{chain}"
                );
            }
        }
    }
}

/// A batch that changes the providers and some routers' rules at once
/// (one `Change` of both, what the live chain applies): the routers whose
/// rule is unchanged (the same compiled router) derive their state by the edit, the ones
/// with a new rule prepare over the new snapshot, and every request routes exactly as the
/// new chain prepared from scratch over the new snapshot.
#[test]
fn providers_and_rules_changed_together_route_as_a_fresh_preparation() {
    use std::sync::Arc;

    use routechain::core::{CallState, ChainEntry, ChainState, Change};

    let forced = forced_tag_rule();
    let before = ruled_chain(&[
        ("condition", CONDITION_RULES[0]),
        ("idc-weight", IDC_RULES[0]),
        ("tag", TAG_RULE_YAML),
        ("group", GROUP_RULE_YAML),
    ]);
    let after = ruled_chain(&[
        ("condition", CONDITION_RULES[1]),
        ("idc-weight", IDC_RULES[0]),
        ("tag", &forced),
        ("group", GROUP_RULE_YAML),
    ]);
    let requests = requests_with_other_consumers();
    for (seed, (n, max_change)) in [(0usize, 5usize), (1, 1), (64, 40), (300, 3)]
        .into_iter()
        .enumerate()
    {
        let base = Arc::new(testkit::snapshot(n, seed as u64 + 23));
        let mut state = testkit::build_state(&before, base.clone()).expect("prepares");
        // The recompiled entries (condition, tag) come from the other chain file; the
        // idc-weight and group entries stay the same routers.
        let recompiled = testkit::build_state(&after, base).expect("prepares");
        for (step, update) in edits::churn(n, 4, max_change, seed as u64 + 90)
            .iter()
            .enumerate()
        {
            let entries: Vec<ChainEntry> = state
                .entries()
                .iter()
                .zip(recompiled.entries().iter())
                .enumerate()
                .map(|(k, (old, new))| if k % 2 == 0 { new } else { old }.clone())
                .collect();
            let added = update.added.to_vec();
            let (snapshot, edit) = state.snapshot().edited(
                state.snapshot().generation() + 1,
                update.removed.clone(),
                added,
            );
            let snapshot = Arc::new(snapshot);
            let next = state
                .next(&Change::<()> {
                    entries: Some(entries.clone().into()),
                    ..Change::edit(snapshot.clone(), edit)
                })
                .expect("the edit prepares");
            // The marks carried over by the edit are replaced by the ones set below.
            for i in 0..snapshot.len() {
                next.degraded().clear(i);
            }
            let fresh = ChainState::new(
                state.service().map(Arc::from),
                snapshot.clone(),
                state.consumer().clone(),
                entries,
            )
            .expect("the chain prepares");
            // Run order = configuration order here (priorities 100, 101…): the idc-weight
            // and group entries derived; the condition and tag routers prepare from scratch
            // (not in `DERIVING`).
            let derived: Vec<bool> = next.edited_routers().map(|(_, e)| e).collect();
            let expected = [false, true, false, true];
            assert_eq!(derived, expected, "{n} providers, update {step}");
            for i in (step % 5..snapshot.len()).step_by(5) {
                next.degraded().mark(i);
                fresh.degraded().mark(i);
            }
            for (k, request) in requests.iter().enumerate() {
                let mut a = CallState::seeded(k as u64 + 1);
                let mut b = CallState::seeded(k as u64 + 1);
                let (ra, rb) = (next.route(request, &mut a), fresh.route(request, &mut b));
                assert_eq!(ra, rb, "{n} providers, update {step}, request {k}");
                assert_eq!(
                    a.candidates.iter().collect::<Vec<_>>(),
                    b.candidates.iter().collect::<Vec<_>>(),
                    "{n} providers, update {step}, request {k}: the edited chain routes \
                     differently from a fresh preparation"
                );
            }
            state = next;
        }
    }
}
