//! Provider churn against a real registry, ZooKeeper or Nacos ([`ChurnTarget`]):
//! `providers` registered in Dubbo's layout, then `changes` registrations and removals
//! paced over a period while routing threads route through the live chain fed by the
//! registry's source.
//!
//! Shared by the churn test (`tests/tests/zk_churn.rs`), which asserts that every applied
//! state is one the registry went through and that the last one is the final registry, and
//! the examples `zk_churn` and `registry_churn` (`benches/examples/`), which print the
//! timings (they are measured here but never asserted).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use routechain::core::{CallState, ChainState, Request};
use routechain::live::{LiveChain, LiveOptions, Report, Source, ZkAdmin, ZkConfig, ZkSource};
#[cfg(feature = "nacos")]
use routechain::live::{NacosConfig, NacosSource};
use routechain::rules::ChainFile;

#[cfg(feature = "nacos")]
use crate::nacos::NacosWriter;
use crate::{SERVICE, provider_lines};

/// A registry the churn writes to, and the source a live chain follows it with. Every
/// write returns once the registry has acknowledged it.
pub trait ChurnTarget {
    /// Registers the providers present before the churn.
    fn register_initial(&mut self, urls: &[String]);
    /// Registers one provider.
    fn register(&mut self, url: &str);
    /// Removes one provider registered before.
    fn unregister(&mut self, url: &str);
    /// The source of `live`, following this registry.
    fn source(&self, live: &LiveChain) -> Box<dyn Source>;
}

/// A ZooKeeper registry, written with routechain's admin (persistent provider nodes).
pub struct ZkTarget {
    servers: String,
    rt: tokio::runtime::Runtime,
    admin: ZkAdmin,
}

impl ZkTarget {
    /// Connects to the ZooKeeper at `servers`.
    pub fn connect(servers: &str) -> Self {
        let rt = runtime();
        let admin = rt
            .block_on(ZkAdmin::connect(servers))
            .unwrap_or_else(|e| panic!("connect to ZooKeeper: {e}"));
        ZkTarget {
            servers: servers.to_string(),
            rt,
            admin,
        }
    }
}

impl Drop for ZkTarget {
    fn drop(&mut self) {
        self.rt.block_on(self.admin.clone().close());
    }
}

impl ChurnTarget for ZkTarget {
    fn register_initial(&mut self, urls: &[String]) {
        // 256 requests in flight.
        self.rt.block_on(async {
            let mut tasks = tokio::task::JoinSet::new();
            for u in urls {
                while tasks.len() >= 256 {
                    if let Some(r) = tasks.join_next().await {
                        r.unwrap_or_else(|e| panic!("register task: {e}"));
                    }
                }
                let (admin, u) = (self.admin.clone(), u.clone());
                tasks.spawn(async move {
                    admin
                        .register_persistent(SERVICE, &u)
                        .await
                        .unwrap_or_else(|e| panic!("register {u}: {e}"))
                });
            }
            while let Some(r) = tasks.join_next().await {
                r.unwrap_or_else(|e| panic!("register task: {e}"));
            }
        });
    }

    fn register(&mut self, url: &str) {
        self.rt
            .block_on(self.admin.register_persistent(SERVICE, url))
            .unwrap_or_else(|e| panic!("register {url}: {e}"));
    }

    fn unregister(&mut self, url: &str) {
        let removed = self
            .rt
            .block_on(self.admin.unregister(SERVICE, url))
            .unwrap_or_else(|e| panic!("unregister {url}: {e}"));
        assert!(removed, "{url} was registered");
    }

    fn source(&self, live: &LiveChain) -> Box<dyn Source> {
        Box::new(ZkSource::new(ZkConfig::for_chain(
            live,
            self.servers.clone(),
        )))
    }
}

#[cfg(feature = "nacos")]
/// A Nacos registry (its public namespace, `DEFAULT_GROUP`), written by the official
/// Python SDK ([`NacosWriter`]) as Dubbo's Nacos registry registers instances.
pub struct NacosTarget {
    server: String,
    writer: NacosWriter,
}

#[cfg(feature = "nacos")]
impl NacosTarget {
    /// Connects a writer to the Nacos at `server` (`host:port`).
    pub fn connect(server: &str) -> Self {
        NacosTarget {
            server: server.to_string(),
            writer: NacosWriter::start(server, ""),
        }
    }
}

#[cfg(feature = "nacos")]
impl ChurnTarget for NacosTarget {
    fn register_initial(&mut self, urls: &[String]) {
        self.writer.batch("DEFAULT_GROUP", urls);
    }

