//! # routechain
//!
//! An ordered chain of routers, modeled on Apache Dubbo's, that narrows a service's provider
//! list for every call; a load balancer then picks one provider. This crate is what a
//! service depends on.
//!
//! ## Where to start
//!
//! [`prelude`] holds the types of the walkthrough below: a [`ChainFile`](rules::ChainFile)
//! (which routers, with which rules), a provider list ([`Snapshot`](core::Snapshot)), a
//! [`LiveChain`](live::LiveChain) that keeps them current, and its
//! [`Cluster`](balance::Cluster), which routes, balances and calls:
//!
//! ```
//! use routechain::prelude::*;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // A chain with one Dubbo condition rule: calls to getComment go to the hangzhou providers.
//! // "inline.yaml" names the text in error messages; `None`: no directory for `rule_file`s.
//! // The error, if any, lists every problem as `file:line:column: field: message`.
//! let chain_file = ChainFile::parse("inline.yaml", "
//! routers:
//!   - type: condition
//!     rule:
//!       conditions:
//!         - method = getComment => region = hangzhou
//! ", None)?;
//! // The provider list, one URL a line; 1 is the list's generation.
//! let providers = Snapshot::parse_lines(1, "\
//!     dubbo://10.0.0.1:20880/com.foo.CommentService?region=hangzhou
//!     dubbo://10.0.0.2:20880/com.foo.CommentService?region=beijing
//! ").unwrap();
//! // The routers prepared over the providers; a source (ZooKeeper, files) or `apply`
//! // swaps in new rules and providers later, atomically, while calls go on.
//! let live = LiveChain::with_providers(chain_file, routechain::registry(), LiveOptions::default(), providers)?;
//!
//! // One call: route, balance, call the chosen provider with your client, fail over on a
//! // retryable error, feed health.
//! let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build()?;
//! let request = Request::new().with_method("getComment");
//! let reply = runtime.block_on(live.service().call(&request, |provider| async move {
//!     Ok::<_, CallError<std::io::Error>>(provider.address().to_string()) // your RPC here
//! }))?;
//! assert_eq!(reply.value, "10.0.0.1:20880");
//! # Ok(())
//! # }
//! ```
//!
//! The README's "The library" section walks through the same example at length;
//! docs/embedding.md adds a tokio service with rules live from ZooKeeper and a tonic client
//! through `routechain-tower`'s layer.
//!
//! ## The parts
//!
//! - [`core`]: the model (URLs, provider snapshots, requests, candidate bitsets), the chain
//!   and the [`TypedRouter`](core::TypedRouter) contract for routers of your own.
//! - [`balance`]: load balancers, provider health, failover and the [`Cluster`](balance::Cluster).
//! - [`routers`]: the built-in routers (condition, tag, mock, mesh, affinity, group,
//!   IDC-weight); [`registry`] returns them (and, with the `plugins` feature, the
//!   shared-library `plugin` type of the `plugins` loader).
//! - [`rules`]: chain files and rule documents in YAML, every problem located.
//! - [`live`]: a chain kept live from ZooKeeper (Dubbo's layout) or watched files.
//! - [`serde_json`]: the JSON values of requests and rule documents.
//!
//! Features (all on by default): `zookeeper` and `file-watch` (the live sources),
//! `plugins` (the `plugin` router type), `metrics` (Prometheus metrics through
//! `prometheus-client`: `live::metrics`, docs/metrics.md). With default features off the crate brings no
//! async runtime beyond tokio's channels, no ZooKeeper client, no file watcher and no
//! dynamic loading. The command line and the demo live in the `routechain-cli` crate.

/// `prometheus-client`, re-exported (feature `metrics`) so a service registers
/// [`live::metrics::ChainCollector`] with the same version of the crate.
#[cfg(feature = "metrics")]
pub use prometheus_client;
pub use routechain_balance as balance;
pub use routechain_core as core;
/// `serde_json`, re-exported: request arguments ([`core::Request::with_argument`]) and rule
/// documents are its [`Value`](serde_json::Value)s.
pub use routechain_core::serde_json;
pub use routechain_live as live;
#[cfg(feature = "plugins")]
pub use routechain_plugin_loader as plugins;
pub use routechain_routers as routers;
pub use routechain_rules as rules;

/// What the walkthrough in the crate documentation uses: `use routechain::prelude::*;`.
pub mod prelude {
    pub use routechain_balance::{CallError, Cluster};
    pub use routechain_core::{Request, Snapshot};
    pub use routechain_live::{LiveChain, LiveOptions};
    pub use routechain_rules::{ChainFile, LocatedErrors};
}

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
