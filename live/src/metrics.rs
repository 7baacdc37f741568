//! Prometheus metrics of live chains, through `prometheus-client` (feature `metrics`).
//!
//! A [`ChainCollector`] is a `prometheus_client` [`Collector`]: register it into your
//! [`Registry`] and add the chains to it; every scrape reads their counters (the sharded
//! call-path counters of [`routechain_core::ChainMetrics`], the service's
//! [`routechain_balance::ClusterStats`], the update counts of [`crate::LiveStats`]) and
//! encodes one family per metric with a `chain` label per chain. Nothing is recorded
//! through `prometheus-client` on the call path: the collector only reads at scrape time.
//! The metrics, their labels and meaning are listed in `docs/metrics.md`.
//!
//! ```
//! use std::sync::Arc;
//! use prometheus_client::registry::Registry;
//! use routechain_live::metrics::ChainCollector;
//! use routechain_live::{LiveChain, LiveOptions};
//!
//! let file = routechain_rules::ChainFile::parse(
//!     "inline.yaml",
//!     "service: com.foo.BarService\nrouters:\n  - type: condition\n",
//!     None,
//! )
//! .unwrap();
//! let live = Arc::new(
//!     LiveChain::new(file, routechain_routers::builtin_registry(), LiveOptions::default())
//!         .unwrap(),
//! );
//! // Your service's registry, served on its own endpoint.
//! let mut registry = Registry::default();
//! let collector = ChainCollector::new();
//! collector.add(&live); // chain label: com.foo.BarService::
//! collector.register(&mut registry);
//!
//! let mut text = String::new();
//! prometheus_client::encoding::prometheus_text::encode(&mut text, &registry).unwrap();
//! assert!(text.contains("routechain_generation{chain=\"com.foo.BarService::\"} 1\n"));
//! ```

use std::sync::{Arc, Mutex, Weak};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use routechain_balance::Cluster;
use routechain_core::EMPTY_LIST_ROUTER;

use crate::LiveChain;
use crate::observe::{APPLY_BUCKETS, ApplyHistogram, SourceCount, UpdateResult};

/// The label of a chain whose file names no `service`.
pub const UNNAMED_CHAIN: &str = "(unnamed)";

enum Watched {
    Live(Weak<LiveChain>),
    Cluster(Weak<Cluster>),
}

struct Entry {
    /// The `chain` label, when given; else the live chain's service key at scrape time.
    label: Option<String>,
    chain: Watched,
}

/// The exporter of routechain's metrics: see the module documentation. Cheap to clone (the
/// clones share their chains).
#[derive(Clone, Default)]
pub struct ChainCollector {
    chains: Arc<Mutex<Vec<Entry>>>,
}

impl std::fmt::Debug for ChainCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChainCollector")
            .field("chains", &self.read().len())
            .finish()
    }
}

/// One chain's values, read at scrape time.
struct Read {
    chain: String,
    generation: u64,
    providers: usize,
    degraded: usize,
    calls: u64,
    failovers: u64,
    breaker_trips: u64,
    retries_refused: u64,
    empty_list: u64,
    routers: Vec<routechain_core::RouterStats>,
    /// Picks per provider address, when counted.
    picks: Option<Vec<(Arc<str>, u64)>>,
    updates: Option<(Vec<SourceCount>, ApplyHistogram)>,
}

impl ChainCollector {
    /// A collector with no chain yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a live chain, labelled with its service key (`interface:version:group`, as the
    /// config-center keys are written: `com.foo.BarService::`), or `(unnamed)` when its
    /// chain file names no service. Held weakly: a dropped chain stops being reported.
    pub fn add(&self, live: &Arc<LiveChain>) {
        self.push(None, Watched::Live(Arc::downgrade(live)));
    }

    /// Adds a live chain under the label `chain`.
    pub fn add_as(&self, chain: impl Into<String>, live: &Arc<LiveChain>) {
        self.push(Some(chain.into()), Watched::Live(Arc::downgrade(live)));
    }

