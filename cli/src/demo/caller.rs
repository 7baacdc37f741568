//! The demo's callers: concurrent tasks sending real gRPC calls through the routechain
//! layer ([`routechain_tower::RouteService`]), and what they record from each reply. The
//! layer routes, balances, fails over and feeds health; the callers only call and count.
//!
//! Attempts per provider are counted by [`Counting`], the demo's connector: it wraps the
//! layer's [`HttpConnector`] and counts, per provider address, the attempts sent and the
//! ones answered (a `MakeChannel` of its own, as any user of the layer can write).

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Instant;

use routechain::balance::Cluster;
use routechain::core::Provider;
use routechain_tower::grpc::ERROR_HEADER;
use routechain_tower::{
    BoxError, HttpChannel, HttpConnector, HttpError, MakeChannel, RequestBody, RouteService,
    RoutedTo,
};

use super::Options;
use super::plan::{Kind, Planned, plan};
use super::report::PhaseStats;
use super::rpc::{Identity, UserIndexClient};
use super::servers::RunningProvider;

/// Attempts sent to one provider, and how many were answered.
#[derive(Debug, Default)]
pub struct Counter {
    attempts: AtomicU64,
    answered: AtomicU64,
}

/// The demo's connector: the layer's [`HttpConnector`], counting attempts per provider.
#[derive(Debug, Clone)]
pub struct Counting {
    inner: HttpConnector,
    counters: Arc<BTreeMap<String, Arc<Counter>>>,
}

impl Counting {
    /// Counts the attempts on `addresses`.
    pub fn new<'a>(addresses: impl IntoIterator<Item = &'a str>) -> Self {
        Counting {
            inner: HttpConnector::new(),
            counters: Arc::new(
                addresses
                    .into_iter()
                    .map(|a| (a.to_string(), Arc::default()))
                    .collect(),
            ),
        }
    }

    /// (attempts, answered) of `address` so far.
    fn counts(&self, address: &str) -> (u64, u64) {
        self.counters.get(address).map_or((0, 0), |c| {
            (
                c.attempts.load(Ordering::Relaxed),
                c.answered.load(Ordering::Relaxed),
            )
        })
    }
}

/// One provider's channel, counting.
#[derive(Debug, Clone)]
pub struct CountingChannel {
    inner: HttpChannel,
    counter: Arc<Counter>,
}

/// The future of a counted attempt.
pub type CountingFuture =
    Pin<Box<dyn Future<Output = Result<http::Response<hyper::body::Incoming>, HttpError>> + Send>>;

impl tower_service::Service<http::Request<RequestBody>> for CountingChannel {
    type Response = http::Response<hyper::body::Incoming>;
    type Error = HttpError;
    type Future = CountingFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<RequestBody>) -> CountingFuture {
        self.counter.attempts.fetch_add(1, Ordering::Relaxed);
        let counter = self.counter.clone();
        let response = self.inner.call(req);
        Box::pin(async move {
            let r = response.await;
            if r.is_ok() {
                counter.answered.fetch_add(1, Ordering::Relaxed);
            }
            r
        })
    }
}

impl MakeChannel for Counting {
    type Channel = CountingChannel;
    type Body = hyper::body::Incoming;
    type Error = HttpError;
    type Future = CountingFuture;

    fn make_channel(&self, provider: &Provider) -> Result<CountingChannel, BoxError> {
        Ok(CountingChannel {
            inner: self.inner.make_channel(provider)?,
            counter: self
                .counters
                .get(provider.address())
                .cloned()
                .unwrap_or_default(),
        })
    }
}

/// What the callers share.
pub struct Shared {
    /// The routechain service the layer routes by (the live chain's).
    pub service: Arc<Cluster>,
    /// The client: the demo's gRPC client over the layer.
    pub client: UserIndexClient<RouteService<Counting>>,
    /// The connector (its counters).
    pub connector: Counting,
    /// The providers.
    pub providers: Vec<RunningProvider>,
    /// Address → index in `providers`.
    pub by_address: BTreeMap<String, usize>,
    /// The progress bar.
    pub progress: indicatif::ProgressBar,
}

