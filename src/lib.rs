//! # routechain
//!
//! An ordered chain of routers, modeled on Apache Dubbo's, that narrows a service's provider
//! list for every call; a load balancer then picks one provider. This crate is what a
//! service depends on. It re-exports the model and the chain ([`core`]), balancing, health
//! and failover ([`balance`]), the built-in routers ([`routers`]), rule and chain loading
//! ([`rules`]), live sources ([`live`]) and, with the `plugins` feature, the shared-library
//! plugin loader ([`plugins`]), and assembles the default [`registry`].
//!
//! Features (all on by default): `zookeeper` and `file-watch` (the live sources),
//! `plugins` (the `plugin` router type), `metrics` (Prometheus metrics through
//! `prometheus-client`: `live::metrics`, docs/metrics.md). With default features off the crate brings no
//! async runtime beyond tokio's channels, no ZooKeeper client, no file watcher and no
//! dynamic loading. The command line and the demo live in the `routechain-cli` crate.
//!
//! See the README's "The library" section for a complete example (compiled as a doc test).

/// `prometheus-client`, re-exported (feature `metrics`) so a service registers
/// [`live::metrics::ChainCollector`] with the same version of the crate.
#[cfg(feature = "metrics")]
pub use prometheus_client;
pub use routechain_balance as balance;
pub use routechain_core as core;
pub use routechain_live as live;
#[cfg(feature = "plugins")]
pub use routechain_plugin_loader as plugins;
pub use routechain_routers as routers;
pub use routechain_rules as rules;

use routechain_core::Registry;

/// The registry of every router type routechain ships: the built-in routers (and, with the
/// `plugins` feature, the shared-library `plugin` type).
pub fn registry() -> Registry {
    #[allow(unused_mut)]
    let mut registry = routechain_routers::builtin_registry();
    #[cfg(feature = "plugins")]
    routechain_plugin_loader::register(&mut registry);
    registry
}

/// The README's Rust examples, compiled and run as doc tests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// docs/load-balancing.md's Rust examples, compiled and run as doc tests.
#[doc = include_str!("../docs/load-balancing.md")]
#[cfg(doctest)]
pub struct LoadBalancingDoctests;

/// docs/live.md's Rust example (a chain kept live from ZooKeeper), compiled as a doc test
/// (`no_run`: it names a ZooKeeper ensemble and a chain file of the reader's).
#[doc = include_str!("../docs/live.md")]
#[cfg(all(doctest, feature = "zookeeper"))]
pub struct LiveDoctests;

/// docs/plugins.md's Rust examples: a compiled-in typed router (`no_run`: it loads a chain
/// file of the reader's) and a shared-library plugin written with
/// `routechain-plugin-abi` (compiled as a program of its own here; a real plugin is a
/// `cdylib`).
#[doc = include_str!("../docs/plugins.md")]
#[cfg(doctest)]
pub struct PluginsDoctests;

/// docs/metrics.md's Rust example (registering into a caller's registry), compiled and run
/// as a doc test.
#[doc = include_str!("../docs/metrics.md")]
#[cfg(all(doctest, feature = "metrics"))]
pub struct MetricsDoctests;
