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

/// The provider node of `url`.
fn provider_path(url: &str) -> String {
    format!("/dubbo/{SERVICE}/providers/{}", encode_component(url))
}

/// A mesh entry without `app` follows the `<app>.MESHAPPRULE` node of every provider
/// application present: an application's node is read when its first provider appears,
/// pushed, changed, deleted and refused there like any rule node, and no longer watched
/// once its last provider leaves (read afresh when it comes back).
#[test]
fn each_provider_application_is_followed_from_its_first_provider_to_its_last() {
    let zk = ZooKeeper::start("mesh-each");
    let raw = Raw::connect(&zk.address());
    for (n, version) in [(1, "v1"), (2, "v1"), (3, "v2")] {
        register(
            &raw,
            &format!(
                "dubbo://10.0.7.{n}:20880/{SERVICE}?side=provider&application=shop&ver={version}"
            ),
        );
    }
    let shop_node = "/dubbo/config/dubbo/shop.MESHAPPRULE";
    let catalog_node = "/dubbo/config/dubbo/catalog.MESHAPPRULE";
    raw.put(shop_node, &rule("v1"));
    // catalog's rule exists before any catalog provider does.
    raw.put(catalog_node, &rule("v2"));
    let live = live(&format!("service: {SERVICE}\nrouters:\n  - type: mesh\n"));
    assert_eq!(live.each_provider_app_kinds(), ["mesh"]);
    let config = ZkConfig::for_chain(&live, zk.address());
    assert_eq!(config.following.each_app_kinds, ["mesh"]);
    let (_watching, rx) = watch(&live, Box::new(ZkSource::new(config)));
    // shop's rule governs shop's providers.
    wait_route(&live, &["10.0.7.1:20880", "10.0.7.2:20880"]);
    assert_eq!(live.provider_applications(), ["shop"]);

    // catalog's first provider appears: its node is read and watched, and its rule governs
    // its providers (the result is the union over the applications).
    let catalog = [
        "dubbo://10.0.8.1:20880/com.acme.DetailService?side=provider&application=catalog&ver=v1",
        "dubbo://10.0.8.2:20880/com.acme.DetailService?side=provider&application=catalog&ver=v2",
    ];
    for url in catalog {
        register(&raw, url);
    }
    wait_report(&rx, "catalog's node watched", |r| {
        matches!(r, Report::Status { message, .. }
            if message.contains("application catalog has providers: watching /dubbo/config/dubbo/catalog.MESHAPPRULE"))
    });
    wait_route(
        &live,
        &["10.0.7.1:20880", "10.0.7.2:20880", "10.0.8.2:20880"],
    );
    assert_eq!(live.provider_applications(), ["catalog", "shop"]);

    // Changed.
    raw.put(catalog_node, &rule("v1"));
    wait_route(
        &live,
        &["10.0.7.1:20880", "10.0.7.2:20880", "10.0.8.1:20880"],
    );

    // A bad text is refused, located in catalog's node; the previous rule keeps serving.
    raw.put(
        catalog_node,
        &rule("v2").replace("exact: gray", "exact: [gray]"),
    );
    let refused = wait_report(
        &rx,
        "catalog's invalid rule refused",
        |r| matches!(r, Report::Refused { change, .. } if change.contains("catalog.MESHAPPRULE")),
    );
    let Report::Refused { reason, .. } = refused else {
        unreachable!()
    };
    assert!(reason.contains("catalog.MESHAPPRULE:16:"), "{reason}");
    wait_route(
        &live,
        &["10.0.7.1:20880", "10.0.7.2:20880", "10.0.8.1:20880"],
    );
    // shop's rule is untouched by catalog's refusal, and changes on its own.
    raw.put(shop_node, &rule("v2"));
    wait_route(&live, &["10.0.7.3:20880", "10.0.8.1:20880"]);

    // Deleted: catalog has no rule, so only shop's selection remains.
    raw.delete(catalog_node);
    wait_route(&live, &["10.0.7.3:20880"]);
    // Pushed again.
    raw.put(catalog_node, &rule("v2"));
    wait_route(&live, &["10.0.7.3:20880", "10.0.8.2:20880"]);

    // catalog's last provider leaves: its node is no longer watched.
    for url in catalog {
        raw.delete(&provider_path(url));
    }
    wait_report(&rx, "catalog's node unwatched", |r| {
        matches!(r, Report::Status { message, .. }
            if message.contains("application catalog has no provider left: no longer watching /dubbo/config/dubbo/catalog.MESHAPPRULE"))
    });
    wait_route(&live, &["10.0.7.3:20880"]);
    assert_eq!(live.provider_applications(), ["shop"]);
    // A change while unwatched is not followed (no report names the node) ...
    raw.put(
        catalog_node,
        "kind: VirtualService\nmetadata: { name: shop\n",
    );
    raw.put(catalog_node, &rule("v1"));
    // ... but read afresh when catalog's providers come back.
    for url in catalog {
        register(&raw, url);
    }
    wait_route(&live, &["10.0.7.3:20880", "10.0.8.1:20880"]);
    while let Ok(r) = rx.try_recv() {
        assert!(
            !matches!(&r, Report::Refused { change, .. } if change.contains("catalog")),
            "the broken text written while unwatched was never read: {r}"
        );
    }
}
