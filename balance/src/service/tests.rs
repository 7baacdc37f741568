//! The caller's handle on the published state: a selection writes no reference count that
//! another caller writes, the handle follows a new state, and a call drops a handle on a
//! replaced state when it ends; health carried over by an edit as by address.

use std::sync::Arc;

use routechain_core::{ChainState, Change, Request, Snapshot, Url};

use super::{Caller, Cluster, ClusterChange, ServiceConfig};

fn snapshot(n: usize) -> Arc<Snapshot> {
    let text: String = (0..n)
        .map(|i| format!("dubbo://10.0.0.{i}:20880/svc\n"))
        .collect();
    Arc::new(Snapshot::parse_lines(1, &text).unwrap())
}

fn service() -> Cluster {
    let state = ChainState::new(None, snapshot(8), Url::empty(), vec![]).unwrap();
    Cluster::new(state, ServiceConfig::default())
}

#[test]
fn selections_share_the_callers_handle_not_the_published_count() {
    let service = service();
    let request = Request::new();
    let mut call = Caller::seeded(1);
    let first = service.select(&request, &[], &mut call).unwrap();
    let published = service.published.load_full();
    let count = Arc::strong_count(&published);
    let more: Vec<_> = (0..10)
        .map(|_| service.select(&request, &[], &mut call).unwrap())
        .collect();
    assert_eq!(
        Arc::strong_count(&published),
        count,
        "a selection counted on the published state"
    );
    for s in &more {
        assert!(Arc::ptr_eq(&s.handle, &first.handle));
    }
    let _in_flight = first.begin();
    assert_eq!(
        Arc::strong_count(&published),
        count,
        "an in-flight guard counted on the published state"
    );

    // Two callers: two handles on one published state.
    let mut other = Caller::seeded(2);
    let theirs = service.select(&request, &[], &mut other).unwrap();
    assert!(!Arc::ptr_eq(&theirs.handle, &first.handle));
    assert!(Arc::ptr_eq(
        &theirs.handle.published,
        &first.handle.published
    ));
}

#[test]
fn the_handle_follows_a_new_state_in_place_when_free() {
    let service = service();
    let request = Request::new();
    let mut call = Caller::seeded(1);
    let old = service.select(&request, &[], &mut call).unwrap();
    let old_published = old.handle.published.clone();
    service.apply(Change::providers(snapshot(5))).unwrap();

    // `old` still holds the caller's handle: a new handle for the new state.
    let new = service.select(&request, &[], &mut call).unwrap();
    assert!(!Arc::ptr_eq(&new.handle, &old.handle));
    assert!(new.index() < 5);
    assert!(Arc::ptr_eq(new.state(), &service.state()));
    assert!(old.index() < 8 && Arc::ptr_eq(&old.handle.published, &old_published));

    // Nothing holds the handle any more: the same allocation is re-pointed.
    let handle_ptr = Arc::as_ptr(&new.handle);
    drop(new);
    service
        .apply(ClusterChange::config(ServiceConfig::default()))
        .unwrap();
    let again = service.select(&request, &[], &mut call).unwrap();
    assert_eq!(Arc::as_ptr(&again.handle), handle_ptr);
    assert!(Arc::ptr_eq(
        &again.handle.published,
        &service.published.load_full()
    ));
}

#[test]
fn a_call_ends_by_dropping_a_handle_on_a_replaced_state() {
    let service = service();
    let request = Request::new();
    let mut caller = Caller::seeded(1);
    drop(service.select(&request, &[], &mut caller).unwrap());
    caller.release(&service);
    assert!(caller.has_handle(), "kept for the next call");
    service
        .apply(ClusterChange::config(ServiceConfig::default()))
        .unwrap();
    caller.release(&service);
    assert!(!caller.has_handle());
}

