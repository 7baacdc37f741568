//! A plugin's router wrapped in routechain's [`Router`] / [`PreparedRouter`] traits, the
//! host callbacks behind the views, and failure accounting.
//!
//! Per call the host builds the request view on the stack, copies the candidates into the
//! call's scratch set, lets the plugin narrow the words in place, then intersects the result
//! with the copy (a plugin can only remove candidates). On an error or a caught panic it
//! restores the copy, counts the failure, logs it (on the 1st, 2nd, 4th, 8th... failure)
//! and writes it into the explain trace. Nothing is allocated per call unless a trace is
//! recorded.

use std::ffi::c_void;
use std::mem::MaybeUninit;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use routechain_core::{
    Attributes, Candidates, Evaluation, PrepareContext, PrepareError, PreparedRouter, Request,
    RouteContext, Router, Snapshot, Url,
};
use routechain_plugin_abi::ffi::{
    FfiBuf, FfiPrepared, FfiRequestView, FfiRouter, FfiSnapshotView, FfiStr,
};
use routechain_plugin_abi::{RC_OK, status_name};

use crate::library::{PluginError, PluginLibrary};

/// Bytes of the per-call error buffer (messages are truncated to it).
const ERROR_CAP: usize = 256;
/// Bytes of the explain buffer (only when a trace is recorded).
const EXPLAIN_CAP: usize = 512;
/// Bytes of the buffer for `create` and `prepare` errors.
const SETUP_ERROR_CAP: usize = 2048;

/// Failure accounting of one plugin router, shared by the router and its prepared states.
#[derive(Debug)]
pub struct PluginStats {
    path: PathBuf,
    router: String,
    failures: AtomicU64,
}

impl PluginStats {
    /// The library path.
    pub fn path(&self) -> &Path {
        &self.path
    }
    /// The router's name within the library.
    pub fn router(&self) -> &str {
        &self.router
    }
    /// Failed calls so far (errors and caught panics, in `route` and `prepare`).
    pub fn failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }
    fn record_failure(&self) -> u64 {
        self.failures.fetch_add(1, Ordering::Relaxed) + 1
    }
}

/// The text a plugin wrote into a host buffer (lossy: cut at the first invalid byte).
fn buf_text<'m>(mem: &'m [u8], buf: &FfiBuf) -> &'m str {
    let bytes = &mem[..buf.len.min(mem.len())];
    match std::str::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or_default(),
    }
}

fn host_buf(mem: &mut [u8]) -> FfiBuf {
    FfiBuf {
        ptr: mem.as_mut_ptr(),
        cap: mem.len(),
        len: 0,
    }
}

struct RouterInner {
    handle: NonNull<FfiRouter>,
    display: String,
    stats: Arc<PluginStats>,
    // Dropped after `Drop::drop` released the handle.
    library: Arc<PluginLibrary>,
}

// SAFETY: the ABI requires router handles to be usable from any thread (`prepare` may run
// on any thread, concurrently with `route` on prepared handles); the handle is only passed
// back to the plugin, never dereferenced here.
unsafe impl Send for RouterInner {}
// SAFETY: as for `Send`: shared access only passes the pointer back to the plugin.
unsafe impl Sync for RouterInner {}

impl Drop for RouterInner {
    fn drop(&mut self) {
        // SAFETY: the handle came from this library's `create` and is released exactly once,
        // after every prepared state (each holds an `Arc` to this value); the library is
        // still loaded (`self.library` drops after this).
        unsafe { (self.library.fns.release_router)(self.handle.as_ptr()) };
    }
}

/// A router of a plugin library, as a routechain [`Router`].
#[derive(Clone)]
pub struct LoadedRouter {
    inner: Arc<RouterInner>,
}

impl std::fmt::Debug for LoadedRouter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedRouter")
            .field("name", &self.inner.display)
            .field("path", &self.inner.library.path())
            .field("failures", &self.failures())
            .finish()
    }
}

