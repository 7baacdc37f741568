//! The ZooKeeper source against a real ZooKeeper (started by the test) in Dubbo's layout.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use routechain::core::{CallState, Request};
use routechain::live::{Report, RuleKey, ServiceKey, ZkAdmin, ZkConfig, ZkSource};
use zookeeper_client::{Acls, Client, CreateMode};

use super::support::zookeeper::ZooKeeper;
use super::{live, wait_report, wait_route, wait_route_for, watch};

const SERVICE: &str = "com.foo.BarService";

/// Writes nodes at literal paths, with the bare ZooKeeper client (to show the layout is
/// Dubbo's, independently of routechain's own helpers).
pub(super) struct Raw {
    rt: tokio::runtime::Runtime,
    client: Client,
}

impl Raw {
    pub(super) fn connect(addr: &str) -> Self {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let client = rt
            .block_on(Client::connect(addr))
            .expect("connect to ZooKeeper");
        Raw { rt, client }
    }

    pub(super) fn put(&self, path: &str, data: &str) {
        let options = CreateMode::Persistent.with_acls(Acls::anyone_all());
        self.rt.block_on(async {
            let (parent, _) = path.rsplit_once('/').unwrap();
            self.client.mkdir(parent, &options).await.unwrap();
            match self.client.create(path, data.as_bytes(), &options).await {
                Ok(_) => {}
                Err(zookeeper_client::Error::NodeExists) => {
                    self.client
                        .set_data(path, data.as_bytes(), None)
                        .await
                        .unwrap();
                }
                Err(e) => panic!("create {path}: {e}"),
            }
        });
    }

    pub(super) fn delete(&self, path: &str) {
        self.rt
            .block_on(self.client.delete(path, None))
            .unwrap_or_else(|e| panic!("delete {path}: {e}"));
    }
}

/// routechain's own helper (what `routechain zk` uses).
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
        let admin = rt
            .block_on(ZkAdmin::connect(addr))
            .expect("connect to ZooKeeper");
        Admin { rt, admin }
    }
    fn put_rule(&self, key: &str, router_type: &str, text: &str) {
        self.rt
            .block_on(self.admin.put_rule(&RuleKey::new(key, router_type), text))
            .unwrap();
    }
    fn delete_rule(&self, key: &str, router_type: &str) {
        assert!(
            self.rt
                .block_on(self.admin.delete_rule(&RuleKey::new(key, router_type)))
                .unwrap()
        );
    }
    fn register(&self, url: &str) {
        self.rt.block_on(self.admin.register(SERVICE, url)).unwrap();
    }
    fn unregister(&self, url: &str) {
        assert!(
            self.rt
                .block_on(self.admin.unregister(SERVICE, url))
                .unwrap()
        );
    }
}

fn provider(n: u8, params: &str) -> String {
    format!("dubbo://10.0.0.{n}:20880/{SERVICE}?{params}")
}

fn source(live: &routechain::live::LiveChain, zk: &ZooKeeper) -> Box<ZkSource> {
    source_with_session(live, zk, Duration::from_secs(4))
}

fn source_with_session(
    live: &routechain::live::LiveChain,
    zk: &ZooKeeper,
    session_timeout: Duration,
) -> Box<ZkSource> {
    let mut config = ZkConfig::for_chain(live, zk.address());
    config.session_timeout = session_timeout;
    config.following.retry_delay = Duration::from_millis(100);
    Box::new(ZkSource::new(config))
}

const CHAIN: &str = "
service: com.foo.BarService
routers:
  - type: condition              # follows com.foo.BarService::.condition-router
  - type: condition              # follows demo-app.condition-router
    application: demo-app
  - type: tag                    # follows demo-provider.tag-router
    application: demo-provider
  - type: condition              # inline rule: kept, never subscribes
    rule:
      conditions: ['=> zone = a']
";

const ALL: [&str; 3] = ["10.0.0.1:20880", "10.0.0.2:20880", "10.0.0.3:20880"];

