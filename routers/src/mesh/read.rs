//! Reading YAML values the way Dubbo's `PojoUtils.mapToPojo` converts them, but located and
//! strict where Dubbo silently drops or throws later (spec §4.2–4.3).
//!
//! Hand-written instead of serde-derived on purpose: Dubbo converts leniently (a number in a
//! string field becomes its Java `toString()`, an integer in a double field is dropped,
//! unknown keys are ignored), and routechain must say so in a *warning* while still reading
//! the value, report every problem of a text in one pass (serde stops at the first), and
//! hint at the right spelling of a misspelled key. A [`Reader`] collects errors (the update
//! is refused) and warnings (accepted) by field path. Each Java field type is a [`Pojo`]:
//! [`Reader::get`] reads a field of any of them, lists and maps of them included.

use regex::Regex;
use routechain_core::{FieldPath, RuleError};
use serde_json::{Map, Value};

use super::matchers::{
    ArgValue, AttachmentMatch, BoolMatch, DoubleMatch, DoubleRange, MatchRequest, MethodArg,
    MethodMatch, StringMatch, TracingEntry,
};
use super::rule::Subset;

/// Errors and warnings of one read, by field path.
#[derive(Debug, Default)]
pub struct Reader {
    /// Problems that refuse the text.
    pub errors: Vec<RuleError>,
    /// Problems that are reported and accepted.
    pub warnings: Vec<RuleError>,
    /// The entry's `tracing_prefix`, which `tracingContext` keys are read under.
    pub tracing_prefix: Option<String>,
    /// The subsets of the `DestinationRule`s read so far, which destinations name.
    pub subsets: Vec<Subset>,
}

/// A mapping at its path, as a Dubbo POJO reads it: a key whose value is null is absent.
#[derive(Debug, Clone)]
pub struct Fields<'v> {
    /// The mapping.
    pub map: &'v Map<String, Value>,
    /// Where it is.
    pub path: FieldPath,
}

impl<'v> Fields<'v> {
    /// The value of `key`, `None` when absent or null.
    pub fn get(&self, key: &str) -> Option<&'v Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    /// The path of field `key`.
    pub fn at(&self, key: &str) -> FieldPath {
        self.path.key(key)
    }
}

/// A Java field type as Dubbo's `PojoUtils.mapToPojo` fills it.
pub trait Pojo: Sized {
    /// Reads `value` (never null) at `path`: `None` when it is refused (with an error).
    fn read(r: &mut Reader, value: &Value, path: &FieldPath) -> Option<Self>;
}

/// Each type is read by the [`Reader`] method named after it.
macro_rules! pojo {
    ($($type:ty => $read:ident),* $(,)?) => {$(
        impl Pojo for $type {
            fn read(r: &mut Reader, value: &Value, path: &FieldPath) -> Option<Self> {
                r.$read(value, path)
            }
        }
    )*};
}

pojo! {
    String => string,
    i64 => int,
    f64 => double,
    bool => boolean,
    StringMatch => string_match,
    DoubleRange => double_range,
    DoubleMatch => double_match,
    BoolMatch => bool_match,
    MethodArg => method_arg,
    MethodMatch => method_match,
    AttachmentMatch => attachment_match,
    MatchRequest => match_request,
}

/// A `List<T>` ([`Reader::each`]).
impl<T: Pojo> Pojo for Vec<T> {
    fn read(r: &mut Reader, value: &Value, path: &FieldPath) -> Option<Self> {
        r.each(value, path, T::read)
    }
}

/// A `Map<String, T>`, in order: a null value is an error (Dubbo refuses it too) and a value
/// refused is left out, so every problem is reported.
impl<T: Pojo> Pojo for Vec<(String, T)> {
    fn read(r: &mut Reader, value: &Value, path: &FieldPath) -> Option<Self> {
        let Value::Object(map) = value else {
            r.error(path, format!("must be a mapping, not {}", kind_of(value)));
            return None;
        };
        let mut out = Vec::with_capacity(map.len());
        for (k, v) in map {
            let p = path.key(k.clone());
            if v.is_null() {
                r.error(&p, "a value is null (Dubbo refuses it too)");
            } else if let Some(t) = T::read(r, v, &p) {
                out.push((k.clone(), t));
            }
        }
        Some(out)
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
        for key in map.keys().filter(|k| !known.contains(&k.as_str())) {
            let hint = hint(key).map_or(String::new(), |h| format!("; {h}"));
            let message = format!(
                "unknown field `{key}` of {what}, ignored (as Dubbo does); known fields: {}{hint}",
                routechain_core::one_of(known.iter().copied())
            );
            self.warn(&path.key(key.clone()), message);
        }
        Some(Fields {
            map,
            path: path.clone(),
        })
    }

    /// Field `key` of `fields` as a `T` (`None` when absent, null or refused).
    pub fn get<T: Pojo>(&mut self, fields: &Fields<'_>, key: &str) -> Option<T> {
        T::read(self, fields.get(key)?, &fields.at(key))
    }

