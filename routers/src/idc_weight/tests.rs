//! The IDC-weight router's tests: strategies and their explain texts, exact weighted
//! splits, degraded filtering and fallbacks, located errors, allocation and a model check.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::*;
use routechain_core::{
    CallState, ChainEntry, ChainState, Change, NoProvider, Request, Router, Snapshot, Trace, Url,
    stable_hash,
};
use routechain_rules::{ChainFile, RuleOverride, YamlDoc};

const IDCS: &str = "idcs:\n  beijing: [mt, zf]\n  shanghai: [sh]\n";

/// Beijing: mt 0-2, zf 3-5; Shanghai: sh 6-7.
const PROVIDERS: &str = "\
dubbo://10.1.0.0:20880/svc?region=beijing&idc=mt
dubbo://10.1.0.1:20880/svc?region=beijing&idc=mt
dubbo://10.1.0.2:20880/svc?region=beijing&idc=mt
dubbo://10.1.1.3:20880/svc?region=beijing&idc=zf
dubbo://10.1.1.4:20880/svc?region=beijing&idc=zf
dubbo://10.1.1.5:20880/svc?region=beijing&idc=zf
dubbo://10.2.0.6:20880/svc?region=shanghai&idc=sh
dubbo://10.2.0.7:20880/svc?region=shanghai&idc=sh
";

fn build(rule: Option<&str>) -> Result<Arc<dyn Router>, Vec<RuleError>> {
    crate::test_support::build(IdcWeightRouter, "idc-weight", rule)
}

fn consumer(url: &str) -> Url {
    Url::parse(url).unwrap()
}

fn state_with(rule: &str, providers: &str, consumer_url: &str) -> ChainState {
    let snapshot = Arc::new(Snapshot::parse_lines(1, providers).unwrap());
    let router = build(Some(rule)).unwrap_or_else(|e| panic!("{rule}: {e:?}"));
    ChainState::new(
        None,
        snapshot,
        consumer(consumer_url),
        vec![ChainEntry::new("idc-weight", DEFAULT_PRIORITY, router)],
    )
    .unwrap()
}

fn state(extra: &str, consumer_url: &str) -> ChainState {
    state_with(&format!("{IDCS}{extra}"), PROVIDERS, consumer_url)
}

/// The IDCs of the routed providers, or `None` for no provider.
fn idcs_of(state: &ChainState, call: &CallState) -> BTreeSet<String> {
    call.candidates
        .iter()
        .map(|i| {
            state.snapshot().providers()[i]
                .get("idc")
                .unwrap_or("-")
                .to_string()
        })
        .collect()
}

fn route(state: &ChainState, request: &Request) -> (Option<BTreeSet<String>>, String) {
    let mut call = CallState::seeded(3);
    let mut trace = Trace::default();
    let result = state.route_traced(request, &mut call, &mut trace);
    let reason = trace.steps[0].reason.clone();
    assert_eq!(trace.steps[0].evaluation, Evaluation::Runtime);
    match result {
        Ok(()) => (Some(idcs_of(state, &call)), reason),
        Err(NoProvider::EmptiedBy { router, .. }) => {
            assert_eq!(&*router, "idc-weight");
            (None, reason)
        }
        Err(e) => panic!("{e}"),
    }
}

fn set(idcs: &[&str]) -> Option<BTreeSet<String>> {
    Some(idcs.iter().map(|s| s.to_string()).collect())
}

const BJ_MT: &str = "consumer://10.9.0.1/svc?region=beijing&idc=mt";
const BJ_ZF: &str = "consumer://10.9.0.1/svc?region=beijing&idc=zf";

#[test]
fn extreme_weights_send_every_call_to_one_idc() {
    let cases = [
        ("route_tables: {beijing: {mt: 100, zf: 0}}", "mt"),
        ("route_tables: {beijing: {mt: 0, zf: 100}}", "zf"),
        ("route_tables: {beijing: {zf: 100}}", "zf"),
    ];
    for (table, want) in cases {
        for consumer_url in [BJ_MT, BJ_ZF] {
            let s = state(table, consumer_url);
            let mut call = CallState::seeded(11);
            for _ in 0..2_000 {
                s.route(&Request::new(), &mut call).unwrap();
                assert_eq!(idcs_of(&s, &call), set(&[want]).unwrap(), "{table}");
                assert_eq!(call.candidates.count(), 3);
            }
        }
    }
}