#[test]
fn dubbo_condition_and_tag_rules_and_providers_in_dubbos_layout_take_effect_and_deleted_rules_clear()
 {
    let zk = ZooKeeper::start("layout");
    let raw = Raw::connect(&zk.address());
    // Providers as Dubbo registers them: URL-encoded children of /dubbo/<interface>/providers.
    for child in [
        "dubbo%3A%2F%2F10.0.0.1%3A20880%2Fcom.foo.BarService%3Fregion%3Dhz%26zone%3Da",
        "dubbo%3A%2F%2F10.0.0.2%3A20880%2Fcom.foo.BarService%3Fregion%3Dbj%26zone%3Da",
        "dubbo%3A%2F%2F10.0.0.3%3A20880%2Fcom.foo.BarService%3Fregion%3Dhz%26zone%3Da%26env%3Dgray",
        "dubbo%3A%2F%2F10.0.0.4%3A20880%2Fcom.foo.BarService%3Fregion%3Dhz%26zone%3Db",
        // Another version and a disabled provider: not for a consumer of `com.foo.BarService`.
        "dubbo%3A%2F%2F10.0.0.5%3A20880%2Fcom.foo.BarService%3Fversion%3D2.0.0%26zone%3Da",
        "dubbo%3A%2F%2F10.0.0.6%3A20880%2Fcom.foo.BarService%3Fenabled%3Dfalse%26zone%3Da",
    ] {
        raw.put(&format!("/dubbo/com.foo.BarService/providers/{child}"), "");
    }
    // A service rule, as Dubbo Admin writes it, exists before the start.
    const SERVICE_RULE: &str = "/dubbo/config/dubbo/com.foo.BarService::.condition-router";
    raw.put(
        SERVICE_RULE,
        "configVersion: v3.0\nscope: service\nkey: com.foo.BarService\nenabled: true\n\
         force: false\nruntime: true\nconditions:\n  - => region = hz\n",
    );
    let live = live(CHAIN);
    assert_eq!(
        live.subscriptions(),
        [
            RuleKey::new("com.foo.BarService::", "condition"),
            RuleKey::new("demo-app", "condition"),
            RuleKey::new("demo-provider", "tag"),
            RuleKey::new("com.foo.BarService::", RuleKey::CONFIGURATORS),
            RuleKey::new("com.foo.BarService", RuleKey::LEGACY_OVERRIDES),
        ]
    );
    let (_watching, rx) = watch(&live, source(&live, &zk));
    wait_route(&live, &["10.0.0.1:20880", "10.0.0.3:20880"]);

    // An application-scope condition rule: added.
    const APP_RULE: &str = "/dubbo/config/dubbo/demo-app.condition-router";
    raw.put(
        APP_RULE,
        "configVersion: v3.0\nscope: application\nkey: demo-app\nconditions:\n  - => env = gray\n",
    );
    wait_route(&live, &["10.0.0.3:20880"]);
    wait_report(
        &rx,
        "app rule added",
        |r| matches!(r, Report::Applied { change, .. } if change == "rule demo-app.condition-router added"),
    );
    // The service rule: modified (its empty match on the app rule's side is ignored, as
    // force is false there).
    raw.put(
        SERVICE_RULE,
        "configVersion: v3.0\nscope: service\nkey: com.foo.BarService\nforce: true\n\
         conditions:\n  - => region = bj\n",
    );
    wait_route(&live, &["10.0.0.2:20880"]);
    wait_report(&rx, "service rule modified", |r| {
        matches!(r, Report::Applied { change, .. }
            if change == "rule com.foo.BarService::.condition-router modified")
    });
    // Deleted nodes clear the rules.
    raw.delete(SERVICE_RULE);
    wait_route(&live, &["10.0.0.3:20880"]);
    wait_report(&rx, "service rule deleted", |r| {
        matches!(r, Report::Applied { change, .. }
            if change == "rule com.foo.BarService::.condition-router deleted")
    });
    raw.delete(APP_RULE);
    wait_route(&live, &ALL);

    // A dynamic tag rule under the provider application's key.
    const TAG_RULE: &str = "/dubbo/config/dubbo/demo-provider.tag-router";
    raw.put(
        TAG_RULE,
        "configVersion: v3.0\nforce: false\nenabled: true\nkey: demo-provider\ntags:\n  \
         - name: gray\n    addresses: [\"10.0.0.3:20880\"]\n",
    );
    // An untagged request never reaches a provider of a dynamic tag; a gray one does.
    wait_route(&live, &["10.0.0.1:20880", "10.0.0.2:20880"]);
    let gray = Request::new().with_attachment("dubbo.tag", "gray");
    wait_route_for(&live, &gray, &["10.0.0.3:20880"]);
    raw.delete(TAG_RULE);
    wait_route(&live, &ALL);

    // A node for a key nobody follows changes nothing.
    raw.put(
        "/dubbo/config/dubbo/other-app.condition-router",
        "conditions: ['=> region = bj']\n",
    );
    std::thread::sleep(Duration::from_millis(300));
    wait_route(&live, &ALL);
    assert_eq!(live.stats().refused(), 0);
}

