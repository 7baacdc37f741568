//! Compiled matchers of the condition language: keys, value patterns, and one key's
//! match/mismatch sets ([`Term`]).
//!
//! Everything here is built once when a rule is compiled. Matching a value is a few byte
//! compares: no allocation, no regex. Key names and values are `Arc<str>` shared through
//! the rule (the parser interns them), so a name written in 10,000 conditions is stored
//! once.

use std::sync::Arc;

use routechain_core::{Request, Url};

/// Where a key's value comes from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Key {
    /// `method` / `methods` in a when-part: the request's method (the consumer URL's
    /// parameter of that name when the request has no method, as Dubbo with no invocation).
    Method(Arc<str>),
    /// `arguments[n]` in a when-part: the string form of argument `n`.
    Argument(usize),
    /// `attachments[k]` in a when-part: attachment `k`.
    Attachment(Arc<str>),
    /// Any other key in a when-part: the consumer URL (parameters and derived keys).
    Consumer(Arc<str>),
    /// Any key in a then-part: each provider URL (parameters and derived keys).
    Provider(Arc<str>),
    /// A key whose value is never present: `arguments`/`attachments` without a valid
    /// `[...]`, or either of them in a then-part (a provider has no invocation).
    Absent,
}

impl Key {
    /// True when the value is read from the request (method, arguments, attachments).
    pub fn reads_request(&self) -> bool {
        matches!(self, Key::Method(_) | Key::Argument(_) | Key::Attachment(_))
    }

    /// For a when-part: `pred(value)` when the key has a value, `false` when it is absent
    /// (an absent key never matches, not even `!=`).
    pub fn when_holds(
        &self,
        request: &Request,
        consumer: &Url,
        pred: impl FnOnce(&str) -> bool,
    ) -> bool {
        match self {
            Key::Method(name) => match request.method.as_deref() {
                Some(m) => pred(m),
                None => consumer.get(name).is_some_and(pred),
            },
            Key::Argument(n) => request.with_argument_str(*n, pred).unwrap_or(false),
            Key::Attachment(k) => request.attachments.get(k).is_some_and(pred),
            Key::Consumer(k) => consumer.get(k).is_some_and(pred),
            Key::Provider(_) | Key::Absent => false,
        }
    }
}

/// A value pattern.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Pattern {
    /// `*`: any value.
    Any,
    /// An exact, case-sensitive value.
    Exact(Arc<str>),
    /// A glob with one or more `*`.
    Glob(Arc<str>),
    /// An inclusive integer range `a~b`, `~b` or `a~`.
    Range {
        /// Lower bound, if any.
        low: Option<i64>,
        /// Upper bound, if any.
        high: Option<i64>,
    },
    /// `$name` in a then-part: the consumer URL's value of `name`, itself matched as a glob.
    ConsumerRef(Arc<str>),
}

impl Pattern {
    /// True when `value` matches; `consumer` resolves `$name` references.
    pub fn matches(&self, value: &str, consumer: Option<&Url>) -> bool {
        match self {
            Pattern::Any => true,
            Pattern::Exact(e) => **e == *value,
            Pattern::Glob(g) => glob_match(g, value),
            Pattern::Range { low, high } => in_range(*low, *high, value),
            Pattern::ConsumerRef(name) => consumer
                .and_then(|c| c.get(name))
                .is_some_and(|p| glob_match(p, value)),
        }
    }

    /// True for a `$name` reference.
    pub fn is_consumer_ref(&self) -> bool {
        matches!(self, Pattern::ConsumerRef(_))
    }
}

