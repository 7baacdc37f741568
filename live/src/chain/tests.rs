//! The live chain's unit tests: provider lists, rules, batches and reloads.
use super::*;
use crate::providers::parse_providers;
use crate::{ProviderText, RuleEvent, Update};
use routechain_core::{CallState, ChainState, Request};

#[test]
fn provider_lines_end_at_lf_crlf_and_a_lone_cr() {
    let text = "dubbo://10.0.0.1:20880/a.B\rdubbo://10.0.0.2:20880/a.B\r\n\
                    # comment\ndubbo://10.0.0.3:20880/a.B?x=1 2\rdubbo://10.0.0.4:20880/a.B\n";
    let (urls, skipped) = parse_providers("p.txt", ProviderText::Lines(text.into()));
    let hosts: Vec<String> = urls.iter().map(|u| u.address().to_string()).collect();
    assert_eq!(
        hosts,
        ["10.0.0.1:20880", "10.0.0.2:20880", "10.0.0.4:20880"],
        "{skipped:?}"
    );
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert!(
        skipped[0].location.starts_with("p.txt:4:"),
        "the bad URL is on line 4: {skipped:?}"
    );
}

const CHAIN: &str = "
service: com.foo.BarService
routers:
  - type: condition
  - type: condition
    application: web
  - type: condition
    rule:
      conditions: ['=> zone = a']
";

fn live() -> LiveChain {
    crate::test_chain(CHAIN)
}

fn providers(list: &[(u8, &str)]) -> Update {
    Update::Providers {
        origin: "test".into(),
        text: ProviderText::Urls(
            list.iter()
                .map(|(n, q)| format!("dubbo://10.0.0.{n}:20880/com.foo.BarService?{q}"))
                .collect(),
        ),
    }
}

fn rule(key: &str, event: RuleEvent) -> Update {
    Update::Rule {
        key: RuleKey::new(key, "condition"),
        event,
        origin: format!("test:{key}"),
    }
}

/// The routed providers' addresses for an empty request, sorted (a live chain's order of
/// providers is its stable order, not the registry's).
fn routed(live: &LiveChain) -> Vec<String> {
    routed_for(live, &Request::new())
}

/// The routed providers' addresses for `request`, sorted.
pub(crate) fn routed_for(live: &LiveChain, request: &Request) -> Vec<String> {
    let state = live.service().state();
    let mut call = CallState::seeded(1);
    let mut out: Vec<String> = match state.route(request, &mut call) {
        Ok(()) => call
            .candidates
            .iter()
            .map(|i| state.snapshot().providers()[i].address().to_string())
            .collect(),
        Err(_) => Vec::new(),
    };
    out.sort();
    out
}

#[test]
fn a_changed_list_shares_the_urls_it_keeps_and_parses_only_the_new_ones() {
    let live = live();
    live.apply(providers(&[(1, "zone=a"), (2, "zone=b"), (3, "zone=a")]));
    let before = live.service().state();
    live.apply(providers(&[
        (1, "zone=a"),
        (2, "zone=b"),
        (3, "zone=a"),
        (4, "zone=b"),
    ]));
    let after = live.service().state();
    let (old, new) = (before.snapshot().providers(), after.snapshot().providers());
    assert_eq!(new.len(), 4);
    for i in 0..3 {
        assert!(Url::ptr_eq(&old[i], &new[i]), "provider {i} is shared");
    }
    assert_eq!(new[3].address(), "10.0.0.4:20880");
    // One removed: the rest still the same URLs, and the list is routed as a whole.
    live.apply(providers(&[(1, "zone=a"), (3, "zone=a"), (4, "zone=b")]));
    let last = live.service().state();
    let kept = last.snapshot().providers();
    assert!(Url::ptr_eq(&kept[0], &old[0]) && Url::ptr_eq(&kept[1], &old[2]));
    assert!(Url::ptr_eq(&kept[2], &new[3]));
    assert_eq!(routed(&live).len(), 2, "zone a: providers 1 and 3");
}

