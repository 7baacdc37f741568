//! The condition rule document: what Dubbo Admin writes under `<key>.condition-router`.
//!
//! ```yaml
//! configVersion: v3.0          # or v3.1 (from/to with weights); absent = v3.0
//! scope: service               # or application
//! key: com.foo.BarService
//! enabled: true                # default true
//! force: false                 # default false
//! runtime: false               # default false: when-parts that read no request are cached
//! priority: 1                  # accepted as Dubbo does; the chain entry decides order
//! conditions:
//!   - method = getComment => region = hangzhou
//! ```
//!
//! [`RawConditionRule`] is the document as serde reads it, every field kept as a JSON value so
//! that every problem is reported in one pass. [`ConditionRule::compile`] checks the fields
//! first (flags, versions, the shape of v3.0 text and v3.1 from/to conditions, weights) and,
//! when they are sound, parses every condition text ([`super::parser`]) into compiled
//! [`Term`]s, each error located at its field path and character offset.

use std::sync::Arc;

use routechain_core::{FieldPath, RuleError, StickyKey};
use serde::Deserialize;
use serde_json::Value;

use super::matcher::Term;
use super::parser::{Interner, Side, parse_match_in, parse_text_in};
use crate::dubbo::{RawHeader, integer};

/// The weight of a v3.1 destination that names none (Dubbo's default): its share of the
/// calls is weight / sum of the live destinations' weights.
pub const DEFAULT_DESTINATION_WEIGHT: u32 = 100;

/// The condition rule document as written; every field optional and untyped so that the
/// validation reports every problem at once.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct RawConditionRule {
    /// The header: `configVersion` absent or `v3.0` (text conditions), `v3.1` (from/to);
    /// `scope` `service` or `application`; `force` and `runtime` default false.
    #[serde(flatten)]
    pub(crate) header: RawHeader,
    /// `conditions`: strings (v3.0) or from/to mappings (v3.1).
    pub conditions: Option<Value>,
    /// `hash_key` (routechain's, v3.1 only): weighted destinations are drawn by a stable
    /// hash of these request values instead of a random number, so a user keeps its side.
    pub hash_key: Option<Value>,
}

/// The rule's `configVersion`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigVersion {
    /// v3.0 and earlier: `when => then` text conditions.
    V30,
    /// v3.1: `from`/`to` conditions with weighted destinations.
    V31,
}

/// The rule's `scope`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// A service rule (key `interface:version:group`); Dubbo runs it at 140.
    Service,
    /// An application rule; Dubbo runs it at 150.
    Application,
}

impl Scope {
    /// `service` or `application`.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Service => "service",
            Scope::Application => "application",
        }
    }
}

/// A condition text as written, with its absolute field path: errors (and the command
/// line's lints) inside the text are located at a character offset in it
/// ([`RuleError::at_offset`] at this path). The compiled rule keeps neither (a rule of
/// 100,000 conditions would hold every text and path again); [`condition_texts`] reads them
/// from the document for the lints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceText {
    /// The text.
    pub text: String,
    /// Where it is.
    pub path: FieldPath,
}

/// One v3.1 destination as validated: `{match: ..., weight: ...}`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct DestinationText {
    /// `match` (absent: every provider).
    match_text: Option<String>,
    /// `weight` (default [`DEFAULT_DESTINATION_WEIGHT`]).
    weight: u32,
}

/// One v3.1 condition as validated: `{from: {match}, to: [destinations]}`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct MultiDestText {
    /// `from.match` (absent: every request).
    from: Option<String>,
    /// `to` (absent: traffic disabled).
    to: Option<Vec<DestinationText>>,
}

/// The conditions of a rule whose fields are sound, texts not yet parsed (moved out of the
/// document as read, not copied; their paths are built only for an error).
#[derive(Debug, Clone, PartialEq, Eq)]
enum ConditionTexts {
    /// v3.0 text conditions.
    Text(Vec<String>),
    /// v3.1 from/to conditions.
    MultiDest(Vec<MultiDestText>),
}