    /// Adds a service built by hand (no live updates: no `routechain_updates_total` and no
    /// apply-time histogram) under the label `chain`. Its routing is counted when its chain
    /// state carries a [`routechain_core::ChainMetrics`]
    /// ([`routechain_core::ChainState::with_metrics`]).
    pub fn add_service(&self, chain: impl Into<String>, service: &Arc<Cluster>) {
        self.push(
            Some(chain.into()),
            Watched::Cluster(Arc::downgrade(service)),
        );
    }

    /// Registers (a clone of) this collector into `registry`. Register it once per
    /// registry: it reports every chain added to it, before or after.
    pub fn register(&self, registry: &mut Registry) {
        registry.register_collector(Box::new(self.clone()));
    }

    fn push(&self, label: Option<String>, chain: Watched) {
        self.chains
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Entry { label, chain });
    }

    fn read(&self) -> Vec<Read> {
        let mut chains = self.chains.lock().unwrap_or_else(|p| p.into_inner());
        chains.retain(|e| match &e.chain {
            Watched::Live(w) => w.strong_count() > 0,
            Watched::Cluster(w) => w.strong_count() > 0,
        });
        chains
            .iter()
            .filter_map(|e| match &e.chain {
                Watched::Live(w) => w.upgrade().map(|live| {
                    let label = e.label.clone().unwrap_or_else(|| {
                        live.reference()
                            .map_or_else(|| UNNAMED_CHAIN.to_string(), |r| r.rule_key())
                    });
                    let stats = live.stats();
                    let mut read = read_service(label, live.service());
                    read.updates = Some((stats.by_source(), stats.apply_seconds()));
                    read
                }),
                Watched::Cluster(w) => w
                    .upgrade()
                    .map(|s| read_service(e.label.clone().unwrap_or_default(), &s)),
            })
            .collect()
    }
}

fn read_service(chain: String, service: &Cluster) -> Read {
    let state = service.state();
    let metrics = state.metrics();
    Read {
        chain,
        generation: state.generation(),
        providers: state.snapshot().len(),
        degraded: state.degraded().count(),
        calls: metrics.map_or(0, |m| m.calls()),
        failovers: metrics.map_or(0, |m| m.failovers()),
        empty_list: metrics.map_or(0, |m| m.empty_list()),
        breaker_trips: service.stats().breaker_trips,
        retries_refused: service.stats().retries_refused,
        routers: metrics.map(|m| m.routers()).unwrap_or_default(),
        picks: metrics
            .filter(|m| m.counts_provider_picks())
            .map(|m| m.provider_picks()),
        updates: None,
    }
}

type Enc<'a> = prometheus_client::encoding::MetricEncoder<'a>;

fn counter(e: &mut Enc<'_>, labels: &[(&str, &str)], v: u64) -> Result<(), std::fmt::Error> {
    e.encode_family(&labels)?
        .encode_counter::<NoLabelSet, _, u64>(&v, None)
}

fn gauge(e: &mut Enc<'_>, labels: &[(&str, &str)], v: u64) -> Result<(), std::fmt::Error> {
    e.encode_family(&labels)?
        .encode_gauge(&(v.min(i64::MAX as u64) as i64))
}

