//! Failover against a real 3-node rnacos cluster (raft) on loopback ports: while a live
//! chain follows two of the nodes and changes are written through the third (the official
//! Python client, as Dubbo's Nacos registry and config center write them), the raft leader
//! is killed, then the node the source is connected to, then that node is frozen with
//! SIGSTOP (twice), then the whole cluster is restarted, and last the rule is deleted.
//! Every change must be applied and no route may be wrong at any time; the time from each
//! fault to the change written after it being applied is printed (`cargo test -p
//! routechain-tests --test nacos_failover -- --nocapture`), never asserted. The ZooKeeper
//! counterpart is `zk_failover.rs`; the two share `routechain_testkit::failover`.
//!
//! A change registers its provider, waits until the source has it, then writes the rule
//! routing to it: Nacos pushes instances and serves configs apart, so a rule naming a
//! provider the source has not seen yet routes, as Dubbo's condition router does, to
//! every provider. rnacos 0.8.8's own failures are worked around and printed: a node that
//! does not rejoin after the full restart is started again (testkit), a leader that stops
//! applying its log while a node is down gets that node back, and each round starts once
//! every node sees the others' writes (a node behind serves older configs; one brought
//! back outside the cluster is started again).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use routechain::live::{LiveChain, LiveOptions, NacosConfig, NacosSource, Report, Watching};
use routechain::rules::ChainFile;
use routechain_testkit::failover::{
    CHAIN, Router, has_provider, provider, route, rule, wait_applied,
};
use routechain_testkit::nacos::{Nacos, NacosCluster, NacosWriter, raft_state};

const RULE: &str = "com.foo.BarService::.condition-router";

/// The Python writer, and the cluster's nodes (to show their raft state when writes keep
/// failing).
struct Writer {
    python: NacosWriter,
    nodes: Vec<String>,
}