    fn register(&mut self, url: &str) {
        self.writer.register("DEFAULT_GROUP", url);
    }

    fn unregister(&mut self, url: &str) {
        self.writer.deregister("DEFAULT_GROUP", url);
    }

    fn source(&self, live: &LiveChain) -> Box<dyn Source> {
        Box::new(NacosSource::new(NacosConfig::for_chain(
            live,
            format!("nacos://{}", self.server),
        )))
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct Churn {
    /// Providers registered before the churn.
    pub providers: usize,
    /// Registrations and removals during the churn (alternating: a new provider, then one
    /// of the first ones removed).
    pub changes: usize,
    /// The churn's length: the changes are paced evenly over it.
    pub over: Duration,
    /// Routing threads.
    pub routing_threads: usize,
    /// How long the routing threads route before the churn (the idle figures).
    pub idle: Duration,
}

/// The chain: one condition rule, every call to the shanghai providers (a routed set
/// checkable per call).
pub const CHURN_CHAIN: &str = "\
service: com.example.search.IndexService
group: '*'
version: '*'
routers:
  - type: condition
    priority: 140
    rule:
      configVersion: v3.0
      scope: service
      key: com.example.search.IndexService
      enabled: true
      force: true
      conditions:
        - '=> region = shanghai'
";

/// One applied provider state, checked against the changes made.
#[derive(Debug, Clone)]
pub struct Applied {
    /// The state's generation.
    pub generation: u64,
    /// `Some(k)` when the state's providers are exactly the registry after the first `k`
    /// changes; `None` when they are no state the registry went through.
    pub prefix: Option<usize>,
    /// For each service (the providers' version and group, in [`Outcome::services`]'s
    /// order), `k` when its providers are exactly those after the first `k` changes of that
    /// service; `None` when some service's are not. A registry that pushes each service on
    /// its own (Nacos) gives states whose services are each a state the registry went
    /// through, but not always the same moment for all of them.
    pub service_prefixes: Option<Vec<usize>>,
    /// Its provider count.
    pub providers: usize,
    /// When it was applied (reported).
    pub at: Instant,
}

/// What happened.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Time to register the initial providers.
    pub register_time: Duration,
    /// Every state applied from the first one serving the initial providers on, in order.
    pub applied: Vec<Applied>,
    /// Reports other than applied states and status (refusals, skipped entries...).
    pub other_reports: Vec<String>,
    /// The services of the plan (`version:group`), as [`Applied::service_prefixes`] orders
    /// them.
    pub services: Vec<String>,
    /// When the last change was acknowledged by the registry.
    pub last_change: Option<Instant>,
    /// Call latencies (nanoseconds) before the churn and during it.
    pub idle_ns: Vec<u64>,
    /// Call latencies (nanoseconds) during the churn.
    pub churn_ns: Vec<u64>,
    /// Calls whose routed set was checked, and those that were wrong (no provider, or a
    /// provider outside shanghai).
    pub checked_calls: u64,
    /// Wrongly routed calls among the checked ones.
    pub bad_calls: u64,
}

impl Outcome {
    /// The time from the last change to the first applied state holding every change.
    pub fn settle_time(&self, changes: usize) -> Option<Duration> {
        let last = self.last_change?;
        self.applied
            .iter()
            .find(|a| a.prefix == Some(changes))
            .map(|a| a.at.saturating_duration_since(last))
    }
}

/// The `p`-th percentile (0..=100) of `ns`, sorted in place.
pub fn percentile(ns: &mut [u64], p: f64) -> u64 {
    if ns.is_empty() {
        return 0;
    }
    ns.sort_unstable();
    let i = ((ns.len() - 1) as f64 * p / 100.0).round() as usize;
    ns[i.min(ns.len() - 1)]
}

/// Which change touches which address: `(change index, true for a registration)`.
struct Plan {
    initial: usize,
    urls: Vec<String>,
    /// Every planned provider's address: `None` for an initial provider no change touches.
    by_address: HashMap<String, Option<(usize, bool)>>,
    changes: usize,
}

impl Plan {
    fn new(providers: usize, changes: usize, seed: u64) -> Self {
        let added = changes.div_ceil(2);
        assert!(changes / 2 <= providers, "more removals than providers");
        let urls: Vec<String> = provider_lines(providers + added, seed)
            .lines()
            .map(str::to_string)
            .collect();
        let address = |u: &str| {
            let rest = u.split_once("://").map_or(u, |(_, r)| r);
            rest.split('/').next().unwrap_or("").to_string()
        };
        let mut by_address: HashMap<String, Option<(usize, bool)>> = urls[..providers]
            .iter()
            .map(|u| (address(u), None))
            .collect();
        for j in 0..changes {
            let (i, add) = if j % 2 == 0 {
                (providers + j / 2, true)
            } else {
                (j / 2, false)
            };
            by_address.insert(address(&urls[i]), Some((j, add)));
        }
        Plan {
            initial: providers,
            urls,
            by_address,
            changes,
        }
    }

