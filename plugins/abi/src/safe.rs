//! The safe Rust side for plugin authors: the [`PluginRouter`] / [`PluginPrepared`] traits
//! and borrowed views of what the host hands over.
//!
//! A Rust plugin implements the two traits and exports them with
//! [`crate::export_router_plugin!`]; the macro's glue converts the raw views, catches panics
//! and turns errors into status codes.

use std::fmt;

use crate::ffi::{FfiBuf, FfiRequestView, FfiSnapshotView, FfiStr};

/// A router compiled from its config: prepares per provider snapshot.
pub trait PluginRouter: Send + Sync + 'static {
    /// The per-snapshot state.
    type Prepared: PluginPrepared;

    /// Precomputes what `route` needs for this snapshot (bitsets, indexes). Called when the
    /// providers or the consumer change, never per call.
    fn prepare(&self, snapshot: &SnapshotView<'_>) -> Result<Self::Prepared, String>;
}

/// A router's state for one snapshot: answers each call. Called concurrently from many
/// threads; must not block, and should not allocate.
pub trait PluginPrepared: Send + Sync + 'static {
    /// Narrows `candidates` in place (clear the bits of the providers the call must not use;
    /// bits it sets are ignored). An error makes the host keep the input unchanged.
    fn route(
        &self,
        request: &RequestView<'_>,
        candidates: &mut CandidateWords<'_>,
        explain: &mut Explain<'_>,
    ) -> Result<(), String>;
}

fn lookup<'a>(
    f: crate::ffi::FfiLookup,
    ctx: *const std::ffi::c_void,
    key: &str,
) -> Option<&'a str> {
    let mut out = FfiStr::NULL;
    // SAFETY: `f` and `ctx` come from a view the host built for this call; the host's
    // callbacks accept any key and write `out` only. The string written borrows host data
    // valid for the call, which `'a` (the view's lifetime) does not outlive, and host
    // strings are valid UTF-8 by the ABI.
    unsafe {
        if f(ctx, FfiStr::new(key), &mut out) {
            out.as_str_unchecked()
        } else {
            None
        }
    }
}

/// The provider snapshot, borrowed for the duration of `prepare`.
#[derive(Clone, Copy)]
pub struct SnapshotView<'a> {
    raw: &'a FfiSnapshotView,
}

impl<'a> SnapshotView<'a> {
    /// Wraps a raw view.
    ///
    /// # Safety
    /// `raw` must be a view the host built for the current call, with valid callbacks.
    pub unsafe fn from_raw(raw: &'a FfiSnapshotView) -> Self {
        SnapshotView { raw }
    }

    /// The number of providers; candidate bit `i` is provider `i`.
    pub fn len(&self) -> usize {
        self.raw.provider_count
    }
    /// True when there is no provider.
    pub fn is_empty(&self) -> bool {
        self.raw.provider_count == 0
    }
    /// The snapshot generation.
    pub fn generation(&self) -> u64 {
        self.raw.generation
    }
    /// The chain's service, if named.
    pub fn service(&self) -> Option<&'a str> {
        // SAFETY: the host keeps the string valid for the call (`'a`).
        unsafe { self.raw.service.as_str() }
    }
    /// The value of `key` on provider `index`: a query parameter or a derived key
    /// (`protocol`, `host`, `port`, `path`, `address`).
    pub fn get(&self, index: usize, key: &str) -> Option<&'a str> {
        let mut out = FfiStr::NULL;
        // SAFETY: callback and context come from the host's view; it checks `index`.
        unsafe {
            if (self.raw.provider_get)(self.raw.ctx, index, FfiStr::new(key), &mut out) {
                out.as_str()
            } else {
                None
            }
        }
    }
    /// The query parameters of provider `index`, sorted by key.
    pub fn params(&self, index: usize) -> impl Iterator<Item = (&'a str, &'a str)> + 'a {
        let raw = self.raw;
        // SAFETY: callback and context come from the host's view; it checks `index`.
        let count = unsafe { (raw.provider_param_count)(raw.ctx, index) };
        (0..count).filter_map(move |n| {
            let (mut k, mut v) = (FfiStr::NULL, FfiStr::NULL);
            // SAFETY: as above; `n` is checked by the host too.
            unsafe {
                if (raw.provider_param_at)(raw.ctx, index, n, &mut k, &mut v) {
                    Some((k.as_str()?, v.as_str()?))
                } else {
                    None
                }
            }
        })
    }
    /// The chain's consumer URL: a parameter or derived key.
    pub fn consumer(&self, key: &str) -> Option<&'a str> {
        lookup(self.raw.consumer_get, self.raw.ctx, key)
    }
}

/// One call's request, borrowed for the duration of `route`.
#[derive(Clone, Copy)]
pub struct RequestView<'a> {
    raw: &'a FfiRequestView,
}

