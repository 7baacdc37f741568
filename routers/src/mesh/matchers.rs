//! The mesh rule's compiled matchers (Dubbo's `virtualservice/match` package): string,
//! double and boolean matches, method, attachment and whole-request matches, and the Java
//! conversions they rely on (`Double.valueOf`, `Class.getSimpleName`).
//!
//! Everything is compiled when the rule is read (regexes anchored and compiled once); matching
//! one call compares strings and numbers without allocating.

use routechain_core::{Attributes, Url};
use serde_json::Value;

pub use crate::dubbo::StringMatch;

/// Dubbo's `DoubleRangeMatch`: `start <= x < end`, either bound optional.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DoubleRange {
    /// `start` (inclusive).
    pub start: Option<f64>,
    /// `end` (exclusive).
    pub end: Option<f64>,
}

/// Dubbo's `DoubleMatch`: `exact`, `range`, or `exact` with `mod`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DoubleMatch {
    /// `exact`.
    pub exact: Option<f64>,
    /// `mod`.
    pub modulo: Option<f64>,
    /// `range`.
    pub range: Option<DoubleRange>,
}

/// Java's `Double.equals`: bit equality after collapsing NaNs (`NaN == NaN`, `0.0 != -0.0`).
fn java_double_equals(a: f64, b: f64) -> bool {
    (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits()
}

/// Java's `Double.compareTo`: `-0.0 < 0.0`, NaN equal to itself and above +∞.
fn java_compare(a: f64, b: f64) -> std::cmp::Ordering {
    use std::cmp::Ordering::*;
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Equal,
        (true, false) => Greater,
        (false, true) => Less,
        (false, false) => a.total_cmp(&b),
    }
}

impl DoubleMatch {
    /// Dubbo's order: `exact` without `mod`; else `range`; else `exact` with `mod`
    /// (`x % mod`, IEEE remainder with the dividend's sign); else false.
    pub fn is_match(&self, x: f64) -> bool {
        if let (Some(exact), None) = (self.exact, self.modulo) {
            return java_double_equals(x, exact);
        }
        if let Some(range) = self.range {
            use std::cmp::Ordering::*;
            return match (range.start, range.end) {
                (Some(s), Some(e)) => java_compare(x, s) != Less && java_compare(x, e) == Less,
                (Some(s), None) => java_compare(x, s) != Less,
                (None, Some(e)) => java_compare(x, e) == Less,
                (None, None) => false,
            };
        }
        if let (Some(exact), Some(m)) = (self.exact, self.modulo) {
            return java_double_equals(x % m, exact);
        }
        false
    }
}

/// Dubbo's `BoolMatch`: `exact` set and equal.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BoolMatch {
    /// `exact`.
    pub exact: Option<bool>,
}

impl BoolMatch {
    /// True when `exact` is set and equals `b`.
    pub fn is_match(&self, b: bool) -> bool {
        self.exact == Some(b)
    }
}

/// What one `args` entry tests: the first present of `str_value`, `num_value`, `bool_value`.
#[derive(Debug, Clone)]
pub enum ArgValue {
    /// `str_value.oneof`: the argument is a string and one of them matches.
    Str(Vec<StringMatch>),
    /// `num_value.oneof`: the argument as a number (JSON number, or a string in Java's
    /// `Double.valueOf` grammar) and one of them matches.
    Num(Vec<DoubleMatch>),
    /// `bool_value`: the argument is a boolean and the match holds.
    Bool(BoolMatch),
    /// None of the three: never holds.
    Nothing,
}

/// Dubbo's `DubboMethodArg`.
#[derive(Debug, Clone)]
pub struct MethodArg {
    /// `index` (0-based).
    pub index: usize,
    /// The value test.
    pub value: ArgValue,
}

impl MethodArg {
    /// Tests one argument.
    pub fn is_match(&self, arg: &Value) -> bool {
        match &self.value {
            ArgValue::Str(oneof) => match arg {
                Value::String(s) => oneof.iter().any(|m| m.is_match(Some(s))),
                _ => false,
            },
            ArgValue::Num(oneof) => {
                java_number(arg).is_some_and(|x| oneof.iter().any(|m| m.is_match(x)))
            }
            ArgValue::Bool(m) => matches!(arg, Value::Bool(b) if m.is_match(*b)),
            ArgValue::Nothing => false,
        }
    }
}

/// An argument as Java's `Double.valueOf(arg.toString())` reads it; `None` where Java throws
/// (routechain: no match).
pub fn java_number(arg: &Value) -> Option<f64> {
    match arg {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => java_parse_double(s),
        _ => None,
    }
}

