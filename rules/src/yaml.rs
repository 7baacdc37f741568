//! YAML documents with a location for every field.
//!
//! A document is parsed with `saphyr-parser` (a maintained, pure-Rust YAML parser) into a
//! `serde_json::Value` plus a table from [`FieldPath`] to line and column, for values and for
//! mapping keys. Routers deserialize and validate the value and report problems by field
//! path; [`YamlDoc::locate`] turns the path back into a line and column.
//!
//! Plain scalars resolve as SnakeYAML (Dubbo's YAML library) resolves them: `true`/`false`,
//! `yes`/`no`, `on`/`off` in their three spellings are booleans (YAML 1.1), `~`/`null`/empty
//! is null, decimal and `0x` integers and decimal floats are numbers; everything quoted or
//! block-styled is a string.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use routechain_core::{FieldPath, PathSegment, RuleError};
use saphyr_parser::{Event, Parser, ScalarStyle, Span};
use serde_json::{Map, Number, Value};

/// A 1-based line and column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Location {
    /// 1-based line.
    pub line: usize,
    /// 1-based column (characters).
    pub column: usize,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// A problem located in a source: origin (file or config-center node), line, column, field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{origin}:{location}: {}{message}", field.as_ref().map(|f| format!("{f}: ")).unwrap_or_default())]
pub struct LocatedError {
    /// The file path or config-center node the text came from.
    pub origin: String,
    /// Line and column.
    pub location: Location,
    /// The field path, when the problem is in a field.
    pub field: Option<FieldPath>,
    /// What is wrong.
    pub message: String,
    /// The source line, for display.
    pub source_line: Option<String>,
}

impl LocatedError {
    /// The error with the source line and a caret under the column, as the CLI prints it.
    pub fn render(&self) -> String {
        let mut out = self.to_string();
        if let Some(line) = &self.source_line {
            let gutter = self.location.line.to_string();
            out.push_str(&format!(
                "\n {gutter} | {line}\n {} | {}^",
                " ".repeat(gutter.len()),
                " ".repeat(self.location.column.saturating_sub(1))
            ));
        }
        out
    }
}

/// A parsed YAML document: the value, where every field is, and where it came from.
#[derive(Debug, Clone)]
pub struct YamlDoc {
    /// The file path or config-center node.
    pub origin: String,
    /// The document as a JSON value (`Null` for an empty document).
    pub value: Value,
    source: Arc<str>,
    values: HashMap<FieldPath, Location>,
    keys: HashMap<FieldPath, Location>,
}

impl YamlDoc {
    /// Parses `text`; `origin` names it in errors. Only the first document of a stream is
    /// read; a second one is an error.
    pub fn parse(origin: impl Into<String>, text: &str) -> Result<Self, LocatedError> {
        let origin = origin.into();
        let source: Arc<str> = text.into();
        let mut builder = Builder::default();
        let mut documents = 0;
        for event in Parser::new_from_str(text) {
            let (event, span) = event.map_err(|e| {
                let m = e.marker();
                located(
                    &origin,
                    &source,
                    m.line(),
                    m.col() + 1,
                    None,
                    e.info().to_string(),
                )
            })?;
            if let Event::DocumentStart(_) = event {
                documents += 1;
                if documents > 1 {
                    return Err(located(
                        &origin,
                        &source,
                        span.start.line(),
                        span.start.col() + 1,
                        None,
                        "more than one YAML document; a rule is one document".into(),
                    ));
                }
            }
            builder
                .event(event, span)
                .map_err(|(loc, msg)| located(&origin, &source, loc.line, loc.column, None, msg))?;
        }
        Ok(YamlDoc {
            origin,
            value: builder.root.unwrap_or(Value::Null),
            source,
            values: builder.values,
            keys: builder.keys,
        })
    }

    /// Wraps a value built in code (no source text): every field locates to 1:1.
    pub fn from_value(origin: impl Into<String>, value: Value) -> Self {
        YamlDoc {
            origin: origin.into(),
            value,
            source: "".into(),
            values: HashMap::new(),
            keys: HashMap::new(),
        }
    }

