//! Several registries through the library (`RegistryAddress`, `RegistrySource`) against two
//! real ZooKeeper servers: Dubbo's zone-aware choice of one registry per call (preferred,
//! the call's `registry_zone` and `registry_zone_force`, the consumer's zone, a draw by
//! registry weight), each registry's change applied as one swap, the rules from the config
//! center alone.

use std::sync::Arc;
use std::sync::mpsc::Receiver;

use routechain::balance::SelectError;
use routechain::balance::{REGISTRY_ZONE, REGISTRY_ZONE_FORCE};
use routechain::core::{CallState, NoProvider, Request};
use routechain::live::{
    LiveChain, RegistryAddress, RegistryOptions, RegistrySource, Report, RuleKey, ZkAdmin,
};

use super::support::zookeeper::ZooKeeper;
use super::{live, route, wait_report, wait_route, wait_route_for, watch};

const SERVICE: &str = "com.foo.BarService";

/// Writes nodes with routechain's helper, on a runtime of its own.
struct Admin {
    rt: tokio::runtime::Runtime,
    admin: ZkAdmin,
}

impl Admin {
    fn connect(addr: &str) -> Self {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let admin = rt.block_on(ZkAdmin::connect(addr)).expect("connect");
        Admin { rt, admin }
    }
    fn register(&self, n: u8) {
        let url = format!("dubbo://10.0.0.{n}:20880/{SERVICE}?side=provider");
        self.rt
            .block_on(self.admin.register_persistent(SERVICE, &url))
            .unwrap();
    }
    fn unregister(&self, n: u8) {
        let url = format!("dubbo://10.0.0.{n}:20880/{SERVICE}?side=provider");
        assert!(
            self.rt
                .block_on(self.admin.unregister(SERVICE, &url))
                .unwrap()
        );
    }
    fn put_rule(&self, condition: &str) {
        let rule = format!(
            "configVersion: v3.0\nscope: service\nkey: {SERVICE}\nenabled: true\nforce: true\n\
             conditions:\n  - '=> {condition}'\n"
        );
        self.rt
            .block_on(
                self.admin
                    .put_rule(&RuleKey::new(format!("{SERVICE}::"), "condition"), &rule),
            )
            .unwrap();
    }
}

/// A call in `zone` (its `registry_zone` attachment), forced or not.
fn in_zone(zone: &str, force: bool) -> Request {
    let r = Request::new().with_attachment(REGISTRY_ZONE, zone);
    if force {
        r.with_attachment(REGISTRY_ZONE_FORCE, "true")
    } else {
        r
    }
}

/// Follows `address` (a `|` list of registries) for a chain with a condition router.
fn follow(
    address: &str,
    zone: Option<&str>,
) -> (Arc<LiveChain>, routechain::live::Watching, Receiver<Report>) {
    let live = live(&format!(
        "service: {SERVICE}\nrouters:\n  - type: condition\n"
    ));
    let address = RegistryAddress::parse(address).unwrap();
    assert!(address.zone_aware());
    let options = RegistryOptions {
        protect_empty: false,
        zone: zone.map(str::to_string),
    };
    let source = RegistrySource::for_chain(&address, &live, options);
    let (watching, rx) = watch(&live, Box::new(source));
    (live, watching, rx)
}

#[test]
fn the_calls_zone_or_the_consumers_picks_its_registry_per_call() {
    let (hz, sh) = (ZooKeeper::start("zone-hz"), ZooKeeper::start("zone-sh"));
    let (a, b) = (Admin::connect(&hz.address()), Admin::connect(&sh.address()));
    a.register(1);
    a.register(2);
    b.register(3);
    // The rule of the second registry (not the config center) would leave nothing.
    a.put_rule("host != 10.0.0.2");
    b.put_rule("host = 10.9.9.9");
    let (live, _watching, rx) = follow(
        &format!(
            "zookeeper://{}?zone=hz&session=4000 | zookeeper://{}?zone=sh&session=4000",
            hz.address(),
            sh.address()
        ),
        Some("sh"),
    );
    // The consumer's zone: the second registry, under the config center's rule.
    wait_route(&live, &["10.0.0.3:20880"]);
    wait_report(&rx, "the config center's rule", |r| {
        matches!(r, Report::Applied { .. }) && r.to_string().contains("condition-router added")
    });
    // The call's zone: the first registry's providers, routed by the rule.
    wait_route_for(&live, &in_zone("hz", false), &["10.0.0.1:20880"]);
    // Both lists are served: a change of either is one swap, seen by its zone's calls.
    while rx.try_recv().is_ok() {}
    let generation = live.service().state().generation();
    b.register(4);
    let report = wait_report(&rx, "applied", |r| matches!(r, Report::Applied { .. }));
    assert!(
        matches!(report, Report::Applied { generation: g, .. } if g == generation + 1),
        "{report:?}"
    );
    wait_route(&live, &["10.0.0.3:20880", "10.0.0.4:20880"]);
    a.register(5);
    wait_route_for(
        &live,
        &in_zone("hz", true),
        &["10.0.0.1:20880", "10.0.0.5:20880"],
    );
    // A zone no registry has: forced, a clear error; else a draw among the registries.
    let unknown = route(&live, &in_zone("bj", true));
    assert_eq!(unknown, Err(SelectError::ZoneForced { zone: None }));
    assert_eq!(
        unknown.unwrap_err().to_string(),
        "no provider available: no registry of the call's registry_zone has providers \
         (registry_zone_force=true)"
    );
    assert!(route(&live, &in_zone("bj", false)).is_ok());
    // The consumer's zone emptied: its calls are drawn among the registries with
    // providers; a call forced into it fails.
    b.unregister(3);
    b.unregister(4);
    wait_route(&live, &["10.0.0.1:20880", "10.0.0.5:20880"]);
    let emptied = route(&live, &in_zone("sh", true));
    assert_eq!(
        emptied,
        Err(SelectError::ZoneForced {
            zone: Some("sh".into())
        })
    );
    assert_eq!(
        emptied.unwrap_err().to_string(),
        "no provider available: no registry of zone sh has providers (registry_zone_force=true)"
    );
}

