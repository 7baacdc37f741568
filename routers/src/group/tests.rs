//! The group router's unit tests: selection table, force, explain texts, allocation, a
//! model check and fanned-out tasks during provider updates.

use std::sync::Arc;

use super::*;
use routechain_core::{
    CallState, ChainEntry, ChainState, Change, NoProvider, Request, Router, Snapshot, Trace, Url,
    router_fn,
};

const PROVIDERS: &str = "\
dubbo://10.0.0.0:20880/svc?group=idx_user
dubbo://10.0.0.1:20880/svc?group=idx_user
dubbo://10.0.0.2:20880/svc?group=idx_order
dubbo://10.0.0.3:20880/svc?group=idx_shop
dubbo://10.0.0.4:20880/svc
dubbo://10.0.0.5:20880/svc?grp=idx_user&group=idx_other
";

fn build(rule: Option<&str>) -> Result<Arc<dyn Router>, Vec<RuleError>> {
    crate::test_support::build(GroupRouter, "group", rule)
}

fn state(rule: Option<&str>, before: Option<Arc<dyn Router>>) -> ChainState {
    let snapshot = Arc::new(Snapshot::parse_lines(1, PROVIDERS).unwrap());
    let mut entries = Vec::new();
    if let Some(r) = before {
        entries.push(ChainEntry::new("before", 0, r));
    }
    entries.push(ChainEntry::new(
        "group",
        DEFAULT_PRIORITY,
        build(rule).unwrap(),
    ));
    ChainState::new(None, snapshot, Url::empty(), entries).unwrap()
}

fn routed(state: &ChainState, request: &Request) -> Result<Vec<usize>, NoProvider> {
    let mut call = CallState::seeded(1);
    state.route(request, &mut call)?;
    Ok(call.candidates.iter().collect())
}

const ALL: &[usize] = &[0, 1, 2, 3, 4, 5];

#[test]
fn group_selection_table() {
    // (rule, attribute value, attachment value, expected indexes; None = no provider)
    type Case = (
        Option<&'static str>,
        Option<&'static str>,
        Option<&'static str>,
        Option<&'static [usize]>,
    );
    let cases: &[Case] = &[
        (None, Some("idx_user"), None, Some(&[0, 1])),
        (None, Some(" idx_user "), None, Some(&[0, 1])),
        (None, Some("idx_order,idx_shop"), None, Some(&[2, 3])),
        (None, Some(" idx_order , idx_nope ,"), None, Some(&[2])),
        (None, Some("*"), None, Some(ALL)),
        (None, Some("idx_user,*"), None, Some(ALL)),
        (None, Some(", ,"), None, Some(ALL)),
        (None, None, None, Some(ALL)),
        (None, Some(""), None, Some(ALL)),
        // force defaults to true: a group with no provider → none.
        (None, Some("idx_nope"), None, None),
        (None, Some("idx_nope,idx_gone"), None, None),
        (Some("force: true"), Some("idx_nope"), None, None),
        (Some("force: false"), Some("idx_nope"), None, Some(ALL)),
        (
            Some("force: false"),
            Some("idx_nope,idx_gone"),
            None,
            Some(ALL),
        ),
        (Some("force: false"), Some("idx_shop"), None, Some(&[3])),
        // The attachment is read when the attribute is absent (or blank).
        (None, None, Some("idx_shop"), Some(&[3])),
        (None, Some(" "), Some("idx_shop"), Some(&[3])),
        // The attribute wins over the attachment.
        (None, Some("idx_user"), Some("idx_shop"), Some(&[0, 1])),
        // default_group applies only when the request names none.
        (Some("default_group: idx_order"), None, None, Some(&[2])),
        (
            Some("default_group: idx_order"),
            Some("idx_shop"),
            None,
            Some(&[3]),
        ),
        (
            Some("default_group: idx_order"),
            None,
            Some("idx_user"),
            Some(&[0, 1]),
        ),
        (
            Some("default_group: 'idx_order, idx_shop'"),
            None,
            None,
            Some(&[2, 3]),
        ),
        (Some("default_group: '*'"), None, None, Some(ALL)),
        (Some("default_group: idx_nope"), None, None, None),
        (
            Some("{default_group: idx_nope, force: false}"),
            None,
            None,
            Some(ALL),
        ),
        (Some("default_group: null"), None, None, Some(ALL)),
        // Other attribute and param names.
        (
            Some("{attribute: tenant, provider_param: grp}"),
            Some("idx_user"),
            None,
            Some(&[5]),
        ),
        (
            Some("{attribute: tenant}"),
            Some("idx_other"),
            None,
            Some(&[5]),
        ),
    ];
    for (i, (rule, attribute, attachment, expected)) in cases.iter().enumerate() {
        let s = state(*rule, None);
        let attr_name = if rule.is_some_and(|r| r.contains("tenant")) {
            "tenant"
        } else {
            "group"
        };
        let mut request = Request::new().with_method("search");
        if let Some(v) = attribute {
            request = request.with_attribute(attr_name, *v);
        }
        if let Some(v) = attachment {
            request = request.with_attachment(attr_name, *v);
        }
        let got = routed(&s, &request);
        match expected {
            Some(want) => assert_eq!(
                got.as_deref(),
                Ok(*want),
                "case {i}: {rule:?} {attribute:?} {attachment:?}"
            ),
            None => assert!(
                matches!(got, Err(NoProvider::EmptiedBy { ref router, .. }) if &**router == "group"),
                "case {i}: {rule:?} {attribute:?}: {got:?}"
            ),
        }
    }
}