    /// Field `key` of `fields` read as a `T` (its problems reported), then warned about:
    /// Dubbo does not evaluate it (`effect` says what that means).
    fn not_evaluated<T: Pojo>(&mut self, fields: &Fields<'_>, key: &str, effect: &str) {
        if fields.get(key).is_some() {
            self.get::<T>(fields, key);
            let message = format!("`{key}` is not evaluated (as in Dubbo){effect}");
            self.warn(&fields.at(key), message);
        }
    }

    /// A Java `String` field: a string; a number or boolean read as Java's `toString()` with
    /// a warning; a list or mapping refused.
    pub fn string(&mut self, value: &Value, path: &FieldPath) -> Option<String> {
        match value {
            Value::String(s) => Some(s.clone()),
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
        let int = value.as_i64().filter(|&i| i32::try_from(i).is_ok());
        if int.is_none() {
            let message = if routechain_core::is_integer(value) {
                let shown = value
                    .as_str()
                    .map_or_else(|| value.to_string(), str::to_string);
                let (min, max) = (i32::MIN, i32::MAX);
                format!("{shown} is out of range: a Java int is from {min} to {max}")
            } else {
                format!("must be an integer, not {}", kind_of(value))
            };
            self.error(path, format!("{message} (Dubbo refuses it too)"));
        }
        int
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
        let b = value.as_bool();
        if b.is_none() {
            let message = format!("must be true or false, not {}", kind_of(value));
            self.error(path, message);
        }
        b
    }

    /// A `List<T>` whose elements `read` reads, in order: a null element refuses the list
    /// (Dubbo refuses it too); an element `read` refuses is left out, so every problem is
    /// reported.
    pub fn each<T>(
        &mut self,
        value: &Value,
        path: &FieldPath,
        mut read: impl FnMut(&mut Self, &Value, &FieldPath) -> Option<T>,
    ) -> Option<Vec<T>> {
        let Value::Array(items) = value else {
            self.error(path, format!("must be a list, not {}", kind_of(value)));
            return None;
        };
        let nulls = items.iter().enumerate().filter(|(_, item)| item.is_null());
        for (i, _) in nulls.clone() {
            let message = "a list element is null (Dubbo refuses it too)";
            self.error(&path.index(i), message);
        }
        if nulls.count() > 0 {
            return None;
        }
        let read = |(i, v)| read(self, v, &path.index(i));
        Some(items.iter().enumerate().filter_map(read).collect())
    }

    /// A `StringMatch`.
    pub fn string_match(&mut self, value: &Value, path: &FieldPath) -> Option<StringMatch> {
        let f = self.object(value, path, "a string match", &StringMatch::KINDS)?;
        let m = StringMatch {
            exact: self.get(&f, "exact"),
            prefix: self.get(&f, "prefix"),
            wildcard: self.get(&f, "wildcard"),
            empty: self.get::<String>(&f, "empty").is_some(),
            noempty: self.get::<String>(&f, "noempty").is_some(),
            regex: self.get::<String>(&f, "regex").and_then(|text| {
                match Regex::new(&format!("^(?:{text})$")) {
                    Ok(regex) => Some(regex),
                    Err(e) => {
                        let reason = crate::dubbo::regex_reason(&e);
                        self.error(&f.at("regex"), format!("invalid regex {text:?}: {reason}"));
                        None
                    }
                }
            }),
        };
        if m.is_unset() && !f.map.contains_key("regex") {
            self.warn(
                path,
                "a string match without exact, prefix, regex, wildcard, empty or noempty never holds",
            );
        }
        Some(m)
    }

    /// A `DoubleRangeMatch`.
    pub fn double_range(&mut self, value: &Value, path: &FieldPath) -> Option<DoubleRange> {
        let f = self.object(value, path, "a range", &["start", "end"])?;
        let (start, end) = (self.get(&f, "start"), self.get(&f, "end"));
        if start.is_none() && end.is_none() {
            self.warn(path, "a range without start or end never holds");
        }
        Some(DoubleRange { start, end })
    }

    /// A `DoubleMatch`.
    pub fn double_match(&mut self, value: &Value, path: &FieldPath) -> Option<DoubleMatch> {
        let f = self.object(value, path, "a number match", &["exact", "mod", "range"])?;
        let m = DoubleMatch {
            exact: self.get(&f, "exact"),
            modulo: self.get(&f, "mod"),
            range: self.get(&f, "range"),
        };
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
        let f = self.object(value, path, "a boolean match", &["exact"])?;
        if f.get("exact").is_none() {
            self.warn(path, "a boolean match without `exact` never holds");
        }
        let exact = self.get(&f, "exact");
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
        const VALUES: [&str; 3] = ["str_value", "num_value", "bool_value"];
        let known = ["index", "type", VALUES[0], VALUES[1], VALUES[2]];
        let f = self.object(value, path, "an argument match", &known)?;
        let index = self.get::<i64>(&f, "index").unwrap_or(0);
        if index < 0 {
            self.error(
                &f.at("index"),
                format!("index {index} is negative (Dubbo fails every call that reaches it)"),
            );
        }
        let index = usize::try_from(index).unwrap_or(0);
        self.not_evaluated::<String>(&f, "type", "");
        let present: Vec<&str> = VALUES.into_iter().filter(|k| f.get(k).is_some()).collect();
        let Some(first) = present.first() else {
            self.warn(
                path,
                "an argument match without str_value, num_value or bool_value never holds",
            );
            let value = ArgValue::Nothing;
            return Some(MethodArg { index, value });
        };
        if present.len() > 1 {
            let all = present.join(", ");
            let message =
                format!("{all} are all set: only the first, `{first}`, is evaluated (as in Dubbo)");
            self.warn(path, message);
        }
        let mut value = None;
        // Only the first is evaluated; the others are validated too (their errors count,
        // not their warnings): a broken rule is broken wherever it is.
        for key in &present {
            let mut r = Reader::new(None);
            let (v, p) = (&f.map[*key], f.at(key));
            let read = match *key {
                "str_value" => r
                    .oneof(v, &p, "`str_value`", Self::string_match)
                    .map(ArgValue::Str),
                "num_value" => r
                    .oneof(v, &p, "`num_value`", Self::double_match)
                    .map(ArgValue::Num),
                _ => r.bool_match(v, &p).map(ArgValue::Bool),
            };
            self.errors.append(&mut r.errors);
            if value.is_none() {
                self.warnings.append(&mut r.warnings);
                value = Some(read?);
            }
        }
        Some(MethodArg {
            index,
            value: value?,
        })
    }

    /// A `DubboMethodMatch`.
    pub fn method_match(&mut self, value: &Value, path: &FieldPath) -> Option<MethodMatch> {
        const KNOWN: [&str; 5] = ["name_match", "argc", "argp", "args", "headers"];
        let f = self.object(value, path, "a method match", &KNOWN)?;
        let name_match = self.get(&f, "name_match");
        let argc = self.get(&f, "argc");
        if argc.is_some_and(|a: i64| a < 0) {
            self.warn(&f.at("argc"), "a negative `argc` never holds");
        }
        let m = MethodMatch {
            name_match,
            argc,
            argp: self.get(&f, "argp").unwrap_or_default(),
            args: self.get(&f, "args").unwrap_or_default(),
        };
        self.not_evaluated::<Vec<(String, StringMatch)>>(&f, "headers", HOLDS);
        Some(m)
    }

    /// A `DubboAttachmentMatch`.
    pub fn attachment_match(&mut self, value: &Value, path: &FieldPath) -> Option<AttachmentMatch> {
        let known = ["dubboContext", "tracingContext"];
        let f = self.object(value, path, "an attachment match", &known)?;
        let dubbo_context = self.get(&f, "dubboContext").unwrap_or_default();
        let tracing: Vec<(String, StringMatch)> =
            self.get(&f, "tracingContext").unwrap_or_default();
        let prefix = self.tracing_prefix.clone();
        if !tracing.is_empty() && prefix.is_none() {
            self.warn(
                &f.at("tracingContext"),
                "tracingContext never holds without the entry's `tracing_prefix` (as Dubbo without a tracing provider)",
            );
        }
        let tracing_context = tracing
            .into_iter()
            .map(|(key, matcher)| TracingEntry {
                attachment: prefix.as_ref().map(|p| format!("{p}{key}")),
                key,
                matcher,
            })
            .collect();
        Some(AttachmentMatch {
            dubbo_context,
            tracing_context,
        })
    }

    /// A `DubboMatchRequest`.
    pub fn match_request(&mut self, value: &Value, path: &FieldPath) -> Option<MatchRequest> {
        const KNOWN: [&str; 5] = ["name", "method", "sourceLabels", "attachments", "headers"];
        let f = self.object(value, path, "a match", &KNOWN)?;
        self.get::<String>(&f, "name");
        let m = MatchRequest {
            method: self.get(&f, "method"),
            source_labels: self.get(&f, "sourceLabels"),
            attachments: self.get(&f, "attachments"),
        };
        self.not_evaluated::<Vec<(String, StringMatch)>>(&f, "headers", HOLDS);
        Some(m)
    }
}

/// What `headers` not being evaluated means.
const HOLDS: &str = ": it holds for every call";

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

/// A number or boolean as Java's `toString()` writes it: integers in decimal, floats as
/// `Double.toString`, booleans `true`/`false`.
pub fn java_to_string(value: &Value) -> String {
    match value.as_f64() {
        Some(x) if value.is_f64() => java_double_to_string(x),
        _ => value.to_string(),
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
        // Rust's debug form is plain here, with at least one decimal.
        return format!("{x:?}");
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
