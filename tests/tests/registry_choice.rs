//! Several registries chosen among per call (Dubbo's zone-aware choice,
//! `routechain::balance::Registries`, in the cluster's published state): routing the chosen registry's providers out of the
//! merged list routes exactly as a chain over that registry's own list, for every built-in
//! router; the choice allocates nothing per call; the draw splits as the weights say.

use std::collections::BTreeSet;
use std::sync::Arc;

use routechain::balance::{
    Cluster, Registries, RegistryInfo, RegistryTable, SelectError, ServiceConfig,
};
use routechain::balance::{REGISTRY_ZONE, REGISTRY_ZONE_FORCE};
use routechain::core::{CallState, ChainState, NoProvider, Request, Snapshot, Trace, Url};
use routechain_testkit as testkit;

const N: usize = 3_000;

fn info(name: &str, preferred: bool, zone: Option<&str>, weight: Option<u32>) -> RegistryInfo {
    RegistryInfo {
        name: name.into(),
        preferred,
        zone: zone.map(Arc::from),
        weight: weight.unwrap_or(100),
        weighted: weight.is_some(),
    }
}

/// Registry `a` lists the providers at `i % 3 != 0`, `b` those at `i % 3 != 1`: a third
/// of the addresses are in both.
fn in_registry(registry: usize, i: usize) -> bool {
    i % 3 != [0, 1][registry]
}

/// A second split: registry `a` lists the IDC mt alone (and every fourth other provider),
/// `b` every provider outside mt: an IDC's whole fleet differs between them.
fn by_idc(registry: usize, i: usize, url: &Url) -> bool {
    let mt = url.param("idc") == Some("mt");
    [mt || i % 4 == 0, !mt][registry]
}

type Split = fn(usize, usize, &Url) -> bool;

const SPLITS: [(&str, Split); 2] = [("thirds", |r, i, _| in_registry(r, i)), ("by idc", by_idc)];

fn table(snapshot: &Snapshot, registries: Vec<RegistryInfo>, zone: Option<&str>) -> RegistryTable {
    table_split(snapshot, registries, zone, SPLITS[0].1)
}

fn table_split(
    snapshot: &Snapshot,
    registries: Vec<RegistryInfo>,
    zone: Option<&str>,
    split: Split,
) -> RegistryTable {
    let mut t = RegistryTable::new(registries, zone.map(Arc::from));
    for (i, p) in snapshot.providers().iter().enumerate() {
        for r in 0..2 {
            if split(r, i, p) {
                t.insert(p.address(), r);
            }
        }
    }
    t
}

/// Providers ejected by health: every fifth, and half of zf (its region then spills and
/// panics under the spillover rule).
fn degraded(i: usize, url: &Url) -> bool {
    i % 5 == 0 || (url.param("idc") == Some("zf") && i % 2 == 0)
}

/// The IDC-weight rule with spillover, a panic threshold and sticky draws.
const SPILLOVER_RULE: &str = "idcs: {beijing: [mt, zf], shanghai: [sh1, sh2], guangzhou: [gz]}
route_tables: {beijing: {mt: 30, zf: 70}, shanghai: {sh1: 50, sh2: 50}}
cross_region: [shanghai, guangzhou]
spillover: {overprovisioning: 1.4}
panic_threshold: 50
";

/// A cluster serving `state` with the registries of `t` chosen among per call.
fn with_table(state: ChainState, t: RegistryTable) -> Cluster {
    let config = ServiceConfig {
        registries: Some(Arc::new(t)),
        ..ServiceConfig::default()
    };
    Cluster::new(state, config)
}

/// The chains checked: every built-in router alone, and all of them together.
fn chains() -> Vec<(&'static str, String)> {
    let mut chains: Vec<(&str, String)> = testkit::CHAINS
        .iter()
        .map(|(name, text)| (*name, text()))
        .collect();
    chains.push(("mesh", testkit::mesh_chain_yaml()));
    chains.push(("full", testkit::full_chain_yaml()));
    chains.push((
        "affinity",
        testkit::chain_of(&[(
            "affinity",
            130,
            Some("configVersion: v3.1\naffinityAware: {key: region, ratio: 40}\n"),
        )]),
    ));
    chains.push(("mock", testkit::chain_of(&[("mock", -100, None)])));
    chains.push((
        "idc-weight spillover",
        testkit::chain_of(&[("idc-weight", 300, Some(SPILLOVER_RULE))]),
    ));
    chains.push((
        "every router",
        testkit::chain_of(&[
            ("mock", -100, None),
            ("mesh", -50, Some(testkit::MESH_RULE_YAML)),
            ("tag", 100, None),
            ("condition", 140, Some(testkit::CONDITION_RULE_YAML)),
            ("group", 200, None),
            ("idc-weight", 300, Some(testkit::IDC_RULE_YAML)),
        ]),
    ));
    chains
}

