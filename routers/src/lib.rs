//! # routechain-routers
//!
//! The built-in routers, one folder per router (`routers/src/<name>/`). Each folder holds
//! the router's rule as written and its validation (`rule.rs`: `RawXRule` →
//! `XRule::compile`), the router type (`XRouter`, a [`routechain_core::TypedRouter`]), its
//! prepared per-snapshot state (`PreparedX`), its per-call route and its explain texts.
//! [`register_builtins`] registers every built-in type into a [`Registry`] value.
//! `dubbo` holds what Dubbo's own rule documents (condition, tag, affinity) share.
//!
//! Default priorities (lower runs first; an entry's `priority` overrides them), each the
//! `DEFAULT_PRIORITY` of its folder:
//!
//! | type | priority | why | without a rule |
//! |---|---|---|---|
//! | `mock` | [`mock::DEFAULT_PRIORITY`] (-100) | Dubbo's | takes none: routes by the `invocation.need.mock` attachment |
//! | `mesh` | [`mesh::DEFAULT_PRIORITY`] (-50) | Dubbo's | every provider passes |
//! | `tag` | [`tag::DEFAULT_PRIORITY`] (100) | Dubbo's | static-tag routing |
//! | `affinity` | [`affinity::DEFAULT_PRIORITY`] (130), [`affinity::APPLICATION_SCOPE_PRIORITY`] (135) | Dubbo's | every provider passes |
//! | `condition` | [`condition::DEFAULT_PRIORITY`] (140), [`condition::APPLICATION_SCOPE_PRIORITY`] (150) | Dubbo's | every provider passes |
//! | `group` | [`group::DEFAULT_PRIORITY`] (160) | after Dubbo's tag (100) and condition (140/150) routers | the rule's defaults |
//! | `idc-weight` | [`idc_weight::DEFAULT_PRIORITY`] (170) | last: picks the datacenter among what the others left | every provider passes |
//!
//! "Without a rule" includes a config-center rule that was deleted
//! (`routechain_rules::RuleOverride::Cleared`): an entry that subscribes to a key can start
//! before its rule is written.
//!
//! ## Adding a router
//!
//! A new built-in router `x` (type name `x`) touches exactly:
//!
//! 1. its folder `routers/src/x/`: `mod.rs` with `pub const DEFAULT_PRIORITY`, the router
//!    type `XRouter` implementing [`routechain_core::TypedRouter`] (raw rule, compiled rule,
//!    prepared state; `compile`, `prepare`, `route`), `PreparedX` and its per-call route
//!    with its explain texts; `rule.rs` with `RawXRule` (serde, `deny_unknown_fields`) and
//!    `XRule::compile(raw, path)` reporting every problem by field path; more files for
//!    further jobs (each under ~800 lines); unit tests beside them (`tests.rs`);
//! 2. one line in this file: `pub mod x;` and one line in [`register_builtins`]
//!    (`registry.register_typed("x", x::XRouter);`);
//! 3. its cases for the router harness: `tests/routers/x.yaml` (providers, rule, requests,
//!    expected providers, exact explain texts; every case is also checked for zero
//!    allocations per call);
//! 4. its docs page in `docs/` (or a section of the family's page), a line in the README's
//!    router table, and a commented example under `rules/examples/x/` (a test compiles
//!    every example).
//!
//! Nothing else: the chain file, the loader, the registry, live updates and the command
//! line find the type through the registry.

use routechain_core::Registry;

pub mod affinity;
pub mod condition;
mod dubbo;
pub mod group;
pub mod idc_weight;
pub mod mesh;
pub mod mock;
pub mod tag;

/// `v.trim()`, without scanning when both ends are visible ASCII (the usual parameter or
/// group value).
#[inline]
pub(crate) fn trim(v: &str) -> &str {
    match (v.as_bytes().first(), v.as_bytes().last()) {
        (Some(f), Some(l)) if f.is_ascii_graphic() && l.is_ascii_graphic() => v,
        _ => v.trim(),
    }
}

/// Registers every built-in router type into `registry`.
pub fn register_builtins(registry: &mut Registry) {
    registry.register_typed("mock", mock::MockRouter);
    registry.register_typed("mesh", mesh::MeshRouter);
    registry.register_typed("tag", tag::TagRouter);
    registry.register_typed("condition", condition::ConditionRouter);
    registry.register_typed("affinity", affinity::AffinityRouter);
    registry.register_typed("group", group::GroupRouter);
    registry.register_typed("idc-weight", idc_weight::IdcWeightRouter);
}

/// A registry holding the built-in router types.
pub fn builtin_registry() -> Registry {
    let mut registry = Registry::new();
    register_builtins(&mut registry);
    registry
}

/// Tests across the built-in routers (each router's own tests are in its folder), and the
/// helpers they share (`tests/support.rs`, reached as `crate::test_support`).
#[cfg(test)]
mod tests;
#[cfg(test)]
use tests::support as test_support;