#[test]
fn weighted_split_over_100k_seeded_calls_is_within_one_point() {
    const CALLS: u32 = 100_000;
    let cases = [
        ("route_tables: {beijing: {mt: 50, zf: 50}}", 50.0),
        ("route_tables: {beijing: {mt: 80, zf: 20}}", 80.0),
        ("route_tables: {beijing: {zf: 20, mt: 80}}", 80.0),
        ("route_tables: {beijing: {mt: 1, zf: 99}}", 1.0),
    ];
    for (seed, (table, mt_share)) in cases.into_iter().enumerate() {
        let s = state(table, BJ_MT);
        let mut call = CallState::seeded(seed as u64 + 100);
        let (mut mt, mut zf) = (0u32, 0u32);
        for _ in 0..CALLS {
            s.route(&Request::new(), &mut call).unwrap();
            let idcs = idcs_of(&s, &call);
            assert_eq!(idcs.len(), 1, "one IDC per call");
            match idcs.first().map(String::as_str) {
                Some("mt") => mt += 1,
                Some("zf") => zf += 1,
                other => panic!("{other:?}"),
            }
        }
        let got = f64::from(mt) * 100.0 / f64::from(CALLS);
        assert!((got - mt_share).abs() <= 1.0, "{table}: mt {got}%");
        assert_eq!(mt + zf, CALLS);
    }
}

#[test]
fn strategy_order_and_explain() {
    // (rule extra, consumer, expected IDCs (None = no provider), explain fragment)
    let cases: &[(&str, &str, Option<&[&str]>, &str)] = &[
        (
            "",
            BJ_MT,
            Some(&["mt"]),
            "region beijing (local); local idc mt; kept 3 provider(s) of idc mt",
        ),
        ("", BJ_ZF, Some(&["zf"]), "local idc zf"),
        // selected overrides the local IDC.
        (
            "selected: {mt: zf}",
            BJ_MT,
            Some(&["zf"]),
            "selected: local idc mt reads from idc zf",
        ),
        ("selected: {mt: zf}", BJ_ZF, Some(&["zf"]), "local idc zf"),
        (
            "selected: {mt: mt}",
            BJ_MT,
            Some(&["mt"]),
            "selected: local idc mt reads from idc mt",
        ),
        // The route table comes first.
        (
            "selected: {mt: zf}\nroute_tables: {beijing: {mt: 100}}",
            BJ_MT,
            Some(&["mt"]),
            "route table of region beijing: draw ",
        ),
        // The rule's `local` beats the consumer URL.
        (
            "local: {region: beijing, idc: zf}",
            BJ_MT,
            Some(&["zf"]),
            "local idc zf",
        ),
        (
            "local: {idc: zf}",
            "consumer://10.9.0.1/svc",
            Some(&["zf"]),
            "region beijing (local)",
        ),
        // A consumer with only an IDC: its region is the one the rule lists it under.
        (
            "",
            "consumer://10.9.0.1/svc?idc=zf",
            Some(&["zf"]),
            "region beijing (local)",
        ),
        // Case-insensitive names.
        (
            "",
            "consumer://10.9.0.1/svc?region=BeiJing&idc=MT",
            Some(&["mt"]),
            "local idc mt",
        ),
        (
            "selected: {MT: Zf}",
            "consumer://10.9.0.1/svc?region=beijing&idc=Mt",
            Some(&["zf"]),
            "selected",
        ),
        // A local IDC no provider has: fall back to the region, or none with force.
        (
            "",
            "consumer://10.9.0.1/svc?region=beijing&idc=gz",
            Some(&["mt", "zf"]),
            "idc gz has no non-degraded candidate in the region; fallback: 6 provider(s) of the region",
        ),
        (
            "force: true",
            "consumer://10.9.0.1/svc?region=beijing&idc=gz",
            None,
            "force=true: none left",
        ),
        // No region known: fall back to every candidate, or none with force.
        (
            "",
            "consumer://10.9.0.1/svc",
            Some(&["mt", "sh", "zf"]),
            "no region has a non-degraded candidate (local region unknown, cross regions []); fallback: every non-degraded candidate (8)",
        ),
        (
            "force: true",
            "consumer://10.9.0.1/svc",
            None,
            "force=true: none left",
        ),
        // Cross-region: the whole region without a table.
        (
            "cross_region: [shanghai]",
            "consumer://10.9.0.1/svc",
            Some(&["sh"]),
            "cross-region shanghai: local region unknown has no non-degraded candidate; no route table in the cross region: whole region",
        ),
        (
            "cross_region: [shanghai]",
            "consumer://10.9.0.1/svc?region=guangzhou&idc=gz",
            Some(&["sh"]),
            "cross-region shanghai: local region guangzhou",
        ),
        (
            "cross_region: [beijing]",
            "consumer://10.9.0.1/svc?region=shanghai&idc=sh",
            Some(&["sh"]),
            "region shanghai (local); local idc sh",
        ),
    ];
    for (i, (extra, consumer_url, want, explain)) in cases.iter().enumerate() {
        let s = state(extra, consumer_url);
        let (got, reason) = route(&s, &Request::new());
        assert_eq!(
            got,
            want.and_then(set),
            "case {i}: {extra} {consumer_url}: {reason}"
        );
        assert!(
            reason.contains(explain),
            "case {i}: {reason:?} lacks {explain:?}"
        );
    }
}