    /// Where the value at `path` starts; the nearest located ancestor when the path itself
    /// has no value (a missing field is reported at its parent).
    pub fn locate(&self, path: &FieldPath) -> Location {
        let mut p = path.clone();
        loop {
            if let Some(l) = self.values.get(&p) {
                return *l;
            }
            if p.is_root() {
                return Location { line: 1, column: 1 };
            }
            p = p.parent();
        }
    }

    /// Where the key of the field at `path` starts (its value's location when it has no key).
    pub fn locate_key(&self, path: &FieldPath) -> Location {
        self.keys
            .get(path)
            .copied()
            .unwrap_or_else(|| self.locate(path))
    }

    /// Locates a rule error: the field's value (its key for an unknown field), plus the
    /// error's offset inside the scalar when the scalar is on one line.
    pub fn locate_error(&self, error: &RuleError) -> LocatedError {
        let mut loc = if error.message.starts_with("unknown field") {
            unknown_field_name(&error.message)
                .map(|name| {
                    // serde_path_to_error ends the path with the unknown key itself.
                    let ends_with_name = matches!(
                        error.path.0.last(),
                        Some(PathSegment::Key(k)) if k == name
                    );
                    if ends_with_name {
                        self.locate_key(&error.path)
                    } else {
                        self.locate_key(&error.path.key(name))
                    }
                })
                .unwrap_or_else(|| self.locate(&error.path))
        } else {
            self.locate(&error.path)
        };
        if let (Some(offset), Some(Value::String(_))) = (error.offset, self.get(&error.path)) {
            let line = self.source_line(loc.line).unwrap_or_default();
            // Skip an opening quote.
            let quote = line
                .chars()
                .nth(loc.column - 1)
                .is_some_and(|c| c == '"' || c == '\'');
            loc.column += offset + usize::from(quote);
        }
        located(
            &self.origin,
            &self.source,
            loc.line,
            loc.column,
            Some(error.path.clone()),
            error.message.clone(),
        )
    }

    /// The value at `path`.
    pub fn get(&self, path: &FieldPath) -> Option<&Value> {
        let mut v = &self.value;
        for seg in &path.0 {
            v = match seg {
                PathSegment::Key(k) => v.get(k.as_str())?,
                PathSegment::Index(i) => v.get(*i)?,
            };
        }
        Some(v)
    }

    /// Line `n` (1-based) of the source.
    pub fn source_line(&self, n: usize) -> Option<String> {
        self.source
            .lines()
            .nth(n.checked_sub(1)?)
            .map(str::to_string)
    }
}

/// A stream of YAML documents (`---` separated), as a config center stores Dubbo's mesh rules.
impl YamlDoc {
    /// Parses every document of `text` into one value: a sequence holding each document in
    /// order (`Null` for an empty one), so a field of document `i` has the path `[i].field`
    /// and every location points into the whole text. A text with no document (empty, or only
    /// comments) is the empty sequence.
    pub fn parse_stream(origin: impl Into<String>, text: &str) -> Result<Self, LocatedError> {
        let origin = origin.into();
        let source: Arc<str> = text.into();
        let mut builder = Builder::default();
        builder.stack.push(Frame::Seq {
            path: FieldPath::root(),
            items: Vec::new(),
            anchor: 0,
        });
        let mut values_before = 0;
        for event in Parser::new_from_str(text) {
            let (event, span) = event.map_err(|e| {
                let m = e.marker();
                located(
                    &origin,
                    &source,
                    m.line(),
                    m.col() + 1,
                    None,
                    e.info().to_string(),
                )
            })?;
            let items = |b: &Builder| match b.stack.first() {
                Some(Frame::Seq { items, .. }) => items.len(),
                _ => 0,
            };
            match event {
                Event::DocumentStart(_) => values_before = items(&builder),
                // An empty document is a null, as in a single-document parse.
                Event::DocumentEnd
                    if builder.stack.len() == 1 && items(&builder) == values_before =>
                {
                    builder
                        .push_value(Value::Null, loc(&span))
                        .map_err(|(l, m)| located(&origin, &source, l.line, l.column, None, m))?;
                }
                event => builder
                    .event(event, span)
                    .map_err(|(l, m)| located(&origin, &source, l.line, l.column, None, m))?,
            }
        }
        let value = match builder.stack.pop() {
            Some(Frame::Seq { items, .. }) => Value::Array(items),
            _ => Value::Array(Vec::new()),
        };
        Ok(YamlDoc {
            origin,
            value,
            source,
            values: builder.values,
            keys: builder.keys,
        })
    }
}