#[test]
fn a_bad_rule_or_provider_is_refused_and_the_previous_state_keeps_serving() {
    let zk = ZooKeeper::start("refuse");
    let admin = Admin::connect(&zk.address());
    for (n, params) in [(1, "region=hz&zone=a"), (2, "region=bj&zone=a")] {
        admin.register(&provider(n, params));
    }
    let key = ServiceKey::parse(SERVICE).rule_key();
    admin.put_rule(&key, "condition", "conditions: ['=> region = hz']\n");
    let live = live(CHAIN);
    let (_watching, rx) = watch(&live, source(&live, &zk));
    wait_route(&live, &["10.0.0.1:20880"]);

    let bad_rules = [
        ("conditions: ['=> region = hz'\n", "expected ',' or ']'"),
        ("", "the rule document is empty"),
        ("- => region = hz\n", "a rule document must be a mapping"),
        ("conditions: []\n", "`conditions` is empty"),
        (
            "configVersion: v9.9\nconditions: ['=> region = bj']\n",
            "unknown configVersion \"v9.9\"",
        ),
        (
            "force: maybe\nconditions: ['=> region = bj']\n",
            "force: must be true or false",
        ),
    ];
    for (i, (text, reason)) in bad_rules.iter().enumerate() {
        admin.put_rule(&key, "condition", text);
        let report = wait_report(&rx, "refusal", |r| matches!(r, Report::Refused { .. }));
        let Report::Refused {
            change,
            reason: why,
        } = report
        else {
            unreachable!()
        };
        assert_eq!(
            change,
            "rule com.foo.BarService::.condition-router modified"
        );
        assert!(why.contains(reason), "{text:?}: {why}");
        assert!(
            why.contains("zookeeper:/dubbo/config/dubbo/com.foo.BarService::.condition-router:"),
            "{why}"
        );
        assert_eq!(live.stats().refused(), i as u64 + 1);
        wait_route(&live, &["10.0.0.1:20880"]);
    }
    // A good rule applies again.
    admin.put_rule(&key, "condition", "conditions: ['=> region = bj']\n");
    wait_route(&live, &["10.0.0.2:20880"]);

    // A provider whose URL does not parse: skipped alone (the others keep serving).
    let applied = live.stats().applied();
    admin.register("dubbo://10.0.0.9:notaport/com.foo.BarService?region=bj&zone=a");
    let report = wait_report(&rx, "provider skipped", |r| {
        matches!(r, Report::Skipped { .. })
    });
    let Report::Skipped { location, reason } = report else {
        unreachable!()
    };
    assert!(
        location
            .starts_with("/dubbo/com.foo.BarService/providers/dubbo%3A%2F%2F10.0.0.9%3Anotaport"),
        "{location}"
    );
    assert!(reason.contains("invalid port \"notaport\""), "{reason}");
    assert_eq!(live.stats().skipped(), 1);
    assert_eq!(live.stats().applied(), applied);
    wait_route(&live, &["10.0.0.2:20880"]);
    admin.unregister("dubbo://10.0.0.9:notaport/com.foo.BarService?region=bj&zone=a");
    admin.register(&provider(3, "region=bj&zone=a"));
    wait_route(&live, &["10.0.0.2:20880", "10.0.0.3:20880"]);
    // Deleting the node clears the rule.
    admin.delete_rule(&key, "condition");
    wait_route(
        &live,
        &["10.0.0.1:20880", "10.0.0.2:20880", "10.0.0.3:20880"],
    );
}

