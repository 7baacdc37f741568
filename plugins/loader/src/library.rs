//! Opening a plugin library: the version handshake, the table checks, and the errors that
//! name the path and the reason.

use std::path::{Path, PathBuf};

use routechain_plugin_abi::ffi::{
    FfiAbiVersionFn, FfiCreate, FfiPluginV1, FfiPluginV1Fn, FfiPrepare, FfiReleasePrepared,
    FfiReleaseRouter, FfiRoute,
};
use routechain_plugin_abi::{ABI_VERSION_SYMBOL, PLUGIN_V1_SYMBOL, ROUTECHAIN_PLUGIN_ABI_VERSION};

/// The most router names a library may declare (a guard against a garbage table).
const MAX_ROUTERS: usize = 1024;

/// Why a plugin could not be loaded or a router not created. Every variant names the
/// library's path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PluginError {
    /// No file at the path.
    #[error("plugin library {path} does not exist")]
    NotFound {
        /// The path tried.
        path: PathBuf,
    },
    /// The file exists but the dynamic loader refused it (not a library, wrong
    /// architecture, unresolved dependency...).
    #[error("cannot load plugin library {path}: {reason}")]
    Open {
        /// The path tried.
        path: PathBuf,
        /// The loader's message.
        reason: String,
    },
    /// A required symbol is not exported.
    #[error("plugin library {path} is not a routechain plugin: missing symbol `{symbol}`")]
    MissingSymbol {
        /// The library.
        path: PathBuf,
        /// The symbol.
        symbol: &'static str,
    },
    /// The library speaks another ABI version.
    #[error(
        "plugin library {path} speaks routechain plugin ABI version {found}, this host speaks version {expected}; rebuild the plugin against routechain-plugin-abi {expected}"
    )]
    AbiVersion {
        /// The library.
        path: PathBuf,
        /// What it returned.
        found: u32,
        /// What this host speaks.
        expected: u32,
    },
    /// The function table is malformed (null, too small, a null function, no router).
    #[error("plugin library {path} has an invalid function table: {reason}")]
    BadTable {
        /// The library.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The entry's `name` is not a router of the library.
    #[error("plugin library {path} exports no router named {name:?}; it exports {available:?}")]
    UnknownRouter {
        /// The library.
        path: PathBuf,
        /// The name asked for.
        name: String,
        /// The names it exports.
        available: Vec<String>,
    },
    /// The plugin refused to create the router (usually: a bad config).
    #[error("plugin router {router:?} of {path} refused its config ({status}): {message}")]
    Create {
        /// The library.
        path: PathBuf,
        /// The router name.
        router: String,
        /// The status, in words.
        status: &'static str,
        /// The plugin's message.
        message: String,
    },
}

/// The table's functions, checked non-null.
#[derive(Clone, Copy)]
pub(crate) struct Fns {
    pub(crate) create: FfiCreate,
    pub(crate) prepare: FfiPrepare,
    pub(crate) route: FfiRoute,
    pub(crate) release_prepared: FfiReleasePrepared,
    pub(crate) release_router: FfiReleaseRouter,
}

/// A loaded, checked plugin library. Routers and prepared states hold it in an `Arc`, so
/// the library stays loaded while any of them lives.
pub struct PluginLibrary {
    path: PathBuf,
    names: Vec<String>,
    pub(crate) fns: Fns,
    // Last field: dropped (unloaded) after everything else.
    _library: libloading::Library,
}

impl std::fmt::Debug for PluginLibrary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginLibrary")
            .field("path", &self.path)
            .field("routers", &self.names)
            .finish()
    }
}

