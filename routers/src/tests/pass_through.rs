//! Routers without a rule (or with a disabled one) pass every provider and say so in the
//! same words: condition, affinity and idc-weight.

use crate::builtin_registry;
use crate::test_support::*;
use routechain_core::{
    CallState, ChainEntry, ChainState, Evaluation, FieldPath, Request, RouterSpec, RuleDoc, Trace,
};

#[test]
fn no_rule_or_a_disabled_rule_passes_every_provider() {
    let snap = snapshot(&[
        "dubbo://10.0.0.1:1/s?region=a&idc=x&degraded=true",
        "dubbo://10.0.0.2:1/s?region=b&idc=y",
        "dubbo://10.0.0.3:1/s",
    ]);
    let registry = builtin_registry();
    let root = FieldPath::root();
    let entry = serde_json::json!({});
    let cases: [(&str, Option<serde_json::Value>, &str); 5] = [
        (
            "condition",
            None,
            "no condition rule: every provider passes",
        ),
        (
            "condition",
            Some(serde_json::json!({"enabled": false, "conditions": ["=> region = b"]})),
            "condition rule disabled: every provider passes",
        ),
        ("affinity", None, "no affinity rule: every provider passes"),
        (
            "affinity",
            Some(
                serde_json::json!({"configVersion": "v3.1", "enabled": false,
                                    "affinityAware": {"key": "region", "ratio": 0}}),
            ),
            "no enabled affinity rule: every provider passes",
        ),
        (
            "idc-weight",
            None,
            "no idc-weight rule: every provider passes",
        ),
    ];
    for (type_name, rule, reason) in cases {
        let spec = RouterSpec {
            type_name,
            entry: RuleDoc::new(&entry, &root),
            rule: rule.as_ref().map(|r| RuleDoc::new(r, &root)),
            base_dir: None,
            service: None,
        };
        let router = registry
            .get(type_name)
            .unwrap()
            .build(&spec)
            .unwrap_or_else(|e| panic!("{type_name} {rule:?}: {e:?}"));
        let state = ChainState::new(
            None,
            snap.clone(),
            consumer("consumer://10.0.0.9/s?region=a&idc=x"),
            vec![ChainEntry::new(type_name, 0, router)],
        )
        .unwrap();
        let mut trace = Trace::default();
        let mut call = CallState::seeded(1);
        state
            .route_traced(&Request::new(), &mut call, &mut trace)
            .unwrap();
        let got: Vec<usize> = call.candidates.iter().collect();
        assert_eq!(got, [0, 1, 2], "{type_name} {rule:?}");
        assert_eq!(trace.steps[0].reason, reason, "{type_name} {rule:?}");
        if rule.is_none() {
            assert_eq!(trace.steps[0].router, type_name);
        }
        assert_eq!(trace.steps[0].evaluation, Evaluation::Cached, "{type_name}");
    }
}
