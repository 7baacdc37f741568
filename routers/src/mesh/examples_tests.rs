//! The commented example `rules/examples/mesh/` (a chain with a `mesh` entry whose rule file
//! is `shop-detail.MESHAPPRULE`, as Dubbo stores it) routes as docs/mesh.md says.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::builtin_registry;
use routechain_core::{CallState, ChainState, Request, Snapshot, Url};
use routechain_rules::ChainFile;
use serde_json::json;

fn state() -> ChainState {
    let dir = routechain_rules::examples_dir().join("mesh");
    let file = ChainFile::load(&dir.join("mesh.chain.yaml")).expect("example parses");
    let entries = file.compile(&builtin_registry()).expect("example compiles");
    let text = std::fs::read_to_string(dir.join("providers.txt")).unwrap();
    let snapshot = Arc::new(Snapshot::parse_lines(1, &text).unwrap());
    let consumer = file.consumer.clone().unwrap_or_else(Url::empty);
    ChainState::new(
        Some("com.example.shop.DetailService".into()),
        snapshot,
        consumer,
        entries,
    )
    .unwrap()
}

fn routed(state: &ChainState, request: &Request, seed: u64) -> Vec<usize> {
    let mut call = CallState::seeded(seed);
    match state.route(request, &mut call) {
        Ok(()) => call.candidates.iter().collect(),
        Err(_) => Vec::new(),
    }
}

const STABLE: &[usize] = &[0, 1, 4];
const CANARY: &[usize] = &[2];
const GRAY: &[usize] = &[3, 4];

#[test]
fn the_example_routes_as_documented() {
    let state = state();
    let one = |r: Request| routed(&state, &r, 1);
    // Attachments: dubboContext x-lane=gray, x-tenant present, x-debug absent, x-region any.
    let gray = Request::new()
        .with_method("getDetail")
        .with_attachment("x-lane", "gray")
        .with_attachment("x-tenant", "t1")
        .with_attachment("x-region", "hz");
    assert_eq!(one(gray.clone()), GRAY);
    // x-debug set: the second match entry fails; the default detail draws stable or canary.
    let debug = gray.with_attachment("x-debug", "1");
    for seed in 0..50 {
        let r = routed(&state, &debug, seed);
        assert!(r == STABLE || r == CANARY, "{r:?}");
    }
    // A boolean second argument `true` to setFlag.
    let flag = Request::new()
        .with_method("setFlag")
        .with_argument(json!("sku-1"))
        .with_argument(json!(true));
    assert_eq!(one(flag), GRAY);
    // tracingContext user under the entry's tracing_prefix "trace.".
    let traced = Request::new()
        .with_method("list")
        .with_attachment("trace.user", "test-ann");
    assert_eq!(one(traced), GRAY);
    // sourceLabels: the consumer's lane parameter.
    let consumer = Url::parse(
        "consumer://10.1.0.2/com.example.shop.DetailService?application=shop-web&lane=gray",
    )
    .unwrap();
    let from_gray = Request::new().with_method("list").with_consumer(consumer);
    assert_eq!(one(from_gray), GRAY);
    // vip-orders: getX("vip-...", 1500) with the declared types → 20 canary / 80 stable.
    let vip = Request::new()
        .with_method("getOrder")
        .with_argument(json!("vip-7"))
        .with_argument(json!(1500))
        .with_parameter_type("java.lang.String")
        .with_parameter_type("long");
    let mut seen = BTreeSet::new();
    for seed in 0..200 {
        let r = routed(&state, &vip, seed);
        assert!(r == STABLE || r == CANARY, "{r:?}");
        seen.insert(r);
    }
    assert_eq!(seen.len(), 2, "both destinations are drawn");
    // Another interface of shop-detail: the `everything-else` route, stable only. The provider
    // of shop-legacy (index 5) is never routed once shop-detail's rule selects a subset.
    let cart = Request::new()
        .with_service("com.example.shop.CartService")
        .with_method("get");
    assert_eq!(one(cart), STABLE);
}

#[test]
fn the_example_explains_its_choice() {
    let state = state();
    let request = Request::new()
        .with_method("list")
        .with_attachment("trace.user", "test-ann");
    let mut call = CallState::seeded(1);
    let mut trace = routechain_core::Trace::default();
    state.route_traced(&request, &mut call, &mut trace).unwrap();
    let step = trace.steps.iter().find(|s| s.router == "mesh").unwrap();
    assert_eq!(step.priority, -50);
    assert_eq!(
        step.reason,
        "app shop-detail: VirtualService \"shop-detail\" \"detail-reads\" detail \"test-users\": single destination \"gray\": subset \"gray\" (2 providers)"
    );
}

/// Dubbo's `MeshRuleRouterTest` rule4 over a call whose input was narrowed to `testing`
/// before the router: the drawn `testing-trunk` has no candidate, its fallback does.
#[test]
fn a_fallback_is_explained() {
    let rule = r#"
- kind: DestinationRule
  metadata: { name: demo-route }
  spec:
    subsets:
      - { name: isolation, labels: { env-sign: xxx } }
      - { name: testing-trunk, labels: { env-sign: yyy } }
      - { name: testing, labels: { env-sign: zzz } }
- kind: VirtualService
  metadata: { name: demo-route }
  spec:
    dubbo:
      - routedetail:
          - name: testing-trunk
            route:
              - destination: { subset: testing-trunk, fallback: { destination: { subset: testing } } }
              - { weight: 10, destination: { subset: isolation } }
"#;
    // A condition router before the mesh router narrows the input to `testing`.
    let mut chain = String::from(
        "routers:\n  - type: condition\n    priority: -60\n    rule: {conditions: ['=> env-sign = zzz']}\n  - type: mesh\n    app: app1\n    rule:\n",
    );
    for line in rule.lines() {
        chain.push_str("      ");
        chain.push_str(line);
        chain.push('\n');
    }
    let file = ChainFile::parse("c.yaml", &chain, None).unwrap();
    let entries = file.compile(&builtin_registry()).unwrap();
    let snapshot = Arc::new(
        Snapshot::parse_lines(
            1,
            "dubbo://10.0.0.1:1/s?remote.application=app1&env-sign=xxx\n\
             dubbo://10.0.0.2:1/s?remote.application=app1&env-sign=yyy\n\
             dubbo://10.0.0.3:1/s?remote.application=app1&env-sign=zzz\n",
        )
        .unwrap(),
    );
    let state = ChainState::new(None, snapshot, Url::empty(), entries).unwrap();
    // The word 1 makes `below(11)` draw 0: the first destination.
    let mut call = CallState::with_rng(routechain_core::SequenceRng::new(vec![1]));
    let mut trace = routechain_core::Trace::default();
    state
        .route_traced(&Request::new(), &mut call, &mut trace)
        .unwrap();
    assert_eq!(call.candidates.iter().collect::<Vec<_>>(), vec![2]);
    let step = trace.steps.iter().find(|s| s.router == "mesh").unwrap();
    assert_eq!((step.before, step.after), (1, 1));
    assert_eq!(
        step.reason,
        "app app1: VirtualService \"demo-route\" dubbo[0] detail \"testing-trunk\": drew #0 \"testing-trunk\" (weight 1 of 11); no candidate, fallback 1: subset \"testing\" (1 provider)"
    );
}
