//! Test support shared by the integration test crates: a real ZooKeeper server.
#![allow(dead_code)]

pub mod zookeeper;

use std::time::{Duration, Instant};

/// Polls `f` every 20 ms until it returns `Some`, or panics after `timeout` with `what`.
pub fn wait_for<T>(timeout: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        if start.elapsed() > timeout {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