/// Dubbo's glob: `*` alone matches anything (even an empty value); otherwise an empty value
/// matches only an empty pattern; a pattern without `*` is exact; each `*` matches any run
/// of characters (Dubbo honours only the last `*`; routechain honours all of them).
pub fn glob_match(pattern: &str, value: &str) -> bool {
    if pattern == "*" {
        return true;
    }
    if value.is_empty() || pattern.is_empty() {
        return value.is_empty() && pattern.is_empty();
    }
    if !pattern.contains('*') {
        return pattern == value;
    }
    let (p, v) = (pattern.as_bytes(), value.as_bytes());
    let (mut pi, mut vi) = (0, 0);
    // Position after the last `*` seen in the pattern and the value position it resumes at.
    let mut star: Option<(usize, usize)> = None;
    while vi < v.len() {
        if pi < p.len() && p[pi] == b'*' {
            star = Some((pi + 1, vi));
            pi += 1;
        } else if pi < p.len() && p[pi] == v[vi] {
            pi += 1;
            vi += 1;
        } else if let Some((sp, sv)) = star {
            pi = sp;
            vi = sv + 1;
            star = Some((sp, sv + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

/// True when `value` is an integer within the bounds; a non-integer never matches.
pub fn in_range(low: Option<i64>, high: Option<i64>, value: &str) -> bool {
    match value.parse::<i64>() {
        Ok(n) => low.is_none_or(|l| n >= l) && high.is_none_or(|h| n <= h),
        Err(_) => false,
    }
}

/// One key of a condition side with its `=` patterns and `!=` patterns.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Term {
    /// The key as written (after `consumer.`/`provider.` removal).
    pub name: Arc<str>,
    /// Where the value comes from.
    pub key: Key,
    /// `=` patterns.
    pub matches: Box<[Pattern]>,
    /// `!=` patterns.
    pub mismatches: Box<[Pattern]>,
}

impl Term {
    /// Dubbo's decision for one key: absent never matches; only `=`: any hit; only `!=`:
    /// no hit; both: a `!=` hit loses, else any `=` hit; no pattern at all: no match.
    pub fn matches_value(&self, value: Option<&str>, consumer: Option<&Url>) -> bool {
        let Some(value) = value else {
            return false;
        };
        if self.matches.is_empty() && self.mismatches.is_empty() {
            return false;
        }
        if self.mismatches.iter().any(|p| p.matches(value, consumer)) {
            return false;
        }
        self.matches.is_empty() || self.matches.iter().any(|p| p.matches(value, consumer))
    }

    /// Evaluates the term as a when-part term against a request and a consumer.
    pub fn matches_when(&self, request: &Request, consumer: &Url) -> bool {
        self.key
            .when_holds(request, consumer, |v| self.matches_value(Some(v), None))
    }

    /// True when a pattern is a `$name` reference.
    pub fn has_consumer_ref(&self) -> bool {
        self.matches
            .iter()
            .chain(&self.mismatches)
            .any(Pattern::is_consumer_ref)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_with_any_number_of_stars() {
        let cases = [
            ("*", "", true),
            ("*", "abc", true),
            ("10.20.*", "10.20.3.3", true),
            ("10.20.*", "10.21.3.3", false),
            ("*:20880", "1.2.3.4:20880", true),
            ("*:20880", "1.2.3.4:20881", false),
            ("a*c", "abbc", true),
            ("a*c", "abcd", false),
            ("*.3.*", "10.20.3.3", true),
            ("*.3.*", "10.20.4.4", false),
            ("a*b*c", "axxbyyc", true),
            ("a*b*c", "axxcyyb", false),
            ("**", "x", true),
            ("a*", "", false),
            ("abc", "abc", true),
            ("abc", "ABC", false),
            ("", "", true),
            ("", "x", false),
        ];
        for (p, v, want) in cases {
            assert_eq!(glob_match(p, v), want, "{p:?} ~ {v:?}");
        }
    }

    #[test]
    fn ranges_are_inclusive_and_reject_non_integers() {
        let cases = [
            (Some(1), Some(100), "1", true),
            (Some(1), Some(100), "100", true),
            (Some(1), Some(100), "101", false),
            (Some(1), Some(100), "0", false),
            (None, Some(100), "-5", true),
            (Some(100), None, "100000", true),
            (Some(100), None, "99", false),
            (None, Some(100), "abc", false),
            (None, Some(100), "", false),
            (None, Some(100), "1.5", false),
        ];
        for (lo, hi, v, want) in cases {
            assert_eq!(in_range(lo, hi, v), want, "{lo:?}~{hi:?} {v:?}");
        }
    }

    #[test]
    fn term_decisions() {
        let t = |m: &[&str], mm: &[&str]| Term {
            name: "k".into(),
            key: Key::Consumer("k".into()),
            matches: m.iter().map(|s| Pattern::Glob((*s).into())).collect(),
            mismatches: mm.iter().map(|s| Pattern::Glob((*s).into())).collect(),
        };
        assert!(t(&["a", "b"], &[]).matches_value(Some("b"), None));
        assert!(!t(&["a", "b"], &[]).matches_value(Some("c"), None));
        assert!(t(&[], &["a"]).matches_value(Some("c"), None));
        assert!(
            !t(&[], &["a"]).matches_value(None, None),
            "absent never matches"
        );
        assert!(!t(&["a*"], &["ab"]).matches_value(Some("ab"), None));
        assert!(t(&["a*"], &["ab"]).matches_value(Some("ac"), None));
        assert!(!t(&[], &[]).matches_value(Some("a"), None));
    }

    #[test]
    fn consumer_references_resolve_and_glob() {
        let consumer = Url::parse("consumer://10.0.0.1/svc?zone=z*&empty=").unwrap();
        let host = Pattern::ConsumerRef("host".into());
        assert!(host.matches("10.0.0.1", Some(&consumer)));
        assert!(!host.matches("10.0.0.2", Some(&consumer)));
        assert!(Pattern::ConsumerRef("zone".into()).matches("z9", Some(&consumer)));
        assert!(!Pattern::ConsumerRef("missing".into()).matches("x", Some(&consumer)));
        assert!(Pattern::ConsumerRef("empty".into()).matches("", Some(&consumer)));
        assert!(!host.matches("10.0.0.1", None));
    }

    #[test]
    fn when_values_come_from_the_request_or_the_consumer() {
        let consumer = Url::parse("consumer://10.0.0.1/svc?method=fromUrl&app=a").unwrap();
        let req = Request::new()
            .with_method("getFoo")
            .with_argument(serde_json::json!(1))
            .with_argument(serde_json::Value::Null)
            .with_attachment("k", "v");
        let value = |k: Key, r: &Request| {
            let mut seen = None;
            k.when_holds(r, &consumer, |v| {
                seen = Some(v.to_string());
                true
            });
            seen
        };
        assert_eq!(value(Key::Absent, &req), None);
    }
}