#[test]
fn subscriptions_follow_the_service_key_or_the_application() {
    assert_eq!(
        live().subscriptions(),
        [
            RuleKey::new("com.foo.BarService::", "condition"),
            RuleKey::new("web", "condition"),
            RuleKey::new("com.foo.BarService::", RuleKey::CONFIGURATORS),
            RuleKey::new("com.foo.BarService", RuleKey::LEGACY_OVERRIDES),
        ]
    );
}

#[test]
fn rule_keys_follow_the_reference_the_consumer_and_the_providers_application() {
    let chain = "service: com.acme.OrderService\ngroup: '*'\nversion: 2.1.0\n\
                     consumer: consumer://10.9.9.9/com.acme.OrderService?application=web\n\
                     routers:\n  - type: condition\n  - type: condition\n    scope: application\n  \
                     - type: tag\n  - type: condition\n    key: custom\n";
    let file = ChainFile::parse("t.yaml", chain, None).unwrap();
    let live = LiveChain::new(
        file,
        routechain_routers::builtin_registry(),
        LiveOptions::default(),
    )
    .unwrap();
    assert_eq!(
        live.subscriptions(),
        [
            RuleKey::new("com.acme.OrderService:2.1.0:", "condition"),
            RuleKey::new("web", "condition"),
            RuleKey::new("custom", "condition"),
            RuleKey::new("com.acme.OrderService:2.1.0:", RuleKey::CONFIGURATORS),
            RuleKey::new("web", RuleKey::CONFIGURATORS),
            RuleKey::new("com.acme.OrderService", RuleKey::LEGACY_OVERRIDES),
        ]
    );
    assert_eq!(live.provider_app_kinds(), ["tag"]);
    // The tag rule is read under the providers' application once they arrive.
    let tag = Update::Rule {
        key: RuleKey::new("orders", "tag"),
        event: RuleEvent::Added(
            "tags:\n  - name: gray\n    addresses: ['10.0.0.2:20880']\n".into(),
        ),
        origin: "test".into(),
    };
    let list = Update::Providers {
            origin: "test".into(),
            text: ProviderText::Urls(
                (1..=2)
                    .map(|n| format!("dubbo://10.0.0.{n}:20880/com.acme.OrderService?application=orders&version=2.1.0&group=g{n}"))
                    .collect(),
            ),
        };
    let reports = live.apply(Update::Batch(vec![list, tag]));
    assert!(matches!(&reports[0], Report::Applied { .. }), "{reports:?}");
    let state = live.service().state();
    let mut call = CallState::seeded(1);
    state
        .route(
            &Request::new().with_attachment("dubbo.tag", "gray"),
            &mut call,
        )
        .unwrap();
    let got: Vec<&str> = call
        .candidates
        .iter()
        .map(|i| state.snapshot().providers()[i].address())
        .collect();
    assert_eq!(got, ["10.0.0.2:20880"]);
}

#[test]
fn override_rules_change_weights_disable_providers_and_bad_ones_are_refused() {
    let live = live();
    live.apply(providers(&[(1, "zone=a"), (2, "zone=a")]));
    let node = |text: &str| Update::Rule {
        key: RuleKey::new("com.foo.BarService::", RuleKey::CONFIGURATORS),
        event: RuleEvent::Modified(text.into()),
        origin: "zookeeper:/dubbo/config/dubbo/com.foo.BarService::.configurators".into(),
    };
    let reports = live.apply(node(
        "configVersion: v2.7\nkey: com.foo.BarService\nconfigs:\n  - side: consumer\n    \
             providerAddresses: ['10.0.0.1:20880']\n    parameters: {weight: '7'}\n",
    ));
    assert!(matches!(&reports[0], Report::Applied { .. }), "{reports:?}");
    // The overridden provider is another URL: it left its place and was appended (a
    // live chain keeps the others in their order).
    let weights: Vec<(String, Option<String>)> = live
        .service()
        .state()
        .snapshot()
        .providers()
        .iter()
        .map(|p| {
            (
                p.address().to_string(),
                p.param("weight").map(str::to_string),
            )
        })
        .collect();
    assert_eq!(
        weights,
        [
            ("10.0.0.2:20880".to_string(), None),
            ("10.0.0.1:20880".to_string(), Some("7".to_string()))
        ]
    );
    let reports = live.apply(node(
        "configVersion: v2.7\nkey: com.foo.BarService\nconfigs:\n  - side: consumer\n    \
             providerAddresses: ['10.0.0.1:20880']\n    parameters: {disabled: 'true'}\n",
    ));
    assert!(matches!(&reports[0], Report::Applied { .. }), "{reports:?}");
    assert_eq!(routed(&live), ["10.0.0.2:20880"]);
    // A bad rule is refused, located; the previous rules stay.
    let reports = live.apply(node(
        "key: com.foo.BarService\nconfigs:\n  - side: consumer\n",
    ));
    assert!(
        matches!(&reports[0], Report::Refused { reason, .. }
                if reason.starts_with("zookeeper:/dubbo/config/dubbo/com.foo.BarService::.configurators:3:5")),
        "{reports:?}"
    );
    assert_eq!(routed(&live), ["10.0.0.2:20880"]);
    // Deleted: cleared.
    live.apply(Update::Rule {
        key: RuleKey::new("com.foo.BarService::", RuleKey::CONFIGURATORS),
        event: RuleEvent::Deleted,
        origin: "test".into(),
    });
    assert_eq!(routed(&live), ["10.0.0.1:20880", "10.0.0.2:20880"]);
}

