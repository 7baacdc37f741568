//! Real gRPC calls through the layer: real tonic providers on 127.0.0.1 registered in a real
//! ZooKeeper (started by the test) in Dubbo's layout, rules written there and followed live
//! by a `ZkSource`; the tonic client is `GreeterClient::new(route_service)`.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::greeter::HelloRequest;
use common::greeter::greeter_client::GreeterClient;
use common::{Provider, SERVICE, who};
use routechain::live::{LiveChain, LiveOptions, RuleKey, Watching, ZkAdmin, ZkConfig, ZkSource};
use routechain::rules::ChainFile;
use routechain_testkit::zookeeper::ZooKeeper;
use routechain_tower::{HttpConnector, RouteAttributes, RouteLayer, RouteService, RoutedTo};
use tower_layer::Layer;

const CHAIN: &str = r#"
service: "*/helloworld.Greeter"   # every Dubbo group: the group router picks one per call
consumer: consumer://127.0.0.1/helloworld.Greeter?application=web&region=beijing&idc=mt
load_balance: roundrobin
retries: 2
skip_degraded: true
health: {failure_threshold: 2, cooldown: 60s}
routers:
  - type: tag          # static tags (the providers' dubbo.tag param)
  - type: condition    # follows helloworld.Greeter::*.condition-router in ZooKeeper
  - type: group        # the request's `group` attribute
  - type: idc-weight   # follows helloworld.Greeter::*.idc-weight-router in ZooKeeper
"#;

/// How long a change may take to reach the calls.
const PATIENCE: Duration = Duration::from_secs(15);

type Client = GreeterClient<RouteService<HttpConnector>>;

struct Setup {
    _zk: ZooKeeper,
    admin: ZkAdmin,
    live: Arc<LiveChain>,
    _watching: Watching,
    providers: Vec<Provider>,
    client: Client,
}

