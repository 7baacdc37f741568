//! Routing through condition rules allocates nothing per call: v3.0 when-parts reading the
//! method, arguments and attachments, `$name` then-parts for the prepared consumer and for
//! another consumer (the per-call `ValueIndex` path, including a consumer whose values are
//! globs, decided per distinct value, and a term with more `=` patterns than are combined
//! on the stack), and v3.1 weighted destinations.

use std::sync::Arc;

use crate::condition::ConditionRouter;
use routechain_core::{CallState, ChainEntry, ChainState, Request, Router, Snapshot, Url};
use serde_json::json;

fn router(doc: serde_json::Value) -> Arc<dyn Router> {
    // JSON is YAML.
    crate::test_support::build(ConditionRouter, "condition", Some(&doc.to_string())).unwrap()
}

#[test]
fn condition_routing_allocates_nothing() {
    let text: String = (0..1000)
        .map(|i| {
            format!(
                "dubbo://10.0.{}.{}:20880/svc?region={}&env={}&group=g{}\n",
                i / 250,
                i % 250,
                ["hz", "bj", "sh"][i % 3],
                ["gray", "normal"][i % 2],
                i % 5
            )
        })
        .collect();
    let snapshot = Arc::new(Snapshot::parse_lines(1, &text).unwrap());
    let consumer =
        Url::parse("consumer://10.9.9.9/svc?application=web&region=hz&env=gray").unwrap();
    let v30 = router(json!({
        "conditions": [
            "method = get* & arguments[0] = 1~100 => region = $region",
            "attachments[dubbo.tag] = canary => env = gray",
            "application = web => group != g4",
            "method = get* => group = g0,g1,g2,g3,q1,q2,q3,q4,q5,$group & region != $zone",
        ]
    }));
    let v31 = router(json!({
        "configVersion": "v3.1",
        "conditions": [
            {"from": {"match": "env=gray"}, "to": [
                {"match": "env=$env", "weight": 900},
                {"match": "env!=$env", "weight": 100},
            ]},
        ]
    }));
    let chain = ChainState::new(
        None,
        snapshot,
        consumer,
        vec![
            ChainEntry::new("condition", 140, v30),
            ChainEntry::new("condition", 150, v31),
        ],
    )
    .unwrap();
    let other = Url::parse("consumer://10.8.8.8/svc?application=web&region=bj&env=gray").unwrap();
    // Every `$name` of this consumer is a glob.
    let globs =
        Url::parse("consumer://10.7.7.7/svc?application=web&region=*z&env=g*&group=g*&zone=s*")
            .unwrap();
    let requests = [
        Request::new()
            .with_method("getFoo")
            .with_argument(json!(42))
            .with_attachment("dubbo.tag", "canary"),
        Request::new()
            .with_method("getFoo")
            .with_argument(json!("7")),
        Request::new()
            .with_method("getFoo")
            .with_argument(json!(42))
            .with_consumer(other),
        Request::new()
            .with_method("getFoo")
            .with_argument(json!(42))
            .with_consumer(globs),
    ];
    let mut call = CallState::seeded(3);
    for r in &requests {
        chain.route(r, &mut call).unwrap(); // grows the buffers
    }
    let mut routed = 0;
    let info = allocation_counter::measure(|| {
        for i in 0..4000 {
            if chain
                .route(&requests[i % requests.len()], &mut call)
                .is_ok()
            {
                routed += call.candidates.count();
            }
        }
    });
    assert_eq!(info.count_total, 0, "{info:?}");
    assert!(routed > 0);
}
