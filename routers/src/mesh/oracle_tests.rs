//! The prepared mesh router against a direct evaluation of the rule: random providers of
//! several applications, random rules (subsets by labels, routes with and without
//! `services`, details matching an attachment, weighted destinations with fallback chains
//! and undefined subsets), random requests, random narrowed inputs, `empty: protect` and
//! `fail`. The direct evaluation reads the generated rule itself, not the compiled one, and
//! walks Dubbo's steps over plain vectors; both consume the same draws.

use std::collections::BTreeMap;

use crate::mesh;
use proptest::prelude::*;
use routechain_core::{
    BitSet, FieldPath, PrepareContext, RandomSource, Request, RouteContext, RouterSpec, RuleDoc,
    Snapshot, Url,
};
use serde_json::{Value, json};

const APPS: [Option<&str>; 3] = [Some("app1"), Some("app2"), None];
const VERS: [&str; 3] = ["a", "b", "c"];
const LANES: [Option<&str>; 3] = [Some("x"), Some("y"), None];
/// Subset names: a, b, c by `ver`; xl by lane=x; all without labels; ghost undefined.
const SUBSETS: [&str; 6] = ["a", "b", "c", "xl", "all", "ghost"];

#[derive(Debug, Clone)]
struct Dest {
    weight: Option<u32>,
    chain: Vec<usize>,
}

#[derive(Debug, Clone)]
struct Detail {
    lane: Option<u8>,
    route: Option<Vec<Dest>>,
}

#[derive(Debug, Clone)]
struct Route {
    service: Option<bool>,
    details: Vec<Detail>,
}

#[derive(Debug, Clone)]
struct Case {
    providers: Vec<(usize, usize, usize)>,
    rules: BTreeMap<&'static str, Vec<Route>>,
    attachment: Option<u8>,
    other_service: bool,
    available: Vec<bool>,
    empty_fail: bool,
    draws: Vec<u64>,
}

fn dest() -> impl Strategy<Value = Dest> {
    (
        prop::option::of(0u32..4),
        prop::collection::vec(0usize..SUBSETS.len(), 1..4),
    )
        .prop_map(|(weight, chain)| Dest { weight, chain })
}

fn detail() -> impl Strategy<Value = Detail> {
    (
        prop::option::of(1u8..3),
        prop::option::weighted(0.9, prop::collection::vec(dest(), 1..4)),
    )
        .prop_map(|(lane, route)| Detail { lane, route })
}

fn route() -> impl Strategy<Value = Route> {
    (
        prop::option::of(any::<bool>()),
        prop::collection::vec(detail(), 1..4),
    )
        .prop_map(|(service, details)| Route { service, details })
}

fn case() -> impl Strategy<Value = Case> {
    (
        prop::collection::vec((0usize..3, 0usize..3, 0usize..3), 1..40),
        prop::collection::vec(route(), 1..3),
        prop::option::of(prop::collection::vec(route(), 1..3)),
        prop::option::of(1u8..3),
        any::<bool>(),
        prop::collection::vec(any::<bool>(), 40),
        any::<bool>(),
        prop::collection::vec(any::<u64>(), 4),
    )
        .prop_map(
            |(providers, r1, r2, attachment, other_service, available, empty_fail, draws)| {
                let mut rules = BTreeMap::from([("app1", r1)]);
                if let Some(r2) = r2 {
                    rules.insert("app2", r2);
                }
                Case {
                    available: available[..providers.len()].to_vec(),
                    providers,
                    rules,
                    attachment,
                    other_service,
                    empty_fail,
                    draws,
                }
            },
        )
}

/// Replays `draws`: `below(n)` answers the next draw mod `n`.
struct Draws(Vec<u64>, usize);