#[test]
fn providers_without_the_param_are_reached_only_by_star_or_no_group() {
    let s = state(None, None);
    let reaches_4 = |v: Option<&str>| {
        let mut r = Request::new();
        if let Some(v) = v {
            r = r.with_attribute("group", v);
        }
        routed(&s, &r).is_ok_and(|c| c.contains(&4))
    };
    assert!(reaches_4(None));
    assert!(reaches_4(Some("*")));
    for v in ["idx_user", "idx_order,idx_shop", "idx_other", ""] {
        assert_eq!(reaches_4(Some(v)), v.is_empty(), "{v:?}");
    }
}

#[test]
fn force_counts_only_candidates_left_by_earlier_routers() {
    // An earlier router removed both idx_user providers.
    let drop_users: Arc<dyn Router> = Arc::new(router_fn("drop-users", |_, c| {
        c.remove(0);
        c.remove(1);
    }));
    let request = Request::new().with_attribute("group", "idx_user");
    let forced = state(None, Some(drop_users.clone()));
    assert!(routed(&forced, &request).is_err());
    let lenient = state(Some("force: false"), Some(drop_users));
    assert_eq!(routed(&lenient, &request).unwrap(), [2, 3, 4, 5]);
}

#[test]
fn explain_names_the_source_and_the_decision() {
    let cases = [
        (
            Request::new().with_attribute("group", "idx_user"),
            "group \"idx_user\" (attribute): kept 2",
        ),
        (
            Request::new().with_attachment("group", "idx_shop"),
            "(attachment): kept 1",
        ),
        (Request::new(), "no group named"),
        (
            Request::new().with_attribute("group", "a,*"),
            "names `*`: every provider passes",
        ),
        (
            Request::new().with_attribute("group", "idx_nope"),
            "force=true: none left",
        ),
    ];
    let s = state(None, None);
    for (request, want) in cases {
        let mut call = CallState::seeded(1);
        let mut trace = Trace::default();
        let _ = s.route_traced(&request, &mut call, &mut trace);
        let reason = &trace.steps[0].reason;
        assert!(reason.contains(want), "{reason} does not contain {want}");
        assert_eq!(trace.steps[0].evaluation, Evaluation::Runtime);
    }
}

#[test]
fn entry_without_rule_uses_defaults_and_bad_rules_are_refused() {
    let router = build(None).unwrap();
    assert_eq!(router.name(), "group");
    let errors = build(Some("force: maybe\n")).err().unwrap();
    assert_eq!(errors[0].path.to_string(), "force");
    let errors = build(Some("attribute: ''\nprovider_param: ' '\n"))
        .err()
        .unwrap();
    assert_eq!(errors.len(), 2);
}

#[test]
fn routing_a_group_allocates_nothing() {
    let text: String = (0..1000)
        .map(|i| {
            format!(
                "dubbo://10.0.{}.{}:1/s?group=g{}\n",
                i / 250,
                i % 250,
                i % 200
            )
        })
        .collect();
    let s = ChainState::new(
        None,
        Arc::new(Snapshot::parse_lines(1, &text).unwrap()),
        Url::empty(),
        vec![ChainEntry::new(
            "group",
            DEFAULT_PRIORITY,
            build(None).unwrap(),
        )],
    )
    .unwrap();
    let one = Request::new().with_attribute("group", "g7");
    let list = Request::new().with_attribute("group", "g7, g8,g9");
    let mut call = CallState::seeded(1);
    s.route(&list, &mut call).unwrap();
    let info = allocation_counter::measure(|| {
        for _ in 0..100 {
            s.route(&one, &mut call).unwrap();
            s.route(&list, &mut call).unwrap();
        }
    });
    assert_eq!(info.count_total, 0, "{info:?}");
    assert_eq!(call.candidates.count(), 15);
}

