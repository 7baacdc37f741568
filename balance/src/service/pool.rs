//! Reusable call buffers, so a caller of [`crate::Service::call`] never keeps a
//! [`CallState`] and a call allocates nothing once a thread's buffers have grown.
//!
//! A call takes a [`Buffers`] (a [`CallState`] and the list of providers it tried) from a
//! small per-thread cache when it starts and owns it until it ends, across every `.await`:
//! it works with one task per request, on any runtime, and a task that moves to another
//! thread gives its buffers back to that thread's cache. The cache holds only buffers:
//! request attributes travel in the [`routechain_core::Request`], and a call's memo of its
//! routed set is reset before the buffers are reused. A thread-local is used (rather than a
//! shared pool behind a lock) so that taking and giving back is a `Vec` pop and push.

use std::cell::RefCell;

use routechain_core::CallState;

use super::Selected;

/// Buffers kept per thread; more concurrent calls on one thread allocate their own.
const KEEP_PER_THREAD: usize = 64;

/// The buffers of one call.
#[derive(Debug, Default)]
pub(crate) struct Buffers {
    /// Candidates, scratch, the routed-set memo and the random source.
    pub(crate) call: CallState,
    /// The providers this call already tried (emptied before reuse).
    pub(crate) tried: Vec<Selected>,
}

thread_local! {
    static CACHE: RefCell<Vec<Buffers>> = const { RefCell::new(Vec::new()) };
}

/// Buffers taken from this thread's cache (or new), given back when dropped.
#[derive(Debug)]
pub(crate) struct Pooled(Option<Buffers>);

impl Pooled {
    /// Buffers for one call.
    pub(crate) fn take() -> Self {
        let cached = CACHE
            .try_with(|c| c.try_borrow_mut().ok().and_then(|mut c| c.pop()))
            .ok()
            .flatten();
        Pooled(Some(cached.unwrap_or_default()))
    }

    /// The buffers.
    pub(crate) fn get(&mut self) -> &mut Buffers {
        self.0.get_or_insert_with(Buffers::default)
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        let Some(mut buffers) = self.0.take() else {
            return;
        };
        // Release the tried providers' views now, and make sure no memo outlives the call.
        buffers.tried.clear();
        buffers.call.routed.state = (0, 0);
        let _ = CACHE.try_with(|c| {
            if let Ok(mut c) = c.try_borrow_mut()
                && c.len() < KEEP_PER_THREAD
            {
                c.push(buffers);
            }
        });
    }
}
