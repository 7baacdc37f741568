//! Several registries through the library (`RegistryAddress`, `RegistrySource`) against two
//! real ZooKeeper servers: Dubbo's zone-aware choice with the consumer's zone, each
//! registry's change applied as one swap, the rules from the config center alone.

use std::time::Duration;

use routechain::live::{
    RegistryAddress, RegistryOptions, RegistrySource, Report, RuleKey, ZkAdmin,
};

use super::support::zookeeper::ZooKeeper;
use super::{live, wait_report, wait_route, watch};

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

#[test]
fn the_consumers_zone_picks_its_registry_and_each_change_is_one_swap() {
    let (hz, sh) = (ZooKeeper::start("zone-hz"), ZooKeeper::start("zone-sh"));
    let (a, b) = (Admin::connect(&hz.address()), Admin::connect(&sh.address()));
    a.register(1);
    a.register(2);
    b.register(3);
    // The rule of the second registry (not the config center) would leave nothing.
    a.put_rule("host != 10.0.0.2");
    b.put_rule("host = 10.9.9.9");
    let live = live(&format!(
        "service: {SERVICE}\nrouters:\n  - type: condition\n"
    ));
    let address = RegistryAddress::parse(&format!(
        "zookeeper://{}?zone=hz&session=4000 | zookeeper://{}?zone=sh&session=4000",
        hz.address(),
        sh.address()
    ))
    .unwrap();
    assert!(address.zone_aware());
    let options = RegistryOptions {
        protect_empty: false,
        zone: Some("sh".into()),
    };
    let source = RegistrySource::for_chain(&address, &live, options);
    let (_watching, rx) = watch(&live, Box::new(source));
    // The consumer's zone: the second registry alone, under the first one's rule.
    wait_route(&live, &["10.0.0.3:20880"]);
    b.register(4);
    wait_route(&live, &["10.0.0.3:20880", "10.0.0.4:20880"]);
    // The config center's rule arrives on its own read: wait for it, so that the
    // generation below is the settled one.
    wait_report(&rx, "the config center's rule", |r| {
        matches!(r, Report::Applied { .. }) && r.to_string().contains("condition-router added")
    });
    // A change of the registry not serving is read (its status line) and not pushed.
    while rx.try_recv().is_ok() {}
    let generation = live.service().state().generation();
    a.register(5);
    wait_report(&rx, "the first registry's read", |r| {
        matches!(r, Report::Status { source, message }
            if source.contains(&hz.address()) && message.contains("3 registered"))
    });
    std::thread::sleep(Duration::from_millis(300));
    let pushed: Vec<Report> = rx
        .try_iter()
        .filter(|r| matches!(r, Report::Applied { .. } | Report::Ignored { .. }))
        .collect();
    assert!(pushed.is_empty(), "{pushed:?}");
    assert_eq!(live.service().state().generation(), generation);
    // One change of the serving registry: one swap, one generation.
    b.unregister(4);
    let report = wait_report(&rx, "applied", |r| matches!(r, Report::Applied { .. }));
    assert!(
        matches!(report, Report::Applied { generation: g, .. } if g == generation + 1),
        "{report:?}"
    );
    wait_route(&live, &["10.0.0.3:20880"]);
    // Its zone empty, every registry with providers serves, merged.
    b.unregister(3);
    wait_route(&live, &["10.0.0.1:20880", "10.0.0.5:20880"]);
}