proptest::proptest! {
    /// The router agrees with a direct reading of the rules over random providers,
    /// inputs, request values and `force`.
    #[test]
    fn agrees_with_a_naive_model(
        groups in proptest::collection::vec(proptest::option::of(0usize..6), 1..150),
        input_mask in proptest::collection::vec(proptest::bool::weighted(0.8), 150),
        items in proptest::collection::vec(0usize..10, 0..4),
        force in proptest::bool::ANY,
        via_attachment in proptest::bool::ANY,
    ) {
        const NAMES: [&str; 10] = ["g0", "g1", "g2", "g3", "g4", "g5", "g6", "*", " ", "g7"];
        let text: String = groups
            .iter()
            .enumerate()
            .map(|(i, g)| match g {
                Some(g) => format!("dubbo://10.0.0.{i}:1/s?group=g{g}\n"),
                None => format!("dubbo://10.0.0.{i}:1/s\n"),
            })
            .collect();
        let snapshot = Arc::new(Snapshot::parse_lines(1, &text).unwrap());
        let mask = input_mask.clone();
        let before: Arc<dyn Router> = Arc::new(router_fn("input", move |_, c| {
            for (i, keep) in mask.iter().enumerate() {
                if !keep {
                    c.remove(i);
                }
            }
        }));
        let rule = format!("force: {force}");
        let state = ChainState::new(
            None,
            snapshot,
            Url::empty(),
            vec![
                ChainEntry::new("input", 0, before),
                ChainEntry::new("group", DEFAULT_PRIORITY, build(Some(&rule)).unwrap()),
            ],
        )
        .unwrap();
        let value = items.iter().map(|&i| NAMES[i]).collect::<Vec<_>>().join(",");
        let request = if via_attachment {
            Request::new().with_attachment("group", value.clone())
        } else {
            Request::new().with_attribute("group", value.clone())
        };

        // The model.
        let input: Vec<usize> = (0..groups.len()).filter(|&i| input_mask[i]).collect();
        let named: Vec<&str> = value.split(',').map(str::trim).filter(|g| !g.is_empty()).collect();
        let expected: Vec<usize> = if named.is_empty() || named.contains(&"*") {
            input.clone()
        } else {
            let matched: Vec<usize> = input
                .iter()
                .copied()
                .filter(|&i| groups[i].is_some_and(|g| named.contains(&format!("g{g}").as_str())))
                .collect();
            match (matched.is_empty(), force) {
                (false, _) => matched,
                (true, true) => vec![],
                (true, false) => input.clone(),
            }
        };

        let mut call = CallState::seeded(1);
        let got = match state.route(&request, &mut call) {
            Ok(()) => call.candidates.iter().collect::<Vec<_>>(),
            Err(_) => vec![],
        };
        proptest::prop_assert_eq!(got, expected, "value {:?}", value);
    }
}

/// One logical call fanned out to 64 tasks, each for its own group, while the
/// provider list changes underneath; the group travels in each task's request.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fanned_out_tasks_each_route_to_their_own_group_during_updates() {
    const GROUPS: usize = 64;
    fn snapshot(generation: u64) -> Arc<Snapshot> {
        // Every generation lists every group, with a varying number of providers per
        // group and a rotated order, so indexes move between generations.
        let mut lines = Vec::new();
        for g in 0..GROUPS {
            for k in 0..=((g + generation as usize) % 3) {
                lines.push(format!(
                    "dubbo://10.{}.{g}.{k}:20880/svc?group=idx_{g}&gen={generation}",
                    generation % 250
                ));
            }
        }
        lines.push("dubbo://10.255.0.1:20880/svc".to_string());
        let shift = generation as usize % lines.len();
        lines.rotate_left(shift);
        Arc::new(Snapshot::parse_lines(generation, &lines.join("\n")).unwrap())
    }
    // The published state, swapped whole by the updater.
    let chain = Arc::new(std::sync::RwLock::new(Arc::new(
        ChainState::new(
            None,
            snapshot(0),
            Url::empty(),
            vec![ChainEntry::new(
                "group",
                DEFAULT_PRIORITY,
                build(None).unwrap(),
            )],
        )
        .unwrap(),
    )));
    let load = |chain: &std::sync::RwLock<Arc<ChainState>>| chain.read().unwrap().clone();
    let updater = {
        let chain = chain.clone();
        tokio::spawn(async move {
            for generation in 1..=200u64 {
                let next = load(&chain).next(&Change::<()>::providers(snapshot(generation)));
                *chain.write().unwrap() = Arc::new(next.unwrap());
                tokio::task::yield_now().await;
            }
        })
    };
    let logical = Request::new().with_method("search").with_service("svc");
    let mut tasks = Vec::new();
    for g in 0..GROUPS {
        let chain = chain.clone();
        let request = logical.clone().with_attribute("group", format!("idx_{g}"));
        tasks.push(tokio::spawn(async move {
            let want = format!("idx_{g}");
            let mut call = CallState::seeded(g as u64);
            let mut generations = std::collections::BTreeSet::new();
            for _ in 0..300 {
                let state = load(&chain);
                state.route(&request, &mut call).unwrap();
                generations.insert(state.generation());
                assert!(call.candidates.count() >= 1);
                for i in call.candidates.iter() {
                    let p = &state.snapshot().providers()[i];
                    assert_eq!(p.get("group"), Some(want.as_str()), "task {g}: {p}");
                }
                tokio::task::yield_now().await;
            }
            generations.len()
        }));
    }
    let mut seen_generations = 0;
    for t in tasks {
        seen_generations = seen_generations.max(t.await.unwrap());
    }
    updater.await.unwrap();
    assert_eq!(load(&chain).generation(), 201);
    // The tasks really ran while the provider list changed.
    assert!(seen_generations > 1, "no task saw an update");
}