impl LoadedRouter {
    /// Loads the library at `path` and creates its router `name` (the first when `None`)
    /// from `config_json`.
    pub fn load(path: &Path, name: Option<&str>, config_json: &str) -> Result<Self, PluginError> {
        let library = Arc::new(PluginLibrary::open(path)?);
        Self::create(library, name, config_json)
    }

    /// Creates router `name` (the first when `None`) of an opened library.
    pub fn create(
        library: Arc<PluginLibrary>,
        name: Option<&str>,
        config_json: &str,
    ) -> Result<Self, PluginError> {
        let router = match name {
            Some(n) => {
                if !library.router_names().iter().any(|r| r == n) {
                    return Err(PluginError::UnknownRouter {
                        path: library.path().to_path_buf(),
                        name: n.to_string(),
                        available: library.router_names().to_vec(),
                    });
                }
                n.to_string()
            }
            None => library.router_names()[0].clone(),
        };
        let mut mem = [0u8; SETUP_ERROR_CAP];
        let mut err = host_buf(&mut mem);
        let mut out: *mut FfiRouter = std::ptr::null_mut();
        // SAFETY: `create`'s contract: the strings borrow live data for the call, `out` and
        // `err` are writable and outlive it; the library is loaded (`library` is held).
        let code = unsafe {
            (library.fns.create)(
                FfiStr::from_option(name),
                FfiStr::new(config_json),
                &mut out,
                &mut err,
            )
        };
        let handle = match (code, NonNull::new(out)) {
            (RC_OK, Some(h)) => h,
            (code, _) => {
                let message = if code == RC_OK {
                    "create returned no router".to_string()
                } else {
                    buf_text(&mem, &err).to_string()
                };
                return Err(PluginError::Create {
                    path: library.path().to_path_buf(),
                    router,
                    status: status_name(code),
                    message,
                });
            }
        };
        let stats = Arc::new(PluginStats {
            path: library.path().to_path_buf(),
            router: router.clone(),
            failures: AtomicU64::new(0),
        });
        Ok(LoadedRouter {
            inner: Arc::new(RouterInner {
                handle,
                display: format!("plugin({router})"),
                stats,
                library,
            }),
        })
    }

    /// Failed calls so far.
    pub fn failures(&self) -> u64 {
        self.inner.stats.failures()
    }

    /// The failure counter, shared with every prepared state of this router.
    pub fn stats(&self) -> &Arc<PluginStats> {
        &self.inner.stats
    }

    /// The library.
    pub fn library(&self) -> &Arc<PluginLibrary> {
        &self.inner.library
    }
}

struct SnapshotCtx<'a> {
    snapshot: &'a Snapshot,
    consumer: &'a Url,
}

struct RequestCtx<'a> {
    request: &'a Request,
    consumer: &'a Url,
}

/// Writes the answer of a lookup.
///
/// # Safety
/// `out` is null or writable.
unsafe fn answer(out: *mut FfiStr, value: Option<&str>) -> bool {
    match value {
        Some(v) if !out.is_null() => {
            // SAFETY: non-null and writable by the caller's contract.
            unsafe { *out = FfiStr::new(v) };
            true
        }
        _ => false,
    }
}

/// Answers a by-key lookup of a view callback: `find` gets the view's context and the
/// plugin's key bytes (a panic or an absent key answers "absent"); the value goes to `out`.
///
/// # Safety
/// `ctx` points to a `C` alive for the call, `key` borrows readable bytes for the call, and
/// `out` is null or writable.
unsafe fn answer_key<'c, C: 'c>(
    ctx: *const c_void,
    key: FfiStr,
    out: *mut FfiStr,
    find: impl FnOnce(&'c C, &'c [u8]) -> Option<&'c str>,
) -> bool {
    let v = no_unwind(|| {
        // SAFETY: the caller's contract: `ctx` is a live `C` and `key` readable for the call.
        let (cx, key) = unsafe { (&*(ctx as *const C), key.as_bytes()?) };
        find(cx, key)
    });
    // SAFETY: the caller's contract: `out` is null or writable.
    unsafe { answer(out, v) }
}