/// What a condition does to the candidates once its when-part matched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// v3.0 with an empty or `false` then-part: no provider.
    Blocklist,
    /// v3.0: keep the providers matching every term (`force` decides an empty result).
    /// Conditions with the same then-part share it (the rule stores it once).
    Then(Arc<[Term]>),
    /// v3.1 without `to` (or with an empty `to`): traffic disabled, no provider.
    TrafficDisabled,
    /// v3.1: one non-empty destination, picked with probability weight / sum.
    Destinations(Vec<Destination>),
}

/// A v3.1 destination: a provider subset and its weight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    /// The `to.match` terms (empty: every provider).
    pub terms: Vec<Term>,
    /// The weight (default [`DEFAULT_DESTINATION_WEIGHT`]); a zero weight is never picked.
    pub weight: u32,
}

/// One compiled condition. Its texts are not kept: [`condition_texts`] reads them from the
/// document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    /// When-part terms (empty: every request).
    pub when: Box<[Term]>,
    /// What happens when the when-part matches.
    pub action: Action,
}

/// The texts of condition `item` (one element of `conditions`, at `path`) of a rule of
/// `version`, each with the part it is: `None` for a v3.0 `when => then` text, `Some(side)`
/// for a v3.1 `match` (`from` is the when side, a destination the then side, one entry per
/// destination in order, `None` for a destination without `match`). What the compiled rule
/// was parsed from, read again from the document by the command line's lints.
pub fn condition_texts(
    version: ConfigVersion,
    item: &Value,
    path: &FieldPath,
) -> Vec<(Option<SourceText>, Option<Side>)> {
    let text = |v: Option<&Value>, path: FieldPath| {
        let text = match v? {
            Value::String(s) => s.clone(),
            Value::Bool(b) => b.to_string(),
            _ => return None,
        };
        Some(SourceText { text, path })
    };
    match version {
        ConfigVersion::V30 => vec![(text(Some(item), path.clone()), None)],
        ConfigVersion::V31 => {
            let from = item.get("from").and_then(|f| f.get("match"));
            let mut out = vec![(text(from, path.key("from").key("match")), Some(Side::When))];
            let to = item.get("to").and_then(Value::as_array);
            for (j, d) in to.into_iter().flatten().enumerate() {
                let path = path.key("to").index(j).key("match");
                out.push((text(d.get("match"), path), Some(Side::Then)));
            }
            out
        }
    }
}

impl Condition {
    /// True when the when-part reads the request (method, arguments, attachments).
    pub fn reads_request(&self) -> bool {
        self.when.iter().any(|t| t.key.reads_request())
    }
}

/// A compiled condition rule document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConditionRule {
    /// v3.0 or v3.1.
    pub version: ConfigVersion,
    /// Service or application.
    pub scope: Scope,
    /// `key`, if given.
    pub key: Option<String>,
    /// `enabled` (and `valid`).
    pub enabled: bool,
    /// `force`.
    pub force: bool,
    /// `runtime`: evaluate every when-part per call.
    pub runtime: bool,
    /// `priority`, if given (accepted as Dubbo does; the chain entry decides order).
    pub priority: Option<i64>,
    /// The conditions, applied one after another.
    pub conditions: Vec<Condition>,
    /// `hash_key`: v3.1 destinations are drawn sticky on these request values.
    pub hash_key: Option<StickyKey>,
}

impl ConditionRule {
    /// Compiles a rule as written, reporting every problem at once; `root` is the rule
    /// document's path. The fields are checked first; the condition texts are parsed only
    /// when the fields are sound (a text error is then located inside its scalar).
    pub fn compile(raw: RawConditionRule, root: &FieldPath) -> Result<Self, Vec<RuleError>> {
        // The texts are moved out of the raw rule (not copied), and each is dropped once
        // parsed.
        let (mut rule, texts) = raw.validate(root)?;
        rule.conditions = parse_conditions(texts, &root.key("conditions"))?;
        Ok(rule)
    }

    /// True when every when-part is decided without the request and `runtime` is off: the
    /// route is then answered from prepared state for the prepared consumer.
    pub fn cacheable(&self) -> bool {
        !self.runtime
            && self.hash_key.is_none()
            && !self.conditions.iter().any(Condition::reads_request)
    }
}

