//! The tag router on expensive inputs at sizes where super-linear code could not finish (a
//! request tag of a million `|`: ~5·10¹¹ bytes hashed), checked for their answers. These
//! tests time nothing (speed is measured in `benches/hostile.rs`); super-linear code would
//! never end them, and CI's time limit would fail them.

use routechain_core::{CallState, Request};

use crate::test_support::*;

/// A hierarchical request tag `a|||…` (a million `|`) routes to the deepest of its
/// `|`-prefixes that is a tag, `a`, in one pass over the tag.
#[test]
fn a_request_tag_of_a_million_pipes_routes_to_its_deepest_tag() {
    let providers = snapshot(&[
        "dubbo://10.0.0.1:20880/s",
        "dubbo://10.9.9.9:20880/s",
        "dubbo://10.0.0.3:20880/s?dubbo.tag=b",
    ]);
    let state = chain_state(
        "routers:\n  - type: tag\n    rule: {force: true, tags: [{name: a, addresses: [\"10.9.9.9\"]}]}\n",
        providers,
    );
    let tag = format!("a{}", "|".repeat(1_000_000));
    let request = Request::new().with_attachment("dubbo.tag", tag);
    assert_eq!(route_state(&state, &request), vec![1]);
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
    let state = chain_state(
        &format!(
            "routers:\n  - type: tag\n    rule: {{tags: [{{name: \"{long_dynamic}|x\", addresses: [\"10.9.9.9\"]}}]}}\n"
        ),
        providers,
    );
    let tagged =
        |tag: String| route_state(&state, &Request::new().with_attachment("dubbo.tag", tag));
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
    let state = chain_state(
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
