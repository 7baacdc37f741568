//! `routechain demo`: every router on real traffic, end to end, measured from the replies.
//!
//! 1. Starts 13 providers in-process ([`provider::LAYOUT`]): real tokio TCP servers on
//!    127.0.0.1 with ephemeral ports, in 3 IDCs of 2 regions (beijing: mt, zf; shanghai:
//!    sh), 2 groups, 2 gray canaries and one provider marked `degraded=true`.
//! 2. Loads the chain from a copy of `rules/examples/demo/` (tag, condition, group and
//!    IDC-weight routers; round robin with consistent hashing for `getUser`; health).
//! 3. Sends calls over TCP ([`wire`]): each is routed and balanced by a [`Service`], failed
//!    attempts fail over, outcomes feed the health tracker. Five phases:
//!    - **baseline**: the route table as shipped (beijing mt 90 / zf 10);
//!    - **after change**: the rule file is rewritten to 50/50 and reloaded
//!      by the live file watcher ([`routechain::live::FileSource`], as `routechain watch`);
//!    - **failover**: the busiest stable provider is killed;
//!    - **breaker**: both gray canaries are killed;
//!    - **registry update**: the provider list drops the dead canaries (gray calls fall back
//!      to stable; the dead stable provider, still listed, stays degraded by address).
//! 4. Prints a report ([`Report`]) whose every number comes from the replies, and checks
//!    it: the demo fails (exit 1) when any check fails.

pub mod provider;
pub mod wire;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use routechain::balance::{SelectError, Selected, Service};
use routechain::core::{CallState, Request, Snapshot};
use routechain::rules::{ChainFile, YamlDoc};
use serde::Serialize;
use tokio::net::TcpStream;

use self::provider::{LAYOUT, RunningProvider};
use self::wire::{CallFrame, ReplyFrame, read_frame, write_frame};
use routechain::live::{FileConfig, FileSource, LiveChain, LiveOptions};
use routechain::rules::load::LoadError;

/// The service the demo's providers serve.
pub const SERVICE: &str = "org.example.UserIndexService";
/// The demo's chain file name inside its directory.
pub const CHAIN_FILE: &str = "demo.chain.yaml";
/// The IDC-weight rule file the demo rewrites.
pub const RULE_FILE: &str = "idc-weight.rule.yaml";
/// The demo's phases.
pub const PHASES: usize = 5;
/// The route table the demo switches to midway.
pub const NEW_TABLE: [(&str, u32); 2] = [("mt", 50), ("zf", 50)];

/// The share of users (by the `user` attribute) the canary plugin sends to canary providers.
pub const PLUGIN_PERCENT: f64 = 10.0;

/// The example canary plugin's library (`router-canary`), when it has been built:
/// `$ROUTECHAIN_CANARY_PLUGIN`, else the workspace's `target/release`, else `target/debug`.
pub fn find_canary_plugin() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("ROUTECHAIN_CANARY_PLUGIN") {
        return Some(PathBuf::from(p)).filter(|p| p.is_file());
    }
    let name = format!(
        "{}router_canary{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    );
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target");
    ["release", "debug"]
        .iter()
        .map(|profile| root.join(profile).join(&name))
        .find(|p| p.is_file())
}

/// Appends the canary plugin entry to the (copied) chain file, whose `routers` list is its
/// last top-level key.
fn add_plugin_entry(chain: &Path, library: &Path) -> Result<(), DemoError> {
    let mut text = std::fs::read_to_string(chain)?;
    if !text.ends_with('\n') {
        text.push('\n');
    }
    let path = serde_json::to_string(&library.display().to_string())
        .map_err(|e| DemoError::Setup(e.to_string()))?;
    text.push_str(&format!(
        "  # Added by the demo: the example plugin, built as {path}.\n  - type: plugin\n    path: {path}\n    priority: 165\n    config: {{percent: {PLUGIN_PERCENT}, attribute: user}}\n"
    ));
    std::fs::write(chain, text)?;
    Ok(())
}

/// How long a call waits for its reply.
const CALL_TIMEOUT: Duration = Duration::from_secs(2);

/// Demo settings.
#[derive(Debug, Clone)]
pub struct Options {
    /// Total calls over the phases.
    pub calls: u64,
    /// Concurrent callers.
    pub concurrency: usize,
    /// Seed of the callers' random sources.
    pub seed: u64,
    /// The directory holding `demo.chain.yaml` (copied before use: never modified).
    pub dir: PathBuf,
    /// Show a progress bar on stderr.
    pub progress: bool,
    /// The canary plugin library to add to the chain (see [`find_canary_plugin`]).
    pub plugin: Option<PathBuf>,
}

/// Why the demo could not run at all.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// I/O (binding, copying files).
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The chain or rule files.
    #[error("{}", .0.render())]
    Load(#[from] LoadError),
    /// Something the demo needs is not as expected.
    #[error("{0}")]
    Setup(String),
}