#[test]
fn a_preferred_registry_serves_while_it_has_providers() {
    let (one, two) = (ZooKeeper::start("pref-1"), ZooKeeper::start("pref-2"));
    let (a, b) = (
        Admin::connect(&one.address()),
        Admin::connect(&two.address()),
    );
    a.register(1);
    b.register(2);
    let (live, _watching, _rx) = follow(
        &format!(
            "zookeeper://{}?zone=hz&session=4000 | zookeeper://{}?preferred=true&session=4000",
            one.address(),
            two.address()
        ),
        Some("hz"),
    );
    // Preferred first, before the consumer's zone and the call's.
    wait_route(&live, &["10.0.0.2:20880"]);
    wait_route_for(&live, &in_zone("hz", true), &["10.0.0.2:20880"]);
    // Emptied, it is passed over: the zone's registry serves.
    b.unregister(2);
    wait_route(&live, &["10.0.0.1:20880"]);
    b.register(3);
    wait_route(&live, &["10.0.0.3:20880"]);
}

/// How many of `calls` calls route to the providers at `first` (every routed set is
/// either it or the other registry's).
fn calls_to(live: &LiveChain, first: &[&str], calls: u32, seed: u64) -> u32 {
    let published = live.service().load();
    let state = published.state();
    let mut call = CallState::seeded(seed);
    let mut to_first = 0;
    for _ in 0..calls {
        published
            .route(&Request::new(), &mut call, None)
            .expect("routes");
        let got: Vec<&str> = call
            .candidates
            .iter()
            .map(|i| state.snapshot().providers()[i].address())
            .collect();
        if first.iter().all(|a| got.contains(a)) && got.len() == first.len() {
            to_first += 1;
        }
    }
    to_first
}

#[test]
fn a_weighted_draw_splits_by_registry_weight_and_leaves_an_emptied_registry() {
    let (one, two) = (ZooKeeper::start("weight-1"), ZooKeeper::start("weight-2"));
    let (a, b) = (
        Admin::connect(&one.address()),
        Admin::connect(&two.address()),
    );
    a.register(1);
    a.register(2);
    b.register(3);
    let (live, _watching, _rx) = follow(
        &format!(
            "zookeeper://{}?weight=20&session=4000 | zookeeper://{}?weight=80&session=4000",
            one.address(),
            two.address()
        ),
        None,
    );
    // Both registries' providers known (a call routes to one registry's alone).
    let both = std::time::Instant::now();
    while live.service().state().snapshot().len() < 3 {
        assert!(both.elapsed() < super::PATIENCE, "the lists never merged");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let first = ["10.0.0.1:20880", "10.0.0.2:20880"];
    // Binomial(10,000, 0.2): mean 2,000, standard deviation 40; five of them either side.
    let n = 10_000;
    let to_first = calls_to(&live, &first, n, 5);
    assert!(
        (i64::from(to_first) - 2_000).abs() < 200,
        "{to_first} of {n} calls to the registry of weight 20"
    );
    // The heavier registry emptied (no protection): every call goes to the other.
    b.unregister(3);
    wait_route(&live, &first);
    assert_eq!(calls_to(&live, &first, 1_000, 6), 1_000);
}

#[test]
fn no_provider_is_served_before_the_config_centers_rules() {
    let (mut center, other) = (ZooKeeper::start("center-late"), ZooKeeper::start("other"));
    let (a, b) = (
        Admin::connect(&center.address()),
        Admin::connect(&other.address()),
    );
    a.register(1);
    a.put_rule("host != 10.0.0.2");
    b.register(2);
    b.register(3);
    // The config center is down when the chain starts following.
    center.stop();
    let live = live(&format!(
        "service: {SERVICE}\nrouters:\n  - type: condition\n"
    ));
    let address = RegistryAddress::parse(&format!(
        "zookeeper://{}?session=4000 | zookeeper://{}?session=4000",
        center.address(),
        other.address()
    ))
    .unwrap();
    let source = RegistrySource::for_chain(&address, &live, RegistryOptions::default());
    let (_watching, rx) = watch(&live, Box::new(source));
    // The other registry's list is kept, said so, and nothing is served.
    wait_report(&rx, "the wait for the config center", |r| {
        matches!(r, Report::Status { .. }) && r.to_string().contains("kept until the config center")
    });
    assert_eq!(
        route(&live, &Request::new()),
        Err(SelectError::NoProvider(NoProvider::EmptySnapshot))
    );
    // The config center's first read brings its rule and the merged list in one swap:
    // 10.0.0.2 is never served.
    center.resume();
    let applied = wait_report(&rx, "the first state", |r| {
        matches!(r, Report::Applied { .. })
    });
    assert!(
        applied.to_string().contains("condition-router added"),
        "{applied}"
    );
    assert_eq!(
        route(&live, &Request::new()),
        Ok(vec![
            "10.0.0.1:20880".to_string(),
            "10.0.0.3:20880".to_string()
        ])
    );
}
