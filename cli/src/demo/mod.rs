//! `routechain demo`: every router on real traffic, end to end, measured from the replies.
//!
//! 1. Starts 17 providers in-process ([`servers::LAYOUT`]): real tonic gRPC servers on
//!    127.0.0.1 with ephemeral ports, in 3 IDCs of 2 regions (beijing: mt, zf; shanghai:
//!    sh), 2 groups, 2 gray canaries, 4 plugin canaries and one provider marked
//!    `degraded=true`.
//! 2. Loads the chain from a copy of `rules/examples/demo/` (tag, condition, group and
//!    IDC-weight routers; round robin with consistent hashing for `getUser`; health).
//! 3. Sends real gRPC calls ([`rpc`]) from concurrent callers ([`caller`]) through the
//!    routechain tower layer ([`routechain_tower::RouteService`]): each call is routed and
//!    balanced, failed attempts fail over, outcomes feed the health tracker. Five phases:
//!    - **baseline**: the route table as shipped (beijing mt 90 / zf 10);
//!    - **after change**: the rule file is rewritten to 50/50 and reloaded
//!      by the live file watcher ([`routechain::live::FileSource`], as `routechain watch`);
//!    - **failover**: the busiest stable provider is killed;
//!    - **breaker**: both gray canaries are killed;
//!    - **registry update**: the provider list drops the dead canaries (gray calls fall back
//!      to stable; the dead stable provider, still listed, stays degraded by address).
//! 4. Prints a report ([`Report`]) whose every number comes from the replies, and checks
//!    it ([`checks`]): the demo fails (exit 1) when any check fails.

pub mod caller;
pub mod checks;
pub mod files;
pub mod plan;
pub mod report;
pub mod rpc;
pub mod servers;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use routechain::core::Snapshot;
use routechain::live::{FileConfig, FileSource, LiveChain, LiveOptions};
use routechain::rules::ChainFile;
use routechain::rules::load::LoadError;
use routechain_tower::RouteLayer;
use tower_layer::Layer;

use self::caller::{Counting, Shared, run_phase};
pub use self::files::find_canary_plugin;
use self::files::{WorkDir, add_plugin_entry, next_applied, read_route_table, write_route_table};
pub use self::report::Report;
use self::report::{Latency, PhaseStats};
use self::rpc::UserIndexClient;
use self::servers::{LAYOUT, RunningProvider};

/// The service the demo's providers serve.
pub const SERVICE: &str = rpc::SERVICE_NAME;
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

/// Demo settings.
#[derive(Debug, Clone)]
pub struct Options {
    /// Total calls over the phases.
    pub calls: u64,
    /// Concurrent callers.
    pub concurrency: usize,
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
    let chain_path = work.path().join(CHAIN_FILE);
    let rule_path = work.path().join(RULE_FILE);
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
    let chain =
        ChainFile::load_with(&chain_path, &routechain::registry()).map_err(LoadError::from)?;
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
    // The client: the demo's gRPC client over the routechain layer, whose connector makes
    // one HTTP/2 channel per provider (counting attempts for the report).
    let connector = Counting::new(providers.iter().map(RunningProvider::address));
    let client = UserIndexClient::new(RouteLayer::new(service.clone()).layer(connector.clone()));
    let shared = Arc::new(Shared {
        service,
        client,
        connector,
        providers,
        by_address,
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
        let mut stats = run_phase(&shared, opts, bounds[phase]..bounds[phase + 1]).await;
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
        metrics: metrics_summary(&live),
        checks: Vec::new(),
        pass: false,
        phases,
    };
    report.checks = checks::checks(&report, &all, killed_degraded, health, opts);
    report.pass = report.checks.iter().all(|c| c.pass);
    Ok(report)
}

/// The demo chain's Prometheus metrics (docs/metrics.md), as `routechain watch --metrics`
/// serves them, summed up: every non-zero series but the apply-time histogram's buckets,
/// without the `chain` label (the demo has one chain).
fn metrics_summary(live: &Arc<LiveChain>) -> Vec<String> {
    let collector = routechain::live::metrics::ChainCollector::new();
    collector.add(live);
    let mut registry = routechain::prometheus_client::registry::Registry::default();
    collector.register(&mut registry);
    let mut text = String::new();
    if routechain::prometheus_client::encoding::prometheus_text::encode(&mut text, &registry)
        .is_err()
    {
        return Vec::new();
    }
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.contains("_bucket{"))
        .filter(|l| l.rsplit(' ').next().is_some_and(|v| v != "0"))
        .map(|l| {
            // `{chain="...",` → `{`, `{chain="..."}` → nothing.
            match (l.find("{chain=\""), l.find('}')) {
                (Some(start), Some(end)) => {
                    let labels = &l[start + 1..end];
                    let rest: Vec<&str> = labels.split("\",").skip(1).collect();
                    let inner = rest.join("\",");
                    if inner.is_empty() {
                        format!("{}{}", &l[..start], &l[end + 1..])
                    } else {
                        format!("{}{{{inner}}}{}", &l[..start], &l[end + 1..])
                    }
                }
                _ => l.to_string(),
            }
        })
        .collect()
}