fn unknown_field_name(message: &str) -> Option<&str> {
    let start = message.find('`')? + 1;
    let end = start + message[start..].find('`')?;
    Some(&message[start..end])
}

fn located(
    origin: &str,
    source: &str,
    line: usize,
    column: usize,
    field: Option<FieldPath>,
    message: String,
) -> LocatedError {
    LocatedError {
        origin: origin.to_string(),
        location: Location {
            line: line.max(1),
            column: column.max(1),
        },
        field,
        message,
        source_line: source
            .lines()
            .nth(line.saturating_sub(1))
            .map(str::to_string),
    }
}

enum Frame {
    Seq {
        path: FieldPath,
        items: Vec<Value>,
        anchor: usize,
    },
    Map {
        path: FieldPath,
        map: Map<String, Value>,
        pending_key: Option<String>,
        anchor: usize,
    },
}

/// The most values a document may expand to through aliases: a document of aliases to
/// aliases ("billion laughs") from a config center must not exhaust memory.
pub const MAX_ALIAS_EXPANSION: usize = 100_000;

fn value_size(v: &Value) -> usize {
    match v {
        Value::Array(items) => 1 + items.iter().map(value_size).sum::<usize>(),
        Value::Object(map) => 1 + map.values().map(value_size).sum::<usize>(),
        _ => 1,
    }
}

#[derive(Default)]
struct Builder {
    stack: Vec<Frame>,
    root: Option<Value>,
    anchors: HashMap<usize, Value>,
    expanded: usize,
    values: HashMap<FieldPath, Location>,
    keys: HashMap<FieldPath, Location>,
}

type BuildError = (Location, String);

fn loc(span: &Span) -> Location {
    Location {
        line: span.start.line(),
        column: span.start.col() + 1,
    }
}

impl Builder {
    /// The path the next value will have, or `None` when the next scalar is a mapping key.
    fn next_path(&self) -> Option<FieldPath> {
        match self.stack.last() {
            None => Some(FieldPath::root()),
            Some(Frame::Seq { path, items, .. }) => Some(path.index(items.len())),
            Some(Frame::Map {
                path, pending_key, ..
            }) => pending_key.as_ref().map(|k| path.key(k.clone())),
        }
    }

