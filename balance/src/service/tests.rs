//! The caller's handle on the published view: a selection writes no reference count that
//! another caller writes, the handle follows a new view, and a pooled call state drops a
//! handle on a replaced view.

use std::sync::Arc;

use routechain_core::{CallState, Chain, ChainState, Request, Snapshot, Url};

use super::pool::{Buffers, PerThread};
use super::{Service, ServiceConfig, handle_is_stale};

fn snapshot(n: usize) -> Arc<Snapshot> {
    let text: String = (0..n)
        .map(|i| format!("dubbo://10.0.0.{i}:20880/svc\n"))
        .collect();
    Arc::new(Snapshot::parse_lines(1, &text).unwrap())
}

fn service() -> Service {
    let state = ChainState::new(None, snapshot(8), Arc::new(Url::empty()), vec![]).unwrap();
    Service::new(Arc::new(Chain::new(state)), ServiceConfig::default())
}

#[test]
fn selections_share_the_callers_handle_not_the_views_count() {
    let service = service();
    let request = Request::new();
    let mut call = CallState::seeded(1);
    let first = service.select(&request, &[], &mut call).unwrap();
    let view = service.view.load_full();
    let count = Arc::strong_count(&view);
    let more: Vec<_> = (0..10)
        .map(|_| service.select(&request, &[], &mut call).unwrap())
        .collect();
    assert_eq!(
        Arc::strong_count(&view),
        count,
        "a selection counted on the view"
    );
    for s in &more {
        assert!(Arc::ptr_eq(&s.handle, &first.handle));
    }
    let _in_flight = first.begin();
    assert_eq!(
        Arc::strong_count(&view),
        count,
        "an in-flight guard counted on the view"
    );

    // Two callers: two handles on one view.
    let mut other = CallState::seeded(2);
    let theirs = service.select(&request, &[], &mut other).unwrap();
    assert!(!Arc::ptr_eq(&theirs.handle, &first.handle));
    assert!(Arc::ptr_eq(&theirs.handle.view, &first.handle.view));
}

#[test]
fn the_handle_follows_a_new_view_in_place_when_free() {
    let service = service();
    let request = Request::new();
    let mut call = CallState::seeded(1);
    let old = service.select(&request, &[], &mut call).unwrap();
    let old_view = old.handle.view.clone();
    service.update_snapshot(snapshot(5)).unwrap();
    assert!(old_view.retired.load(std::sync::atomic::Ordering::Relaxed));

    // `old` still holds the caller's handle: a new handle for the new view.
    let new = service.select(&request, &[], &mut call).unwrap();
    assert!(!Arc::ptr_eq(&new.handle, &old.handle));
    assert!(new.index() < 5);
    assert!(Arc::ptr_eq(new.state(), &service.state()));
    assert!(old.index() < 8 && Arc::ptr_eq(&old.handle.view, &old_view));

    // Nothing holds the handle any more: the same allocation is re-pointed.
    let handle_ptr = Arc::as_ptr(&new.handle);
    drop(new);
    service.set_config(ServiceConfig::default());
    let again = service.select(&request, &[], &mut call).unwrap();
    assert_eq!(Arc::as_ptr(&again.handle), handle_ptr);
    assert!(Arc::ptr_eq(&again.handle.view, &service.view.load_full()));
}

#[test]
fn a_chain_swapped_behind_the_service_is_caught_up() {
    let service = service();
    let request = Request::new();
    let mut call = CallState::seeded(1);
    let _ = service.select(&request, &[], &mut call).unwrap();
    service
        .chain()
        .update(|s| s.with_snapshot(snapshot(3), Arc::new(routechain_core::DegradedSet::new(3))))
        .unwrap();
    let s = service.select(&request, &[], &mut call).unwrap();
    assert!(s.index() < 3);
    assert!(Arc::ptr_eq(s.state(), &service.chain().state()));
}

#[test]
fn a_pooled_call_state_drops_a_handle_on_a_replaced_view() {
    let service = service();
    let request = Request::new();
    let mut buffers = Buffers::default();
    drop(service.select(&request, &[], &mut buffers.call).unwrap());
    buffers.recycle();
    let layer = buffers
        .call
        .routed
        .layer
        .clone()
        .expect("kept for the next call");
    assert!(!handle_is_stale(&layer));
    drop(layer);
    service.set_config(ServiceConfig::default());
    buffers.recycle();
    assert!(buffers.call.routed.layer.is_none());
}
