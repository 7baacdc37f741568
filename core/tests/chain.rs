//! Chain behaviour through the public API: order, fail-fast, traces, updates, fan-out.

use std::sync::Arc;

use routechain_core::*;

fn snapshot(n: usize) -> Arc<Snapshot> {
    let text: String = (0..n)
        .map(|i| format!("dubbo://10.0.0.{i}:20880/svc?group=g{}&idx={i}\n", i % 4))
        .collect();
    Arc::new(Snapshot::parse_lines(1, &text).unwrap())
}

/// Keeps providers whose `group` param equals the request attribute `group`.
fn group_router() -> Arc<dyn Router> {
    Arc::new(router_fn("group", |cx, c| {
        let Some(g) = cx.request().attributes.get("group") else {
            return;
        };
        let snap = cx.snapshot();
        for i in 0..snap.len() {
            if snap.providers()[i].get("group") != Some(g) {
                c.remove(i);
            }
        }
        cx.explain(format_args!("group {g}"));
    }))
}

fn keep_if(name: &'static str, f: fn(usize) -> bool) -> Arc<dyn Router> {
    Arc::new(router_fn(name, move |_cx, c| {
        for i in 0..c.len() {
            if !f(i) {
                c.remove(i);
            }
        }
    }))
}

#[test]
fn routers_run_by_priority_then_file_order() {
    let entries = vec![
        ChainEntry::new("b", 10, keep_if("b", |_| true)),
        ChainEntry::new("a", -5, keep_if("a", |_| true)),
        ChainEntry::new("c", 10, keep_if("c", |_| true)),
        ChainEntry::new("d", 0, keep_if("d", |_| true)),
    ];
    let state = ChainState::new(None, snapshot(4), Url::empty(), entries).unwrap();
    assert_eq!(
        state.router_names().collect::<Vec<_>>(),
        ["a", "d", "b", "c"]
    );
    assert_eq!(state.run_order().collect::<Vec<_>>(), [1, 3, 0, 2]);
}

#[test]
fn each_router_narrows_the_previous_result_and_empty_names_the_router() {
    let entries = vec![
        ChainEntry::new("even", 1, keep_if("even", |i| i % 2 == 0)),
        ChainEntry::new("low", 2, keep_if("low", |i| i < 5)),
        ChainEntry::new("none", 3, keep_if("none", |_| false)),
        ChainEntry::new("never", 4, keep_if("never", |_| panic!("must not run"))),
    ];
    let state = ChainState::new(None, snapshot(10), Url::empty(), entries).unwrap();
    let mut call = CallState::seeded(1);
    let mut trace = Trace::default();
    let err = state
        .route_traced(&Request::new(), &mut call, &mut trace)
        .unwrap_err();
    assert_eq!(
        err,
        NoProvider::EmptiedBy {
            router: "none".into(),
            position: 2,
            priority: 3
        }
    );
    let counts: Vec<_> = trace.steps.iter().map(|s| (s.before, s.after)).collect();
    assert_eq!(counts, [(10, 5), (5, 3), (3, 0)]);
}

#[test]
fn empty_snapshot_is_no_provider() {
    let state = ChainState::new(None, snapshot(0), Url::empty(), vec![]).unwrap();
    assert_eq!(
        state.route(&Request::new(), &mut CallState::seeded(1)),
        Err(NoProvider::EmptySnapshot)
    );
}

#[test]
fn trace_records_reasons() {
    let state = ChainState::new(
        None,
        snapshot(8),
        Url::empty(),
        vec![ChainEntry::new("group", 0, group_router())],
    )
    .unwrap();
    let mut call = CallState::seeded(1);
    let mut trace = Trace::default();
    state
        .route_traced(
            &Request::new().with_attribute("group", "g2"),
            &mut call,
            &mut trace,
        )
        .unwrap();
    assert_eq!(call.candidates.iter().collect::<Vec<_>>(), [2, 6]);
    assert_eq!(trace.steps[0].reason, "group g2");
    assert_eq!(trace.steps[0].evaluation, Evaluation::Runtime);
}

struct FailingPrepare;
impl Router for FailingPrepare {
    fn name(&self) -> &str {
        "failing"
    }
    fn default_priority(&self) -> i32 {
        0
    }
    fn prepare(&self, cx: &PrepareContext<'_>) -> Result<Arc<dyn PreparedRouter>, PrepareError> {
        Err(PrepareError {
            router: "failing".into(),
            generation: cx.snapshot.generation(),
            reason: "refused".into(),
        })
    }
}

#[test]
fn a_failed_next_is_an_error_and_a_good_one_is_one_generation_on() {
    let state = ChainState::new(
        None,
        snapshot(8),
        Url::empty(),
        vec![ChainEntry::new("group", 0, group_router())],
    )
    .unwrap();
    let err = state
        .next(&Change::<()>::entries(vec![ChainEntry::new(
            "failing",
            0,
            Arc::new(FailingPrepare),
        )]))
        .unwrap_err();
    assert_eq!(err.reason, "refused");
    let mut call = CallState::seeded(1);
    state
        .route(&Request::new().with_attribute("group", "g1"), &mut call)
        .unwrap();
    assert_eq!(call.candidates.iter().collect::<Vec<_>>(), [1, 5]);

    // New providers: every router prepares over them, with a new degraded set.
    let next = state.next(&Change::<()>::providers(snapshot(12))).unwrap();
    assert_eq!(next.generation(), state.generation() + 1);
    assert_eq!(next.degraded().len(), 12);
    next.route(&Request::new().with_attribute("group", "g1"), &mut call)
        .unwrap();
    assert_eq!(call.candidates.iter().collect::<Vec<_>>(), [1, 5, 9]);
}