/// A snapshot of providers named by number: `dubbo://10.0.<n/250>.<n%250>:20880/svc`.
fn numbered(ns: &[u32]) -> Vec<Url> {
    ns.iter()
        .map(|n| {
            Url::parse(&format!(
                "dubbo://10.0.{}.{}:20880/svc?n={n}",
                n / 250,
                n % 250
            ))
            .unwrap()
        })
        .collect()
}

/// Health and degraded marks, per provider address, of the service's published state.
fn health_by_address(service: &Cluster) -> Vec<(String, crate::health::ProviderHealth, bool)> {
    let state = service.state();
    let mut out: Vec<_> = state
        .snapshot()
        .providers()
        .iter()
        .enumerate()
        .map(|(i, p)| {
            (
                p.address().to_string(),
                service.health(i),
                service.is_degraded(i),
            )
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[test]
fn an_edited_snapshot_carries_health_and_marks_by_provider_as_a_replaced_one_does() {
    use crate::health::ManualClock;
    use std::time::Duration;
    let first = numbered(&(0..300).collect::<Vec<_>>());
    let make = || {
        let state = ChainState::new(
            None,
            Arc::new(Snapshot::from_shared(1, first.clone())),
            Url::empty(),
            vec![],
        )
        .unwrap();
        let clock = Arc::new(ManualClock::new());
        let service = Cluster::with_clock(state, ServiceConfig::default(), clock.clone());
        // Degraded: 3, 70, 200 (200 is removed, then its address comes back as a new
        // provider); failures without degrading: 5 and 299; 71 on probation.
        for i in [3usize, 70, 200, 71] {
            service.degrade(i);
        }
        clock.advance(Duration::from_secs(1));
        service.report_failure(5usize);
        service.report_failure(299usize);
        (service, clock)
    };
    let (by_address, clock_a) = make();
    let (by_edit, clock_b) = make();
    for (service, clock) in [(&by_address, &clock_a), (&by_edit, &clock_b)] {
        // 71's cool-down ends: on probation (30 s default cool-down).
        clock.advance(Duration::from_secs(40));
        service.degrade(3usize);
        service.degrade(70usize);
        service.degrade(200usize);
    }
    let _ = by_address.select(&Request::new(), &[], &mut Caller::seeded(1));
    let _ = by_edit.select(&Request::new(), &[], &mut Caller::seeded(1));
    assert!(by_edit.health(71).probation && by_address.health(71).probation);
    // Removed: 0, 1, 200, 250; added: 300, 301 and provider 200's address again (another URL).
    let mut next: Vec<Url> = first
        .iter()
        .enumerate()
        .filter(|(i, _)| ![0, 1, 200, 250].contains(i))
        .map(|(_, p)| p.clone())
        .collect();
    next.extend(numbered(&[301, 300]));
    next.push(Url::parse("dubbo://10.0.0.200:20880/svc?n=200&again=true").unwrap());
    let old = by_edit.state().snapshot().clone();
    let (edited, edit) = old.edit_to(2, &next);
    by_edit.apply(Change::edit(Arc::new(edited), edit)).unwrap();
    by_address
        .apply(Change::providers(Arc::new(Snapshot::from_shared(2, next))))
        .unwrap();
    assert_eq!(health_by_address(&by_edit), health_by_address(&by_address));
    let state = by_edit.state();
    let again = state
        .snapshot()
        .providers()
        .iter()
        .position(|p| p.param("again").is_some())
        .unwrap();
    assert!(by_edit.is_degraded(again), "the address's health came back");
    assert_eq!(state.degraded().count(), 3, "3, 70 and the returned 200");
    // Reports by address find the providers of the edited snapshot.
    for (i, p) in state.snapshot().providers().iter().enumerate() {
        let published = by_edit.published.load_full();
        assert_eq!(published.indexes_of(p.address()).collect::<Vec<_>>(), [i]);
    }
    by_edit.report_success("10.0.0.5:20880");
    let five = state
        .snapshot()
        .providers()
        .iter()
        .position(|p| p.address() == "10.0.0.5:20880")
        .unwrap();
    assert_eq!(by_edit.health(five).failures, 0);
}
