//! # routechain-routers
//!
//! The built-in routers, one module per router. Each module compiles its rule document
//! (schema in `routechain_rules::schema`) into a [`routechain_core::Router`], prepares
//! per-snapshot indexes, and routes each call with bitset operations.
//!
//! [`register_builtins`] registers every built-in type into a [`Registry`] value.

use std::sync::Arc;

use routechain_core::Registry;

pub mod affinity;
pub mod condition;
pub mod mock;
pub mod tag;

pub use condition::{ConditionFactory, ConditionRouter, ConditionRule};

/// Registers every built-in router type into `registry`.
pub fn register_builtins(registry: &mut Registry) {
    registry.register("mock", Arc::new(mock::MockFactory));
    registry.register("tag", Arc::new(tag::TagFactory));
    registry.register("condition", Arc::new(ConditionFactory));
    registry.register("affinity", Arc::new(affinity::AffinityFactory));
}

/// A registry holding the built-in router types.
pub fn builtin_registry() -> Registry {
    let mut registry = Registry::new();
    register_builtins(&mut registry);
    registry
}
