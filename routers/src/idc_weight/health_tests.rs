//! Tests of the health and stickiness options: spillover between IDCs and between regions
//! (Envoy's examples), the panic threshold entering and leaving as live health changes,
//! sticky draws, IDCs inferred from subnets, located validation errors, and no allocation.

use std::sync::Arc;

use super::*;
use routechain_core::{
    CallState, ChainEntry, ChainState, Request, Router, Snapshot, Trace, Url, stable_hash,
};
use routechain_rules::ChainFile;

fn build(rule: &str) -> Arc<dyn Router> {
    crate::test_support::build(IdcWeightRouter, "idc-weight", Some(rule))
        .unwrap_or_else(|e| panic!("{rule}: {e:?}"))
}

/// `count` providers per (region, idc, first two octets), in that order.
fn providers(groups: &[(&str, &str, &str, usize)]) -> String {
    let mut text = String::new();
    for (region, idc, net, count) in groups {
        for i in 0..*count {
            text.push_str(&format!(
                "dubbo://{net}.{}.{}:20880/svc?region={region}&idc={idc}\n",
                i / 250,
                i % 250
            ));
        }
    }
    text
}

fn state(rule: &str, providers: &str, consumer: &str) -> ChainState {
    ChainState::new(
        None,
        Arc::new(Snapshot::parse_lines(1, providers).unwrap()),
        Url::parse(consumer).unwrap(),
        vec![ChainEntry::new("idc-weight", DEFAULT_PRIORITY, build(rule))],
    )
    .unwrap()
}

/// The IDC param of the first routed provider.
fn idc(state: &ChainState, call: &CallState) -> String {
    let i = call.candidates.first().expect("a provider");
    state.snapshot().providers()[i]
        .get("idc")
        .unwrap_or("-")
        .to_string()
}

/// Share (percent) of `calls` seeded calls landing in each of `idcs`.
fn shares(state: &ChainState, request: &Request, idcs: &[&str], calls: u32) -> Vec<f64> {
    let mut call = CallState::seeded(7);
    let mut counts = vec![0u32; idcs.len()];
    for _ in 0..calls {
        state.route(request, &mut call).unwrap();
        let got = idc(state, &call);
        let k = idcs.iter().position(|d| *d == got).expect("a known idc");
        counts[k] += 1;
    }
    counts
        .iter()
        .map(|&c| f64::from(c) * 100.0 / f64::from(calls))
        .collect()
}

fn explain(state: &ChainState, request: &Request) -> String {
    let mut call = CallState::seeded(3);
    let mut trace = Trace::default();
    let _ = state.route_traced(request, &mut call, &mut trace);
    trace.steps[0].reason.clone()
}

const BJ_MT: &str = "consumer://10.9.0.1/svc?region=beijing&idc=mt";

#[test]
fn spillover_moves_an_idcs_weight_with_its_healthy_share() {
    let rule = "idcs: {beijing: [mt, zf]}\nroute_tables: {beijing: {mt: 50, zf: 50}}\nspillover: {overprovisioning: 1.4}\n";
    let text = providers(&[
        ("beijing", "mt", "10.20", 10),
        ("beijing", "zf", "10.30", 10),
    ]);
    let s = state(rule, &text, BJ_MT);
    // (mt providers degraded, mt's effective weight, mt's share of the calls)
    let table = [
        (0, "50.0", 50.0),
        (2, "50.0", 50.0),
        (3, "49.0", 49.494_949),
        (5, "35.0", 41.176_470),
        (7, "21.0", 29.577_464),
        (9, "7.0", 12.280_701),
        (10, "0.0", 0.0),
    ];
    let mut marked = 0;
    for (degraded, weight, share) in table {
        while marked < degraded {
            s.degraded().mark(marked);
            marked += 1;
        }
        let reason = explain(&s, &Request::new());
        let healthy = 10 - degraded;
        assert!(
            reason.contains(&format!(
                "effective weights mt 50 × {healthy} of 10 healthy → {weight}, zf 50 × 10 of 10 healthy → 50.0"
            )),
            "{reason}"
        );
        let got = shares(&s, &Request::new(), &["mt", "zf"], 100_000);
        assert!(
            (got[0] - share).abs() <= 1.0,
            "{degraded} degraded: mt {got:?}, want {share}"
        );
    }
    // docs/group-and-idc.md's example, exactly: 5 of 10 degraded gives 41.2% / 58.8%.
    assert!((41.176_470_f64 - 35.0 * 100.0 / 85.0).abs() < 1e-5);
}

