//! # routechain
//!
//! An ordered chain of routers, modeled on Apache Dubbo's, that narrows a service's provider
//! list for every call; a load balancer then picks one provider. This crate is the facade:
//! it re-exports the model ([`core`]), the built-in routers ([`routers`]), the plugin
//! loader ([`plugins`]) and the rule loading ([`rules`]), assembles the default
//! [`registry`], loads a chain from files ([`load`]), keeps it current from files or
//! ZooKeeper ([`live`]) and holds the `routechain` command-line tool ([`cli`]).
//!
//! See the README's "The library" section for a complete example (compiled as a doc test).
//!

pub use routechain_core as core;
pub use routechain_plugin_loader as plugins;
pub use routechain_routers as routers;
pub use routechain_rules as rules;

pub mod cli;
pub mod demo;
pub mod live;
pub mod load;
pub mod testkit;

use routechain_core::Registry;

/// The registry of every router type routechain ships: the built-in routers (and the
/// shared-library `plugin` type).
pub fn registry() -> Registry {
    let mut registry = Registry::new();
    routechain_routers::register_builtins(&mut registry);
    routechain_plugin_loader::register(&mut registry);
    registry
}

/// The README's Rust examples, compiled and run as doc tests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