    fn event(&mut self, event: Event<'_>, span: Span) -> Result<(), BuildError> {
        match event {
            Event::Scalar(text, style, anchor, tag) => {
                if self.next_path().is_none() {
                    // A mapping key.
                    if let Some(Frame::Map {
                        path,
                        map,
                        pending_key,
                        ..
                    }) = self.stack.last_mut()
                    {
                        let key = text.to_string();
                        if map.contains_key(&key) {
                            return Err((loc(&span), format!("duplicate key {key:?}")));
                        }
                        self.keys.insert(path.key(key.clone()), loc(&span));
                        *pending_key = Some(key);
                    }
                    return Ok(());
                }
                let forced_string = tag.as_ref().is_some_and(|t| t.suffix == "str");
                let value = if style == ScalarStyle::Plain && !forced_string {
                    resolve_plain(&text)
                } else {
                    Value::String(text.into_owned())
                };
                if anchor > 0 {
                    self.anchors.insert(anchor, value.clone());
                }
                self.push_value(value, loc(&span))
            }
            Event::Alias(id) => {
                let value = self
                    .anchors
                    .get(&id)
                    .cloned()
                    .ok_or_else(|| (loc(&span), "alias to an unknown anchor".to_string()))?;
                self.expanded += value_size(&value);
                if self.expanded > MAX_ALIAS_EXPANSION {
                    return Err((
                        loc(&span),
                        format!("aliases expand to more than {MAX_ALIAS_EXPANSION} values"),
                    ));
                }
                if self.next_path().is_none() {
                    return Err((loc(&span), "an alias cannot be a mapping key".into()));
                }
                self.push_value(value, loc(&span))
            }
            Event::SequenceStart(anchor, _) => {
                let path = self
                    .next_path()
                    .ok_or_else(|| (loc(&span), "a sequence cannot be a mapping key".into()))?;
                self.values.insert(path.clone(), loc(&span));
                self.stack.push(Frame::Seq {
                    path,
                    items: Vec::new(),
                    anchor,
                });
                Ok(())
            }
            Event::MappingStart(anchor, _) => {
                let path = self
                    .next_path()
                    .ok_or_else(|| (loc(&span), "a mapping cannot be a mapping key".into()))?;
                self.values.insert(path.clone(), loc(&span));
                self.stack.push(Frame::Map {
                    path,
                    map: Map::new(),
                    pending_key: None,
                    anchor,
                });
                Ok(())
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let (value, anchor) = match self.stack.pop() {
                    Some(Frame::Seq { items, anchor, .. }) => (Value::Array(items), anchor),
                    Some(Frame::Map { map, anchor, .. }) => (Value::Object(map), anchor),
                    None => return Err((loc(&span), "unbalanced end of collection".into())),
                };
                if anchor > 0 {
                    self.anchors.insert(anchor, value.clone());
                }
                self.attach(value);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    fn push_value(&mut self, value: Value, at: Location) -> Result<(), BuildError> {
        if let Some(path) = self.next_path() {
            self.values.insert(path, at);
        }
        self.attach(value);
        Ok(())
    }

    fn attach(&mut self, value: Value) {
        match self.stack.last_mut() {
            None => {
                if self.root.is_none() {
                    self.root = Some(value);
                }
            }
            Some(Frame::Seq { items, .. }) => items.push(value),
            Some(Frame::Map {
                map, pending_key, ..
            }) => {
                if let Some(k) = pending_key.take() {
                    map.insert(k, value);
                }
            }
        }
    }
}

/// Resolves a plain scalar the way SnakeYAML (YAML 1.1 core) does.
fn resolve_plain(text: &str) -> Value {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "true" | "True" | "TRUE" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" => {
            return Value::Bool(true);
        }
        "false" | "False" | "FALSE" | "no" | "No" | "NO" | "off" | "Off" | "OFF" => {
            return Value::Bool(false);
        }
        _ => {}
    }
    let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit() || b == b'_') {
        let clean: String = text.chars().filter(|c| *c != '_' && *c != '+').collect();
        if let Ok(i) = clean.parse::<i64>() {
            return Value::Number(i.into());
        }
        if let Ok(u) = clean.parse::<u64>() {
            return Value::Number(u.into());
        }
    }
    if let Some(hex) = text.strip_prefix("0x")
        && let Ok(i) = i64::from_str_radix(hex, 16)
    {
        return Value::Number(i.into());
    }
    let looks_float = digits
        .bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'-' | b'+'))
        && digits.bytes().any(|b| b.is_ascii_digit())
        && digits.contains('.');
    if looks_float
        && let Ok(f) = text.parse::<f64>()
        && let Some(n) = Number::from_f64(f)
    {
        return Value::Number(n);
    }
    Value::String(text.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_and_locations() {
        let doc = YamlDoc::parse(
            "r.yaml",
            "configVersion: v3.0\nforce: yes\nweight: 10\nratio: 2.5\nconditions:\n  - a => b\n  - 'x'\nempty:\n",
        )
        .unwrap();
        assert_eq!(
            doc.value,
            json!({"configVersion":"v3.0","force":true,"weight":10,"ratio":2.5,
                   "conditions":["a => b","x"],"empty":null})
        );
        let p = FieldPath::root().key("conditions").index(1);
        assert_eq!(doc.locate(&p), Location { line: 7, column: 5 });
        assert_eq!(
            doc.locate_key(&FieldPath::root().key("force")),
            Location { line: 2, column: 1 }
        );
        // A missing field locates to its nearest ancestor.
        assert_eq!(
            doc.locate(&p.key("nothing")),
            Location { line: 7, column: 5 }
        );
    }

    #[test]
    fn flow_style_anchors_and_quoted_scalars() {
        let doc = YamlDoc::parse(
            "c.yaml",
            "a: &x {k: \"1\", n: 1}\nb: *x\nc: [on, 'on', !!str 5]\n",
        )
        .unwrap();
        assert_eq!(
            doc.value,
            json!({"a":{"k":"1","n":1},"b":{"k":"1","n":1},"c":[true,"on","5"]})
        );
        assert_eq!(
            doc.locate(&FieldPath::root().key("a").key("n")),
            Location {
                line: 1,
                column: 19
            }
        );
    }

    #[test]
    fn syntax_errors_are_located() {
        let e = YamlDoc::parse("bad.yaml", "a: 1\nb: [1, 2\nc: 3\n").unwrap_err();
        assert_eq!(e.origin, "bad.yaml");
        assert!(e.location.line >= 2, "{e}");
        let e = YamlDoc::parse("dup.yaml", "a: 1\na: 2\n").unwrap_err();
        assert_eq!(e.location, Location { line: 2, column: 1 });
        assert!(e.message.contains("duplicate key"));
        let e = YamlDoc::parse("two.yaml", "a: 1\n---\nb: 2\n").unwrap_err();
        assert!(e.message.contains("more than one"), "{e}");
    }

    #[test]
    fn error_offsets_point_into_scalars() {
        let doc = YamlDoc::parse("r.yaml", "conditions:\n  - \"host = 1 => ,abc\"\n").unwrap();
        let path = FieldPath::root().key("conditions").index(0);
        let e = doc.locate_error(&RuleError::at_offset(path, 12, "unexpected ','"));
        assert_eq!(
            e.location,
            Location {
                line: 2,
                column: 18
            }
        );
        assert!(e.render().contains("^"));
    }

    #[test]
    fn alias_bombs_are_refused() {
        let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..10 {
            text.push_str(&format!(
                "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n",
                p = i - 1
            ));
        }
        let e = YamlDoc::parse("bomb.yaml", &text).unwrap_err();
        assert!(e.message.contains("aliases expand"), "{e}");
    }

    #[test]
    fn streams_keep_every_document_located() {
        let doc = YamlDoc::parse_stream("s", "a: 1\n---\nb: [x, y]\n---\n---\n- 3\n").unwrap();
        assert_eq!(doc.value, json!([{"a": 1}, {"b": ["x", "y"]}, null, [3]]));
        let p = FieldPath::root().index(1).key("b").index(1);
        assert_eq!(doc.locate(&p), Location { line: 3, column: 8 });
        assert_eq!(YamlDoc::parse_stream("s", "").unwrap().value, json!([]));
        assert_eq!(
            YamlDoc::parse_stream("s", "# c\n").unwrap().value,
            json!([])
        );
        assert_eq!(
            YamlDoc::parse_stream("s", "---\n---\n").unwrap().value,
            json!([null, null])
        );
        let e = YamlDoc::parse_stream("s", "a: 1\n---\nb: [1\n").unwrap_err();
        assert!(e.location.line >= 3, "{e}");
    }

    #[test]
    fn empty_document_is_null() {
        assert_eq!(YamlDoc::parse("e", "").unwrap().value, Value::Null);
        assert_eq!(YamlDoc::parse("e", "# only\n").unwrap().value, Value::Null);
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "\\PC{0,200}") {
            let _ = YamlDoc::parse("p", &s);
        }
        #[test]
        fn never_panics_on_yamlish(s in "([a-z]{1,3}: ?|- |\\[|\\]|\\{|\\}|&a |\\*a|'|\"|\n  |, ){0,40}") {
            let _ = YamlDoc::parse("p", &s);
        }
    }
}
