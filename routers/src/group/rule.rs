//! The group-assign rule (`type: group`): which request value names the provider group(s)
//! of a call, which provider param holds a provider's group, and what happens when a named
//! group has no provider.
//!
//! ```yaml
//! attribute: group        # request attribute naming the group(s); then the attachment of that name
//! provider_param: group   # provider URL param holding the provider's group
//! force: true             # a named group with no provider → empty result
//! default_group: null     # group(s) used when the request names none; null → every provider passes
//! ```
//!
//! Every field is optional; a chain entry without `rule` gets [`RawGroupRule::default`].
//! A group value (request or `default_group`) is one group (`idx_user`), a comma list
//! (`idx_order,idx_shop`; blanks around commas are ignored) or `*` (every provider).

use routechain_core::{FieldPath, RuleError};
use serde::Deserialize;

/// The group-assign rule as written.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawGroupRule {
    /// The request attribute naming the group(s) of the call; when the request has no such
    /// attribute, the attachment of the same name. Default `group`.
    pub attribute: String,
    /// The provider URL param holding the provider's group. Default `group`.
    pub provider_param: String,
    /// `true` (default): a named group with no provider among the candidates empties the
    /// result. `false`: the candidates are left unchanged.
    pub force: bool,
    /// The group value used when the request names none; `None` (default): every provider
    /// passes.
    pub default_group: Option<String>,
}

impl Default for RawGroupRule {
    fn default() -> Self {
        RawGroupRule {
            attribute: "group".into(),
            provider_param: "group".into(),
            force: true,
            default_group: None,
        }
    }
}

/// The validated group-assign rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupRule {
    /// The request attribute (then attachment) naming the group(s).
    pub attribute: Box<str>,
    /// The provider param holding the provider's group.
    pub provider_param: Box<str>,
    /// Empty result when a named group has no provider.
    pub force: bool,
    /// The group value used when the request names none (not blank).
    pub default_group: Option<Box<str>>,
}

impl Default for GroupRule {
    /// [`RawGroupRule::default`], compiled.
    fn default() -> Self {
        GroupRule::compile(RawGroupRule::default(), &FieldPath::root())
            .expect("the defaults validate")
    }
}

/// The group names of a group value: split at commas, trimmed, blanks skipped. `*` is
/// returned as an item like any other. Iterates the value in place (no allocation).
pub fn group_names(value: &str) -> impl Iterator<Item = &str> + '_ {
    value.split(',').map(str::trim).filter(|g| !g.is_empty())
}

impl GroupRule {
    /// Compiles a rule as written; `base` is the rule document's path. Reports every
    /// problem at once.
    pub fn compile(raw: RawGroupRule, base: &FieldPath) -> Result<GroupRule, Vec<RuleError>> {
        let this = &raw;
        let mut errors = Vec::new();
        for (field, value) in [
            ("attribute", &this.attribute),
            ("provider_param", &this.provider_param),
        ] {
            if value.trim().is_empty() {
                errors.push(RuleError::new(
                    base.key(field),
                    format!(
                        "`{field}` must name a request attribute or provider param, not be blank"
                    ),
                ));
            } else if value.trim() != value {
                errors.push(RuleError::new(
                    base.key(field),
                    format!("`{field}` {value:?} has leading or trailing blanks"),
                ));
            }
        }
        if let Some(default) = &this.default_group {
            let path = base.key("default_group");
            if group_names(default).next().is_none() {
                errors.push(RuleError::new(
                    path,
                    "`default_group` names no group; write `null` (or leave it out) for none",
                ));
            } else {
                // Point at an empty item of a list such as `a,,b`.
                let mut offset = 0;
                for item in default.split(',') {
                    if item.trim().is_empty() {
                        errors.push(RuleError::at_offset(
                            path.clone(),
                            offset,
                            format!("empty group name in `default_group` {default:?}"),
                        ));
                        break;
                    }
                    offset += item.chars().count() + 1;
                }
            }
        }
        if errors.is_empty() {
            Ok(GroupRule {
                attribute: this.attribute.as_str().into(),
                provider_param: this.provider_param.as_str().into(),
                force: this.force,
                default_group: this.default_group.as_deref().map(|g| g.trim().into()),
            })
        } else {
            Err(errors)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use routechain_core::RuleDoc;
    use serde_json::json;

    fn parse(value: &serde_json::Value, base: &FieldPath) -> Result<GroupRule, Vec<RuleError>> {
        let raw = RuleDoc::new(value, base).parse().map_err(|e| vec![e])?;
        GroupRule::compile(raw, base)
    }

    fn check(value: serde_json::Value) -> Result<GroupRule, Vec<String>> {
        let base = FieldPath::root().key("rule");
        parse(&value, &base).map_err(|es| es.iter().map(ToString::to_string).collect())
    }

    #[test]
    fn empty_document_gets_the_defaults() {
        assert_eq!(check(json!({})).unwrap(), GroupRule::default());
        assert_eq!(
            GroupRule::compile(RawGroupRule::default(), &FieldPath::root()).unwrap(),
            GroupRule::default()
        );
    }

    #[test]
    fn fields_are_read() {
        let r = check(
            json!({"attribute": "g", "provider_param": "grp", "force": false,
                             "default_group": " a, b "}),
        )
        .unwrap();
        assert_eq!(&*r.attribute, "g");
        assert_eq!(&*r.provider_param, "grp");
        assert!(!r.force);
        assert_eq!(r.default_group.as_deref(), Some("a, b"));
        assert_eq!(
            group_names(r.default_group.as_deref().unwrap()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        assert_eq!(
            check(json!({"default_group": null})).unwrap().default_group,
            None
        );
    }

    #[test]
    fn every_problem_is_reported() {
        let cases: &[(serde_json::Value, &[&str])] = &[
            (
                json!({"attribute": " ", "provider_param": "", "default_group": " , "}),
                &[
                    "rule.attribute: `attribute` must name",
                    "rule.provider_param: `provider_param` must name",
                    "rule.default_group: `default_group` names no group",
                ],
            ),
            (
                json!({"attribute": "group "}),
                &["rule.attribute: `attribute` \"group \" has leading or trailing blanks"],
            ),
            (
                json!({"default_group": "a,,b"}),
                &["rule.default_group: empty group name"],
            ),
            (
                json!({"groups": "a"}),
                &["rule.groups: unknown field `groups`"],
            ),
            (json!({"force": "yes"}), &["rule.force: invalid type"]),
        ];
        for (doc, expected) in cases {
            let errors = check(doc.clone()).unwrap_err();
            assert_eq!(errors.len(), expected.len(), "{doc}: {errors:#?}");
            for (e, want) in errors.iter().zip(expected.iter()) {
                assert!(e.starts_with(want), "{doc}: {e} does not start with {want}");
            }
        }
    }

    #[test]
    fn empty_list_item_is_located_inside_the_scalar() {
        let value = json!({"default_group": "a,,b"});
        let base = FieldPath::root();
        let e = parse(&value, &base).unwrap_err();
        assert_eq!(e[0].offset, Some(2));
    }
}
