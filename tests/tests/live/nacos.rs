//! The Nacos source against a real Nacos server (rnacos, started by the test) in Dubbo's
//! layout, written by an independent client: the official Python Nacos SDK's gRPC client
//! registering instances exactly as Dubbo's NacosRegistry does, and writing rules with its
//! config client.

use std::time::{Duration, Instant};

use routechain::core::Request;
use routechain::live::{LiveChain, NacosAdmin, NacosConfig, NacosSource, Report};

use super::support::nacos::{Nacos, NacosWriter};
use super::{live, route, wait_report, wait_route, wait_route_for, watch};

const SERVICE: &str = "com.foo.BarService";
const GROUP: &str = "DEFAULT_GROUP";

fn provider(n: u32, params: &str) -> String {
    let ip = format!("10.0.{}.{}", n / 250, n % 250);
    if params.is_empty() {
        format!("dubbo://{ip}:20880/{SERVICE}?application=demo-provider&side=provider")
    } else {
        format!("dubbo://{ip}:20880/{SERVICE}?application=demo-provider&side=provider&{params}")
    }
}

fn addr(n: u32) -> String {
    format!("10.0.{}.{}:20880", n / 250, n % 250)
}

fn source(live: &LiveChain, url: &str) -> Box<NacosSource> {
    let mut config = NacosConfig::for_chain(live, url);
    config.following.retry_delay = Duration::from_millis(200);
    config.lookup_interval = Duration::from_secs(1);
    Box::new(NacosSource::new(config))
}

const CHAIN: &str = "
service: com.foo.BarService
apply_provider_overrides: true   # `side: provider` override items apply too
routers:
  - type: condition              # follows com.foo.BarService::.condition-router
  - type: tag                    # follows <providers' app>.tag-router
";