impl Writer {
    /// Sends `command`, retrying while the cluster fails over. After 15 s of failures the
    /// nodes' raft states are printed and `stalled` is called, once: rnacos 0.8.8's leader
    /// sometimes stops applying its log while a node is down (its `last_applied` behind a
    /// follower's), and takes writes again once that node is back.
    fn retry(&mut self, command: serde_json::Value, stalled: &mut dyn FnMut()) {
        let start = Instant::now();
        let mut said = false;
        loop {
            match self.python.try_send(&command) {
                Ok(_) => return,
                Err(answer) => {
                    assert!(
                        start.elapsed() < Duration::from_secs(60),
                        "{command}: {answer}"
                    );
                    if !said && start.elapsed() > Duration::from_secs(15) {
                        let states: Vec<String> =
                            self.nodes.iter().map(|n| raft_state(n)).collect();
                        eprintln!("writes failing for 15 s ({answer}): {}", states.join("; "));
                        stalled();
                        said = true;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        }
    }
}

/// Registers provider `k` and waits until the chain has it.
fn register(writer: &mut Writer, live: &LiveChain, k: u32, stalled: &mut dyn FnMut()) {
    writer.retry(
        serde_json::json!({"op": "register_url", "group": "DEFAULT_GROUP", "url": provider(k)}),
        stalled,
    );
    let start = Instant::now();
    while !has_provider(live, k) {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "provider {k} never seen"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Registers provider `k`, waits until the chain has it, and routes every call to it.
fn change(writer: &mut Writer, live: &LiveChain, k: u32, stalled: &mut dyn FnMut()) {
    register(writer, live, k, stalled);
    writer.retry(
        serde_json::json!({"op": "publish", "data_id": RULE, "content": rule(k)}),
        stalled,
    );
}

/// When something was last said (the time, and the server for a connection).
type Said = Arc<Mutex<Option<(Instant, String)>>>;

/// A live chain following an address, and what its source said.
struct Following {
    live: Arc<LiveChain>,
    /// The server the source connected to last.
    connected: Said,
    /// The last time the source left a server (the outage it reported).
    left: Said,
    /// Whether the rule was ever applied.
    ruled: Arc<AtomicBool>,
    _watching: Watching,
}

/// Starts a live chain following `address`.
fn follow(address: String) -> Following {
    let file = ChainFile::parse("failover.yaml", CHAIN, None).unwrap();
    let live =
        Arc::new(LiveChain::new(file, routechain::registry(), LiveOptions::default()).unwrap());
    let mut config = NacosConfig::for_chain(&live, address);
    config.following.retry_delay = Duration::from_millis(100);
    let (connected, left): (Said, Said) = Default::default();
    let ruled = Arc::new(AtomicBool::new(false));
    let (c, l, r) = (connected.clone(), left.clone(), ruled.clone());
    let watching = live
        .watch(Box::new(NacosSource::new(config)), move |report| {
            eprintln!("report: {report}");
            let text = report.to_string();
            if text.contains(&format!("rule {RULE} added")) {
                r.store(true, Ordering::Relaxed);
            }
            let Report::Status { message, .. } = &report else {
                return;
            };
            if let Some(rest) = message.strip_prefix("connected to ") {
                let server = rest.split(' ').next().unwrap_or_default().to_string();
                *c.lock().unwrap() = Some((Instant::now(), server));
            } else if message.contains("the last good state keeps serving") {
                *l.lock().unwrap() = Some((Instant::now(), String::new()));
            }
        })
        .unwrap();
    Following {
        live,
        connected,
        left,
        ruled,
        _watching: watching,
    }
}

#[test]
fn a_live_chain_follows_every_change_through_node_loss_a_freeze_and_a_full_restart_of_rnacos() {
    let begun = Instant::now();
    let mut cluster = NacosCluster::start("failover", 3);
    let mut writer = Writer {
        python: NacosWriter::start(&cluster.address_of(&[2]), ""),
        nodes: cluster.nodes.iter().map(|n| n.address()).collect(),
    };
    let f = follow(format!("nacos://{}", cluster.address_of(&[0, 1])));
    let (live, connected) = (&f.live, &f.connected);
    change(&mut writer, live, 1, &mut || {});
    routechain_testkit::wait_for(Duration::from_secs(30), "the first rule", || {
        f.ruled.load(Ordering::Relaxed).then_some(())
    });
    // Every route, all along, is exactly one provider this test registered.
    let router = Router::start(live.clone());
    wait_applied(live, 1, Instant::now());
    let addresses: Vec<String> = cluster.nodes.iter().map(|n| n.address()).collect();
    let node_of = |server: &str| {
        (addresses.iter())
            .position(|a| a == server)
            .unwrap_or_else(|| panic!("{server} is no node"))
    };
    let own = || connected.lock().unwrap().clone().expect("connected").1;

    let mut times: Vec<(String, Duration)> = Vec::new();
    let mut k = 1;
    // 1. The raft leader killed, then the node the source is connected to (the same one
    // when the leader is the source's), each started again.
    for what in ["the raft leader", "the source's node"] {
        let node = match what {
            "the raft leader" => cluster.leader(),
            _ => node_of(&own()),
        };
        let leader = if what != "the raft leader" && cluster.leader() == node {
            ", the leader"
        } else {
            ""
        };
        k += 1;
        let fault = Instant::now();
        cluster.nodes[node].stop();
        let mut started = false;
        let mut stalled = || {
            eprintln!("node {} started again", node + 1);
            cluster.nodes[node].resume();
            started = true;
        };
        change(&mut writer, live, k, &mut stalled);
        let applied = wait_applied(live, k, fault);
        let back = if started {
            " (rnacos stalled: the node started again after 15 s)"
        } else {
            ""
        };
        let name = format!("{what} (node {}{leader}) killed{back}", node + 1);
        times.push((name, applied));
        if !started {
            cluster.nodes[node].resume();
        }
        cluster.wait_consistent();
    }
    // 2. The node the source is connected to frozen (SIGSTOP), twice: the source leaves it
    // and connects to another; the change applies only then (the frozen node answers
    // nothing).
    for _ in 0..2 {
        let node = node_of(&own());
        let leader = cluster.leader() == node;
        *connected.lock().unwrap() = None;
        *f.left.lock().unwrap() = None;
        k += 1;
        let fault = Instant::now();
        cluster.nodes[node].freeze();
        change(&mut writer, live, k, &mut || {});
        let applied = wait_applied(live, k, fault);
        let (at, to) = connected
            .lock()
            .unwrap()
            .clone()
            .expect("the source connected to another node");
        let (left, _) = f.left.lock().unwrap().clone().expect("the source left");
        assert_ne!(node_of(&to), node, "reconnected to the frozen node");
        assert!(left <= at && at <= fault + applied);
        let name = format!(
            "the source's node (node {}, {}) frozen",
            node + 1,
            if leader { "the leader" } else { "a follower" }
        );
        times.push((name, applied));
        times.push(("  the source left it".into(), left - fault));
        times.push(("  the source connected to another".into(), at - fault));
        cluster.nodes[node].thaw();
        // The next round starts once the thawed node has caught up: a node behind the
        // others serves older configs (rnacos serves a config read from its own state).
        cluster.wait_consistent();
    }
    // 3. Every node restarted. The Python client does not register its (ephemeral)
    // instances again: the test does, the provider the rule routes to first (an instance
    // list without it routes, as Dubbo's condition router does, to every provider), so
    // that the change after the restart applies only with its rule.
    let fault = Instant::now();
    cluster.restart_all();
    register(&mut writer, live, k, &mut || {});
    for old in 1..k {
        writer.retry(
            serde_json::json!({"op": "register_url", "group": "DEFAULT_GROUP", "url": provider(old)}),
            &mut || {},
        );
    }
    k += 1;
    change(&mut writer, live, k, &mut || {});
    times.push(("all nodes restarted".into(), wait_applied(live, k, fault)));
    k += 1;
    let after = Instant::now();
    change(&mut writer, live, k, &mut || {});
    times.push((
        "next change after the restart".into(),
        wait_applied(live, k, after),
    ));
    router.finish(&times, begun);
    assert_eq!(live.stats().refused(), 0);

    // 4. The rule deleted: the deletion applies (every provider routed).
    writer.retry(
        serde_json::json!({"op": "remove", "data_id": RULE}),
        &mut || {},
    );
    let start = Instant::now();
    while route(live).len() < 2 {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the deletion never applied: {:?}",
            route(live)
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A server that answers `not found` for a rule another server holds (a node behind the
/// others) deletes nothing: two separate servers, the rule removed from the source's
/// alone keeps serving; removed from both, it is deleted.
#[test]
fn a_rule_missing_on_the_source_server_alone_keeps_serving_and_a_real_deletion_applies() {
    let servers = [Nacos::start("miss-a"), Nacos::start("miss-b")];
    let mut writers: Vec<NacosWriter> = servers
        .iter()
        .map(|s| NacosWriter::start(&s.address(), ""))
        .collect();
    for w in &mut writers {
        w.register("DEFAULT_GROUP", &provider(1));
        w.register("DEFAULT_GROUP", &provider(2));
        w.publish(RULE, &rule(1));
    }
    let f = follow(format!(
        "nacos://{},{}",
        servers[0].address(),
        servers[1].address()
    ));
    let live = &f.live;
    wait_applied(live, 1, Instant::now());
    let own = routechain_testkit::wait_for(Duration::from_secs(10), "connected", || {
        f.connected.lock().unwrap().clone()
    })
    .1;
    let (mine, other) = if own == servers[0].address() {
        (0, 1)
    } else {
        (1, 0)
    };
    writers[mine].remove(RULE);
    // Several polls (one a second) see the miss: the rule keeps serving.
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(4) {
        assert_eq!(route(live), ["10.0.0.1:20880"], "the rule was deleted");
        std::thread::sleep(Duration::from_millis(5));
    }
    writers[other].remove(RULE);
    let start = Instant::now();
    while route(live) != ["10.0.0.1:20880", "10.0.0.2:20880"] {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the deletion never applied: {:?}",
            route(live)
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(live.stats().refused(), 0);
}