/// Looks `key` up by bytes: no UTF-8 check of the plugin's key per call (a key that is not
/// UTF-8 simply matches nothing).
fn lookup_bytes<'a>(map: &'a Attributes, key: &[u8]) -> Option<&'a str> {
    map.iter()
        .find(|(k, _)| k.as_bytes() == key)
        .map(|(_, v)| v)
}

/// Runs a lookup body, answering "absent" if it panicked (it cannot unwind into C).
fn no_unwind<'a>(f: impl FnOnce() -> Option<&'a str>) -> Option<&'a str> {
    catch_unwind(AssertUnwindSafe(f)).ok().flatten()
}

unsafe extern "C" fn snapshot_provider_get(
    ctx: *const c_void,
    index: usize,
    key: FfiStr,
    out: *mut FfiStr,
) -> bool {
    // SAFETY: `ctx` is the `SnapshotCtx` this module put in the view, alive during
    // `prepare`; `key` borrows the plugin's string for this call.
    let v = no_unwind(|| unsafe {
        let cx = &*(ctx as *const SnapshotCtx<'_>);
        cx.snapshot.get(index)?.get(key.as_str()?)
    });
    // SAFETY: the plugin passes a writable `out` (or null).
    unsafe { answer(out, v) }
}

unsafe extern "C" fn snapshot_param_count(ctx: *const c_void, index: usize) -> usize {
    // SAFETY: `ctx` is the `SnapshotCtx` of the view, alive during `prepare`.
    catch_unwind(|| unsafe {
        let cx = &*(ctx as *const SnapshotCtx<'_>);
        cx.snapshot.get(index).map_or(0, |p| p.params().len())
    })
    .unwrap_or(0)
}

unsafe extern "C" fn snapshot_param_at(
    ctx: *const c_void,
    index: usize,
    n: usize,
    key: *mut FfiStr,
    value: *mut FfiStr,
) -> bool {
    // SAFETY: `ctx` is the `SnapshotCtx` of the view, alive during `prepare`.
    let kv = catch_unwind(|| unsafe {
        let cx = &*(ctx as *const SnapshotCtx<'_>);
        cx.snapshot.get(index)?.params().nth(n)
    })
    .ok()
    .flatten();
    match kv {
        Some((k, v)) if !key.is_null() && !value.is_null() => {
            // SAFETY: both non-null and writable by the plugin's contract.
            unsafe {
                *key = FfiStr::new(k);
                *value = FfiStr::new(v);
            }
            true
        }
        _ => false,
    }
}

unsafe extern "C" fn snapshot_consumer_get(
    ctx: *const c_void,
    key: FfiStr,
    out: *mut FfiStr,
) -> bool {
    // SAFETY: `ctx` is the `SnapshotCtx` of the view, alive during `prepare`; `key` borrows
    // the plugin's bytes for this call; the plugin passes a writable `out` (or null).
    unsafe {
        answer_key(ctx, key, out, |cx: &SnapshotCtx<'_>, key| {
            cx.consumer.get(std::str::from_utf8(key).ok()?)
        })
    }
}

unsafe extern "C" fn request_attachment(ctx: *const c_void, key: FfiStr, out: *mut FfiStr) -> bool {
    // SAFETY: `ctx` is the `RequestCtx` of the view, alive during `route`; `key` borrows the
    // plugin's bytes for this call; the plugin passes a writable `out` (or null).
    unsafe {
        answer_key(ctx, key, out, |cx: &RequestCtx<'_>, key| {
            lookup_bytes(&cx.request.attachments, key)
        })
    }
}

unsafe extern "C" fn request_attribute(ctx: *const c_void, key: FfiStr, out: *mut FfiStr) -> bool {
    // SAFETY: as for `request_attachment`.
    unsafe {
        answer_key(ctx, key, out, |cx: &RequestCtx<'_>, key| {
            lookup_bytes(&cx.request.attributes, key)
        })
    }
}

unsafe extern "C" fn request_consumer_get(
    ctx: *const c_void,
    key: FfiStr,
    out: *mut FfiStr,
) -> bool {
    // SAFETY: as for `request_attachment`.
    unsafe {
        answer_key(ctx, key, out, |cx: &RequestCtx<'_>, key| {
            cx.consumer.get(std::str::from_utf8(key).ok()?)
        })
    }
}

