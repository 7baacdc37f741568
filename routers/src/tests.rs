//! Tests across the built-in routers: each folder's `tests*.rs` holds its router's own
//! tests; here are the ones that compare routers or run several in one chain.

mod pass_through;
pub(crate) mod support;
mod zero_alloc;

use routechain_core::{FieldPath, RouterSpec, RuleDoc};

use crate::builtin_registry;

#[test]
fn builtin_priorities_follow_dubbo() {
    let registry = builtin_registry();
    let root = FieldPath::root();
    let entry = serde_json::json!({});
    let priority = |type_name: &str, rule: Option<serde_json::Value>| {
        let spec = RouterSpec {
            type_name,
            entry: RuleDoc::new(&entry, &root),
            rule: rule.as_ref().map(|r| RuleDoc::new(r, &root)),
            base_dir: None,
            service: None,
        };
        registry
            .get(type_name)
            .unwrap()
            .build(&spec)
            .unwrap()
            .default_priority()
    };
    assert_eq!(priority("mock", None), -100);
    assert_eq!(priority("tag", None), 100);
    assert_eq!(
        priority(
            "affinity",
            Some(
                serde_json::json!({"scope": "service", "configVersion": "v3.1", "affinityAware": {"key": "region"}})
            )
        ),
        130
    );
    assert_eq!(
        priority(
            "affinity",
            Some(
                serde_json::json!({"scope": "application", "configVersion": "v3.1", "affinityAware": {"key": "region"}})
            )
        ),
        135
    );
}
