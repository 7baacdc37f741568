//! The mock router: ports of the semantics of Dubbo's `MockInvokersSelectorTest`.

use routechain_core::ChainEntry;

use super::MockRouter;
use crate::test_support::*;

#[test]
fn mock_selects_by_the_need_mock_attachment() {
    // MockInvokersSelectorTest: two mock providers and one dubbo provider.
    let snap = snapshot(&[
        "mock://127.0.0.1/test",
        "mock://127.0.0.1/test",
        "dubbo://127.0.0.1/test",
    ]);
    let c = consumer("test://127.0.0.1");
    let cases: &[(&str, Option<&str>, &[usize])] = &[
        ("no attachment: normal providers", None, &[2]),
        ("true: mock providers", Some("true"), &[0, 1]),
        ("TRUE (any case): mock providers", Some("TRUE"), &[0, 1]),
        ("false: all", Some("false"), &[0, 1, 2]),
        ("empty: all", Some(""), &[0, 1, 2]),
        ("other: all", Some("yes"), &[0, 1, 2]),
    ];
    for &(name, need, want) in cases {
        let req = match need {
            Some(v) => request(&[("invocation.need.mock", v)]),
            None => request(&[]),
        };
        let entry = ChainEntry::new("mock", -100, build(MockRouter, "mock", None).unwrap());
        assert_eq!(route(&snap, &c, vec![entry], &req), want, "{name}");
    }
}

#[test]
fn mock_without_mock_providers_empties_a_mock_call() {
    let snap = snapshot(&["dubbo://10.0.0.1:1/s", "tri://10.0.0.2:1/s"]);
    let entry = ChainEntry::new("mock", -100, build(MockRouter, "mock", None).unwrap());
    let got = route(
        &snap,
        &consumer("consumer://h/s"),
        vec![entry],
        &request(&[("invocation.need.mock", "true")]),
    );
    assert_eq!(got, Vec::<usize>::new());
}
