//! Reading YAML values the way Dubbo's `PojoUtils.mapToPojo` converts them, but located and
//! strict where Dubbo silently drops or throws later (spec §4.2–4.3).
//!
//! Hand-written instead of serde-derived on purpose: Dubbo converts leniently (a number in a
//! string field becomes its Java `toString()`, an integer in a double field is dropped,
//! unknown keys are ignored), and routechain must say so in a *warning* while still reading
//! the value, report every problem of a text in one pass (serde stops at the first), and
//! hint at the right spelling of a misspelled key. A [`Reader`] collects errors (the update
//! is refused) and warnings (accepted) by field path.

use regex::Regex;
use routechain_core::{FieldPath, RuleError};
use serde_json::{Map, Value};

use super::matchers::{
    ArgValue, AttachmentMatch, BoolMatch, DoubleMatch, DoubleRange, MatchRequest, MethodArg,
    MethodMatch, StringMatch, TracingEntry,
};

/// Errors and warnings of one read, by field path.
#[derive(Debug, Default)]
pub struct Reader {
    /// Problems that refuse the text.
    pub errors: Vec<RuleError>,
    /// Problems that are reported and accepted.
    pub warnings: Vec<RuleError>,
    /// The entry's `tracing_prefix`, which `tracingContext` keys are read under.
    pub tracing_prefix: Option<String>,
}

/// A mapping as a Dubbo POJO reads it: a key whose value is null is absent.
#[derive(Debug, Clone, Copy)]
pub struct Fields<'v>(pub &'v Map<String, Value>);

impl<'v> Fields<'v> {
    /// The value of `key`, `None` when absent or null.
    pub fn get(self, key: &str) -> Option<&'v Value> {
        self.0.get(key).filter(|v| !v.is_null())
    }
}

/// Hints for keys Dubbo users commonly misspell.
fn hint(key: &str) -> Option<&'static str> {
    Some(match key {
        "service" => "did you mean `services`?",
        "dubbocontext" | "DubboContext" => {
            "Dubbo 3.3 reads `dubboContext` (the lower-case key of Dubbo 3.0 is ignored)"
        }
        "eagleeyecontext" | "eagleeyeContext" => {
            "Dubbo 3.3 reads `tracingContext` (the key of Dubbo 3.0 is ignored)"
        }
        "routeDetail" | "route_detail" => "did you mean `routedetail`?",
        "nameMatch" => "did you mean `name_match`?",
        "strValue" | "numValue" | "boolValue" => {
            "the keys are `str_value`, `num_value`, `bool_value`"
        }
        "sourcelabels" | "source_labels" => "did you mean `sourceLabels`?",
        "fallback" => {
            "`fallback` belongs inside `destination` (destination.fallback.destination); here it is ignored, as in Dubbo"
        }
        _ => return None,
    })
}

impl Reader {
    /// A reader for an entry with `tracing_prefix`.
    pub fn new(tracing_prefix: Option<String>) -> Self {
        Reader {
            tracing_prefix,
            ..Default::default()
        }
    }

    /// Records an error.
    pub fn error(&mut self, path: &FieldPath, message: impl Into<String>) {
        self.errors.push(RuleError::new(path.clone(), message));
    }

    /// Records a warning.
    pub fn warn(&mut self, path: &FieldPath, message: impl Into<String>) {
        self.warnings.push(RuleError::new(path.clone(), message));
    }

