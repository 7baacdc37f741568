//! The router registry: a plain value mapping router type names to factories.
//!
//! Built-in routers register into it, compiled-in user routers and loaded plugins register
//! into the same value, and the chain loader looks types up in the registry it is given.
//! There is no global registry: tests build their own.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use crate::bitset::Candidates;
use crate::router::{FnFactory, RouteContext, Router, TypedFactory, TypedRouter, router_fn};
use crate::rule::{FieldPath, RuleDoc, RuleError};

/// What a factory receives to build one router of a chain.
#[derive(Debug, Clone, Copy)]
pub struct RouterSpec<'a> {
    /// The type name the entry asked for.
    pub type_name: &'a str,
    /// The whole chain entry (a mapping), for type-specific fields such as a plugin's `path`.
    pub entry: RuleDoc<'a>,
    /// The rule document (inline `rule`, a `rule_file`, or a config-center node); `None`
    /// when the entry has none, or a config-center rule was deleted.
    pub rule: Option<RuleDoc<'a>>,
    /// The directory relative paths are resolved against (the chain file's).
    pub base_dir: Option<&'a Path>,
    /// The chain's service, if named.
    pub service: Option<&'a str>,
}

impl RouterSpec<'_> {
    /// The path of the rule document, or of the entry when it has no rule: rule errors are
    /// located below it.
    pub fn rule_path(&self) -> &FieldPath {
        self.rule.map_or(self.entry.path, |r| r.path)
    }

    /// An error at `relative` below the rule document (see [`RouterSpec::rule_path`]).
    pub fn error(&self, relative: &FieldPath, message: impl Into<String>) -> RuleError {
        RuleError::new(self.rule_path().join(relative), message)
    }
}

/// Builds routers of one type from chain entries: the object-safe twin of
/// [`TypedRouter`] (see [`TypedFactory`]), which the registry stores.
pub trait RouterFactory: Send + Sync {
    /// Entry fields this type accepts besides the common ones (`type`, `priority`, `rule`,
    /// `rule_file`, `application`); any other field is an error.
    fn extra_fields(&self) -> &'static [&'static str] {
        &[]
    }

    /// Compiles the entry into a router, reporting every problem found. The router knows
    /// its default priority ([`Router::default_priority`]).
    fn build(&self, spec: &RouterSpec<'_>) -> Result<Arc<dyn Router>, Vec<RuleError>>;

    /// Whether a router this factory builds may depend on the chain's service
    /// ([`RouterSpec::service`]). When it does not, the services a process builds from one
    /// chain configuration for different references (`routechain_live::ChainTemplate`)
    /// share the router compiled once instead of compiling one each. Default `true`.
    fn reads_service(&self) -> bool {
        true
    }
}

/// Type name → factory.
///
/// Cloning a registry is cheap: clones share one map (a reference count), and a clone that
/// registers a type copies the map first, so registering never changes another clone. A
/// process serving many services builds one registry and hands each live chain a clone.
#[derive(Clone, Default)]
pub struct Registry {
    factories: Arc<BTreeMap<String, Arc<dyn RouterFactory>>>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }
    /// Registers `factory` under `type_name`, returning the factory it replaces.
    pub fn register(
        &mut self,
        type_name: impl Into<String>,
        factory: Arc<dyn RouterFactory>,
    ) -> Option<Arc<dyn RouterFactory>> {
        Arc::make_mut(&mut self.factories).insert(type_name.into(), factory)
    }
    /// Registers the typed router `router` under `type_name` (see [`TypedRouter`]),
    /// returning the factory it replaces.
    pub fn register_typed<T: TypedRouter>(
        &mut self,
        type_name: impl Into<String>,
        router: T,
    ) -> Option<Arc<dyn RouterFactory>> {
        let type_name = type_name.into();
        let factory = Arc::new(TypedFactory::new(type_name.as_str(), router));
        self.register(type_name, factory)
    }
    /// Registers a closure router under `type_name`, so chain files can name it: every
    /// entry of that type runs `f` per call (at `priority` unless the entry names one); an
    /// entry with a rule is an error. Returns the factory it replaces.
    pub fn register_fn<F>(
        &mut self,
        type_name: impl Into<String>,
        priority: i32,
        f: F,
    ) -> Option<Arc<dyn RouterFactory>>
    where
        F: Fn(&mut RouteContext<'_>, &mut Candidates) + Send + Sync + 'static,
    {
        let type_name = type_name.into();
        let router = router_fn(type_name.as_str(), f).with_priority(priority);
        self.register(type_name, Arc::new(FnFactory(router)))
    }
    /// The factory for `type_name`.
    pub fn get(&self, type_name: &str) -> Option<&Arc<dyn RouterFactory>> {
        self.factories.get(type_name)
    }
    /// The registered type names, sorted.
    pub fn type_names(&self) -> impl Iterator<Item = &str> + '_ {
        self.factories.keys().map(String::as_str)
    }
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.factories.keys()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_one_map_until_one_registers() {
        let mut a = Registry::new();
        a.register_fn("keep", 10, |_, _| {});
        let mut b = a.clone();
        assert!(
            Arc::ptr_eq(&a.factories, &b.factories),
            "a clone copies nothing"
        );
        assert!(Arc::ptr_eq(
            a.get("keep").expect("registered"),
            b.get("keep").expect("cloned")
        ));
        // Registering into one clone leaves the other as it was.
        b.register_fn("drop", 20, |_, c| c.clear());
        assert_eq!(a.type_names().collect::<Vec<_>>(), ["keep"]);
        assert_eq!(b.type_names().collect::<Vec<_>>(), ["drop", "keep"]);
        a.register_fn("keep", 30, |_, _| {});
        assert!(!Arc::ptr_eq(
            a.get("keep").expect("replaced"),
            b.get("keep").expect("kept")
        ));
    }
}