    /// Change `j`: the URL and whether it is registered (else removed).
    fn change(&self, j: usize) -> (&str, bool) {
        if j % 2 == 0 {
            (&self.urls[self.initial + j / 2], true)
        } else {
            (&self.urls[j / 2], false)
        }
    }

    /// The `k` such that `state` holds exactly the registry after the first `k` changes.
    fn prefix(&self, state: &ChainState) -> Option<usize> {
        let applied = self.applied(state)?;
        let k = applied.iter().take_while(|a| **a).count();
        applied[k..].iter().all(|a| !a).then_some(k)
    }

    /// The services of the plan's URLs (`version:group`), sorted.
    fn services(&self) -> Vec<String> {
        let mut s: Vec<String> = self.urls.iter().map(|u| service_of(u)).collect();
        s.sort();
        s.dedup();
        s
    }

    /// For each of [`Plan::services`], the `k` such that `state` holds exactly that
    /// service's providers after its first `k` changes.
    fn service_prefixes(&self, state: &ChainState) -> Option<Vec<usize>> {
        let applied = self.applied(state)?;
        let services = self.services();
        let mut per: Vec<Vec<bool>> = vec![Vec::new(); services.len()];
        for (j, a) in applied.iter().enumerate() {
            let service = service_of(self.change(j).0);
            let i = services.binary_search(&service).ok()?;
            per[i].push(*a);
        }
        per.iter()
            .map(|applied| {
                let k = applied.iter().take_while(|a| **a).count();
                applied[k..].iter().all(|a| !a).then_some(k)
            })
            .collect()
    }

    /// Which changes `state` holds; `None` when it holds a provider twice, one no change
    /// or initial registration made, or misses an initial provider no change removes.
    fn applied(&self, state: &ChainState) -> Option<Vec<bool>> {
        let mut applied = vec![false; self.changes];
        let mut seen = std::collections::HashSet::new();
        let mut untouched = 0;
        for p in state.snapshot().providers() {
            if !seen.insert(p.address()) {
                return None; // a provider twice
            }
            match self.by_address.get(p.address()) {
                None => return None, // no provider of the plan
                Some(None) => untouched += 1,
                Some(Some((j, true))) => applied[*j] = true,
                Some(Some((_, false))) => {} // not removed yet
            }
        }
        for (address, change) in &self.by_address {
            if let Some((j, false)) = change {
                applied[*j] = !seen.contains(address.as_str());
            }
        }
        // Every initial provider that no change removes is there.
        if untouched != self.initial - self.changes / 2 {
            return None;
        }
        Some(applied)
    }
}

/// A provider URL's service within the interface: `<version>:<group>`.
fn service_of(url: &str) -> String {
    let param = |name: &str| {
        url.split_once('?')
            .map_or("", |(_, q)| q)
            .split('&')
            .find_map(|p| p.strip_prefix(name)?.strip_prefix('='))
            .unwrap_or("")
    };
    format!("{}:{}", param("version"), param("group"))
}

/// An applied state as the report callback saw it, and when.
type Seen = (Arc<ChainState>, Instant);

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("tokio runtime: {e}"))
}

/// Runs the churn against the ZooKeeper at `servers` (an empty one).
pub fn run(servers: &str, churn: &Churn) -> Outcome {
    run_on(&mut ZkTarget::connect(servers), churn)
}

