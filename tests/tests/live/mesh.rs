//! The mesh router live from a real ZooKeeper: `<app>.MESHAPPRULE` under the providers'
//! application is read as Dubbo stores it (a stream of YAML documents), pushed, changed, a
//! broken text refused with its line and column while the previous rule keeps serving, an
//! empty text and a deleted node clearing the rule; with `app:` the entry follows that
//! application's node.

use routechain::core::Request;
use routechain::live::{Report, ZkConfig, ZkSource, encode_component};

use super::support::zookeeper::ZooKeeper;
use super::zk::Raw;
use super::{live, wait_report, wait_route, wait_route_for, watch};

const SERVICE: &str = "com.acme.DetailService";

fn register(raw: &Raw, url: &str) {
    raw.put(
        &format!("/dubbo/{SERVICE}/providers/{}", encode_component(url)),
        "",
    );
}

/// The rule text: subset `v1`/`v2` by version, gray-laned calls to `v2`, the rest to `to`.
fn rule(to: &str) -> String {
    format!(
        "apiVersion: service.dubbo.apache.org/v1alpha1\n\
         kind: DestinationRule\n\
         metadata: {{ name: shop }}\n\
         spec:\n\
         \x20 subsets:\n\
         \x20   - {{ name: v1, labels: {{ ver: v1 }} }}\n\
         \x20   - {{ name: v2, labels: {{ ver: v2 }} }}\n\
         ---\n\
         apiVersion: service.dubbo.apache.org/v1alpha1\n\
         kind: VirtualService\n\
         metadata: {{ name: shop }}\n\
         spec:\n\
         \x20 dubbo:\n\
         \x20   - routedetail:\n\
         \x20       - name: gray\n\
         \x20         match: [{{ attachments: {{ dubboContext: {{ lane: {{ exact: gray }} }} }} }}]\n\
         \x20         route: [{{ destination: {{ subset: v2 }} }}]\n\
         \x20       - name: rest\n\
         \x20         route: [{{ destination: {{ subset: {to} }} }}]\n"
    )
}

const ALL: [&str; 3] = ["10.0.7.1:20880", "10.0.7.2:20880", "10.0.7.3:20880"];

#[test]
fn a_meshapprule_node_is_pushed_changed_refused_cleared_and_deleted() {
    let zk = ZooKeeper::start("mesh");
    let raw = Raw::connect(&zk.address());
    for (n, version) in [(1, "v1"), (2, "v1"), (3, "v2")] {
        register(
            &raw,
            &format!(
                "dubbo://10.0.7.{n}:20880/{SERVICE}?side=provider&application=shop&ver={version}"
            ),
        );
    }
    let node = "/dubbo/config/dubbo/shop.MESHAPPRULE";
    let live = live(&format!("service: {SERVICE}\nrouters:\n  - type: mesh\n"));
    let config = ZkConfig::for_chain(&live, zk.address());
    let (_watching, rx) = watch(&live, Box::new(ZkSource::new(config)));
    wait_route(&live, &ALL);
    let gray = Request::new().with_attachment("lane", "gray");

    // Pushed: the rule applies.
    raw.put(node, &rule("v1"));
    wait_route(&live, &["10.0.7.1:20880", "10.0.7.2:20880"]);
    wait_route_for(&live, &gray, &["10.0.7.3:20880"]);

    // Changed.
    raw.put(node, &rule("v2"));
    wait_route(&live, &["10.0.7.3:20880"]);

    // A broken text is refused, located; the previous rule keeps serving.
    raw.put(
        node,
        "kind: VirtualService\nmetadata: { name: shop\nspec: {}\n",
    );
    let refused = wait_report(
        &rx,
        "the broken mesh rule refused",
        |r| matches!(r, Report::Refused { change, .. } if change.contains("MESHAPPRULE")),
    );
    let Report::Refused { reason, .. } = refused else {
        unreachable!()
    };
    assert!(reason.contains("shop.MESHAPPRULE:"), "{reason}");
    // A rule with an error in a field: refused with its line and field path.
    raw.put(node, &rule("v1").replace("exact: gray", "exact: [gray]"));
    let refused = wait_report(
        &rx,
        "the invalid mesh rule refused",
        |r| matches!(r, Report::Refused { reason, .. } if reason.contains("dubboContext.lane.exact")),
    );
    let Report::Refused { reason, .. } = refused else {
        unreachable!()
    };
    assert!(reason.contains(":16:"), "located on line 16: {reason}");
    wait_route(&live, &["10.0.7.3:20880"]);

    // An empty text clears the rule.
    raw.put(node, "");
    wait_route(&live, &ALL);

    // Back, then deleted: cleared again.
    raw.put(node, &rule("v1"));
    wait_route(&live, &["10.0.7.1:20880", "10.0.7.2:20880"]);
    raw.delete(node);
    wait_route(&live, &ALL);
}

#[test]
fn an_entry_with_app_follows_that_applications_node() {
    let zk = ZooKeeper::start("mesh-app");
    let raw = Raw::connect(&zk.address());
    for (n, version) in [(1, "v1"), (2, "v1"), (3, "v2")] {
        register(
            &raw,
            &format!(
                "dubbo://10.0.7.{n}:20880/{SERVICE}?side=provider&application=shop&ver={version}"
            ),
        );
    }
    // The providers' own application's node is not this entry's.
    raw.put("/dubbo/config/dubbo/shop.MESHAPPRULE", &rule("v2"));
    raw.put("/dubbo/config/dubbo/catalog.MESHAPPRULE", &rule("v1"));
    let live = live(&format!(
        "service: {SERVICE}\nrouters:\n  - type: mesh\n    app: catalog\n"
    ));
    let config = ZkConfig::for_chain(&live, zk.address());
    let (_watching, _rx) = watch(&live, Box::new(ZkSource::new(config)));
    // catalog has no provider here: the rule governs nothing, every call passes.
    wait_route(&live, &ALL);
    assert!(
        live.subscriptions()
            .iter()
            .any(|k| k.to_string() == "catalog.MESHAPPRULE"),
        "{:?}",
        live.subscriptions()
    );
}