fn routed(
    state: &ChainState,
    registries: Option<&Registries>,
    request: &Request,
    seed: u64,
) -> Result<BTreeSet<String>, String> {
    let mut call = CallState::seeded(seed);
    let mut trace = Trace::default();
    let result = match registries {
        Some(r) => r.route(state, request, &mut call, Some(&mut trace)),
        None => state
            .route_traced(request, &mut call, &mut trace)
            .map_err(SelectError::from),
    };
    match result {
        Ok(()) => Ok(call
            .candidates
            .iter()
            .map(|i| state.snapshot().providers()[i].address().to_string())
            .collect()),
        Err(SelectError::NoProvider(NoProvider::EmptiedBy { router, .. })) => {
            Err(router.to_string())
        }
        Err(e) => Err(e.to_string()),
    }
}

#[test]
fn a_chosen_registry_routes_as_a_chain_over_its_own_list() {
    let full = Arc::new(testkit::snapshot(N, 11));
    let requests = testkit::requests(100, 5);
    let position: std::collections::HashMap<&str, usize> = full
        .providers()
        .iter()
        .enumerate()
        .map(|(i, p)| (p.address(), i))
        .collect();
    for (split_name, split) in SPLITS {
        for registry in 0..2 {
            let own = Arc::new(Snapshot::new(
                1,
                full.providers()
                    .iter()
                    .enumerate()
                    .filter(|(i, p)| split(registry, *i, p))
                    .map(|(_, p)| p.clone()),
            ));
            // The registry chosen as the preferred one: the routers' draws are the same.
            let mut regs = vec![info("a", false, None, None), info("b", false, None, None)];
            regs[registry].preferred = true;
            for (name, yaml) in chains() {
                if !testkit::chain_available(&yaml) {
                    continue;
                }
                let merged = testkit::build_state(&yaml, full.clone()).expect("builds");
                let merged = with_table(merged, table_split(&full, regs.clone(), None, split));
                let published = merged.load();
                let (merged, registries) = (&**published.state(), published.registries());
                let alone = testkit::build_state(&yaml, own.clone()).expect("builds");
                for health in [false, true] {
                    if health {
                        for (state, snapshot) in [(merged, &full), (&alone, &own)] {
                            for (i, p) in snapshot.providers().iter().enumerate() {
                                // The same providers (by address) ejected in both.
                                if degraded(position[p.address()], p) {
                                    state.degraded().mark(i);
                                }
                            }
                        }
                    }
                    for (k, request) in requests.iter().enumerate() {
                        let seed = k as u64;
                        assert_eq!(
                            routed(merged, registries.map(|r| &**r), request, seed),
                            routed(&alone, None, request, seed),
                            "{name}, split {split_name}, registry {registry}, health {health}, \
                             request {k}: {request:?}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn the_choice_allocates_nothing_per_call() {
    let full = Arc::new(testkit::snapshot(10_000, 42));
    let state = testkit::build_state(&testkit::full_chain_yaml(), full.clone()).unwrap();
    let regs = vec![
        info("a", false, Some("hz"), Some(30)),
        info("b", false, Some("sh"), Some(70)),
    ];
    let cluster = with_table(state, table(&full, regs, None));
    let published = cluster.load();
    let mut requests = testkit::requests(64, 42);
    for (k, r) in requests.iter_mut().enumerate() {
        // In zone hz, forced to sh, forced to a zone no registry names (the call fails),
        // drawn by weight.
        match k % 4 {
            0 => r.attachments.insert(REGISTRY_ZONE, "hz"),
            1 | 2 => {
                let zone = if k % 4 == 1 { "sh" } else { "bj" };
                r.attachments.insert(REGISTRY_ZONE, zone);
                r.attachments.insert(REGISTRY_ZONE_FORCE, "true");
            }
            _ => {}
        }
    }
    let mut call = CallState::seeded(7);
    published.route(&requests[0], &mut call, None).ok();
    let (mut routed, mut forced) = (0, 0);
    let info = allocation_counter::measure(|| {
        for i in 0..2_000 {
            match published.route(&requests[i % requests.len()], &mut call, None) {
                Ok(()) => routed += 1,
                Err(SelectError::ZoneForced { .. }) => forced += 1,
                Err(_) => {}
            }
        }
    });
    assert_eq!(info.count_total, 0, "allocations while routing: {info:?}");
    assert_eq!(forced, 500);
    assert!(routed > 1_000, "routed {routed} of 2,000");
}

#[test]
fn the_draw_splits_as_the_registry_weights_say() {
    let full = Arc::new(testkit::snapshot(300, 1));
    // No router: the routed set is the chosen registry's providers.
    let state =
        testkit::build_state("service: com.foo.BarService\nrouters: []\n", full.clone()).unwrap();
    let cluster = with_table(
        state,
        table(
            &full,
            vec![
                info("a", false, None, Some(20)),
                info("b", false, None, Some(80)),
            ],
            None,
        ),
    );
    let a: BTreeSet<usize> = (0..300).filter(|&i| in_registry(0, i)).collect();
    let mut call = CallState::seeded(99);
    let n = 20_000u32;
    let mut to_a = 0u32;
    for _ in 0..n {
        cluster
            .load()
            .route(&Request::new(), &mut call, None)
            .unwrap();
        let got: BTreeSet<usize> = call.candidates.iter().collect();
        if got == a {
            to_a += 1;
        }
    }
    // Binomial(20,000, 0.2): mean 4,000, standard deviation 56.6; five of them either side.
    assert!(
        (to_a as i64 - 4_000).abs() < 283,
        "{to_a} of {n} to registry a"
    );
}
