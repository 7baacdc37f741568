//! The canary decision, independent of the plugin ABI (so a compiled-in router or a
//! benchmark can run the very same code).
//!
//! A caller is identified by the value of one attachment (`header`) or attribute
//! (`attribute`). Its bucket is a stable hash of that value modulo 10 000; it is a canary
//! caller when `bucket < percent × 100`. Raising `percent` only adds callers: a caller in the
//! canary at 5 % is still in it at 10 %. Callers without the key are never canary callers.
//!
//! Canary callers keep only the providers whose `param` equals `value` (default
//! `canary=true`); the others keep only the rest. When the caller's group has no provider
//! among the candidates, the candidates are kept unchanged, unless `force: true`, which
//! leaves none.

use serde::Deserialize;

/// The number of buckets callers hash into.
pub const BUCKETS: u64 = 10_000;

/// The config as written in the chain entry's `config`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CanaryConfig {
    /// The share of callers sent to the canary, 0 to 100 (decimals allowed: 0.5).
    pub percent: f64,
    /// The attachment whose value identifies the caller.
    #[serde(default)]
    pub header: Option<String>,
    /// The attribute whose value identifies the caller (instead of `header`).
    #[serde(default)]
    pub attribute: Option<String>,
    /// The provider param that marks canary providers.
    #[serde(default = "default_param")]
    pub param: String,
    /// The value of `param` on canary providers.
    #[serde(default = "default_value")]
    pub value: String,
    /// When the caller's group has no provider among the candidates: `false` keeps the
    /// candidates, `true` leaves none.
    #[serde(default)]
    pub force: bool,
}

fn default_param() -> String {
    "canary".to_string()
}
fn default_value() -> String {
    "true".to_string()
}

/// Where the caller key is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// An attachment of the request.
    Attachment(String),
    /// An attribute of the request.
    Attribute(String),
}

/// A compiled canary rule.
#[derive(Debug, Clone)]
pub struct CanaryRule {
    /// Callers with `bucket < threshold` are canary callers.
    pub threshold: u64,
    /// The percent as configured.
    pub percent: f64,
    /// Where the caller key is read.
    pub key: KeySource,
    /// The provider param marking canary providers.
    pub param: String,
    /// Its value on canary providers.
    pub value: String,
    /// See [`CanaryConfig::force`].
    pub force: bool,
}

impl CanaryRule {
    /// Parses and checks the JSON config.
    pub fn from_json(text: &str) -> Result<Self, String> {
        let config: CanaryConfig =
            serde_json::from_str(text).map_err(|e| format!("invalid canary config: {e}"))?;
        Self::new(config)
    }

    /// Checks a config.
    pub fn new(config: CanaryConfig) -> Result<Self, String> {
        if !config.percent.is_finite() || !(0.0..=100.0).contains(&config.percent) {
            return Err(format!(
                "`percent` must be between 0 and 100, got {}",
                config.percent
            ));
        }
        let key = match (config.header, config.attribute) {
            (Some(h), None) if !h.is_empty() => KeySource::Attachment(h),
            (None, Some(a)) if !a.is_empty() => KeySource::Attribute(a),
            (Some(_), Some(_)) => {
                return Err("give `header` or `attribute`, not both".to_string());
            }
            _ => {
                return Err(
                    "`header` (an attachment) or `attribute` names the caller key".to_string(),
                );
            }
        };
        if config.param.is_empty() {
            return Err("`param` must not be empty".to_string());
        }
        Ok(CanaryRule {
            threshold: (config.percent * (BUCKETS as f64 / 100.0)).round() as u64,
            percent: config.percent,
            key,
            param: config.param,
            value: config.value,
            force: config.force,
        })
    }

    /// True when a caller with this key value goes to the canary.
    pub fn is_canary_caller(&self, key_value: Option<&str>) -> bool {
        key_value.is_some_and(|v| bucket(v) < self.threshold)
    }

    /// Precomputes the canary and the stable provider sets; `get(i, key)` reads provider
    /// `i`'s param.
    pub fn prepare<'a>(
        &self,
        len: usize,
        get: impl Fn(usize, &str) -> Option<&'a str>,
    ) -> CanarySets {
        let words = len.div_ceil(64);
        let mut canary = vec![0u64; words];
        let mut stable = vec![0u64; words];
        for i in 0..len {
            let set = if get(i, &self.param) == Some(self.value.as_str()) {
                &mut canary
            } else {
                &mut stable
            };
            set[i / 64] |= 1 << (i % 64);
        }
        CanarySets {
            canary,
            stable,
            force: self.force,
        }
    }
}

/// What the router did to one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Narrowed to the caller's group.
    Narrowed {
        /// True for a canary caller.
        canary: bool,
    },
    /// The caller's group had no candidate: kept unchanged.
    Kept {
        /// True for a canary caller.
        canary: bool,
    },
    /// The caller's group had no candidate and `force` left none.
    Emptied {
        /// True for a canary caller.
        canary: bool,
    },
}

/// The canary and stable provider sets of one snapshot, as bitset words.
#[derive(Debug, Clone)]
pub struct CanarySets {
    /// Providers with `param == value`.
    pub canary: Vec<u64>,
    /// The other providers.
    pub stable: Vec<u64>,
    force: bool,
}

impl CanarySets {
    /// Narrows `words` for a canary caller (`canary = true`) or another caller.
    pub fn route(&self, canary: bool, words: &mut [u64]) -> Outcome {
        let target = if canary { &self.canary } else { &self.stable };
        let hit = words.iter().zip(target).any(|(a, b)| a & b != 0);
        if hit {
            for (i, w) in words.iter_mut().enumerate() {
                *w &= target.get(i).copied().unwrap_or(0);
            }
            Outcome::Narrowed { canary }
        } else if self.force {
            words.fill(0);
            Outcome::Emptied { canary }
        } else {
            Outcome::Kept { canary }
        }
    }
}

