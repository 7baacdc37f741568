//! What Dubbo's own rule documents (condition, tag, affinity) share: the boolean as Dubbo
//! reads one and the `enabled`/`valid` pair.
//!
//! Every Dubbo rule carries the same header (`configVersion`, `scope`, `key`, `enabled`,
//! `force`, `runtime`, `valid`, `dynamic`, `priority`, from Dubbo's `AbstractRouterRule`).
//! Each schema still lists those fields in its own serde struct: serde cannot keep the field
//! path of an error inside a flattened header. Unknown fields are ignored, as Dubbo ignores
//! them; `routechain check` warns about them (RC107).

use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize};

/// A boolean as Dubbo reads one (`Boolean.parseBoolean(value.toString())`): a YAML boolean,
/// or the strings `true` / `false` in any case. Any other string is an error here (Dubbo
/// would read it as `false`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(transparent)]
pub struct DubboBool(pub bool);

impl DubboBool {
    /// The value of an optional flag: `default` when the field is absent.
    pub fn or(flag: Option<DubboBool>, default: bool) -> bool {
        flag.map_or(default, |b| b.0)
    }
}

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

impl<'de> Deserialize<'de> for DubboBool {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = DubboBool;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("true or false")
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<DubboBool, E> {
                Ok(DubboBool(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<DubboBool, E> {
                parse_bool(v)
                    .map(DubboBool)
                    .ok_or_else(|| E::invalid_value(de::Unexpected::Str(v), &self))
            }
        }
        d.deserialize_any(V)
    }
}

/// Whether a Dubbo rule applies: `enabled` and `valid`, both true when absent (Dubbo
/// ignores a rule with either set to false).
pub fn is_enabled(enabled: Option<DubboBool>, valid: Option<DubboBool>) -> bool {
    DubboBool::or(enabled, true) && DubboBool::or(valid, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn booleans_read_as_dubbo_reads_them() {
        let cases = [
            (json!(true), Some(true)),
            (json!(false), Some(false)),
            (json!("TRUE"), Some(true)),
            (json!("False"), Some(false)),
            (json!("yes"), None),
            (json!(1), None),
        ];
        for (value, want) in cases {
            let got = serde_json::from_value::<DubboBool>(value.clone())
                .ok()
                .map(|b| b.0);
            assert_eq!(got, want, "{value}");
        }
    }

    #[test]
    fn enabled_needs_enabled_and_valid() {
        let (t, f) = (Some(DubboBool(true)), Some(DubboBool(false)));
        let cases = [
            (None, None, true),
            (t, None, true),
            (None, t, true),
            (f, None, false),
            (None, f, false),
            (t, f, false),
        ];
        for (enabled, valid, want) in cases {
            assert_eq!(is_enabled(enabled, valid), want, "{enabled:?} {valid:?}");
        }
    }
}
