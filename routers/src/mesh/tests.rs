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
fn an_application_whose_last_provider_left_drops_out_and_a_new_one_joins() {
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
    let app3 = Url::parse("dubbo://10.0.0.4:20880/svc?application=app3&ver=b").unwrap();
    let (next, _) = snapshot.edited(2, vec![0, 2], vec![app3]);
    let after = PreparedMesh::build(&rule, &next, None);
    assert_eq!(after.applications().collect::<Vec<_>>(), ["app2", "app3"]);
    assert_eq!(after.subset_members("app2", Some("b")), Some(vec![0]));
    assert_eq!(after.subset_members("app2", Some("a")), Some(vec![]));
    assert_eq!(after.subset_members("app3", Some("b")), Some(vec![1]));
}

/// A rule read from the document's tree (each route detail built when it is read) and from
/// its `serde_json::Value` (read whole) gives the same rule, errors and warnings, each at
/// the same path: for a list of documents and for one document.
#[test]
fn route_details_built_one_at_a_time_read_as_the_whole_value() {
    let both = |yaml: &str| {
        let doc = YamlDoc::parse("r", yaml).unwrap();
        let entry = Value::Null;
        let ep = FieldPath::root().key("routers").index(0);
        let root = FieldPath::root();
        let value = doc.value_at(&root).unwrap();
        let checked = |rule| {
            let c = check(&RouterSpec {
                type_name: "mesh",
                entry: routechain_core::RuleDoc::new(&entry, &ep),
                rule: Some(rule),
                base_dir: None,
                service: None,
            });
            let errors = c.result.as_ref().err().cloned().unwrap_or_default();
            let rule = c.result.ok().map(|r| format!("{:?}", r.rules));
            (rule, errors, c.warnings)
        };
        let tree = checked(doc.rule_doc(&root).unwrap());
        let whole = checked(routechain_core::RuleDoc::new(&value, &root));
        assert_eq!(tree, whole);
        tree
    };
    let detail = "        - name: typo\n          match: [{ method: { nameMatch: { exact: a } } }]\n          \
                  route: [{ destination: { subset: a } }]\n";
    let list = format!(
        "- kind: DestinationRule\n  metadata: {{ name: app1 }}\n  spec:\n    subsets: [{{ name: a, \
         labels: {{ ver: a }} }}]\n- kind: VirtualService\n  metadata: {{ name: app1 }}\n  spec:\n    \
         dubbo:\n      - routedetail:\n{detail}        - name: bad\n          route: 3\n"
    );
    let (rule, errors, warnings) = both(&list);
    assert!(rule.is_none());
    assert_eq!(
        errors[0].path.to_string(),
        "[1].spec.dubbo[0].routedetail[1].route"
    );
    assert!(
        warnings.iter().any(|w| w
            .path
            .to_string()
            .starts_with("[1].spec.dubbo[0].routedetail[0].match")),
        "{warnings:?}"
    );
    // One document (a VirtualService alone is no standard rule; read alike all the same).
    let one = format!(
        "kind: VirtualService\nmetadata: {{ name: app1 }}\nspec:\n  dubbo:\n    - routedetail:\n{detail}"
    );
    both(&one);
}

/// A route without `services` takes every service, and a detail without `match` every
/// call: each later one is unreachable and warned about at its own path, naming the first.
#[test]
fn entries_after_a_catch_all_are_warned_unreachable() {
    let yaml = "kind: DestinationRule\nmetadata: { name: app1 }\nspec:\n  subsets: [{ name: a, labels: { ver: a } }]\n\
                ---\nkind: VirtualService\nmetadata: { name: app1 }\nspec:\n  dubbo:\n    \
                - services: [{ exact: s }]\n      routedetail:\n        \
                - match: [{ method: { name_match: { exact: m } } }]\n          route: [{ destination: { subset: a } }]\n        \
                - route: [{ destination: { subset: a } }]\n        \
                - route: [{ destination: { subset: a } }]\n        \
                - route: [{ destination: { subset: a } }]\n    \
                - routedetail: [{ route: [{ destination: { subset: a } }] }]\n    \
                - routedetail: [{ route: [{ destination: { subset: a } }] }]\n";
    let doc = YamlDoc::parse_stream("r", yaml).unwrap();
    let checked = read_text(&doc, None);
    assert!(checked.result.is_ok(), "{:?}", checked.result);
    let unreachable: Vec<(String, String)> = checked
        .warnings
        .iter()
        .filter(|w| w.message.starts_with("unreachable"))
        .map(|w| (w.path.to_string(), w.message.clone()))
        .collect();
    let detail = "unreachable: routedetail[1] has no `match` and takes every call first";
    let route = "unreachable: dubbo[1] has no `services` and takes every service first";
    assert_eq!(
        unreachable,
        [
            (
                "[1].spec.dubbo[0].routedetail[2]".to_string(),
                detail.to_string()
            ),
            (
                "[1].spec.dubbo[0].routedetail[3]".to_string(),
                detail.to_string()
            ),
            ("[1].spec.dubbo[2]".to_string(), route.to_string()),
        ]
    );
}
