//! The affinity router: ports of the semantics of Dubbo's `AffinityRouteTest`, plus the
//! edges around them.

use std::sync::Arc;

use routechain_core::{CallState, ChainEntry, ChainState, Evaluation, Request, Trace, router_fn};

use super::AffinityRouter;
use crate::test_support::*;

/// The providers of Dubbo's `AffinityRouteTest`: 40, of which 16 have region=beijing.
fn affinity_providers() -> Vec<String> {
    let mut v = Vec::new();
    for host in ["127.0.0.1", "dubbo.apache.org"] {
        for q in [
            "",
            "",
            "?env=normal",
            "?env=normal",
            "?env=normal",
            "?region=beijing",
            "?region=beijing",
            "?region=beijing",
            "?region=beijing&env=gray",
            "?region=beijing&env=gray",
            "?region=beijing&env=gray",
            "?region=beijing&env=gray",
            "?region=beijing&env=normal",
            "?region=hangzhou",
            "?region=hangzhou",
            "?region=hangzhou&env=gray",
            "?region=hangzhou&env=gray",
            "?region=hangzhou&env=normal",
            "?region=hangzhou&env=normal",
            "?region=hangzhou&env=normal",
        ] {
            v.push(format!("dubbo://{host}/com.foo.BarService{q}"));
        }
    }
    v
}

fn affinity_rule(ratio: &str) -> String {
    format!(
        "configVersion: v3.1\nscope: service\nkey: service.apache.com\nenabled: true\n\
         runtime: true\naffinityAware:\n  key: region\n  ratio: {ratio}\n"
    )
}

fn affinity_entry(yaml: &str) -> ChainEntry {
    let router = build(AffinityRouter, "affinity", Some(yaml)).expect("test rule compiles");
    ChainEntry::new("affinity", 130, router)
}

#[test]
fn affinity_ratio_decides_like_dubbo() {
    let lines = affinity_providers();
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    let snap = snapshot(&refs);
    let beijing: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].contains("region=beijing"))
        .collect();
    assert_eq!(beijing.len(), 16);
    let all: Vec<usize> = (0..lines.len()).collect();
    let c = consumer("consumer://127.0.0.1/com.foo.BarService?env=gray&region=beijing");
    // (Dubbo test, ratio, expected)
    for (name, ratio, want) in [
        ("testMetAffinityRoute", "20", &beijing),
        ("testUnMetAffinityRoute", "80", &all),
        ("testRatioEqualsAffinityRoute", "40", &beijing),
        ("testRatioNotEqualsAffinityRoute", "40.1", &all),
        ("ratio as a string", "\"40\"", &beijing),
        ("ratio 0", "0", &beijing),
        ("ratio 100 unmet", "100", &all),
    ] {
        let got = route(
            &snap,
            &c,
            vec![affinity_entry(&affinity_rule(ratio))],
            &request(&[]),
        );
        assert_eq!(&got, want, "{name}");
    }
}

#[test]
fn affinity_edges() {
    let snap = snapshot(&[
        "dubbo://10.0.0.1:1/s?region=a",
        "dubbo://10.0.0.2:1/s?region=a",
        "dubbo://10.0.0.3:1/s?region=b",
        "dubbo://10.0.0.4:1/s",
    ]);
    let rule = affinity_rule("50");
    let cases: &[(&str, &str, String, &[usize])] = &[
        (
            "2 of 4 share region a: kept",
            "consumer://h/s?region=a",
            rule.clone(),
            &[0, 1],
        ),
        (
            "1 of 4 share region b: unchanged",
            "consumer://h/s?region=b",
            rule.clone(),
            &[0, 1, 2, 3],
        ),
        (
            "consumer without the key: unchanged",
            "consumer://h/s",
            rule.clone(),
            &[0, 1, 2, 3],
        ),
        (
            "no provider with the value: unchanged",
            "consumer://h/s?region=z",
            rule.clone(),
            &[0, 1, 2, 3],
        ),
        (
            "ratio 0 and no provider with the value: empty (as Dubbo)",
            "consumer://h/s?region=z",
            affinity_rule("0"),
            &[],
        ),
        (
            "disabled: unchanged",
            "consumer://h/s?region=b",
            affinity_rule("0").replace("enabled: true", "enabled: false"),
            &[0, 1, 2, 3],
        ),
    ];
    for (name, consumer_url, yaml, want) in cases {
        let got = route(
            &snap,
            &consumer(consumer_url),
            vec![affinity_entry(yaml)],
            &request(&[]),
        );
        assert_eq!(&got, want, "{name}");
    }
}