impl Collector for ChainCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let chains = self.read();
        {
            let mut e = encoder.encode_descriptor(
                "routechain_generation",
                "The generation of the chain state serving calls (one more per applied update).",
                None,
                MetricType::Gauge,
            )?;
            for c in &chains {
                gauge(&mut e, &[("chain", &c.chain)], c.generation)?;
            }
        }
        {
            let mut e = encoder.encode_descriptor(
                "routechain_providers",
                "Providers in the serving snapshot (after override rules).",
                None,
                MetricType::Gauge,
            )?;
            for c in &chains {
                gauge(&mut e, &[("chain", &c.chain)], c.providers as u64)?;
            }
        }
        {
            let mut e = encoder.encode_descriptor(
                "routechain_degraded_providers",
                "Providers of the serving snapshot currently degraded by the health tracker.",
                None,
                MetricType::Gauge,
            )?;
            for c in &chains {
                gauge(&mut e, &[("chain", &c.chain)], c.degraded as u64)?;
            }
        }
        {
            let mut e = encoder.encode_descriptor(
                "routechain_updates",
                "Updates by source and result: applied (one per swap), refused, held_back (empty-push protection), skipped (provider entries).",
                None,
                MetricType::Counter,
            )?;
            for c in &chains {
                let Some((counts, _)) = &c.updates else {
                    continue;
                };
                let mut sources: Vec<&str> = counts.iter().map(|s| &*s.source).collect();
                sources.dedup();
                for source in sources {
                    for result in UpdateResult::ALL {
                        let n = counts
                            .iter()
                            .find(|s| &*s.source == source && s.result == result)
                            .map_or(0, |s| s.count);
                        counter(
                            &mut e,
                            &[
                                ("chain", &c.chain),
                                ("source", source),
                                ("result", result.as_str()),
                            ],
                            n,
                        )?;
                    }
                }
            }
        }
        {
            let mut e = encoder.encode_descriptor(
                "routechain_update_apply_seconds",
                "How long applied updates took: parse, compile, prepare and swap.",
                None,
                MetricType::Histogram,
            )?;
            for c in &chains {
                let Some((_, h)) = &c.updates else { continue };
                let mut buckets: Vec<(f64, u64)> =
                    APPLY_BUCKETS.iter().copied().zip(h.buckets).collect();
                let overflow = h.count - h.buckets.iter().sum::<u64>();
                buckets.push((f64::INFINITY, overflow));
                e.encode_family(&[("chain", c.chain.as_str())])?
                    .encode_histogram::<NoLabelSet>(h.sum, h.count, &buckets, None)?;
            }
        }
        {
            let mut e = encoder.encode_descriptor(
                "routechain_calls",
                "Calls routed through the service (first attempts of Cluster::select and call).",
                None,
                MetricType::Counter,
            )?;
            for c in &chains {
                counter(&mut e, &[("chain", &c.chain)], c.calls)?;
            }
        }
        {
            let mut e = encoder.encode_descriptor(
                "routechain_no_provider",
                "Calls that ended with no provider, by the router that emptied the set ((empty provider list): no router ran).",
                None,
                MetricType::Counter,
            )?;
            for c in &chains {
                counter(
                    &mut e,
                    &[("chain", &c.chain), ("router", EMPTY_LIST_ROUTER)],
                    c.empty_list,
                )?;
                for r in &c.routers {
                    counter(
                        &mut e,
                        &[("chain", &c.chain), ("router", &r.router)],
                        r.no_provider,
                    )?;
                }
            }
        }
        {
            let mut e = encoder.encode_descriptor(
                "routechain_router_fallback",
                "Calls on which a router could not apply its rule as written and took its fallback or force path.",
                None,
                MetricType::Counter,
            )?;
            for c in &chains {
                for r in &c.routers {
                    counter(
                        &mut e,
                        &[("chain", &c.chain), ("router", &r.router)],
                        r.fallback,
                    )?;
                }
            }
        }
        {
            let mut e = encoder.encode_descriptor(
                "routechain_failovers",
                "Retries that selected another provider of the routed set after a failed attempt.",
                None,
                MetricType::Counter,
            )?;
            for c in &chains {
                counter(&mut e, &[("chain", &c.chain)], c.failovers)?;
            }
        }
        {
            let mut e = encoder.encode_descriptor(
                "routechain_breaker_trips",
                "Times the service breaker opened: every provider of a routed set was degraded (one per change in provider health).",
                None,
                MetricType::Counter,
            )?;
            for c in &chains {
                counter(&mut e, &[("chain", &c.chain)], c.breaker_trips)?;
            }
        }
        {
            let mut e = encoder.encode_descriptor(
                "routechain_retries_refused",
                "Failover retries the service's retry budget refused: the call failed with its last attempt's error.",
                None,
                MetricType::Counter,
            )?;
            for c in &chains {
                counter(&mut e, &[("chain", &c.chain)], c.retries_refused)?;
            }
        }
        {
            let mut e = encoder.encode_descriptor(
                "routechain_plugin_failures",
                "Calls on which a plugin router failed (an error or a caught panic) and was isolated, its input kept.",
                None,
                MetricType::Counter,
            )?;
            for c in &chains {
                for r in c
                    .routers
                    .iter()
                    .filter(|r| &*r.kind == "plugin" || r.failures > 0)
                {
                    counter(
                        &mut e,
                        &[("chain", &c.chain), ("router", &r.router)],
                        r.failures,
                    )?;
                }
            }
        }
        if chains.iter().any(|c| c.picks.is_some()) {
            let mut e = encoder.encode_descriptor(
                "routechain_provider_picks",
                "Calls that selected each provider, by address (only when per-provider picks are counted: high-cardinality).",
                None,
                MetricType::Counter,
            )?;
            for c in &chains {
                for (address, n) in c.picks.iter().flatten() {
                    counter(
                        &mut e,
                        &[("chain", c.chain.as_str()), ("provider", &**address)],
                        *n,
                    )?;
                }
            }
        }
        Ok(())
    }
}