/// The bucket of a caller key, `0..BUCKETS`: FNV-1a (64-bit) of the UTF-8 bytes, mixed with
/// MurmurHash3's 64-bit finalizer. Stable across versions, platforms and processes.
pub fn bucket(key: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key.as_bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    h % BUCKETS
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(json: &str) -> CanaryRule {
        CanaryRule::from_json(json).unwrap()
    }

    /// Providers 0..6; 1 and 4 carry canary=true, 5 carries canary=false.
    fn sets(r: &CanaryRule) -> CanarySets {
        let params = [None, Some("true"), None, None, Some("true"), Some("false")];
        r.prepare(params.len(), |i, key| {
            assert_eq!(key, r.param);
            params[i]
        })
    }

    #[test]
    fn buckets_are_stable_known_values() {
        // Pinned: changing the hash would move callers between groups on upgrade.
        let pinned: Vec<u64> = ["", "alice", "bob", "user-42"]
            .iter()
            .map(|k| bucket(k))
            .collect();
        // Values computed independently (Python) from the definition in `bucket`'s doc.
        assert_eq!(pinned, vec![4342, 7236, 9952, 1453]);
    }

    #[test]
    fn the_share_of_canary_callers_follows_percent() {
        for (percent, json) in [
            (0.0, r#"{"percent":0,"header":"h"}"#),
            (5.0, r#"{"percent":5,"header":"h"}"#),
            (37.5, r#"{"percent":37.5,"header":"h"}"#),
            (100.0, r#"{"percent":100,"header":"h"}"#),
        ] {
            let r = rule(json);
            let n = 20_000;
            let hits = (0..n)
                .filter(|i| r.is_canary_caller(Some(&format!("caller-{i}"))))
                .count();
            let share = hits as f64 * 100.0 / n as f64;
            assert!(
                (share - percent).abs() <= 1.0,
                "percent {percent}: got {share}"
            );
        }
    }

    #[test]
    fn raising_percent_only_adds_callers_and_no_key_is_never_canary() {
        let low = rule(r#"{"percent":5,"header":"h"}"#);
        let high = rule(r#"{"percent":10,"header":"h"}"#);
        for i in 0..5000 {
            let k = format!("u{i}");
            if low.is_canary_caller(Some(&k)) {
                assert!(high.is_canary_caller(Some(&k)), "{k}");
            }
        }
        assert!(!rule(r#"{"percent":100,"header":"h"}"#).is_canary_caller(None));
    }

    #[test]
    fn callers_go_to_their_group_or_keep_the_input() {
        let r = rule(r#"{"percent":50,"attribute":"user"}"#);
        let s = sets(&r);
        assert_eq!(s.canary, vec![0b01_0010]);
        assert_eq!(s.stable, vec![0b10_1101]);
        // (canary caller?, input, expected output, outcome)
        let table = [
            (
                true,
                0b11_1111,
                0b01_0010,
                Outcome::Narrowed { canary: true },
            ),
            (
                false,
                0b11_1111,
                0b10_1101,
                Outcome::Narrowed { canary: false },
            ),
            (
                true,
                0b00_0011,
                0b00_0010,
                Outcome::Narrowed { canary: true },
            ),
            (true, 0b10_0001, 0b10_0001, Outcome::Kept { canary: true }),
            (false, 0b01_0010, 0b01_0010, Outcome::Kept { canary: false }),
        ];
        for (canary, input, expected, outcome) in table {
            let mut words = [input];
            assert_eq!(s.route(canary, &mut words), outcome);
            assert_eq!(words, [expected], "canary={canary} input={input:b}");
        }
    }

    #[test]
    fn force_leaves_none_when_the_group_is_missing() {
        let r = rule(r#"{"percent":50,"header":"h","force":true}"#);
        let s = sets(&r);
        let mut words = [0b10_0001];
        assert_eq!(s.route(true, &mut words), Outcome::Emptied { canary: true });
        assert_eq!(words, [0]);
    }

    #[test]
    fn custom_param_and_value_and_many_words() {
        let r = rule(r#"{"percent":1,"header":"h","param":"stage","value":"beta"}"#);
        let s = r.prepare(130, |i, key| {
            (key == "stage" && (i == 3 || i == 129)).then_some("beta")
        });
        assert_eq!(s.canary, vec![1 << 3, 0, 1 << 1]);
        let mut words = [u64::MAX, u64::MAX, 0b11];
        assert_eq!(
            s.route(true, &mut words),
            Outcome::Narrowed { canary: true }
        );
        assert_eq!(words, [1 << 3, 0, 1 << 1]);
    }

    #[test]
    fn bad_configs_are_refused_with_a_reason() {
        for (json, needle) in [
            (r#"{"percent":5}"#, "names the caller key"),
            (r#"{"percent":5,"header":"a","attribute":"b"}"#, "not both"),
            (r#"{"percent":101,"header":"a"}"#, "between 0 and 100"),
            (r#"{"percent":-1,"header":"a"}"#, "between 0 and 100"),
            (r#"{"header":"a"}"#, "missing field `percent`"),
            (
                r#"{"percent":5,"header":"a","bogus":1}"#,
                "unknown field `bogus`",
            ),
            (r#"{"percent":5,"header":"a","param":""}"#, "`param`"),
            ("not json", "invalid canary config"),
        ] {
            let e = CanaryRule::from_json(json).unwrap_err();
            assert!(e.contains(needle), "{json}: {e}");
        }
    }
}
