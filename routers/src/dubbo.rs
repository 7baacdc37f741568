//! What Dubbo's own rule documents (condition, tag, affinity, mesh) share: the rule header
//! and Dubbo's `StringMatch` (a tag rule's `match` value and the mesh rule's string matches).
//!
//! Every Dubbo rule carries the same header (`configVersion`, `scope`, `key`, `enabled`,
//! `force`, `runtime`, `valid`, `dynamic`, `priority`, from Dubbo's `AbstractRouterRule`):
//! [`RawHeader`], flattened into each rule's raw type and checked by [`RawHeader::check`].
//! Unknown fields are ignored, as Dubbo ignores them; `routechain check` warns about them
//! (RC107).

use routechain_core::{FieldPath, RuleError};
use serde::Deserialize;
use serde_json::Value;

/// `true` / `false` in any case, as Dubbo's rules write booleans in strings; `None` for any
/// other text.
pub fn parse_bool(text: &str) -> Option<bool> {
    if text.eq_ignore_ascii_case("true") {
        Some(true)
    } else if text.eq_ignore_ascii_case("false") {
        Some(false)
    } else {
        None
    }
}

/// An integer as Dubbo's rules write one: a number, or its text.
pub(crate) fn integer(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// The header of a Dubbo rule as written. Every field is an untyped value: reading never
/// fails inside it (an error inside a flattened field would lose its field path), and
/// [`RawHeader::check`] reports every problem at once, each at its field.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RawHeader {
    /// `configVersion`: what each rule kind reads from it differs (see [`Header`]).
    pub config_version: Option<Value>,
    /// `scope`: `service` or `application`.
    pub scope: Option<Value>,
    /// `key`: the service key or application name the rule belongs to (informational).
    pub key: Option<Value>,
    /// `enabled` (default true).
    pub enabled: Option<Value>,
    /// `valid` (default true): Dubbo's rule-level switch; `false` disables the rule like
    /// `enabled: false`.
    pub valid: Option<Value>,
    /// `force`.
    pub force: Option<Value>,
    /// `runtime`.
    pub runtime: Option<Value>,
    /// `dynamic` (checked, ignored as in Dubbo).
    pub dynamic: Option<Value>,
    /// `priority` (an integer; accepted as Dubbo does, the chain entry decides order).
    pub priority: Option<Value>,
}

/// A checked rule header; an absent (or null) field is `None`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Header {
    /// `configVersion`.
    pub config_version: Option<String>,
    /// `scope`.
    pub scope: Option<String>,
    /// `key`.
    pub key: Option<String>,
    /// `enabled` and `valid`, each true when absent (Dubbo ignores a rule with either set
    /// to false).
    pub enabled: bool,
    /// `force`.
    pub force: Option<bool>,
    /// `runtime`.
    pub runtime: Option<bool>,
    /// `priority`.
    pub priority: Option<i64>,
}

impl RawHeader {
    /// Checks every field, pushing each problem to `errors` at its path below `root`: a
    /// text field must be a string, a flag a boolean as Dubbo reads one
    /// (`Boolean.parseBoolean`: a YAML boolean or `true` / `false` in any case; any other
    /// string is an error here, where Dubbo would read `false`), `priority` an integer (or
    /// its text).
    pub(crate) fn check(&self, root: &FieldPath, errors: &mut Vec<RuleError>) -> Header {
        let mut error = |field: &str, message: String| {
            errors.push(RuleError::new(root.key(field), message));
        };
        let mut text = |field: &str, value: &Option<Value>| match value {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(other) => {
                error(field, format!("{field} must be a string, found {other}"));
                None
            }
        };
        let (config_version, scope) = (
            text("configVersion", &self.config_version),
            text("scope", &self.scope),
        );
        let key = text("key", &self.key);
        let mut flag = |field: &str, value: &Option<Value>| {
            let parsed = match value.as_ref()? {
                Value::Null => return None,
                Value::Bool(b) => Some(*b),
                Value::String(s) => parse_bool(s),
                _ => None,
            };
            if parsed.is_none() {
                let found = value.as_ref()?;
                error(field, format!("must be true or false, found {found}"));
            }
            parsed
        };
        let enabled = flag("enabled", &self.enabled).unwrap_or(true);
        let valid = flag("valid", &self.valid).unwrap_or(true);
        let (force, runtime) = (flag("force", &self.force), flag("runtime", &self.runtime));
        flag("dynamic", &self.dynamic);
        let priority = match &self.priority {
            None | Some(Value::Null) => None,
            Some(v) => {
                let parsed = integer(v);
                if parsed.is_none() {
                    let message =
                        routechain_core::integer_range_message("priority", v, i64::MIN, i64::MAX);
                    error("priority", message);
                }
                parsed
            }
        };
        Header {
            config_version,
            scope,
            key,
            enabled: enabled && valid,
            force,
            runtime,
            priority,
        }
    }
}

