//! Unit tests of the mesh router: building from a chain entry and routing one call.

use routechain_core::{BitSet, Request, RouteContext, Snapshot, Url};

use super::*;

const RULE: &str = "\
kind: DestinationRule
metadata: { name: app1 }
spec:
  subsets:
    - { name: a, labels: { ver: a } }
    - { name: b, labels: { ver: b } }
---
kind: VirtualService
metadata: { name: app1 }
spec:
  dubbo:
    - routedetail:
        - name: gray
          match: [{ attachments: { dubboContext: { lane: { exact: gray } } } }]
          route: [{ destination: { subset: b } }]
        - name: rest
          route: [{ destination: { subset: a } }]
";

fn build(rule: &str) -> MeshRule {
    let doc = YamlDoc::parse_stream("r", rule).unwrap();
    let entry = Value::Null;
    let ep = FieldPath::root().key("routers").index(0);
    let root = FieldPath::root();
    let spec = RouterSpec {
        type_name: "mesh",
        entry: routechain_core::RuleDoc::new(&entry, &ep),
        rule: doc.rule_doc(&root),
        base_dir: None,
        service: None,
    };
    check(&spec).result.unwrap()
}

fn route(rule: &MeshRule, snapshot: &Snapshot, request: &Request) -> (Vec<usize>, String) {
    let prepared = MeshRouter::prepare(
        &Arc::new(rule.clone()),
        &PrepareContext {
            snapshot,
            consumer: &Url::empty(),
            service: None,
        },
    )
    .unwrap();
    let mut candidates = BitSet::full(snapshot.len());
    let mut builder = RouteContext::builder(request, snapshot).explain(true);
    MeshRouter::route(&prepared, &mut builder.context(), &mut candidates);
    (candidates.iter().collect(), builder.reason().to_string())
}

#[test]
fn routes_by_attachment_and_explains() {
    let snapshot = Snapshot::parse_lines(
        1,
        "dubbo://10.0.0.1:1/s?application=app1&ver=a\n\
         dubbo://10.0.0.2:1/s?application=app1&ver=b\n\
         dubbo://10.0.0.3:1/s?application=other&ver=b\n",
    )
    .unwrap();
    let router = build(RULE);
    let (set, why) = route(
        &router,
        &snapshot,
        &Request::new().with_attachment("lane", "gray"),
    );
    // A static rule without `app` is every application's: app1's and other's subset b.
    assert_eq!(set, vec![1, 2]);
    assert!(
        why.contains("app app1") && why.contains("\"gray\"") && why.contains("subset \"b\""),
        "{why}"
    );
    let (set, _) = route(&router, &snapshot, &Request::new());
    assert_eq!(set, vec![0]);
    let mut with_app = build(RULE);
    with_app.options.app = Some("app1".into());
    let (set, _) = route(
        &with_app,
        &snapshot,
        &Request::new().with_attachment("lane", "gray"),
    );
    assert_eq!(set, vec![1]);
}

#[test]
fn application_and_interface() {
    let u = |s: &str| Url::parse(s).unwrap();
    assert_eq!(
        application_of(&u("dubbo://h:1/s?application=a&remote.application=b")),
        Some("b")
    );
    assert_eq!(
        application_of(&u("dubbo://h:1/s?application=a&remote.application=")),
        Some("a")
    );
    assert_eq!(
        application_of(&u("dubbo://h:1/s?application=unknown")),
        None
    );
    assert_eq!(application_of(&u("dubbo://h:1/s")), None);
    assert_eq!(interface_of("g/com.foo.Bar:1.0"), "com.foo.Bar");
    assert_eq!(interface_of("com.foo.Bar:1.0.0:"), "com.foo.Bar");
    assert_eq!(interface_of("com.foo.Bar"), "com.foo.Bar");
}

#[test]
fn an_edit_drops_an_application_whose_last_provider_leaves_and_adds_a_new_one() {
    let rule = build(RULE);
    let snapshot = Snapshot::parse_lines(
        1,
        "dubbo://10.0.0.1:20880/svc?application=app1&ver=a\n\
         dubbo://10.0.0.2:20880/svc?application=app2&ver=b\n\
         dubbo://10.0.0.3:20880/svc?application=app2&ver=a\n",
    )
    .unwrap();
    let before = PreparedMesh::build(&rule, &snapshot, None);
    assert_eq!(before.applications().collect::<Vec<_>>(), ["app1", "app2"]);
    // app1's only provider leaves; app3 arrives; app2 keeps one provider.
    let app3 = Arc::new(Url::parse("dubbo://10.0.0.4:20880/svc?application=app3&ver=b").unwrap());
    let (next, edit) = snapshot.edited(2, vec![0, 2], vec![app3]);
    let edited = before.edited(&rule, &edit, &next);
    let fresh = PreparedMesh::build(&rule, &next, None);
    assert_eq!(edited.applications().collect::<Vec<_>>(), ["app2", "app3"]);
    assert_eq!(
        edited.applications().collect::<Vec<_>>(),
        fresh.applications().collect::<Vec<_>>()
    );
    for app in ["app2", "app3"] {
        for subset in ["a", "b"] {
            assert_eq!(
                edited.subset_members(app, Some(subset)),
                fresh.subset_members(app, Some(subset)),
                "{app} {subset}"
            );
        }
    }
    assert_eq!(edited.subset_members("app3", Some("b")), Some(vec![1]));
}
