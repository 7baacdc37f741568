//! The raw C ABI: `#[repr(C)]` structs, status codes and the exported symbol names.
//!
//! Everything here mirrors `routechain_plugin.h` field for field. Nothing Rust-specific
//! crosses the boundary: strings are borrowed `(pointer, length)` pairs of UTF-8 bytes,
//! buffers belong to the host, handles are opaque pointers, and functions are
//! `extern "C"`. A panic never crosses it: the plugin catches it and returns
//! [`RC_PANIC`].
//!
//! ## Lifecycle
//!
//! 1. The host calls [`ABI_VERSION_SYMBOL`] and refuses the library unless it returns
//!    [`ROUTECHAIN_PLUGIN_ABI_VERSION`]; then it calls [`PLUGIN_V1_SYMBOL`] and checks that
//!    the table's `size` is at least the size it knows and that no function is null.
//! 2. `create(name, config_json)` makes a router handle per chain entry.
//! 3. `prepare(router, snapshot)` makes a prepared handle per provider snapshot; several
//!    prepared handles of one router may be alive at once (an old snapshot still serves
//!    calls while the new one prepares).
//! 4. `route(prepared, request, words, word_count)` runs per call, concurrently from many
//!    threads on one prepared handle: it must be thread-safe and must not allocate.
//! 5. `release_prepared` for every prepared handle, then `release_router`; the host keeps the
//!    library loaded until both are done.

use std::ffi::c_void;
use std::marker::{PhantomData, PhantomPinned};

/// The ABI version this crate and `routechain_plugin.h` describe.
pub const ROUTECHAIN_PLUGIN_ABI_VERSION: u32 = 1;

/// The symbol `uint32_t routechain_plugin_abi_version(void)`, checked before anything else.
pub const ABI_VERSION_SYMBOL: &str = "routechain_plugin_abi_version";

/// The symbol `const rc_plugin_v1 *routechain_plugin_v1(void)`: the function table.
pub const PLUGIN_V1_SYMBOL: &str = "routechain_plugin_v1";

/// Success.
pub const RC_OK: i32 = 0;
/// The plugin failed and wrote a message into the error buffer.
pub const RC_ERROR: i32 = 1;
/// The plugin panicked (or, in C, hit an internal fault); the message is in the error buffer.
pub const RC_PANIC: i32 = 2;
/// `create`: the library exports no router of that name.
pub const RC_UNKNOWN_ROUTER: i32 = 3;
/// `create`: the config was refused; the message says why.
pub const RC_BAD_CONFIG: i32 = 4;
/// A null pointer where one is required, or a view smaller than the plugin needs.
pub const RC_BAD_ARGUMENT: i32 = 5;

/// A short description of a status code, for messages.
pub fn status_name(code: i32) -> &'static str {
    match code {
        RC_OK => "ok",
        RC_ERROR => "error",
        RC_PANIC => "panic",
        RC_UNKNOWN_ROUTER => "unknown router",
        RC_BAD_CONFIG => "bad config",
        RC_BAD_ARGUMENT => "bad argument",
        _ => "unknown status",
    }
}

/// A borrowed string: `len` bytes of UTF-8 at `ptr`, not NUL-terminated. A null `ptr`
/// means "absent" (no method, no such attachment); an empty string has a non-null `ptr`.
/// Strings the host hands to a plugin are always valid UTF-8; strings a plugin hands to the
/// host (names, messages) are checked by the host.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct FfiStr {
    /// The first byte, or null for "absent".
    pub ptr: *const u8,
    /// The number of bytes.
    pub len: usize,
}

// SAFETY: an `FfiStr` is a borrowed pointer to immutable bytes; sharing or sending the
// pointer itself is harmless, and every dereference is `unsafe` and states its own contract.
unsafe impl Send for FfiStr {}
// SAFETY: as for `Send`: the pointee is never mutated through an `FfiStr`.
unsafe impl Sync for FfiStr {}

impl FfiStr {
    /// The absent string (null pointer).
    pub const NULL: FfiStr = FfiStr {
        ptr: std::ptr::null(),
        len: 0,
    };

    /// Borrows `s`.
    pub const fn new(s: &str) -> FfiStr {
        FfiStr {
            ptr: s.as_ptr(),
            len: s.len(),
        }
    }