#[test]
fn a_rule_without_the_options_keeps_a_degraded_idcs_weight() {
    let rule = "idcs: {beijing: [mt, zf]}\nroute_tables: {beijing: {mt: 50, zf: 50}}\n";
    let text = providers(&[
        ("beijing", "mt", "10.20", 10),
        ("beijing", "zf", "10.30", 10),
    ]);
    let s = state(rule, &text, BJ_MT);
    for i in 0..5 {
        s.degraded().mark(i);
    }
    let got = shares(&s, &Request::new(), &["mt", "zf"], 100_000);
    assert!((got[0] - 50.0).abs() <= 1.0, "{got:?}");
}

#[test]
fn the_local_region_spills_to_the_cross_region_as_envoy_does() {
    let rule = "idcs: {beijing: [mt], shanghai: [sh]}\ncross_region: [shanghai]\nspillover: {overprovisioning: 1.4}\n";
    let text = providers(&[
        ("beijing", "mt", "10.20", 100),
        ("shanghai", "sh", "10.40", 100),
    ]);
    let s = state(rule, &text, BJ_MT);
    // (local healthy %, local load as explained, local share of calls)
    let table = [
        (100, "100.0%", 100.0),
        (72, "100.0%", 100.0),
        (71, "99.4%", 99.4),
        (50, "70.0%", 70.0),
        (25, "35.0%", 35.0),
        (0, "", 0.0),
    ];
    for (healthy, load, share) in table {
        for i in 0..100 {
            if i < 100 - healthy {
                s.degraded().mark(i);
            } else {
                s.degraded().clear(i);
            }
        }
        let reason = explain(&s, &Request::new());
        if healthy > 0 {
            let other = format!("{:.1}%", 100.0 - share);
            assert!(
                reason.contains(&format!(
                    "spillover levels (overprovisioning 1.4): beijing {healthy} of 100 healthy → {load}, shanghai 100 of 100 healthy → {other}"
                )),
                "{reason}"
            );
        } else {
            assert!(
                reason.contains(
                    "beijing 0 of 100 healthy → 0.0%, shanghai 100 of 100 healthy → 100.0%"
                ),
                "{reason}"
            );
        }
        let got = shares(&s, &Request::new(), &["mt", "sh"], 100_000);
        assert!((got[0] - share).abs() <= 1.0, "{healthy}% healthy: {got:?}");
    }
    // The spilled calls say so (50 of 100 healthy).
    for i in 50..100 {
        s.degraded().clear(i);
    }
    let mut call = CallState::seeded(1);
    let mut seen_spill = false;
    for _ in 0..50 {
        let mut trace = Trace::default();
        s.route_traced(&Request::new(), &mut call, &mut trace)
            .unwrap();
        if idc(&s, &call) == "sh" {
            assert!(
                trace.steps[0]
                    .reason
                    .contains("cross-region shanghai (spilled)"),
                "{}",
                trace.steps[0].reason
            );
            seen_spill = true;
        }
    }
    assert!(seen_spill);
}