/// Java's `Double.valueOf(String)` for decimal text: surrounding characters up to U+0020
/// trimmed, an optional sign, `NaN`, `Infinity`, or digits with an optional fraction and
/// exponent and an optional `f`/`F`/`d`/`D` suffix. Hexadecimal floats are not read.
pub fn java_parse_double(text: &str) -> Option<f64> {
    let t = text.trim_matches(|c: char| c <= '\u{20}');
    let (negative, body) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let value = match body {
        "NaN" => f64::NAN,
        "Infinity" => f64::INFINITY,
        // Past a sign and the special words, Rust's grammar is Java's decimal one.
        _ => {
            let body = body.strip_suffix(['f', 'F', 'd', 'D']).unwrap_or(body);
            if !body.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
                return None;
            }
            body.parse::<f64>().ok()?
        }
    };
    Some(if negative { -value } else { value })
}

/// Java's `Class.getSimpleName()` from a `Class.getName()` string: an array's component
/// simple name plus `[]` per dimension (`[Ljava.lang.String;` → `String[]`, `[I` → `int[]`),
/// otherwise the text after the last `.`, then after the last `$`. Calls `f` with it, built
/// on the stack for arrays of up to a few dimensions.
pub fn with_simple_name<R>(binary: &str, f: impl FnOnce(&str) -> R) -> R {
    let dims = binary.bytes().take_while(|b| *b == b'[').count();
    let component = &binary[dims..];
    let component = if dims == 0 {
        component
    } else {
        match component {
            "Z" => "boolean",
            "B" => "byte",
            "C" => "char",
            "S" => "short",
            "I" => "int",
            "J" => "long",
            "F" => "float",
            "D" => "double",
            c => c
                .strip_prefix('L')
                .and_then(|c| c.strip_suffix(';'))
                .unwrap_or(c),
        }
    };
    let simple = component.rsplit('.').next().unwrap_or(component);
    let simple = simple.rsplit('$').next().unwrap_or(simple);
    if dims == 0 {
        return f(simple);
    }
    let mut buf = [0u8; 128];
    let needed = simple.len() + 2 * dims;
    if needed > buf.len() {
        let mut s = String::with_capacity(needed);
        s.push_str(simple);
        for _ in 0..dims {
            s.push_str("[]");
        }
        return f(&s);
    }
    buf[..simple.len()].copy_from_slice(simple.as_bytes());
    for d in 0..dims {
        buf[simple.len() + 2 * d] = b'[';
        buf[simple.len() + 2 * d + 1] = b']';
    }
    // Only a `&str` and ASCII brackets were copied in: valid UTF-8.
    f(std::str::from_utf8(&buf[..needed]).unwrap_or(simple))
}

/// Dubbo's `DubboMethodMatch`.
#[derive(Debug, Clone, Default)]
pub struct MethodMatch {
    /// `name_match`: the method name.
    pub name_match: Option<StringMatch>,
    /// `argc`: the exact number of arguments.
    pub argc: Option<i64>,
    /// `argp`: one match per parameter type (empty: not tested).
    pub argp: Vec<StringMatch>,
    /// `args`: argument values (empty: not tested).
    pub args: Vec<MethodArg>,
}

/// One call as the mesh matchers read it.
#[derive(Debug, Clone, Copy)]
pub struct CallView<'a> {
    /// The method (`None`: no invocation).
    pub method: Option<&'a str>,
    /// The arguments.
    pub arguments: &'a [Value],
    /// The declared parameter types (`Class.getName()` form).
    pub parameter_types: &'a [String],
    /// The attachments (`dubboContext`, and `tracingContext` under its prefix).
    pub attachments: &'a Attributes,
    /// The consumer whose parameters `sourceLabels` read.
    pub consumer: &'a Url,
}

impl CallView<'_> {
    /// Dubbo's `RpcUtils.getMethodName`: for a generic call (`$invoke`, `$invokeAsync`) with
    /// a string first argument, that argument; otherwise the method.
    pub fn method_name(&self) -> Option<&str> {
        match (self.method, self.arguments.first()) {
            (Some("$invoke" | "$invokeAsync"), Some(Value::String(real))) => Some(real),
            (m, _) => m,
        }
    }
}

