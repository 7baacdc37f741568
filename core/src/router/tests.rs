//! The typed router contract: compile, name, priority, the no-rule case, prepare errors,
//! closure routers, attach and the context builder.

use super::*;
use crate::{CallState, ChainEntry, ChainState, FieldPath, Registry};

struct Evens;

impl TypedRouter for Evens {
    type Raw = serde_json::Value;
    type Rule = bool;
    type Prepared = BitSet;
    fn default_priority(&self, rule: Option<&bool>) -> i32 {
        if rule == Some(&true) { 7 } else { 3 }
    }
    fn name(&self, type_name: &str, rule: &bool) -> String {
        format!("{type_name}({rule})")
    }
    fn compile(
        &self,
        raw: serde_json::Value,
        spec: &RouterSpec<'_>,
    ) -> Result<bool, Vec<RuleError>> {
        match raw.get("fail") {
            Some(_) => Err(vec![spec.error(&FieldPath::root().key("fail"), "failing")]),
            None => Ok(raw.get("prepare_fails").is_none()),
        }
    }
    fn prepare(ok: &Arc<bool>, cx: &PrepareContext<'_>) -> Result<BitSet, String> {
        if **ok {
            Ok(BitSet::from_fn(cx.snapshot.len(), |i| i % 2 == 0))
        } else {
            Err("refused".into())
        }
    }
    fn route(evens: &BitSet, cx: &mut RouteContext<'_>, c: &mut Candidates) -> Evaluation {
        c.and_assign(evens);
        cx.explain(format_args!("evens"));
        Evaluation::Cached
    }
}

fn build(rule: Option<serde_json::Value>) -> Result<Arc<dyn Router>, Vec<RuleError>> {
    let mut registry = Registry::new();
    registry.register_typed("evens", Evens);
    let entry_path = FieldPath::root().key("routers").index(0);
    let rule_path = entry_path.key("rule");
    let entry = serde_json::Value::Null;
    registry.get("evens").unwrap().build(&RouterSpec {
        type_name: "evens",
        entry: RuleDoc::new(&entry, &entry_path),
        rule: rule.as_ref().map(|r| RuleDoc::new(r, &rule_path)),
        base_dir: None,
        service: None,
    })
}

fn route(router: Arc<dyn Router>) -> (Vec<usize>, String) {
    let snapshot = Snapshot::parse_lines(
        3,
        "dubbo://10.0.0.1:1/s\ndubbo://10.0.0.2:1/s\ndubbo://10.0.0.3:1/s\n",
    )
    .unwrap();
    let state = ChainState::new(
        None,
        Arc::new(snapshot),
        Url::empty(),
        vec![ChainEntry::new("evens", 0, router)],
    )
    .unwrap();
    let mut call = CallState::seeded(1);
    let mut trace = crate::Trace::default();
    state
        .route_traced(&Request::new(), &mut call, &mut trace)
        .unwrap();
    (
        call.candidates.iter().collect(),
        trace.steps[0].reason.clone(),
    )
}

#[test]
fn a_typed_router_compiles_names_prioritises_and_routes() {
    let router = build(Some(serde_json::json!({}))).unwrap();
    assert_eq!(
        (router.name(), router.default_priority()),
        ("evens(true)", 7)
    );
    assert_eq!(route(router), (vec![0, 2], "evens".to_string()));
}

#[test]
fn without_a_rule_every_provider_passes() {
    let router = build(None).unwrap();
    assert_eq!((router.name(), router.default_priority()), ("evens", 3));
    assert_eq!(
        route(router),
        (
            vec![0, 1, 2],
            "no evens rule: every provider passes".to_string()
        )
    );
}

#[test]
fn compile_and_type_errors_are_located() {
    let e = build(Some(serde_json::json!({"fail": 1}))).err().unwrap();
    assert_eq!(e[0].to_string(), "routers[0].rule.fail: failing");
}

