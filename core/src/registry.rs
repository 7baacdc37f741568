//! The router registry: a plain value mapping router type names to factories.
//!
//! Built-in routers register into it, compiled-in user routers and loaded plugins register
//! into the same value, and the chain loader looks types up in the registry it is given.
//! There is no global registry: tests build their own.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use crate::router::Router;
use crate::rule::{RuleDoc, RuleError};

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

/// Builds routers of one type from chain entries.
pub trait RouterFactory: Send + Sync {
    /// The priority used when the entry names none (lower runs first). It may depend on
    /// the rule (Dubbo runs service-scope condition rules at 140, application-scope at 150).
    fn default_priority(&self, spec: &RouterSpec<'_>) -> i32;

    /// Entry fields this type accepts besides the common ones (`type`, `priority`, `rule`,
    /// `rule_file`, `application`); any other field is an error.
    fn extra_fields(&self) -> &'static [&'static str] {
        &[]
    }

    /// Compiles the entry into a router, reporting every problem found.
    fn build(&self, spec: &RouterSpec<'_>) -> Result<Arc<dyn Router>, Vec<RuleError>>;
}

/// Type name → factory.
#[derive(Clone, Default)]
pub struct Registry {
    factories: BTreeMap<String, Arc<dyn RouterFactory>>,
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
        self.factories.insert(type_name.into(), factory)
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
