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
const DERIVING: &[&str] = &["condition", "idc-weight"];

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

/// A chain of `entries` (each a router type and its rule, indented under `rule:`).
fn chain_of(entries: &[(&str, &str)]) -> String {
    let mut text = format!("service: {}\nrouters:\n", testkit::SERVICE);
    for (i, (type_name, rule)) in entries.iter().enumerate() {
        text.push_str(&format!(
            "  - type: {type_name}\n    priority: {}\n    rule:\n",
            100 + i
        ));
        for line in rule.lines() {
            text.push_str(&format!("      {line}\n"));
        }
    }
    text
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
    use std::sync::Arc;
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
        requests.push(r.with_consumer(Arc::new(url)));
    }
    requests
}

#[test]
fn condition_and_idc_weight_features_route_after_each_edit_exactly_as_a_fresh_preparation() {
    let requests = requests_with_other_consumers();
    let mut chains: Vec<String> = vec![chain_of(&CONDITION_RULES.map(|r| ("condition", r)))];
    chains.extend(IDC_RULES.iter().map(|r| chain_of(&[("idc-weight", r)])));
    chains.push(chain_of(&[
        ("condition", CONDITION_RULES[0]),
        ("idc-weight", IDC_RULES[0]),
    ]));
    for chain in &chains {
        let routers = chain.matches("  - type: ").count();
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
                    routers,
                    "{n} providers, update {step}: some router prepared from scratch instead \
                     of deriving its state by edit ({names:?}) in\n{chain}"
                );
            }
        }
    }
}