#[test]
fn a_failed_prepare_names_the_router_and_the_generation() {
    let router = build(Some(serde_json::json!({"prepare_fails": 1}))).unwrap();
    let snapshot = Snapshot::parse_lines(3, "dubbo://10.0.0.1:1/s\n").unwrap();
    let e = router
        .prepare(&PrepareContext {
            snapshot: &snapshot,
            consumer: &Url::empty(),
            service: None,
        })
        .err()
        .unwrap();
    assert_eq!(
        e,
        PrepareError {
            router: "evens(false)".into(),
            generation: 3,
            reason: "refused".into()
        }
    );
}

#[test]
fn a_registered_closure_router_is_named_by_chain_entries_and_takes_no_rule() {
    let mut registry = Registry::new();
    registry.register_fn("odd-out", 5, |_, c| c.remove(1));
    let entry_path = FieldPath::root();
    let entry = serde_json::Value::Null;
    let spec = |rule| RouterSpec {
        type_name: "odd-out",
        entry: RuleDoc::new(&entry, &entry_path),
        rule,
        base_dir: None,
        service: None,
    };
    let router = registry.get("odd-out").unwrap().build(&spec(None)).unwrap();
    assert_eq!((router.name(), router.default_priority()), ("odd-out", 5));
    assert_eq!(route(router).0, vec![0, 2]);
    let rule = serde_json::json!({});
    let e = registry
        .get("odd-out")
        .unwrap()
        .build(&spec(Some(RuleDoc::new(&rule, &entry_path))))
        .err()
        .unwrap();
    assert_eq!(e[0].message, "router type \"odd-out\" takes no rule");
}

#[test]
fn a_chain_state_attaches_its_degraded_set_to_typed_prepared_states() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static ATTACHED: AtomicUsize = AtomicUsize::new(0);
    struct Attached;
    impl TypedRouter for Attached {
        type Raw = serde_json::Value;
        type Rule = ();
        type Prepared = ();
        fn default_priority(&self, _: Option<&()>) -> i32 {
            0
        }
        fn compile(&self, _: serde_json::Value, _: &RouterSpec<'_>) -> Result<(), Vec<RuleError>> {
            Ok(())
        }
        fn prepare(_: &Arc<()>, _: &PrepareContext<'_>) -> Result<(), String> {
            Ok(())
        }
        fn route(_: &(), _: &mut RouteContext<'_>, _: &mut Candidates) -> Evaluation {
            Evaluation::Cached
        }
        fn attach(_: &(), degraded: &Arc<DegradedSet>) {
            ATTACHED.fetch_add(degraded.len(), Ordering::SeqCst);
        }
    }
    let router = TypedFactory::new("attached", Attached).router(Some(()));
    let snapshot =
        Snapshot::parse_lines(1, "dubbo://10.0.0.1:1/s\ndubbo://10.0.0.2:1/s\n").unwrap();
    ChainState::new(
        None,
        Arc::new(snapshot),
        Url::empty(),
        vec![ChainEntry::new("attached", 0, router)],
    )
    .unwrap();
    assert_eq!(ATTACHED.load(Ordering::SeqCst), 2);
}

#[test]
fn the_builder_defaults_and_records_the_reason() {
    let snapshot = Snapshot::parse_lines(1, "dubbo://10.0.0.1:1/s?zone=a\n").unwrap();
    let request = Request::new();
    let consumer = Url::parse("consumer://10.0.0.9/s?zone=a").unwrap();
    let mut builder = RouteContext::builder(&request, &snapshot)
        .consumer(&consumer, false)
        .explain(true);
    let cx = builder.context();
    assert!(!cx.consumer_is_prepared());
    assert_eq!(cx.consumer().param("zone"), Some("a"));
    assert!(!cx.degraded().any());
    let mut cx = builder.context();
    cx.explain(format_args!("one"));
    cx.explain(format_args!("two"));
    assert_eq!(builder.reason(), "one; two");
    let mut quiet = RouteContext::builder(&request, &snapshot);
    let mut cx = quiet.context();
    assert!(!cx.explaining());
    cx.explain(format_args!("ignored"));
    assert_eq!(quiet.reason(), "");
}