/// What one phase measured.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PhaseStats {
    /// The phase's name.
    pub name: String,
    /// What happened before it.
    pub action: String,
    /// Beijing's route table in force (read from the rule file).
    pub route_table: BTreeMap<String, u32>,
    /// Calls sent.
    pub calls: u64,
    /// Calls answered.
    pub ok: u64,
    /// Untagged, non-reindex calls answered, by the answering provider's IDC.
    pub idc_calls: BTreeMap<String, u64>,
    /// Answers by provider address.
    pub by_provider: BTreeMap<String, u64>,
    /// Answers from a provider of another group than the call asked for.
    pub misrouted_group: u64,
    /// Untagged calls answered by a gray provider.
    pub untagged_on_gray: u64,
    /// Gray calls answered by gray providers.
    pub gray_on_gray: u64,
    /// Gray calls answered by an untagged provider.
    pub gray_on_untagged: u64,
    /// `reindex` calls answered.
    pub reindex_ok: u64,
    /// `reindex` calls answered outside IDC zf.
    pub reindex_outside_zf: u64,
    /// Answers from the provider marked `degraded=true`.
    pub degraded_param_hits: u64,
    /// Replies whose id did not match the call.
    pub id_mismatch: u64,
    /// Calls answered after at least one failed attempt.
    pub failovers: u64,
    /// Attempts that failed (connection refused or closed, timeout).
    pub failed_attempts: u64,
    /// Attempts sent to a killed provider.
    pub attempts_on_killed: u64,
    /// Calls refused by the breaker (service unavailable).
    pub rejected: u64,
    /// Rejected calls that were gray calls.
    pub rejected_gray: u64,
    /// Calls that failed otherwise, by reason.
    pub failed: BTreeMap<String, u64>,
    /// Untagged calls that did not get an answer.
    pub untagged_failed: u64,
    /// Gray calls that did not get an answer (refused included).
    pub gray_failed: u64,
    /// Untagged calls answered.
    pub untagged_ok: u64,
    /// Untagged calls answered by a `canary=true` provider.
    pub canary_calls: u64,
    /// Per user: bit 1 answered by a stable provider, bit 2 by a canary provider.
    #[serde(skip)]
    user_sides: BTreeMap<String, u8>,
    /// Wall time of the phase.
    pub seconds: f64,
    /// Breaker trips during the phase.
    pub breaker_trips: u64,
    #[serde(skip)]
    select_ns: Vec<u64>,
    #[serde(skip)]
    call_ns: Vec<u64>,
    #[serde(skip)]
    reject_ns: Vec<u64>,
}

impl PhaseStats {
    fn merge(&mut self, o: PhaseStats) {
        self.calls += o.calls;
        self.ok += o.ok;
        for (k, v) in o.idc_calls {
            *self.idc_calls.entry(k).or_default() += v;
        }
        for (k, v) in o.by_provider {
            *self.by_provider.entry(k).or_default() += v;
        }
        for (k, v) in o.failed {
            *self.failed.entry(k).or_default() += v;
        }
        self.misrouted_group += o.misrouted_group;
        self.untagged_on_gray += o.untagged_on_gray;
        self.gray_on_gray += o.gray_on_gray;
        self.gray_on_untagged += o.gray_on_untagged;
        self.reindex_ok += o.reindex_ok;
        self.reindex_outside_zf += o.reindex_outside_zf;
        self.degraded_param_hits += o.degraded_param_hits;
        self.id_mismatch += o.id_mismatch;
        self.failovers += o.failovers;
        self.failed_attempts += o.failed_attempts;
        self.attempts_on_killed += o.attempts_on_killed;
        self.rejected += o.rejected;
        self.rejected_gray += o.rejected_gray;
        self.untagged_failed += o.untagged_failed;
        self.gray_failed += o.gray_failed;
        self.untagged_ok += o.untagged_ok;
        self.canary_calls += o.canary_calls;
        for (k, v) in o.user_sides {
            *self.user_sides.entry(k).or_default() |= v;
        }
        self.select_ns.extend(o.select_ns);
        self.call_ns.extend(o.call_ns);
        self.reject_ns.extend(o.reject_ns);
    }
}

/// One check of the report.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    /// What is checked.
    pub name: String,
    /// What was measured.
    pub detail: String,
    /// Whether it holds.
    pub pass: bool,
}

/// Latency percentiles in microseconds.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Latency {
    /// Samples.
    pub samples: usize,
    /// Median.
    pub p50_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
}

impl Latency {
    fn of(mut ns: Vec<u64>) -> Self {
        if ns.is_empty() {
            return Latency::default();
        }
        ns.sort_unstable();
        let at = |q: usize| ns[(ns.len() * q / 100).min(ns.len() - 1)] as f64 / 1000.0;
        Latency {
            samples: ns.len(),
            p50_us: at(50),
            p99_us: at(99),
        }
    }
}

/// The demo's report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The providers, as registered.
    pub providers: Vec<String>,
    /// The phases.
    pub phases: Vec<PhaseStats>,
    /// Route + balance time per `select`.
    pub routing: Latency,
    /// Whole call time (select + TCP round trip, failovers included), answered calls.
    pub calls: Latency,
    /// Time to the breaker's refusal, calls refused before any network attempt.
    pub rejections: Latency,
    /// Calls per second over all phases.
    pub throughput: f64,
    /// Time from writing the rule file to the file watcher's applied report (debounce
    /// included).
    pub reload_ms: f64,
    /// Breaker trips in total.
    pub breaker_trips: u64,
    /// Providers degraded by the health tracker.
    pub degradations: u64,
    /// The canary plugin library in the chain, if it was built.
    pub plugin: Option<String>,
    /// Users seen on untagged calls.
    pub users: u64,
    /// Users answered only by canary providers.
    pub canary_users: u64,
    /// Users answered by both canary and stable providers.
    pub mixed_users: u64,
    /// The checks.
    pub checks: Vec<Check>,
    /// True when every check passed.
    pub pass: bool,
}

