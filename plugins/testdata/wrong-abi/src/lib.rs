//! A test plugin that speaks another ABI version: the host must refuse it before reading
//! anything else (it exports no table at all, so a host that skipped the check would fail
//! differently).

// Exporting an unmangled symbol is an `unsafe` attribute; this test crate exists to do it.
#![allow(unsafe_code)]

/// Claims ABI version 999.
#[unsafe(no_mangle)]
pub extern "C" fn routechain_plugin_abi_version() -> u32 {
    routechain_plugin_abi::ROUTECHAIN_PLUGIN_ABI_VERSION + 998
}
