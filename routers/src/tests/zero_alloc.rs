//! Routing through the tag, mock and affinity routers allocates nothing per call, on every
//! path (dynamic addresses, hierarchical fallback, static tag, failover, forced empty).

use std::sync::Arc;

use crate::affinity::AffinityRouter;
use crate::mock::MockRouter;
use crate::tag::TagRouter;
use crate::test_support::build;
use routechain_core::{CallState, ChainEntry, ChainState, Request, Snapshot, Url};

const TAG_RULE: &str = "\
configVersion: v3.0
tags:
  - name: gray
    addresses: [\"10.0.1.*\", \"10.0.2.0/24\"]
  - name: beta|team1
    match:
      - key: env
        value: {regex: \"be.a\"}
";

const AFFINITY_RULE: &str = "configVersion: v3.1\naffinityAware: {key: zone, ratio: 10}\n";

#[test]
fn tag_mock_and_affinity_route_without_allocating() {
    let text: String = (0..1000)
        .map(|i| {
            let tag = if i % 10 == 0 { "&dubbo.tag=blue" } else { "" };
            let env = if i % 7 == 0 { "&env=beta" } else { "" };
            format!(
                "dubbo://10.0.{}.{}:20880/svc?zone=z{}{tag}{env}\n",
                i / 250,
                i % 250,
                i % 3
            )
        })
        .collect();
    let snapshot = Arc::new(Snapshot::parse_lines(1, &text).unwrap());
    let tag = build(TagRouter, "tag", Some(TAG_RULE)).unwrap();
    let affinity = build(AffinityRouter, "affinity", Some(AFFINITY_RULE)).unwrap();
    let state = ChainState::new(
        None,
        snapshot,
        Url::parse("consumer://10.9.9.9/svc?zone=z1").unwrap(),
        vec![
            ChainEntry::new("mock", -100, build(MockRouter, "mock", None).unwrap()),
            ChainEntry::new("tag", 100, tag),
            ChainEntry::new("affinity", 130, affinity),
        ],
    )
    .unwrap();
    let requests = [
        Request::new(),
        Request::new().with_attachment("dubbo.tag", "gray"),
        Request::new().with_attachment("dubbo.tag", "beta|team1|x"),
        Request::new().with_attachment("dubbo.tag", "blue"),
        Request::new().with_attachment("dubbo.tag", "red"),
        Request::new()
            .with_attachment("dubbo.tag", "red")
            .with_attachment("dubbo.force.tag", "true"),
        Request::new().with_attachment("invocation.need.mock", "false"),
    ];
    let mut call = CallState::seeded(9);
    let mut outcomes = Vec::new();
    for r in &requests {
        outcomes.push(state.route(r, &mut call).map(|()| call.candidates.count()));
    }
    let info = allocation_counter::measure(|| {
        for _ in 0..200 {
            for r in &requests {
                let _ = state.route(r, &mut call);
            }
        }
    });
    assert_eq!(info.count_total, 0, "{info:?}");
    // The paths taken really differ (so every branch above was exercised).
    assert!(outcomes[5].is_err(), "forced unknown tag is empty");
    let counts: Vec<usize> = outcomes.iter().filter_map(|o| o.clone().ok()).collect();
    assert!(counts.iter().all(|&c| c > 0));
    assert!(counts.windows(2).any(|w| w[0] != w[1]));
}