/// How long the demo waits for the file watcher to apply the rule change.
const WATCH_TIMEOUT: Duration = Duration::from_secs(10);

/// Waits for the live chain's next report (the file watcher's, or a provider update's); it
/// must say "applied".
async fn next_applied(reports: &std::sync::mpsc::Receiver<String>) -> Result<String, DemoError> {
    let deadline = Instant::now() + WATCH_TIMEOUT;
    loop {
        match reports.try_recv() {
            Ok(r) if r.starts_with("applied") => return Ok(r),
            Ok(r) => {
                return Err(DemoError::Setup(format!(
                    "the live chain did not apply the change: {r}"
                )));
            }
            Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                return Err(DemoError::Setup("the file watcher stopped".into()));
            }
            Err(std::sync::mpsc::TryRecvError::Empty) => {}
        }
        if Instant::now() > deadline {
            return Err(DemoError::Setup(format!(
                "the file watcher did not apply the change within {WATCH_TIMEOUT:?}"
            )));
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Beijing's route table as the rule file says.
fn read_route_table(rule: &Path) -> Result<BTreeMap<String, u32>, DemoError> {
    let text = std::fs::read_to_string(rule)?;
    let doc = YamlDoc::parse(rule.display().to_string(), &text)
        .map_err(|e| DemoError::Setup(e.render()))?;
    let table = doc
        .value
        .pointer("/route_tables/beijing")
        .and_then(|v| v.as_object())
        .ok_or_else(|| DemoError::Setup(format!("{}: no route_tables.beijing", rule.display())))?;
    Ok(table
        .iter()
        .map(|(k, v)| (k.to_lowercase(), v.as_u64().unwrap_or(0) as u32))
        .collect())
}

/// Rewrites beijing's route table in the rule file, in place: the value on the line of
/// `route_tables.beijing` becomes a flow mapping of `table`.
fn write_route_table(rule: &Path, table: &[(&str, u32)]) -> Result<(), DemoError> {
    let text = std::fs::read_to_string(rule)?;
    let doc = YamlDoc::parse(rule.display().to_string(), &text)
        .map_err(|e| DemoError::Setup(e.render()))?;
    let path = routechain::core::FieldPath::root()
        .key("route_tables")
        .key("beijing");
    if doc.get(&path).is_none() {
        return Err(DemoError::Setup(format!(
            "{}: no route_tables.beijing to rewrite",
            rule.display()
        )));
    }
    let at = doc.locate(&path);
    let flow = table
        .iter()
        .map(|(idc, w)| format!("{idc}: {w}"))
        .collect::<Vec<_>>()
        .join(", ");
    let mut out = String::new();
    for (n, line) in text.lines().enumerate() {
        if n + 1 == at.line {
            let col = line
                .char_indices()
                .nth(at.column.saturating_sub(1))
                .map_or(line.len(), |(i, _)| i);
            out.push_str(&line[..col]);
            out.push_str(&format!("{{{flow}}}"));
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    std::fs::write(rule, out)?;
    Ok(())
}

/// A copy of the demo directory in a temporary directory, removed on drop.
struct WorkDir(PathBuf);

impl WorkDir {
    fn copy_of(dir: &Path) -> Result<Self, DemoError> {
        let work = std::env::temp_dir().join(format!(
            "routechain-demo-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        ));
        std::fs::create_dir_all(&work)?;
        let w = WorkDir(work);
        for entry in std::fs::read_dir(dir).map_err(|e| {
            DemoError::Setup(format!(
                "cannot read the demo directory {}: {e}",
                dir.display()
            ))
        })? {
            let path = entry?.path();
            if path.is_file() {
                if let Some(name) = path.file_name() {
                    std::fs::copy(&path, w.0.join(name))?;
                }
            }
        }
        Ok(w)
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What kind of call number `n` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// getUser with dubbo.tag=gray (the canary's users).
    Gray,
    /// reindex, group idx_order (condition: only in zf).
    Reindex,
    /// getUser, group idx_user.
    GetUser,
    /// listOrders, group idx_order.
    ListOrders,
}

fn kind_of(n: u64) -> Kind {
    match n % 20 {
        0 | 10 => Kind::Gray,
        5 => Kind::Reindex,
        x if x % 2 == 0 => Kind::GetUser,
        _ => Kind::ListOrders,
    }
}

fn plan(n: u64) -> (Kind, CallFrame) {
    let kind = kind_of(n);
    let (method, group) = match kind {
        Kind::Gray | Kind::GetUser => ("getUser", "idx_user"),
        Kind::Reindex => ("reindex", "idx_order"),
        Kind::ListOrders => ("listOrders", "idx_order"),
    };
    let mut frame = CallFrame {
        id: n,
        method: method.to_string(),
        arguments: vec![serde_json::Value::String(format!("u-{}", n % 997))],
        attachments: BTreeMap::new(),
        attributes: [
            ("group".to_string(), group.to_string()),
            ("user".to_string(), format!("u-{}", n % 997)),
        ]
        .into(),
    };
    if kind == Kind::Gray {
        frame
            .attachments
            .insert("dubbo.tag".to_string(), "gray".to_string());
    }
    (kind, frame)
}

fn request_of(frame: &CallFrame) -> Request {
    Request {
        service: Some(SERVICE.to_string()),
        consumer: None,
        method: Some(frame.method.clone()),
        arguments: frame.arguments.clone(),
        parameter_types: Vec::new(),
        attachments: frame.attachments.iter().collect(),
        attributes: frame.attributes.iter().collect(),
    }
}

struct Shared {
    service: Arc<Service>,
    providers: Vec<RunningProvider>,
    /// Address → index in `providers`.
    by_address: BTreeMap<String, usize>,
    retries: u32,
    progress: indicatif::ProgressBar,
}

/// One caller's connections, one per provider address.
#[derive(Default)]
struct Connections(BTreeMap<String, TcpStream>);

impl Connections {
    async fn call(&mut self, address: &str, frame: &CallFrame) -> std::io::Result<ReplyFrame> {
        let mut stream = match self.0.remove(address) {
            Some(s) => s,
            None => {
                let s = tokio::time::timeout(CALL_TIMEOUT, TcpStream::connect(address))
                    .await
                    .map_err(|_| std::io::Error::other("connect timeout"))??;
                s.set_nodelay(true)?;
                s
            }
        };
        let reply = tokio::time::timeout(CALL_TIMEOUT, async {
            write_frame(&mut stream, frame).await?;
            read_frame::<_, ReplyFrame>(&mut stream).await
        })
        .await
        .map_err(|_| std::io::Error::other("call timeout"))??;
        self.0.insert(address.to_string(), stream);
        Ok(reply)
    }
}

async fn caller(shared: Arc<Shared>, next: Arc<AtomicU64>, end: u64, seed: u64) -> PhaseStats {
    let mut stats = PhaseStats::default();
    let mut call = CallState::seeded(seed);
    let mut connections = Connections::default();
    let mut tried: Vec<Selected> = Vec::new();
    loop {
        let n = next.fetch_add(1, Ordering::Relaxed);
        if n >= end {
            break;
        }
        let (kind, frame) = plan(n);
        let request = request_of(&frame);
        stats.calls += 1;
        tried.clear();
        let started = Instant::now();
        loop {
            let t = Instant::now();
            let selected = shared.service.select(&request, &tried, &mut call);
            stats.select_ns.push(t.elapsed().as_nanos() as u64);
            let selected = match selected {
                Ok(s) => s,
                Err(e) => {
                    let reason = match e {
                        SelectError::ServiceUnavailable { .. } => {
                            stats.rejected += 1;
                            stats.rejected_gray += u64::from(kind == Kind::Gray);
                            if tried.is_empty() {
                                // Refused before any network attempt.
                                stats.reject_ns.push(started.elapsed().as_nanos() as u64);
                            }
                            None
                        }
                        SelectError::NoProvider(_) => Some("no provider"),
                        SelectError::Exhausted { .. } => Some("every routed provider failed"),
                    };
                    if let Some(reason) = reason {
                        *stats.failed.entry(reason.to_string()).or_default() += 1;
                    }
                    stats.untagged_failed += u64::from(kind != Kind::Gray);
                    stats.gray_failed += u64::from(kind == Kind::Gray);
                    break;
                }
            };
            let address = selected.address().to_string();
            let killed = shared
                .by_address
                .get(&address)
                .is_some_and(|&i| shared.providers[i].is_killed());
            stats.attempts_on_killed += u64::from(killed);
            let result = {
                let _in_flight = selected.begin();
                connections.call(&address, &frame).await
            };
            match result {
                Ok(reply) => {
                    shared.service.report_success(&selected);
                    stats.call_ns.push(started.elapsed().as_nanos() as u64);
                    record(&shared, &mut stats, kind, &frame, &reply);
                    stats.failovers += u64::from(!tried.is_empty());
                    break;
                }
                Err(e) => {
                    tracing::debug!(%address, "attempt failed: {e}");
                    shared.service.report_failure(&selected);
                    stats.failed_attempts += 1;
                    tried.push(selected);
                    if tried.len() as u32 > shared.retries {
                        *stats
                            .failed
                            .entry("retries exhausted".to_string())
                            .or_default() += 1;
                        stats.untagged_failed += u64::from(kind != Kind::Gray);
                        stats.gray_failed += u64::from(kind == Kind::Gray);
                        break;
                    }
                }
            }
        }
        shared.progress.inc(1);
    }
    stats
}

fn record(
    shared: &Shared,
    stats: &mut PhaseStats,
    kind: Kind,
    frame: &CallFrame,
    reply: &ReplyFrame,
) {
    stats.ok += 1;
    stats.id_mismatch += u64::from(reply.id != frame.id || reply.method != frame.method);
    *stats.by_provider.entry(reply.address.clone()).or_default() += 1;
    if reply.group.as_deref() != frame.attributes.get("group").map(String::as_str) {
        stats.misrouted_group += 1;
    }
    let gray = reply.tag.as_deref() == Some("gray");
    match kind {
        Kind::Gray => {
            stats.gray_on_gray += u64::from(gray);
            stats.gray_on_untagged += u64::from(!gray);
        }
        _ => {
            stats.untagged_on_gray += u64::from(gray);
            stats.untagged_ok += 1;
            stats.canary_calls += u64::from(reply.canary);
            if let Some(user) = frame.attributes.get("user") {
                *stats.user_sides.entry(user.clone()).or_default() |=
                    if reply.canary { 2 } else { 1 };
            }
        }
    }
    if shared
        .by_address
        .get(&reply.address)
        .is_some_and(|&i| shared.providers[i].spec.degraded)
    {
        stats.degraded_param_hits += 1;
    }
    match kind {
        Kind::Reindex => {
            stats.reindex_ok += 1;
            stats.reindex_outside_zf += u64::from(reply.idc != "zf");
        }
        Kind::GetUser | Kind::ListOrders => {
            *stats.idc_calls.entry(reply.idc.clone()).or_default() += 1;
        }
        Kind::Gray => {}
    }
}

async fn run_phase(
    shared: &Arc<Shared>,
    opts: &Options,
    range: std::ops::Range<u64>,
    phase: usize,
) -> PhaseStats {
    let next = Arc::new(AtomicU64::new(range.start));
    let trips_before = shared.service.stats().breaker_trips;
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for w in 0..opts.concurrency.max(1) {
        let seed = opts
            .seed
            .wrapping_mul(1_000_003)
            .wrapping_add((phase * 1000 + w) as u64);
        tasks.spawn(caller(shared.clone(), next.clone(), range.end, seed));
    }
    let mut stats = PhaseStats::default();
    while let Some(r) = tasks.join_next().await {
        match r {
            Ok(s) => stats.merge(s),
            Err(e) => tracing::error!("caller task failed: {e}"),
        }
    }
    stats.seconds = started.elapsed().as_secs_f64();
    stats.breaker_trips = shared.service.stats().breaker_trips - trips_before;
    stats
}

/// Runs the demo and returns its report (check `report.pass`).
pub fn run(opts: &Options) -> Result<Report, DemoError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(run_async(opts))
}

async fn run_async(opts: &Options) -> Result<Report, DemoError> {
    let work = WorkDir::copy_of(&opts.dir)?;
    let chain_path = work.0.join(CHAIN_FILE);
    let rule_path = work.0.join(RULE_FILE);
    let mut providers = Vec::new();
    for spec in LAYOUT {
        providers.push(RunningProvider::start(spec, SERVICE).await?);
    }
    let snapshot = Snapshot::new(
        1,
        providers.iter().map(|p| p.url.clone()).collect::<Vec<_>>(),
    );
    if let Some(library) = &opts.plugin {
        add_plugin_entry(&chain_path, library)?;
    }
    let chain = ChainFile::load(&chain_path).map_err(LoadError::Invalid)?;
    // The chain is live: a file watcher applies changes to the chain file and its rule
    // files (`routechain watch`'s file source).
    let live = Arc::new(LiveChain::with_providers(
        chain,
        routechain::registry(),
        LiveOptions::default(),
        snapshot,
    )?);
    // The live chain's service: the chain file's balancing settings, following its reloads.
    let service = live.service().clone();
    let (report_tx, reports) = std::sync::mpsc::channel::<String>();
    let _watching = live
        .watch(
            Box::new(FileSource::new(FileConfig::new(chain_path.clone(), None))),
            move |report| {
                let _ = report_tx.send(report.to_string());
            },
        )
        .map_err(|e| DemoError::Setup(format!("cannot watch {}: {e}", chain_path.display())))?;
    let retries = service.config().retries;
    let by_address = providers
        .iter()
        .enumerate()
        .map(|(i, p)| (p.address().to_string(), i))
        .collect();
    let progress = if opts.progress {
        let bar = indicatif::ProgressBar::with_draw_target(
            Some(opts.calls),
            indicatif::ProgressDrawTarget::stderr(),
        );
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "{spinner} {msg:<34} [{bar:40.cyan/blue}] {pos:>6}/{len} calls  {per_sec}",
        ) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar
    } else {
        indicatif::ProgressBar::hidden()
    };
    let shared = Arc::new(Shared {
        service,
        providers,
        by_address,
        retries,
        progress,
    });
    let bounds: Vec<u64> = (0..=PHASES as u64)
        .map(|k| opts.calls * k / PHASES as u64)
        .collect();
    let mut phases = Vec::new();
    let mut reload_ms = 0.0;
    let mut killed_stable = String::new();
    let started = Instant::now();
    let mut phase_time = 0.0;
    for phase in 0..PHASES {
        let (name, action) = match phase {
            0 => ("baseline".to_string(), "route table as shipped".to_string()),
            1 => {
                let t = Instant::now();
                write_route_table(&rule_path, &NEW_TABLE)?;
                let applied = next_applied(&reports).await?;
                reload_ms = t.elapsed().as_secs_f64() * 1000.0;
                (
                    "after change".to_string(),
                    format!(
                        "rewrote {RULE_FILE}; the file watcher {applied} {reload_ms:.0} ms after the write"
                    ),
                )
            }
            2 => {
                // The busiest stable provider: the heaviest of beijing/mt's idx_order.
                let victim = shared
                    .providers
                    .iter()
                    .filter(|p| p.spec.tag.is_none() && !p.spec.degraded && p.spec.idc == "mt")
                    .max_by_key(|p| p.spec.weight)
                    .ok_or_else(|| DemoError::Setup("no stable provider in mt".into()))?;
                victim.kill();
                killed_stable = victim.address().to_string();
                (
                    "failover".to_string(),
                    format!(
                        "killed {} ({}/{} {}, weight {})",
                        victim.address(),
                        victim.spec.region,
                        victim.spec.idc,
                        victim.spec.group,
                        victim.spec.weight
                    ),
                )
            }
            3 => {
                let gray: Vec<&RunningProvider> = shared
                    .providers
                    .iter()
                    .filter(|p| p.spec.tag.is_some())
                    .collect();
                for p in &gray {
                    p.kill();
                }
                (
                    "breaker".to_string(),
                    format!(
                        "killed both gray canaries ({})",
                        gray.iter()
                            .map(|p| p.address())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )
            }
            _ => {
                // The registry notices the dead canaries (not yet the dead stable provider).
                let registered: Vec<routechain::core::Url> = shared
                    .providers
                    .iter()
                    .filter(|p| p.spec.tag.is_none())
                    .map(|p| p.url.clone())
                    .collect();
                let n = registered.len();
                for report in live.apply_providers("registry", registered) {
                    let report = report.to_string();
                    if !report.starts_with("applied") {
                        return Err(DemoError::Setup(format!(
                            "the provider update was not applied: {report}"
                        )));
                    }
                }
                (
                    "registry update".to_string(),
                    format!(
                        "the provider list drops the dead canaries ({n} providers; the dead stable provider is still listed)"
                    ),
                )
            }
        };
        shared
            .progress
            .set_message(format!("phase {}: {name}", phase + 1));
        let mut stats = run_phase(&shared, opts, bounds[phase]..bounds[phase + 1], phase).await;
        phase_time += stats.seconds;
        stats.name = name;
        stats.action = action;
        stats.route_table = read_route_table(&rule_path)?;
        phases.push(stats);
    }
    let _ = started;
    shared.progress.finish_and_clear();
    let service_stats = shared.service.stats();
    let mut all = PhaseStats::default();
    for p in &phases {
        all.merge(p.clone());
    }
    // In the current snapshot (after the registry update): carried over by address.
    let state = shared.service.state();
    let killed_degraded = state
        .snapshot()
        .providers()
        .iter()
        .position(|p| p.address() == killed_stable)
        .is_some_and(|i| shared.service.is_degraded(i));
    let health = shared.service.config().health;
    let mut report = Report {
        providers: shared.providers.iter().map(|p| p.url.to_string()).collect(),
        routing: Latency::of(std::mem::take(&mut all.select_ns)),
        calls: Latency::of(std::mem::take(&mut all.call_ns)),
        rejections: Latency::of(std::mem::take(&mut all.reject_ns)),
        throughput: if phase_time > 0.0 {
            all.calls as f64 / phase_time
        } else {
            0.0
        },
        reload_ms,
        breaker_trips: service_stats.breaker_trips,
        degradations: service_stats.degradations,
        plugin: opts.plugin.as_ref().map(|p| p.display().to_string()),
        users: all.user_sides.len() as u64,
        canary_users: all.user_sides.values().filter(|s| **s == 2).count() as u64,
        mixed_users: all.user_sides.values().filter(|s| **s == 3).count() as u64,
        checks: Vec::new(),
        pass: false,
        phases,
    };
    report.checks = checks(&report, &all, killed_degraded, health, opts);
    report.pass = report.checks.iter().all(|c| c.pass);
    Ok(report)
}

/// Binomial tolerance in percentage points: 1 pp plus 4.5 standard errors.
fn tolerance_pp(p: f64, n: u64) -> f64 {
    if n == 0 {
        return 100.0;
    }
    1.0 + 4.5 * (p * (1.0 - p) / n as f64).sqrt() * 100.0
}

fn idc_check(phase: &PhaseStats) -> Check {
    let n: u64 = phase.idc_calls.values().sum();
    let mut worst = Vec::new();
    let mut pass = n > 0;
    let mut idcs: Vec<&str> = phase.route_table.keys().map(String::as_str).collect();
    for idc in phase.idc_calls.keys() {
        if !idcs.contains(&idc.as_str()) {
            idcs.push(idc);
        }
    }
    for idc in idcs {
        let expected = *phase.route_table.get(idc).unwrap_or(&0) as f64 / 100.0;
        let got = *phase.idc_calls.get(idc).unwrap_or(&0) as f64 / n.max(1) as f64;
        let tol = tolerance_pp(expected, n);
        let off = (got - expected).abs() * 100.0;
        pass &= off <= tol;
        worst.push(format!(
            "{idc} {:.1}% (configured {:.0}%, ±{tol:.1}pp)",
            got * 100.0,
            expected * 100.0
        ));
    }
    Check {
        name: format!("IDC split follows the route table ({})", phase.name),
        detail: format!("{n} untagged calls: {}", worst.join(", ")),
        pass,
    }
}

fn checks(
    r: &Report,
    all: &PhaseStats,
    killed_degraded: bool,
    health: routechain::balance::HealthConfig,
    opts: &Options,
) -> Vec<Check> {
    let threshold = health.failure_threshold;
    // A run whose last three phases outlast the cool-down lets the dead provider back in on
    // probation once per cool-down (one attempt each, which fails and degrades it again).
    let since_kill: f64 = r.phases[2..].iter().map(|p| p.seconds).sum();
    let probations = (since_kill / health.cooldown.as_secs_f64().max(1e-3)).floor() as u64;
    let mut c = Vec::new();
    let check = |name: &str, detail: String, pass: bool| Check {
        name: name.to_string(),
        detail,
        pass,
    };
    c.push(idc_check(&r.phases[0]));
    c.push(idc_check(&r.phases[1]));
    c.push(check(
        "every call answered by its own group",
        format!("{} misrouted of {} answered", all.misrouted_group, all.ok),
        all.misrouted_group == 0 && all.ok > 0,
    ));
    c.push(check(
        "tag isolation: no untagged call on a gray provider",
        format!("{} untagged calls answered by gray", all.untagged_on_gray),
        all.untagged_on_gray == 0,
    ));
    let gray_before: u64 = r.phases[..3].iter().map(|p| p.gray_on_gray).sum();
    let gray_escaped: u64 = r.phases[..4].iter().map(|p| p.gray_on_untagged).sum();
    c.push(check(
        "gray calls reach only the gray canaries while they are registered",
        format!("{gray_before} gray calls on gray, {gray_escaped} on untagged"),
        gray_before > 0 && gray_escaped == 0,
    ));
    c.push(check(
        "condition: reindex runs only in zf",
        format!(
            "{} reindex calls, {} outside zf",
            all.reindex_ok, all.reindex_outside_zf
        ),
        all.reindex_ok > 0 && all.reindex_outside_zf == 0,
    ));
    c.push(check(
        "the provider marked degraded=true gets no call",
        format!("{} calls", all.degraded_param_hits),
        all.degraded_param_hits == 0,
    ));
    c.push(check(
        "every reply answers its own call",
        format!("{} mismatched", all.id_mismatch),
        all.id_mismatch == 0,
    ));
    let p3 = &r.phases[2];
    c.push(check(
        "failover: calls to the killed provider are retried elsewhere",
        format!(
            "{} failovers, {} failed attempts, {} untagged calls unanswered",
            p3.failovers, p3.failed_attempts, p3.untagged_failed
        ),
        p3.failovers > 0 && p3.untagged_failed == 0,
    ));
    let bound = threshold as u64 + 2 * opts.concurrency as u64 + probations;
    c.push(check(
        "health: the killed provider is degraded after a few failures",
        format!(
            "{} attempts on it (bound {bound}: threshold {threshold} + in-flight); {} degradations in all",
            p3.attempts_on_killed, r.degradations
        ),
        p3.attempts_on_killed <= bound && r.degradations >= 1,
    ));
    let p4 = &r.phases[3];
    c.push(check(
        "breaker: gray calls fail fast once both canaries are degraded",
        format!(
            "{} trip(s), {} calls refused ({} gray), refusal p99 {:.0} µs",
            p4.breaker_trips, p4.rejected, p4.rejected_gray, r.rejections.p99_us
        ),
        p4.breaker_trips >= 1 && p4.rejected > 0 && p4.rejected == p4.rejected_gray,
    ));
    let p5 = &r.phases[4];
    c.push(check(
        "registry update: gray calls fall back to stable without the canaries",
        format!(
            "{} gray calls on untagged, {} on gray, {} unanswered",
            p5.gray_on_untagged, p5.gray_on_gray, p5.gray_failed
        ),
        p5.gray_on_untagged > 0 && p5.gray_on_gray == 0 && p5.gray_failed == 0,
    ));
    c.push(check(
        "health carried over by address: the dead provider stays out of the new list",
        format!(
            "degraded in the new snapshot: {killed_degraded}; {} attempts on it ({probations} probation(s) allowed)",
            p5.attempts_on_killed
        ),
        (killed_degraded || probations > 0) && p5.attempts_on_killed <= probations,
    ));
    if r.plugin.is_some() {
        let share = r.canary_users as f64 / r.users.max(1) as f64;
        let tol = tolerance_pp(PLUGIN_PERCENT / 100.0, r.users);
        c.push(check(
            "plugin canary: its share of users goes to the canary providers",
            format!(
                "{} of {} users ({:.1}%, configured {PLUGIN_PERCENT}%, ±{tol:.1}pp); {} untagged calls on canary providers",
                r.canary_users,
                r.users,
                share * 100.0,
                all.canary_calls
            ),
            r.users > 0 && (share * 100.0 - PLUGIN_PERCENT).abs() <= tol,
        ));
        c.push(check(
            "plugin canary: a user stays on one side",
            format!(
                "{} users answered by both canary and stable providers",
                r.mixed_users
            ),
            r.mixed_users == 0,
        ));
    }
    c.push(check(
        "every untagged call is answered",
        format!("{} unanswered", all.untagged_failed),
        all.untagged_failed == 0,
    ));
    c
}

fn bar(share: f64, width: usize) -> String {
    "█".repeat((share * width as f64).round() as usize)
}

impl Report {
    /// The human-readable report.
    pub fn render(&self) -> String {
        let mut s = String::new();
        s.push_str(&format!(
            "routechain demo — {} providers on 127.0.0.1 (beijing: mt, zf; shanghai: sh), {} calls\n",
            self.providers.len(),
            self.phases.iter().map(|p| p.calls).sum::<u64>()
        ));
        for (i, p) in self.phases.iter().enumerate() {
            let table = p
                .route_table
                .iter()
                .map(|(k, v)| format!("{k}: {v}"))
                .collect::<Vec<_>>()
                .join(", ");
            s.push_str(&format!(
                "\nPhase {} — {}: {}\n  {} calls in {:.2} s, {} answered; beijing route table {{{table}}}\n",
                i + 1,
                p.name,
                p.action,
                p.calls,
                p.seconds,
                p.ok
            ));
            let n: u64 = p.idc_calls.values().sum();
            s.push_str("  IDC   untagged calls   share   configured\n");
            let mut idcs: Vec<String> = vec!["mt".into(), "zf".into(), "sh".into()];
            for k in p.idc_calls.keys() {
                if !idcs.contains(k) {
                    idcs.push(k.clone());
                }
            }
            for idc in idcs {
                let got = *p.idc_calls.get(&idc).unwrap_or(&0);
                let share = got as f64 / n.max(1) as f64;
                s.push_str(&format!(
                    "  {idc:<4} {got:>15}  {:>5.1}%   {:>5}%  {}\n",
                    share * 100.0,
                    p.route_table.get(&idc).copied().unwrap_or(0),
                    bar(share, 30)
                ));
            }
            s.push_str(&format!(
                "  gray calls: {} on gray, {} on stable   plugin canary calls: {}   reindex calls: {}   failovers: {}   failed attempts: {}   refused by breaker: {}   breaker trips: {}\n",
                p.gray_on_gray, p.gray_on_untagged, p.canary_calls, p.reindex_ok, p.failovers, p.failed_attempts, p.rejected, p.breaker_trips
            ));
            if !p.failed.is_empty() {
                let f = p
                    .failed
                    .iter()
                    .map(|(k, v)| format!("{k}: {v}"))
                    .collect::<Vec<_>>()
                    .join(", ");
                s.push_str(&format!("  unanswered: {f}\n"));
            }
        }
        s.push_str(&format!(
            "\nRouting (route + balance per select): p50 {:.1} µs, p99 {:.1} µs over {} selects\n",
            self.routing.p50_us, self.routing.p99_us, self.routing.samples
        ));
        s.push_str(&format!(
            "Calls (select + TCP round trip, failovers included): p50 {:.0} µs, p99 {:.0} µs\n",
            self.calls.p50_us, self.calls.p99_us
        ));
        if self.rejections.samples > 0 {
            s.push_str(&format!(
                "Breaker refusals before any network attempt: {} calls, p50 {:.1} µs, p99 {:.1} µs\n",
                self.rejections.samples, self.rejections.p50_us, self.rejections.p99_us
            ));
        }
        s.push_str(&format!(
            "Throughput: {:.0} calls/s; providers degraded by health: {}; breaker trips: {}; rule file written → applied by the watcher: {:.0} ms\n",
            self.throughput, self.degradations, self.breaker_trips, self.reload_ms
        ));
        match &self.plugin {
            Some(p) => s.push_str(&format!(
                "Plugin router: canary ({p}): {} of {} users on the canary providers\n",
                self.canary_users, self.users
            )),
            None => s.push_str(
                "Plugin router: not in the chain (build it with `cargo build --release -p router-canary` to include it)\n",
            ),
        }
        s.push_str("\nChecks\n");
        for c in &self.checks {
            s.push_str(&format!(
                "  {} {} — {}\n",
                if c.pass { "PASS" } else { "FAIL" },
                c.name,
                c.detail
            ));
        }
        let passed = self.checks.iter().filter(|c| c.pass).count();
        s.push_str(&format!(
            "\nRESULT: {} ({passed}/{} checks passed)\n",
            if self.pass { "PASS" } else { "FAIL" },
            self.checks.len()
        ));
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_call_mix_has_every_kind() {
        let kinds: Vec<Kind> = (0..20).map(kind_of).collect();
        let count = |k| kinds.iter().filter(|x| **x == k).count();
        assert_eq!(count(Kind::Gray), 2);
        assert_eq!(count(Kind::Reindex), 1);
        assert_eq!(count(Kind::GetUser), 8);
        assert_eq!(count(Kind::ListOrders), 9);
    }

    #[test]
    fn the_route_table_is_rewritten_in_place() {
        let dir = std::env::temp_dir().join(format!("routechain-demo-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let rule = dir.join("r.yaml");
        std::fs::write(
            &rule,
            "# comment\nidcs:\n  beijing: [mt, zf]\nroute_tables:\n  beijing: {mt: 90, zf: 10}\nforce: false\n",
        )
        .unwrap();
        assert_eq!(
            read_route_table(&rule).unwrap(),
            [("mt".to_string(), 90), ("zf".to_string(), 10)].into()
        );
        write_route_table(&rule, &NEW_TABLE).unwrap();
        let text = std::fs::read_to_string(&rule).unwrap();
        assert!(
            text.contains("  beijing: {mt: 50, zf: 50}\nforce: false"),
            "{text}"
        );
        assert_eq!(
            read_route_table(&rule).unwrap(),
            [("mt".to_string(), 50), ("zf".to_string(), 50)].into()
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn tolerance_shrinks_with_samples() {
        assert!(tolerance_pp(0.9, 100) > tolerance_pp(0.9, 10_000));
        assert!((tolerance_pp(0.0, 50) - 1.0).abs() < 1e-9);
    }
}
