//! The plugin-side glue [`crate::export_router_plugin!`] expands to: raw `extern "C"` entry
//! points that check their arguments, catch every panic and convert errors into status
//! codes. Not for direct use.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::ffi::*;
use crate::safe::*;

/// A router behind the handle, type-erased (plugin-internal; never crosses the ABI).
pub trait ErasedRouter: Send + Sync {
    /// See [`PluginRouter::prepare`].
    fn prepare_erased(
        &self,
        snapshot: &SnapshotView<'_>,
    ) -> Result<Box<dyn ErasedPrepared>, String>;
}

/// A prepared state behind the handle, type-erased.
pub trait ErasedPrepared: Send + Sync {
    /// See [`PluginPrepared::route`].
    fn route_erased(
        &self,
        request: &RequestView<'_>,
        candidates: &mut CandidateWords<'_>,
        explain: &mut Explain<'_>,
    ) -> Result<(), String>;
}

impl<R: PluginRouter> ErasedRouter for R {
    fn prepare_erased(
        &self,
        snapshot: &SnapshotView<'_>,
    ) -> Result<Box<dyn ErasedPrepared>, String> {
        Ok(Box::new(self.prepare(snapshot)?))
    }
}

impl<P: PluginPrepared> ErasedPrepared for P {
    fn route_erased(
        &self,
        request: &RequestView<'_>,
        candidates: &mut CandidateWords<'_>,
        explain: &mut Explain<'_>,
    ) -> Result<(), String> {
        self.route(request, candidates, explain)
    }
}

/// A constructor: config JSON text → router.
pub type Ctor = fn(&str) -> Result<Box<dyn ErasedRouter>, String>;

/// Boxes a constructor's result.
pub fn boxed<R: PluginRouter>(r: Result<R, String>) -> Result<Box<dyn ErasedRouter>, String> {
    r.map(|r| Box::new(r) as Box<dyn ErasedRouter>)
}

/// Builds the static table.
pub const fn table(names: &'static [FfiStr], create: FfiCreate) -> FfiPluginV1 {
    FfiPluginV1 {
        size: std::mem::size_of::<FfiPluginV1>(),
        abi_version: ROUTECHAIN_PLUGIN_ABI_VERSION,
        router_names: names.as_ptr(),
        router_count: names.len(),
        create: Some(create),
        prepare: Some(prepare),
        route: Some(route),
        release_prepared: Some(release_prepared),
        release_router: Some(release_router),
    }
}

fn panic_message(payload: &(dyn Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&'static str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "panic with a non-string payload"
    }
}

/// Writes `msg` into the host's error buffer (if any).
///
/// # Safety
/// `err` is null or a valid host buffer.
unsafe fn report(err: *mut FfiBuf, msg: &str) {
    // SAFETY: null or valid, by the caller's contract.
    if let Some(buf) = unsafe { err.as_mut() } {
        // SAFETY: a host buffer of `cap` writable bytes.
        unsafe { buf.push_str(msg) };
    }
}

/// Runs `f`, catching a panic; `Err(status)` after writing the message into `err`.
///
/// # Safety
/// `err` is null or a valid host buffer.
unsafe fn guarded<T>(
    err: *mut FfiBuf,
    f: impl FnOnce() -> Result<T, (i32, String)>,
) -> Result<T, i32> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err((code, msg))) => {
            // SAFETY: forwarded contract.
            unsafe { report(err, &msg) };
            Err(code)
        }
        Err(payload) => {
            // SAFETY: forwarded contract.
            unsafe { report(err, panic_message(&*payload)) };
            // Dropping a payload can itself panic; never let that unwind into the host.
            let _ = catch_unwind(AssertUnwindSafe(move || drop(payload)));
            Err(RC_PANIC)
        }
    }
}

/// `create`, dispatching on `name` over `routers` (the first is the default).
///
/// # Safety
/// The host's contract for `create`: `name` and `config_json` borrow valid strings (or are
/// null), `out` is writable, `err` is null or a valid buffer.
pub unsafe fn create(
    routers: &[(&str, Ctor)],
    name: FfiStr,
    config_json: FfiStr,
    out: *mut *mut FfiRouter,
    err: *mut FfiBuf,
) -> i32 {
    if out.is_null() {
        return RC_BAD_ARGUMENT;
    }
    let work = || {
        // SAFETY: the strings are valid for the call by contract.
        let (name, config) = unsafe { (name.as_bytes(), config_json.as_str()) };
        let ctor = match name {
            None => routers.first().map(|r| r.1),
            Some(n) => routers.iter().find(|r| r.0.as_bytes() == n).map(|r| r.1),
        };
        let Some(ctor) = ctor else {
            let known: Vec<&str> = routers.iter().map(|r| r.0).collect();
            return Err((
                RC_UNKNOWN_ROUTER,
                format!("no router of that name; this library exports {known:?}"),
            ));
        };
        let config = config.ok_or((RC_BAD_CONFIG, "config is not UTF-8 text".to_string()))?;
        let router = ctor(config).map_err(|m| (RC_BAD_CONFIG, m))?;
        Ok(Box::into_raw(Box::new(router)) as *mut FfiRouter)
    };
    // SAFETY: `err` is null or valid by contract.
    let result = unsafe { guarded(err, work) };
    match result {
        Ok(handle) => {
            // SAFETY: `out` is non-null and writable by contract.
            unsafe { *out = handle };
            RC_OK
        }
        Err(code) => code,
    }
}

