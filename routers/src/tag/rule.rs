//! The tag rule: the document Dubbo keeps under `<provider-app>.tag-router`, as written
//! ([`RawTagRule`]) and compiled ([`TagRule`]: address patterns parsed, regexes compiled).
//!
//! ```yaml
//! configVersion: v3.0
//! force: false            # only refuses the fallback when a dynamic tag's addresses match nothing
//! enabled: true
//! key: demo-provider
//! tags:
//!   - name: gray
//!     addresses: ["10.0.0.1:20880", "10.0.1.*", "10.0.2.0/24", "0.0.0.0:20881"]
//!   - name: beta|team1            # hierarchical: a request for beta|team1|x falls back to it
//!     match:                      # used when `addresses` is empty (configVersion v3.0 only)
//!       - key: env
//!         value: {exact: beta}    # exact | prefix | regex | wildcard | empty | noempty
//! ```
//!
//! Every problem (no `tags`, a bad address pattern or CIDR, an unknown match kind, an
//! invalid regex, a mistyped field) is reported at once, each with its field path. Unknown
//! fields of the rule, a tag or a match entry are ignored, as Dubbo ignores them
//! (`routechain check` warns, RC107); an unknown match kind inside `value` stays an error,
//! since a match with no kind Dubbo knows never matches.

use std::collections::BTreeMap;

use routechain_core::{FieldPath, RuleError};
use serde::Deserialize;
use serde_json::Value;

pub use crate::dubbo::StringMatch;
use crate::dubbo::{RawHeader, regex_reason};

use super::address::AddressPattern;

/// The tag rule as written. Unknown fields are ignored, as Dubbo ignores them (`routechain
/// check` warns about them, with a "did you mean").
#[derive(Debug, Clone, Default, Deserialize)]
pub struct RawTagRule {
    /// The header: `configVersion` `v3.0` enables `match` (older versions only know
    /// `addresses`); `enabled: false` leaves static-tag routing; `force` (default false): a
    /// dynamic tag whose addresses match nothing returns empty; `runtime` is read (the tag
    /// router always routes per request).
    #[serde(flatten)]
    pub(crate) header: RawHeader,
    /// `tags`: required and non-empty.
    pub tags: Option<Vec<RawTag>>,
}

/// One tag as written (unknown fields ignored, as in Dubbo).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct RawTag {
    /// `name`: the tag requests carry in `dubbo.tag`; `|` separates levels.
    pub name: Option<String>,
    /// `addresses`: address patterns.
    pub addresses: Option<Vec<String>>,
    /// `match`: parameter conditions, used when `addresses` is empty (v3.0 rules).
    #[serde(default, rename = "match")]
    pub matches: Option<Vec<RawParamMatch>>,
}

/// One `match` entry as written: `{key, value: {kind: text}}` (unknown fields ignored, as in
/// Dubbo).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct RawParamMatch {
    /// The provider URL parameter.
    pub key: Option<String>,
    /// The string match, kind → text (validated by hand so that every unknown kind is
    /// reported).
    pub value: Option<BTreeMap<String, Value>>,
}

/// A compiled tag rule.
#[derive(Debug, Clone)]
pub struct TagRule {
    /// `enabled` and `valid`: when false the router does static-tag routing only.
    pub enabled: bool,
    /// The rule's `force`.
    pub force: bool,
    /// `runtime` as written (default true).
    pub runtime: bool,
    /// `key`, if written.
    pub key: Option<String>,
    /// `configVersion`, if written.
    pub config_version: Option<String>,
    /// The tags in document order.
    pub tags: Vec<TagSpec>,
}

impl TagRule {
    /// True when `match` entries are honoured: Dubbo reads them only when `configVersion`
    /// starts with `v3.0`.
    pub fn uses_match(&self) -> bool {
        self.config_version
            .as_deref()
            .is_some_and(|v| v.starts_with("v3.0"))
    }
}

/// One compiled tag.
#[derive(Debug, Clone)]
pub struct TagSpec {
    /// The tag name.
    pub name: String,
    /// The address patterns (empty when the tag has none).
    pub addresses: Vec<AddressPattern>,
    /// The `match` entries, all of which must hold (`None` when absent).
    pub matches: Option<Vec<ParamMatch>>,
}

/// One compiled `match` entry.
#[derive(Debug, Clone)]
pub struct ParamMatch {
    /// The provider URL parameter.
    pub key: String,
    /// The string match; `None` (no `value`) never matches, as in Dubbo.
    pub value: Option<StringMatch>,
}

impl ParamMatch {
    /// True when the provider's parameter value (`None` when absent) satisfies the entry.
    pub fn is_match(&self, input: Option<&str>) -> bool {
        self.value.as_ref().is_some_and(|v| v.is_match(input))
    }
}

impl TagRule {
    /// The rule of an entry without one: static tags only (no dynamic rule).
    pub fn static_only() -> Self {
        TagRule {
            enabled: false,
            force: false,
            runtime: true,
            key: None,
            config_version: None,
            tags: Vec::new(),
        }
    }