impl MethodMatch {
    /// All present parts hold: name, argument count, parameter types, argument values. An
    /// `args` index past the arguments is no match (Dubbo throws).
    pub fn is_match(&self, call: &CallView<'_>) -> bool {
        if let Some(m) = &self.name_match
            && !m.is_match(call.method_name())
        {
            return false;
        }
        if let Some(argc) = self.argc
            && i64::try_from(call.arguments.len()) != Ok(argc)
        {
            return false;
        }
        if !self.argp.is_empty() {
            let types = call.parameter_types;
            if types.len() != self.argp.len() {
                return false;
            }
            let all =
                self.argp.iter().zip(types).all(|(m, t)| {
                    m.is_match(Some(t)) || with_simple_name(t, |s| m.is_match(Some(s)))
                });
            if !all {
                return false;
            }
        }
        if !self.args.is_empty() {
            if call.arguments.is_empty() {
                return false;
            }
            for arg in &self.args {
                match call.arguments.get(arg.index) {
                    Some(v) if arg.is_match(v) => {}
                    _ => return false,
                }
            }
        }
        true
    }
}

/// One `tracingContext` entry: the key, the attachment it reads, the match.
#[derive(Debug, Clone)]
pub struct TracingEntry {
    /// The key as written.
    pub key: String,
    /// The attachment read: the entry's `tracing_prefix` then the key; `None` without a
    /// prefix (the entry never holds, as Dubbo without a tracing provider).
    pub attachment: Option<String>,
    /// The match.
    pub matcher: StringMatch,
}

/// Dubbo's `DubboAttachmentMatch`.
#[derive(Debug, Clone, Default)]
pub struct AttachmentMatch {
    /// `dubboContext`: attachment key → match.
    pub dubbo_context: Vec<(String, StringMatch)>,
    /// `tracingContext`.
    pub tracing_context: Vec<TracingEntry>,
}

impl AttachmentMatch {
    /// Every entry of both maps holds.
    pub fn is_match(&self, attachments: &Attributes) -> bool {
        self.dubbo_context
            .iter()
            .all(|(k, m)| m.is_match(attachments.get(k)))
            && self.tracing_context.iter().all(|e| match &e.attachment {
                Some(key) => e.matcher.is_match(attachments.get(key)),
                None => false,
            })
    }
}

/// Dubbo's `DubboMatchRequest`: `method`, `sourceLabels`, `attachments` (each if present).
#[derive(Debug, Clone, Default)]
pub struct MatchRequest {
    /// `method`.
    pub method: Option<MethodMatch>,
    /// `sourceLabels`: consumer parameter → exact value.
    pub source_labels: Option<Vec<(String, String)>>,
    /// `attachments`.
    pub attachments: Option<AttachmentMatch>,
}

impl MatchRequest {
    /// Every present part holds (`headers` and `name` are not evaluated, as in Dubbo).
    pub fn is_match(&self, call: &CallView<'_>) -> bool {
        if let Some(m) = &self.method
            && !m.is_match(call)
        {
            return false;
        }
        if let Some(labels) = &self.source_labels
            && !labels
                .iter()
                .all(|(k, v)| call.consumer.param(k) == Some(v.as_str()))
        {
            return false;
        }
        if let Some(a) = &self.attachments
            && !a.is_match(call.attachments)
        {
            return false;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_double_grammar() {
        for (s, want) in [
            ("10", Some(10.0)),
            (" 10 ", Some(10.0)),
            ("1e3", Some(1000.0)),
            ("-2.5", Some(-2.5)),
            ("+.5", Some(0.5)),
            ("5.", Some(5.0)),
            ("1.5f", Some(1.5)),
            ("2D", Some(2.0)),
            ("Infinity", Some(f64::INFINITY)),
            ("-Infinity", Some(f64::NEG_INFINITY)),
            ("inf", None),
            ("nan", None),
            ("infinity", None),
            ("0x1p3", None),
            ("abc", None),
            ("", None),
            (".", None),
            ("1e", None),
            ("1_000", None),
        ] {
            assert_eq!(java_parse_double(s), want, "{s:?}");
        }
        assert!(java_parse_double("NaN").unwrap().is_nan());
    }

    #[test]
    fn simple_names_follow_java() {
        for (binary, simple) in [
            ("java.lang.String", "String"),
            ("int", "int"),
            ("[Ljava.lang.String;", "String[]"),
            ("[[I", "int[][]"),
            ("com.foo.Outer$Inner", "Inner"),
            ("Plain", "Plain"),
        ] {
            assert_eq!(with_simple_name(binary, str::to_string), simple);
        }
    }

    #[test]
    fn double_edges() {
        let m = DoubleMatch {
            exact: Some(0.0),
            modulo: Some(2.0),
            range: None,
        };
        assert!(!m.is_match(-4.0), "-4 % 2 is -0.0");
        assert!(m.is_match(4.0));
        let r = DoubleMatch {
            range: Some(DoubleRange {
                start: Some(0.0),
                end: None,
            }),
            ..Default::default()
        };
        assert!(!r.is_match(-0.0));
        assert!(r.is_match(f64::NAN), "NaN sorts above everything in Java");
    }
}
