//! Live updates: the file source and the ZooKeeper source (against a real ZooKeeper started
//! by the test), atomic swaps, refused updates, empty-push protection.

use routechain_testkit as support;

mod file;
mod mesh;
mod nacos;
mod python;
mod registries;
mod several_registries;
mod zk;
mod zk_production;

use std::sync::Arc;
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use routechain::core::Request;
use routechain::live::{LiveChain, LiveOptions, Report, Source, Watching};
use routechain::rules::ChainFile;

/// How long a change may take to show up.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// A live chain over inline chain YAML, with the test registry.
pub fn live(chain_yaml: &str) -> Arc<LiveChain> {
    let file = ChainFile::parse("test.chain.yaml", chain_yaml, None).expect("chain parses");
    Arc::new(
        LiveChain::new(file, routechain::registry(), LiveOptions::default()).expect("chain builds"),
    )
}

/// Starts `source` on `live`; reports arrive on the receiver.
pub fn watch(live: &Arc<LiveChain>, source: Box<dyn Source>) -> (Watching, Receiver<Report>) {
    let (tx, rx) = channel();
    let watching = live
        .watch(source, move |r| {
            eprintln!("report: {r}");
            let _ = tx.send(r.clone());
        })
        .expect("source starts");
    (watching, rx)
}

/// The routed provider addresses for `request`, sorted, or the no-provider error.
pub use support::failover::routed as route;

/// Waits until routing an empty request gives exactly `expected` (addresses, sorted).
pub fn wait_route(live: &LiveChain, expected: &[&str]) {
    wait_route_for(live, &Request::new(), expected);
}

/// Waits until routing `request` gives exactly `expected` (addresses, sorted).
pub fn wait_route_for(live: &LiveChain, request: &Request, expected: &[&str]) {
    let mut last = None;
    let found = std::time::Instant::now();
    while found.elapsed() < PATIENCE {
        let got = route(live, request);
        if matches!(&got, Ok(a) if a == expected) {
            return;
        }
        last = Some(got);
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("routing never gave {expected:?}; last: {last:?}");
}

/// Waits for a report matching `pred`, skipping others; returns it.
pub fn wait_report(rx: &Receiver<Report>, what: &str, pred: impl Fn(&Report) -> bool) -> Report {
    let deadline = std::time::Instant::now() + PATIENCE;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(r) if pred(&r) => return r,
            Ok(_) => continue,
            Err(_) => panic!("no report: {what}"),
        }
    }
}