/// A consumer-side rule setting a value a provider already publishes changes no URL (and
/// adds nothing to it), yet the value is the rule's now: the override layer changed.
#[test]
fn a_rule_setting_a_published_value_ranks_it_as_the_rules() {
    let live = live();
    live.apply(providers(&[(1, "zone=a&retries=0")]));
    let retries = |live: &LiveChain| {
        let published = live.service().load();
        let params = published.params();
        params.retries(params.method(None), Some(0))
    };
    assert_eq!(
        retries(&live),
        (2, routechain_balance::ParamSource::Default)
    );
    let before = live.service().state().snapshot().providers()[0].clone();
    let reports = live.apply(Update::Rule {
        key: RuleKey::new("com.foo.BarService::", RuleKey::CONFIGURATORS),
        event: RuleEvent::Added(
            "configVersion: v2.7\nkey: com.foo.BarService\nconfigs:\n  - side: consumer\n    \
             parameters: {retries: '0'}\n"
                .into(),
        ),
        origin: "test".into(),
    });
    assert!(matches!(&reports[0], Report::Applied { .. }), "{reports:?}");
    let after = live.service().state().snapshot().providers()[0].clone();
    assert_eq!(after, before, "the URL is the registered one");
    assert_eq!(
        retries(&live),
        (0, routechain_balance::ParamSource::OverrideService)
    );
    // The rule deleted: the provider's own `retries` is never read again.
    live.apply(Update::Rule {
        key: RuleKey::new("com.foo.BarService::", RuleKey::CONFIGURATORS),
        event: RuleEvent::Deleted,
        origin: "test".into(),
    });
    assert_eq!(
        retries(&live),
        (2, routechain_balance::ParamSource::Default)
    );
}

#[test]
fn a_rule_and_providers_in_one_batch_make_one_swap() {
    let live = live();
    let before = live.service().state().generation();
    let reports = live.apply(Update::Batch(vec![
        rule(
            "com.foo.BarService::",
            RuleEvent::Added("conditions: ['=> region = hz']".into()),
        ),
        providers(&[(1, "region=hz&zone=a"), (2, "region=bj&zone=a")]),
    ]));
    assert_eq!(reports.len(), 1, "{reports:?}");
    assert!(
        matches!(&reports[0], Report::Applied { generation, providers: 2, .. } if *generation == before + 1),
        "{reports:?}"
    );
    assert_eq!(routed(&live), ["10.0.0.1:20880"]);
}

#[test]
fn a_batch_refuses_its_bad_parts_and_applies_the_good_ones() {
    let live = live();
    live.apply(providers(&[
        (1, "region=hz&zone=a"),
        (2, "region=bj&zone=a"),
    ]));
    let reports = live.apply(Update::Batch(vec![
        rule(
            "com.foo.BarService::",
            RuleEvent::Added("conditions: []".into()),
        ),
        rule(
            "web",
            RuleEvent::Added("conditions: ['=> region = bj']".into()),
        ),
    ]));
    assert_eq!(reports.len(), 2, "{reports:?}");
    assert!(
        matches!(&reports[0], Report::Refused { reason, .. }
                if reason.starts_with("test:com.foo.BarService:::1:13: conditions:")),
        "{reports:?}"
    );
    assert!(matches!(&reports[1], Report::Applied { .. }), "{reports:?}");
    assert_eq!(live.stats().refused(), 1);
    assert_eq!(routed(&live), ["10.0.0.2:20880"]);
}