#[test]
fn providers_registered_and_removed_show_up_and_an_empty_push_is_held_back() {
    let zk = ZooKeeper::start("providers");
    let admin = Admin::connect(&zk.address());
    let live = live("service: com.foo.BarService\nrouters: []\n");
    let (_watching, rx) = watch(&live, source(&live, &zk));
    wait_report(
        &rx,
        "connected",
        |r| matches!(r, Report::Status { message, .. } if message.starts_with("connected")),
    );
    admin.register(&provider(1, "zone=a"));
    wait_route(&live, &["10.0.0.1:20880"]);
    admin.register(&provider(2, "zone=a"));
    admin.register(&provider(3, "zone=a"));
    wait_route(
        &live,
        &["10.0.0.1:20880", "10.0.0.2:20880", "10.0.0.3:20880"],
    );
    admin.unregister(&provider(2, "zone=a"));
    wait_route(&live, &["10.0.0.1:20880", "10.0.0.3:20880"]);
    // Everything gone at once: held back, the last list keeps serving.
    admin.unregister(&provider(1, "zone=a"));
    wait_route(&live, &["10.0.0.3:20880"]);
    admin.unregister(&provider(3, "zone=a"));
    let report = wait_report(&rx, "held back", |r| matches!(r, Report::HeldBack { .. }));
    assert!(
        matches!(report, Report::HeldBack { serving: 1, .. }),
        "{report:?}"
    );
    assert_eq!(live.stats().held_back(), 1);
    wait_route(&live, &["10.0.0.3:20880"]);
    admin.register(&provider(4, "zone=a"));
    wait_route(&live, &["10.0.0.4:20880"]);
}

#[test]
fn empty_push_protection_can_be_turned_off() {
    let zk = ZooKeeper::start("allow-empty");
    let admin = Admin::connect(&zk.address());
    admin.register(&provider(1, "zone=a"));
    let file = routechain::rules::ChainFile::parse(
        "t.yaml",
        "service: com.foo.BarService\nrouters: []\n",
        None,
    )
    .unwrap();
    let options = routechain::live::LiveOptions {
        protect_empty: false,
        ..Default::default()
    };
    let live =
        Arc::new(routechain::live::LiveChain::new(file, routechain::registry(), options).unwrap());
    let (_watching, _rx) = watch(&live, source(&live, &zk));
    wait_route(&live, &["10.0.0.1:20880"]);
    admin.unregister(&provider(1, "zone=a"));
    super::support::wait_for(super::PATIENCE, "empty provider list", || {
        live.service().state().snapshot().is_empty().then_some(())
    });
    assert_eq!(live.stats().held_back(), 0);
}