#[test]
fn providers_and_every_rule_kind_follow_nacos_and_a_bad_rule_is_refused_where_it_is() {
    let nacos = Nacos::start("rules");
    let mut w = NacosWriter::start(&nacos.address(), "");
    for (n, params) in [
        (1, "region=hz"),
        (2, "region=bj"),
        (3, "region=hz&env=gray"),
    ] {
        w.register(GROUP, &provider(n, params));
    }
    // Another version: registered under another service name, not followed.
    w.register(GROUP, &provider(9, "version=2.0.0&region=hz"));
    let live = live(CHAIN);
    let (_watching, rx) = watch(&live, source(&live, &nacos.url("")));
    let all = [addr(1), addr(2), addr(3)];
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    wait_route(&live, &all);
    let status = wait_report(
        &rx,
        "provider status",
        |r| matches!(r, Report::Status { message, .. } if message.contains("registered")),
    );
    assert!(
        status.to_string().contains(
            "nacos:public/DEFAULT_GROUP/providers:com.foo.BarService::: 3 registered, 3 match"
        ),
        "{status}"
    );

    // Added, removed, updated instances.
    w.register(GROUP, &provider(4, "region=bj"));
    wait_route(&live, &[&addr(1), &addr(2), &addr(3), &addr(4)]);
    w.deregister(GROUP, &provider(4, "region=bj"));
    wait_route(&live, &all);
    // Re-registering 10.0.0.2 with new metadata updates it in place.
    w.register(GROUP, &provider(2, "region=hz"));
    let hz = |live: &LiveChain| {
        let state = live.service().state();
        state
            .snapshot()
            .providers()
            .iter()
            .filter(|u| u.param("region") == Some("hz"))
            .count()
    };
    let start = Instant::now();
    while hz(&live) != 3 {
        assert!(start.elapsed() < super::PATIENCE, "the update never showed");
        std::thread::sleep(Duration::from_millis(20));
    }
    w.register(GROUP, &provider(2, "region=bj"));

    // A condition rule: pushed, changed, bad (refused, located by dataId, line and
    // column: the previous state serves), deleted.
    const RULE: &str = "com.foo.BarService::.condition-router";
    w.publish(RULE, "conditions: ['=> region = hz']\n");
    wait_route(&live, &[&addr(1), &addr(3)]);
    wait_report(
        &rx,
        "rule added",
        |r| matches!(r, Report::Applied { change, .. } if change == &format!("rule {RULE} added")),
    );
    w.publish(RULE, "conditions: ['=> region = bj']\n");
    wait_route(&live, &[&addr(2)]);
    w.publish(RULE, "conditions: ['=> region = hz'\n");
    let report = wait_report(&rx, "refusal", |r| matches!(r, Report::Refused { .. }));
    let Report::Refused { change, reason } = report else {
        unreachable!()
    };
    assert_eq!(change, format!("rule {RULE} modified"));
    assert!(
        reason.contains(&format!("nacos:public/dubbo/{RULE}:2:")),
        "located by dataId and line: {reason}"
    );
    assert_eq!(live.stats().refused(), 1);
    wait_route(&live, &[&addr(2)]);
    w.remove(RULE);
    wait_route(&live, &all);

    // A tag rule under the providers' application (learnt from the instances' metadata).
    const TAG: &str = "demo-provider.tag-router";
    w.publish(
        TAG,
        "force: false\nenabled: true\nkey: demo-provider\ntags:\n  - name: gray\n    addresses: [\"10.0.0.3:20880\"]\n",
    );
    wait_route(&live, &[&addr(1), &addr(2)]);
    let gray = Request::new().with_attachment("dubbo.tag", "gray");
    wait_route_for(&live, &gray, &[&addr(3)]);
    w.publish(TAG, "tags: 7\n");
    wait_report(
        &rx,
        "bad tag rule refused",
        |r| matches!(r, Report::Refused { change, .. } if change.contains(TAG)),
    );
    wait_route(&live, &[&addr(1), &addr(2)]);
    w.remove(TAG);
    wait_route(&live, &all);

    // Override rules (`<key>.configurators`): a provider's weight.
    const OVERRIDE: &str = "com.foo.BarService::.configurators";
    let weight_of = |live: &LiveChain, address: &str| {
        live.service()
            .state()
            .snapshot()
            .providers()
            .iter()
            .find(|u| u.address() == address)
            .and_then(|u| u.param("weight").map(str::to_string))
    };
    let wait_weight = |live: &LiveChain, address: &str, want: Option<&str>| {
        let start = Instant::now();
        while weight_of(live, address).as_deref() != want {
            assert!(
                start.elapsed() < super::PATIENCE,
                "{address}: weight never {want:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    w.publish(
        OVERRIDE,
        "key: com.foo.BarService\nscope: service\nconfigs:\n- type: weight\n  enabled: true\n  side: provider\n  addresses: [10.0.0.1:20880]\n  parameters:\n    weight: 300\n",
    );
    wait_weight(&live, &addr(1), Some("300"));
    w.remove(OVERRIDE);
    wait_weight(&live, &addr(1), None);

    // The Nacos weight (beyond Dubbo) is the provider's weight ×100. (rnacos takes no
    // `healthy=false` from a gRPC registration: the unhealthy filter is unit-tested.)
    w.register_with(GROUP, &provider(5, "region=hz"), 0.5, true);
    wait_route(&live, &[&addr(1), &addr(2), &addr(3), &addr(5)]);
    wait_weight(&live, &addr(5), Some("50"));
    w.deregister(GROUP, &provider(5, "region=hz"));
    wait_route(&live, &all);
}

#[test]
fn an_affinity_and_a_mesh_rule_take_effect_from_nacos() {
    let nacos = Nacos::start("kinds");
    let mut w = NacosWriter::start(&nacos.address(), "");
    for (n, params) in [(1, "region=hz"), (2, "region=bj")] {
        w.register(GROUP, &provider(n, params));
    }
    let live = live("service: com.foo.BarService\nrouters:\n  - type: affinity\n  - type: mesh\n");
    let (_watching, rx) = watch(&live, source(&live, &nacos.url("")));
    wait_route(&live, &[&addr(1), &addr(2)]);
    const AFFINITY: &str = "com.foo.BarService::.affinity-router";
    w.publish(
        AFFINITY,
        "configVersion: v3.1\nscope: service\nkey: com.foo.BarService\nenabled: true\naffinityAware:\n  key: region\n  ratio: 10\n",
    );
    let consumer = routechain::core::Url::parse("consumer://10.9.0.1/com.foo.BarService?region=hz");
    let hz = Request::new().with_consumer(consumer.unwrap());
    wait_route_for(&live, &hz, &[&addr(1)]);
    w.remove(AFFINITY);
    wait_route_for(&live, &hz, &[&addr(1), &addr(2)]);
    const MESH: &str = "demo-provider.MESHAPPRULE";
    w.publish(MESH, "this: [is, not, a mesh rule\n");
    wait_report(
        &rx,
        "bad mesh rule refused",
        |r| matches!(r, Report::Refused { reason, .. } if reason.contains(&format!("dubbo/{MESH}"))),
    );
    w.remove(MESH);
    wait_route(&live, &[&addr(1), &addr(2)]);
}

#[test]
fn namespaces_are_isolated_and_wildcard_references_follow_every_matching_service() {
    let nacos = Nacos::start("namespaces");
    let mut dev = NacosWriter::start(&nacos.address(), "dev");
    let mut public = NacosWriter::start(&nacos.address(), "");
    dev.register("G", &provider(1, "version=1.0&group=a"));
    dev.register("G", &provider(2, "version=2.0&group=b"));
    dev.register("G", &provider(3, "version=1.0&group=c"));
    public.register("G", &provider(4, "version=1.0&group=a"));
    // A rule in the public namespace is not the dev namespace's.
    public.publish(
        "com.foo.BarService:1.0:a.condition-router",
        "conditions: ['=> host = 10.0.0.9']\n",
    );
    let concrete = live(
        "service: com.foo.BarService\ngroup: a\nversion: '1.0'\nrouters:\n  - type: condition\n",
    );
    let (_w1, _rx1) = watch(
        &concrete,
        source(&concrete, &nacos.url("namespace=dev&group=G")),
    );
    wait_route(&concrete, &[&addr(1)]);
    let any_version = live("service: com.foo.BarService\ngroup: a,c\nversion: '*'\nrouters: []\n");
    let (_w2, _rx2) = watch(
        &any_version,
        source(&any_version, &nacos.url("namespace=dev&group=G")),
    );
    wait_route(&any_version, &[&addr(1), &addr(3)]);
    let list = live("service: com.foo.BarService\ngroup: a,b\nversion: '*'\nrouters: []\n");
    let (_w3, _rx3) = watch(&list, source(&list, &nacos.url("namespace=dev&group=G")));
    wait_route(&list, &[&addr(1), &addr(2)]);
    // A service registered later is found by the next look-up.
    dev.register("G", &provider(5, "version=3.0&group=c"));
    wait_route(&any_version, &[&addr(1), &addr(3), &addr(5)]);
    let public_live = live("service: com.foo.BarService\ngroup: a\nversion: '1.0'\nrouters: []\n");
    let (_w4, _rx4) = watch(&public_live, source(&public_live, &nacos.url("group=G")));
    wait_route(&public_live, &[&addr(4)]);
    assert_eq!(concrete.stats().refused(), 0);
}

#[test]
fn a_server_restart_keeps_serving_and_later_changes_apply_and_an_empty_push_is_held_back() {
    let mut nacos = Nacos::start("restart");
    // One provider process each (a Nacos 2 client registers again, after a reconnection,
    // the last instance it registered for a service).
    let mut w = NacosWriter::start(&nacos.address(), "");
    w.register(GROUP, &provider(1, "region=hz"));
    // routechain's own admin (`routechain nacos register`): its client registers again
    // after the restart.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let admin = rt
        .block_on(NacosAdmin::connect(&nacos.url("")))
        .expect("connect to Nacos");
    rt.block_on(admin.register(SERVICE, &provider(2, "region=bj")))
        .unwrap();
    w.publish(
        "com.foo.BarService::.condition-router",
        "conditions: ['=> region = hz']\n",
    );
    let live = live(CHAIN);
    let (_watching, rx) = watch(&live, source(&live, &nacos.url("")));
    wait_route(&live, &[&addr(1)]);
    nacos.restart();
    // Serving all along; a change made after the restart applies, and the admin's
    // instance is back (its client registers it again). The Python SDK 2.0.11 does not
    // register again after rnacos restarts: its provider is registered anew.
    assert_eq!(route(&live, &Request::new()).unwrap(), [addr(1)]);
    w.register(GROUP, &provider(1, "region=hz"));
    w.publish(
        "com.foo.BarService::.condition-router",
        "conditions: ['=> region = bj']\n",
    );
    wait_route(&live, &[&addr(2)]);
    let mut other = NacosWriter::start(&nacos.address(), "");
    other.register(GROUP, &provider(3, "region=bj"));
    wait_route(&live, &[&addr(2), &addr(3)]);
    // Every instance gone (both writers' connections closed): held back, the last list
    // keeps serving.
    drop(w);
    drop(other);
    rt.block_on(admin.unregister(SERVICE, &provider(2, "region=bj")))
        .unwrap();
    wait_report(&rx, "held back", |r| matches!(r, Report::HeldBack { .. }));
    assert!(live.stats().held_back() >= 1);
    wait_route(&live, &[&addr(2), &addr(3)]);
}

#[test]
fn ten_thousand_instances_are_listed() {
    let nacos = Nacos::start("many");
    let mut w = NacosWriter::start(&nacos.address(), "");
    let urls: Vec<String> = (1..=10_000).map(|n| provider(n, "region=hz")).collect();
    w.batch(GROUP, &urls);
    let live = live("service: com.foo.BarService\nrouters: []\n");
    let started = Instant::now();
    let (_watching, _rx) = watch(&live, source(&live, &nacos.url("")));
    while live.service().state().snapshot().providers().len() != 10_000 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{} of 10,000 listed",
            live.service().state().snapshot().providers().len()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    eprintln!("10,000 instances: first state in {:?}", started.elapsed());
    let routed = route(&live, &Request::new()).unwrap();
    assert_eq!(routed.len(), 10_000);
}

/// The same providers and rules in ZooKeeper and in Nacos route every request alike.
#[test]
fn the_same_providers_and_rules_in_zookeeper_and_in_nacos_route_alike() {
    use routechain::live::{RuleKey, ZkAdmin, ZkConfig, ZkSource};

    let zk = super::support::zookeeper::ZooKeeper::start("parity");
    let nacos = Nacos::start("parity");
    let providers: Vec<String> = (1..=12)
        .map(|n| {
            let region = ["hz", "bj", "sh"][n as usize % 3];
            let tag = if n % 4 == 0 { "&dubbo.tag=gray" } else { "" };
            provider(n, &format!("region={region}&zone=z{}{tag}", n % 2))
        })
        .collect();
    let rules = [
        (
            "com.foo.BarService::",
            "condition",
            "conditions:\n  - method = find => region = hz\n  - region != sh => zone = z0\n",
        ),
        (
            "demo-provider",
            "tag",
            "force: false\ntags:\n  - name: blue\n    addresses: [\"10.0.0.1:20880\", \"10.0.0.2:20880\"]\n",
        ),
        (
            "com.foo.BarService::",
            "configurators",
            "key: com.foo.BarService\nscope: service\nconfigs:\n- side: provider\n  addresses: [10.0.0.3:20880]\n  parameters:\n    disabled: true\n",
        ),
    ];
    // ZooKeeper, through routechain's admin (its layout is tested on its own).
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let admin = rt.block_on(ZkAdmin::connect(&zk.address())).unwrap();
    for url in &providers {
        rt.block_on(admin.register_persistent(SERVICE, url))
            .unwrap();
    }
    for (key, kind, text) in rules {
        rt.block_on(admin.put_rule(&RuleKey::new(key, kind), text))
            .unwrap();
    }
    // Nacos, through the Python SDK.
    let mut w = NacosWriter::start(&nacos.address(), "");
    w.batch(GROUP, &providers);
    for (key, kind, text) in rules {
        w.publish(
            &routechain::live::rule_data_id(&RuleKey::new(key, kind)),
            text,
        );
    }
    let from_zk = live(CHAIN);
    let mut zk_config = ZkConfig::for_chain(&from_zk, zk.address());
    zk_config.following.retry_delay = Duration::from_millis(100);
    let (_wz, _rz) = watch(&from_zk, Box::new(ZkSource::new(zk_config)));
    let from_nacos = live(CHAIN);
    let (_wn, _rn) = watch(&from_nacos, source(&from_nacos, &nacos.url("")));
    let requests = [
        Request::new(),
        Request::new().with_method("find"),
        Request::new().with_attachment("dubbo.tag", "blue"),
        Request::new().with_attachment("dubbo.tag", "gray"),
        Request::new()
            .with_method("find")
            .with_attachment("dubbo.tag", "gray"),
    ];
    // Both settled: every rule applied (the disabled provider gone) and 11 providers.
    let settled = |live: &LiveChain| {
        live.service().state().snapshot().providers().len() == 11
            && route(live, &Request::new().with_attachment("dubbo.tag", "blue"))
                .is_ok_and(|r| r == [addr(1), addr(2)])
    };
    let start = Instant::now();
    while !(settled(&from_zk) && settled(&from_nacos)) {
        assert!(
            start.elapsed() < super::PATIENCE,
            "the two sources never settled"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    for request in &requests {
        let a = route(&from_zk, request);
        let b = route(&from_nacos, request);
        assert_eq!(a, b, "{request:?}");
        eprintln!("{request:?} -> {a:?}");
    }
    // One change on both sides: still alike.
    let changed = "conditions:\n  - => region = bj\n";
    rt.block_on(admin.put_rule(&RuleKey::new("com.foo.BarService::", "condition"), changed))
        .unwrap();
    w.publish("com.foo.BarService::.condition-router", changed);
    // region=bj: 1, 4, 7, 10; 1 is tagged blue and 4 gray, so an untagged call has 7 and 10.
    let bj = ["10.0.0.10:20880", "10.0.0.7:20880"];
    wait_route(&from_zk, &bj);
    wait_route(&from_nacos, &bj);
    for request in &requests {
        assert_eq!(
            route(&from_zk, request),
            route(&from_nacos, request),
            "{request:?}"
        );
    }
}

/// `zookeeper://… | nacos://…`: the providers of both registries merged, the rules read from
/// the first (the config center).
#[test]
fn a_zookeeper_and_a_nacos_registry_are_merged() {
    use routechain::live::{RegistryAddress, RegistryOptions, RegistrySource, RuleKey, ZkAdmin};

    let zk = super::support::zookeeper::ZooKeeper::start("merged");
    let nacos = Nacos::start("merged");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let admin = rt.block_on(ZkAdmin::connect(&zk.address())).unwrap();
    rt.block_on(admin.register_persistent(SERVICE, &provider(1, "region=hz")))
        .unwrap();
    rt.block_on(admin.put_rule(
        &RuleKey::new("com.foo.BarService::", "condition"),
        "conditions: ['=> region = hz']\n",
    ))
    .unwrap();
    let mut w = NacosWriter::start(&nacos.address(), "");
    w.register(GROUP, &provider(2, "region=hz"));
    w.register(GROUP, &provider(3, "region=bj"));
    // A rule in Nacos, not the config center: not read.
    w.publish(
        "com.foo.BarService::.condition-router",
        "conditions: ['=> region = bj']\n",
    );
    let live = live(CHAIN);
    let address =
        RegistryAddress::parse(&format!("zookeeper://{} | {}", zk.address(), nacos.url("")))
            .unwrap();
    let options = RegistryOptions {
        protect_empty: true,
        zone: None,
    };
    let source = RegistrySource::for_chain(&address, &live, options);
    let (_watching, _rx) = watch(&live, Box::new(source));
    wait_route(&live, &[&addr(1), &addr(2)]);
    w.register(GROUP, &provider(4, "region=hz"));
    wait_route(&live, &[&addr(1), &addr(2), &addr(4)]);
}