/// Runs the churn against `target` (an empty registry).
pub fn run_on(target: &mut dyn ChurnTarget, churn: &Churn) -> Outcome {
    let plan = Arc::new(Plan::new(churn.providers, churn.changes, 7));
    let mut outcome = Outcome {
        services: plan.services(),
        ..Outcome::default()
    };

    let started = Instant::now();
    target.register_initial(&plan.urls[..churn.providers]);
    outcome.register_time = started.elapsed();

    // The live chain, fed by the ZooKeeper source; every applied state is kept to check.
    let file = ChainFile::parse("churn.chain.yaml", CHURN_CHAIN, None)
        .unwrap_or_else(|e| panic!("churn chain: {e:?}"));
    let live = Arc::new(
        LiveChain::new(file, routechain::registry(), LiveOptions::default())
            .unwrap_or_else(|e| panic!("churn chain builds: {e:?}")),
    );
    let states: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let others: Arc<Mutex<Vec<String>>> = Arc::default();
    let statuses: Arc<Mutex<Vec<String>>> = Arc::default();
    let watching = {
        let (live2, states, others, statuses) = (
            live.clone(),
            states.clone(),
            others.clone(),
            statuses.clone(),
        );
        live.watch(target.source(&live), move |report| match report {
            Report::Applied { .. } => {
                let at = Instant::now();
                let state = live2.service().state();
                if let Ok(mut s) = states.lock() {
                    s.push((state, at));
                }
            }
            Report::Status { message, .. } => {
                if let Ok(mut o) = statuses.lock() {
                    o.push(message.clone());
                }
            }
            other => {
                if let Ok(mut o) = others.lock() {
                    o.push(other.to_string());
                }
            }
        })
        .unwrap_or_else(|e| panic!("the source starts: {e}"))
    };
    let wait_until = |what: &str, ok: &dyn Fn(&[Seen]) -> bool| {
        let deadline = Instant::now() + Duration::from_secs(300);
        loop {
            if states.lock().map(|s| ok(&s)).unwrap_or(false) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; the source said: {:?}; other reports: {:?}",
                statuses.lock().map(|s| s.clone()).unwrap_or_default(),
                others.lock().map(|s| s.clone()).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    wait_until("the initial providers", &|s| {
        s.last()
            .is_some_and(|(st, _)| st.snapshot().len() == churn.providers)
    });

    // Routing threads: phase 0 idle, 1 churn, 2 stop.
    let phase = Arc::new(AtomicU8::new(0));
    let threads: Vec<_> = (0..churn.routing_threads)
        .map(|t| {
            let (live, phase) = (live.clone(), phase.clone());
            std::thread::spawn(move || {
                let mut call = CallState::seeded(t as u64 + 1);
                let request = Request::new().with_method("search");
                let (mut idle, mut busy) = (Vec::new(), Vec::new());
                let (mut n, mut bad, mut total) = (0u64, 0u64, 0u64);
                loop {
                    let ph = phase.load(Ordering::Relaxed);
                    if ph >= 2 {
                        break;
                    }
                    let state = live.service().state();
                    let t0 = Instant::now();
                    let routed = state.route(&request, &mut call);
                    let ns = t0.elapsed().as_nanos() as u64;
                    if ph == 0 { &mut idle } else { &mut busy }.push(ns);
                    n += 1;
                    if n % 64 == 0 {
                        total += 1;
                        let ok = routed.is_ok()
                            && call.candidates.iter().all(|i| {
                                state.snapshot().providers()[i].param("region") == Some("shanghai")
                            });
                        if !ok {
                            bad += 1;
                        }
                    }
                }
                (idle, busy, total, bad)
            })
        })
        .collect();
    std::thread::sleep(churn.idle);
    phase.store(1, Ordering::Relaxed);

    // The churn: change j at start + j * over / changes, each awaited.
    let start = Instant::now();
    for j in 0..churn.changes {
        let due = start + churn.over.mul_f64(j as f64 / churn.changes.max(1) as f64);
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
        match plan.change(j) {
            (u, true) => target.register(u),
            (u, false) => target.unregister(u),
        }
    }
    outcome.last_change = Some(Instant::now());
    let final_len = churn.providers + churn.changes.div_ceil(2) - churn.changes / 2;
    let plan2 = plan.clone();
    let all = churn.changes;
    wait_until("the final providers", &move |s| {
        s.last().is_some_and(|(st, _)| {
            st.snapshot().len() == final_len && plan2.prefix(st) == Some(all)
        })
    });
    phase.store(2, Ordering::Relaxed);
    for t in threads {
        let (idle, busy, total, bad) = t.join().unwrap_or_else(|_| panic!("routing thread"));
        outcome.idle_ns.extend(idle);
        outcome.churn_ns.extend(busy);
        outcome.checked_calls += total;
        outcome.bad_calls += bad;
    }
    drop(watching);
    let states = std::mem::take(&mut *states.lock().unwrap_or_else(|p| p.into_inner()));
    // From the state serving the initial providers on.
    let first = states
        .iter()
        .position(|(st, _)| st.snapshot().len() == churn.providers)
        .unwrap_or(0);
    outcome.applied = states[first..]
        .iter()
        .map(|(st, at)| Applied {
            generation: st.generation(),
            prefix: plan.prefix(st),
            service_prefixes: plan.service_prefixes(st),
            providers: st.snapshot().len(),
            at: *at,
        })
        .collect();
    outcome.other_reports = std::mem::take(&mut *others.lock().unwrap_or_else(|p| p.into_inner()));
    outcome
}