#[test]
fn next_by_an_edit_carries_the_degraded_marks_and_routes_as_a_fresh_state() {
    let state = ChainState::new(
        None,
        snapshot(8),
        Url::empty(),
        vec![ChainEntry::new("group", 0, group_router())],
    )
    .unwrap();
    state.degraded().mark(5);
    // Providers 0 and 1 leave; four new ones are appended.
    let mut list = state.snapshot().providers()[2..].to_vec();
    list.extend(snapshot(12).providers()[8..].iter().cloned());
    let (edited, edit) = state.snapshot().edit_to(2, &list);
    assert_eq!((edit.removed(), edit.added()), (&[0, 1][..], 6..10));
    let edited = Arc::new(edited);
    let next = state
        .next(&Change::<()>::edit(edited.clone(), edit))
        .unwrap();
    assert!(next.edited_routers().all(|(_, edited)| edited));
    assert_eq!(next.degraded().len(), 10);
    assert!(next.degraded().contains(3), "provider 5 is now at 3");
    let fresh = ChainState::new(None, edited, Url::empty(), state.entries().clone()).unwrap();
    let (mut a, mut b) = (CallState::seeded(1), CallState::seeded(1));
    for g in ["g0", "g1", "g2", "g3"] {
        let request = Request::new().with_attribute("group", g);
        next.route(&request, &mut a).unwrap();
        fresh.route(&request, &mut b).unwrap();
        assert_eq!(a.candidates, b.candidates, "{g}");
    }

    // A new consumer prepares every router again, over the same providers.
    let other = next
        .next(&Change::<()> {
            consumer: Some(Url::parse("consumer://10.9.9.9/svc").unwrap()),
            ..Change::default()
        })
        .unwrap();
    assert!(other.edited_routers().all(|(_, edited)| !edited));
    assert!(Arc::ptr_eq(other.snapshot(), next.snapshot()));
    assert!(Arc::ptr_eq(other.degraded(), next.degraded()));

    // The current snapshot given again, with or without an edit, keeps the degraded set
    // (the one a service's health table marks) and the prepared routers.
    let (_, noop) = next.snapshot().edit_to(3, next.snapshot().providers());
    for change in [
        Change::<()>::providers(next.snapshot().clone()),
        Change::<()>::edit(next.snapshot().clone(), noop),
    ] {
        let again = next.next(&change).unwrap();
        assert!(Arc::ptr_eq(again.degraded(), next.degraded()));
        assert!(again.degraded().contains(3));
    }
}

#[test]
fn new_entries_reuse_the_prepared_state_of_unchanged_routers() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    struct Counting(Arc<AtomicUsize>);
    impl Router for Counting {
        fn name(&self) -> &str {
            "counting"
        }
        fn default_priority(&self) -> i32 {
            0
        }
        fn prepare(&self, _: &PrepareContext<'_>) -> Result<Arc<dyn PreparedRouter>, PrepareError> {
            self.0.fetch_add(1, Ordering::SeqCst);
            group_router().prepare(&PrepareContext {
                snapshot: &Snapshot::default(),
                consumer: &Url::empty(),
                service: None,
            })
        }
    }
    let prepared = Arc::new(AtomicUsize::new(0));
    let counting: Arc<dyn Router> = Arc::new(Counting(prepared.clone()));
    let state = ChainState::new(
        None,
        snapshot(4),
        Url::empty(),
        vec![ChainEntry::new("counting", 0, counting.clone())],
    )
    .unwrap();
    let next = state
        .next(&Change::<()>::entries(vec![
            ChainEntry::new("counting", 0, counting),
            ChainEntry::new("group", 1, group_router()),
        ]))
        .unwrap();
    assert_eq!(prepared.load(Ordering::SeqCst), 1);
    assert_eq!(next.router_names().count(), 2);
}

/// A call fanned out to many tasks must route every task by its own attributes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fan_out_tasks_route_by_their_own_attributes() {
    let chain = Arc::new(
        ChainState::new(
            None,
            snapshot(64),
            Url::empty(),
            vec![ChainEntry::new("group", 0, group_router())],
        )
        .unwrap(),
    );
    let logical_call = Request::new().with_method("buildIndex");
    let mut tasks = Vec::new();
    for t in 0..64 {
        let chain = chain.clone();
        let request = logical_call
            .clone()
            .with_attribute("group", format!("g{}", t % 4));
        tasks.push(tokio::spawn(async move {
            let mut call = CallState::seeded(t);
            let mut seen = Vec::new();
            for _ in 0..50 {
                chain.route(&request, &mut call).unwrap();
                seen.extend(call.candidates.iter());
                tokio::task::yield_now().await;
            }
            (t, seen)
        }));
    }
    for task in tasks {
        let (t, seen) = task.await.unwrap();
        assert_eq!(seen.len(), 50 * 16);
        assert!(seen.iter().all(|i| i % 4 == (t % 4) as usize), "task {t}");
    }
}