impl RandomSource for Draws {
    fn next_u64(&mut self) -> u64 {
        self.1 += 1;
        self.0[(self.1 - 1) % self.0.len()]
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

fn documents(routes: &[Route]) -> Value {
    let subsets = json!([
        {"name": "a", "labels": {"ver": "a"}},
        {"name": "b", "labels": {"ver": "b"}},
        {"name": "c", "labels": {"ver": "c"}},
        {"name": "xl", "labels": {"lane": "x"}},
        {"name": "all"},
    ]);
    let destination = |chain: &[usize]| {
        let mut d = json!({"subset": SUBSETS[*chain.last().unwrap()]});
        for s in chain.iter().rev().skip(1) {
            d = json!({"subset": SUBSETS[*s], "fallback": {"destination": d}});
        }
        d
    };
    let dubbo: Vec<Value> = routes
        .iter()
        .map(|r| {
            let mut route = serde_json::Map::new();
            if let Some(s) = r.service {
                let name = if s { "com.foo.Bar" } else { "com.foo.Other" };
                route.insert("services".into(), json!([{"exact": name}]));
            }
            let details: Vec<Value> = r
                .details
                .iter()
                .map(|d| {
                    let mut detail = serde_json::Map::new();
                    if let Some(l) = d.lane {
                        detail.insert(
                            "match".into(),
                            json!([{"attachments": {"dubboContext": {"lane": {"exact": l.to_string()}}}}]),
                        );
                    }
                    if let Some(route) = &d.route {
                        let list: Vec<Value> = route
                            .iter()
                            .map(|x| {
                                let mut e = json!({"destination": destination(&x.chain)});
                                if let Some(w) = x.weight {
                                    e["weight"] = json!(w);
                                }
                                e
                            })
                            .collect();
                        detail.insert("route".into(), Value::Array(list));
                    }
                    Value::Object(detail)
                })
                .collect();
            route.insert("routedetail".into(), Value::Array(details));
            Value::Object(route)
        })
        .collect();
    json!([
        {"kind": "DestinationRule", "metadata": {"name": "dr"}, "spec": {"subsets": subsets}},
        {"kind": "VirtualService", "metadata": {"name": "vs"}, "spec": {"dubbo": dubbo}},
    ])
}

fn in_subset(case: &Case, p: usize, s: usize) -> bool {
    let (_, ver, lane) = case.providers[p];
    match SUBSETS[s] {
        "a" | "b" | "c" => VERS[ver] == SUBSETS[s],
        "xl" => LANES[lane] == Some("x"),
        "all" => true,
        _ => false,
    }
}

/// Dubbo's steps over plain vectors, reading the generated rule.
fn direct(case: &Case) -> Vec<usize> {
    let n = case.providers.len();
    let mut rng = Draws(case.draws.clone(), 0);
    let service_is_bar = !case.other_service;
    let mut result = vec![false; n];
    let mut any = false;
    let mut covered = false;
    for (app, routes) in &case.rules {
        let members: Vec<usize> = (0..n)
            .filter(|&p| APPS[case.providers[p].0] == Some(*app))
            .collect();
        if members.is_empty() {
            continue;
        }
        let Some(route) = routes
            .iter()
            .find(|r| r.service.is_none_or(|s| s == service_is_bar))
        else {
            continue;
        };
        covered = true;
        let Some(detail) = route
            .details
            .iter()
            .find(|d| d.lane.is_none_or(|l| case.attachment == Some(l)))
        else {
            continue;
        };
        let Some(dests) = &detail.route else { continue };
        let eligible: Vec<&Dest> = dests.iter().filter(|d| d.weight.unwrap_or(1) > 0).collect();
        if eligible.is_empty() {
            continue;
        }
        let drawn = if eligible.len() == 1 {
            0
        } else {
            let total: u64 = eligible
                .iter()
                .map(|d| u64::from(d.weight.unwrap_or(1)))
                .sum();
            let r = rng.below(total);
            let mut sum = 0;
            eligible
                .iter()
                .position(|d| {
                    sum += u64::from(d.weight.unwrap_or(1));
                    r < sum
                })
                .unwrap()
        };
        'found: for k in 0..eligible.len() {
            for &s in &eligible[(drawn + k) % eligible.len()].chain {
                let set: Vec<usize> = members
                    .iter()
                    .copied()
                    .filter(|&p| in_subset(case, p, s))
                    .collect();
                if set.iter().any(|&p| case.available[p]) {
                    for p in set {
                        result[p] = true;
                    }
                    any = true;
                    break 'found;
                }
            }
        }
    }
    let available: Vec<usize> = (0..n).filter(|&p| case.available[p]).collect();
    if !any {
        return if case.empty_fail && covered {
            Vec::new()
        } else {
            available
        };
    }
    available.into_iter().filter(|&p| result[p]).collect()
}

fn prepared(case: &Case) -> Vec<usize> {
    let lines: String = case
        .providers
        .iter()
        .enumerate()
        .map(|(i, (app, ver, lane))| {
            let mut url = format!("dubbo://10.0.0.{i}:1/com.foo.Bar?ver={}", VERS[*ver]);
            if let Some(a) = APPS[*app] {
                url.push_str(&format!("&application={a}"));
            }
            if let Some(l) = LANES[*lane] {
                url.push_str(&format!("&lane={l}"));
            }
            url.push('\n');
            url
        })
        .collect();
    let snapshot = Snapshot::parse_lines(1, &lines).unwrap();
    let apps: serde_json::Map<String, Value> = case
        .rules
        .iter()
        .map(|(app, routes)| (app.to_string(), documents(routes)))
        .collect();
    let rule = json!({ "applications": apps });
    let entry = json!({"type": "mesh", "empty": if case.empty_fail { "fail" } else { "protect" }});
    let ep = FieldPath::root().key("routers").index(0);
    let rp = ep.key("rule");
    let spec = RouterSpec {
        type_name: "mesh",
        entry: RuleDoc::new(&entry, &ep),
        rule: Some(RuleDoc::new(&rule, &rp)),
        base_dir: None,
        service: Some("com.foo.Bar"),
    };
    let router = routechain_core::TypedFactory::new("mesh", mesh::MeshRouter)
        .router(Some(mesh::check(&spec).result.unwrap()));
    let prepared = router
        .prepare(&PrepareContext {
            snapshot: &snapshot,
            consumer: &Url::empty(),
            service: Some("com.foo.Bar"),
        })
        .unwrap();
    let mut request = Request::new().with_method("m");
    if case.other_service {
        request = request.with_service("com.foo.Other:1.0.0");
    }
    if let Some(l) = case.attachment {
        request = request.with_attachment("lane", l.to_string());
    }
    let n = snapshot.len();
    let mut candidates = BitSet::from_fn(n, |i| case.available[i]);
    let mut rng = Draws(case.draws.clone(), 0);
    let mut builder = RouteContext::builder(&request, &snapshot).rng(&mut rng);
    prepared.route(&mut builder.context(), &mut candidates);
    candidates.iter().collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]
    #[test]
    fn prepared_router_equals_direct_evaluation(case in case()) {
        prop_assert_eq!(prepared(&case), direct(&case));
    }
}