#[test]
fn sticky_draws_keep_each_user_and_move_only_the_margin() {
    let text = providers(&[("beijing", "mt", "10.20", 4), ("beijing", "zf", "10.30", 4)]);
    let user = |u: u32| Request::new().with_attribute("user", format!("user-{u}"));
    let sides = |table: &str, extra: &str| -> Vec<String> {
        let rule = format!(
            "idcs: {{beijing: [mt, zf]}}\nroute_tables: {{beijing: {table}}}\nhash_key: \"attributes[user]\"\n{extra}"
        );
        let s = state(&rule, &text, BJ_MT);
        let mut a = CallState::seeded(1);
        let mut b = CallState::seeded(99);
        (0..20_000)
            .map(|u| {
                s.route(&user(u), &mut a).unwrap();
                let first = idc(&s, &a);
                // Another call state (another random sequence): the same IDC.
                s.route(&user(u), &mut b).unwrap();
                assert_eq!(idc(&s, &b), first, "user {u}");
                first
            })
            .collect()
    };
    for extra in ["", "spillover: {overprovisioning: 1.4}\n"] {
        let before = sides("{mt: 50, zf: 50}", extra);
        let after = sides("{mt: 60, zf: 40}", extra);
        let mt = before.iter().filter(|d| *d == "mt").count() as f64 / 200.0;
        assert!((mt - 50.0).abs() <= 1.0, "{extra}: mt {mt}%");
        let mt = after.iter().filter(|d| *d == "mt").count() as f64 / 200.0;
        assert!((mt - 60.0).abs() <= 1.0, "{extra}: mt {mt}%");
        let moved: Vec<_> = before.iter().zip(&after).filter(|(a, b)| a != b).collect();
        assert!(
            moved.iter().all(|(_, b)| *b == "mt"),
            "users only move to the raised idc"
        );
        let moved = moved.len() as f64 / 200.0;
        assert!(moved <= 10.5, "{extra}: {moved}% moved");
    }
    // No value in the request: a random draw, and the trace says so.
    let rule = "idcs: {beijing: [mt, zf]}\nroute_tables: {beijing: {mt: 50, zf: 50}}\nhash_key: [\"attachments[tenant]\", \"attributes[user]\"]\n";
    let s = state(rule, &text, BJ_MT);
    assert!(explain(&s, &Request::new()).contains(
        "hash_key attachments[tenant], attributes[user] has no value in the request: random draws"
    ));
    assert!(
        explain(&s, &user(1)).contains("draws sticky on attachments[tenant], attributes[user]")
    );
    let got = shares(&s, &Request::new(), &["mt", "zf"], 20_000);
    assert!((got[0] - 50.0).abs() <= 2.0, "{got:?}");
    // consumer.host: every call of one consumer lands in one IDC.
    let rule = "idcs: {beijing: [mt, zf]}\nroute_tables: {beijing: {mt: 50, zf: 50}}\nhash_key: consumer.host\n";
    let s = state(rule, &text, BJ_MT);
    let got = shares(&s, &Request::new(), &["mt", "zf"], 1_000);
    assert!(got[0] == 100.0 || got[1] == 100.0, "{got:?}");
    let h = stable_hash(b"10.9.0.1");
    let want = if routechain_core::weighted::scale(h, 100) < 50 {
        0
    } else {
        1
    };
    assert_eq!(got[want], 100.0);
}