/// Dubbo's `StringMatch`: the first kind that applies decides (see [`StringMatch::is_match`]).
#[derive(Debug, Clone, Default)]
pub struct StringMatch {
    /// `exact`.
    pub exact: Option<String>,
    /// `prefix`.
    pub prefix: Option<String>,
    /// `regex`, compiled as `^(?:regex)$` (a whole-string match, as Java's `String.matches`).
    pub regex: Option<regex::Regex>,
    /// `wildcard`: only `*` alone is special (any present value); anything else is literal.
    pub wildcard: Option<String>,
    /// `empty` is set (its value is never read).
    pub empty: bool,
    /// `noempty` is set (its value is never read).
    pub noempty: bool,
}

impl StringMatch {
    /// The kinds a match may hold, as written.
    pub const KINDS: [&str; 6] = ["exact", "prefix", "regex", "wildcard", "empty", "noempty"];

    /// Dubbo's order: `exact`, `prefix`, `regex`, `wildcard` (each only on a present input),
    /// then `empty` (absent or `""`), then `noempty` (present and not `""`); nothing set → false.
    pub fn is_match(&self, input: Option<&str>) -> bool {
        if let Some(input) = input {
            if let Some(exact) = &self.exact {
                return input == exact;
            }
            if let Some(prefix) = &self.prefix {
                return input.starts_with(prefix.as_str());
            }
            if let Some(regex) = &self.regex {
                return regex.is_match(input);
            }
            if let Some(wildcard) = &self.wildcard {
                return wildcard == "*" || input == wildcard;
            }
        }
        if self.empty {
            return input.is_none_or(str::is_empty);
        }
        if self.noempty {
            return input.is_some_and(|s| !s.is_empty());
        }
        false
    }

    /// True when no kind is set (the match never holds).
    pub fn is_unset(&self) -> bool {
        self.exact.is_none()
            && self.prefix.is_none()
            && self.regex.is_none()
            && self.wildcard.is_none()
            && !self.empty
            && !self.noempty
    }
}

/// The one-line reason of a regex error (its display spans several lines).
pub(crate) fn regex_reason(e: &regex::Error) -> String {
    let text = e.to_string();
    text.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(|l| l.trim().trim_start_matches("error: ").to_string())
        .unwrap_or(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(doc: Value) -> (Header, Vec<String>) {
        let raw: RawHeader = serde_json::from_value(doc).unwrap();
        let mut errors = Vec::new();
        let header = raw.check(&FieldPath::root().key("rule"), &mut errors);
        (header, errors.iter().map(ToString::to_string).collect())
    }

    #[test]
    fn flags_read_as_dubbo_reads_them() {
        let cases = [
            (json!(true), Some(true)),
            (json!(false), Some(false)),
            (json!("TRUE"), Some(true)),
            (json!("False"), Some(false)),
            (json!(null), None),
            (json!("yes"), None),
            (json!(1), None),
        ];
        for (value, want) in cases {
            let (header, errors) = check(json!({ "force": value }));
            assert_eq!(header.force, want, "{value}");
            let bad = want.is_none() && !value.is_null();
            assert_eq!(errors.len(), usize::from(bad), "{value}: {errors:?}");
            if bad {
                assert_eq!(
                    errors[0],
                    format!("rule.force: must be true or false, found {value}")
                );
            }
        }
    }

    #[test]
    fn enabled_needs_enabled_and_valid() {
        let cases = [
            (json!({}), true),
            (json!({"enabled": true}), true),
            (json!({"valid": "true"}), true),
            (json!({"enabled": false}), false),
            (json!({"valid": false}), false),
            (json!({"enabled": true, "valid": "FALSE"}), false),
        ];
        for (doc, want) in cases {
            assert_eq!(check(doc.clone()).0.enabled, want, "{doc}");
        }
    }

    #[test]
    fn every_field_is_checked_and_every_problem_located() {
        let (header, errors) = check(json!({
            "configVersion": "v3.1", "scope": "application", "key": "svc", "priority": "-7",
            "runtime": "true", "dynamic": true
        }));
        assert!(errors.is_empty(), "{errors:?}");
        let want = Header {
            config_version: Some("v3.1".into()),
            scope: Some("application".into()),
            key: Some("svc".into()),
            enabled: true,
            force: None,
            runtime: Some(true),
            priority: Some(-7),
        };
        assert_eq!(header, want);
        let (_, errors) = check(json!({
            "configVersion": 3.1, "scope": ["service"], "key": 7, "enabled": "on",
            "dynamic": "no", "priority": 1.5
        }));
        assert_eq!(
            errors,
            [
                "rule.configVersion: configVersion must be a string, found 3.1",
                "rule.scope: scope must be a string, found [\"service\"]",
                "rule.key: key must be a string, found 7",
                "rule.enabled: must be true or false, found \"on\"",
                "rule.dynamic: must be true or false, found \"no\"",
                "rule.priority: priority must be an integer from -9223372036854775808 to 9223372036854775807, found 1.5",
            ]
        );
    }
}
