//! # routechain-plugin-loader
//!
//! Loads routechain router plugins from shared libraries (`libloading`) and wraps them in
//! the ordinary [`routechain_core::Router`] / [`routechain_core::PreparedRouter`] traits,
//! so a plugin runs in a chain like any built-in router.
//!
//! - [`library`]: opening a library — the ABI version handshake first, then the symbol and
//!   table checks; errors name the path and the reason.
//! - [`router`]: [`LoadedRouter`] and its prepared states, the host side of the views, and
//!   failure accounting ([`PluginStats`]): a plugin error or panic keeps the call's
//!   candidates unchanged, is counted, logged with `tracing` and shown in the explain trace.
//! - [`factory`]: the `plugin` router type for chain files ([`register`]).
//!
//! ```no_run
//! use routechain_core::Registry;
//! use routechain_rules::ChainFile;
//!
//! let mut registry = Registry::new();
//! routechain_routers::register_builtins(&mut registry);
//! let plugins = routechain_plugin_loader::register(&mut registry);
//! let chain = ChainFile::load("chain.yaml".as_ref()).expect("chain file");
//! let entries = chain.compile(&registry).expect("routers");
//! // ... build a ChainState from `entries`; later:
//! for s in plugins.stats() {
//!     println!("{} in {}: {} failures", s.router(), s.path().display(), s.failures());
//! }
//! ```
//!
//! The library stays loaded while any router or prepared state made from it lives.

#![allow(unsafe_code)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod factory;
pub mod library;
pub mod router;

pub use factory::{DEFAULT_PRIORITY, PLUGIN_TYPE, PluginFactory, register};
pub use library::{PluginError, PluginLibrary};
pub use router::{LoadedRouter, PluginStats};