#[test]
fn panic_enters_and_leaves_as_live_health_changes() {
    // One IDC with weight 100 (the other has weight 0 and healthy providers).
    let rule = "idcs: {beijing: [mt, zf]}\nroute_tables: {beijing: {mt: 100, zf: 0}}\npanic_threshold: 50\n";
    let text = providers(&[
        ("beijing", "mt", "10.20", 10),
        ("beijing", "zf", "10.30", 10),
    ]);
    let s = state(rule, &text, BJ_MT);
    let routed = |s: &ChainState| {
        let mut call = CallState::seeded(5);
        s.route(&Request::new(), &mut call).unwrap();
        (idc(s, &call), call.candidates.count())
    };
    assert_eq!(routed(&s), ("mt".to_string(), 10));
    // 9 of 10 degraded: panic, every mt provider.
    for i in 0..9 {
        s.degraded().mark(i);
    }
    assert_eq!(routed(&s), ("mt".to_string(), 10));
    let reason = explain(&s, &Request::new());
    assert!(reason.contains("panic: idc mt has 1 of 10 provider(s) healthy (10% < panic_threshold 50%): all its providers, degraded too"), "{reason}");
    assert!(
        reason.contains("panic keeps 9 degraded provider(s)"),
        "{reason}"
    );
    // Recovering to 6 of 10 leaves panic: the 6 healthy ones.
    for i in 0..5 {
        s.degraded().clear(i);
    }
    assert_eq!(routed(&s), ("mt".to_string(), 6));
    assert!(!explain(&s, &Request::new()).contains("panic"));
    // Exactly at the threshold (5 of 10) is not panic; below it is.
    s.degraded().mark(0);
    assert_eq!(routed(&s), ("mt".to_string(), 5));
    s.degraded().mark(1);
    assert_eq!(routed(&s), ("mt".to_string(), 10));
    // All 10 degraded: no survivor to overload, so no panic: the region's healthy ones.
    for i in 0..10 {
        s.degraded().mark(i);
    }
    assert_eq!(routed(&s), ("zf".to_string(), 10));

    // A region in panic: health ignored in the whole region, even by spillover.
    let rule = "idcs: {beijing: [mt, zf]}\nroute_tables: {beijing: {mt: 50, zf: 50}}\npanic_threshold: 50\nspillover: {overprovisioning: 1.4}\n";
    let s = state(rule, &text, BJ_MT);
    for i in (0..4).chain(10..17) {
        s.degraded().mark(i);
    }
    // 9 of 20 healthy: the region is in panic, mt and zf keep their configured weights.
    let reason = explain(&s, &Request::new());
    assert!(reason.contains("panic: region beijing has 9 of 20 provider(s) healthy (45% < panic_threshold 50%): health ignored in the region"), "{reason}");
    assert!(reason.contains("in panic, so the configured weights: effective weights mt 50 × 6 of 10 healthy → 50.0, zf 50 × 3 of 10 healthy → 50.0"), "{reason}");
    let got = shares(&s, &Request::new(), &["mt", "zf"], 100_000);
    assert!((got[0] - 50.0).abs() <= 1.0, "{got:?}");
    let mut call = CallState::seeded(1);
    s.route(&Request::new(), &mut call).unwrap();
    assert_eq!(call.candidates.count(), 10);
    // One recovers: 10 of 20, no panic; spillover weights 50 × 0.84 against 50 × 0.42.
    s.degraded().clear(16);
    let reason = explain(&s, &Request::new());
    assert!(!reason.contains("panic: region"), "{reason}");
    assert!(
        reason.contains("mt 50 × 6 of 10 healthy → 42.0, zf 50 × 4 of 10 healthy → 28.0"),
        "{reason}"
    );
}

#[test]
fn idcs_are_inferred_from_subnets_and_an_explicit_param_wins() {
    let rule = "idcs: {beijing: [mt, zf], shanghai: [sh]}\nidc_cidrs: {mt: [\"10.20.0.0/16\"], zf: [\"10.30.0.0/16\", \"10.31.0.0/16\"], sh: [\"fd00:40::/32\"]}\ncross_region: [shanghai]\n";
    let text = "\
dubbo://10.20.0.1:1/svc
dubbo://10.20.0.2:1/svc?idc=zf
dubbo://10.30.0.3:1/svc
dubbo://10.31.9.4:1/svc
dubbo://[fd00:40::5]:1/svc
dubbo://10.99.0.6:1/svc
dubbo://provider.example:1/svc
";
    // (consumer, providers routed)
    let cases = [
        ("consumer://10.20.7.7/svc", vec![0]),
        ("consumer://10.31.0.1/svc", vec![1, 2, 3]),
        // An explicit param wins over the subnet.
        ("consumer://10.31.0.1/svc?idc=mt", vec![0]),
        ("consumer://[fd00:40::77]/svc", vec![4]),
        // A consumer outside every subnet has no local IDC: cross region.
        ("consumer://10.99.0.1/svc", vec![4]),
    ];
    for (consumer, want) in cases {
        let s = state(rule, text, consumer);
        let mut call = CallState::seeded(1);
        s.route(&Request::new(), &mut call).unwrap();
        assert_eq!(
            call.candidates.iter().collect::<Vec<_>>(),
            want,
            "{consumer}"
        );
        // The same for a consumer resolved per call.
        let other = state(rule, text, "consumer://192.0.2.1/svc?region=nowhere");
        let request = Request::new().with_consumer(Url::parse(consumer).unwrap());
        other.route(&request, &mut call).unwrap();
        assert_eq!(
            call.candidates.iter().collect::<Vec<_>>(),
            want,
            "{consumer} per call"
        );
    }
}