/// The registry connections' states as the gauge `routechain_registry_connected`
/// (1 connected, 0 not), one series per registry labelled `registry` (`zookeeper`,
/// `nacos`) and `address` (the address with its password masked). Register it next to a
/// [`ChainCollector`].
#[cfg(any(feature = "zookeeper", feature = "nacos"))]
#[derive(Debug, Clone, Default)]
pub struct RegistryCollector {
    registries: Vec<(&'static str, String, crate::RegistryConnection)>,
}

#[cfg(any(feature = "zookeeper", feature = "nacos"))]
impl RegistryCollector {
    /// The state of the ZooKeeper source connected to `address` through `connection`
    /// (the [`crate::Following::connection`] it runs with).
    #[cfg(feature = "zookeeper")]
    pub fn zookeeper(address: &crate::ZkAddress, connection: crate::ZkConnection) -> Self {
        RegistryCollector::default().and_zookeeper(address, connection)
    }

    /// Adds the state of another ZooKeeper source (several registries followed at once).
    #[cfg(feature = "zookeeper")]
    pub fn and_zookeeper(
        mut self,
        address: &crate::ZkAddress,
        connection: crate::ZkConnection,
    ) -> Self {
        self.registries
            .push(("zookeeper", address.to_string(), connection));
        self
    }

    /// The state of the Nacos source connected to `address` through `connection` (the
    /// [`crate::Following::connection`] it runs with).
    #[cfg(feature = "nacos")]
    pub fn nacos(address: &crate::NacosAddress, connection: crate::NacosConnection) -> Self {
        RegistryCollector::default().and_nacos(address, connection)
    }

    /// Adds the state of another Nacos source.
    #[cfg(feature = "nacos")]
    pub fn and_nacos(
        mut self,
        address: &crate::NacosAddress,
        connection: crate::NacosConnection,
    ) -> Self {
        self.registries
            .push(("nacos", address.to_string(), connection));
        self
    }

    /// Registers (a clone of) this collector into `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register_collector(Box::new(self.clone()));
    }
}