    /// Borrows an optional string (`None` becomes [`FfiStr::NULL`]).
    pub fn from_option(s: Option<&str>) -> FfiStr {
        s.map_or(FfiStr::NULL, FfiStr::new)
    }

    /// True for the absent string.
    pub fn is_null(&self) -> bool {
        self.ptr.is_null()
    }

    /// The bytes, or `None` when absent.
    ///
    /// # Safety
    /// Unless null, `ptr` must point to `len` readable bytes that stay valid and unchanged
    /// for `'a`.
    pub unsafe fn as_bytes<'a>(self) -> Option<&'a [u8]> {
        if self.ptr.is_null() {
            None
        } else if self.len == 0 {
            Some(&[])
        } else {
            // SAFETY: non-null and, by the caller's contract, `len` readable bytes for `'a`.
            Some(unsafe { std::slice::from_raw_parts(self.ptr, self.len) })
        }
    }

    /// The string, or `None` when absent or not valid UTF-8.
    ///
    /// # Safety
    /// As for [`FfiStr::as_bytes`].
    pub unsafe fn as_str<'a>(self) -> Option<&'a str> {
        // SAFETY: forwarded: the caller upholds `as_bytes`'s contract.
        let bytes = unsafe { self.as_bytes() }?;
        std::str::from_utf8(bytes).ok()
    }

    /// The string, or `None` when absent, without checking UTF-8: for strings the host hands
    /// to a plugin, which the ABI guarantees are valid UTF-8 (they are Rust `&str`s).
    ///
    /// # Safety
    /// As for [`FfiStr::as_bytes`], and the bytes must be valid UTF-8.
    pub unsafe fn as_str_unchecked<'a>(self) -> Option<&'a str> {
        // SAFETY: forwarded: the caller upholds `as_bytes`'s contract.
        let bytes = unsafe { self.as_bytes() }?;
        // SAFETY: valid UTF-8 by the caller's contract.
        Some(unsafe { std::str::from_utf8_unchecked(bytes) })
    }
}

/// A buffer owned by the host that the plugin writes a UTF-8 message into: at most `cap`
/// bytes at `ptr`, then it sets `len`. A message that does not fit is truncated.
#[repr(C)]
#[derive(Debug)]
pub struct FfiBuf {
    /// Writable memory of `cap` bytes.
    pub ptr: *mut u8,
    /// Capacity in bytes.
    pub cap: usize,
    /// Bytes written so far (the plugin sets it).
    pub len: usize,
}

impl FfiBuf {
    /// Appends `s`, truncated at a character boundary when it does not fit. Returns false
    /// when something was cut.
    ///
    /// # Safety
    /// `ptr` must point to `cap` writable bytes, and `len <= cap`.
    pub unsafe fn push_str(&mut self, s: &str) -> bool {
        if self.ptr.is_null() || self.len >= self.cap {
            return s.is_empty();
        }
        let room = self.cap - self.len;
        let mut n = s.len().min(room);
        while !s.is_char_boundary(n) {
            n -= 1;
        }
        // SAFETY: `ptr + len .. ptr + len + n` lies within the `cap` writable bytes (n <= room),
        // and the source is a distinct `&str`, so the regions do not overlap.
        unsafe { std::ptr::copy_nonoverlapping(s.as_ptr(), self.ptr.add(self.len), n) };
        self.len += n;
        n == s.len()
    }
}