impl<'a> RequestView<'a> {
    /// Wraps a raw view.
    ///
    /// # Safety
    /// `raw` must be a view the host built for the current call, with valid callbacks.
    pub unsafe fn from_raw(raw: &'a FfiRequestView) -> Self {
        RequestView { raw }
    }

    /// The method, if the call has one.
    pub fn method(&self) -> Option<&'a str> {
        // SAFETY: the host keeps the string valid for the call; host strings are UTF-8.
        unsafe { self.raw.method.as_str_unchecked() }
    }
    /// The service the caller names, if any.
    pub fn service(&self) -> Option<&'a str> {
        // SAFETY: the host keeps the string valid for the call; host strings are UTF-8.
        unsafe { self.raw.service.as_str_unchecked() }
    }
    /// An attachment (sent to the provider with the call).
    pub fn attachment(&self, key: &str) -> Option<&'a str> {
        lookup(self.raw.attachment, self.raw.ctx, key)
    }
    /// An attribute (local to the caller, never sent).
    pub fn attribute(&self, key: &str) -> Option<&'a str> {
        lookup(self.raw.attribute, self.raw.ctx, key)
    }
    /// This call's consumer URL: a parameter or derived key.
    pub fn consumer(&self, key: &str) -> Option<&'a str> {
        lookup(self.raw.consumer_get, self.raw.ctx, key)
    }
    /// True when this call's consumer is the one the router prepared for.
    pub fn consumer_is_prepared(&self) -> bool {
        self.raw.consumer_is_prepared
    }
}

/// The candidate bitset of one call, as 64-bit words: bit `i % 64` of word `i / 64` is
/// provider `i`. Narrow it in place.
pub struct CandidateWords<'a> {
    words: &'a mut [u64],
}

impl<'a> CandidateWords<'a> {
    /// Wraps words.
    pub fn new(words: &'a mut [u64]) -> Self {
        CandidateWords { words }
    }
    /// The words.
    pub fn words(&self) -> &[u64] {
        self.words
    }
    /// The words, to change in place.
    pub fn words_mut(&mut self) -> &mut [u64] {
        self.words
    }
    /// True when provider `i` is a candidate.
    pub fn contains(&self, i: usize) -> bool {
        self.words
            .get(i / 64)
            .is_some_and(|w| w & (1 << (i % 64)) != 0)
    }
    /// Removes provider `i`.
    pub fn remove(&mut self, i: usize) {
        if let Some(w) = self.words.get_mut(i / 64) {
            *w &= !(1 << (i % 64));
        }
    }
    /// The number of candidates.
    pub fn count(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }
    /// True when no provider is left.
    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|&w| w == 0)
    }
    /// True when some candidate is in `mask` (words of a prepared set).
    pub fn intersects(&self, mask: &[u64]) -> bool {
        self.words.iter().zip(mask).any(|(a, b)| a & b != 0)
    }
    /// Keeps only the candidates in `mask`; words past `mask`'s end are cleared.
    pub fn and_with(&mut self, mask: &[u64]) {
        for (i, w) in self.words.iter_mut().enumerate() {
            *w &= mask.get(i).copied().unwrap_or(0);
        }
    }
    /// Removes the candidates in `mask`.
    pub fn and_not(&mut self, mask: &[u64]) {
        for (w, m) in self.words.iter_mut().zip(mask) {
            *w &= !m;
        }
    }
    /// Removes every candidate.
    pub fn clear(&mut self) {
        self.words.fill(0);
    }
}

/// Where `route` writes why it decided what it did; a no-op unless the host records an
/// explain trace. Writes into a host buffer: no allocation; long text is truncated.
pub struct Explain<'a> {
    buf: Option<&'a mut FfiBuf>,
}

impl<'a> Explain<'a> {
    /// An explain sink writing nowhere.
    pub fn off() -> Self {
        Explain { buf: None }
    }
    /// Wraps the host's buffer (null: off).
    ///
    /// # Safety
    /// Unless null, `buf` must be a host buffer valid for `'a` (`cap` writable bytes).
    pub unsafe fn from_raw(buf: *mut FfiBuf) -> Self {
        Explain {
            // SAFETY: non-null pointers are valid for `'a` by the caller's contract.
            buf: unsafe { buf.as_mut() },
        }
    }
    /// True when the host records a trace: skip computing explanations otherwise.
    pub fn is_on(&self) -> bool {
        self.buf.is_some()
    }
    /// Appends text; pass `format_args!(..)`.
    pub fn write(&mut self, args: fmt::Arguments<'_>) {
        if self.buf.is_some() {
            let _ = fmt::Write::write_fmt(self, args);
        }
    }
}

impl fmt::Write for Explain<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        if let Some(buf) = self.buf.as_deref_mut() {
            // SAFETY: `buf` is the host's buffer, valid by `from_raw`'s contract.
            unsafe { buf.push_str(s) };
        }
        Ok(())
    }
}
