//! The commented example `rules/examples/mesh/` (a chain with a `mesh` entry whose rule file
//! is `shop-detail.MESHAPPRULE`, as Dubbo stores it) routes as docs/mesh.md says.

use std::collections::BTreeSet;
use std::sync::Arc;

use routechain_core::{CallState, ChainState, Request, Snapshot, Url};
use routechain_routers::builtin_registry;
use routechain_rules::ChainFile;
use serde_json::json;

fn state() -> ChainState {
    let dir = routechain_rules::examples_dir().join("mesh");
    let file = ChainFile::load(&dir.join("mesh.chain.yaml")).expect("example parses");
    let entries = file.compile(&builtin_registry()).expect("example compiles");
    let text = std::fs::read_to_string(dir.join("providers.txt")).unwrap();
    let snapshot = Arc::new(Snapshot::parse_lines(1, &text).unwrap());
    let consumer = Arc::new(file.consumer.clone().unwrap_or_else(Url::empty));
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
    let consumer = Arc::new(
        Url::parse(
            "consumer://10.1.0.2/com.example.shop.DetailService?application=shop-web&lane=gray",
        )
        .unwrap(),
    );
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