/// Parses every condition text, reporting every problem; `cpath` is the path of
/// `conditions`. Key names, values and then-parts are shared through the rule's
/// [`Interner`].
fn parse_conditions(
    texts: ConditionTexts,
    cpath: &FieldPath,
) -> Result<Vec<Condition>, Vec<RuleError>> {
    let mut errors = Vec::new();
    let mut interner = Interner::default();
    let mut conditions = Vec::with_capacity(match &texts {
        ConditionTexts::Text(t) => t.len(),
        ConditionTexts::MultiDest(t) => t.len(),
    });
    match texts {
        ConditionTexts::Text(texts) => {
            for (i, text) in texts.into_iter().enumerate() {
                match parse_text_in(&text, &|| cpath.index(i), i, &mut interner) {
                    Ok(c) => conditions.push(Condition {
                        when: c.when.into_boxed_slice(),
                        action: match c.then {
                            None => Action::Blocklist,
                            Some(terms) => Action::Then(interner.part(terms)),
                        },
                    }),
                    Err(mut es) => errors.append(&mut es),
                }
            }
        }
        ConditionTexts::MultiDest(items) => {
            for (i, item) in items.into_iter().enumerate() {
                let mut parse = |text: Option<&str>, side, path: &dyn Fn() -> FieldPath| match text
                {
                    None => Vec::new(),
                    Some(t) => {
                        parse_match_in(t, side, path, i, &mut interner).unwrap_or_else(|mut es| {
                            errors.append(&mut es);
                            Vec::new()
                        })
                    }
                };
                let when = parse(item.from.as_deref(), Side::When, &|| {
                    cpath.index(i).key("from").key("match")
                });
                let action = match &item.to {
                    None => Action::TrafficDisabled,
                    Some(to) if to.is_empty() => Action::TrafficDisabled,
                    Some(to) => Action::Destinations(
                        to.iter()
                            .enumerate()
                            .map(|(j, d)| Destination {
                                terms: parse(d.match_text.as_deref(), Side::Then, &|| {
                                    cpath.index(i).key("to").index(j).key("match")
                                }),
                                weight: d.weight,
                            })
                            .collect(),
                    ),
                };
                conditions.push(Condition {
                    when: when.into_boxed_slice(),
                    action,
                });
            }
        }
    }
    if errors.is_empty() {
        Ok(conditions)
    } else {
        Err(errors)
    }
}