/// Opaque router handle made by `create` (a C plugin defines `struct rc_router` as it likes).
#[repr(C)]
pub struct FfiRouter {
    _opaque: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

/// Opaque prepared handle made by `prepare`: a router's state for one snapshot.
#[repr(C)]
pub struct FfiPrepared {
    _opaque: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

/// Looks up `key` in something the host owns (a provider, the consumer, the request's
/// attachments...). Writes the value to `*out` and returns true when present.
pub type FfiLookup =
    unsafe extern "C" fn(ctx: *const c_void, key: FfiStr, out: *mut FfiStr) -> bool;

/// Looks up `key` on provider `index`.
pub type FfiProviderLookup =
    unsafe extern "C" fn(ctx: *const c_void, index: usize, key: FfiStr, out: *mut FfiStr) -> bool;

/// The number of query parameters of provider `index` (0 when out of range).
pub type FfiParamCount = unsafe extern "C" fn(ctx: *const c_void, index: usize) -> usize;

/// Query parameter `n` (sorted by key) of provider `index`: writes key and value, returns
/// false when out of range.
pub type FfiParamAt = unsafe extern "C" fn(
    ctx: *const c_void,
    index: usize,
    n: usize,
    key: *mut FfiStr,
    value: *mut FfiStr,
) -> bool;

/// The provider snapshot as the plugin sees it in `prepare`. Valid only during the call;
/// strings it returns are valid only during the call as well (copy what you keep).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct FfiSnapshotView {
    /// `sizeof` this struct as the host built it; fields may be appended in later versions.
    pub size: usize,
    /// Host context: pass it back to the callbacks.
    pub ctx: *const c_void,
    /// The snapshot generation.
    pub generation: u64,
    /// The number of providers; indexes run `0..provider_count` and bit `i` of the candidate
    /// words is provider `i`.
    pub provider_count: usize,
    /// The chain's service, or null.
    pub service: FfiStr,
    /// `provider_get(ctx, i, key, &out)`: a query parameter or a derived key (`protocol`,
    /// `host`, `port`, `path`, `address`) of provider `i`.
    pub provider_get: FfiProviderLookup,
    /// `provider_param_count(ctx, i)`.
    pub provider_param_count: FfiParamCount,
    /// `provider_param_at(ctx, i, n, &key, &value)`.
    pub provider_param_at: FfiParamAt,
    /// `consumer_get(ctx, key, &out)`: the chain's consumer URL (params and derived keys).
    pub consumer_get: FfiLookup,
}

/// One call's request as the plugin sees it in `route`. Valid only during the call.
/// Lookups do not allocate on either side.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct FfiRequestView {
    /// `sizeof` this struct as the host built it; fields may be appended in later versions.
    pub size: usize,
    /// Host context: pass it back to the callbacks.
    pub ctx: *const c_void,
    /// The method, or null when the call has none.
    pub method: FfiStr,
    /// The service the caller names, or null.
    pub service: FfiStr,
    /// `attachment(ctx, key, &out)`: an attachment (sent to the provider).
    pub attachment: FfiLookup,
    /// `attribute(ctx, key, &out)`: an attribute (local to the caller).
    pub attribute: FfiLookup,
    /// `consumer_get(ctx, key, &out)`: this call's consumer URL.
    pub consumer_get: FfiLookup,
    /// True when this call's consumer is the one the router prepared for.
    pub consumer_is_prepared: bool,
}

/// `create(name, config_json, &router, err)`: makes a router. `name` is null when the chain
/// entry names none (the library's first router is meant). `config_json` is JSON text.
pub type FfiCreate = unsafe extern "C" fn(
    name: FfiStr,
    config_json: FfiStr,
    out: *mut *mut FfiRouter,
    err: *mut FfiBuf,
) -> i32;

/// `prepare(router, snapshot, &prepared, err)`: precomputes per snapshot.
pub type FfiPrepare = unsafe extern "C" fn(
    router: *const FfiRouter,
    snapshot: *const FfiSnapshotView,
    out: *mut *mut FfiPrepared,
    err: *mut FfiBuf,
) -> i32;

/// `route(prepared, request, words, word_count, explain, err)`: clears the bits of the
/// providers the call must not use. Bit `i % 64` of `words[i / 64]` is provider `i`.
/// `explain` is null unless the host records an explain trace.
pub type FfiRoute = unsafe extern "C" fn(
    prepared: *const FfiPrepared,
    request: *const FfiRequestView,
    words: *mut u64,
    word_count: usize,
    explain: *mut FfiBuf,
    err: *mut FfiBuf,
) -> i32;

/// Frees a prepared handle.
pub type FfiReleasePrepared = unsafe extern "C" fn(prepared: *mut FfiPrepared);

/// Frees a router handle (after all its prepared handles).
pub type FfiReleaseRouter = unsafe extern "C" fn(router: *mut FfiRouter);

