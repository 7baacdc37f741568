//! The affinity rule: the document Dubbo keeps under `<key>.affinity-router`, as written
//! ([`RawAffinityRule`]) and compiled ([`AffinityRule`]).
//!
//! ```yaml
//! configVersion: v3.1     # required, must start with v3.1
//! scope: service          # or application
//! key: org.apache.dubbo.samples.CommentService
//! enabled: true
//! runtime: true
//! affinityAware:
//!   key: region           # the parameter compared between consumer and providers
//!   ratio: 20             # percent of the input that must match (0 to 100, may be fractional)
//! ```

use routechain_core::{FieldPath, RuleError};
use serde::Deserialize;
use serde_json::Value;

use crate::dubbo::RawHeader;

/// The ratio used when `affinityAware.ratio` is absent (Dubbo's default: any match is enough).
pub const DEFAULT_RATIO: f64 = 0.0;

/// The affinity rule as written. Unknown fields are ignored, as Dubbo ignores them
/// (`routechain check` warns about them, with a "did you mean").
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawAffinityRule {
    /// The header: `configVersion` must start with `v3.1`; `scope` `application` runs at
    /// Dubbo's provider-application priority; `enabled: false` passes the input unchanged;
    /// `force` and `runtime` are read (the affinity router has no force, and its answers
    /// are precomputed per snapshot either way).
    #[serde(flatten)]
    pub(crate) header: RawHeader,
    /// `affinityAware`: required.
    pub affinity_aware: Option<RawAffinityAware>,
}

/// `affinityAware` as written (unknown fields ignored, as in Dubbo).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct RawAffinityAware {
    /// The parameter to compare.
    pub key: Option<String>,
    /// The ratio in percent: a number or a numeric string.
    pub ratio: Option<Value>,
}

/// A compiled affinity rule.
#[derive(Debug, Clone, PartialEq)]
pub struct AffinityRule {
    /// `enabled` and `valid`.
    pub enabled: bool,
    /// `scope`, if written.
    pub scope: Option<String>,
    /// `affinityAware.key`.
    pub key: String,
    /// `affinityAware.ratio`, 0 to 100.
    pub ratio: f64,
}

impl AffinityRule {
    /// True for `scope: application` (Dubbo's provider-application affinity router, order 135;
    /// the service one runs at 130).
    pub fn is_application_scope(&self) -> bool {
        self.scope.as_deref() == Some("application")
    }
}

impl AffinityRule {
    /// Compiles a rule as written, reporting every problem at once; `root` is the rule
    /// document's path.
    pub fn compile(raw: RawAffinityRule, root: &FieldPath) -> Result<AffinityRule, Vec<RuleError>> {
        let mut errors = Vec::new();
        let header = raw.header.check(root, &mut errors);
        match header.config_version.as_deref() {
            Some(v) if v.starts_with("v3.1") => {}
            Some(v) => errors.push(RuleError::new(
                root.key("configVersion"),
                format!("an affinity rule has configVersion v3.1, not {v:?}"),
            )),
            // A configVersion that is no string is reported by the header check.
            None if raw.header.config_version.is_none_or(|v| v.is_null()) => {
                errors.push(RuleError::new(
                    root.clone(),
                    "missing field `configVersion`: an affinity rule has configVersion v3.1",
                ));
            }
            None => {}
        }
        let aware_path = root.key("affinityAware");
        let mut key = String::new();
        let mut ratio = DEFAULT_RATIO;
        match raw.affinity_aware {
            None => errors.push(RuleError::new(
                root.clone(),
                "missing field `affinityAware`: give {key, ratio}",
            )),
            Some(aware) => {
                match aware.key {
                    Some(k) if !k.trim().is_empty() => key = k,
                    _ => errors.push(RuleError::new(
                        aware_path.clone(),
                        "`affinityAware.key` is required: the parameter to compare",
                    )),
                }
                let ratio_path = aware_path.key("ratio");
                let parsed = match &aware.ratio {
                    None | Some(Value::Null) => Some(DEFAULT_RATIO),
                    Some(Value::Number(n)) => n.as_f64(),
                    Some(Value::String(s)) => s.trim().parse::<f64>().ok(),
                    Some(_) => None,
                };
                match parsed {
                    Some(r) if (0.0..=100.0).contains(&r) => ratio = r,
                    Some(r) => errors.push(RuleError::new(
                        ratio_path,
                        format!("ratio {r} is outside 0 to 100"),
                    )),
                    None => errors.push(RuleError::new(
                        ratio_path,
                        "ratio must be a number from 0 to 100",
                    )),
                }
            }
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(AffinityRule {
            enabled: header.enabled,
            scope: header.scope,
            key,
            ratio,
        })
    }
}