impl Router for LoadedRouter {
    fn name(&self) -> &str {
        &self.inner.display
    }

    /// [`crate::DEFAULT_PRIORITY`]: after Dubbo's built-in routers.
    fn default_priority(&self) -> i32 {
        crate::factory::DEFAULT_PRIORITY
    }

    fn prepare(&self, cx: &PrepareContext<'_>) -> Result<Arc<dyn PreparedRouter>, PrepareError> {
        let inner = &self.inner;
        let ctx = SnapshotCtx {
            snapshot: cx.snapshot,
            consumer: cx.consumer,
        };
        let view = FfiSnapshotView {
            size: std::mem::size_of::<FfiSnapshotView>(),
            ctx: &ctx as *const SnapshotCtx<'_> as *const c_void,
            generation: cx.snapshot.generation(),
            provider_count: cx.snapshot.len(),
            service: FfiStr::from_option(cx.service),
            provider_get: snapshot_provider_get,
            provider_param_count: snapshot_param_count,
            provider_param_at: snapshot_param_at,
            consumer_get: snapshot_consumer_get,
        };
        let mut mem = [0u8; SETUP_ERROR_CAP];
        let mut err = host_buf(&mut mem);
        let mut out: *mut FfiPrepared = std::ptr::null_mut();
        // SAFETY: `prepare`'s contract: a live router handle of this library (loaded while
        // `inner` lives), a view valid for the call (`ctx` and `view` outlive it), writable
        // `out` and `err`.
        let code = unsafe {
            (inner.library.fns.prepare)(inner.handle.as_ptr(), &view, &mut out, &mut err)
        };
        match (code, NonNull::new(out)) {
            (RC_OK, Some(handle)) => Ok(Arc::new(LoadedPrepared {
                handle,
                router: inner.clone(),
            })),
            (code, _) => {
                let n = inner.stats.record_failure();
                let message = if code == RC_OK {
                    "prepare returned no state"
                } else {
                    buf_text(&mem, &err)
                };
                tracing::warn!(
                    router = %inner.display,
                    path = %inner.library.path().display(),
                    failures = n,
                    "plugin failed to prepare snapshot generation {} ({}): {message}",
                    cx.snapshot.generation(),
                    status_name(code),
                );
                Err(PrepareError {
                    router: inner.display.clone(),
                    generation: cx.snapshot.generation(),
                    reason: format!(
                        "plugin {} failed ({}): {message}",
                        inner.library.path().display(),
                        status_name(code)
                    ),
                })
            }
        }
    }
}

struct LoadedPrepared {
    handle: NonNull<FfiPrepared>,
    // Keeps the router handle (and through it the library) alive; dropped after `drop`.
    router: Arc<RouterInner>,
}

// SAFETY: the ABI requires `route` to be callable concurrently from any thread on one
// prepared handle; the pointer is only passed back to the plugin.
unsafe impl Send for LoadedPrepared {}
// SAFETY: as for `Send`.
unsafe impl Sync for LoadedPrepared {}

impl Drop for LoadedPrepared {
    fn drop(&mut self) {
        // SAFETY: the handle came from this library's `prepare`, is released once, before
        // its router (held by `self.router`), while the library is loaded.
        unsafe { (self.router.library.fns.release_prepared)(self.handle.as_ptr()) };
    }
}

