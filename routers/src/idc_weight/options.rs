//! The IDC-weight rule's health and stickiness options, beyond Dubbo: `spillover`
//! (Envoy-style overprovisioning), `panic_threshold`, `hash_key` (sticky draws) and
//! `idc_cidrs` (IDCs inferred from subnets), as written and as validated.
//!
//! ```yaml
//! spillover: {overprovisioning: 1.4}   # IDC weight × min(1, 1.4 × healthy / total)
//! panic_threshold: 50                  # % healthy below which a set ignores health (0: never)
//! hash_key: "attributes[user]"         # or attachments[K], arguments[N], consumer.host, a list
//! idc_cidrs: {mt: ["10.20.0.0/16"], zf: ["10.30.0.0/16", "10.31.0.0/16"]}
//! ```
//!
//! Each is optional; a rule without them routes exactly as before.

use routechain_core::{FieldPath, RuleError, StickyKey};
use serde::Deserialize;
use serde_json::Value;

use super::cidrs::IdcCidrs;
use super::rule::RawIdcWeightRule;

/// The default overprovisioning factor (Envoy's 1.4).
pub const DEFAULT_OVERPROVISIONING: f64 = 1.4;

/// The largest overprovisioning factor accepted.
pub const MAX_OVERPROVISIONING: f64 = 100.0;

/// `spillover` as written.
#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawSpillover {
    /// The overprovisioning factor (default 1.4): an IDC keeps its whole weight while its
    /// healthy share is at least `1 / overprovisioning`.
    pub overprovisioning: Option<Value>,
}

/// The validated options.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HealthOptions {
    /// `spillover.overprovisioning` in thousandths (1.4 → 1400); `None`: no spillover.
    pub overprovisioning: Option<u32>,
    /// `panic_threshold` in percent; 0: never in panic.
    pub panic_threshold: u32,
    /// `hash_key`: the draws are sticky on these request values.
    pub hash_key: Option<StickyKey>,
    /// `idc_cidrs`: IDC by subnet, for URLs without the IDC param.
    pub idc_cidrs: IdcCidrs,
}

impl HealthOptions {
    /// Validates the options of `raw`, pushing every problem to `errors`; `idc_of` resolves
    /// an IDC name of `idcs`, `known` lists them for messages.
    pub(super) fn check(
        raw: &RawIdcWeightRule,
        base: &FieldPath,
        idc_of: impl Fn(&str) -> Option<usize>,
        known: &str,
        errors: &mut Vec<RuleError>,
    ) -> HealthOptions {
        let mut options = HealthOptions::default();
        if let Some(s) = &raw.spillover {
            let path = base.key("spillover").key("overprovisioning");
            options.overprovisioning = match &s.overprovisioning {
                None | Some(Value::Null) => Some((DEFAULT_OVERPROVISIONING * 1000.0) as u32),
                Some(v) => match v.as_f64() {
                    Some(f) if (1.0..=MAX_OVERPROVISIONING).contains(&f) => {
                        Some((f * 1000.0).round() as u32)
                    }
                    Some(f) => {
                        errors.push(RuleError::new(
                            path,
                            format!(
                                "overprovisioning {f} is out of range: it is a factor from 1 (spill as soon as one provider is degraded) to {MAX_OVERPROVISIONING}, e.g. 1.4"
                            ),
                        ));
                        None
                    }
                    None => {
                        errors.push(RuleError::new(
                            path,
                            format!("overprovisioning must be a number such as 1.4, found {v}"),
                        ));
                        None
                    }
                },
            };
        }
        if let Some(v) = raw.panic_threshold.as_ref().filter(|v| !v.is_null()) {
            match v.as_u64() {
                Some(p) if p <= 100 => options.panic_threshold = p as u32,
                _ => errors.push(RuleError::new(
                    base.key("panic_threshold"),
                    format!(
                        "{} (a percent; 0: never)",
                        routechain_core::integer_range_message("panic_threshold", v, 0, 100)
                    ),
                )),
            }
        }
        if let Some(v) = raw.hash_key.as_ref().filter(|v| !v.is_null()) {
            match StickyKey::from_value(v, &base.key("hash_key")) {
                Ok(key) => options.hash_key = Some(key),
                Err(mut es) => errors.append(&mut es),
            }
        }
        if let Some(cidrs) = &raw.idc_cidrs {
            options.idc_cidrs =
                IdcCidrs::compile(cidrs, &base.key("idc_cidrs"), idc_of, known, errors);
        }
        options
    }
}