#[test]
fn hash_fallback_is_stable_per_host_and_spreads_over_hosts() {
    let mut per_idc = [0usize; 2];
    for h in 0..400 {
        let url = format!(
            "consumer://172.16.{}.{}/svc?region=beijing",
            h / 200,
            h % 200
        );
        let host = Url::parse(&url).unwrap().host().to_string();
        let expected = ["mt", "zf"][(stable_hash(host.as_bytes()) % 2) as usize];
        // Prepared for this consumer, twice (stable across preparations and calls)...
        for _ in 0..2 {
            let s = state("", &url);
            let mut call = CallState::seeded(h);
            for _ in 0..5 {
                s.route(&Request::new(), &mut call).unwrap();
                assert_eq!(idcs_of(&s, &call), set(&[expected]).unwrap(), "{url}");
            }
        }
        // ...and resolved per call for a consumer the chain was not prepared for.
        let s = state("", BJ_MT);
        let (got, reason) = route(&s, &Request::new().with_consumer(consumer(&url)));
        assert_eq!(got, set(&[expected]), "{url}");
        assert!(
                reason.contains(&format!(
                    "caller idc unknown: hash of consumer host \"{host}\" over [mt, zf] → idc {expected}"
                )),
                "{reason}"
            );
        per_idc[usize::from(expected == "zf")] += 1;
    }
    for n in per_idc {
        assert!((140..=260).contains(&n), "uneven spread {per_idc:?}");
    }
}

#[test]
fn a_per_call_consumer_is_resolved_per_call() {
    let s = state("selected: {zf: mt}", BJ_MT);
    let cases = [
        (BJ_ZF, &["mt"][..]),
        ("consumer://10.9.0.9/svc?region=shanghai&idc=sh", &["sh"]),
        (BJ_MT, &["mt"]),
    ];
    for (url, want) in cases {
        let (got, _) = route(&s, &Request::new().with_consumer(consumer(url)));
        assert_eq!(got, set(want), "{url}");
    }
}

#[test]
fn provider_region_comes_from_its_idc_when_the_param_is_missing() {
    let providers = "\
dubbo://10.1.0.0:1/svc?idc=MT
dubbo://10.1.0.1:1/svc?idc=zf
dubbo://10.1.0.2:1/svc?idc=sh
dubbo://10.1.0.3:1/svc
";
    let s = state_with(IDCS, providers, BJ_MT);
    let (got, _) = route(&s, &Request::new());
    assert_eq!(got, set(&["MT"]));
    let s = state_with(
        &format!("{IDCS}force: true\n"),
        providers,
        "consumer://h/svc?idc=gz&region=beijing",
    );
    assert_eq!(route(&s, &Request::new()).0, None);
    let s = state_with(IDCS, providers, "consumer://h/svc?idc=gz&region=beijing");
    // Fallback: the region's providers (10.1.0.3 has no IDC, so no region).
    assert_eq!(route(&s, &Request::new()).0, set(&["MT", "zf"]));
}