    /// `value` as a mapping (`what` names it in the error), warning on every key not in
    /// `known`.
    pub fn object<'v>(
        &mut self,
        value: &'v Value,
        path: &FieldPath,
        what: &str,
        known: &[&str],
    ) -> Option<Fields<'v>> {
        let Value::Object(map) = value else {
            self.error(
                path,
                format!("{what} must be a mapping, not {}", kind_of(value)),
            );
            return None;
        };
        self.unknown_keys(map, path, what, known);
        Some(Fields(map))
    }

    /// Field `key` of `map` read by `read` at its path (`None` when absent or null).
    pub fn field<T>(
        &mut self,
        map: Fields<'_>,
        path: &FieldPath,
        key: &str,
        read: impl FnOnce(&mut Self, &Value, &FieldPath) -> Option<T>,
    ) -> Option<T> {
        read(self, map.get(key)?, &path.key(key))
    }

    /// Warns on every key of `map` not in `known`.
    pub fn unknown_keys(
        &mut self,
        map: &Map<String, Value>,
        path: &FieldPath,
        what: &str,
        known: &[&str],
    ) {
        for key in map.keys() {
            if !known.contains(&key.as_str()) {
                let mut message = format!(
                    "unknown field `{key}` of {what}, ignored (as Dubbo does); known fields: {}",
                    routechain_core::one_of(known.iter().copied())
                );
                if let Some(h) = hint(key) {
                    message.push_str("; ");
                    message.push_str(h);
                }
                self.warnings
                    .push(RuleError::new(path.key(key.clone()), message));
            }
        }
    }

    /// A Java `String` field: a string; a number or boolean read as Java's `toString()` with
    /// a warning; a list or mapping refused.
    pub fn string(&mut self, value: &Value, path: &FieldPath) -> Option<String> {
        match value {
            Value::String(s) => Some(s.clone()),
            Value::Null => None,
            Value::Bool(_) | Value::Number(_) => {
                let text = java_to_string(value);
                self.warn(
                    path,
                    format!(
                        "{value} is not a string; read as {text:?} (as Dubbo reads it): quote it to be sure"
                    ),
                );
                Some(text)
            }
            _ => {
                self.error(path, format!("must be a string, not {}", kind_of(value)));
                None
            }
        }
    }

    /// A Java `int` field: an integer within Java's `int` range.
    pub fn int(&mut self, value: &Value, path: &FieldPath) -> Option<i64> {
        match value.as_i64() {
            Some(i) if i32::try_from(i).is_ok() => Some(i),
            Some(_) | None if routechain_core::is_integer(value) => {
                let shown = value
                    .as_str()
                    .map_or_else(|| value.to_string(), str::to_string);
                self.error(
                    path,
                    format!(
                        "{shown} is out of range: a Java int is from {} to {} (Dubbo refuses it too)",
                        i32::MIN,
                        i32::MAX
                    ),
                );
                None
            }
            _ => {
                self.error(
                    path,
                    format!(
                        "must be an integer, not {} (Dubbo refuses it too)",
                        kind_of(value)
                    ),
                );
                None
            }
        }
    }

    /// A Java `Double` field: a float; an integer read as that number with a warning (Dubbo
    /// ignores it); anything else refused.
    pub fn double(&mut self, value: &Value, path: &FieldPath) -> Option<f64> {
        match value {
            Value::Number(n) if n.is_f64() => n.as_f64(),
            Value::Number(n) => {
                let x = n.as_f64()?;
                self.warn(
                    path,
                    format!(
                        "integer {n} in a number match: read as {x:?}, but Dubbo ignores an integer here; write {x:?} to get the same behaviour in Dubbo"
                    ),
                );
                Some(x)
            }
            _ => {
                self.error(path, format!("must be a number, not {}", kind_of(value)));
                None
            }
        }
    }

    /// A Java `Boolean` field.
    pub fn boolean(&mut self, value: &Value, path: &FieldPath) -> Option<bool> {
        match value {
            Value::Bool(b) => Some(*b),
            _ => {
                self.error(
                    path,
                    format!("must be true or false, not {}", kind_of(value)),
                );
                None
            }
        }
    }

    /// A `List<T>` field: a list without null elements.
    pub fn list<'v>(&mut self, value: &'v Value, path: &FieldPath) -> Option<&'v [Value]> {
        let Value::Array(items) = value else {
            self.error(path, format!("must be a list, not {}", kind_of(value)));
            return None;
        };
        let mut ok = true;
        for (i, item) in items.iter().enumerate() {
            if item.is_null() {
                self.error(
                    &path.index(i),
                    "a list element is null (Dubbo refuses it too)",
                );
                ok = false;
            }
        }
        ok.then_some(items.as_slice())
    }

    /// A `Map<String, String>` field (`labels`, `sourceLabels`).
    pub fn string_map(&mut self, value: &Value, path: &FieldPath) -> Option<Vec<(String, String)>> {
        self.map_of(value, path, Self::string)
    }

    /// A `Map<String, StringMatch>` field (`dubboContext`, `tracingContext`, `headers`).
    pub fn string_match_map(
        &mut self,
        value: &Value,
        path: &FieldPath,
    ) -> Option<Vec<(String, StringMatch)>> {
        self.map_of(value, path, Self::string_match)
    }

    /// A mapping whose values `read` reads, in order; a null value is an error (Dubbo refuses
    /// it too) and a value `read` refuses is left out, so every problem is reported.
    fn map_of<T>(
        &mut self,
        value: &Value,
        path: &FieldPath,
        mut read: impl FnMut(&mut Self, &Value, &FieldPath) -> Option<T>,
    ) -> Option<Vec<(String, T)>> {
        let Value::Object(map) = value else {
            self.error(path, format!("must be a mapping, not {}", kind_of(value)));
            return None;
        };
        let mut out = Vec::with_capacity(map.len());
        for (k, v) in map {
            let p = path.key(k.clone());
            if v.is_null() {
                self.error(&p, "a value is null (Dubbo refuses it too)");
                continue;
            }
            if let Some(t) = read(self, v, &p) {
                out.push((k.clone(), t));
            }
        }
        Some(out)
    }

    /// A list of `StringMatch` (`services`, `argp`, `oneof`).
    pub fn string_match_list(
        &mut self,
        value: &Value,
        path: &FieldPath,
    ) -> Option<Vec<StringMatch>> {
        self.each(value, path, Self::string_match)
    }

    /// A list ([`Reader::list`]) whose elements `read` reads, in order; an element `read`
    /// refuses is left out, so every problem is reported.
    pub fn each<T>(
        &mut self,
        value: &Value,
        path: &FieldPath,
        mut read: impl FnMut(&mut Self, &Value, &FieldPath) -> Option<T>,
    ) -> Option<Vec<T>> {
        let items = self.list(value, path)?;
        let read = |(i, v)| read(self, v, &path.index(i));
        Some(items.iter().enumerate().filter_map(read).collect())
    }

    /// A `StringMatch`.
    pub fn string_match(&mut self, value: &Value, path: &FieldPath) -> Option<StringMatch> {
        let map = self.object(value, path, "a string match", &StringMatch::KINDS)?;
        let mut m = StringMatch::default();
        let field = |r: &mut Self, key: &str| r.field(map, path, key, Self::string);
        m.exact = field(self, "exact");
        m.prefix = field(self, "prefix");
        m.wildcard = field(self, "wildcard");
        m.empty = field(self, "empty").is_some();
        m.noempty = field(self, "noempty").is_some();
        if let Some(text) = field(self, "regex") {
            m.regex = self.regex(&text, &path.key("regex"));
        }
        if m.is_unset() && !map.0.contains_key("regex") {
            self.warn(
                path,
                "a string match without exact, prefix, regex, wildcard, empty or noempty never holds",
            );
        }
        Some(m)
    }

    /// Compiles `text` as a whole-string regex.
    fn regex(&mut self, text: &str, path: &FieldPath) -> Option<Regex> {
        match Regex::new(&format!("^(?:{text})$")) {
            Ok(r) => Some(r),
            Err(e) => {
                let reason = crate::dubbo::regex_reason(&e);
                self.error(path, format!("invalid regex {text:?}: {reason}"));
                None
            }
        }
    }

    /// A `DoubleMatch`.
    pub fn double_match(&mut self, value: &Value, path: &FieldPath) -> Option<DoubleMatch> {
        let map = self.object(value, path, "a number match", &["exact", "mod", "range"])?;
        let mut m = DoubleMatch {
            exact: self.field(map, path, "exact", Self::double),
            modulo: self.field(map, path, "mod", Self::double),
            range: None,
        };
        if let Some(v) = map.get("range") {
            let rp = path.key("range");
            if let Some(r) = self.object(v, &rp, "a range", &["start", "end"]) {
                let range = DoubleRange {
                    start: self.field(r, &rp, "start", Self::double),
                    end: self.field(r, &rp, "end", Self::double),
                };
                if range.start.is_none() && range.end.is_none() {
                    self.warn(&rp, "a range without start or end never holds");
                }
                m.range = Some(range);
            }
        }
        if m.exact.is_none() && m.range.is_none() {
            self.warn(
                path,
                if m.modulo.is_some() {
                    "`mod` without `exact` never holds"
                } else {
                    "a number match without exact, range or mod never holds"
                },
            );
        }
        Some(m)
    }

    /// A `BoolMatch`.
    pub fn bool_match(&mut self, value: &Value, path: &FieldPath) -> Option<BoolMatch> {
        let map = self.object(value, path, "a boolean match", &["exact"])?;
        let exact = match map.get("exact") {
            Some(v) => self.boolean(v, &path.key("exact")),
            None => {
                self.warn(path, "a boolean match without `exact` never holds");
                None
            }
        };
        Some(BoolMatch { exact })
    }

    /// A `{oneof: [...]}` list match, reading each element with `element`.
    pub fn oneof<T>(
        &mut self,
        value: &Value,
        path: &FieldPath,
        what: &str,
        element: impl Fn(&mut Self, &Value, &FieldPath) -> Option<T>,
    ) -> Option<Vec<T>> {
        let map = self.object(value, path, what, &["oneof"])?;
        let Some(list) = map.get("oneof") else {
            self.error(
                path,
                format!("{what} needs `oneof: [...]` (Dubbo fails every call that reaches it)"),
            );
            return None;
        };
        self.each(list, &path.key("oneof"), element)
    }

    /// A `DubboMethodArg`.
    pub fn method_arg(&mut self, value: &Value, path: &FieldPath) -> Option<MethodArg> {
        const KNOWN: [&str; 5] = ["index", "type", "str_value", "num_value", "bool_value"];
        let map = self.object(value, path, "an argument match", &KNOWN)?;
        let index = match map.get("index") {
            Some(v) => match self.int(v, &path.key("index")) {
                Some(i) if i >= 0 => i as usize,
                Some(i) => {
                    self.error(
                        &path.key("index"),
                        format!("index {i} is negative (Dubbo fails every call that reaches it)"),
                    );
                    0
                }
                None => 0,
            },
            None => 0,
        };
        if let Some(t) = map.get("type") {
            self.string(t, &path.key("type"));
            self.warn(&path.key("type"), "`type` is not evaluated (as in Dubbo)");
        }
        let present: Vec<&str> = ["str_value", "num_value", "bool_value"]
            .into_iter()
            .filter(|k| map.get(k).is_some())
            .collect();
        if present.len() > 1 {
            self.warn(
                path,
                format!(
                    "{} are all set: only the first, `{}`, is evaluated (as in Dubbo)",
                    present.join(", "),
                    present[0]
                ),
            );
        }
        let value = match present.first().copied() {
            Some("str_value") => ArgValue::Str(self.oneof(
                map.get("str_value")?,
                &path.key("str_value"),
                "`str_value`",
                |r, v, p| r.string_match(v, p),
            )?),
            Some("num_value") => ArgValue::Num(self.oneof(
                map.get("num_value")?,
                &path.key("num_value"),
                "`num_value`",
                |r, v, p| r.double_match(v, p),
            )?),
            Some(_) => {
                ArgValue::Bool(self.bool_match(map.get("bool_value")?, &path.key("bool_value"))?)
            }
            None => {
                self.warn(
                    path,
                    "an argument match without str_value, num_value or bool_value never holds",
                );
                ArgValue::Nothing
            }
        };
        // Validate the ignored ones too: a broken rule is broken wherever it is.
        for k in present.iter().skip(1) {
            let p = path.key(*k);
            if let Some(v) = map.get(k) {
                let mut shadow = Reader::new(None);
                match *k {
                    "num_value" => {
                        shadow.oneof(v, &p, "`num_value`", |r, v, p| r.double_match(v, p));
                    }
                    _ => {
                        shadow.bool_match(v, &p);
                    }
                }
                self.errors.append(&mut shadow.errors);
            }
        }
        Some(MethodArg { index, value })
    }

    /// `headers`, read (its problems reported) but not evaluated, as in Dubbo.
    fn headers(&mut self, value: &Value, path: &FieldPath) -> Option<()> {
        self.string_match_map(value, path);
        let message = "`headers` is not evaluated (as in Dubbo): it holds for every call";
        self.warn(path, message);
        None
    }

    /// A `DubboMethodMatch`.
    pub fn method_match(&mut self, value: &Value, path: &FieldPath) -> Option<MethodMatch> {
        const KNOWN: [&str; 5] = ["name_match", "argc", "argp", "args", "headers"];
        let map = self.object(value, path, "a method match", &KNOWN)?;
        let m = MethodMatch {
            name_match: self.field(map, path, "name_match", Self::string_match),
            argc: self.field(map, path, "argc", |r, v, p| {
                let argc = r.int(v, p);
                if argc.is_some_and(|a| a < 0) {
                    r.warn(p, "a negative `argc` never holds");
                }
                argc
            }),
            argp: (self.field(map, path, "argp", Self::string_match_list)).unwrap_or_default(),
            args: (self.field(map, path, "args", |r, v, p| r.each(v, p, Self::method_arg)))
                .unwrap_or_default(),
        };
        self.field(map, path, "headers", Self::headers);
        Some(m)
    }

    /// A `DubboAttachmentMatch`.
    pub fn attachment_match(&mut self, value: &Value, path: &FieldPath) -> Option<AttachmentMatch> {
        let map = self.object(
            value,
            path,
            "an attachment match",
            &["dubboContext", "tracingContext"],
        )?;
        let mut m = AttachmentMatch {
            dubbo_context: (self.field(map, path, "dubboContext", Self::string_match_map))
                .unwrap_or_default(),
            tracing_context: Vec::new(),
        };
        if let Some(v) = map.get("tracingContext") {
            let tp = path.key("tracingContext");
            let entries = self.string_match_map(v, &tp).unwrap_or_default();
            if !entries.is_empty() && self.tracing_prefix.is_none() {
                self.warn(
                    &tp,
                    "tracingContext never holds without the entry's `tracing_prefix` (as Dubbo without a tracing provider)",
                );
            }
            m.tracing_context = entries
                .into_iter()
                .map(|(key, matcher)| TracingEntry {
                    attachment: self.tracing_prefix.as_ref().map(|p| format!("{p}{key}")),
                    key,
                    matcher,
                })
                .collect();
        }
        Some(m)
    }

    /// A `DubboMatchRequest`.
    pub fn match_request(&mut self, value: &Value, path: &FieldPath) -> Option<MatchRequest> {
        const KNOWN: [&str; 5] = ["name", "method", "sourceLabels", "attachments", "headers"];
        let map = self.object(value, path, "a match", &KNOWN)?;
        self.field(map, path, "name", Self::string);
        let m = MatchRequest {
            method: self.field(map, path, "method", Self::method_match),
            source_labels: self.field(map, path, "sourceLabels", Self::string_map),
            attachments: self.field(map, path, "attachments", Self::attachment_match),
        };
        self.field(map, path, "headers", Self::headers);
        Some(m)
    }
}