#[cfg(any(feature = "zookeeper", feature = "nacos"))]
impl Collector for RegistryCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let mut e = encoder.encode_descriptor(
            "routechain_registry_connected",
            "1 while the registry source has a session and a server answering, else 0.",
            None,
            MetricType::Gauge,
        )?;
        for (kind, address, connection) in &self.registries {
            gauge(
                &mut e,
                &[("registry", kind), ("address", address)],
                u64::from(connection.is_connected()),
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{LiveOptions, ProviderText, RuleEvent, RuleKey, Update};
    use routechain_balance::Caller;
    use routechain_balance::SelectError;
    use routechain_core::Request;

    const CHAIN: &str = "service: com.foo.BarService
routers:
  - type: condition
  - type: plugin
";

    fn live() -> Arc<LiveChain> {
        let file = routechain_rules::ChainFile::parse("t.yaml", CHAIN, None).unwrap();
        let mut registry = routechain_routers::builtin_registry();
        // A stand-in for a plugin router that fails on the calls asking it to.
        registry.register_fn("plugin", 200, |cx, _| {
            if cx.request().attributes.get("fail").is_some() {
                cx.note_failure();
            }
        });
        Arc::new(LiveChain::new(file, registry, LiveOptions::default()).unwrap())
    }

    fn scrape(registry: &Registry) -> String {
        let mut text = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut text, registry).unwrap();
        text
    }

    fn sample(text: &str, series: &str) -> Option<f64> {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
    }

    #[test]
    fn every_metric_reports_what_it_counts() {
        let live = live();
        let mut registry = Registry::default();
        let collector = ChainCollector::new();
        collector.add(&live);
        collector.register(&mut registry);
        let key = "chain=\"com.foo.BarService::\"";
        let text = scrape(&registry);
        assert_eq!(
            sample(&text, &format!("routechain_generation{{{key}}}")),
            Some(1.0)
        );
        assert_eq!(
            sample(&text, &format!("routechain_providers{{{key}}}")),
            Some(0.0)
        );
        // Providers from ZooKeeper (one entry skipped), a refused rule, a good one.
        let zk = "zookeeper:/dubbo/com.foo.BarService/providers";
        live.apply_from(
            "zookeeper",
            Update::Providers {
                origin: zk.into(),
                text: ProviderText::Urls(vec![
                    "dubbo://10.0.0.1:20880/com.foo.BarService?zone=a".into(),
                    "dubbo://10.0.0.2:20880/com.foo.BarService?zone=b".into(),
                    "dubbo://10.0.0.3:x/com.foo.BarService".into(),
                ]),
            },
        );
        let rule = |text: &str| Update::Rule {
            key: RuleKey::new("com.foo.BarService::", "condition"),
            event: RuleEvent::Modified(text.into()),
            origin: "zookeeper:/dubbo/config/dubbo/com.foo.BarService::.condition-router".into(),
        };
        live.apply_from(
            "zookeeper",
            rule("force: true\nconditions: ['method = get => zone = c']\n"),
        );
        live.apply_from("zookeeper", rule("conditions: [\n"));
        live.apply_from(
            "zookeeper",
            Update::Providers {
                origin: zk.into(),
                text: ProviderText::Urls(vec![]),
            },
        );
        // Calls: one plain, one the condition rule empties, one the plugin fails, and a
        // failover; then every provider degraded: the breaker.
        let service = live.service();
        let mut call = Caller::seeded(1);
        let first = service.select(&Request::new(), &[], &mut call).unwrap();
        service
            .select(&Request::new(), std::slice::from_ref(&first), &mut call)
            .unwrap();
        assert!(
            service
                .select(&Request::new().with_method("get"), &[], &mut call)
                .is_err()
        );
        service
            .select(&Request::new().with_attribute("fail", "1"), &[], &mut call)
            .unwrap();
        service.degrade(0);
        service.degrade(1);
        assert!(matches!(
            service.select(&Request::new(), &[], &mut call),
            Err(SelectError::ServiceUnavailable { .. })
        ));
        let text = scrape(&registry);
        let get =
            |series: &str| sample(&text, series).unwrap_or_else(|| panic!("{series} in\n{text}"));
        assert_eq!(get(&format!("routechain_generation{{{key}}}")), 3.0);
        assert_eq!(get(&format!("routechain_providers{{{key}}}")), 2.0);
        assert_eq!(get(&format!("routechain_degraded_providers{{{key}}}")), 2.0);
        for (result, n) in [
            ("applied", 2.0),
            ("refused", 1.0),
            ("held_back", 1.0),
            ("skipped", 1.0),
        ] {
            assert_eq!(
                get(&format!(
                    "routechain_updates_total{{{key},source=\"zookeeper\",result=\"{result}\"}}"
                )),
                n,
                "{result}"
            );
        }
        assert_eq!(
            get(&format!("routechain_update_apply_seconds_count{{{key}}}")),
            2.0
        );
        assert_eq!(
            get(&format!(
                "routechain_update_apply_seconds_bucket{{{key},le=\"+Inf\"}}"
            )),
            2.0
        );
        assert!(get(&format!("routechain_update_apply_seconds_sum{{{key}}}")) > 0.0);
        assert_eq!(get(&format!("routechain_calls_total{{{key}}}")), 4.0);
        assert_eq!(get(&format!("routechain_failovers_total{{{key}}}")), 1.0);
        assert_eq!(
            get(&format!("routechain_breaker_trips_total{{{key}}}")),
            1.0
        );
        assert_eq!(
            get(&format!("routechain_retries_refused_total{{{key}}}")),
            0.0
        );
        assert_eq!(
            get(&format!(
                "routechain_no_provider_total{{{key},router=\"condition(service)\"}}"
            )),
            1.0
        );
        assert_eq!(
            get(&format!(
                "routechain_no_provider_total{{{key},router=\"(empty provider list)\"}}"
            )),
            0.0
        );
        assert_eq!(
            get(&format!(
                "routechain_router_fallback_total{{{key},router=\"condition(service)\"}}"
            )),
            1.0
        );
        assert_eq!(
            get(&format!(
                "routechain_plugin_failures_total{{{key},router=\"plugin\"}}"
            )),
            1.0
        );
        // Only plugin routers (or routers that failed) have a plugin-failure series.
        assert!(!text.contains(
            "routechain_plugin_failures_total{chain=\"com.foo.BarService::\",router=\"condition"
        ));
        // A dropped chain is no longer reported.
        drop(live);
        assert!(!scrape(&registry).contains("routechain_generation{"));
    }

    #[test]
    fn provider_picks_are_reported_only_when_counted() {
        let file = routechain_rules::ChainFile::parse("t.yaml", "routers: []\n", None).unwrap();
        let providers = routechain_core::Snapshot::parse_lines(
            1,
            "dubbo://10.0.0.1:20880/a\ndubbo://10.0.0.2:20880/a\n",
        )
        .unwrap();
        let options = LiveOptions {
            provider_picks: true,
            ..LiveOptions::default()
        };
        let picking = Arc::new(
            LiveChain::with_providers(
                file.clone(),
                routechain_routers::builtin_registry(),
                options,
                providers,
            )
            .unwrap(),
        );
        let mut call = Caller::seeded(1);
        for _ in 0..10 {
            picking
                .service()
                .select(&Request::new(), &[], &mut call)
                .unwrap();
        }
        let plain = live();
        let mut registry = Registry::default();
        let collector = ChainCollector::new();
        collector.add_as("picking", &picking);
        collector.add_as("plain", &plain);
        collector.register(&mut registry);
        let text = scrape(&registry);
        let total: f64 = ["10.0.0.1:20880", "10.0.0.2:20880"]
            .iter()
            .map(|a| {
                sample(
                    &text,
                    &format!(
                        "routechain_provider_picks_total{{chain=\"picking\",provider=\"{a}\"}}"
                    ),
                )
                .unwrap()
            })
            .sum();
        assert_eq!(total, 10.0, "{text}");
        assert!(!text.contains("routechain_provider_picks_total{chain=\"plain\""));
        // Off by default: no family at all.
        let mut registry = Registry::default();
        let collector = ChainCollector::new();
        collector.add(&plain);
        collector.register(&mut registry);
        assert!(!scrape(&registry).contains("routechain_provider_picks"));
    }

    #[test]
    fn two_chains_share_one_family_per_metric() {
        let (a, b) = (live(), live());
        let mut registry = Registry::default();
        let collector = ChainCollector::new();
        collector.add_as("a", &a);
        collector.add_as("b", &b);
        collector.add_service("c", a.service());
        collector.register(&mut registry);
        let text = scrape(&registry);
        assert_eq!(
            text.matches("# TYPE routechain_generation gauge").count(),
            1
        );
        for chain in ["a", "b", "c"] {
            assert!(
                text.contains(&format!("routechain_generation{{chain=\"{chain}\"}} 1\n")),
                "{text}"
            );
        }
        // A service has no update counts.
        assert!(!text.contains("routechain_update_apply_seconds_count{chain=\"c\"}"));
    }
}