/// The table `routechain_plugin_v1()` returns: static, valid while the library is loaded.
/// Functions are nullable so the host can refuse a C table with a hole instead of crashing.
#[repr(C)]
#[derive(Debug)]
pub struct FfiPluginV1 {
    /// `sizeof` the table as the plugin built it; the host refuses a table smaller than
    /// the one it knows and ignores fields it does not know.
    pub size: usize,
    /// Repeats [`ROUTECHAIN_PLUGIN_ABI_VERSION`].
    pub abi_version: u32,
    /// The names of the routers the library exports (at least one); the first is the default.
    pub router_names: *const FfiStr,
    /// How many names `router_names` holds.
    pub router_count: usize,
    /// See [`FfiCreate`].
    pub create: Option<FfiCreate>,
    /// See [`FfiPrepare`].
    pub prepare: Option<FfiPrepare>,
    /// See [`FfiRoute`].
    pub route: Option<FfiRoute>,
    /// See [`FfiReleasePrepared`].
    pub release_prepared: Option<FfiReleasePrepared>,
    /// See [`FfiReleaseRouter`].
    pub release_router: Option<FfiReleaseRouter>,
}

// SAFETY: the table is immutable static data (names and function pointers into the loaded
// library); nothing in it is mutated after construction.
unsafe impl Sync for FfiPluginV1 {}
// SAFETY: as for `Sync`.
unsafe impl Send for FfiPluginV1 {}

/// `uint32_t routechain_plugin_abi_version(void)`.
pub type FfiAbiVersionFn = unsafe extern "C" fn() -> u32;

/// `const rc_plugin_v1 *routechain_plugin_v1(void)`.
pub type FfiPluginV1Fn = unsafe extern "C" fn() -> *const FfiPluginV1;

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    /// The offsets the C header produces on 64-bit targets (LP64 / LLP64).
    #[test]
    #[cfg(target_pointer_width = "64")]
    fn layout_matches_the_c_header_on_64_bit() {
        assert_eq!(size_of::<FfiStr>(), 16);
        assert_eq!(size_of::<FfiBuf>(), 24);
        assert_eq!(
            (
                offset_of!(FfiSnapshotView, generation),
                offset_of!(FfiSnapshotView, provider_count),
                offset_of!(FfiSnapshotView, service),
                offset_of!(FfiSnapshotView, provider_get),
                offset_of!(FfiSnapshotView, consumer_get),
                size_of::<FfiSnapshotView>()
            ),
            (16, 24, 32, 48, 72, 80)
        );
        assert_eq!(
            (
                offset_of!(FfiRequestView, method),
                offset_of!(FfiRequestView, service),
                offset_of!(FfiRequestView, attachment),
                offset_of!(FfiRequestView, consumer_get),
                offset_of!(FfiRequestView, consumer_is_prepared),
                size_of::<FfiRequestView>()
            ),
            (16, 32, 48, 64, 72, 80)
        );
        assert_eq!(
            (
                offset_of!(FfiPluginV1, abi_version),
                offset_of!(FfiPluginV1, router_names),
                offset_of!(FfiPluginV1, create),
                offset_of!(FfiPluginV1, release_router),
                size_of::<FfiPluginV1>()
            ),
            (8, 16, 32, 64, 72)
        );
    }

    #[test]
    fn push_str_truncates_at_a_char_boundary() {
        let mut mem = [0u8; 5];
        let mut buf = FfiBuf {
            ptr: mem.as_mut_ptr(),
            cap: mem.len(),
            len: 0,
        };
        // SAFETY: `buf` describes `mem`, 5 writable bytes.
        unsafe {
            assert!(buf.push_str("ab"));
            assert!(!buf.push_str("cé€"));
        }
        assert_eq!(buf.len, 5);
        assert_eq!(&mem[..buf.len], "abcé".as_bytes());
    }

    #[test]
    fn null_and_empty_strings_differ() {
        // SAFETY: both strings borrow live data or are null.
        unsafe {
            assert_eq!(FfiStr::NULL.as_str(), None);
            assert_eq!(FfiStr::new("").as_str(), Some(""));
            assert_eq!(FfiStr::new("x-canary").as_str(), Some("x-canary"));
        }
    }
}