/// Routes continuously from `threads` threads until dropped; counts calls and failures.
struct Traffic {
    stop: Arc<AtomicBool>,
    calls: Arc<AtomicU64>,
    failures: Arc<AtomicU64>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Traffic {
    fn start(live: &Arc<routechain::live::LiveChain>, threads: usize) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let calls = Arc::new(AtomicU64::new(0));
        let failures = Arc::new(AtomicU64::new(0));
        let threads = (0..threads)
            .map(|_| {
                let (live, stop, calls, failures) =
                    (live.clone(), stop.clone(), calls.clone(), failures.clone());
                std::thread::spawn(move || {
                    let request = Request::new();
                    let mut call = CallState::seeded(3);
                    while !stop.load(Ordering::Relaxed) {
                        let state = live.service().state();
                        if state.route(&request, &mut call).is_err() {
                            failures.fetch_add(1, Ordering::Relaxed);
                        }
                        calls.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        Traffic {
            stop,
            calls,
            failures,
            threads,
        }
    }
    fn finish(self) -> (u64, u64) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            t.join().unwrap();
        }
        (
            self.calls.load(Ordering::Relaxed),
            self.failures.load(Ordering::Relaxed),
        )
    }
}

/// Seeds two providers and a service rule selecting region hz.
fn seed_restart(zk: &ZooKeeper) {
    let admin = Admin::connect(&zk.address());
    for (n, params) in [(1, "region=hz&zone=a"), (2, "region=bj&zone=a")] {
        admin.register(&provider(n, params));
    }
    let key = ServiceKey::parse(SERVICE).rule_key();
    admin.put_rule(&key, "condition", "conditions: ['=> region = hz']\n");
}

#[test]
fn a_zookeeper_restart_keeps_the_last_good_state_then_the_session_resumes_and_changes_apply() {
    let mut zk = ZooKeeper::start("restart");
    seed_restart(&zk);
    let key = ServiceKey::parse(SERVICE).rule_key();
    let live = live(CHAIN);
    // A session long enough to outlive the restart (the client gives up after 1.4 times it).
    let (_watching, rx) = watch(
        &live,
        source_with_session(&live, &zk, Duration::from_secs(15)),
    );
    wait_route(&live, &["10.0.0.1:20880"]);
    let traffic = Traffic::start(&live, 2);

    zk.stop();
    wait_report(
        &rx,
        "disconnected",
        |r| matches!(r, Report::Status { message, .. } if message.starts_with("disconnected")),
    );
    std::thread::sleep(Duration::from_millis(500));
    wait_route(&live, &["10.0.0.1:20880"]);
    zk.resume();
    // Same session: reconnected, re-watched, re-read.
    wait_report(
        &rx,
        "reconnected",
        |r| matches!(r, Report::Status { message, .. } if message.starts_with("reconnected")),
    );
    let admin = Admin::connect(&zk.address());
    admin.put_rule(&key, "condition", "conditions: ['=> region = bj']\n");
    wait_route(&live, &["10.0.0.2:20880"]);
    admin.register(&provider(3, "region=bj&zone=a"));
    wait_route(&live, &["10.0.0.2:20880", "10.0.0.3:20880"]);

    let (calls, failures) = traffic.finish();
    assert!(calls > 0);
    assert_eq!(failures, 0, "calls failed while ZooKeeper was down");
    assert_eq!(live.stats().refused(), 0);
}

#[test]
fn after_a_session_expiry_a_new_session_rereads_and_rewatches_while_the_last_good_state_serves() {
    let mut zk = ZooKeeper::start("expiry");
    seed_restart(&zk);
    let key = ServiceKey::parse(SERVICE).rule_key();
    let live = live(CHAIN);
    let session = Duration::from_secs(2);
    let (_watching, rx) = watch(&live, source_with_session(&live, &zk, session));
    wait_route(&live, &["10.0.0.1:20880"]);
    let traffic = Traffic::start(&live, 2);

    // An outage longer than the session (the client declares it expired after 1.4 times
    // the session timeout without an answer).
    zk.stop();
    wait_report(
        &rx,
        "session expired",
        |r| matches!(r, Report::Status { message, .. } if message.contains("session expired")),
    );
    std::thread::sleep(session);
    wait_route(&live, &["10.0.0.1:20880"]);
    zk.resume();
    // The source keeps retrying, opens a new session, re-reads: a change made while it
    // was away is picked up, and the new watches see the next one.
    let admin = Admin::connect(&zk.address());
    admin.register(&provider(3, "region=hz&zone=a"));
    wait_route(&live, &["10.0.0.1:20880", "10.0.0.3:20880"]);
    wait_report(
        &rx,
        "new session",
        |r| matches!(r, Report::Status { message, .. } if message.starts_with("connected")),
    );
    admin.put_rule(&key, "condition", "conditions: ['=> region = bj']\n");
    wait_route(&live, &["10.0.0.2:20880"]);

    let (calls, failures) = traffic.finish();
    assert!(calls > 0);
    assert_eq!(failures, 0, "calls failed while ZooKeeper was down");
    assert_eq!(live.stats().refused(), 0);
}

#[test]
fn a_thousand_rule_updates_under_concurrent_routing_never_fail_or_tear() {
    const PROVIDERS: u8 = 8;
    const UPDATES: usize = 1000;
    let zk = ZooKeeper::start("thousand");
    let admin = Admin::connect(&zk.address());
    for n in 0..PROVIDERS {
        admin.register(&provider(n + 1, &format!("v={n}")));
    }
    let key = ServiceKey::parse(SERVICE).rule_key();
    // Version k selects provider k % 7 (the last version differs from the first); `force`
    // makes an empty match an empty result.
    let rule = |version: usize| {
        format!(
            "configVersion: v3.0\nscope: service\nforce: true\nconditions:\n  - => v = {}\n",
            version % 7
        )
    };
    admin.put_rule(&key, "condition", &rule(0));
    // Two entries follow the same node: both must change in the same swap. A call that
    // saw one entry at version a and the other at version b != a would select nothing.
    let live =
        live("service: com.foo.BarService\nrouters:\n  - type: condition\n  - type: condition\n");
    let (_watching, _rx) = watch(&live, source(&live, &zk));
    wait_route(&live, &["10.0.0.1:20880"]);

    let stop = Arc::new(AtomicBool::new(false));
    let routers: Vec<_> = (0..3)
        .map(|_| {
            let (live, stop) = (live.clone(), stop.clone());
            std::thread::spawn(move || {
                // (generation, selected provider index) of every call.
                let mut seen: Vec<(u64, usize)> = Vec::new();
                let mut failed = 0u64;
                let request = Request::new();
                let mut call = CallState::seeded(5);
                while !stop.load(Ordering::Relaxed) {
                    let state = live.service().state();
                    match state.route(&request, &mut call) {
                        Ok(()) => {
                            let picked: Vec<usize> = call.candidates.iter().collect();
                            assert_eq!(picked.len(), 1, "torn or wrong result: {picked:?}");
                            let v = state.snapshot().providers()[picked[0]]
                                .get("v")
                                .and_then(|v| v.parse().ok())
                                .expect("v param");
                            assert_eq!(v, picked[0], "index and rule version disagree");
                            if seen.last() != Some(&(state.generation(), v)) {
                                seen.push((state.generation(), v));
                            }
                        }
                        Err(_) => failed += 1,
                    }
                }
                (seen, failed)
            })
        })
        .collect();
    for version in 1..=UPDATES {
        admin.put_rule(&key, "condition", &rule(version));
    }
    let last = format!("10.0.0.{}:20880", UPDATES % 7 + 1);
    wait_route(&live, &[last.as_str()]);
    stop.store(true, Ordering::Relaxed);
    let mut by_generation = std::collections::HashMap::new();
    let mut generations = std::collections::BTreeSet::new();
    for t in routers {
        let (seen, failed) = t.join().expect("no routing thread panicked");
        assert_eq!(failed, 0, "calls failed during updates");
        for pair in seen.windows(2) {
            assert!(pair[0].0 <= pair[1].0, "generation went back: {pair:?}");
        }
        for (generation, v) in seen {
            generations.insert(generation);
            let first = *by_generation.entry(generation).or_insert(v);
            assert_eq!(first, v, "generation {generation} gave two answers");
        }
    }
    eprintln!(
        "{} generations seen by routing threads, {} swaps applied",
        generations.len(),
        live.stats().applied()
    );
    assert!(generations.len() > 1, "routing never saw an update");
    assert_eq!(live.stats().refused(), 0);
    // Every update is applied (or coalesced when ZooKeeper sent one event for several).
    assert!(live.stats().applied() >= 2);
    let final_rule = admin
        .rt
        .block_on(
            admin
                .admin
                .get_rule(&RuleKey::new(key.clone(), "condition")),
        )
        .unwrap();
    assert_eq!(final_rule.as_deref(), Some(rule(UPDATES).as_str()));
}