#[test]
fn affinity_ratio_is_of_the_candidates_it_receives() {
    // A previous router removes provider 3: now 2 of 3 share region a (66%), above 60%.
    let snap = snapshot(&[
        "dubbo://10.0.0.1:1/s?region=a",
        "dubbo://10.0.0.2:1/s?region=a",
        "dubbo://10.0.0.3:1/s?region=b",
        "dubbo://10.0.0.4:1/s?region=c",
    ]);
    let c = consumer("consumer://h/s?region=a");
    let rule = affinity_rule("60");
    assert_eq!(
        route(&snap, &c, vec![affinity_entry(&rule)], &request(&[])),
        [0, 1, 2, 3]
    );
    let drop_3 = ChainEntry::new("drop", 0, Arc::new(router_fn("drop", |_, c| c.remove(3))));
    assert_eq!(
        route(
            &snap,
            &c,
            vec![drop_3, affinity_entry(&rule)],
            &request(&[])
        ),
        [0, 1]
    );
}

#[test]
fn affinity_reads_a_per_request_consumer_at_run_time() {
    let snap = snapshot(&[
        "dubbo://10.0.0.1:1/s?region=a",
        "dubbo://10.0.0.2:1/s?region=b",
        "dubbo://10.0.0.3:1/s?region=b",
    ]);
    let state = ChainState::new(
        None,
        snap,
        consumer("consumer://h/s?region=a"),
        vec![affinity_entry(&affinity_rule("20"))],
    )
    .unwrap();
    let mut trace = Trace::default();
    state
        .route_traced(&Request::new(), &mut CallState::seeded(1), &mut trace)
        .unwrap();
    assert_eq!(trace.steps[0].evaluation, Evaluation::Cached);
    assert_eq!(trace.steps[0].after, 1);
    let other = Request::new().with_consumer(consumer("consumer://h/s?region=b"));
    let mut trace = Trace::default();
    let mut call = CallState::seeded(1);
    state.route_traced(&other, &mut call, &mut trace).unwrap();
    assert_eq!(trace.steps[0].evaluation, Evaluation::Runtime);
    assert_eq!(call.candidates.iter().collect::<Vec<_>>(), [1, 2]);
}

#[test]
fn affinity_rule_errors_are_reported_together() {
    let cases: &[(&str, &str, &[&str])] = &[
        (
            "bad version, ratio out of range, no key",
            "configVersion: v3.0\naffinityAware:\n  ratio: 101\n",
            &["configVersion", "affinityAware", "affinityAware.ratio"],
        ),
        (
            "negative ratio",
            "configVersion: v3.1\naffinityAware: {key: region, ratio: -1}\n",
            &["affinityAware.ratio"],
        ),
        (
            "non-numeric ratio",
            "configVersion: v3.1\naffinityAware: {key: region, ratio: lots}\n",
            &["affinityAware.ratio"],
        ),
        ("no affinityAware", "configVersion: v3.1\n", &["(document)"]),
        (
            "no configVersion",
            "affinityAware: {key: region}\n",
            &["(document)"],
        ),
    ];
    for (name, yaml, paths) in cases {
        let errors = build(AffinityRouter, "affinity", Some(yaml))
            .err()
            .expect(name);
        let got: Vec<String> = errors.iter().map(|e| e.path.to_string()).collect();
        assert_eq!(&got, paths, "{name}: {errors:?}");
    }
}

#[test]
fn affinity_unknown_fields_are_ignored_as_dubbo_ignores_them() {
    // `routechain check` warns about them (RC107); the router accepts the rule.
    for yaml in [
        "configVersion: v3.1\naffinityAware: {key: region, ratoi: 3}\n",
        "configVersion: v3.1\nforse: true\naffinityAware: {key: region, ratio: 20}\n",
    ] {
        assert!(
            build(AffinityRouter, "affinity", Some(yaml)).is_ok(),
            "{yaml}"
        );
    }
}
