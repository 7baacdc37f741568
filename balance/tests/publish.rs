//! Publish once: a `Cluster`'s chain state, balancers, health and configuration are one
//! value, built by the writer before it is stored; `select` reads it without a lock.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, mpsc};
use std::time::Duration;

use routechain_balance::*;
use routechain_core::*;

fn snapshot(generation: u64, n: usize) -> Arc<Snapshot> {
    let text: String = (0..n)
        .map(|i| format!("dubbo://10.0.{}.{}:20880/svc\n", i / 250, i % 250))
        .collect();
    Arc::new(Snapshot::parse_lines(generation, &text).unwrap())
}

fn service(n: usize, kind: LoadBalanceKind) -> Arc<Cluster> {
    let state = ChainState::new(None, snapshot(1, n), Url::empty(), vec![]).unwrap();
    let config = ServiceConfig {
        balance: BalanceConfig::new(BalancerSpec::new(kind)),
        ..ServiceConfig::default()
    };
    Arc::new(Cluster::new(state, config))
}

/// A router whose prepare says it started and waits to be released (then keeps every
/// provider): a writer held in the middle of an update.
struct Held {
    entered: Mutex<mpsc::Sender<()>>,
    release: Mutex<mpsc::Receiver<()>>,
}

impl Router for Held {
    fn name(&self) -> &str {
        "held"
    }
    fn default_priority(&self) -> i32 {
        0
    }
    fn prepare(&self, cx: &PrepareContext<'_>) -> Result<Arc<dyn PreparedRouter>, PrepareError> {
        self.entered.lock().unwrap().send(()).unwrap();
        self.release.lock().unwrap().recv().unwrap();
        router_fn("held", |_, _| {}).prepare(cx)
    }
}

/// While a writer is inside `apply` (holding the writers' lock, a router preparing),
/// `select` runs to completion on another thread and sees the previous state with its own
/// balancers; once the update returns, the next `select` sees the new state.
#[test]
fn select_never_waits_for_a_writer() {
    let svc = service(10, LoadBalanceKind::RoundRobin);
    let (entered_tx, entered_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let held = Held {
        entered: Mutex::new(entered_tx),
        release: Mutex::new(release_rx),
    };
    let writer = {
        let svc = svc.clone();
        std::thread::spawn(move || {
            svc.apply(ClusterChange {
                entries: Some(vec![ChainEntry::new("held", 0, Arc::new(held))].into()),
                ..Change::providers(snapshot(2, 20))
            })
            .unwrap()
            .generation()
        })
    };
    entered_rx.recv().unwrap();
    let (done_tx, done_rx) = mpsc::channel();
    {
        let svc = svc.clone();
        std::thread::spawn(move || {
            let mut call = Caller::seeded(1);
            let mut max = 0;
            for _ in 0..10_000 {
                let s = svc.select(&Request::new(), &[], &mut call).unwrap();
                assert_eq!(s.generation(), 1);
                max = max.max(s.index());
            }
            svc.report_success(0);
            let _ = svc.config();
            done_tx.send(max).unwrap();
        });
    }
    let max = done_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("select waited for the writer");
    assert_eq!(max, 9, "the old view's balancer over the old snapshot");
    release_tx.send(()).unwrap();
    let generation = writer.join().unwrap();
    let mut call = Caller::seeded(1);
    let s = svc.select(&Request::new(), &[], &mut call).unwrap();
    assert_eq!(s.generation(), generation);
    assert_eq!(s.state().snapshot().len(), 20);
}

/// Selects on two threads while a third publishes a new snapshot (of another size) and a
/// new configuration 200 times: every selection is consistent with the view it came from.
#[test]
fn selections_stay_consistent_under_concurrent_updates() {
    let svc = service(64, LoadBalanceKind::LeastActive);
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|t| {
            let svc = svc.clone();
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut call = Caller::seeded(t);
                let mut selections = 0u64;
                let mut tried = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let s = svc.select(&Request::new(), &tried, &mut call).unwrap();
                    let len = s.state().snapshot().len();
                    assert!(s.index() < len);
                    let _in_flight = s.begin();
                    assert!(tried.iter().all(|t: &Selected| t.address() != s.address()));
                    if tried.len() < 2 {
                        tried.push(s);
                    } else {
                        tried.clear();
                    }
                    selections += 1;
                }
                selections
            })
        })
        .collect();
    for k in 0..200u64 {
        let n = if k % 2 == 0 { 32 } else { 96 };
        let kind = LoadBalanceKind::ALL[k as usize % LoadBalanceKind::ALL.len()];
        let config = ServiceConfig {
            balance: BalanceConfig::new(BalancerSpec::new(kind)),
            ..ServiceConfig::default()
        };
        svc.apply(ClusterChange {
            config: Some(config),
            ..Change::providers(snapshot(k + 2, n))
        })
        .unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }
    // Every guard dropped: nothing left in flight on the final view.
    assert!((0..96).all(|i| svc.in_flight(i) == 0));
    assert_eq!(svc.state().snapshot().len(), 96);
}
