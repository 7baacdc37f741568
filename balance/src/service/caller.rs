//! [`Caller`]: one caller's reusable state for [`Cluster::select`], and its handle on the
//! published state (see the service's module documentation, "No shared write per call").

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use arc_swap::Guard;
use routechain_core::{BitSet, CallState, FastRng, RandomSource};

use super::{Cluster, Published};

/// One caller's reusable state for [`Cluster::select`]: the routing buffers and random
/// source ([`CallState`], which it dereferences to), the routed set of its last selection
/// (a retry reuses it, as Dubbo's failover retries on the same list) and its handle on the
/// published state. Keep one per task or thread and reuse it: after the first call a
/// selection allocates nothing.
#[derive(Debug)]
pub struct Caller<R: RandomSource = FastRng> {
    pub(super) call: CallState<R>,
    /// The routed set of the last selection.
    pub(super) routed: BitSet,
    /// What it was routed on: the chain state's address and generation (an address reused
    /// by a later state has another generation), and the health epoch.
    pub(crate) routed_on: ((usize, u64), u64),
    /// This caller's handle on the published state.
    handle: Option<Arc<Handle>>,
}

/// A caller's handle on a published state. Aligned to two cache lines so that its
/// reference count shares a line with nothing another thread writes (the allocator may
/// place two callers' small allocations side by side).
#[derive(Debug)]
#[repr(align(128))]
pub(super) struct Handle {
    pub(super) published: Arc<Published>,
}

impl Caller<FastRng> {
    /// A caller with an entropy-seeded generator.
    pub fn new() -> Self {
        Self::from(CallState::new())
    }
    /// A caller with a fixed seed (repeatable draws).
    pub fn seeded(seed: u64) -> Self {
        Self::from(CallState::seeded(seed))
    }
}

impl Default for Caller<FastRng> {
    fn default() -> Self {
        Self::new()
    }
}

impl<R: RandomSource> From<CallState<R>> for Caller<R> {
    fn from(call: CallState<R>) -> Self {
        Caller {
            call,
            routed: BitSet::default(),
            routed_on: ((0, 0), 0),
            handle: None,
        }
    }
}

impl<R: RandomSource> Deref for Caller<R> {
    type Target = CallState<R>;
    fn deref(&self) -> &CallState<R> {
        &self.call
    }
}

impl<R: RandomSource> DerefMut for Caller<R> {
    fn deref_mut(&mut self) -> &mut CallState<R> {
        &mut self.call
    }
}

impl<R: RandomSource> Caller<R> {
    /// The handle on `service`'s published state: a clone of this caller's when it already
    /// points at it (a reference count only this caller writes), else re-pointed first.
    #[inline]
    pub(super) fn handle(&mut self, service: &Cluster) -> Arc<Handle> {
        let published = service.published.load();
        match &self.handle {
            Some(h) if Arc::ptr_eq(&h.published, &published) => h.clone(),
            _ => self.rebind(published),
        }
    }

    /// Re-points the handle (in place when no [`super::Selected`] holds it).
    #[cold]
    fn rebind(&mut self, published: Guard<Arc<Published>>) -> Arc<Handle> {
        let published = Guard::into_inner(published);
        match self.handle.as_mut().and_then(Arc::get_mut) {
            Some(h) => h.published = published,
            None => self.handle = Some(Arc::new(Handle { published })),
        }
        self.handle.clone().expect("set above")
    }

    /// Forgets the last routed set and, when `service` published a newer state than the
    /// handle's, the handle (so a cached caller does not keep an old snapshot alive).
    pub(super) fn release(&mut self, service: &Cluster) {
        self.routed_on = ((0, 0), 0);
        if self
            .handle
            .as_ref()
            .is_some_and(|h| !Arc::ptr_eq(&h.published, &service.published.load()))
        {
            self.handle = None;
        }
    }

    /// True when this caller holds a handle on a published state.
    #[cfg(test)]
    pub(super) fn has_handle(&self) -> bool {
        self.handle.is_some()
    }
}
