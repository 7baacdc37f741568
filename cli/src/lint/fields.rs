//! Field lints of Dubbo's rule documents (condition, tag, affinity, override rules): an
//! unknown field, which
//! Dubbo ignores (`forse: true` silently does nothing), and a rule switched off with
//! `enabled: false` or `valid: false`.
//!
//! routechain's own rule types (group, IDC-weight) refuse unknown fields outright, so only
//! Dubbo's documents are linted here.

use routechain::core::{DocNode, DocTree, FieldPath};
use serde_json::Value;

use super::{Code, Problem, RuleRef, did_you_mean};

/// The header every Dubbo rule has (Dubbo's `AbstractRouterRule`).
const HEADER: [&str; 9] = [
    "configVersion",
    "scope",
    "key",
    "enabled",
    "valid",
    "force",
    "runtime",
    "dynamic",
    "priority",
];

/// Known fields of a mapping, by where it is in a rule of `type_name`. `None`: not linted.
fn known(type_name: &str, path: &[&str]) -> Option<Vec<&'static str>> {
    let with_header = |extra: &[&'static str]| {
        let mut v = HEADER.to_vec();
        v.extend_from_slice(extra);
        Some(v)
    };
    match (type_name, path) {
        ("condition", []) => with_header(&["conditions"]),
        ("condition", ["conditions", "[]"]) => Some(vec!["from", "to"]),
        ("condition", ["conditions", "[]", "from"]) => Some(vec!["match"]),
        ("condition", ["conditions", "[]", "to", "[]"]) => Some(vec!["match", "weight"]),
        ("tag", []) => with_header(&["tags"]),
        ("tag", ["tags", "[]"]) => Some(vec!["name", "addresses", "match"]),
        ("tag", ["tags", "[]", "match", "[]"]) => Some(vec!["key", "value"]),
        ("affinity", []) => with_header(&["affinityAware"]),
        ("affinity", ["affinityAware"]) => Some(vec!["key", "ratio"]),
        // Dubbo's `ConfiguratorConfig` and `ConfigItem`.
        ("configurators", []) => Some(vec!["configVersion", "scope", "key", "enabled", "configs"]),
        ("configurators", ["configs", "[]"]) => Some(vec![
            "type",
            "enabled",
            "addresses",
            "providerAddresses",
            "services",
            "applications",
            "parameters",
            "side",
            "match",
        ]),
        _ => None,
    }
}

/// Unknown fields (with a "did you mean") and a disabled rule.
pub fn lint(rule: RuleRef<'_>) -> Vec<Problem> {
    let mut out = Vec::new();
    if !matches!(
        rule.type_name,
        "condition" | "tag" | "affinity" | "configurators"
    ) {
        return out;
    }
    // Walked in the document's tree: no value of a large rule is built.
    let Some(node) = rule.doc.node_at(rule.path) else {
        return out;
    };
    walk(rule, node, rule.path, &mut Vec::new(), &mut out);
    if rule.type_name == "tag" {
        ignored_tag_matches(rule, &mut out);
    }
    if rule.doc.is_object_at(rule.path) {
        let flags: &[&str] = if rule.type_name == "configurators" {
            &["enabled"]
        } else {
            &["enabled", "valid"]
        };
        for &flag in flags {
            if rule
                .doc
                .value_at(&rule.path.key(flag))
                .is_some_and(|v| is_false(&v))
            {
                out.push(Problem::at(
                    Code::Disabled,
                    rule.doc,
                    &rule.path.key(flag),
                    None,
                    if rule.type_name == "configurators" {
                        format!("`{flag}: false`: this override rule is switched off and changes nothing")
                    } else {
                        format!(
                            "`{flag}: false`: this {} rule is switched off and routes nothing",
                            rule.type_name
                        )
                    },
                ));
            }
        }
    }
    out
}

/// A tag's `match` under a `configVersion` that does not start with `v3.0`: Dubbo (and the
/// tag router, `TagRule::uses_match`) ignores it. Located at the `match` key.
fn ignored_tag_matches(rule: RuleRef<'_>, out: &mut Vec<Problem>) {
    let version = rule.doc.value_at(&rule.path.key("configVersion"));
    if version
        .as_ref()
        .and_then(Value::as_str)
        .is_some_and(|v| v.starts_with("v3.0"))
    {
        return;
    }
    let version = version.map_or("none".to_string(), |v| match v {
        Value::String(s) => s,
        other => other.to_string(),
    });
    let tags_path = rule.path.key("tags");
    let Some(DocNode::Seq(tags)) = rule.doc.node_at(&tags_path).map(|n| rule.doc.doc_node(n))
    else {
        return;
    };
    for (i, &tag) in tags.iter().enumerate() {
        let has_match = match rule.doc.doc_node(tag) {
            DocNode::Map(entries) => entries.iter().any(|&e| {
                rule.doc.doc_key(e) == "match"
                    && !matches!(rule.doc.doc_node(e), DocNode::Scalar(Value::Null))
            }),
            _ => false,
        };
        if has_match {
            out.push(Problem::at(
                Code::UnknownField,
                rule.doc,
                &rule.path.key("tags").index(i).key("match"),
                None,
                format!(
                    "unknown field `match` for configVersion {version}: Dubbo reads a tag's \
                     `match` only when configVersion starts with v3.0, so it ignores it, and so \
                     does routechain"
                ),
            ));
        }
    }
}

/// A rule type's name in a message (`override` for Dubbo's configurators).
fn name(type_name: &str) -> &str {
    if type_name == "configurators" {
        "override"
    } else {
        type_name
    }
}

/// `a` or `an` before a rule type's name.
fn article(word: &str) -> &'static str {
    if word.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    }
}

/// False as Dubbo reads a flag: `false`, or the string in any case.
fn is_false(v: &Value) -> bool {
    match v {
        Value::Bool(b) => !b,
        Value::String(s) => s.eq_ignore_ascii_case("false"),
        _ => false,
    }
}

fn walk(
    rule: RuleRef<'_>,
    node: u32,
    path: &FieldPath,
    shape: &mut Vec<String>,
    out: &mut Vec<Problem>,
) {
    let doc = rule.doc;
    match doc.doc_node(node) {
        DocNode::Map(entries) => {
            let shape_strs: Vec<&str> = shape.iter().map(String::as_str).collect();
            if let Some(known) = known(rule.type_name, &shape_strs) {
                for &entry in entries {
                    let key = doc.doc_key(entry);
                    if known.contains(&key) {
                        continue;
                    }
                    let hint = did_you_mean(key, known.iter().copied())
                        .map(|k| format!("; did you mean `{k}`?"))
                        .unwrap_or_default();
                    // An "unknown field" message is located at the field's key.
                    out.push(Problem::at(
                        Code::UnknownField,
                        rule.doc,
                        &path.key(key),
                        None,
                        format!(
                            "unknown field `{key}` in {} {} rule: Dubbo ignores it, and so does routechain{hint}",
                            article(name(rule.type_name)),
                            name(rule.type_name)
                        ),
                    ));
                }
            }
            for &entry in entries {
                let key = doc.doc_key(entry);
                shape.push(key.to_string());
                walk(rule, entry, &path.key(key), shape, out);
                shape.pop();
            }
        }
        DocNode::Seq(items) => {
            for (i, &item) in items.iter().enumerate() {
                shape.push("[]".to_string());
                walk(rule, item, &path.index(i), shape, out);
                shape.pop();
            }
        }
        DocNode::Scalar(_) => {}
    }
}
