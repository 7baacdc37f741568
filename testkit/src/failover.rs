//! What the failover tests share (`tests/tests/zk_failover.rs`, `nacos_failover.rs`): change
//! `k` registers provider `10.0.0.k` and routes every call to it, a [`Router`] thread routes
//! all along and counts every route that is not exactly one such provider, [`wait_applied`]
//! times a change from a fault to its route, and [`Router::finish`] prints the times and
//! asserts that nothing was wrong.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use routechain::balance::SelectError;
use routechain::core::{CallState, Request};
use routechain::live::LiveChain;

/// The service of the failover tests.
pub const SERVICE: &str = "com.foo.BarService";
/// A chain following the service's condition rule.
pub const CHAIN: &str = "service: com.foo.BarService\nrouters:\n  - type: condition\n";

/// The provider URL of change `k`.
pub fn provider(k: u32) -> String {
    format!("dubbo://10.0.0.{k}:20880/{SERVICE}?side=provider")
}

/// The condition rule of change `k`: every call to provider `k`.
pub fn rule(k: u32) -> String {
    format!("conditions: ['=> host = 10.0.0.{k}']\n")
}

/// The routed addresses (sorted), empty when routing found none.
pub fn route(live: &LiveChain) -> Vec<String> {
    routed(live, &Request::new()).unwrap_or_default()
}

/// The provider addresses `request` routes to (through the registry chosen for it when
/// there are several), sorted, or the no-provider error. Sorted: a live chain keeps its
/// providers in its own stable order (those kept stay in place, new ones are appended), not
/// the registry's; the order means nothing to routing.
pub fn routed(live: &LiveChain, request: &Request) -> Result<Vec<String>, SelectError> {
    let published = live.service().load();
    let state = published.state();
    let mut call = CallState::seeded(1);
    published.route(request, &mut call, None)?;
    let mut addresses: Vec<String> = call
        .candidates
        .iter()
        .map(|i| state.snapshot().providers()[i].address().to_string())
        .collect();
    addresses.sort();
    Ok(addresses)
}

/// Whether the chain's providers include provider `k`.
pub fn has_provider(live: &LiveChain, k: u32) -> bool {
    let want = format!("10.0.0.{k}:20880");
    let state = live.service().state();
    state
        .snapshot()
        .providers()
        .iter()
        .any(|p| p.address() == want)
}

/// Waits until every call routes to provider `k` alone; the time since `since`. Fails the
/// test after 60 s.
pub fn wait_applied(live: &LiveChain, k: u32, since: Instant) -> Duration {
    let want = vec![format!("10.0.0.{k}:20880")];
    while route(live) != want {
        assert!(
            since.elapsed() < Duration::from_secs(60),
            "change {k} not applied: {:?}",
            route(live)
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    since.elapsed()
}

/// A thread routing a call every millisecond from the first state on, counting the routes
/// that are not exactly one provider of a change.
pub struct Router {
    stop: Arc<AtomicBool>,
    wrong: Arc<AtomicU64>,
    calls: Arc<AtomicU64>,
    thread: JoinHandle<()>,
}

impl Router {
    /// Starts routing `live`'s calls (once it has a first state).
    pub fn start(live: Arc<LiveChain>) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let (wrong, calls) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let thread = {
            let (stop, wrong, calls) = (stop.clone(), wrong.clone(), calls.clone());
            std::thread::spawn(move || {
                // The first state is read once the source has connected.
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
        Router {
            stop,
            wrong,
            calls,
            thread,
        }
    }

    /// Stops routing, prints `times` (from each fault to the change written after it
    /// applied) and the routes checked, and fails the test if a route was wrong or too few
    /// were checked. The times are measurements, not assertions: a timed test fails on a
    /// loaded machine.
    pub fn finish(self, times: &[(String, Duration)], begun: Instant) {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().expect("the router thread");
        let (calls, wrong) = (
            self.calls.load(Ordering::Relaxed),
            self.wrong.load(Ordering::Relaxed),
        );
        println!("time from each fault to the change written after it applied:");
        for (what, t) in times {
            println!("  {what}: {:.3} s", t.as_secs_f64());
        }
        println!(
            "{calls} routes checked, {wrong} wrong; whole test {:.1} s",
            begun.elapsed().as_secs_f64()
        );
        assert_eq!(wrong, 0, "a route was wrong");
        assert!(calls > 100, "{calls} routes checked");
    }
}