/// `prepare` for routers made by [`create`].
///
/// # Safety
/// The host's contract for `prepare`: `router` is a live handle from [`create`], `snapshot`
/// a valid view for the call, `out` writable, `err` null or a valid buffer.
pub unsafe extern "C" fn prepare(
    router: *const FfiRouter,
    snapshot: *const FfiSnapshotView,
    out: *mut *mut FfiPrepared,
    err: *mut FfiBuf,
) -> i32 {
    if router.is_null() || snapshot.is_null() || out.is_null() {
        return RC_BAD_ARGUMENT;
    }
    // SAFETY: non-null and valid for the call by contract.
    let raw = unsafe { &*snapshot };
    if raw.size < std::mem::size_of::<FfiSnapshotView>() {
        return RC_BAD_ARGUMENT;
    }
    // SAFETY: a handle from `create` is a `Box<Box<dyn ErasedRouter>>` turned raw; it is live.
    let router = unsafe { &*(router as *const Box<dyn ErasedRouter>) };
    let work = || {
        // SAFETY: the host built `raw` for this call.
        let view = unsafe { SnapshotView::from_raw(raw) };
        router.prepare_erased(&view).map_err(|m| (RC_ERROR, m))
    };
    // SAFETY: `err` is null or valid by contract.
    let result = unsafe { guarded(err, work) };
    match result {
        Ok(prepared) => {
            // SAFETY: `out` is non-null and writable by contract.
            unsafe { *out = Box::into_raw(Box::new(prepared)) as *mut FfiPrepared };
            RC_OK
        }
        Err(code) => code,
    }
}

/// `route` for prepared states made by [`prepare`].
///
/// # Safety
/// The host's contract for `route`: `prepared` is a live handle from [`prepare`], `request`
/// a valid view for the call, `words` points to `word_count` writable words, `explain` and
/// `err` are null or valid buffers.
pub unsafe extern "C" fn route(
    prepared: *const FfiPrepared,
    request: *const FfiRequestView,
    words: *mut u64,
    word_count: usize,
    explain: *mut FfiBuf,
    err: *mut FfiBuf,
) -> i32 {
    if prepared.is_null() || request.is_null() || (words.is_null() && word_count > 0) {
        return RC_BAD_ARGUMENT;
    }
    // SAFETY: non-null and valid for the call by contract.
    let raw = unsafe { &*request };
    if raw.size < std::mem::size_of::<FfiRequestView>() {
        return RC_BAD_ARGUMENT;
    }
    // SAFETY: a handle from `prepare` is a `Box<Box<dyn ErasedPrepared>>` turned raw; live.
    let prepared = unsafe { &*(prepared as *const Box<dyn ErasedPrepared>) };
    let work = || {
        let words: &mut [u64] = if word_count == 0 {
            &mut []
        } else {
            // SAFETY: `word_count` writable words at `words`, exclusively ours for the call.
            unsafe { std::slice::from_raw_parts_mut(words, word_count) }
        };
        // SAFETY: the host built the view and the explain buffer for this call.
        let (view, mut explain) =
            unsafe { (RequestView::from_raw(raw), Explain::from_raw(explain)) };
        prepared
            .route_erased(&view, &mut CandidateWords::new(words), &mut explain)
            .map_err(|m| (RC_ERROR, m))
    };
    // SAFETY: `err` is null or valid by contract.
    let result = unsafe { guarded(err, work) };
    match result {
        Ok(()) => RC_OK,
        Err(code) => code,
    }
}

/// Frees a prepared handle made by [`prepare`].
///
/// # Safety
/// `prepared` is null or a live handle from [`prepare`], not used afterwards.
pub unsafe extern "C" fn release_prepared(prepared: *mut FfiPrepared) {
    if prepared.is_null() {
        return;
    }
    // SAFETY: the handle is a `Box<Box<dyn ErasedPrepared>>` turned raw, released once.
    let boxed = unsafe { Box::from_raw(prepared as *mut Box<dyn ErasedPrepared>) };
    let _ = catch_unwind(AssertUnwindSafe(move || drop(boxed)));
}

/// Frees a router handle made by [`create`].
///
/// # Safety
/// `router` is null or a live handle from [`create`], not used afterwards.
pub unsafe extern "C" fn release_router(router: *mut FfiRouter) {
    if router.is_null() {
        return;
    }
    // SAFETY: the handle is a `Box<Box<dyn ErasedRouter>>` turned raw, released once.
    let boxed = unsafe { Box::from_raw(router as *mut Box<dyn ErasedRouter>) };
    let _ = catch_unwind(AssertUnwindSafe(move || drop(boxed)));
}
