//! A test plugin that passes the version check but exports no `routechain_plugin_v1` table.

// Exporting an unmangled symbol is an `unsafe` attribute; this test crate exists to do it.
#![allow(unsafe_code)]

/// The right version, and nothing else.
#[unsafe(no_mangle)]
pub extern "C" fn routechain_plugin_abi_version() -> u32 {
    routechain_plugin_abi::ROUTECHAIN_PLUGIN_ABI_VERSION
}