impl PreparedRouter for LoadedPrepared {
    fn route(&self, cx: &mut RouteContext<'_>, candidates: &mut Candidates) -> Evaluation {
        // Keep the input, to restore it on failure (the chain sizes scratch to the snapshot).
        let scratch = cx.scratch();
        if scratch.len() == candidates.len() {
            scratch.words_mut().copy_from_slice(candidates.words());
        } else {
            scratch.copy_from(candidates);
        }
        let request = cx.request();
        let ctx = RequestCtx {
            request,
            consumer: cx.consumer(),
        };
        let view = FfiRequestView {
            size: std::mem::size_of::<FfiRequestView>(),
            ctx: &ctx as *const RequestCtx<'_> as *const c_void,
            method: FfiStr::from_option(request.method.as_deref()),
            service: FfiStr::from_option(request.service.as_deref()),
            attachment: request_attachment,
            attribute: request_attribute,
            consumer_get: request_consumer_get,
            consumer_is_prepared: cx.consumer_is_prepared(),
        };
        // Left uninitialized (no memset per call): the host reads back only the `len` bytes
        // the plugin wrote, as the ABI requires it to.
        let mut err_mem = [MaybeUninit::<u8>::uninit(); ERROR_CAP];
        let mut err = FfiBuf {
            ptr: err_mem.as_mut_ptr().cast::<u8>(),
            cap: ERROR_CAP,
            len: 0,
        };
        // Zeroed only when a trace is recorded.
        let mut explain_mem = if cx.explaining() {
            Some([0u8; EXPLAIN_CAP])
        } else {
            None
        };
        let mut explain = explain_mem.as_mut().map(|m| host_buf(m));
        let explain_ptr = explain
            .as_mut()
            .map_or(std::ptr::null_mut(), |b| b as *mut FfiBuf);
        let words = candidates.words_mut();
        let library = &self.router.library;
        // SAFETY: `route`'s contract: a live prepared handle of this library (loaded while
        // `self.router` lives), a request view valid for the call (`ctx`, `view` and the
        // request outlive it), `words.len()` writable words borrowed exclusively, and host
        // buffers that outlive the call.
        let code = unsafe {
            (library.fns.route)(
                self.handle.as_ptr(),
                &view,
                words.as_mut_ptr(),
                words.len(),
                explain_ptr,
                &mut err,
            )
        };
        if code == RC_OK {
            // A plugin only narrows: whatever it set beyond its input is dropped.
            candidates.and_assign(cx.scratch());
            if let (Some(mem), Some(buf)) = (&explain_mem, &explain) {
                let text = buf_text(mem, buf);
                if !text.is_empty() {
                    cx.explain(format_args!("{text}"));
                }
            }
        } else {
            candidates.copy_from(cx.scratch());
            cx.note_failure();
            let stats = &self.router.stats;
            let n = stats.record_failure();
            // SAFETY: the plugin wrote the first `err.len` bytes (clamped to the buffer), as
            // the ABI requires before it sets `len`; a zero `len` reads nothing.
            let written = unsafe {
                std::slice::from_raw_parts(err_mem.as_ptr().cast::<u8>(), err.len.min(ERROR_CAP))
            };
            let message = buf_text(written, &err);
            if n.is_power_of_two() {
                tracing::warn!(
                    router = %self.router.display,
                    path = %library.path().display(),
                    failures = n,
                    "plugin failed on a call ({}): {message}; candidates kept unchanged (logged on failure 1, 2, 4, 8...)",
                    status_name(code),
                );
            }
            cx.explain(format_args!(
                "plugin failed ({}: {message}); candidates kept unchanged; {n} failure(s) so far",
                status_name(code)
            ));
        }
        Evaluation::Runtime
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffer_text_stops_at_the_first_invalid_byte_and_at_cap() {
        let mut mem = *b"abc\xffdef";
        let mut buf = host_buf(&mut mem);
        buf.len = 7;
        assert_eq!(buf_text(&mem, &buf), "abc");
        buf.len = 99; // a plugin that over-reports is clamped to the buffer
        assert_eq!(buf_text(b"xyz", &buf), "xyz");
        buf.len = 2;
        assert_eq!(buf_text(&mem, &buf), "ab");
    }

    #[test]
    fn byte_lookups_match_whole_keys_only() {
        let map: Attributes = [("x-user", "u1"), ("x", "u2")].into_iter().collect();
        assert_eq!(lookup_bytes(&map, b"x-user"), Some("u1"));
        assert_eq!(lookup_bytes(&map, b"x"), Some("u2"));
        assert_eq!(lookup_bytes(&map, b"x-use"), None);
        assert_eq!(lookup_bytes(&map, b"\xff"), None);
    }
}