#[test]
fn a_rule_change_recompiles_only_the_entries_that_follow_it() {
    let live = live();
    live.apply(providers(&[(1, "region=hz&zone=a")]));
    let old = live.service().state();
    live.apply(rule(
        "web",
        RuleEvent::Added("conditions: ['=> region = hz']".into()),
    ));
    let new = live.service().state();
    let same: Vec<bool> = old
        .entries()
        .iter()
        .zip(new.entries().iter())
        .map(|(a, b)| Arc::ptr_eq(&a.router, &b.router))
        .collect();
    assert_eq!(same, [true, false, true]);
}

#[test]
fn unchanged_lists_and_unfollowed_rules_are_ignored_and_empty_pushes_held_back() {
    let live = live();
    let list = providers(&[(1, "zone=a")]);
    assert!(matches!(
        live.apply(list.clone())[0],
        Report::Applied { .. }
    ));
    assert!(matches!(live.apply(list)[0], Report::Ignored { .. }));
    assert!(matches!(
        live.apply(rule("nobody", RuleEvent::Deleted))[0],
        Report::Ignored { .. }
    ));
    let generation = live.service().state().generation();
    assert!(matches!(
        live.apply(providers(&[]))[0],
        Report::HeldBack { serving: 1, .. }
    ));
    assert_eq!(live.service().state().generation(), generation);
    assert_eq!(live.stats().held_back(), 1);
    // A provider URL that does not parse is skipped alone; the others apply.
    let reports = live.apply(providers(&[(2, "zone=a"), (3, "zone=a")]).clone());
    assert!(matches!(reports[0], Report::Applied { .. }));
    let bad = Update::Providers {
        origin: "list".into(),
        text: ProviderText::Lines(
            "dubbo://10.0.0.2:20880/a?zone=a\n  dubbo://10.0.0.9:x/a\n".into(),
        ),
    };
    let reports = live.apply(bad);
    assert!(
        matches!(&reports[0], Report::Skipped { location, .. } if location == "list:2:20"),
        "{reports:?}"
    );
    assert_eq!(
        reports[0].to_string(),
        "skipped provider list:2:20: invalid provider URL: invalid port \"x\""
    );
    assert_eq!(live.stats().skipped(), 1);
    assert_eq!(routed(&live), ["10.0.0.2:20880"]);
}

