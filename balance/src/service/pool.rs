//! Reusable call buffers, so a caller of [`crate::Cluster::call`] never keeps a
//! [`Caller`] and a call allocates nothing once a thread's buffers have grown.
//!
//! A call takes a [`Buffers`] (a [`Caller`] and the list of providers it tried) from a
//! small per-thread cache when it starts and owns it until it ends, across every `.await`:
//! it works with one task per request, on any runtime, and a task that moves to another
//! thread gives its buffers back to that thread's cache. The cache holds only buffers:
//! request attributes travel in the [`routechain_core::Request`], and a call's memo of its
//! routed set is reset before the buffers are reused. A thread-local is used (rather than a
//! shared pool behind a lock) so that taking and giving back is a `Vec` pop and push.

use std::cell::RefCell;
use std::thread::LocalKey;

use super::{Caller, Selected};

/// Values kept per thread by a [`Pooled`]; more concurrent users on one thread allocate
/// their own.
const KEEP_PER_THREAD: usize = 64;

/// A value worth reusing across calls, kept in its own per-thread cache by [`Pooled`].
pub trait PerThread: Default + 'static {
    /// This type's per-thread cache (a `thread_local!` of a `RefCell<Vec<Self>>`).
    fn cache() -> &'static LocalKey<RefCell<Vec<Self>>>;
    /// Makes the value ready for the next user before it goes back to the cache (drop what
    /// must not outlive a call; keep the capacity).
    fn recycle(&mut self) {}
}

/// A value taken from this thread's cache (or new), given back when dropped: taking and
/// giving back is a `Vec` pop and push, with no lock.
#[derive(Debug)]
pub struct Pooled<T: PerThread>(Option<T>);

impl<T: PerThread> Pooled<T> {
    /// A value for one call.
    pub fn take() -> Self {
        let cached = T::cache()
            .try_with(|c| c.try_borrow_mut().ok().and_then(|mut c| c.pop()))
            .ok()
            .flatten();
        Pooled(Some(cached.unwrap_or_default()))
    }

    /// The value.
    pub fn get(&mut self) -> &mut T {
        self.0.get_or_insert_with(T::default)
    }
}

impl<T: PerThread> Drop for Pooled<T> {
    fn drop(&mut self) {
        let Some(mut value) = self.0.take() else {
            return;
        };
        value.recycle();
        let _ = T::cache().try_with(|c| {
            if let Ok(mut c) = c.try_borrow_mut()
                && c.len() < KEEP_PER_THREAD
            {
                c.push(value);
            }
        });
    }
}

/// The buffers of one call.
#[derive(Debug, Default)]
pub(crate) struct Buffers {
    /// Candidates, scratch, the routed-set memo, the random source and the handle.
    pub(crate) call: Caller,
    /// The providers this call already tried (emptied before reuse).
    pub(crate) tried: Vec<Selected>,
}

thread_local! {
    static BUFFERS: RefCell<Vec<Buffers>> = const { RefCell::new(Vec::new()) };
}

impl PerThread for Buffers {
    fn cache() -> &'static LocalKey<RefCell<Vec<Self>>> {
        &BUFFERS
    }

    /// Release the tried providers' states now, and make sure no routed set outlives the
    /// call (the handle is kept for the next call: [`crate::Cluster::call`] drops it when a
    /// newer state was published).
    fn recycle(&mut self) {
        self.tried.clear();
        self.call.routed_on = ((0, 0), 0);
    }
}