async fn caller(shared: Arc<Shared>, next: Arc<AtomicU64>, end: u64) -> PhaseStats {
    let mut stats = PhaseStats::default();
    let mut client = shared.client.clone();
    loop {
        let n = next.fetch_add(1, Ordering::Relaxed);
        if n >= end {
            break;
        }
        let planned = plan(n);
        stats.calls += 1;
        let started = Instant::now();
        match client.call(planned.method, planned.request(n)).await {
            Ok(reply) => {
                stats.call_ns.push(started.elapsed().as_nanos() as u64);
                let attempts = reply
                    .extensions()
                    .get::<RoutedTo>()
                    .map_or(1, |r| r.attempts);
                stats.failovers += u64::from(attempts > 1);
                record(&shared, &mut stats, &planned, n, reply.get_ref());
            }
            Err(status) => {
                let gray = planned.kind == Kind::Gray;
                let reason = status
                    .metadata()
                    .get(ERROR_HEADER)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("");
                let failed = match reason {
                    "breaker" => {
                        // Refused by the breaker before any network attempt.
                        stats.rejected += 1;
                        stats.rejected_gray += u64::from(gray);
                        stats.reject_ns.push(started.elapsed().as_nanos() as u64);
                        None
                    }
                    "no-provider" => Some("no provider".to_string()),
                    "exhausted" => Some("every routed provider failed".to_string()),
                    "failed" => Some("retries exhausted".to_string()),
                    _ => Some(format!("{:?}: {}", status.code(), status.message())),
                };
                if let Some(reason) = failed {
                    tracing::debug!("call {n} failed: {status:?}");
                    *stats.failed.entry(reason).or_default() += 1;
                }
                stats.untagged_failed += u64::from(!gray);
                stats.gray_failed += u64::from(gray);
            }
        }
        shared.progress.inc(1);
    }
    stats
}

fn record(shared: &Shared, stats: &mut PhaseStats, planned: &Planned, n: u64, reply: &Identity) {
    stats.ok += 1;
    stats.id_mismatch += u64::from(reply.id != n || reply.method != planned.method);
    *stats.by_provider.entry(reply.address.clone()).or_default() += 1;
    if reply.group != planned.group {
        stats.misrouted_group += 1;
    }
    let gray = reply.tag == "gray";
    match planned.kind {
        Kind::Gray => {
            stats.gray_on_gray += u64::from(gray);
            stats.gray_on_untagged += u64::from(!gray);
        }
        _ => {
            stats.untagged_on_gray += u64::from(gray);
            stats.untagged_ok += 1;
            stats.canary_calls += u64::from(reply.canary);
            *stats.user_sides.entry(planned.user.clone()).or_default() |=
                if reply.canary { 2 } else { 1 };
        }
    }
    if shared
        .by_address
        .get(&reply.address)
        .is_some_and(|&i| shared.providers[i].spec.degraded)
    {
        stats.degraded_param_hits += 1;
    }
    match planned.kind {
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

/// Runs one phase: calls `range` from `opts.concurrency` callers; the attempt counts come
/// from the connector's counters (attempts on killed providers, attempts not answered).
pub async fn run_phase(
    shared: &Arc<Shared>,
    opts: &Options,
    range: std::ops::Range<u64>,
) -> PhaseStats {
    let next = Arc::new(AtomicU64::new(range.start));
    let trips_before = shared.service.stats().breaker_trips;
    let counts = |shared: &Shared| -> Vec<(u64, u64)> {
        shared
            .providers
            .iter()
            .map(|p| shared.connector.counts(p.address()))
            .collect()
    };
    let before = counts(shared);
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..opts.concurrency.max(1) {
        tasks.spawn(caller(shared.clone(), next.clone(), range.end));
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
    for ((p, (a0, ok0)), (a1, ok1)) in shared.providers.iter().zip(before).zip(counts(shared)) {
        let attempts = a1 - a0;
        stats.failed_attempts += attempts - (ok1 - ok0).min(attempts);
        if p.is_killed() {
            stats.attempts_on_killed += attempts;
        }
    }
    stats
}