/// What a value is, in words.
pub fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

/// A scalar as Java's `toString()` writes it: integers in decimal, floats as
/// `Double.toString`, booleans `true`/`false`.
pub fn java_to_string(value: &Value) -> String {
    match value {
        Value::Number(n) if n.is_f64() => java_double_to_string(n.as_f64().unwrap_or(0.0)),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Java's `Double.toString`: shortest round-trip digits; plain with at least one decimal for
/// `1e-3 <= |x| < 1e7`, else `d.dddE±n` (no `+`).
pub fn java_double_to_string(x: f64) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    let a = x.abs();
    if a == 0.0 || (1e-3..1e7).contains(&a) {
        let s = format!("{x}");
        return if s.contains('.') { s } else { format!("{s}.0") };
    }
    let s = format!("{x:e}");
    let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let mantissa = if mantissa.contains('.') {
        mantissa.to_string()
    } else {
        format!("{mantissa}.0")
    };
    format!("{mantissa}E{exp}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_print_as_java() {
        for (x, s) in [
            (1.1, "1.1"),
            (10.0, "10.0"),
            (1e10, "1.0E10"),
            (1.5e-5, "1.5E-5"),
            (-2.5e7, "-2.5E7"),
            (0.001, "0.001"),
            (0.0, "0.0"),
        ] {
            assert_eq!(java_double_to_string(x), s);
        }
    }
}
