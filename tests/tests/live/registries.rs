//! A ZooKeeper that real Dubbo deployments populate: provider nodes as Java Dubbo writes
//! them (a bare `%` in a value, an unparseable node), grouped and versioned providers for a
//! `group: "*"` reference, rules at Dubbo Admin's keys, override rules in every format,
//! tag rules under the providers' application, and ephemeral registration.

use std::collections::BTreeMap;
use std::time::Duration;

use routechain::balance::Caller;
use routechain::core::Request;
use routechain::live::{LiveChain, Report, ZkAdmin, ZkConfig, ZkSource, encode_component};

use super::support::zookeeper::ZooKeeper;
use super::zk::Raw;
use super::{PATIENCE, live, wait_report, wait_route, wait_route_for, watch};

const SERVICE: &str = "com.acme.OrderService";

fn source(live: &LiveChain, zk: &ZooKeeper) -> Box<ZkSource> {
    let mut config = ZkConfig::for_chain(live, zk.address());
    config.session_timeout = Duration::from_secs(4);
    config.following.retry_delay = Duration::from_millis(100);
    Box::new(ZkSource::new(config))
}

/// Registers `url` as Java Dubbo does: the node name is the URL encoded once.
fn register(raw: &Raw, url: &str) {
    raw.put(
        &format!("/dubbo/{SERVICE}/providers/{}", encode_component(url)),
        "",
    );
}

/// Routes and balances `calls` calls; the calls each provider address answered.
fn distribution(live: &LiveChain, calls: usize) -> BTreeMap<String, usize> {
    let mut call = Caller::seeded(7);
    let mut out = BTreeMap::new();
    for _ in 0..calls {
        let answered = match live.service().select(&Request::new(), &[], &mut call) {
            Ok(selected) => selected.provider().address().to_string(),
            Err(e) => format!("no provider: {e}"),
        };
        *out.entry(answered).or_default() += 1;
    }
    out
}