/// Providers: mt 0 (degraded param) 1 2; zf 3 4 (live degraded) 5; sh 6 7.
fn degraded_state(extra: &str, consumer_url: &str, param: &[usize], live: &[usize]) -> ChainState {
    let providers: String = PROVIDERS
        .lines()
        .enumerate()
        .map(|(i, l)| {
            if param.contains(&i) {
                format!("{l}&degraded=True\n")
            } else if i == 1 {
                format!("{l}&degraded=false\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    let s = state_with(&format!("{IDCS}{extra}"), &providers, consumer_url);
    for &i in live {
        s.degraded().mark(i);
    }
    s
}

#[test]
fn degraded_providers_are_never_chosen_while_others_exist() {
    let table = "route_tables: {beijing: {mt: 50, zf: 50}}";
    let s = degraded_state(table, BJ_MT, &[0], &[4]);
    let mut call = CallState::seeded(5);
    let mut seen = BTreeSet::new();
    for _ in 0..2_000 {
        s.route(&Request::new(), &mut call).unwrap();
        seen.extend(call.candidates.iter());
    }
    assert_eq!(seen, BTreeSet::from([1, 2, 3, 5]));

    // A degraded provider recovers: the live set is read per call.
    s.degraded().clear(4);
    let mut seen = BTreeSet::new();
    for _ in 0..200 {
        s.route(&Request::new(), &mut call).unwrap();
        seen.extend(call.candidates.iter());
    }
    assert_eq!(seen, BTreeSet::from([1, 2, 3, 4, 5]));
}

#[test]
fn degraded_fallbacks() {
    // (rule extra, degraded by param, live degraded, consumer, expected indexes)
    type Case = (
        &'static str,
        &'static [usize],
        &'static [usize],
        &'static str,
        Option<&'static [usize]>,
        &'static str,
    );
    let cases: &[Case] = &[
        // The whole local IDC degraded: fall back to the region's healthy providers.
        (
            "",
            &[0, 1],
            &[2],
            BJ_MT,
            Some(&[3, 4, 5]),
            "dropped 3 degraded provider(s)",
        ),
        (
            "force: true",
            &[0, 1],
            &[2],
            BJ_MT,
            None,
            "idc mt has no non-degraded candidate",
        ),
        // The whole region degraded: the cross region.
        (
            "cross_region: [shanghai]",
            &[0, 1, 3],
            &[2, 4, 5],
            BJ_MT,
            Some(&[6, 7]),
            "cross-region shanghai",
        ),
        // The whole region degraded, no cross region: every healthy provider.
        (
            "",
            &[0, 1, 3],
            &[2, 4, 5],
            BJ_MT,
            Some(&[6, 7]),
            "fallback: every non-degraded candidate (2)",
        ),
        (
            "force: true",
            &[0, 1, 3],
            &[2, 4, 5],
            BJ_MT,
            None,
            "force=true: none left",
        ),
        // Every provider degraded: a degraded provider beats none.
        (
            "",
            &[0, 1, 2, 3, 4, 5],
            &[6, 7],
            BJ_MT,
            Some(&[0, 1, 2, 3, 4, 5, 6, 7]),
            "every candidate is degraded; fallback: the whole input (8)",
        ),
        (
            "force: true",
            &[0, 1, 2, 3, 4, 5],
            &[6, 7],
            BJ_MT,
            None,
            "force=true: none left",
        ),
        // Another param name.
        (
            "degraded_param: down",
            &[0],
            &[],
            BJ_MT,
            Some(&[0, 1, 2]),
            "local idc mt",
        ),
    ];
    for (i, (extra, param, live, consumer_url, want, explain)) in cases.iter().enumerate() {
        let s = degraded_state(extra, consumer_url, param, live);
        let mut call = CallState::seeded(1);
        let mut trace = Trace::default();
        let result = s.route_traced(&Request::new(), &mut call, &mut trace);
        let reason = &trace.steps[0].reason;
        match want {
            Some(w) => {
                assert!(result.is_ok(), "case {i}: {reason}");
                assert_eq!(
                    call.candidates.iter().collect::<Vec<_>>(),
                    *w,
                    "case {i}: {reason}"
                );
            }
            None => assert!(result.is_err(), "case {i}: {reason}"),
        }
        assert!(
            reason.contains(explain),
            "case {i}: {reason:?} lacks {explain:?}"
        );
    }
}

#[test]
fn cross_region_failover_in_preference_order_with_tables() {
    let rule = "\
idcs:
  beijing: [mt, zf]
  shanghai: [sh, sh2]
  guangzhou: [gz]
route_tables:
  shanghai: {sh: 0, sh2: 100}
cross_region: [shanghai, guangzhou]
";
    let providers = "\
dubbo://10.1.0.0:1/svc?region=beijing&idc=mt
dubbo://10.2.0.1:1/svc?region=shanghai&idc=sh
dubbo://10.2.0.2:1/svc?region=shanghai&idc=sh2
dubbo://10.3.0.3:1/svc?region=guangzhou&idc=gz
";
    let s = state_with(rule, providers, BJ_MT);
    let (got, _) = route(&s, &Request::new());
    assert_eq!(got, set(&["mt"]));
    s.degraded().mark(0);
    let (got, reason) = route(&s, &Request::new());
    assert_eq!(got, set(&["sh2"]), "{reason}");
    assert!(reason.contains("cross-region shanghai: local region beijing has no non-degraded candidate; route table of region shanghai: draw"), "{reason}");
    s.degraded().mark(2);
    // The cross region's table picks sh2, which has no healthy provider: region fallback.
    let (got, reason) = route(&s, &Request::new());
    assert_eq!(got, set(&["sh"]), "{reason}");
    s.degraded().mark(1);
    let (got, reason) = route(&s, &Request::new());
    assert_eq!(got, set(&["gz"]), "{reason}");
    assert!(reason.contains("cross-region guangzhou"), "{reason}");
}

#[test]
fn no_rule_passes_every_provider() {
    let router = build(None).unwrap();
    assert!(router.name() == "idc-weight");
    let snapshot = Arc::new(Snapshot::parse_lines(1, PROVIDERS).unwrap());
    let s = ChainState::new(
        None,
        snapshot.clone(),
        consumer(BJ_MT),
        vec![ChainEntry::new("idc-weight", DEFAULT_PRIORITY, router)],
    )
    .unwrap();
    // Degraded providers too: without a rule nothing is dropped.
    s.degraded().mark(0);
    let mut call = CallState::seeded(3);
    let mut trace = Trace::default();
    s.route_traced(&Request::new(), &mut call, &mut trace)
        .unwrap();
    assert_eq!(call.candidates.count(), snapshot.len());
    assert_eq!(trace.steps[0].evaluation, Evaluation::Cached);
    assert_eq!(
        trace.steps[0].reason,
        "no idc-weight rule: every provider passes"
    );
}

#[test]
fn a_deleted_config_center_rule_passes_every_provider() {
    let file = ChainFile::parse("chain.yaml", "routers:\n  - type: idc-weight\n", None).unwrap();
    let registry = crate::builtin_registry();
    let node = YamlDoc::parse(
        "/config/svc.idc-weight",
        &format!("{IDCS}route_tables: {{beijing: {{zf: 100}}}}\n"),
    )
    .unwrap();
    let entry = |rule| {
        file.compile_entry(&registry, &file.entries[0], rule)
            .unwrap()
    };
    let chain = ChainState::new(
        None,
        Arc::new(Snapshot::parse_lines(1, PROVIDERS).unwrap()),
        consumer(BJ_MT),
        vec![entry(RuleOverride::Doc(&node))],
    )
    .unwrap();
    let routed = |state: &ChainState| {
        let mut call = CallState::seeded(1);
        state.route(&Request::new(), &mut call).unwrap();
        idcs_of(state, &call)
    };
    assert_eq!(Some(routed(&chain)), set(&["zf"]));
    let chain = chain
        .next(&Change::<()>::entries(vec![entry(RuleOverride::Cleared)]))
        .unwrap();
    assert_eq!(Some(routed(&chain)), set(&["mt", "zf", "sh"]));
}

#[test]
fn validation_errors_are_located_in_the_chain_file() {
    let text = "\
routers:
  - type: idc-weight
    rule:
      idcs:
        beijing: [mt, zf]
        shanghai: [sh]
      route_tables:
        beijing: {mt: 50, sh: 40}
      selected: {mt: gz}
      cross_region: [hangzhou]
  - type: idc-weight   # no rule: a pass-through router, not an error
";
    let file = ChainFile::parse("chain.yaml", text, None).unwrap();
    let errors = file.compile(&crate::builtin_registry()).unwrap_err();
    let mut shown: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
    shown.sort();
    let expected = [
        "chain.yaml:10:22: routers[0].rule.cross_region[0]: cross region `hangzhou` is not a region of `idcs`",
        "chain.yaml:8:18: routers[0].rule.route_tables.beijing: the weights of the route table of region `beijing` sum to 90",
        "chain.yaml:8:31: routers[0].rule.route_tables.beijing.sh: IDC `sh` in the route table of region `beijing` belongs to region `shanghai`",
        "chain.yaml:9:22: routers[0].rule.selected.mt: IDC `gz` selected for local IDC `mt` is not an IDC of `idcs`",
    ];
    assert_eq!(shown.len(), expected.len(), "{shown:#?}");
    for (got, want) in shown.iter().zip(expected) {
        assert!(got.starts_with(want), "\n got  {got}\n want {want}");
    }
}

#[test]
fn an_invalid_update_is_refused_and_the_previous_rule_keeps_serving() {
    let text = format!(
        "routers:\n  - type: idc-weight\n    rule:\n{}      route_tables: {{beijing: {{mt: 100}}}}\n",
        IDCS.lines()
            .map(|l| format!("      {l}\n"))
            .collect::<String>()
    );
    let file = ChainFile::parse("chain.yaml", &text, None).unwrap();
    let registry = crate::builtin_registry();
    let entries = file.compile(&registry).unwrap();
    let chain = ChainState::new(
        None,
        Arc::new(Snapshot::parse_lines(1, PROVIDERS).unwrap()),
        consumer(BJ_MT),
        entries,
    )
    .unwrap();
    let update = |s: &ChainState, rule_text: &str| {
        let node = YamlDoc::parse("/config/svc.idc-weight", rule_text).unwrap();
        let entry = file
            .compile_entry(&registry, &file.entries[0], RuleOverride::Doc(&node))
            .map_err(|e| e.iter().map(ToString::to_string).collect::<Vec<_>>())?;
        s.next(&Change::<()>::entries(vec![entry]))
            .map_err(|e| vec![e.to_string()])
    };
    let routes_to = |state: &ChainState, want: &str| {
        let mut call = CallState::seeded(1);
        state.route(&Request::new(), &mut call).unwrap();
        assert_eq!(idcs_of(state, &call), set(&[want]).unwrap());
    };
    routes_to(&chain, "mt");
    let bad = format!("{IDCS}route_tables: {{beijing: {{mt: 60, zf: 60}}}}\n");
    let errors = update(&chain, &bad).err().unwrap();
    assert!(
        errors[0].starts_with("/config/svc.idc-weight:4:25: route_tables.beijing: the weights"),
        "{errors:?}"
    );
    assert_eq!(chain.generation(), 1);
    routes_to(&chain, "mt");
    let chain = update(
        &chain,
        &format!("{IDCS}route_tables: {{beijing: {{zf: 100}}}}\n"),
    )
    .unwrap();
    assert_eq!(chain.generation(), 2);
    routes_to(&chain, "zf");
}

#[test]
fn routing_allocates_nothing() {
    let text: String = (0..1000)
        .map(|i| {
            let (region, idc) = [
                ("beijing", "mt"),
                ("beijing", "zf"),
                ("shanghai", "sh"),
                ("guangzhou", "gz9"),
            ][i % 4];
            format!(
                "dubbo://10.0.{}.{}:1/s?region={region}&idc={idc}&degraded={}\n",
                i / 250,
                i % 250,
                i % 10 == 0
            )
        })
        .collect();
    let s = state_with(
        &format!(
            "{IDCS}route_tables: {{beijing: {{mt: 30, zf: 70}}}}\nselected: {{sh: sh}}\ncross_region: [shanghai]\n"
        ),
        &text,
        BJ_MT,
    );
    s.degraded().mark(1);
    let requests = [
        Request::new(),
        Request::new().with_consumer(consumer("consumer://10.9.9.9/svc?region=SHANGHAI&idc=SH")),
        Request::new().with_consumer(consumer("consumer://10.9.9.9/svc?region=guangzhou")),
        Request::new().with_consumer(consumer("consumer://10.9.9.9/svc?region=GuangZhou&idc=GZ9")),
        Request::new().with_consumer(consumer("consumer://10.9.9.9/svc")),
    ];
    let mut call = CallState::seeded(1);
    for r in &requests {
        s.route(r, &mut call).unwrap();
    }
    let info = allocation_counter::measure(|| {
        for _ in 0..100 {
            for r in &requests {
                s.route(r, &mut call).unwrap();
            }
        }
    });
    assert_eq!(info.count_total, 0, "{info:?}");
}

/// One random provider: (region, idc, degraded param, live degraded).
type RandomProvider = (usize, usize, bool, bool);

proptest::proptest! {
    /// The router agrees with a direct, list-based reading of the five steps over
    /// random providers, inputs, consumers and rule variants.
    #[test]
    fn agrees_with_a_naive_model(
        providers in proptest::collection::vec(
            (0usize..5, 0usize..6, proptest::bool::weighted(0.2), proptest::bool::weighted(0.1)),
            1..80,
        ),
        input_mask in proptest::collection::vec(proptest::bool::weighted(0.85), 80),
        consumer_region in 0usize..5,
        consumer_idc in 0usize..6,
        host in 0u8..20,
        table in proptest::option::of(0u32..=100),
        cross_table in proptest::bool::ANY,
        selected in proptest::bool::ANY,
        cross in proptest::bool::ANY,
        force in proptest::bool::ANY,
        seed in 0u64..1000,
    ) {
        check_model(&providers, &input_mask, consumer_region, consumer_idc, host,
                    table, cross_table, selected, cross, force, seed)?;
    }
}

#[allow(clippy::too_many_arguments)]
fn check_model(
    providers: &[RandomProvider],
    input_mask: &[bool],
    consumer_region: usize,
    consumer_idc: usize,
    host: u8,
    table: Option<u32>,
    cross_table: bool,
    selected: bool,
    cross: bool,
    force: bool,
    seed: u64,
) -> Result<(), proptest::test_runner::TestCaseError> {
    use routechain_core::{FastRng, RandomSource, router_fn};
    // None = param absent. Mixed case on purpose.
    const REGIONS: [Option<&str>; 5] = [
        Some("beijing"),
        Some("BeiJing"),
        Some("shanghai"),
        Some("gz"),
        None,
    ];
    const IDCS_: [Option<&str>; 6] = [
        Some("mt"),
        Some("ZF"),
        Some("sh"),
        Some("sh2"),
        Some("xx"),
        None,
    ];
    let known: [(&str, &[&str]); 2] = [("beijing", &["mt", "zf"]), ("shanghai", &["sh", "sh2"])];

    let mut rule = String::from("idcs:\n  beijing: [mt, zf]\n  shanghai: [sh, sh2]\n");
    let mut tables: Vec<(&str, [(&str, u32); 2])> = Vec::new();
    if let Some(w) = table {
        tables.push(("beijing", [("mt", w), ("zf", 100 - w)]));
    }
    if cross_table {
        tables.push(("shanghai", [("sh", 30), ("sh2", 70)]));
    }
    if !tables.is_empty() {
        rule.push_str("route_tables:\n");
        for (r, ws) in &tables {
            rule.push_str(&format!(
                "  {r}: {{{}: {}, {}: {}}}\n",
                ws[0].0, ws[0].1, ws[1].0, ws[1].1
            ));
        }
    }
    if selected {
        rule.push_str("selected: {mt: zf, sh2: sh}\n");
    }
    if cross {
        rule.push_str("cross_region: [shanghai, beijing]\n");
    }
    rule.push_str(&format!("force: {force}\n"));

    let text: String = providers
        .iter()
        .enumerate()
        .map(|(i, &(r, d, deg, _))| {
            let mut params = vec![];
            if let Some(r) = REGIONS[r] {
                params.push(format!("region={r}"));
            }
            if let Some(d) = IDCS_[d] {
                params.push(format!("idc={d}"));
            }
            if deg {
                params.push("degraded=true".to_string());
            }
            format!(
                "dubbo://10.0.{}.{}:1/s?{}\n",
                i / 200,
                i % 200,
                params.join("&")
            )
        })
        .collect();
    let mut consumer_params = vec![];
    if let Some(r) = REGIONS[consumer_region] {
        consumer_params.push(format!("region={r}"));
    }
    if let Some(d) = IDCS_[consumer_idc] {
        consumer_params.push(format!("idc={d}"));
    }
    let consumer_url = format!("consumer://172.16.0.{host}/s?{}", consumer_params.join("&"));
    let mask: Vec<bool> = input_mask[..providers.len()].to_vec();
    let keep = mask.clone();
    let before: Arc<dyn Router> = Arc::new(router_fn("input", move |_, c| {
        for (i, k) in keep.iter().enumerate() {
            if !k {
                c.remove(i);
            }
        }
    }));
    let state = ChainState::new(
        None,
        Arc::new(Snapshot::parse_lines(1, &text).unwrap()),
        consumer(&consumer_url),
        vec![
            ChainEntry::new("input", 0, before),
            ChainEntry::new("idc-weight", DEFAULT_PRIORITY, build(Some(&rule)).unwrap()),
        ],
    )
    .unwrap();
    for (i, p) in providers.iter().enumerate() {
        if p.3 {
            state.degraded().mark(i);
        }
    }

    // The model, on lists and lower-cased strings.
    let lower = |s: Option<&str>| s.map(|s| s.to_ascii_lowercase());
    let region_of_idc = |d: &str| {
        known
            .iter()
            .find(|(_, ds)| ds.contains(&d))
            .map(|(r, _)| r.to_string())
    };
    let p_idc = |i: usize| lower(IDCS_[providers[i].1]);
    let p_region = |i: usize| {
        lower(REGIONS[providers[i].0]).or_else(|| p_idc(i).and_then(|d| region_of_idc(&d)))
    };
    let input: Vec<usize> = (0..providers.len()).filter(|&i| mask[i]).collect();
    let healthy: Vec<usize> = input
        .iter()
        .copied()
        .filter(|&i| !providers[i].2 && !providers[i].3)
        .collect();
    let local_idc = lower(IDCS_[consumer_idc]);
    let local_region =
        lower(REGIONS[consumer_region]).or_else(|| local_idc.as_deref().and_then(region_of_idc));
    let mut order: Vec<String> = local_region.iter().cloned().collect();
    if cross {
        for r in ["shanghai", "beijing"] {
            if local_region.as_deref() != Some(r) {
                order.push(r.to_string());
            }
        }
    }
    let chosen = order
        .iter()
        .find(|r| {
            healthy
                .iter()
                .any(|&i| p_region(i).as_deref() == Some(r.as_str()))
        })
        .cloned();
    let mut rng = FastRng::seeded(seed);
    let expected: Vec<usize> = match chosen {
        None if force => vec![],
        None if !healthy.is_empty() => healthy.clone(),
        None => input.clone(),
        Some(r) => {
            let region_c: Vec<usize> = healthy
                .iter()
                .copied()
                .filter(|&i| p_region(i).as_deref() == Some(r.as_str()))
                .collect();
            let table = tables.iter().find(|(t, _)| *t == r);
            let target: Option<String> = if let Some((_, ws)) = table {
                let draw = rng.below(100) as u32;
                Some(if draw < ws[0].1 { ws[0].0 } else { ws[1].0 }.to_string())
            } else if Some(&r) == local_region.as_ref() {
                match &local_idc {
                    Some(d) if selected && d == "mt" => Some("zf".into()),
                    Some(d) if selected && d == "sh2" => Some("sh".into()),
                    Some(d) => Some(d.clone()),
                    None => known.iter().find(|(k, _)| *k == r).map(|(_, ds)| {
                        let h =
                            stable_hash(format!("172.16.0.{host}").as_bytes()) % ds.len() as u64;
                        ds[h as usize].to_string()
                    }),
                }
            } else {
                None
            };
            match target {
                None => region_c,
                Some(t) => {
                    let kept: Vec<usize> = region_c
                        .iter()
                        .copied()
                        .filter(|&i| p_idc(i).as_deref() == Some(t.as_str()))
                        .collect();
                    match (kept.is_empty(), force) {
                        (false, _) => kept,
                        (true, true) => vec![],
                        (true, false) => region_c,
                    }
                }
            }
        }
    };

    let mut call = CallState::seeded(seed);
    let got = match state.route(&Request::new(), &mut call) {
        Ok(()) => call.candidates.iter().collect::<Vec<_>>(),
        Err(_) => vec![],
    };
    proptest::prop_assert_eq!(&got, &expected, "rule:\n{}consumer {}", rule, consumer_url);
    // The same answer for a consumer resolved per call.
    let other = ChainState::new(
        None,
        state.snapshot().clone(),
        Url::empty(),
        state.entries().clone(),
    )
    .unwrap();
    for (i, p) in providers.iter().enumerate() {
        if p.3 {
            other.degraded().mark(i);
        }
    }
    let mut call = CallState::seeded(seed);
    let got = match other.route(
        &Request::new().with_consumer(consumer(&consumer_url)),
        &mut call,
    ) {
        Ok(()) => call.candidates.iter().collect::<Vec<_>>(),
        Err(_) => vec![],
    };
    proptest::prop_assert_eq!(
        &got,
        &expected,
        "per call: rule:\n{}consumer {}",
        rule,
        consumer_url
    );
    Ok(())
}

#[test]
fn names_outside_the_rule_are_indexed_by_hash_case_insensitively() {
    let long = "x".repeat(80);
    let mut text = String::new();
    // Many distinct IDC values outside the rule (one per provider) in region beijing.
    for i in 0..3000 {
        text.push_str(&format!(
            "dubbo://10.0.{}.{}:1/s?region=beijing&idc=rack-{i}\n",
            i / 250,
            i % 250
        ));
    }
    text.push_str(&format!(
        "dubbo://10.9.0.1:1/s?region=Guangzhou&idc={long}\n"
    ));
    text.push_str("dubbo://10.9.0.2:1/s?region=guangzhou&idc=GZ1\n");
    let cases = [
        ("consumer://h/s?region=beijing&idc=RACK-2999", vec![2999]),
        ("consumer://h/s?region=BEIJING&idc=rack-7", vec![7]),
        // A long name is found by the same case-insensitive hash.
        (
            &*format!(
                "consumer://h/s?region=guangzhou&idc={}",
                long.to_uppercase()
            ),
            vec![3000],
        ),
        ("consumer://h/s?region=GUANGZHOU&idc=gz1", vec![3001]),
        // A region outside the rule without a known IDC: the whole region.
        ("consumer://h/s?region=guangzhou", vec![3000, 3001]),
    ];
    let s = state_with(IDCS, &text, BJ_MT);
    for (url, want) in &cases {
        // Prepared for this consumer, and resolved per call.
        let prepared = state_with(IDCS, &text, url);
        for (state, request) in [
            (&prepared, Request::new()),
            (&s, Request::new().with_consumer(consumer(url))),
        ] {
            let mut call = CallState::seeded(1);
            state.route(&request, &mut call).unwrap();
            assert_eq!(&call.candidates.iter().collect::<Vec<_>>(), want, "{url}");
        }
    }
}

#[test]
fn a_snapshot_update_re_prepares_the_indexes() {
    let s = state("", BJ_MT);
    let next = Arc::new(
            Snapshot::parse_lines(2, "dubbo://10.1.0.9:1/svc?region=beijing&idc=zf\ndubbo://10.1.0.8:1/svc?region=beijing&idc=mt\n")
                .unwrap(),
        );
    let s2 = s.next(&Change::<()>::providers(next.clone())).unwrap();
    let mut call = CallState::seeded(1);
    s2.route(&Request::new(), &mut call).unwrap();
    assert_eq!(call.candidates.iter().collect::<Vec<_>>(), [1]);
}
