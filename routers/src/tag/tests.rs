//! The tag router: table-driven cases porting the semantics of Dubbo's `TagStateRouterTest`
//! (static tags, dynamic `addresses` and `match`, hierarchical tags, both forces), the
//! explain trace, and a property test against a direct per-provider evaluation.

use std::sync::Arc;

use crate::tag::{PreparedTag, TagRouter, TagRule};
use crate::test_support::*;
use routechain_core::Router;
use routechain_core::{CallState, ChainEntry, ChainState, Request, Trace, Url, router_fn};

fn tag_router(rule: Option<&str>) -> Arc<dyn Router> {
    build(TagRouter, "tag", rule).expect("test rule compiles")
}

fn tag_entry(rule: Option<&str>) -> ChainEntry {
    ChainEntry::new("tag", 100, tag_router(rule))
}

/// (case, request tag attachment, force attachment, consumer URL, expected providers)
type Case<'a> = (
    &'a str,
    Option<&'a str>,
    Option<&'a str>,
    &'a str,
    &'a [usize],
);

fn run_cases(providers: &[&str], rule: Option<&str>, cases: &[Case<'_>]) {
    let snap = snapshot(providers);
    for &(name, tag, force, consumer_url, want) in cases {
        let mut attachments = Vec::new();
        if let Some(t) = tag {
            attachments.push(("dubbo.tag", t));
        }
        if let Some(f) = force {
            attachments.push(("dubbo.force.tag", f));
        }
        let got = route(
            &snap,
            &consumer(consumer_url),
            vec![tag_entry(rule)],
            &request(&attachments),
        );
        assert_eq!(got, want, "case {name:?}");
    }
}

const PROVIDERS: &[&str] = &[
    "dubbo://10.0.0.1:20880/svc?dubbo.tag=gray", // 0: static gray
    "dubbo://10.0.0.2:20880/svc",                // 1: untagged
    "dubbo://10.0.0.3:20880/svc",                // 2: untagged
    "dubbo://10.0.1.1:20880/svc?env=beta",       // 3: untagged, env=beta
    "dubbo://10.0.1.2:20881/svc?env=beta&dubbo.tag=blue", // 4: static blue, env=beta
    "dubbo://10.0.2.1:20880/svc?dubbo.tag=",     // 5: empty static tag = untagged
];

const C: &str = "consumer://10.9.9.9/svc";

#[test]
fn static_tags_without_a_rule() {
    run_cases(
        PROVIDERS,
        None,
        &[
            ("tagged request: static tag", Some("gray"), None, C, &[0]),
            ("another static tag", Some("blue"), None, C, &[4]),
            (
                "unknown tag falls back to untagged",
                Some("red"),
                None,
                C,
                &[1, 2, 3, 5],
            ),
            (
                "unknown tag, forced: empty",
                Some("red"),
                Some("true"),
                C,
                &[],
            ),
            (
                "force is case-insensitive",
                Some("red"),
                Some("TRUE"),
                C,
                &[],
            ),
            (
                "force=false falls back",
                Some("red"),
                Some("false"),
                C,
                &[1, 2, 3, 5],
            ),
            (
                "untagged request: untagged only",
                None,
                None,
                C,
                &[1, 2, 3, 5],
            ),
            (
                "empty attachment is no tag",
                Some(""),
                None,
                C,
                &[1, 2, 3, 5],
            ),
            (
                "tag from the consumer URL",
                None,
                None,
                "consumer://h/svc?dubbo.tag=gray",
                &[0],
            ),
            (
                "attachment wins over consumer",
                Some("blue"),
                None,
                "consumer://h/svc?dubbo.tag=gray",
                &[4],
            ),
            (
                "empty attachment reads the consumer",
                Some(""),
                None,
                "consumer://h/svc?dubbo.tag=gray",
                &[0],
            ),
            (
                "force from the consumer URL",
                Some("red"),
                None,
                "consumer://h/svc?dubbo.force.tag=true",
                &[],
            ),
            (
                "force attachment wins over consumer",
                Some("red"),
                Some("false"),
                "consumer://h/svc?dubbo.force.tag=true",
                &[1, 2, 3, 5],
            ),
            (
                "empty force attachment reads the consumer",
                Some("red"),
                Some(""),
                "consumer://h/svc?dubbo.force.tag=TRUE",
                &[],
            ),
            (
                "static tags are not hierarchical",
                Some("gray|x"),
                None,
                C,
                &[1, 2, 3, 5],
            ),
        ],
    );
}

const RULE_A: &str = "\
configVersion: v3.0
force: false
enabled: true
key: demo-provider
tags:
  - name: canary
    addresses: [\"10.0.0.2:20880\"]
  - name: beta|team1
    match:
      - key: env
        value: {exact: beta}
  - name: gone
    addresses: [\"192.168.9.9\"]
  - name: nomatch
    match:
      - key: env
        value: {exact: prod}
";

#[test]
fn dynamic_rule_addresses_match_and_hierarchy() {
    // Dynamic: canary → {1}, beta|team1 → {3, 4}, gone → {} (set, matches nothing),
    // nomatch → not set. Failover (no dynamic tag, no static tag) → {2, 5}.
    run_cases(
        PROVIDERS,
        Some(RULE_A),
        &[
            ("dynamic addresses", Some("canary"), None, C, &[1]),
            ("dynamic match", Some("beta|team1"), None, C, &[3, 4]),
            (
                "level fallback a|b|c → a|b",
                Some("beta|team1|x"),
                None,
                C,
                &[3, 4],
            ),
            (
                "forced: no level fallback, no static, empty",
                Some("beta|team1|x"),
                Some("true"),
                C,
                &[],
            ),
            (
                "forced exact level still found",
                Some("beta|team1"),
                Some("true"),
                C,
                &[3, 4],
            ),
            (
                "a shorter tag is not an ancestor level",
                Some("beta"),
                None,
                C,
                &[2, 5],
            ),
            (
                "dynamic tag matching nothing: failover, static skipped",
                Some("gone"),
                None,
                C,
                &[2, 5],
            ),
            (
                "dynamic tag matching nothing, request forced: empty",
                Some("gone"),
                Some("true"),
                C,
                &[],
            ),
            (
                "match tag resolved to nothing is not set",
                Some("nomatch"),
                None,
                C,
                &[2, 5],
            ),
            (
                "static tag when no dynamic tag",
                Some("gray"),
                None,
                C,
                &[0],
            ),
            (
                "static tag of a dynamically tagged provider",
                Some("blue"),
                None,
                C,
                &[4],
            ),
            ("unknown tag: failover", Some("red"), None, C, &[2, 5]),
            (
                "unknown tag, forced: empty",
                Some("red"),
                Some("true"),
                C,
                &[],
            ),
            ("untagged: no dynamic, no static", None, None, C, &[2, 5]),
        ],
    );
}

#[test]
fn rule_force_only_refuses_the_dynamic_fallback() {
    let rule = RULE_A.replace("force: false", "force: true");
    run_cases(
        PROVIDERS,
        Some(&rule),
        &[
            (
                "rule force: dynamic tag matching nothing → empty",
                Some("gone"),
                None,
                C,
                &[],
            ),
            (
                "rule force does not touch static fallback",
                Some("red"),
                None,
                C,
                &[2, 5],
            ),
            ("rule force with a match", Some("canary"), None, C, &[1]),
            ("untagged unaffected", None, None, C, &[2, 5]),
        ],
    );
}

#[test]
fn disabled_or_old_rules() {
    let disabled = RULE_A.replace("enabled: true", "enabled: false");
    run_cases(
        PROVIDERS,
        Some(&disabled),
        &[
            (
                "disabled rule: static routing",
                Some("canary"),
                None,
                C,
                &[1, 2, 3, 5],
            ),
            ("disabled rule: untagged", None, None, C, &[1, 2, 3, 5]),
        ],
    );
    let invalid = format!("{RULE_A}valid: false\n");
    run_cases(
        PROVIDERS,
        Some(&invalid),
        &[(
            "valid: false: static routing",
            Some("canary"),
            None,
            C,
            &[1, 2, 3, 5],
        )],
    );
    // Without configVersion v3.0, `match` is not read (as Dubbo): only address tags.
    let old = RULE_A.replace("configVersion: v3.0", "configVersion: v2.7");
    run_cases(
        PROVIDERS,
        Some(&old),
        &[
            (
                "v2.7: match ignored, static + failover",
                Some("beta|team1"),
                None,
                C,
                &[2, 3, 5],
            ),
            ("v2.7: addresses still work", Some("canary"), None, C, &[1]),
            ("v2.7: untagged", None, None, C, &[2, 3, 5]),
        ],
    );
}

#[test]
fn a_wildcard_tag_takes_every_provider_from_untagged_requests() {
    let rule = "tags:\n  - name: all\n    addresses: [\"*\"]\n";
    run_cases(
        PROVIDERS,
        Some(rule),
        &[
            (
                "all providers dynamically tagged: untagged gets none",
                None,
                None,
                C,
                &[],
            ),
            (
                "the tag gets all",
                Some("all"),
                None,
                C,
                &[0, 1, 2, 3, 4, 5],
            ),
            ("other tag: failover is empty", Some("red"), None, C, &[]),
        ],
    );
}

#[test]
fn address_forms_in_rules() {
    let providers = &[
        "dubbo://10.0.0.1:20880/s",  // 0
        "dubbo://10.0.0.9:20881/s",  // 1
        "dubbo://10.0.7.1:20880/s",  // 2
        "dubbo://10.1.0.1:20880/s",  // 3
        "dubbo://[::1]:20880/s",     // 4
        "dubbo://172.16.3.4:9000/s", // 5
    ];
    let rule = |addr: &str| format!("tags:\n  - name: t\n    addresses: [\"{addr}\"]\n");
    for (addr, want) in [
        ("10.0.0.1", &[0][..]),
        ("10.0.0.1:20880", &[0]),
        ("10.0.0.1:20881", &[]),
        ("10.0.*.*", &[0, 1, 2]),
        ("10.0.0.1-9", &[0, 1]),
        ("10.0.0.2-9:20881", &[1]),
        ("10.0.0.0/16", &[0, 1, 2]),
        ("10.0.0.0/8", &[0, 1, 2, 3]),
        ("0.0.0.0:20880", &[0, 2, 3, 4]),
        ("[::1]:20880", &[4]),
        ("172.16.0.0/12", &[5]),
        ("*", &[0, 1, 2, 3, 4, 5]),
    ] {
        let got = route(
            &snapshot(providers),
            &consumer(C),
            vec![tag_entry(Some(&rule(addr)))],
            &request(&[("dubbo.tag", "t"), ("dubbo.force.tag", "true")]),
        );
        assert_eq!(got, want, "address {addr}");
    }
}

#[test]
fn previous_routers_narrow_what_the_tag_sees() {
    // Another router removed provider 1 (the only canary): the dynamic tag now matches no
    // candidate, so the request fails over to untagged (or empty with rule force).
    let snap = snapshot(PROVIDERS);
    let drop_1 = ChainEntry::new("drop", 0, Arc::new(router_fn("drop", |_, c| c.remove(1))));
    let got = route(
        &snap,
        &consumer(C),
        vec![drop_1.clone(), tag_entry(Some(RULE_A))],
        &request(&[("dubbo.tag", "canary")]),
    );
    assert_eq!(got, [2, 5]);
    let forced_rule = RULE_A.replace("force: false", "force: true");
    let got = route(
        &snap,
        &consumer(C),
        vec![drop_1, tag_entry(Some(&forced_rule))],
        &request(&[("dubbo.tag", "canary")]),
    );
    assert_eq!(got, Vec::<usize>::new());
}

// ---- Dubbo's TagStateRouterTest, ported as cases ----

#[test]
fn dubbo_tag_route_pick_invokers() {
    // testTagRoutePickInvokers (and conformance case tag-001).
    run_cases(
        &[
            "test://127.0.0.1:7777/DemoInterface?dubbo.tag=tag2",
            "test://127.0.0.1:7778/DemoInterface",
            "test://127.0.0.1:7779/DemoInterface",
        ],
        None,
        &[(
            "static tag2",
            Some("tag2"),
            None,
            "test://127.0.0.1:7777/DemoInterface?dubbo.tag=tag2",
            &[0],
        )],
    );
}

#[test]
fn dubbo_tag_route_with_dynamic_rule_v3() {
    // testTagRouteWithDynamicRuleV3: the match tag resolves to the addresses of 7777 and 7778.
    let rule = "---\nconfigVersion: v3.0\nforce: false\nruntime: true\nenabled: true\npriority: 1\n\
                key: demo-provider\ntags:\n  - name: tag2\n    match:\n    - key: match_key\n      \
                value:\n       exact: value\n...\n";
    run_cases(
        &[
            "test://127.0.0.1:7777/DemoInterface?application=foo&dubbo.tag=tag2&match_key=value",
            "test://127.0.0.1:7778/DemoInterface?application=foo&match_key=value",
            "test://127.0.0.1:7779/DemoInterface?application=foo",
        ],
        Some(rule),
        &[("dynamic match tag2", Some("tag2"), None, C, &[0, 1])],
    );
}

/// Dynamic tag name → provider indexes, sorted by name.
fn resolved(providers: &[&str], rule: &str) -> Vec<(String, Vec<usize>)> {
    let rule: TagRule = compile(TagRouter, rule).unwrap();
    let prepared = PreparedTag::build(&snapshot(providers), Some(&rule));
    let mut dynamic: Vec<(String, Vec<usize>)> = prepared
        .dynamic
        .iter()
        .flat_map(|d| d.by_tag.entries())
        .map(|(k, v)| (k, v.to_bitset().iter().collect()))
        .collect();
    dynamic.sort();
    dynamic
}

#[test]
fn dubbo_tag_router_rule_parse() {
    // tagRouterRuleParseTest: null, [] and ~ addresses name no provider; tag2 has one.
    // (Dubbo's test rule is disabled; an enabled copy shows what it resolves to.)
    let rule = "---
force: false
runtime: true
enabled: true
priority: 1
key: demo-provider
tags:
  - name: tag1
    addresses: null
  - name: tag2
    addresses: [\"30.5.120.37:20880\"]
  - name: tag3
    addresses: []
  - name: tag4
    addresses: ~
...
";
    let providers = &["dubbo://30.5.120.37:20880/s", "dubbo://30.5.120.38:20880/s"];
    assert_eq!(resolved(providers, rule), [("tag2".to_string(), vec![0])]);
    let disabled = rule.replace("enabled: true", "enabled: false");
    let r: TagRule = compile(TagRouter, &disabled).unwrap();
    assert!(!r.enabled);
    assert_eq!(r.key.as_deref(), Some("demo-provider"));
    assert_eq!(r.tags.len(), 4);
    assert!(
        PreparedTag::build(&snapshot(providers), Some(&r))
            .dynamic
            .is_none()
    );
}

#[test]
fn unknown_fields_are_ignored_as_dubbo_ignores_them() {
    // `routechain check` warns about each (RC107); the router reads the rest of the rule.
    let rule = "
configVersion: v3.0
forse: true
key: demo-provider
tags:
  - name: gray
    adresses: [\"30.5.120.38:20880\"]
    addresses: [\"30.5.120.37:20880\"]
  - name: blue
    match:
      - key: env
        vlaue: {exact: x}
        value: {exact: blue}
";
    let r: TagRule = compile(TagRouter, rule).unwrap();
    assert!(!r.force, "`forse` is not `force`");
    assert_eq!(r.tags.len(), 2);
    let providers = &[
        "dubbo://30.5.120.37:20880/s",
        "dubbo://30.5.120.38:20880/s?env=blue",
    ];
    assert_eq!(
        resolved(providers, rule),
        [("blue".to_string(), vec![1]), ("gray".to_string(), vec![0])]
    );
}

#[test]
fn dubbo_tag_router_rule_parse_v3() {
    // tagRouterRuleParseTestV3.
    let rule =
        "---\nconfigVersion: v3.0\nforce: false\nruntime: true\nenabled: true\npriority: 1\n\
key: demo-provider\ntags:
  - name: tag1
    match:
    - key: match_key1
      value:
       exact: value1
  - name: tag2
    addresses:
     - \"10.20.3.3:20880\"
     - \"10.20.3.4:20880\"
    match:
    - key: match_key2
      value:
       exact: value2
  - name: tag3
    match:
    - key: match_key2
      value:
       exact: value2
  - name: tag4
    match:
    - key: not_exist
      value:
       exact: not_exist
  - name: tag5
    match:
    - key: match_key2
      value:
       wildcard: \"*\"
...
";
    let providers = &[
        "dubbo://10.20.3.3:20880/com.foo.BarService?match_key1=value1&match_key2=value2",
        "dubbo://10.20.3.4:20880/com.foo.BarService?match_key1=value1",
    ];
    assert_eq!(
        resolved(providers, rule),
        [
            ("tag1".to_string(), vec![0, 1]),
            ("tag2".to_string(), vec![0, 1]),
            ("tag3".to_string(), vec![0]),
            ("tag5".to_string(), vec![0]),
        ]
    );
}

const LEVEL_PROVIDERS: &[&str] = &[
    "dubbo://192.168.5.1:20880/s",
    "dubbo://192.168.5.2:20880/s",
    "dubbo://192.168.5.3:20880/s",
    "dubbo://192.168.5.9:20880/s",
];

fn level_rule(levels: &[(&str, &str)]) -> String {
    let mut s = String::from("tags:\n");
    for (name, addr) in levels {
        s.push_str(&format!(
            "  - name: \"{name}\"\n    addresses: [\"{addr}\"]\n"
        ));
    }
    s
}

#[test]
fn dubbo_tag_multi_level() {
    // tagMultiLevelTest, through the router: the selected level's providers.
    let beta = ("beta", "192.168.5.1:20880");
    let team1 = ("beta|team1", "192.168.5.2:20880");
    let partner1 = ("beta|team1|partner1", "192.168.5.3:20880");
    let only_beta = level_rule(&[beta]);
    run_cases(
        LEVEL_PROVIDERS,
        Some(&only_beta),
        &[(
            "a|b|c falls back to a",
            Some("beta|team1|partner1"),
            None,
            C,
            &[0],
        )],
    );
    let two = level_rule(&[beta, team1]);
    run_cases(
        LEVEL_PROVIDERS,
        Some(&two),
        &[(
            "a|b|c falls back to a|b first",
            Some("beta|team1|partner1"),
            None,
            C,
            &[1],
        )],
    );
    let all = level_rule(&[beta, team1, partner1]);
    run_cases(
        LEVEL_PROVIDERS,
        Some(&all),
        &[
            ("exact a|b|c", Some("beta|team1|partner1"), None, C, &[2]),
            ("exact a", Some("beta"), None, C, &[0]),
            ("exact a|b", Some("beta|team1"), None, C, &[1]),
            (
                "no level: null → static → failover",
                Some("beta2"),
                None,
                C,
                &[3],
            ),
            ("a|x falls back to a", Some("beta|team2"), None, C, &[0]),
            (
                "a|b|x falls back to a|b",
                Some("beta|team1|partner2"),
                None,
                C,
                &[1],
            ),
            (
                "forced a|x: no fallback",
                Some("beta|team2"),
                Some("true"),
                C,
                &[],
            ),
            (
                "a||x tries a|x, then a|, then a",
                Some("beta||x"),
                None,
                C,
                &[0],
            ),
        ],
    );
}

#[test]
fn dubbo_tag_level_force() {
    // tagLevelForceTest: forced requests still find their exact tag.
    let rule = level_rule(&[("beta", "192.168.1.223:20880")]);
    run_cases(
        &[
            "dubbo://192.168.1.223:20880/s",
            "dubbo://192.168.1.224:20880/s",
        ],
        Some(&rule),
        &[("forced exact tag", Some("beta"), Some("true"), C, &[0])],
    );
}

#[test]
fn explain_names_the_path_taken() {
    let snap = snapshot(PROVIDERS);
    let state = ChainState::new(None, snap, consumer(C), vec![tag_entry(Some(RULE_A))]).unwrap();
    let reason = |attachments: &[(&str, &str)]| {
        let mut trace = Trace::default();
        let _ = state.route_traced(&request(attachments), &mut CallState::seeded(1), &mut trace);
        trace.steps[0].reason.clone()
    };
    assert!(reason(&[("dubbo.tag", "canary")]).contains("dynamic addresses"));
    assert!(reason(&[("dubbo.tag", "gray")]).contains("static tag"));
    assert!(reason(&[("dubbo.tag", "red")]).contains("FAILOVER to untagged"));
    assert!(reason(&[("dubbo.tag", "red"), ("dubbo.force.tag", "true")]).contains("forced: empty"));
    assert!(
        reason(&[("dubbo.tag", "gone"), ("dubbo.force.tag", "true")]).contains("forced: empty")
    );
    assert!(reason(&[]).contains("no request tag"));
}

#[test]
fn per_request_consumer_is_read_per_call() {
    let snap = snapshot(PROVIDERS);
    let state = ChainState::new(None, snap, consumer(C), vec![tag_entry(None)]).unwrap();
    let r = Request::new().with_consumer(Url::parse("consumer://h/s?dubbo.tag=blue").unwrap());
    assert_eq!(route_state(&state, &r), [4]);
    assert_eq!(route_state(&state, &Request::new()), [1, 2, 3, 5]);
}

// ---- property: the cached router equals a direct evaluation of Dubbo's algorithm ----

mod oracle {
    //! A literal, per-provider transcription of Dubbo's `TagStateRouter.doRoute`, with
    //! address strings and list filtering instead of prepared sets.

    use std::collections::HashMap;

    use crate::tag::{AddressPattern, HostPort, TagRule};
    use routechain_core::Snapshot;

    fn static_tag(s: &Snapshot, i: usize) -> Option<&str> {
        s.providers()[i]
            .param("dubbo.tag")
            .filter(|t| !t.is_empty())
    }

    fn matches_any(s: &Snapshot, i: usize, addresses: &[String]) -> bool {
        let p = &s.providers()[i];
        let at = HostPort::new(p.host(), p.port());
        addresses
            .iter()
            .any(|a| AddressPattern::parse(a).is_ok_and(|pat| pat.matches(&at)))
    }

    /// Dubbo's tagnameToAddresses: tag → address strings.
    fn tag_addresses(
        s: &Snapshot,
        rule: &TagRule,
        raw: &[(String, Vec<String>)],
    ) -> HashMap<String, Vec<String>> {
        let mut map = HashMap::new();
        for (spec, (_, addrs)) in rule.tags.iter().zip(raw) {
            if !addrs.is_empty() {
                map.insert(spec.name.clone(), addrs.clone());
            }
        }
        if rule.uses_match() && !s.is_empty() {
            for spec in rule.tags.iter().filter(|t| t.addresses.is_empty()) {
                let Some(ms) = &spec.matches else { continue };
                let mut addrs: Vec<String> = Vec::new();
                for p in s.providers() {
                    if ms.iter().all(|m| m.is_match(p.param(&m.key))) {
                        addrs.push(p.address().to_string());
                    }
                }
                if !addrs.is_empty() {
                    map.insert(spec.name.clone(), addrs);
                }
            }
        }
        map
    }

    #[allow(clippy::too_many_arguments)]
    pub fn route(
        s: &Snapshot,
        rule: Option<&TagRule>,
        raw_addresses: &[(String, Vec<String>)],
        invokers: &[usize],
        tag: Option<&str>,
        forced: bool,
    ) -> Vec<usize> {
        let filter = |list: &[usize], f: &dyn Fn(usize) -> bool| -> Vec<usize> {
            list.iter().copied().filter(|&i| f(i)).collect()
        };
        let untagged = |i: usize| static_tag(s, i).is_none();
        let Some(rule) = rule.filter(|r| r.enabled) else {
            return match tag {
                Some(t) => {
                    let r = filter(invokers, &|i| static_tag(s, i) == Some(t));
                    if r.is_empty() && !forced {
                        filter(invokers, &untagged)
                    } else {
                        r
                    }
                }
                None => filter(invokers, &untagged),
            };
        };
        let map = tag_addresses(s, rule, raw_addresses);
        let all: Vec<String> = map.values().flatten().cloned().collect();
        match tag {
            Some(t) => {
                let selected = if forced || !t.contains('|') {
                    map.get(t)
                } else {
                    let parts: Vec<&str> = t.split('|').collect();
                    (1..=parts.len())
                        .rev()
                        .find_map(|n| map.get(&parts[..n].join("|")))
                };
                let result = match selected {
                    Some(addrs) => {
                        let r = filter(invokers, &|i| matches_any(s, i, addrs));
                        if !r.is_empty() || rule.force {
                            return r;
                        }
                        r
                    }
                    None => filter(invokers, &|i| static_tag(s, i) == Some(t)),
                };
                if !result.is_empty() || forced {
                    return result;
                }
                let tmp = filter(invokers, &|i| !matches_any(s, i, &all));
                filter(&tmp, &untagged)
            }
            None => {
                let mut result = invokers.to_vec();
                if !all.is_empty() {
                    result = filter(invokers, &|i| !matches_any(s, i, &all));
                    if result.is_empty() {
                        return result;
                    }
                }
                filter(&result, &untagged)
            }
        }
    }
}

mod property {
    use super::*;
    use proptest::prelude::*;

    const HOSTS: [&str; 5] = [
        "10.0.0.1",
        "10.0.0.2",
        "10.0.1.1",
        "10.0.1.2",
        "192.168.0.1",
    ];
    const PORTS: [u16; 3] = [0, 20880, 20881];
    const TAGS: [&str; 7] = ["", "a", "b", "a|b", "a|b|c", "c", "zz"];
    const ENVS: [&str; 3] = ["", "x", "y"];
    const ADDRS: [&str; 9] = [
        "10.0.0.1",
        "10.0.0.2:20880",
        "10.0.1.*",
        "10.0.0.1-2:20881",
        "10.0.0.0/31",
        "0.0.0.0:20881",
        "192.168.0.1:0",
        "172.16.0.1",
        "*",
    ];
    const NAMES: [&str; 5] = ["a", "b", "a|b", "a|b|c", "c"];

    #[derive(Debug, Clone)]
    struct GenTag {
        name: usize,
        addresses: Vec<usize>,
        /// `match` on env: None, exact x, noempty, empty, prefix "y", empty list.
        matcher: Option<u8>,
    }

    fn providers() -> impl Strategy<Value = Vec<(usize, usize, usize, usize)>> {
        proptest::collection::vec(
            (
                0..HOSTS.len(),
                0..PORTS.len(),
                0..TAGS.len() + 1,
                0..ENVS.len() + 1,
            ),
            0..12,
        )
    }

    fn tags() -> impl Strategy<Value = Vec<GenTag>> {
        proptest::collection::vec(
            (
                0..NAMES.len(),
                proptest::collection::vec(0..ADDRS.len(), 0..3),
                proptest::option::of(0u8..6),
            )
                .prop_map(|(name, addresses, matcher)| GenTag {
                    name,
                    addresses,
                    matcher,
                }),
            1..5,
        )
    }

    fn rule_yaml(tags: &[GenTag], enabled: bool, force: bool, v3: bool) -> String {
        let mut s = format!(
            "{}enabled: {enabled}\nforce: {force}\ntags:\n",
            if v3 { "configVersion: v3.0\n" } else { "" }
        );
        for t in tags {
            s.push_str(&format!("  - name: \"{}\"\n", NAMES[t.name]));
            let addrs: Vec<String> = t
                .addresses
                .iter()
                .map(|&a| format!("\"{}\"", ADDRS[a]))
                .collect();
            s.push_str(&format!("    addresses: [{}]\n", addrs.join(", ")));
            match t.matcher {
                None => {}
                Some(5) => s.push_str("    match: []\n"),
                Some(m) => {
                    let value = [
                        "{exact: x}",
                        "{noempty: \"\"}",
                        "{empty: \"\"}",
                        "{prefix: y}",
                        "{regex: \"[xy]\"}",
                    ][m as usize];
                    s.push_str(&format!(
                        "    match:\n      - key: env\n        value: {value}\n"
                    ));
                }
            }
        }
        s
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]
        #[test]
        fn cached_routing_equals_direct_evaluation(
            provs in providers(),
            gen_tags in tags(),
            has_rule in any::<bool>(),
            enabled in proptest::bool::weighted(0.8),
            force in any::<bool>(),
            v3 in any::<bool>(),
            req_tag in 0..TAGS.len() + 1,
            req_force in 0..5usize,
            consumer_tag in 0..TAGS.len() + 1,
            mask in any::<u16>(),
        ) {
            let lines: Vec<String> = provs.iter().map(|&(h, p, t, e)| {
                let mut params = Vec::new();
                if t < TAGS.len() { params.push(format!("dubbo.tag={}", TAGS[t])); }
                if e < ENVS.len() { params.push(format!("env={}", ENVS[e])); }
                let port = if PORTS[p] == 0 { String::new() } else { format!(":{}", PORTS[p]) };
                format!("dubbo://{}{port}/svc?{}", HOSTS[h], params.join("&"))
            }).collect();
            let line_refs: Vec<&str> = lines.iter().map(String::as_str).collect();
            let snap = snapshot(&line_refs);
            let yaml = rule_yaml(&gen_tags, enabled, force, v3);
            let rule: Option<TagRule> = has_rule.then(|| {
                compile(TagRouter, &yaml).expect("generated rule compiles")
            });
            let raw: Vec<(String, Vec<String>)> = gen_tags.iter().map(|t| {
                (NAMES[t.name].to_string(), t.addresses.iter().map(|&a| ADDRS[a].to_string()).collect())
            }).collect();

            let mut attachments: Vec<(&str, &str)> = Vec::new();
            if req_tag < TAGS.len() { attachments.push(("dubbo.tag", TAGS[req_tag])); }
            let force_values = ["true", "false", "", "TRUE"];
            if req_force < force_values.len() {
                attachments.push(("dubbo.force.tag", force_values[req_force]));
            }
            let consumer_url = if consumer_tag < TAGS.len() {
                format!("consumer://10.9.9.9/svc?dubbo.tag={}", TAGS[consumer_tag])
            } else {
                "consumer://10.9.9.9/svc".to_string()
            };
            let request = request(&attachments);
            let tag = attachments.iter().find(|(k, _)| *k == "dubbo.tag").map(|(_, v)| *v)
                .filter(|t| !t.is_empty())
                .or_else(|| (consumer_tag < TAGS.len()).then(|| TAGS[consumer_tag]).filter(|t| !t.is_empty()));
            let forced = attachments.iter().find(|(k, _)| *k == "dubbo.force.tag").map(|(_, v)| *v)
                .filter(|v| !v.is_empty())
                .is_some_and(|v| v.eq_ignore_ascii_case("true"));

            // A previous router leaves the providers of `mask`.
            let invokers: Vec<usize> = (0..snap.len()).filter(|i| mask & (1 << i) != 0).collect();
            let keep = invokers.clone();
            let pre = ChainEntry::new("mask", 0, Arc::new(router_fn("mask", move |_, c| {
                c.and_with(|w| if w == 0 { keep.iter().fold(0u64, |m, &i| m | 1 << i) } else { 0 });
            })));
            let got = route(&snap, &consumer(&consumer_url), vec![pre, ChainEntry::new("tag", 100, routechain_core::TypedFactory::new("tag", TagRouter).router(Some(rule.clone().unwrap_or_else(TagRule::static_only))))], &request);
            let want = if invokers.is_empty() {
                Vec::new()
            } else {
                oracle::route(&snap, rule.as_ref(), &raw, &invokers, tag, forced)
            };
            prop_assert_eq!(got, want, "rule:\n{}\nproviders: {:?}\ntag {:?} forced {}", if has_rule { yaml.as_str() } else { "(none)" }, lines, tag, forced);
        }
    }
}
