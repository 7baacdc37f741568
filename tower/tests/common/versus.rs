//! The layer side by side with tonic's own balanced channel (`Channel::balance_list`,
//! tower's p2c): the providers, the three clients and the load driver shared by
//! `examples/tower_vs_balance.rs` (the timed comparison) and `tests/versus.rs` (that every
//! side's calls reach live providers, and the routechain side's obey the chain).
//!
//! Sixteen real tonic providers on 127.0.0.1, registered with Dubbo's usual URL parameters
//! and the ones the full chain reads ([`LAYOUT`]). The clients:
//!
//! - `balanced`: a tonic `Channel::balance_list` over the eight providers the full chain
//!   leaves for an untagged call ([`ROUTED`]): what a Rust user without routing would
//!   configure for the same traffic, so both sides load the same servers over the same
//!   number of connections;
//! - `full chain`: the routechain layer over all sixteen, with the chain of the demo and
//!   the routing benchmarks (tag → condition → group → IDC-weight, [`FULL_CHAIN`]);
//! - `empty chain`: the layer with `routers: []` over the eight: its own cost without
//!   routing.
//!
//! Every call is the same on every side: `SayHello` with the header `dubbo-group: live`
//! (the layer copies it into the `group` attachment the group router reads; the balanced
//! channel sends it unread).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use routechain::core::{Snapshot, Url};
use routechain::live::{LiveChain, LiveOptions};
use routechain::rules::ChainFile;
use routechain_tower::{HttpConnector, RouteConfig, RouteLayer, RouteService};
use tonic::metadata::MetadataValue;
use tonic::transport::{Channel, Endpoint};
use tower_layer::Layer;

use super::Provider;
use super::greeter::HelloRequest;
use super::greeter::greeter_client::GreeterClient;

/// Each provider: name, region, IDC, group, static tag. The full chain leaves providers
/// 0–7 (beijing, group `live`, untagged) for an untagged call from beijing/mt, split 50/50
/// between mt and zf by the IDC-weight route table; a `gray` call reaches 8 and 9 only.
pub const LAYOUT: [(&str, &str, &str, &str, &str); 16] = [
    ("mt-1", "beijing", "mt", "live", ""),
    ("mt-2", "beijing", "mt", "live", ""),
    ("mt-3", "beijing", "mt", "live", ""),
    ("mt-4", "beijing", "mt", "live", ""),
    ("zf-1", "beijing", "zf", "live", ""),
    ("zf-2", "beijing", "zf", "live", ""),
    ("zf-3", "beijing", "zf", "live", ""),
    ("zf-4", "beijing", "zf", "live", ""),
    ("gray-mt", "beijing", "mt", "live", "gray"),
    ("gray-zf", "beijing", "zf", "live", "gray"),
    ("batch-1", "beijing", "zf", "batch", ""),
    ("batch-2", "beijing", "mt", "batch", ""),
    ("sh-1", "shanghai", "sh", "live", ""),
    ("sh-2", "shanghai", "sh", "live", ""),
    ("sh-3", "shanghai", "sh", "live", ""),
    ("sh-4", "shanghai", "sh", "live", ""),
];

/// The providers an untagged call is routed to (indexes in [`LAYOUT`]).
pub const ROUTED: std::ops::Range<usize> = 0..8;

/// The providers a `gray` call is routed to.
pub const GRAY: std::ops::Range<usize> = 8..10;

/// The full chain: every router of `rules/examples/demo/demo.chain.yaml` and of the
/// routing benchmarks, with rules that read the providers' parameters.
pub const FULL_CHAIN: &str = r#"
service: helloworld.Greeter
consumer: consumer://127.0.0.1/helloworld.Greeter?application=bench-client&region=beijing&idc=mt
routers:
  - type: tag
  - type: condition
    rule:
      scope: service
      key: helloworld.Greeter
      enabled: true
      force: false
      conditions:
        - method = SayHello => region = $region
        - method = Reindex => idc = zf
  - type: group
  - type: idc-weight
    rule:
      idcs: {beijing: [mt, zf], shanghai: [sh]}
      route_tables: {beijing: {mt: 50, zf: 50}}
      cross_region: [shanghai]
"#;

/// No router: the layer's own cost.
pub const EMPTY_CHAIN: &str = r#"
service: helloworld.Greeter
consumer: consumer://127.0.0.1/helloworld.Greeter?application=bench-client&region=beijing&idc=mt
routers: []
"#;

/// Starts the sixteen providers of [`LAYOUT`] (on the current runtime).
pub async fn start_providers() -> Vec<Provider> {
    let mut providers = Vec::with_capacity(LAYOUT.len());
    for (name, region, idc, group, tag) in LAYOUT {
        let tag = if tag.is_empty() {
            String::new()
        } else {
            format!("&dubbo.tag={tag}")
        };
        // What a Dubbo provider registers, plus the parameters the rules read.
        let params = format!(
            "anyhost=true&application=greeter-provider&interface=helloworld.Greeter\
             &methods=SayHello&side=provider&release=3.3.0&dubbo=2.0.2&timestamp=1767225600000\
             &weight=100&region={region}&idc={idc}&group={group}{tag}"
        );
        providers.push(Provider::start(name, &params).await);
    }
    providers
}