    /// Compiles a tag rule as written, reporting every problem at once; `root` is the rule
    /// document's path.
    pub fn compile(raw: RawTagRule, root: &FieldPath) -> Result<TagRule, Vec<RuleError>> {
        let mut errors = Vec::new();
        let header = raw.header.check(root, &mut errors);
        let tags_path = root.key("tags");
        let raw_tags = match raw.tags {
            Some(t) if !t.is_empty() => t,
            Some(_) => {
                let message = "`tags` is empty: a tag rule needs at least one tag";
                errors.push(RuleError::new(tags_path, message));
                return Err(errors);
            }
            None => {
                let message = "missing field `tags`: a tag rule needs at least one tag";
                errors.push(RuleError::new(root.clone(), message));
                return Err(errors);
            }
        };
        let mut tags = Vec::with_capacity(raw_tags.len());
        for (i, t) in raw_tags.into_iter().enumerate() {
            let tpath = tags_path.index(i);
            let name = match t.name {
                Some(n) if !n.is_empty() => n,
                _ => {
                    errors.push(RuleError::new(
                        tpath.clone(),
                        "a tag needs a non-empty `name`",
                    ));
                    String::new()
                }
            };
            let raw_addresses = t.addresses.unwrap_or_default();
            // Sized to what it holds: a rule of many tags keeps no growth slack.
            let mut addresses = Vec::with_capacity(raw_addresses.len());
            for (j, a) in raw_addresses.iter().enumerate() {
                match AddressPattern::parse(a) {
                    Ok(p) => addresses.push(p),
                    Err((offset, message)) => errors.push(RuleError::at_offset(
                        tpath.key("addresses").index(j),
                        offset,
                        message,
                    )),
                }
            }
            let matches = t.matches.map(|ms| {
                ms.into_iter()
                    .enumerate()
                    .map(|(k, m)| compile_match(&tpath.key("match").index(k), m, &mut errors))
                    .collect()
            });
            tags.push(TagSpec {
                name,
                addresses,
                matches,
            });
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        let rule = TagRule {
            enabled: header.enabled,
            force: header.force.unwrap_or(false),
            runtime: header.runtime.unwrap_or(true),
            key: header.key,
            config_version: header.config_version,
            tags,
        };
        if !rule.uses_match() && rule.tags.iter().any(|t| t.matches.is_some()) {
            // `routechain check` reports this located (file:line:column, RC107); a log line
            // here could name no file, so it is only a debug trace.
            tracing::debug!(
                config_version = rule.config_version.as_deref().unwrap_or(""),
                "tag rule: `match` is read only when configVersion starts with v3.0; ignored"
            );
        }
        Ok(rule)
    }
}

fn compile_match(path: &FieldPath, m: RawParamMatch, errors: &mut Vec<RuleError>) -> ParamMatch {
    let key = match m.key {
        Some(k) if !k.is_empty() => k,
        _ => {
            errors.push(RuleError::new(
                path.clone(),
                "a match entry needs a non-empty `key`",
            ));
            String::new()
        }
    };
    let value = m.value.map(|kinds| {
        let vpath = path.key("value");
        let mut sm = StringMatch::default();
        for (kind, v) in kinds {
            let kpath = vpath.key(kind.as_str());
            if !StringMatch::KINDS.contains(&kind.as_str()) {
                errors.push(RuleError::new(
                    vpath.clone(),
                    routechain_core::unknown_name("field", &kind, StringMatch::KINDS),
                ));
                continue;
            }
            // As in Dubbo, a null kind is not set.
            let text = match v {
                Value::Null => continue,
                Value::String(s) => s,
                Value::Bool(b) => b.to_string(),
                Value::Number(n) => n.to_string(),
                _ => {
                    errors.push(RuleError::new(kpath, format!("`{kind}` must be a string")));
                    continue;
                }
            };
            match kind.as_str() {
                "exact" => sm.exact = Some(text),
                "prefix" => sm.prefix = Some(text),
                "wildcard" => sm.wildcard = Some(text),
                "empty" => sm.empty = true,
                "noempty" => sm.noempty = true,
                _ => match regex::Regex::new(&text)
                    .and_then(|_| regex::Regex::new(&format!("^(?:{text})$")))
                {
                    Ok(r) => sm.regex = Some(r),
                    Err(e) => errors.push(RuleError::new(
                        kpath,
                        format!("invalid regex {text:?}: {}", regex_reason(&e)),
                    )),
                },
            }
        }
        sm
    });
    ParamMatch { key, value }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_match_follows_dubbo_precedence() {
        let re = |r: &str| regex::Regex::new(&format!("^(?:{r})$")).unwrap();
        let exact = StringMatch {
            exact: Some("a".into()),
            ..Default::default()
        };
        assert!(exact.is_match(Some("a")));
        assert!(!exact.is_match(Some("ab")));
        assert!(!exact.is_match(None));
        let exact_or_empty = StringMatch {
            exact: Some("a".into()),
            empty: true,
            ..Default::default()
        };
        assert!(
            exact_or_empty.is_match(None),
            "exact does not apply to an absent value"
        );
        assert!(!exact_or_empty.is_match(Some("b")));
        let regex = StringMatch {
            regex: Some(re("v[0-9]+")),
            ..Default::default()
        };
        assert!(regex.is_match(Some("v12")));
        assert!(
            !regex.is_match(Some("xv12")),
            "regex must match the whole value"
        );
        let wildcard = StringMatch {
            wildcard: Some("*".into()),
            ..Default::default()
        };
        assert!(wildcard.is_match(Some("")));
        assert!(!wildcard.is_match(None));
        let glob = StringMatch {
            wildcard: Some("a*".into()),
            ..Default::default()
        };
        assert!(
            !glob.is_match(Some("ab")),
            "Dubbo's wildcard only knows `*` alone"
        );
        assert!(glob.is_match(Some("a*")));
        let noempty = StringMatch {
            noempty: true,
            ..Default::default()
        };
        assert!(noempty.is_match(Some("x")));
        assert!(!noempty.is_match(Some("")));
        assert!(!StringMatch::default().is_match(Some("x")));
    }
}