/// ZooKeeper, the providers (registered there), the live chain following it, the client.
async fn setup(name: &str, layout: &[(&str, &str)]) -> Setup {
    let zk = ZooKeeper::start(name);
    let admin = ZkAdmin::connect(&zk.address())
        .await
        .expect("connect to ZooKeeper");
    let mut providers = Vec::new();
    for (name, params) in layout {
        let p = Provider::start(name, params).await;
        admin.register(SERVICE, &p.url).await.expect("register");
        providers.push(p);
    }
    let file = ChainFile::parse("tower.chain.yaml", CHAIN, None).expect("chain parses");
    let live = Arc::new(
        LiveChain::new(file, routechain::registry(), LiveOptions::default()).expect("chain builds"),
    );
    let mut config = ZkConfig::for_chain(&live, zk.address());
    config.following.retry_delay = Duration::from_millis(100);
    let watching = live
        .watch(Box::new(ZkSource::new(config)), |r| {
            eprintln!("report: {r}")
        })
        .expect("the ZooKeeper source starts");
    let deadline = Instant::now() + PATIENCE;
    while live.service().state().snapshot().len() != layout.len() {
        assert!(
            Instant::now() < deadline,
            "the providers never arrived from ZooKeeper"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let channel = RouteLayer::new(live.service().clone()).layer(HttpConnector::new());
    Setup {
        _zk: zk,
        admin,
        live,
        _watching: watching,
        providers,
        client: GreeterClient::new(channel),
    }
}

fn hello(
    group: Option<&str>,
    tag: Option<&str>,
    argument: Option<&str>,
) -> tonic::Request<HelloRequest> {
    let mut request = tonic::Request::new(HelloRequest {
        name: "test".into(),
    });
    let mut attributes = RouteAttributes::new();
    if let Some(g) = group {
        attributes = attributes.with("group", g);
    }
    if let Some(a) = argument {
        attributes = attributes.with_argument(serde_json::json!(a));
    }
    request.extensions_mut().insert(attributes);
    if let Some(t) = tag {
        request
            .metadata_mut()
            .insert("dubbo-tag", t.parse().unwrap());
    }
    request
}

/// Sends `n` calls; counts the answering providers by name.
async fn count(
    client: &mut Client,
    n: usize,
    request: impl Fn() -> tonic::Request<HelloRequest>,
) -> BTreeMap<String, u64> {
    let mut by = BTreeMap::new();
    for _ in 0..n {
        let reply = client.say_hello(request()).await.expect("call answered");
        *by.entry(who(&reply)).or_default() += 1;
    }
    by
}

fn names(by: &BTreeMap<String, u64>) -> Vec<&str> {
    by.keys().map(String::as_str).collect()
}

/// Calls until the answering set is `expected` (a live change has reached the calls).
async fn wait_for(
    client: &mut Client,
    expected: &[&str],
    request: impl Fn() -> tonic::Request<HelloRequest>,
) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let by = count(client, 40, &request).await;
        if names(&by) == expected {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "calls never reached only {expected:?}; last {by:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

const LAYOUT: [(&str, &str); 7] = [
    ("mt-user-1", "region=beijing&idc=mt&group=user"),
    ("mt-user-2", "region=beijing&idc=mt&group=user"),
    ("mt-order", "region=beijing&idc=mt&group=order"),
    ("zf-user", "region=beijing&idc=zf&group=user"),
    ("zf-order", "region=beijing&idc=zf&group=order"),
    ("mt-gray", "region=beijing&idc=mt&group=user&dubbo.tag=gray"),
    ("sh-user", "region=shanghai&idc=sh&group=user"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tag_condition_group_and_idc_routing_of_real_grpc_calls_follow_zookeeper() {
    let mut s = setup("tower-routing", &LAYOUT).await;
    let key = |t: &str| {
        s.live
            .subscriptions()
            .into_iter()
            .find(|k| k.router_type == t)
            .unwrap_or_else(|| panic!("the chain subscribes to a {t} rule"))
    };
    let (condition, idc): (RuleKey, RuleKey) = (key("condition"), key("idc-weight"));

    // Group: the attribute picks the group; no rule anywhere yet.
    let by = count(&mut s.client, 60, || hello(Some("order"), None, None)).await;
    assert_eq!(names(&by), ["mt-order", "zf-order"], "{by:?}");

    // Tag: only tagged calls reach the gray provider; the header reaches the provider too.
    let by = count(&mut s.client, 60, || hello(Some("user"), None, None)).await;
    assert_eq!(
        names(&by),
        ["mt-user-1", "mt-user-2", "sh-user", "zf-user"],
        "{by:?}"
    );
    let reply = s
        .client
        .say_hello(hello(Some("user"), Some("gray"), None))
        .await
        .unwrap();
    assert_eq!(reply.get_ref().message, "mt-gray (tag seen: \"gray\")");
    let routed = reply
        .extensions()
        .get::<RoutedTo>()
        .expect("the response says where it went");
    assert_eq!(routed.provider.address(), s.providers[5].address);
    assert_eq!(routed.attempts, 1);

    // IDC weight from ZooKeeper: beijing's calls all to mt (shanghai is another region).
    s.admin
        .put_rule(&idc, "idcs: {beijing: [mt, zf], shanghai: [sh]}\nroute_tables: {beijing: {mt: 100, zf: 0}}\n")
        .await
        .unwrap();
    wait_for(&mut s.client, &["mt-user-1", "mt-user-2"], || {
        hello(Some("user"), None, None)
    })
    .await;
    // ... then switched to zf, live.
    s.admin
        .put_rule(&idc, "idcs: {beijing: [mt, zf], shanghai: [sh]}\nroute_tables: {beijing: {mt: 0, zf: 100}}\n")
        .await
        .unwrap();
    wait_for(&mut s.client, &["zf-user"], || {
        hello(Some("user"), None, None)
    })
    .await;
    wait_for(&mut s.client, &["zf-order"], || {
        hello(Some("order"), None, None)
    })
    .await;

    // Condition from ZooKeeper (Dubbo's v3.0 text rule): batch calls go to shanghai.
    s.admin
        .put_rule(
            &condition,
            "scope: service\nkey: helloworld.Greeter\nenabled: true\nforce: true\nconditions:\n  - arguments[0] = batch => region = shanghai\n",
        )
        .await
        .unwrap();
    wait_for(&mut s.client, &["sh-user"], || {
        hello(Some("user"), None, Some("batch"))
    })
    .await;
    let by = count(&mut s.client, 30, || {
        hello(Some("user"), None, Some("online"))
    })
    .await;
    assert_eq!(
        names(&by),
        ["zf-user"],
        "other calls are not matched: {by:?}"
    );

    // A forced condition that leaves nothing: tonic sees UNAVAILABLE with the reason.
    let status = s
        .client
        .say_hello(hello(Some("order"), None, Some("batch")))
        .await
        .expect_err("no provider");
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    assert_eq!(
        status.metadata().get("routechain-error").unwrap(),
        "no-provider"
    );
    assert!(
        status.message().contains("no provider"),
        "{}",
        status.message()
    );

    // Rules deleted: back to every user provider.
    assert!(s.admin.delete_rule(&condition).await.unwrap());
    assert!(s.admin.delete_rule(&idc).await.unwrap());
    wait_for(
        &mut s.client,
        &["mt-user-1", "mt-user-2", "sh-user", "zf-user"],
        || hello(Some("user"), None, None),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_killed_mid_run_is_failed_over_degraded_and_dropped_when_unregistered() {
    let layout = [
        ("a", "region=beijing&idc=mt&group=user"),
        ("b", "region=beijing&idc=mt&group=user"),
        ("c", "region=beijing&idc=mt&group=user"),
    ];
    let s = setup("tower-failover", &layout).await;
    // Concurrent callers, each its own clone of the client (one shared channel cache). A
    // call started once `kill` has returned (the victim's listener and connections closed)
    // must be answered by another provider.
    let killed = Arc::new(AtomicBool::new(false));
    let run = |client: Client, calls: usize| {
        let killed = killed.clone();
        tokio::spawn(async move {
            let mut client = client;
            let mut by: BTreeMap<String, u64> = BTreeMap::new();
            let (mut failovers, mut dead_answered) = (0, 0);
            for _ in 0..calls {
                let after_kill = killed.load(Ordering::SeqCst);
                let reply = client.say_hello(hello(Some("user"), None, None)).await;
                let reply = reply.expect("every call is answered, failed over if need be");
                failovers += u64::from(reply.extensions().get::<RoutedTo>().unwrap().attempts > 1);
                let who = who(&reply);
                dead_answered += u64::from(after_kill && who == "b");
                *by.entry(who).or_default() += 1;
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            (by, failovers, dead_answered)
        })
    };
    let callers: Vec<_> = (0..4).map(|_| run(s.client.clone(), 150)).collect();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let victim = &s.providers[1];
    victim.kill().await;
    killed.store(true, Ordering::SeqCst);
    let served = victim.served();
    let mut by: BTreeMap<String, u64> = BTreeMap::new();
    let (mut failovers, mut dead_answered) = (0, 0);
    for c in callers {
        let (b, f, d) = c.await.unwrap();
        for (k, v) in b {
            *by.entry(k).or_default() += v;
        }
        failovers += f;
        dead_answered += d;
    }
    assert_eq!(by.values().sum::<u64>(), 600, "every call answered: {by:?}");
    assert!(served > 0, "the victim served before it was killed");
    assert_eq!(
        dead_answered, 0,
        "no call started after the kill answered by the dead provider: {by:?}"
    );
    assert!(
        by.get("b").copied().unwrap_or(0) <= served,
        "the victim answered only what it served: {by:?}, served {served}"
    );
    assert!(failovers > 0, "calls on the dead provider failed over");
    let service = s.live.service();
    let index = service
        .state()
        .snapshot()
        .providers()
        .iter()
        .position(|p| p.address() == victim.address)
        .unwrap();
    assert!(service.is_degraded(index), "the dead provider is degraded");
    assert!(service.stats().degradations >= 1);

    // The registry drops it: calls keep going to the others, no failover needed.
    s.admin.unregister(SERVICE, &victim.url).await.unwrap();
    let deadline = Instant::now() + PATIENCE;
    while service.state().snapshot().len() != 2 {
        assert!(
            Instant::now() < deadline,
            "the unregistration never arrived"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut client = s.client.clone();
    for _ in 0..20 {
        let reply = client
            .say_hello(hello(Some("user"), None, None))
            .await
            .unwrap();
        assert_eq!(reply.extensions().get::<RoutedTo>().unwrap().attempts, 1);
        assert_ne!(who(&reply), "b");
    }
}
