//! The application counts against a count afresh: in a vector or a map, after providers
//! come and go.

use routechain_core::Url;

use super::{AppCounts, Counts};

#[test]
fn the_providers_application_is_the_most_common_one_alphabetically_first_on_a_tie() {
    let url =
        |app: &str| Url::parse(&format!("dubbo://10.0.0.1:20880/svc?application={app}")).unwrap();
    let (a, b) = (url("orders"), url("billing"));
    let mut counts = AppCounts::of([&a, &a, &b]);
    assert_eq!(counts.application().as_deref(), Some("orders"));
    counts.remove(&a);
    assert_eq!(counts.application().as_deref(), Some("billing"), "a tie");
    counts.remove(&a);
    assert_eq!(counts.application().as_deref(), Some("billing"));
    counts.remove(&b);
    assert_eq!(counts.application(), None);
    assert!(counts.applications().is_empty());
}

#[test]
fn many_applications_are_counted_alike_in_a_vector_or_a_map() {
    let url = |app: &str| {
        Url::parse(&format!(
            "dubbo://10.0.0.1:20880/svc?application={app}&remote.application=r{app}"
        ))
        .unwrap()
    };
    // 12 applications (more than a vector keeps), `a05` twice.
    let mut all: Vec<Url> = (0..12).rev().map(|i| url(&format!("a{i:02}"))).collect();
    all.push(url("a05"));
    let mut counts = AppCounts::of(all.iter());
    assert!(matches!(counts.app, Counts::Large(_)));
    assert_eq!(counts.application().as_deref(), Some("a05"));
    assert_eq!(counts.applications().len(), 12);
    assert_eq!(
        counts.applications().first().map(String::as_str),
        Some("ra00")
    );
    // Down to three: equal to the same providers counted afresh (in a vector).
    for p in all.drain(..10) {
        counts.remove(&p);
    }
    let fresh = AppCounts::of(all.iter());
    assert!(matches!(fresh.app, Counts::Small(_)));
    assert_eq!(counts, fresh);
    assert_eq!(
        counts.application().as_deref(),
        Some("a00"),
        "a tie: the first"
    );
    let names: Vec<String> = counts.applications().into_iter().collect();
    assert_eq!(names, ["ra00", "ra01", "ra05"]);
}