/// Tonic's balanced channel over `providers` (tower's p2c), connected lazily as the layer's
/// channels are.
pub fn balanced(providers: &[Provider]) -> GreeterClient<Channel> {
    let endpoints = providers.iter().map(|p| {
        Endpoint::from_shared(format!("http://{}", p.address))
            .expect("an endpoint")
            .tcp_nodelay(true)
    });
    GreeterClient::new(Channel::balance_list(endpoints))
}

/// The live chain of `chain` serving `providers`.
pub fn live(chain: &str, providers: &[Provider]) -> Arc<LiveChain> {
    let file = ChainFile::parse("versus.chain.yaml", chain, None).expect("the chain parses");
    let urls: Vec<Url> = providers
        .iter()
        .map(|p| p.url.parse().expect("a provider URL"))
        .collect();
    Arc::new(
        LiveChain::with_providers(
            file,
            routechain::registry(),
            LiveOptions::default(),
            Snapshot::new(1, urls),
        )
        .expect("the chain builds"),
    )
}

/// The client over the routechain layer of `live`, its default hyper HTTP/2 connector, the
/// header `dubbo-group` read as the `group` attachment.
pub fn layered(live: &LiveChain) -> GreeterClient<RouteService<HttpConnector>> {
    let config = RouteConfig::default()
        .attachment_header(http::HeaderName::from_static("dubbo-group"), "group");
    GreeterClient::new(
        RouteLayer::with_config(live.service().clone(), config).layer(HttpConnector::new()),
    )
}

/// The request every side sends: group `live`, and the tag when given.
pub fn request(tag: Option<&'static str>) -> tonic::Request<HelloRequest> {
    let mut r = tonic::Request::new(HelloRequest {
        name: "bench".into(),
    });
    r.metadata_mut()
        .insert("dubbo-group", MetadataValue::from_static("live"));
    if let Some(tag) = tag {
        r.metadata_mut()
            .insert("dubbo-tag", MetadataValue::from_static(tag));
    }
    r
}

/// What one timed run measured.
#[derive(Debug, Clone)]
pub struct Run {
    /// Calls answered.
    pub calls: u64,
    /// Calls that failed.
    pub errors: u64,
    /// From the first call sent to the last answer.
    pub elapsed: Duration,
    /// Every answered call's latency, sorted.
    pub latencies: Vec<Duration>,
}

impl Run {
    /// Answered calls per second.
    pub fn throughput(&self) -> f64 {
        self.calls as f64 / self.elapsed.as_secs_f64()
    }

    /// The latency at quantile `q` (0..=1), nearest rank.
    pub fn quantile(&self, q: f64) -> Duration {
        if self.latencies.is_empty() {
            return Duration::ZERO;
        }
        let rank =
            ((q * self.latencies.len() as f64).ceil() as usize).clamp(1, self.latencies.len());
        self.latencies[rank - 1]
    }
}

/// How long a run lasts.
#[derive(Debug, Clone, Copy)]
pub enum Limit {
    /// Calls are sent until this much time has passed.
    Time(Duration),
    /// This many calls are sent (for instruction counts, where time means nothing).
    Calls(u64),
}

/// Keeps `concurrency` calls in flight until `limit` (each task sends its next call when its
/// last one is answered), on the current runtime. `call` makes one call and says whether
/// it was answered.
pub async fn drive<F, Fut>(concurrency: usize, limit: Limit, call: F) -> Run
where
    F: Fn() -> Fut + Clone + Send + 'static,
    Fut: Future<Output = bool> + Send + 'static,
{
    let start = Instant::now();
    let (deadline, budget) = match limit {
        Limit::Time(d) => (start + d, u64::MAX),
        Limit::Calls(n) => (start + Duration::from_secs(3600), n),
    };
    let budget = Arc::new(AtomicU64::new(budget));
    let tasks: Vec<_> = (0..concurrency)
        .map(|_| {
            let call = call.clone();
            let budget = budget.clone();
            tokio::spawn(async move {
                let mut latencies = Vec::with_capacity(4096);
                let mut errors = 0u64;
                loop {
                    let sent = Instant::now();
                    let spent = budget
                        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| b.checked_sub(1))
                        .is_err();
                    if sent >= deadline || spent {
                        break;
                    }
                    if call().await {
                        latencies.push(sent.elapsed());
                    } else {
                        errors += 1;
                    }
                }
                (latencies, errors)
            })
        })
        .collect();
    let mut run = Run {
        calls: 0,
        errors: 0,
        elapsed: Duration::ZERO,
        latencies: Vec::new(),
    };
    for task in tasks {
        let (latencies, errors) = task.await.expect("a load task");
        run.errors += errors;
        run.latencies.extend(latencies);
    }
    run.elapsed = start.elapsed();
    run.calls = run.latencies.len() as u64;
    run.latencies.sort_unstable();
    run
}
