//! Failover against a real 3-node rnacos cluster (raft) on loopback ports: while a live
//! chain follows two of the nodes and changes are written through the third (the official
//! Python client, as Dubbo's Nacos registry and config center write them), each followed
//! node is killed in turn (the first is the raft leader the cluster started with; one of
//! them is the node the source is connected to), then each is frozen with SIGSTOP, then
//! the whole cluster is restarted. Every change must be applied and no route may be wrong
//! at any time; the time from each fault to the change written after it being applied is
//! printed (`cargo test -p routechain-tests --test nacos_failover -- --ignored --nocapture`),
//! never asserted. The ZooKeeper counterpart is `zk_failover.rs`.
//!
//! Ignored while it fails (see the attribute): with the cluster healthy again after a node
//! is killed, routes briefly go to every provider (the condition rule read as deleted), and
//! a frozen node keeps the client connected to it, so the next change never applies.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use routechain::core::{CallState, Request};
use routechain::live::{LiveChain, LiveOptions, NacosConfig, NacosSource};
use routechain::rules::ChainFile;
use routechain_testkit::nacos::{NacosCluster, NacosWriter};

const SERVICE: &str = "com.foo.BarService";
const CHAIN: &str = "service: com.foo.BarService\nrouters:\n  - type: condition\n";

fn provider(k: u32) -> String {
    format!("dubbo://10.0.0.{k}:20880/{SERVICE}?side=provider")
}

/// The routed addresses (sorted), empty when routing found none.
fn route(live: &LiveChain) -> Vec<String> {
    let state = live.service().state();
    let mut call = CallState::seeded(1);
    if state.route(&Request::new(), &mut call).is_err() {
        return Vec::new();
    }
    let mut out: Vec<String> = call
        .candidates
        .iter()
        .map(|i| state.snapshot().providers()[i].address().to_string())
        .collect();
    out.sort();
    out
}

/// Sends `command`, retrying while the cluster fails over.
fn retry(writer: &mut NacosWriter, command: serde_json::Value) {
    let start = Instant::now();
    loop {
        match writer.try_send(&command) {
            Ok(_) => return,
            Err(answer) => {
                assert!(
                    start.elapsed() < Duration::from_secs(60),
                    "{command}: {answer}"
                );
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

/// Registers provider `k` and routes every call to it (a condition rule on its host).
fn change(writer: &mut NacosWriter, k: u32) {
    retry(
        writer,
        serde_json::json!({"op": "register_url", "group": "DEFAULT_GROUP", "url": provider(k)}),
    );
    retry(
        writer,
        serde_json::json!({"op": "publish", "data_id": format!("{SERVICE}::.condition-router"),
            "content": format!("conditions: ['=> host = 10.0.0.{k}']\n")}),
    );
}

#[test]
#[ignore = "fails against rnacos 0.8.8 + nacos-sdk 0.8.3: a node killed gives a few ms of routes \
            with the rule missing (a re-read answered `not found`), and the source stays on a \
            frozen node (the change after the freeze is never applied); run with --ignored"]
fn a_live_chain_follows_every_change_through_node_loss_a_freeze_and_a_full_restart_of_rnacos() {
    let begun = Instant::now();
    let mut cluster = NacosCluster::start("failover", 3);
    let mut writer = NacosWriter::start(&cluster.address_of(&[2]), "");
    change(&mut writer, 1);

    let file = ChainFile::parse("failover.yaml", CHAIN, None).unwrap();
    let live =
        Arc::new(LiveChain::new(file, routechain::registry(), LiveOptions::default()).unwrap());
    let config = NacosConfig::for_chain(&live, format!("nacos://{}", cluster.address_of(&[0, 1])));
    let connection = config.connection.clone();
    let _watching = live
        .watch(Box::new(NacosSource::new(config)), |r| {
            eprintln!("report: {r}")
        })
        .unwrap();

    // Every route, all along, is exactly one provider this test registered.
    let stop = Arc::new(AtomicBool::new(false));
    let (wrong, calls) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let router = {
        let (live, stop, wrong, calls) = (live.clone(), stop.clone(), wrong.clone(), calls.clone());
        std::thread::spawn(move || {
            while route(&live).is_empty() && !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(5));
            }
            while !stop.load(Ordering::Relaxed) {
                let got = route(&live);
                calls.fetch_add(1, Ordering::Relaxed);
                if got.len() != 1 || !got[0].starts_with("10.0.0.") {
                    eprintln!("wrong route: {got:?}");
                    wrong.fetch_add(1, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        })
    };
    let wait_applied = |k: u32, since: Instant| -> Duration {
        let want = vec![format!("10.0.0.{k}:20880")];
        while route(&live) != want {
            assert!(
                since.elapsed() < Duration::from_secs(60),
                "change {k} not applied: {:?}",
                route(&live)
            );
            std::thread::sleep(Duration::from_millis(2));
        }
        since.elapsed()
    };
    wait_applied(1, Instant::now());
    assert!(connection.is_connected());

    let mut times: Vec<(String, Duration)> = Vec::new();
    let mut k = 1;
    // 1. Each followed node killed (the first, node 1, started the cluster as its leader),
    // then started again.
    for node in [0, 1] {
        k += 1;
        let fault = Instant::now();
        cluster.nodes[node].stop();
        change(&mut writer, k);
        times.push((format!("node {} killed", node + 1), wait_applied(k, fault)));
        cluster.nodes[node].resume();
    }
    // 2. Each followed node frozen (SIGSTOP), then thawed.
    for node in [0, 1] {
        k += 1;
        let fault = Instant::now();
        cluster.nodes[node].freeze();
        change(&mut writer, k);
        times.push((format!("node {} frozen", node + 1), wait_applied(k, fault)));
        cluster.nodes[node].thaw();
    }
    // 3. Every node restarted.
    k += 1;
    let fault = Instant::now();
    cluster.restart_all();
    change(&mut writer, k);
    times.push(("all nodes restarted".into(), wait_applied(k, fault)));
    k += 1;
    let after = Instant::now();
    change(&mut writer, k);
    times.push((
        "next change after the restart".into(),
        wait_applied(k, after),
    ));

    stop.store(true, Ordering::Relaxed);
    router.join().unwrap();
    println!("time from each fault to the change written after it applied:");
    for (what, t) in &times {
        println!("  {what}: {:.3} s", t.as_secs_f64());
    }
    println!(
        "{} routes checked, {} wrong; whole test {:.1} s",
        calls.load(Ordering::Relaxed),
        wrong.load(Ordering::Relaxed),
        begun.elapsed().as_secs_f64()
    );
    assert_eq!(wrong.load(Ordering::Relaxed), 0, "a route was wrong");
    assert!(calls.load(Ordering::Relaxed) > 100);
    assert_eq!(live.stats().refused(), 0);
}