impl PluginLibrary {
    /// Loads the library at `path` and checks, in this order: the file exists, it loads,
    /// it exports `routechain_plugin_abi_version` returning
    /// [`ROUTECHAIN_PLUGIN_ABI_VERSION`], it exports `routechain_plugin_v1`, and that table
    /// is at least as large as this host's, repeats the version, names at least one router
    /// and has no null function.
    pub fn open(path: &Path) -> Result<Self, PluginError> {
        let path_buf = path.to_path_buf();
        match std::fs::metadata(path) {
            Ok(m) if m.is_file() => {}
            Ok(_) => {
                return Err(PluginError::Open {
                    path: path_buf,
                    reason: "not a regular file".to_string(),
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(PluginError::NotFound { path: path_buf });
            }
            Err(e) => {
                return Err(PluginError::Open {
                    path: path_buf,
                    reason: e.to_string(),
                });
            }
        }
        // SAFETY: loading a library runs its initializers. The operator named this file as a
        // routechain plugin in the chain configuration; trusting its code is the premise of
        // native plugins. Everything it exports is checked before use below.
        let library = unsafe { libloading::Library::new(path) }.map_err(|e| PluginError::Open {
            path: path_buf.clone(),
            reason: e.to_string(),
        })?;
        let missing = |symbol| PluginError::MissingSymbol {
            path: path_buf.clone(),
            symbol,
        };
        // SAFETY: the symbol, if present, is the ABI's `uint32_t (*)(void)`; a library that
        // exports this name with another type breaks the ABI it claims.
        let version_fn: FfiAbiVersionFn = unsafe {
            *library
                .get::<FfiAbiVersionFn>(ABI_VERSION_SYMBOL.as_bytes())
                .map_err(|_| missing(ABI_VERSION_SYMBOL))?
        };
        // SAFETY: a plain function of no arguments, per the ABI (checked to exist above).
        let found = unsafe { version_fn() };
        if found != ROUTECHAIN_PLUGIN_ABI_VERSION {
            return Err(PluginError::AbiVersion {
                path: path_buf,
                found,
                expected: ROUTECHAIN_PLUGIN_ABI_VERSION,
            });
        }
        // SAFETY: the library speaks ABI 1, in which this symbol is `const rc_plugin_v1 *(*)(void)`.
        let table_fn: FfiPluginV1Fn = unsafe {
            *library
                .get::<FfiPluginV1Fn>(PLUGIN_V1_SYMBOL.as_bytes())
                .map_err(|_| missing(PLUGIN_V1_SYMBOL))?
        };
        let bad = |reason: String| PluginError::BadTable {
            path: path_buf.clone(),
            reason,
        };
        // SAFETY: a plain function of no arguments returning a pointer to static data.
        let table_ptr = unsafe { table_fn() };
        if table_ptr.is_null() {
            return Err(bad("routechain_plugin_v1() returned null".to_string()));
        }
        // SAFETY: non-null; every version of the table starts with its `size` (a `size_t`),
        // so reading that first field is valid whatever the table's version.
        let size = unsafe { std::ptr::read(table_ptr as *const usize) };
        let known = std::mem::size_of::<FfiPluginV1>();
        if size < known {
            return Err(bad(format!(
                "the table is {size} bytes, smaller than the {known} bytes of ABI version {ROUTECHAIN_PLUGIN_ABI_VERSION}"
            )));
        }
        // SAFETY: the table is at least as large as the struct this host knows, static and
        // immutable while the library is loaded (which outlives this borrow).
        let table: &FfiPluginV1 = unsafe { &*table_ptr };
        if table.abi_version != ROUTECHAIN_PLUGIN_ABI_VERSION {
            return Err(bad(format!(
                "the table says ABI version {}, the library said {found}",
                table.abi_version
            )));
        }
        if table.router_names.is_null() || table.router_count == 0 {
            return Err(bad("it names no router".to_string()));
        }
        if table.router_count > MAX_ROUTERS {
            return Err(bad(format!(
                "it names {} routers (more than {MAX_ROUTERS})",
                table.router_count
            )));
        }
        // SAFETY: `router_count` (bounded above) names at `router_names`, static data.
        let raw_names =
            unsafe { std::slice::from_raw_parts(table.router_names, table.router_count) };
        let mut names = Vec::with_capacity(raw_names.len());
        for (i, n) in raw_names.iter().enumerate() {
            // SAFETY: each name borrows static data of the library.
            match unsafe { n.as_str() } {
                Some(s) if !s.is_empty() => names.push(s.to_string()),
                _ => return Err(bad(format!("router name {i} is null, empty or not UTF-8"))),
            }
        }
        fn need<T>(f: Option<T>, name: &str) -> Result<T, String> {
            f.ok_or_else(|| format!("function `{name}` is null"))
        }
        let fns = (|| {
            Ok::<_, String>(Fns {
                create: need(table.create, "create")?,
                prepare: need(table.prepare, "prepare")?,
                route: need(table.route, "route")?,
                release_prepared: need(table.release_prepared, "release_prepared")?,
                release_router: need(table.release_router, "release_router")?,
            })
        })()
        .map_err(bad)?;
        Ok(PluginLibrary {
            path: path_buf,
            names,
            fns,
            _library: library,
        })
    }

    /// The path it was loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The routers it exports; the first is the default.
    pub fn router_names(&self) -> &[String] {
        &self.names
    }
}