impl RawConditionRule {
    /// Checks every field, reporting every problem; `root` is the document's path. The
    /// condition texts are moved out of the rule, not yet parsed: the rule returned has no
    /// conditions.
    fn validate(self, root: &FieldPath) -> Result<(ConditionRule, ConditionTexts), Vec<RuleError>> {
        let mut errors = Vec::new();
        let header = self.header.check(root, &mut errors);
        let version = match header.config_version.as_deref() {
            None => ConfigVersion::V30,
            Some(s) => parse_version(s).unwrap_or_else(|| {
                errors.push(RuleError::new(
                    root.key("configVersion"),
                    format!(
                        "unknown configVersion {s:?}: supported are v3.0 (text conditions) \
                         and v3.1 (from/to conditions)"
                    ),
                ));
                ConfigVersion::V30
            }),
        };
        let scope = match header.scope.as_deref() {
            None | Some("service") => Scope::Service,
            Some("application") => Scope::Application,
            Some(other) => {
                errors.push(RuleError::new(
                    root.key("scope"),
                    format!("scope must be `service` or `application`, found {other:?}"),
                ));
                Scope::Service
            }
        };
        let hash_key = match &self.hash_key {
            None | Some(Value::Null) => None,
            Some(_) if version == ConfigVersion::V30 => {
                errors.push(RuleError::new(
                    root.key("hash_key"),
                    "`hash_key` applies to v3.1 weighted destinations (configVersion: v3.1)",
                ));
                None
            }
            Some(v) => match StickyKey::from_value(v, &root.key("hash_key")) {
                Ok(key) => Some(key),
                Err(mut es) => {
                    errors.append(&mut es);
                    None
                }
            },
        };
        let cpath = root.key("conditions");
        let conditions = match self.conditions {
            None | Some(Value::Null) => {
                errors.push(RuleError::new(
                    root.clone(),
                    "missing field `conditions`: a condition rule needs at least one condition",
                ));
                None
            }
            Some(Value::Array(items)) if items.is_empty() => {
                errors.push(RuleError::new(
                    cpath.clone(),
                    "`conditions` is empty: a condition rule needs at least one condition",
                ));
                None
            }
            Some(Value::Array(items)) => Some(match version {
                ConfigVersion::V30 => ConditionTexts::Text(
                    items
                        .into_iter()
                        .enumerate()
                        .filter_map(|(i, item)| text_condition(item, &cpath, i, &mut errors))
                        .collect(),
                ),
                ConfigVersion::V31 => ConditionTexts::MultiDest(
                    items
                        .into_iter()
                        .enumerate()
                        .filter_map(|(i, item)| multi_dest(item, cpath.index(i), &mut errors))
                        .collect(),
                ),
            }),
            Some(other) => {
                errors.push(RuleError::new(
                    cpath.clone(),
                    format!("`conditions` must be a list, found {other}"),
                ));
                None
            }
        };
        match conditions {
            Some(texts) if errors.is_empty() => Ok((
                ConditionRule {
                    version,
                    scope,
                    key: header.key,
                    enabled: header.enabled,
                    force: header.force.unwrap_or(false),
                    runtime: header.runtime.unwrap_or(false),
                    priority: header.priority,
                    conditions: Vec::new(),
                    hash_key,
                },
                texts,
            )),
            _ => Err(errors),
        }
    }
}

/// Parses a `configVersion` as Dubbo does: `v3.1...` is v3.1, a version up to v3.1 is v3.0,
/// anything newer (or not a version) is unknown.
fn parse_version(s: &str) -> Option<ConfigVersion> {
    let lower = s.trim().to_ascii_lowercase();
    if lower.starts_with("v3.1") {
        return Some(ConfigVersion::V31);
    }
    let digits = lower.strip_prefix('v').unwrap_or(&lower);
    let mut parts = digits.split('.');
    let numbers: Option<Vec<u64>> = parts.by_ref().map(|p| p.parse::<u64>().ok()).collect();
    let numbers = numbers?;
    let (major, minor) = (
        numbers.first().copied()?,
        numbers.get(1).copied().unwrap_or(0),
    );
    (major < 3 || (major == 3 && minor == 0)).then_some(ConfigVersion::V30)
}

/// A v3.0 condition text (`conditions[i]`), moved out of the document.
fn text_condition(
    item: Value,
    cpath: &FieldPath,
    i: usize,
    errors: &mut Vec<RuleError>,
) -> Option<String> {
    match item {
        Value::String(s) => Some(s),
        // An unquoted `true`/`false` is a YAML boolean; Dubbo reads it as the text.
        Value::Bool(b) => Some(b.to_string()),
        Value::Object(_) => {
            errors.push(RuleError::new(
                cpath.index(i),
                "a v3.0 condition is a text `when => then`; from/to conditions need \
                 `configVersion: v3.1`",
            ));
            None
        }
        other => {
            errors.push(RuleError::new(
                cpath.index(i),
                format!("a condition is a text `when => then`, found {other}"),
            ));
            None
        }
    }
}

fn match_text(
    value: Option<Value>,
    path: impl FnOnce() -> FieldPath,
    errors: &mut Vec<RuleError>,
) -> Option<String> {
    match value {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s),
        Some(Value::Bool(b)) => Some(b.to_string()),
        Some(other) => {
            errors.push(RuleError::new(
                path(),
                format!("`match` must be a condition text such as \"env=gray\", found {other}"),
            ));
            None
        }
    }
}