#[test]
fn a_chain_reload_recompiles_only_the_entries_whose_definition_or_rule_file_changed() {
    let dir = std::env::temp_dir().join(format!("routechain-live-unit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let write = |name: &str, text: &str| std::fs::write(dir.join(name), text).unwrap();
    write("a.rule.yaml", "conditions: ['=> region = hz']\n");
    write("b.rule.yaml", "conditions: ['=> zone = a']\n");
    let chain_text = "routers:\n  - type: condition\n    rule_file: a.rule.yaml\n  \
                          - type: condition\n    rule_file: b.rule.yaml\n";
    write("c.yaml", chain_text);
    let path = dir.join("c.yaml");
    let file = ChainFile::load(&path).unwrap();
    let live = LiveChain::new(
        file,
        routechain_routers::builtin_registry(),
        LiveOptions::default(),
    )
    .unwrap();
    live.apply(providers(&[
        (1, "region=hz&zone=a"),
        (2, "region=bj&zone=a"),
    ]));
    let same = |old: &ChainState, new: &ChainState| -> Vec<bool> {
        old.entries()
            .iter()
            .zip(new.entries().iter())
            .map(|(a, b)| Arc::ptr_eq(&a.router, &b.router))
            .collect()
    };
    let old = live.service().state();
    write("b.rule.yaml", "force: true\nconditions: ['=> zone = b']\n");
    assert!(matches!(
        live.apply(Update::ChainFile(path.clone()))[0],
        Report::Applied { .. }
    ));
    let new = live.service().state();
    assert_eq!(same(&old, &new), [true, false]);
    // The untouched router kept its prepared state too: routing reflects both rules.
    assert_eq!(routed(&live), Vec::<String>::new());
    write("b.rule.yaml", "conditions: ['=> zone = a']\n");
    live.apply(Update::ChainFile(path.clone()));
    assert_eq!(routed(&live), ["10.0.0.1:20880"]);
    // Another service: everything compiles and prepares afresh.
    let old = live.service().state();
    write("c.yaml", &format!("service: com.foo.Other\n{chain_text}"));
    live.apply(Update::ChainFile(path.clone()));
    let new = live.service().state();
    assert_eq!(same(&old, &new), [false, false]);
    assert_eq!(new.service(), Some("com.foo.Other"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_batch_of_providers_and_a_rule_is_one_swap_that_prepares_the_changed_router() {
    let live = live();
    live.apply(providers(&[
        (1, "region=hz&zone=a"),
        (2, "region=bj&zone=a"),
        (3, "region=bj&zone=b"),
    ]));
    let reports = live.apply(Update::Batch(vec![
        rule(
            "web",
            RuleEvent::Added("conditions: ['=> region = bj']".into()),
        ),
        providers(&[
            (1, "region=hz&zone=a"),
            (3, "region=bj&zone=b"),
            (4, "region=bj&zone=a"),
        ]),
    ]));
    assert_eq!(reports.len(), 1, "{reports:?}");
    assert!(
        matches!(&reports[0], Report::Applied { providers: 3, .. }),
        "{reports:?}"
    );
    let state = live.service().state();
    // The entry following `web` has a new rule: prepared. The rule-less entry carries over
    // the edit; the condition router with its own rule prepares afresh on a provider edit
    // (only the group and IDC-weight routers derive their state by the edit).
    let derived: Vec<bool> = state.edited_routers().map(|(_, e)| e).collect();
    assert_eq!(derived, [true, false, false]);
    assert_eq!(routed(&live), ["10.0.0.4:20880"], "zone a and region bj");
    // The same batch's state prepared from scratch routes the same.
    let fresh = ChainState::new(
        state.service().map(Arc::from),
        state.snapshot().clone(),
        state.consumer().clone(),
        state.entries().clone(),
    )
    .expect("prepares");
    let mut a = CallState::seeded(1);
    let mut b = CallState::seeded(1);
    assert_eq!(
        state.route(&Request::new(), &mut a),
        fresh.route(&Request::new(), &mut b)
    );
    assert_eq!(
        a.candidates.iter().collect::<Vec<_>>(),
        b.candidates.iter().collect::<Vec<_>>()
    );
}

#[test]
fn a_reload_of_the_same_chain_file_keeps_the_registries_table_and_changes_no_setting() {
    let dir = std::env::temp_dir().join(format!(
        "routechain-live-unit-registries-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("c.yaml");
    std::fs::write(&path, "routers:\n  - type: condition\n").unwrap();
    let live = LiveChain::new(
        ChainFile::load(&path).unwrap(),
        routechain_routers::builtin_registry(),
        LiveOptions::default(),
    )
    .unwrap();
    live.apply(providers(&[(1, "a=1"), (2, "a=2")]));
    let info = |name: &str| routechain_balance::RegistryInfo {
        name: name.into(),
        preferred: false,
        zone: None,
        weight: 100,
        weighted: false,
    };
    let mut table = routechain_balance::RegistryTable::new(vec![info("r1"), info("r2")], None);
    table.insert("10.0.0.1:20880", 0);
    table.insert("10.0.0.2:20880", 1);
    let table = Arc::new(table);
    live.apply(Update::Registries(table.clone()));
    assert_eq!(live.service().config().registries.as_ref(), Some(&table));
    // The chain file read again: its settings are the serving ones, the table stays.
    let reports = live.apply(Update::ChainFile(path.clone()));
    assert!(
        reports
            .iter()
            .all(|r| !r.to_string().contains("service settings changed")),
        "{reports:?}"
    );
    assert_eq!(live.service().config().registries.as_ref(), Some(&table));
    let _ = std::fs::remove_dir_all(&dir);
}
