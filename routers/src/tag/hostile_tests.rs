//! Expensive inputs at sizes where super-linear code could not finish (a request tag of a
//! million `|`: ~5·10¹¹ bytes hashed; a condition side of 100,000 keys: ~5·10⁹ key
//! comparisons), checked for their answers. These tests time nothing (speed is measured in
//! `benches/hostile.rs`); super-linear code would never end them, and CI's time limit would
//! fail them.

mod support;

use std::sync::Arc;

use routechain_core::{CallState, ChainState, Request, Snapshot};
use routechain_routers::builtin_registry;
use routechain_rules::ChainFile;
use support::*;

fn state(chain: &str, providers: Arc<Snapshot>) -> ChainState {
    let file = ChainFile::parse("hostile.chain.yaml", chain, None).expect("chain parses");
    let entries = file.compile(&builtin_registry()).expect("chain compiles");
    ChainState::new(None, providers, routechain_core::Url::empty(), entries)
        .expect("chain prepares")
}

fn routed(state: &ChainState, request: &Request) -> Vec<usize> {
    let mut call = CallState::seeded(1);
    match state.route(request, &mut call) {
        Ok(()) => call.candidates.iter().collect(),
        Err(_) => Vec::new(),
    }
}

/// A hierarchical request tag `a|||…` (a million `|`) routes to the deepest of its
/// `|`-prefixes that is a tag, `a`, in one pass over the tag.
#[test]
fn a_request_tag_of_a_million_pipes_routes_to_its_deepest_tag() {
    let providers = snapshot(&[
        "dubbo://10.0.0.1:20880/s",
        "dubbo://10.9.9.9:20880/s",
        "dubbo://10.0.0.3:20880/s?dubbo.tag=b",
    ]);
    let state = state(
        "routers:\n  - type: tag\n    rule: {force: true, tags: [{name: a, addresses: [\"10.9.9.9\"]}]}\n",
        providers,
    );
    let tag = format!("a{}", "|".repeat(1_000_000));
    let request = Request::new().with_attachment("dubbo.tag", tag);
    assert_eq!(routed(&state, &request), vec![1]);
}

/// One condition whose when- and then-parts name 100,000 keys each compiles, prepares and
/// routes: the keys are told apart through a map (not by comparing each with every earlier
/// one), and keys no provider has are known from one pass over the snapshot.
#[test]
fn a_condition_of_a_hundred_thousand_terms_compiles_and_prepares() {
    let providers = snapshot(&["dubbo://10.0.0.1:20880/s?p0=v0", "dubbo://10.0.0.2:20880/s"]);
    let n = 100_000;
    let when: Vec<String> = (0..n).map(|i| format!("k{i} = v{i}")).collect();
    let then: Vec<String> = (0..n).map(|i| format!("p{i} = v{i}")).collect();
    let chain = format!(
        "routers:\n  - type: condition\n    rule:\n      force: true\n      conditions:\n        - \"method = m & {} => {}\"\n",
        when.join(" & "),
        then.join(" & ")
    );
    let state = state(&chain, providers);
    // The when-part does not hold (no such attachments): every provider stays.
    assert_eq!(routed(&state, &Request::new().with_method("m")), vec![0, 1]);
}

/// A request tag longer than every tag of the rule and every static tag is none of them,
/// told from the lengths without hashing the tag (a 400 KB tag is never hashed per call);
/// tags as long as the longest still match, dynamic and static alike.
#[test]
fn tags_at_and_past_the_longest_known_length_route_as_before() {
    let long_static = "s".repeat(400_000);
    let long_dynamic = "d".repeat(1_000);
    let static_provider = format!("dubbo://10.0.0.3:20880/s?dubbo.tag={long_static}");
    let providers = snapshot(&[
        "dubbo://10.0.0.1:20880/s",
        "dubbo://10.9.9.9:20880/s",
        static_provider.as_str(),
    ]);
    let state = state(
        &format!(
            "routers:\n  - type: tag\n    rule: {{tags: [{{name: \"{long_dynamic}|x\", addresses: [\"10.9.9.9\"]}}]}}\n"
        ),
        providers,
    );
    let tagged = |tag: String| routed(&state, &Request::new().with_attachment("dubbo.tag", tag));
    // The static tag of 400,000 characters, exactly.
    assert_eq!(tagged(long_static.clone()), vec![2]);
    // One character more: no tag, the failover set (no dynamic, no static tag).
    assert_eq!(tagged(format!("{long_static}s")), vec![0]);
    // The dynamic tag, and a deeper level of it.
    assert_eq!(tagged(format!("{long_dynamic}|x")), vec![1]);
    assert_eq!(tagged(format!("{long_dynamic}|x|y")), vec![1]);
    // Its first level is longer than any the rule knows by one character.
    assert_eq!(tagged(format!("{long_dynamic}d|x")), vec![0]);
    // A 400 KB tag of no `|` matching nothing.
    assert_eq!(tagged("t".repeat(400_000)), vec![0]);
}

/// A trace quotes a tag of 400,000 characters cut: its first 64 characters, `…` and its
/// length, so an explained route of a hostile request stays short.
#[test]
fn a_trace_quotes_a_long_tag_cut() {
    let providers = snapshot(&["dubbo://10.0.0.1:20880/s", "dubbo://10.9.9.9:20880/s"]);
    let state = state(
        "routers:\n  - type: tag\n    rule: {tags: [{name: a, addresses: [\"10.9.9.9\"]}]}\n",
        providers,
    );
    let request = Request::new().with_attachment("dubbo.tag", "t".repeat(400_000));
    let mut trace = routechain_core::Trace::default();
    state
        .route_traced(&request, &mut CallState::seeded(1), &mut trace)
        .unwrap();
    let reason = &trace.steps[0].reason;
    assert_eq!(
        reason,
        &format!(
            "tag {:?}… (400000 bytes): no candidate has the tag; FAILOVER to untagged (in no dynamic tag, no static tag)",
            "t".repeat(64)
        )
    );
    // A short tag is quoted whole.
    let request = Request::new().with_attachment("dubbo.tag", "a");
    let mut trace = routechain_core::Trace::default();
    state
        .route_traced(&request, &mut CallState::seeded(1), &mut trace)
        .unwrap();
    assert_eq!(
        trace.steps[0].reason,
        "tag \"a\": dynamic addresses of tag \"a\""
    );
}