fn multi_dest(item: Value, path: FieldPath, errors: &mut Vec<RuleError>) -> Option<MultiDestText> {
    let mut map = match item {
        Value::Object(map) => map,
        item => {
            errors.push(RuleError::new(
                path,
                if item.is_string() {
                    "a v3.1 condition is a mapping with `from` and `to`; text conditions need \
                     `configVersion: v3.0`"
                        .to_string()
                } else {
                    format!("a v3.1 condition is a mapping with `from` and `to`, found {item}")
                },
            ));
            return None;
        }
    };
    let before = errors.len();
    let from = match map.remove("from") {
        None | Some(Value::Null) => None,
        Some(Value::Object(mut f)) => {
            match_text(f.remove("match"), || path.key("from").key("match"), errors)
        }
        Some(other) => {
            errors.push(RuleError::new(
                path.key("from"),
                format!("`from` must be a mapping with `match`, found {other}"),
            ));
            None
        }
    };
    let to = match map.remove("to") {
        None | Some(Value::Null) => None,
        Some(Value::Array(items)) => Some(
            items
                .into_iter()
                .enumerate()
                .filter_map(|(j, d)| destination(d, path.key("to").index(j), errors))
                .collect(),
        ),
        Some(other) => {
            errors.push(RuleError::new(
                path.key("to"),
                format!("`to` must be a list of destinations `{{match, weight}}`, found {other}"),
            ));
            None
        }
    };
    (errors.len() == before).then_some(MultiDestText { from, to })
}

fn destination(
    item: Value,
    path: FieldPath,
    errors: &mut Vec<RuleError>,
) -> Option<DestinationText> {
    let mut map = match item {
        Value::Object(map) => map,
        item => {
            errors.push(RuleError::new(
                path,
                format!("a destination is a mapping `{{match, weight}}`, found {item}"),
            ));
            return None;
        }
    };
    let before = errors.len();
    let match_text = match_text(map.remove("match"), || path.key("match"), errors);
    let weight = match map.get("weight") {
        None | Some(Value::Null) => DEFAULT_DESTINATION_WEIGHT,
        Some(v) => match integer(v).and_then(|w| u32::try_from(w).ok()) {
            Some(w) => w,
            None => {
                errors.push(RuleError::new(
                    path.key("weight"),
                    routechain_core::integer_range_message("weight", v, 0, u32::MAX),
                ));
                DEFAULT_DESTINATION_WEIGHT
            }
        },
    };
    (errors.len() == before).then_some(DestinationText { match_text, weight })
}

#[cfg(test)]
mod tests {
    use super::*;
    use routechain_core::RuleDoc;
    use serde_json::json;

    fn validate(v: Value) -> Result<(ConditionRule, ConditionTexts), Vec<RuleError>> {
        let root = FieldPath::root();
        let raw: RawConditionRule = RuleDoc::new(&v, &root).parse().map_err(|e| vec![e])?;
        raw.validate(&root)
    }

    #[test]
    fn valid_false_disables_the_rule_like_enabled_false() {
        let (d, _) = validate(json!({"valid": false, "conditions": ["a=b => c=d"]})).unwrap();
        assert!(!d.enabled);
        let (d, _) =
            validate(json!({"valid": "true", "enabled": true, "conditions": ["a=b => c=d"]}))
                .unwrap();
        assert!(d.enabled);
        let errors =
            validate(json!({"enabled": false, "valid": 3, "conditions": ["a=b"]})).unwrap_err();
        assert_eq!(errors[0].path.to_string(), "valid");
    }

    #[test]
    fn defaults_and_v30_text() {
        let (d, texts) = validate(json!({"conditions": ["a=b => c=d", true]})).unwrap();
        assert_eq!(d.version, ConfigVersion::V30);
        assert_eq!(d.scope, Scope::Service);
        assert!(d.enabled && !d.force && !d.runtime);
        let ConditionTexts::Text(t) = texts else {
            panic!("v3.0 expected")
        };
        assert_eq!(t[1], "true");
    }

