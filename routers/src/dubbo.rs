//! What Dubbo's own rule documents (condition, tag, affinity, mesh) share: the boolean as
//! Dubbo reads one, the `enabled`/`valid` pair, and Dubbo's `StringMatch` (a tag rule's
//! `match` value and the mesh rule's string matches).
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