/// Waits until `calls` calls spread over the providers exactly as `expected`.
fn wait_distribution(live: &LiveChain, calls: usize, expected: &[(&str, usize)]) {
    let expected: BTreeMap<String, usize> =
        expected.iter().map(|(a, n)| (a.to_string(), *n)).collect();
    let start = std::time::Instant::now();
    let mut last = BTreeMap::new();
    while start.elapsed() < PATIENCE {
        last = distribution(live, calls);
        if last == expected {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("calls never spread as {expected:?}; last: {last:?}");
}

#[test]
fn a_bare_percent_value_is_kept_and_an_unparseable_node_is_skipped_alone() {
    let zk = ZooKeeper::start("bare-percent");
    let raw = Raw::connect(&zk.address());
    register(
        &raw,
        "dubbo://10.0.0.1:20880/com.acme.OrderService?side=provider&discount=100%&zone=a",
    );
    register(
        &raw,
        "dubbo://10.0.0.2:20880/com.acme.OrderService?side=provider&zone=a",
    );
    // Nodes no encoder wrote: a port that is not a number, and a bad escape.
    let bad_port = "dubbo%3A%2F%2F10.0.0.9%3Anot-a-port%2Fcom.acme.OrderService%3Fside%3Dprovider";
    let bad_escape = "dubbo%3A%2F%2F10.0.0.8%3A20880%2Fx%zz";
    for node in [bad_port, bad_escape] {
        raw.put(&format!("/dubbo/{SERVICE}/providers/{node}"), "");
    }
    let live = live("service: com.acme.OrderService\nrouters:\n  - type: condition\n");
    let (_watching, rx) = watch(&live, source(&live, &zk));
    wait_route(&live, &["10.0.0.1:20880", "10.0.0.2:20880"]);
    let state = live.service().state();
    assert_eq!(
        state.snapshot().providers()[0].param("discount"),
        Some("100%"),
        "a bare % is kept as written"
    );
    let mut skipped = Vec::new();
    while skipped.len() < 2 {
        let r = wait_report(&rx, "skipped nodes", |r| {
            matches!(r, Report::Skipped { .. })
        });
        skipped.push(r.to_string());
    }
    skipped.sort();
    assert_eq!(
        skipped,
        [
            format!(
                "skipped provider /dubbo/{SERVICE}/providers/{bad_escape}: node name: bad escape \
                 at byte 34"
            ),
            format!(
                "skipped provider /dubbo/{SERVICE}/providers/{bad_port}: invalid provider URL \
                 at column 18: invalid port \"not-a-port\""
            ),
        ]
    );
    assert_eq!(live.stats().skipped(), 2);
    assert_eq!(live.stats().refused(), 0);
    // Another provider arrives: applied; the bad nodes are not reported (or counted) again.
    register(
        &raw,
        "dubbo://10.0.0.3:20880/com.acme.OrderService?side=provider&zone=a",
    );
    wait_route(
        &live,
        &["10.0.0.1:20880", "10.0.0.2:20880", "10.0.0.3:20880"],
    );
    assert_eq!(live.stats().skipped(), 2);
}

#[test]
fn a_group_star_reference_takes_every_group_of_its_version_and_routes_per_call_with_rules_at_dubbo_admins_keys()
 {
    let zk = ZooKeeper::start("groups");
    let raw = Raw::connect(&zk.address());
    let mut n = 0;
    for version in ["1.0.0", "2.1.0"] {
        for (group, region) in [("blue", "hz"), ("green", "hz"), ("red", "bj")] {
            n += 1;
            register(
                &raw,
                &format!(
                    "dubbo://10.0.1.{n}:20880/{SERVICE}?side=provider&interface={SERVICE}\
                     &group={group}&version={version}&region={region}"
                ),
            );
        }
    }
    let chain = "service: com.acme.OrderService\ngroup: \"*\"\nversion: 2.1.0\nrouters:\n  \
                 - type: condition\n  - type: group\n";
    let live = live(chain);
    let (_watching, rx) = watch(&live, source(&live, &zk));
    wait_report(&rx, "the providers' count", |r| {
        matches!(r, Report::Status { message, .. } if message == &format!(
            "/dubbo/{SERVICE}/providers: 6 registered, 3 match (group=*, version=2.1.0); excluded 3 by version"
        ))
    });
    wait_route(
        &live,
        &["10.0.1.4:20880", "10.0.1.5:20880", "10.0.1.6:20880"],
    );
    let group = |g: &str| Request::new().with_attribute("group", g);
    wait_route_for(&live, &group("blue"), &["10.0.1.4:20880"]);
    wait_route_for(
        &live,
        &group("green,red"),
        &["10.0.1.5:20880", "10.0.1.6:20880"],
    );
    // The service rule at the key Dubbo Admin writes for this reference: the group slot
    // (a wildcard) is empty, the version written.
    raw.put(
        &format!("/dubbo/config/dubbo/{SERVICE}:2.1.0:.condition-router"),
        "configVersion: v3.0\nscope: service\nkey: com.acme.OrderService:2.1.0\nforce: true\n\
         conditions:\n  - => region = hz\n",
    );
    wait_route(&live, &["10.0.1.4:20880", "10.0.1.5:20880"]);
    wait_route_for(&live, &group("green,red"), &["10.0.1.5:20880"]);
    let state = live.service().state();
    let mut call = Caller::seeded(1);
    assert!(
        state.route(&group("red"), &mut call).is_err(),
        "red is all in bj"
    );
}

const OVERRIDES_CHAIN: &str = "\
service: com.acme.OrderService
consumer: consumer://10.9.9.9/com.acme.OrderService?application=web
apply_provider_overrides: true
load_balance: roundrobin
routers:
  - type: condition
";

#[test]
fn override_rules_in_every_format_change_weights_disable_providers_and_a_bad_one_is_refused() {
    let zk = ZooKeeper::start("overrides");
    let raw = Raw::connect(&zk.address());
    for (n, zone) in [(1, "a"), (2, "b")] {
        register(
            &raw,
            &format!(
                "dubbo://10.0.2.{n}:20880/{SERVICE}?side=provider&application=orders&zone={zone}"
            ),
        );
    }
    let live = live(OVERRIDES_CHAIN);
    let (_watching, rx) = watch(&live, source(&live, &zk));
    let (one, two) = ("10.0.2.1:20880", "10.0.2.2:20880");
    wait_distribution(&live, 400, &[(one, 200), (two, 200)]);

    // Dubbo Admin (Java) "weight adjustment", at the service key: no configVersion, a typed
    // provider-side item for one address.
    const SERVICE_NODE: &str = "/dubbo/config/dubbo/com.acme.OrderService::.configurators";
    raw.put(
        SERVICE_NODE,
        "key: com.acme.OrderService\nscope: service\nconfigs:\n- type: weight\n  enabled: true\n  \
         side: provider\n  addresses: [10.0.2.1:20880]\n  parameters:\n    weight: 300\n",
    );
    wait_distribution(&live, 400, &[(one, 300), (two, 100)]);

    // The Go console's flow weight: v3.0, application scope (the providers' application),
    // matched on a provider parameter.
    const APP_NODE: &str = "/dubbo/config/dubbo/orders.configurators";
    raw.put(
        APP_NODE,
        "configVersion: v3.0\nscope: application\nkey: orders\nenabled: true\nconfigs:\n- side: provider\n  \
         match:\n    param:\n    - key: zone\n      value: {exact: b}\n  parameters:\n    weight: \"500\"\n",
    );
    wait_distribution(&live, 800, &[(one, 300), (two, 500)]);

    // A bad rule (an item with no parameter): refused, located; the previous rules stay.
    raw.put(
        APP_NODE,
        "configVersion: v3.0\nscope: application\nkey: orders\nconfigs:\n- side: provider\n  enabled: true\n",
    );
    let report = wait_report(&rx, "bad override refused", |r| {
        matches!(r, Report::Refused { .. })
    });
    assert!(
        report.to_string().contains(&format!(
            "zookeeper:{APP_NODE}:5:3: configs[0].parameters: an override item needs at least one parameter"
        )),
        "{report}"
    );
    assert_eq!(distribution(&live, 800)[two], 500);

    // Dubbo's documented "disable a provider" rule (v2.7, application scope).
    raw.put(
        APP_NODE,
        "configVersion: v2.7\nscope: application\nkey: orders\nenabled: true\nconfigs:\n- addresses: [\"10.0.2.2:20880\"]\n  \
         side: provider\n  parameters:\n    disabled: true\n",
    );
    wait_route(&live, &[one]);
    // Deleted: cleared.
    raw.delete(APP_NODE);
    wait_route(&live, &[one, two]);

    // A legacy `override://` URL under /dubbo/<interface>/configurators.
    let legacy = format!(
        "/dubbo/{SERVICE}/configurators/{}",
        encode_component(&format!(
            "override://10.0.2.1:20880/{SERVICE}?category=configurators&dynamic=false&disabled=true"
        ))
    );
    raw.put(&legacy, "");
    wait_route(&live, &[two]);
    raw.delete(&legacy);
    wait_route(&live, &[one, two]);

    // A consumer-side rule at the consumer's application key, as Dubbo's consumer applies it.
    const CONSUMER_NODE: &str = "/dubbo/config/dubbo/web.configurators";
    raw.put(
        CONSUMER_NODE,
        "configVersion: v2.7\nscope: application\nkey: web\nconfigs:\n- side: consumer\n  \
         addresses: [10.9.9.9]\n  providerAddresses: [\"10.0.2.2:20880\"]\n  parameters:\n    disabled: \"true\"\n",
    );
    wait_route(&live, &[one]);
    raw.delete(CONSUMER_NODE);
    wait_route(&live, &[one, two]);
    // The weight rule still applies.
    wait_distribution(&live, 400, &[(one, 300), (two, 100)]);
}

#[test]
fn without_apply_provider_overrides_provider_side_items_are_left_to_the_providers() {
    let zk = ZooKeeper::start("provider-side");
    let raw = Raw::connect(&zk.address());
    for n in 1..=2 {
        register(
            &raw,
            &format!("dubbo://10.0.2.{n}:20880/{SERVICE}?side=provider&application=orders"),
        );
    }
    let live = live(&OVERRIDES_CHAIN.replace("apply_provider_overrides: true\n", ""));
    let (_watching, rx) = watch(&live, source(&live, &zk));
    wait_route(&live, &["10.0.2.1:20880", "10.0.2.2:20880"]);
    raw.put(
        "/dubbo/config/dubbo/com.acme.OrderService::.configurators",
        "key: com.acme.OrderService\nconfigs:\n- type: weight\n  enabled: true\n  side: provider\n  \
         addresses: [10.0.2.1:20880]\n  parameters:\n    weight: 300\n",
    );
    wait_report(
        &rx,
        "ignored",
        |r| matches!(r, Report::Ignored { reason, .. } if reason == "the override rules change no provider"),
    );
    assert_eq!(
        distribution(&live, 400)
            .values()
            .copied()
            .collect::<Vec<_>>(),
        [200, 200]
    );
}

#[test]
fn the_tag_rule_is_read_under_the_providers_application_and_follows_it() {
    let zk = ZooKeeper::start("tag-app");
    let raw = Raw::connect(&zk.address());
    let url = |n: u8, app: &str| {
        format!("dubbo://10.0.3.{n}:20880/{SERVICE}?side=provider&application={app}")
    };
    for n in 1..=3 {
        register(&raw, &url(n, "orders"));
    }
    raw.put(
        "/dubbo/config/dubbo/orders.tag-router",
        "configVersion: v3.0\nforce: false\nenabled: true\nkey: orders\ntags:\n  \
         - name: gray\n    addresses: [\"10.0.3.2:20880\"]\n",
    );
    // A tag rule under the service key is not Dubbo's: nothing reads it.
    raw.put(
        &format!("/dubbo/config/dubbo/{SERVICE}::.tag-router"),
        "force: true\ntags:\n  - name: gray\n    addresses: [\"10.0.3.3:20880\"]\n",
    );
    let live = live("service: com.acme.OrderService\nrouters:\n  - type: tag\n");
    assert_eq!(live.provider_app_kinds(), ["tag"]);
    let (_watching, _rx) = watch(&live, source(&live, &zk));
    let gray = Request::new().with_attachment("dubbo.tag", "gray");
    wait_route_for(&live, &gray, &["10.0.3.2:20880"]);
    wait_route(&live, &["10.0.3.1:20880", "10.0.3.3:20880"]);
    // The providers move to another application: its (absent) rule applies, the old one no more.
    for n in 1..=3 {
        raw.delete(&format!(
            "/dubbo/{SERVICE}/providers/{}",
            encode_component(&url(n, "orders"))
        ));
        register(&raw, &url(n, "orders-v2"));
    }
    wait_route(
        &live,
        &["10.0.3.1:20880", "10.0.3.2:20880", "10.0.3.3:20880"],
    );
    raw.put(
        "/dubbo/config/dubbo/orders-v2.tag-router",
        "force: false\ntags:\n  - name: gray\n    addresses: [\"10.0.3.1:20880\"]\n",
    );
    wait_route_for(&live, &gray, &["10.0.3.1:20880"]);
}

#[test]
fn an_ephemeral_registration_vanishes_with_its_session() {
    let zk = ZooKeeper::start("ephemeral");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let holder = rt.block_on(ZkAdmin::connect(&zk.address())).unwrap();
    let keeper = rt.block_on(ZkAdmin::connect(&zk.address())).unwrap();
    let url = |n: u8| format!("dubbo://10.0.4.{n}:20880/{SERVICE}?side=provider");
    rt.block_on(holder.register(SERVICE, &url(1))).unwrap();
    rt.block_on(keeper.register_persistent(SERVICE, &url(2)))
        .unwrap();
    let live = live("service: com.acme.OrderService\nrouters:\n  - type: condition\n");
    let (_watching, _rx) = watch(&live, source(&live, &zk));
    wait_route(&live, &["10.0.4.1:20880", "10.0.4.2:20880"]);
    // The holder's session ends: its node is gone at once; the persistent one stays.
    rt.block_on(holder.close());
    wait_route(&live, &["10.0.4.2:20880"]);
    let listed = rt.block_on(keeper.providers(SERVICE)).unwrap();
    assert_eq!(listed, [url(2)]);
}

#[test]
fn the_chain_and_override_rule_examples_in_the_dubbo_deployment_guide_are_valid() {
    let guide = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/live.md"),
    )
    .unwrap();
    let start = guide
        .find("## Pointing routechain at an existing Dubbo deployment")
        .expect("the section");
    let end = start + guide[start..].find("\n## ").expect("the next section");
    let section = &guide[start..end];
    let blocks: Vec<&str> = section
        .split("```yaml\n")
        .skip(1)
        .map(|b| b.split("```").next().unwrap())
        .collect();
    let dir = std::env::temp_dir().join(format!("routechain-guide-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // The override rules first (the chain files name them), under the names they give.
    let mut rules = 0;
    for block in &blocks {
        if block.contains("configs:") {
            routechain::rules::configurators::OverrideRule::parse("guide", block)
                .unwrap_or_else(|e| panic!("{block}\n{}", e[0].render()));
            let name = block
                .strip_prefix("# ")
                .and_then(|b| b.split(':').next())
                .expect("an override example starts with `# <file name>:`");
            std::fs::write(dir.join(name), block).unwrap();
            rules += 1;
        }
    }
    let mut chains = 0;
    for block in &blocks {
        if block.contains("routers:") {
            let file = routechain::rules::ChainFile::parse("guide", block, Some(dir.clone()))
                .unwrap_or_else(|e| panic!("{block}\n{}", e[0].render()));
            routechain::live::LiveChain::new(
                file,
                routechain::registry(),
                routechain::live::LiveOptions::default(),
            )
            .unwrap_or_else(|e| panic!("{block}\n{}", e.render()));
            chains += 1;
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!((chains, rules), (3, 4));
}