    #[test]
    fn a_then_part_written_alike_is_compiled_and_prepared_once() {
        let root = FieldPath::root();
        let v = json!({"conditions": [
            "method = a => region = hz & env != gray",
            "method = b => region = hz & env != gray",
            "method = c => region = bj",
        ]});
        let raw: RawConditionRule = RuleDoc::new(&v, &root).parse().unwrap();
        let rule = Arc::new(ConditionRule::compile(raw, &root).unwrap());
        let then = |i: usize| match &rule.conditions[i].action {
            Action::Then(terms) => terms.clone(),
            other => panic!("a then-part expected, found {other:?}"),
        };
        assert!(Arc::ptr_eq(&then(0), &then(1)));
        assert!(!Arc::ptr_eq(&then(0), &then(2)));
        // Key names are shared too: `region` is stored once.
        assert!(Arc::ptr_eq(&then(0)[0].name, &then(2)[0].name));

        let snapshot = routechain_core::Snapshot::parse_lines(
            1,
            "dubbo://10.0.0.1:20880/s?region=hz&env=prod\ndubbo://10.0.0.2:20880/s?region=bj\n",
        )
        .unwrap();
        let consumer = routechain_core::Url::empty();
        let cx = routechain_core::PrepareContext {
            snapshot: &snapshot,
            consumer: &consumer,
            service: None,
        };
        let prepared = super::super::PreparedCondition::build(&rule, &cx);
        let set = |i: usize| match &prepared.conditions[i].action {
            super::super::prepared::PreparedAction::Then(set) => set.clone(),
            _ => panic!("a then-part expected"),
        };
        assert!(Arc::ptr_eq(&set(0), &set(1)));
        assert!(!Arc::ptr_eq(&set(0), &set(2)));
    }

    #[test]
    fn versions_as_dubbo_reads_them() {
        for (s, v) in [
            ("v3.0", Some(ConfigVersion::V30)),
            ("v2.7", Some(ConfigVersion::V30)),
            ("V3.1", Some(ConfigVersion::V31)),
            ("v3.1.2", Some(ConfigVersion::V31)),
            ("v3.2", None),
            ("v4.0", None),
            ("banana", None),
        ] {
            assert_eq!(parse_version(s), v, "{s}");
        }
    }

    #[test]
    fn every_problem_at_once() {
        let e = validate(json!({
            "configVersion": "v3.1",
            "scope": "cluster",
            "force": "maybe",
            "conditions": [
                "a => b",
                {"from": {"match": 3}, "to": [{"match": "x=y", "weight": "heavy"}, {"weight": -1}]},
            ]
        }))
        .unwrap_err();
        let paths: Vec<String> = e.iter().map(|e| e.path.to_string()).collect();
        assert_eq!(
            paths,
            [
                "force",
                "scope",
                "conditions[0]",
                "conditions[1].from.match",
                "conditions[1].to[0].weight",
                "conditions[1].to[1].weight"
            ]
        );
        assert!(e[4].message.contains("heavy"), "{}", e[4].message);
    }

    #[test]
    fn unknown_version_and_empty_conditions_are_errors() {
        let e = validate(json!({"configVersion": "v4.0", "conditions": []})).unwrap_err();
        assert_eq!(e.len(), 2);
        assert!(e[0].message.contains("v4.0"));
        assert_eq!(e[1].path.to_string(), "conditions");
        assert!(validate(json!({"force": true})).is_err());
        assert!(validate(json!([1])).is_err());
    }

    #[test]
    fn v31_structure() {
        let (_, texts) = validate(json!({
            "configVersion": "v3.1",
            "conditions": [
                {"from": {"match": "env=gray"}, "to": [{"match": "env!=gray"}, {"match": "env=gray", "weight": "900"}]},
                {"from": {"match": "tag=x"}},
                {"to": [{"match": "version=v1"}]},
            ]
        }))
        .unwrap();
        let ConditionTexts::MultiDest(c) = texts else {
            panic!("v3.1 expected")
        };
        let to = c[0].to.as_ref().unwrap();
        assert_eq!((to[0].weight, to[1].weight), (100, 900));
        assert!(c[1].to.is_none());
        assert!(c[2].from.is_none());
        assert_eq!(c[0].from.as_deref(), Some("env=gray"));
    }
}