#[test]
fn bad_options_are_located_errors() {
    let text = "\
routers:
  - type: idc-weight
    rule:
      idcs: {beijing: [mt, zf]}
      spillover: {overprovisioning: 0.5}
      panic_threshold: 150
      hash_key: [\"attributes[user]\", \"user\"]
      idc_cidrs:
        mt: [\"10.20.0.0/16\"]
        zf: [\"10.20.128.0/17\", \"10.30.0.1/16\"]
        gz: [\"10.40.0.0/16\"]
";
    let file = ChainFile::parse("chain.yaml", text, None).unwrap();
    let errors = file.compile(&crate::builtin_registry()).unwrap_err();
    let mut shown: Vec<String> = errors
        .iter()
        .map(|e| e.to_string().lines().next().unwrap_or("").to_string())
        .collect();
    shown.sort();
    let expected = [
        "chain.yaml:10:14: routers[0].rule.idc_cidrs.zf[0]: subnet `10.20.128.0/17` of IDC `zf` overlaps subnet `10.20.0.0/16` of IDC `mt` (at `routers[0].rule.idc_cidrs.mt[0]`); an address must belong to one IDC",
        "chain.yaml:10:32: routers[0].rule.idc_cidrs.zf[1]: subnet `10.30.0.1/16` of IDC `zf` has host bits set; write its network `10.30.0.0/16`",
        "chain.yaml:11:13: routers[0].rule.idc_cidrs.gz: `idc_cidrs` names unknown IDC `gz`; it must be an IDC of `idcs` (known: `mt`, `zf`)",
        "chain.yaml:5:37: routers[0].rule.spillover.overprovisioning: overprovisioning 0.5 is out of range: it is a factor from 1 (spill as soon as one provider is degraded) to 100, e.g. 1.4",
        "chain.yaml:6:24: routers[0].rule.panic_threshold: panic_threshold 150 is out of range: an integer from 0 to 100 (a percent; 0: never)",
        "chain.yaml:7:38: routers[0].rule.hash_key[1]: invalid hash key \"user\": expected attributes[KEY], attachments[KEY], arguments[N] or consumer.host",
    ];
    assert_eq!(shown, expected);
    // Unknown fields inside `spillover` are errors too.
    let text = "routers:\n  - type: idc-weight\n    rule:\n      idcs: {beijing: [mt]}\n      spillover: {factor: 2}\n";
    let file = ChainFile::parse("chain.yaml", text, None).unwrap();
    let errors = file.compile(&crate::builtin_registry()).unwrap_err();
    assert!(errors[0].to_string().contains("spillover"), "{}", errors[0]);
}

#[test]
fn routing_with_every_option_allocates_nothing() {
    let rule = "idcs: {beijing: [mt, zf], shanghai: [sh]}\nroute_tables: {beijing: {mt: 50, zf: 50}}\ncross_region: [shanghai]\nspillover: {overprovisioning: 1.4}\npanic_threshold: 50\nhash_key: \"attributes[user]\"\nidc_cidrs: {sh: [\"10.40.0.0/16\"]}\n";
    let text = format!(
        "{}{}",
        providers(&[
            ("beijing", "mt", "10.20", 300),
            ("beijing", "zf", "10.30", 300)
        ]),
        (0..300)
            .map(|i| format!("dubbo://10.40.{}.{}:1/svc\n", i / 250, i % 250))
            .collect::<String>()
    );
    let s = state(rule, &text, BJ_MT);
    for i in (0..280).chain(300..330) {
        s.degraded().mark(i);
    }
    let requests = [
        Request::new().with_attribute("user", "alice"),
        Request::new(),
        Request::new().with_consumer(Url::parse("consumer://10.40.0.9/svc").unwrap()),
    ];
    let mut call = CallState::seeded(1);
    for r in &requests {
        s.route(r, &mut call).unwrap();
    }
    let info = allocation_counter::measure(|| {
        for _ in 0..200 {
            for r in &requests {
                s.route(r, &mut call).unwrap();
            }
        }
    });
    assert_eq!(info.count_total, 0, "{info:?}");
}
