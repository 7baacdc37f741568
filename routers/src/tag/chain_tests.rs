//! The tag router from a user's point of view: a canary release through a chain file and a
//! live [`Chain`], and invalid rules rejected with file:line:column while the chain keeps
//! serving its previous rule.

use std::sync::Arc;

use crate::builtin_registry;
use crate::test_support::*;
use routechain_core::{CallState, Chain, ChainState, DegradedSet, NoProvider, Request, Snapshot};
use routechain_rules::{ChainFile, LocatedErrors, RuleOverride, YamlDoc};

const CHAIN: &str = "\
service: org.example.Orders
consumer: consumer://10.9.0.1/org.example.Orders?application=web
routers:
  - type: mock
  - type: tag
    rule:
      configVersion: v3.0
      force: false
      enabled: true
      key: orders-provider
      tags:
        - name: gray
          addresses: [\"10.0.1.*\"]
";

fn canary_providers(gray: bool) -> Arc<Snapshot> {
    let mut lines: Vec<String> = (1..=10)
        .map(|i| format!("dubbo://10.0.0.{i}:20880/org.example.Orders?application=orders-provider"))
        .collect();
    if gray {
        lines.push("dubbo://10.0.1.1:20880/org.example.Orders?application=orders-provider".into());
        lines.push("dubbo://10.0.1.2:20880/org.example.Orders?application=orders-provider".into());
    }
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    snapshot(&refs)
}

fn load_chain(text: &str, providers: Arc<Snapshot>) -> (ChainFile, Chain) {
    let file = ChainFile::parse("orders.chain.yaml", text, None).expect("chain parses");
    let entries = file.compile(&builtin_registry()).expect("chain compiles");
    let state = ChainState::new(
        file.service.as_deref().map(Arc::from),
        providers,
        file.consumer.clone().expect("consumer"),
        entries,
    )
    .expect("chain prepares");
    (file, Chain::new(state))
}

fn hosts(chain: &Chain, request: &Request) -> Result<Vec<String>, NoProvider> {
    let state = chain.load();
    let mut call = CallState::seeded(3);
    state.route(request, &mut call)?;
    Ok(call
        .candidates
        .iter()
        .map(|i| state.snapshot().providers()[i].host().to_string())
        .collect())
}

#[test]
fn canary_release_with_a_dynamic_tag() {
    let (_file, chain) = load_chain(CHAIN, canary_providers(true));
    let stable: Vec<String> = (1..=10).map(|i| format!("10.0.0.{i}")).collect();
    let gray = vec!["10.0.1.1".to_string(), "10.0.1.2".to_string()];

    // Untagged traffic never reaches gray, whatever else the request carries.
    for req in [
        Request::new(),
        request(&[("dubbo.tag", "")]),
        request(&[("dubbo.force.tag", "true")]),
        request(&[("invocation.need.mock", "false")]),
    ] {
        assert_eq!(hosts(&chain, &req).unwrap(), stable, "{req:?}");
    }
    // Gray traffic reaches only gray, forced or not.
    let gray_req = request(&[("dubbo.tag", "gray")]);
    let gray_forced = request(&[("dubbo.tag", "gray"), ("dubbo.force.tag", "true")]);
    assert_eq!(hosts(&chain, &gray_req).unwrap(), gray);
    assert_eq!(hosts(&chain, &gray_forced).unwrap(), gray);

    // Both gray providers vanish (a new snapshot): gray traffic falls back to stable...
    chain
        .update(|s| {
            let next = canary_providers(false);
            let degraded = Arc::new(DegradedSet::new(next.len()));
            s.with_snapshot(next, degraded)
        })
        .unwrap();
    assert_eq!(hosts(&chain, &gray_req).unwrap(), stable);
    assert_eq!(hosts(&chain, &Request::new()).unwrap(), stable);
    // ...unless it asks for the tag by force: then there is no provider.
    match hosts(&chain, &gray_forced) {
        Err(NoProvider::EmptiedBy { router, .. }) => assert_eq!(&*router, "tag"),
        other => panic!("expected NoProvider from the tag router, got {other:?}"),
    }

    // The gray providers come back: gray traffic goes to them again.
    chain
        .update(|s| {
            let next = canary_providers(true);
            let degraded = Arc::new(DegradedSet::new(next.len()));
            s.with_snapshot(next, degraded)
        })
        .unwrap();
    assert_eq!(hosts(&chain, &gray_forced).unwrap(), gray);
}

#[test]
fn canary_release_with_static_tags() {
    // The same release with `dubbo.tag=gray` on the gray providers and no rule.
    let text = "routers:\n  - type: tag\n";
    let mut lines: Vec<String> = (1..=10)
        .map(|i| format!("dubbo://10.0.0.{i}:20880/s"))
        .collect();
    lines.push("dubbo://10.0.1.1:20880/s?dubbo.tag=gray".into());
    lines.push("dubbo://10.0.1.2:20880/s?dubbo.tag=gray".into());
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    let file = ChainFile::parse("c.yaml", text, None).unwrap();
    let state = ChainState::new(
        None,
        snapshot(&refs),
        consumer("consumer://h/s"),
        file.compile(&builtin_registry()).unwrap(),
    )
    .unwrap();
    assert_eq!(
        route_state(&state, &Request::new()),
        (0..10).collect::<Vec<_>>()
    );
    assert_eq!(
        route_state(&state, &request(&[("dubbo.tag", "gray")])),
        [10, 11]
    );
    let gone = state
        .with_snapshot(snapshot(&refs[..10]), Arc::new(DegradedSet::new(10)))
        .unwrap();
    assert_eq!(
        route_state(&gone, &request(&[("dubbo.tag", "gray")])),
        (0..10).collect::<Vec<_>>()
    );
    assert_eq!(
        route_state(
            &gone,
            &request(&[("dubbo.tag", "gray"), ("dubbo.force.tag", "true")])
        ),
        Vec::<usize>::new()
    );
}

/// Each invalid rule document with the errors expected, as `line:column field`.
const INVALID: &[(&str, &str, &[&str])] = &[
    (
        "no tags",
        "configVersion: v3.0\nforce: true\n",
        &["1:1 (document)"],
    ),
    ("empty tags", "tags: []\n", &["1:7 tags"]),
    (
        "bad CIDR, unknown match kind, invalid regex: all at once",
        "\
configVersion: v3.0
tags:
  - name: gray
    addresses: [\"10.0.0.0/33\", \"10.0.*\"]
  - name: beta
    match:
      - key: env
        value: {regexp: beta}
      - key: zone
        value:
          regex: \"z(\"
",
        &[
            "4:27 tags[0].addresses[0]",
            "4:33 tags[0].addresses[1]",
            "8:17 tags[1].match[0].value",
            "11:18 tags[1].match[1].value.regex",
        ],
    ),
    (
        "bad port",
        "tags:\n  - name: t\n    addresses: [\"10.0.0.1:http\"]\n",
        &["3:27 tags[0].addresses[0]"],
    ),
    // (An unknown field such as `adresses` is ignored, as Dubbo ignores it; `routechain
    // check` warns about it.)
    (
        "bad boolean",
        "force: maybe\ntags:\n  - name: t\n",
        &["1:8 force"],
    ),
];

#[test]
fn invalid_tag_rules_are_located() {
    for (name, rule, want) in INVALID {
        let doc = YamlDoc::parse("gray.rule.yaml", rule).unwrap();
        let file = ChainFile::parse("c.yaml", "routers:\n  - type: tag\n", None).unwrap();
        let errors = file
            .compile_with(&builtin_registry(), |_| RuleOverride::Doc(&doc))
            .expect_err(name);
        let got: Vec<String> = errors
            .iter()
            .map(|e| {
                assert_eq!(e.origin, "gray.rule.yaml", "{name}: {e}");
                format!(
                    "{} {}",
                    e.location,
                    e.field.as_ref().map(|f| f.to_string()).unwrap_or_default()
                )
            })
            .collect();
        assert_eq!(&got, want, "{name}: {errors:#?}");
    }
}

#[test]
fn an_inline_invalid_rule_is_located_in_the_chain_file() {
    let text = CHAIN.replace("10.0.1.*", "10.0.1.0/40");
    let file = ChainFile::parse("orders.chain.yaml", &text, None).unwrap();
    let errors = file.compile(&builtin_registry()).unwrap_err();
    assert_eq!(errors.len(), 1);
    let e = &errors[0];
    assert_eq!(e.origin, "orders.chain.yaml");
    assert_eq!(e.location.line, 13);
    assert_eq!(
        e.field.as_ref().unwrap().to_string(),
        "routers[1].rule.tags[0].addresses[0]"
    );
    assert!(e.message.contains("prefix length"), "{}", e.message);
    assert!(e.to_string().starts_with("orders.chain.yaml:13:"), "{e}");
}

#[test]
fn a_failed_rule_update_keeps_the_previous_rule() {
    let (file, chain) = load_chain(CHAIN, canary_providers(true));
    let gray_req = request(&[("dubbo.tag", "gray")]);
    let before = chain.load().generation();
    for (name, bad, _) in INVALID {
        let doc = YamlDoc::parse("config-center:orders-provider.tag-router", bad).unwrap();
        let result = chain.update(|state| {
            let entries = file
                .compile_with(&builtin_registry(), |def| {
                    if def.type_name == "tag" {
                        RuleOverride::Doc(&doc)
                    } else {
                        RuleOverride::Own
                    }
                })
                .map_err(LocatedErrors::into_vec)?;
            state.with_entries(entries).map_err(|_| Vec::new())
        });
        assert!(result.is_err(), "{name} must be rejected");
        assert_eq!(chain.load().generation(), before, "{name}: nothing swapped");
        assert_eq!(
            hosts(&chain, &gray_req).unwrap(),
            ["10.0.1.1", "10.0.1.2"],
            "{name}: the previous rule still routes"
        );
    }
    // A valid update does swap: the gray tag now names one provider.
    let good = YamlDoc::parse(
        "cc",
        "tags:\n  - name: gray\n    addresses: [\"10.0.1.2\"]\n",
    )
    .unwrap();
    chain
        .update(|state| {
            let entries = file
                .compile_with(&builtin_registry(), |def| {
                    if def.type_name == "tag" {
                        RuleOverride::Doc(&good)
                    } else {
                        RuleOverride::Own
                    }
                })
                .map_err(LocatedErrors::into_vec)?;
            state.with_entries(entries).map_err(|_| Vec::new())
        })
        .unwrap();
    assert_eq!(hosts(&chain, &gray_req).unwrap(), ["10.0.1.2"]);
    // A deleted rule (cleared) leaves static routing: no provider has a static tag.
    chain
        .update(|state| {
            let entries = file
                .compile_with(&builtin_registry(), |def| {
                    if def.type_name == "tag" {
                        RuleOverride::Cleared
                    } else {
                        RuleOverride::Own
                    }
                })
                .map_err(LocatedErrors::into_vec)?;
            state.with_entries(entries).map_err(|_| Vec::new())
        })
        .unwrap();
    assert_eq!(hosts(&chain, &Request::new()).unwrap().len(), 12);
}

/// Exact addresses (IPs with and without a port, host names in any case) name exactly the
/// providers on those hosts, found through the index of the hosts the rule names; a pattern
/// beside them still scans the snapshot.
#[test]
fn exact_addresses_name_their_providers_whatever_the_case_of_the_host() {
    let chain_yaml = "\
service: org.example.Orders
consumer: consumer://10.9.0.1/org.example.Orders?application=web
routers:
  - type: tag
    rule:
      configVersion: v3.0
      force: true
      enabled: true
      key: orders-provider
      tags:
        - name: exact
          addresses: [\"10.0.0.2\", \"10.0.0.3:20881\", \"Canary.Example\", \"beta.example:20880\"]
        - name: pattern
          addresses: [\"10.0.0.*\"]
";
    let lines = [
        "dubbo://10.0.0.1:20880/org.example.Orders?application=orders-provider",
        "dubbo://10.0.0.2:20880/org.example.Orders?application=orders-provider",
        "dubbo://10.0.0.3:20880/org.example.Orders?application=orders-provider",
        "dubbo://10.0.0.3:20881/org.example.Orders?application=orders-provider",
        "dubbo://canary.example:20880/org.example.Orders?application=orders-provider",
        "dubbo://CANARY.EXAMPLE:20881/org.example.Orders?application=orders-provider",
        "dubbo://beta.example:20880/org.example.Orders?application=orders-provider",
        "dubbo://Beta.Example:20881/org.example.Orders?application=orders-provider",
        "dubbo://other.example:20880/org.example.Orders?application=orders-provider",
    ];
    let (_file, chain) = load_chain(chain_yaml, snapshot(&lines));
    let addresses = |tag: &str| -> Vec<String> {
        let state = chain.load();
        let mut call = CallState::seeded(3);
        state
            .route(&request(&[("dubbo.tag", tag)]), &mut call)
            .unwrap();
        call.candidates
            .iter()
            .map(|i| state.snapshot().providers()[i].address().to_string())
            .collect()
    };
    assert_eq!(
        addresses("exact"),
        [
            "10.0.0.2:20880",
            "10.0.0.3:20881",
            "canary.example:20880",
            "CANARY.EXAMPLE:20881",
            "beta.example:20880",
        ]
    );
    assert_eq!(
        addresses("pattern"),
        [
            "10.0.0.1:20880",
            "10.0.0.2:20880",
            "10.0.0.3:20880",
            "10.0.0.3:20881"
        ]
    );
}
