//! # routechain-routers
//!
//! The built-in routers, one module per router. Each module compiles its rule document
//! (schema in `routechain_rules::schema`) into a [`routechain_core::Router`], prepares
//! per-snapshot indexes, and routes each call with bitset operations.
//!
//! [`register_builtins`] registers every built-in type into a [`Registry`] value.
//!
//! Default priorities (lower runs first; an entry's `priority` overrides them):
//!
//! | type | priority | why | without a rule |
//! |---|---|---|---|
//! | `mock` | -100 | Dubbo's | takes none: routes by the `invocation.need.mock` attachment |
//! | `mesh` | [`mesh::DEFAULT_PRIORITY`] (-50) | Dubbo's | every provider passes |
//! | `tag` | 100 | Dubbo's | static-tag routing |
//! | `condition` | 140 (service scope), 150 (application scope) | Dubbo's | every provider passes |
//! | `affinity` | see [`affinity`] | Dubbo's | every provider passes |
//! | `group` | [`group::GROUP_PRIORITY`] (160) | after Dubbo's tag (100) and condition (140/150) routers | the rule's defaults |
//! | `idc-weight` | [`idc_weight::IDC_WEIGHT_PRIORITY`] (170) | last: picks the datacenter among what the others left | every provider passes |
//!
//! "Without a rule" includes a config-center rule that was deleted
//! (`routechain_rules::RuleOverride::Cleared`): an entry that subscribes to a key can start
//! before its rule is written.

use std::sync::Arc;

use routechain_core::{Registry, RouterSpec};
use routechain_rules::schema::dubbo::is_application_scope;

pub mod affinity;
pub mod condition;
pub mod group;
pub mod idc_weight;
pub mod mesh;
pub mod mock;
pub mod tag;

pub use condition::{ConditionFactory, ConditionRouter, ConditionRule};

/// Registers every built-in router type into `registry`.
pub fn register_builtins(registry: &mut Registry) {
    registry.register("mock", Arc::new(mock::MockFactory));
    registry.register("mesh", Arc::new(mesh::MeshFactory));
    registry.register("tag", Arc::new(tag::TagFactory));
    registry.register("condition", Arc::new(ConditionFactory));
    registry.register("affinity", Arc::new(affinity::AffinityFactory));
    registry.register("group", Arc::new(group::GroupFactory));
    registry.register("idc-weight", Arc::new(idc_weight::IdcWeightFactory));
}

/// The default priority of a router type whose Dubbo order depends on the rule's scope:
/// `application` for `scope: application`, else `service` (no rule included).
pub(crate) fn scope_priority(spec: &RouterSpec<'_>, service: i32, application: i32) -> i32 {
    if spec.rule.is_some_and(|r| is_application_scope(r.value)) {
        application
    } else {
        service
    }
}

/// A registry holding the built-in router types.
pub fn builtin_registry() -> Registry {
    let mut registry = Registry::new();
    register_builtins(&mut registry);
    registry
}

/// Helpers shared by the routers' unit tests.
#[cfg(test)]
mod test_support {
    use std::sync::Arc;

    use routechain_core::{FieldPath, Router, RouterFactory, RouterSpec, RuleDoc, RuleError};
    use routechain_rules::YamlDoc;

    /// Builds a router of `type_name` with `factory`, as entry `routers[0]` of a chain file
    /// with `rule` (YAML text) as its rule document.
    pub(crate) fn build(
        factory: &dyn RouterFactory,
        type_name: &str,
        rule: Option<&str>,
    ) -> Result<Arc<dyn Router>, Vec<RuleError>> {
        let doc = rule.map(|t| YamlDoc::parse("rule.yaml", t).unwrap());
        let root = FieldPath::root();
        let entry_path = FieldPath::root().key("routers").index(0);
        let entry = serde_json::Value::Null;
        factory.build(&RouterSpec {
            type_name,
            entry: RuleDoc::new(&entry, &entry_path),
            rule: doc.as_ref().map(|d| RuleDoc::new(&d.value, &root)),
            base_dir: None,
            service: None,
        })
    }
}
