//! # routechain
//!
//! An ordered chain of routers, modeled on Apache Dubbo's, that narrows a service's provider
//! list for every call; a load balancer then picks one provider. This crate is the facade:
//! it re-exports the model ([`core`]), the built-in routers ([`routers`]) and the rule
//! loading ([`rules`]), assembles the default [`registry`], loads a chain from files
//! ([`load`]), keeps it current from files or ZooKeeper ([`live`]) and holds the `routechain` command-line tool ([`cli`]).
//!
//! ```
//! use std::sync::Arc;
//! use routechain::core::{CallState, Request, Snapshot};
//!
//! let chain_yaml = "
//! routers:
//!   - type: condition
//!     rule:
//!       conditions:
//!         - method = getComment => region = hangzhou
//! ";
//! let providers = Snapshot::parse_lines(1, "\
//!     dubbo://10.0.0.1:20880/com.foo.CommentService?region=hangzhou\n\
//!     dubbo://10.0.0.2:20880/com.foo.CommentService?region=beijing\n").unwrap();
//! let chain_file = routechain::rules::ChainFile::parse("inline.yaml", chain_yaml, None).unwrap();
//! let state = routechain::load::build_state(&chain_file, &routechain::registry(), Arc::new(providers), None)
//!     .unwrap();
//! let mut call = CallState::seeded(7);
//! state.route(&Request::new().with_method("getComment"), &mut call).unwrap();
//! let routed: Vec<&str> = call.candidates.iter()
//!     .map(|i| state.snapshot().providers()[i].address())
//!     .collect();
//! assert_eq!(routed, ["10.0.0.1:20880"]);
//! ```

pub use routechain_core as core;
pub use routechain_routers as routers;
pub use routechain_rules as rules;

pub mod cli;
pub mod live;
pub mod load;

use routechain_core::Registry;

/// The registry of every router type routechain ships: the built-in routers (and the
/// shared-library `plugin` type).
pub fn registry() -> Registry {
    let mut registry = Registry::new();
    routechain_routers::register_builtins(&mut registry);
    registry
}
