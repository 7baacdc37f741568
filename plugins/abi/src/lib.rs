//! # routechain-plugin-abi
//!
//! The C ABI between routechain and router plugins loaded from shared libraries, and the
//! few lines a Rust plugin needs. This crate depends on nothing; plugin authors depend on
//! it alone. `routechain_plugin.h` beside it describes the same ABI for C.
//!
//! - [`ffi`]: the raw `#[repr(C)]` table, views, status codes and symbol names.
//! - [`safe`]: the [`PluginRouter`] / [`PluginPrepared`] traits a Rust plugin implements,
//!   and safe views of the snapshot, the request and the candidate words.
//! - [`export_router_plugin!`]: exports the ABI symbols for one or more routers.
//!
//! ```
//! use routechain_plugin_abi::*;
//!
//! /// Keeps the providers whose `env` param equals the config's `env`.
//! struct EnvRouter { env: String }
//! struct EnvPrepared { keep: Vec<u64> }
//!
//! impl PluginRouter for EnvRouter {
//!     type Prepared = EnvPrepared;
//!     fn prepare(&self, snapshot: &SnapshotView<'_>) -> Result<EnvPrepared, String> {
//!         let mut keep = vec![0u64; snapshot.len().div_ceil(64)];
//!         for i in 0..snapshot.len() {
//!             if snapshot.get(i, "env") == Some(self.env.as_str()) {
//!                 keep[i / 64] |= 1 << (i % 64);
//!             }
//!         }
//!         Ok(EnvPrepared { keep })
//!     }
//! }
//!
//! impl PluginPrepared for EnvPrepared {
//!     fn route(&self, _: &RequestView<'_>, c: &mut CandidateWords<'_>, _: &mut Explain<'_>)
//!         -> Result<(), String> {
//!         c.and_with(&self.keep);
//!         Ok(())
//!     }
//! }
//!
//! fn env_router(config: &str) -> Result<EnvRouter, String> {
//!     // A real plugin parses the JSON config (serde_json, say); this one takes it raw.
//!     Ok(EnvRouter { env: config.trim_matches('"').to_string() })
//! }
//!
//! export_router_plugin! { "env" => env_router }
//! ```

#![allow(unsafe_code)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod ffi;
pub mod safe;

#[doc(hidden)]
pub mod glue;

pub use ffi::{
    ABI_VERSION_SYMBOL, FfiBuf, FfiPluginV1, FfiPrepared, FfiRequestView, FfiRouter,
    FfiSnapshotView, FfiStr, PLUGIN_V1_SYMBOL, RC_BAD_ARGUMENT, RC_BAD_CONFIG, RC_ERROR, RC_OK,
    RC_PANIC, RC_UNKNOWN_ROUTER, ROUTECHAIN_PLUGIN_ABI_VERSION, status_name,
};
pub use safe::{CandidateWords, Explain, PluginPrepared, PluginRouter, RequestView, SnapshotView};

/// Exports routers from a `cdylib` crate: `"name" => constructor`, where the constructor is
/// `fn(&str) -> Result<R, String>` taking the chain entry's `config` as JSON text and `R`
/// implements [`PluginRouter`]. The first router is the default when a chain entry names
/// none. Invoke it once, at the crate root.
///
/// It defines the two exported symbols (`routechain_plugin_abi_version` and
/// `routechain_plugin_v1`) and a static table whose functions catch every panic.
#[macro_export]
macro_rules! export_router_plugin {
    ($($name:literal => $ctor:expr),+ $(,)?) => {
        // The exported symbols and the raw entry point need `unsafe`; it is confined to this
        // expansion, which the ABI crate owns.
        #[allow(unsafe_code)]
        const _: () = {
            static __RC_NAMES: &[$crate::FfiStr] = &[$($crate::FfiStr::new($name)),+];
            static __RC_ROUTERS: &[(&str, $crate::glue::Ctor)] = &[
                $(($name, |config: &str| $crate::glue::boxed(($ctor)(config)))),+
            ];
            unsafe extern "C" fn __rc_create(
                name: $crate::FfiStr,
                config_json: $crate::FfiStr,
                out: *mut *mut $crate::FfiRouter,
                err: *mut $crate::FfiBuf,
            ) -> i32 {
                // SAFETY: the host calls `create` under its documented contract, which
                // `glue::create` requires unchanged.
                unsafe { $crate::glue::create(__RC_ROUTERS, name, config_json, out, err) }
            }
            static __RC_TABLE: $crate::FfiPluginV1 = $crate::glue::table(__RC_NAMES, __rc_create);

            /// The ABI version this library speaks; the host checks it first.
            #[unsafe(no_mangle)]
            pub extern "C" fn routechain_plugin_abi_version() -> u32 {
                $crate::ROUTECHAIN_PLUGIN_ABI_VERSION
            }

            /// The function table (static: valid while the library is loaded).
            #[unsafe(no_mangle)]
            pub extern "C" fn routechain_plugin_v1() -> *const $crate::FfiPluginV1 {
                &__RC_TABLE
            }
        };
    };
}
