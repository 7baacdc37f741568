//! The `plugin` router type: chain entries that name a shared library.
//!
//! ```yaml
//! routers:
//!   - type: plugin
//!     path: plugins/librouter_canary.so   # relative to the chain file's directory, or absolute
//!     name: canary                        # optional: which router of the library
//!     priority: 120                       # optional (default 200)
//!     config: { percent: 5, header: x-user }   # any YAML, handed over as JSON text
//! ```
//!
//! Instead of `config`, the entry may take its config from `rule` / `rule_file` (so a config
//! center can push it like any rule); giving both is an error.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};

use routechain_core::{FieldPath, Registry, Router, RouterFactory, RouterSpec, RuleError};
use serde_json::Value;

use crate::library::PluginError;
use crate::router::{LoadedRouter, PluginStats};

/// The type name plugin entries use.
pub const PLUGIN_TYPE: &str = "plugin";

/// The priority of a plugin entry that names none: after Dubbo's built-in routers
/// (mock −100, tag 100, condition 140–150).
pub const DEFAULT_PRIORITY: i32 = 200;

/// Builds routers from `type: plugin` entries, and remembers their failure counters.
#[derive(Debug, Default)]
pub struct PluginFactory {
    built: Mutex<Vec<Weak<PluginStats>>>,
}

impl PluginFactory {
    /// A factory.
    pub fn new() -> Self {
        Self::default()
    }

    /// The failure counters of the plugin routers this factory built that are still alive,
    /// in build order.
    pub fn stats(&self) -> Vec<Arc<PluginStats>> {
        let built = self.built.lock().unwrap_or_else(|p| p.into_inner());
        built.iter().filter_map(Weak::upgrade).collect()
    }

    fn remember(&self, stats: &Arc<PluginStats>) {
        let mut built = self.built.lock().unwrap_or_else(|p| p.into_inner());
        built.retain(|w| w.strong_count() > 0);
        built.push(Arc::downgrade(stats));
    }
}

/// Registers the `plugin` router type into `registry` and returns its factory (to read the
/// failure counters).
pub fn register(registry: &mut Registry) -> Arc<PluginFactory> {
    let factory = Arc::new(PluginFactory::new());
    registry.register(PLUGIN_TYPE, factory.clone());
    factory
}

impl RouterFactory for PluginFactory {
    fn extra_fields(&self) -> &'static [&'static str] {
        &["path", "name", "config"]
    }

    fn build(&self, spec: &RouterSpec<'_>) -> Result<Arc<dyn Router>, Vec<RuleError>> {
        let entry = spec.entry;
        let at = |field: &str| entry.path.key(field);
        let entry_value = entry.value();
        let field = |name: &str| entry_value.get(name).filter(|v| !v.is_null());
        let mut errors = Vec::new();

        let path = match field("path") {
            Some(Value::String(p)) if !p.trim().is_empty() => Some(p.clone()),
            Some(_) => {
                errors.push(RuleError::new(
                    at("path"),
                    "`path` must be the path of a plugin library",
                ));
                None
            }
            None => {
                errors.push(RuleError::new(
                    entry.path.clone(),
                    "missing field `path` (the plugin library, relative to the chain file or absolute)",
                ));
                None
            }
        };
        let name = match field("name") {
            None => None,
            Some(Value::String(n)) if !n.is_empty() => Some(n.clone()),
            Some(_) => {
                errors.push(RuleError::new(
                    at("name"),
                    "`name` must be a router name of the library",
                ));
                None
            }
        };
        let config = match (field("config"), spec.rule) {
            (Some(_), Some(rule)) => {
                errors.push(RuleError::new(
                    rule.path.clone(),
                    "give the plugin's config in `config` or in `rule`/`rule_file`, not both",
                ));
                None
            }
            (Some(c), None) => Some((std::borrow::Cow::Borrowed(c), at("config"))),
            (None, Some(rule)) => Some((rule.value(), rule.path.clone())),
            (None, None) => None,
        };
        let (config_json, config_path) = match config {
            Some((value, path)) => (value.to_string(), path),
            None => ("{}".to_string(), at("config")),
        };
        let Some(path) = path else {
            return Err(errors);
        };
        if !errors.is_empty() {
            return Err(errors);
        }
        let resolved = resolve_library_path(spec.base_dir, &path);
        match LoadedRouter::load(&resolved, name.as_deref(), &config_json) {
            Ok(router) => {
                self.remember(router.stats());
                Ok(Arc::new(router))
            }
            Err(e) => {
                let field: FieldPath = match &e {
                    PluginError::UnknownRouter { .. } => at("name"),
                    PluginError::Create { .. } => config_path,
                    _ => at("path"),
                };
                Err(vec![RuleError::new(field, e.to_string())])
            }
        }
    }
}

/// The plugin library at `path`, relative to the chain file's directory `base_dir` (the
/// working directory when the chain has no file), made absolute: a bare name such as
/// `librouter.so` must never reach the system library search of `dlopen`, which would look
/// in the system directories and could load a same-named library from elsewhere.
pub fn resolve_library_path(base_dir: Option<&std::path::Path>, path: &str) -> PathBuf {
    let path = std::path::Path::new(path);
    let joined = match base_dir {
        Some(dir) if !path.is_absolute() => dir.join(path),
        _ => path.to_path_buf(),
    };
    // `std::path::absolute` only fails on an empty path or without a working directory;
    // then `./` still keeps the name out of the library search.
    std::path::absolute(&joined).unwrap_or_else(|_| std::path::Path::new(".").join(joined))
}

#[cfg(test)]
mod path_tests {
    use super::resolve_library_path;
    use std::path::Path;

    #[test]
    fn a_bare_name_resolves_against_the_chain_directory_never_the_library_search() {
        let cwd = std::env::current_dir().unwrap();
        // `chain.yaml` has the directory "": the working directory.
        assert_eq!(
            resolve_library_path(Some(Path::new("")), "libx.so"),
            cwd.join("libx.so")
        );
        assert_eq!(
            resolve_library_path(Some(Path::new("conf")), "libx.so"),
            cwd.join("conf/libx.so")
        );
        assert_eq!(resolve_library_path(None, "libx.so"), cwd.join("libx.so"));
        assert_eq!(
            resolve_library_path(Some(Path::new("conf")), "/opt/libx.so"),
            Path::new("/opt/libx.so")
        );
        assert!(resolve_library_path(Some(Path::new("")), "libx.so").is_absolute());
    }
}
