//! Routing through the mesh router allocates nothing per call: route and detail selection
//! (method name, argument count and types, string/number/boolean arguments, sourceLabels,
//! dubboContext and tracingContext attachments, services against another interface), the
//! weighted draw, fallbacks and later destinations, the union of several applications (the
//! scratch set), empty protection and `empty: fail`, sticky draws with `hash_key`.

use std::sync::Arc;

use crate::builtin_registry;
use routechain_core::{CallState, Chain, ChainState, Request, Snapshot, Url};
use routechain_rules::ChainFile;
use serde_json::json;

const RULE: &str = r#"
kind: DestinationRule
metadata: { name: dr }
spec:
  subsets:
    - { name: a, labels: { ver: a } }
    - { name: b, labels: { ver: b } }
    - { name: c, labels: { ver: c } }
    - { name: none, labels: { ver: none } }
---
kind: VirtualService
metadata: { name: vs }
spec:
  dubbo:
    - services: [{ exact: com.foo.Other }]
      routedetail:
        - name: other
          match: [{ method: { name_match: { regex: "get.*" } } }]
          route: [{ destination: { subset: c } }]
    - routedetail:
        - name: args
          match:
            - method:
                name_match: { prefix: get }
                argc: 2
                argp: [{ exact: String }, { regex: "long|int" }]
                args:
                  - { index: 0, str_value: { oneof: [{ prefix: vip- }] } }
                  - { index: 1, num_value: { oneof: [{ range: { start: 100.0 } }, { mod: 2.0, exact: 1.0 }] } }
          route:
            - { weight: 3, destination: { subset: none, fallback: { destination: { subset: b } } } }
            - { weight: 1, destination: { subset: a } }
        - name: flag
          match: [{ method: { args: [{ index: 0, bool_value: { exact: true } }] } }]
          route: [{ destination: { subset: b } }]
        - name: callers
          match: [{ sourceLabels: { lane: gray } }]
          route: [{ destination: { subset: c } }]
        - name: traced
          match: [{ attachments: { tracingContext: { user: { regex: "test-.*" } } } }]
          route: [{ destination: { subset: none } }]
        - name: lane
          match: [{ attachments: { dubboContext: { lane: { exact: gray }, tenant: { noempty: x } } } }]
          route: [{ destination: { subset: b, fallback: { subset: c } } }]
        - name: default
          route:
            - { weight: 5, destination: { subset: a } }
            - { weight: 5, destination: { subset: b } }
            - { weight: 0, destination: { subset: c } }
"#;

fn chain(empty: &str, sticky: bool) -> Chain {
    let dir = std::env::temp_dir().join(format!(
        "mesh-zero-alloc-{}-{empty}-{sticky}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("app.MESHAPPRULE"), RULE).unwrap();
    let hash_key = if sticky {
        "    hash_key: [\"attachments[uid]\", \"consumer.host\"]\n"
    } else {
        ""
    };
    let chain = format!(
        "service: com.foo.Bar\nrouters:\n  - type: mesh\n    rule_file: app.MESHAPPRULE\n    tracing_prefix: \"trace.\"\n    empty: {empty}\n{hash_key}"
    );
    std::fs::write(dir.join("c.chain.yaml"), chain).unwrap();
    let file = ChainFile::load(&dir.join("c.chain.yaml")).unwrap();
    let entries = file.compile(&builtin_registry()).unwrap();
    // 3,000 providers of three applications (each gets the rule), some of none.
    let text: String = (0..3000)
        .map(|i| {
            let app = match i % 4 {
                0 => "application=app1&".to_string(),
                1 => "application=app2&".to_string(),
                2 => "remote.application=app3&".to_string(),
                _ => String::new(),
            };
            format!(
                "dubbo://10.0.{}.{}:20880/com.foo.Bar?{app}ver={}\n",
                i / 250,
                i % 250,
                ["a", "b", "c"][i % 3]
            )
        })
        .collect();
    let snapshot = Arc::new(Snapshot::parse_lines(1, &text).unwrap());
    let _ = std::fs::remove_dir_all(&dir);
    Chain::new(
        ChainState::new(Some("com.foo.Bar".into()), snapshot, Url::empty(), entries).unwrap(),
    )
}

fn requests() -> Vec<Request> {
    let gray = Url::parse("consumer://10.9.9.9/com.foo.Bar?application=web&lane=gray").unwrap();
    vec![
        Request::new()
            .with_method("getOrder")
            .with_argument(json!("vip-1"))
            .with_argument(json!("101"))
            .with_parameter_type("java.lang.String")
            .with_parameter_type("long"),
        Request::new()
            .with_method("setFlag")
            .with_argument(json!(true)),
        Request::new().with_method("list").with_consumer(gray),
        Request::new()
            .with_method("list")
            .with_attachment("trace.user", "test-1"),
        Request::new()
            .with_method("list")
            .with_attachment("lane", "gray")
            .with_attachment("tenant", "t"),
        Request::new().with_method("list"),
        Request::new()
            .with_method("list")
            .with_attachment("uid", "u-17"),
        Request::new()
            .with_service("com.foo.Other")
            .with_method("getX"),
        Request::new()
            .with_service("com.foo.Other")
            .with_method("put"),
        Request::new()
            .with_method("$invoke")
            .with_argument(json!("getOrder"))
            .with_argument(json!(["java.lang.String"]))
            .with_argument(json!([1])),
    ]
}

#[test]
fn mesh_routing_allocates_nothing() {
    // `hash_key` (sticky draws: the request's stable hash) allocates nothing either.
    for (empty, sticky) in [("protect", false), ("fail", false), ("protect", true)] {
        let chain = chain(empty, sticky);
        let requests = requests();
        let mut call = CallState::seeded(3);
        for r in &requests {
            let _ = chain.load().route(r, &mut call); // grows the buffers
        }
        let mut ok = 0;
        let info = allocation_counter::measure(|| {
            for i in 0..3_000 {
                if chain
                    .load()
                    .route(&requests[i % requests.len()], &mut call)
                    .is_ok()
                {
                    ok += 1;
                }
            }
        });
        assert_eq!(
            info.count_total, 0,
            "allocations while routing ({empty}): {info:?}"
        );
        assert!(ok > 2_000, "{empty}: routed {ok}");
    }
}
