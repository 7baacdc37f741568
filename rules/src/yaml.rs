//! YAML documents with a location for every field.
//!
//! A document is parsed with `saphyr-parser` (a maintained, pure-Rust YAML parser) into a
//! flat tree of nodes over its source text (`crate::tree`): every value's and mapping key's
//! line and column, and every scalar's text (a range of the source when written verbatim).
//! Routers deserialize their rule straight from the tree ([`YamlDoc::rule_doc`], a
//! [`DocTree`]) and report problems by field path; [`YamlDoc::locate`] turns the path back
//! into a line and column. A `serde_json::Value` of the document ([`YamlDoc::value`]) is
//! built only when a reader asks for one (it takes about twelve times the text of a rule of
//! many small mappings).
//!
//! Plain scalars resolve as SnakeYAML (Dubbo's YAML library) resolves them: `true`/`false`,
//! `yes`/`no`, `on`/`off` in their three spellings are booleans (YAML 1.1), `~`/`null`/empty
//! is null, decimal and `0x` integers and decimal floats are numbers; everything quoted or
//! block-styled is a string.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};

use routechain_core::{DocNode, DocTree, FieldPath, PathSegment, RuleDoc, RuleError, tree_value};
use saphyr_parser::{Event, Parser, ScalarStyle, Span};
use serde_json::{Number, Value};

use crate::located::line_starts;
pub use crate::located::{LocatedError, Location, SourceExcerpt};
use crate::scalar::{locate_in_scalar, map_scalar};
use crate::tree::{ByteCursor, Node, Pos, Shape, Tree};

/// A parsed YAML document: the value, where every field is, and where it came from.
#[derive(Debug, Clone)]
pub struct YamlDoc {
    /// The file path or config-center node.
    pub origin: String,
    /// The document as a JSON value, built from the tree when first asked for (shared by
    /// clones).
    value: Arc<OnceLock<Value>>,
    source: Arc<str>,
    /// Byte offset of the start of every line.
    line_starts: Arc<[usize]>,
    /// Where every value and key is, in the shape of the value.
    tree: Arc<Tree>,
    /// What locating many problems in one place reuses (shared by clones: same source).
    cache: Arc<Mutex<LocateCache>>,
}

/// Kept between located problems, so 10,000 problems in one 168 KB scalar cost one pass
/// over it rather than 10,000.
#[derive(Debug, Default)]
struct LocateCache {
    /// The scalar (by its start) whose offsets were asked for last, and how many times.
    last_scalar: Option<(Pos, u32)>,
    /// Every value character's location in that scalar, built on its second use.
    scalar_map: Option<(Pos, Vec<Location>)>,
    /// The last line looked at, and whether it is ASCII (a column is then a byte offset).
    ascii_line: Option<(usize, bool)>,
}

/// Where a scanner error points, from the marker's character index through this crate's
/// line definition ([`crate::located::location_of_byte`]): the scanner's own line and
/// column can disagree with it (a column past the end of its line was found by fuzzing).
fn marker_location(text: &str, marker: &saphyr_parser::Marker) -> Location {
    let byte = text
        .char_indices()
        .nth(marker.index())
        .map_or(text.len(), |(b, _)| b);
    crate::located::location_of_byte(text, byte)
}

impl YamlDoc {
    /// Parses `text`; `origin` names it in errors. Only the first document of a stream is
    /// read; a second one is an error. A leading byte-order mark is skipped.
    pub fn parse(origin: impl Into<String>, text: &str) -> Result<Self, LocatedError> {
        Self::parse_source(origin.into(), Arc::from(strip_bom(text)))
    }

    /// Parses like [`YamlDoc::parse`], taking the text: it is kept once (as the source the
    /// locations point into), not twice while the document is built.
    pub fn parse_owned(origin: impl Into<String>, text: String) -> Result<Self, LocatedError> {
        let source: Arc<str> = Arc::from(strip_bom(&text));
        drop(text);
        Self::parse_source(origin.into(), source)
    }

    fn parse_source(origin: String, source: Arc<str>) -> Result<Self, LocatedError> {
        let text = &*source;
        let at = |line: usize, column: usize, message: String| {
            LocatedError::in_source(&origin, text, Location { line, column }, None, message)
        };
        let mut builder = Builder::default();
        let mut documents = 0;
        for event in Parser::new_from_str(text) {
            let (event, span) = event.map_err(|e| {
                let l = marker_location(text, e.marker());
                at(l.line, l.column, e.info().to_string())
            })?;
            if let Event::DocumentStart(_) = event {
                documents += 1;
                if documents > 1 {
                    return Err(at(
                        span.start.line(),
                        span.start.col() + 1,
                        "more than one YAML document; a rule is one document".into(),
                    ));
                }
            }
            builder
                .event(event, span, text)
                .map_err(|(l, msg)| at(l.line, l.column, msg))?;
        }
        Ok(YamlDoc {
            origin,
            value: Arc::default(),
            line_starts: line_starts(text).into(),
            source,
            tree: Arc::new({
                builder.tree.shrink();
                builder.tree
            }),
            cache: Arc::default(),
        })
    }

    /// Wraps a value built in code (no source text): every field locates to 1:1.
    pub fn from_value(origin: impl Into<String>, value: Value) -> Self {
        YamlDoc {
            origin: origin.into(),
            value: Arc::new(OnceLock::from(value)),
            source: "".into(),
            line_starts: vec![0].into(),
            tree: Arc::default(),
            cache: Arc::default(),
        }
    }

    /// The node at `path`, or the nearest located ancestor (and false).
    fn node(&self, path: &FieldPath) -> Option<(&Node, bool)> {
        self.node_index(path)
            .map(|(i, exact)| (self.tree.node(i), exact))
    }

    /// The index of the node at `path`, or of the nearest located ancestor (and false).
    fn node_index(&self, path: &FieldPath) -> Option<(u32, bool)> {
        let tree = &*self.tree;
        let mut node = tree.root?;
        for seg in &path.0 {
            let child = match seg {
                PathSegment::Index(i) => tree.item(node, *i),
                PathSegment::Key(k) => tree.entry(&self.source, node, k),
            };
            match child {
                Some(n) => node = n,
                None => return Some((node, false)),
            }
        }
        Some((node, true))
    }

    /// Where the value at `path` starts; the nearest located ancestor when the path itself
    /// has no value (a missing field is reported at its parent).
    pub fn locate(&self, path: &FieldPath) -> Location {
        self.node(path)
            .map_or(Location { line: 1, column: 1 }, |(n, _)| n.at.location())
    }

    /// Where the key of the field at `path` starts (its value's location when it has no key).
    pub fn locate_key(&self, path: &FieldPath) -> Location {
        match self.node(path) {
            Some((n, true)) if matches!(path.0.last(), Some(PathSegment::Key(_))) => {
                n.key_at.location()
            }
            _ => self.locate(path),
        }
    }

    /// Where character `offset` of the string at `path` is in the source, whatever the
    /// scalar's style (quoted with escapes, plain or block, on one line or several); the
    /// value's start when `path` is not a string.
    pub fn locate_offset(&self, path: &FieldPath, offset: usize) -> Location {
        match self.node_index(path) {
            Some((i, true)) if self.is_string(i) => {
                let node = self.tree.node(i);
                let start = node.at.location();
                let (Some(style), Some(from)) = (node.style(), self.byte_offset(start)) else {
                    return start;
                };
                let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
                if let Some((at, map)) = &cache.scalar_map
                    && *at == node.at
                {
                    return map.get(offset).or(map.last()).copied().unwrap_or(start);
                }
                let uses = match cache.last_scalar {
                    Some((at, n)) if at == node.at => n + 1,
                    _ => 1,
                };
                cache.last_scalar = Some((node.at, uses));
                if uses < 2 {
                    return locate_in_scalar(&self.source, from, start, style, offset);
                }
                // The second problem in this scalar: map it whole, once.
                let map = map_scalar(&self.source, from, start, style);
                let at = map.get(offset).or(map.last()).copied().unwrap_or(start);
                cache.scalar_map = Some((node.at, map));
                at
            }
            _ => self.locate(path),
        }
    }

    /// The byte offset of a location in the source.
    fn byte_offset(&self, at: Location) -> Option<usize> {
        let line_start = *self.line_starts.get(at.line.checked_sub(1)?)?;
        let column = at.column.checked_sub(1)?;
        let line = self.source_line_str(at.line)?;
        if self.line_is_ascii(at.line, line) {
            return Some(line_start + column.min(line.len()));
        }
        let rest = &self.source[line_start..];
        let within = rest
            .char_indices()
            .nth(column)
            .map_or(rest.len(), |(i, _)| i);
        Some(line_start + within)
    }

    /// Whether line `n` (`line`) is ASCII, remembered for the last line asked (problems come
    /// many to a line).
    fn line_is_ascii(&self, n: usize, line: &str) -> bool {
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        match cache.ascii_line {
            Some((m, ascii)) if m == n => ascii,
            _ => {
                let ascii = line.is_ascii();
                cache.ascii_line = Some((n, ascii));
                ascii
            }
        }
    }

    /// The excerpt of line `n` around `column`, in time independent of the column on an
    /// ASCII line.
    fn excerpt(&self, n: usize, column: usize) -> Option<Box<SourceExcerpt>> {
        let line = self.source_line_str(n)?;
        if self.line_is_ascii(n, line) {
            let first = column.saturating_sub(crate::located::EXCERPT_RADIUS).max(1);
            let from = (first - 1).min(line.len());
            let to = (from + 2 * crate::located::EXCERPT_RADIUS).min(line.len());
            return Some(Box::new(SourceExcerpt {
                text: line[from..to].to_string(),
                first_column: first,
                cut_after: to < line.len(),
            }));
        }
        Some(Box::new(SourceExcerpt::around(line, column)))
    }

    /// Locates a rule error: the field's value (its key for an unknown field), plus the
    /// error's offset inside the scalar (see [`YamlDoc::locate_offset`]).
    pub fn locate_error(&self, error: &RuleError) -> LocatedError {
        let loc = if error.message.starts_with("unknown field") {
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
        } else if let Some(offset) = error.offset {
            self.locate_offset(&error.path, offset)
        } else {
            self.locate(&error.path)
        };
        LocatedError {
            origin: self.origin.clone(),
            location: Location {
                line: loc.line.max(1),
                column: loc.column.max(1),
            },
            field: Some(error.path.clone()),
            message: error.message.clone(),
            source_line: self.excerpt(loc.line, loc.column),
        }
    }

    /// True when node `i` is a string (not through an alias).
    fn is_string(&self, i: u32) -> bool {
        match self.tree.shape(&self.source, i) {
            Shape::Scalar(text, style, forced) if self.tree.node(i).style().is_some() => {
                matches!(scalar_value(text, style, forced), Value::String(_))
            }
            _ => false,
        }
    }

    /// The document as a JSON value (`Null` for an empty document), built from the tree
    /// the first time it is asked for and kept. Readers of a rule use
    /// [`YamlDoc::rule_doc`] instead, which builds none.
    pub fn value(&self) -> &Value {
        self.value.get_or_init(|| match self.tree.root {
            Some(root) => tree_value(self, root),
            None => Value::Null,
        })
    }

    /// The document at `path` for a router to read (see [`RuleDoc`]): the tree's node
    /// there, read in place (`None` when nothing is there).
    pub fn rule_doc<'a>(&'a self, path: &'a FieldPath) -> Option<RuleDoc<'a>> {
        if self.tree.root.is_none() {
            // Built from a value (or empty): read the value.
            return self.get(path).map(|v| RuleDoc::new(v, path));
        }
        let node = self.node_at(path)?;
        Some(RuleDoc::from_tree(self, Some(node), path))
    }

    /// The document at `path` as a JSON value, built from the tree (nothing is kept): for
    /// readers of a part of a large document.
    pub fn value_at(&self, path: &FieldPath) -> Option<Value> {
        if self.tree.root.is_none() || self.value.get().is_some() {
            return self.get(path).cloned();
        }
        self.node_at(path).map(|n| tree_value(self, n))
    }

    /// The document as a JSON value, every value at a path `elide` accepts that is not null
    /// read as `placeholder` (not built): the small part of a large document its reader
    /// walks as a value (a chain file without its inline rules).
    pub fn value_eliding(&self, elide: &dyn Fn(&FieldPath) -> bool, placeholder: Value) -> Value {
        if self.tree.root.is_none() || self.value.get().is_some() {
            return self.value().clone();
        }
        let mut path = FieldPath::root();
        match self.tree.root {
            Some(root) => self.build_eliding(root, &mut path, elide, &placeholder),
            None => Value::Null,
        }
    }

    fn build_eliding(
        &self,
        node: u32,
        path: &mut FieldPath,
        elide: &dyn Fn(&FieldPath) -> bool,
        placeholder: &Value,
    ) -> Value {
        match self.doc_node(node) {
            DocNode::Scalar(v) => v,
            _ if elide(path) => placeholder.clone(),
            DocNode::Seq(items) => Value::Array(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, &n)| {
                        path.0.push(PathSegment::Index(i));
                        let v = self.build_eliding(n, path, elide, placeholder);
                        path.0.pop();
                        v
                    })
                    .collect(),
            ),
            DocNode::Map(entries) => Value::Object(
                entries
                    .iter()
                    .map(|&n| {
                        let key = self.doc_key(n).to_string();
                        path.0.push(PathSegment::Key(key.clone()));
                        let v = self.build_eliding(n, path, elide, placeholder);
                        path.0.pop();
                        (key, v)
                    })
                    .collect(),
            ),
        }
    }

    /// True when the value at `path` here and at `other_path` in `other` are equal, compared
    /// in the trees (no value is built).
    pub fn same_at(&self, path: &FieldPath, other: &YamlDoc, other_path: &FieldPath) -> bool {
        match (self.rule_doc(path), other.rule_doc(other_path)) {
            (None, None) => true,
            (Some(a), Some(b)) => match (self.node_at(path), other.node_at(other_path)) {
                (Some(x), Some(y)) if self.tree.root.is_some() && other.tree.root.is_some() => {
                    same_nodes(self, x, other, y)
                }
                _ => a.value() == b.value(),
            },
            _ => false,
        }
    }

    /// True when the value at `path` exists and is a mapping (no value is built).
    pub fn is_object_at(&self, path: &FieldPath) -> bool {
        match self.rule_doc(path) {
            Some(doc) => doc.is_object(),
            None => false,
        }
    }

    /// The index of the node at exactly `path` (aliases followed, as in the value), for a
    /// reader walking the tree ([`DocTree`]); `None` when nothing is there or the document
    /// was built from a value.
    pub fn node_at(&self, path: &FieldPath) -> Option<u32> {
        let mut node = self.tree.root?;
        for seg in &path.0 {
            node = match (seg, self.tree.shape(&self.source, node)) {
                (PathSegment::Index(i), Shape::Seq(items)) => *items.get(*i)?,
                (PathSegment::Key(k), Shape::Map(kids)) => {
                    self.tree.find_key(&self.source, kids, k)?
                }
                _ => return None,
            };
        }
        Some(node)
    }

    /// The value at `path` (builds the whole document's value: see [`YamlDoc::value`]).
    pub fn get(&self, path: &FieldPath) -> Option<&Value> {
        let mut v = self.value();
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
        self.source_line_str(n).map(str::to_string)
    }

    fn source_line_str(&self, n: usize) -> Option<&str> {
        let start = *self.line_starts.get(n.checked_sub(1)?)?;
        if start > self.source.len() || (start == self.source.len() && n > 1) {
            return None;
        }
        // The line ends where the next starts, less its break: no search along the line.
        let end = match self.line_starts.get(n) {
            Some(&next) => {
                let mut end = next;
                if self.source[..end].ends_with('\n') {
                    end -= 1;
                }
                if self.source[..end].ends_with('\r') {
                    end -= 1;
                }
                end
            }
            None => self.source.len(),
        };
        Some(&self.source[start..end.max(start)])
    }
}

/// A stream of YAML documents (`---` separated), as a config center stores Dubbo's mesh rules.
impl YamlDoc {
    /// Parses every document of `text` into one value: a sequence holding each document in
    /// order (`Null` for an empty one), so a field of document `i` has the path `[i].field`
    /// and every location points into the whole text. A text with no document (empty, or only
    /// comments) is the empty sequence.
    pub fn parse_stream(origin: impl Into<String>, text: &str) -> Result<Self, LocatedError> {
        Self::parse_stream_source(origin.into(), Arc::from(strip_bom(text)))
    }

    /// Parses a stream like [`YamlDoc::parse_stream`], taking the text (kept once).
    pub fn parse_stream_owned(
        origin: impl Into<String>,
        text: String,
    ) -> Result<Self, LocatedError> {
        let source: Arc<str> = Arc::from(strip_bom(&text));
        drop(text);
        Self::parse_stream_source(origin.into(), source)
    }

    fn parse_stream_source(origin: String, source: Arc<str>) -> Result<Self, LocatedError> {
        let text = &*source;
        let at = |line: usize, column: usize, message: String| {
            LocatedError::in_source(&origin, text, Location { line, column }, None, message)
        };
        let mut builder = Builder::default();
        let top = builder
            .tree
            .push(Location { line: 1, column: 1 }, None, false);
        builder.stack.push(Frame::Seq {
            kids: Vec::new(),
            node: top,
            anchor: 0,
            size: 1,
        });
        let mut values_before = 0;
        for event in Parser::new_from_str(text) {
            let (event, span) = event.map_err(|e| {
                let l = marker_location(text, e.marker());
                at(l.line, l.column, e.info().to_string())
            })?;
            let items = |b: &Builder| match b.stack.first() {
                Some(Frame::Seq { kids, .. }) => kids.len(),
                _ => 0,
            };
            match event {
                Event::DocumentStart(_) => values_before = items(&builder),
                // An empty document is a null, as in a single-document parse.
                Event::DocumentEnd
                    if builder.stack.len() == 1 && items(&builder) == values_before =>
                {
                    let null = builder.tree.push(loc(&span), None, false);
                    builder.tree.set_null(null);
                    builder.attach_keyed(null, 1, text);
                }
                event => builder
                    .event(event, span, text)
                    .map_err(|(l, m)| at(l.line, l.column, m))?,
            }
        }
        if let Some(Frame::Seq { kids, node, .. }) = builder.stack.pop() {
            builder.tree.set_kids(node, kids, text);
            builder.tree.root = Some(node);
        }
        Ok(YamlDoc {
            origin,
            value: Arc::default(),
            line_starts: line_starts(text).into(),
            source,
            tree: Arc::new({
                builder.tree.shrink();
                builder.tree
            }),
            cache: Arc::default(),
        })
    }
}

/// True when node `a` of `x` and node `b` of `y` hold equal values.
fn same_nodes(x: &YamlDoc, a: u32, y: &YamlDoc, b: u32) -> bool {
    match (x.doc_node(a), y.doc_node(b)) {
        (DocNode::Scalar(v), DocNode::Scalar(w)) => v == w,
        (DocNode::Seq(p), DocNode::Seq(q)) => {
            p.len() == q.len() && p.iter().zip(q).all(|(&i, &j)| same_nodes(x, i, y, j))
        }
        (DocNode::Map(p), DocNode::Map(q)) => {
            p.len() == q.len()
                && p.iter()
                    .zip(q)
                    .all(|(&i, &j)| x.doc_key(i) == y.doc_key(j) && same_nodes(x, i, y, j))
        }
        _ => false,
    }
}

fn strip_bom(text: &str) -> &str {
    text.strip_prefix('\u{feff}').unwrap_or(text)
}

fn unknown_field_name(message: &str) -> Option<&str> {
    let start = message.find('`')? + 1;
    let end = start + message[start..].find('`')?;
    Some(&message[start..end])
}

enum Frame {
    Seq {
        /// The items' nodes.
        kids: Vec<u32>,
        node: u32,
        anchor: usize,
        /// Values this collection holds, aliases expanded (itself included).
        size: usize,
    },
    Map {
        /// The keys so far, for duplicates.
        keys: HashSet<Box<str>>,
        /// The values' nodes.
        kids: Vec<u32>,
        node: u32,
        /// The key whose value comes next, where it is and its byte offset.
        pending_key: Option<(String, Location, Option<usize>)>,
        anchor: usize,
        size: usize,
    },
}

/// The most values a document may expand to through aliases: a document of aliases to
/// aliases ("billion laughs") from a config center must not exhaust memory.
pub const MAX_ALIAS_EXPANSION: usize = 100_000;

#[derive(Default)]
struct Builder {
    stack: Vec<Frame>,
    tree: Tree,
    cursor: ByteCursor,
    /// Anchor id: its node and how many values it expands to.
    anchors: HashMap<usize, (u32, usize)>,
    expanded: usize,
}

type BuildError = (Location, String);

fn loc(span: &Span) -> Location {
    Location {
        line: span.start.line(),
        column: span.start.col() + 1,
    }
}

impl Builder {
    /// True when the next scalar is a mapping key.
    fn expects_key(&self) -> bool {
        matches!(
            self.stack.last(),
            Some(Frame::Map {
                pending_key: None,
                ..
            })
        )
    }

    fn event(&mut self, event: Event<'_>, span: Span, source: &str) -> Result<(), BuildError> {
        match event {
            Event::Scalar(text, style, anchor, tag) => {
                let byte = self.cursor.byte_of(source, span.start.index());
                if let Some(Frame::Map {
                    keys, pending_key, ..
                }) = self.stack.last_mut()
                    && pending_key.is_none()
                {
                    let key = text.to_string();
                    if !keys.insert(key.as_str().into()) {
                        return Err((loc(&span), format!("duplicate key {key:?}")));
                    }
                    *pending_key = Some((key, loc(&span), byte));
                    return Ok(());
                }
                let forced_string = tag.as_ref().is_some_and(|t| t.suffix == "str");
                let node = self.tree.push(loc(&span), Some(style), false);
                self.tree
                    .set_scalar(node, &text, byte, forced_string, source);
                if anchor > 0 {
                    self.anchors.insert(anchor, (node, 1));
                }
                self.attach_keyed(node, 1, source);
                Ok(())
            }
            Event::Alias(id) => {
                let (target, size) = self
                    .anchors
                    .get(&id)
                    .copied()
                    .ok_or_else(|| (loc(&span), "alias to an unknown anchor".to_string()))?;
                self.expanded += size;
                if self.expanded > MAX_ALIAS_EXPANSION {
                    return Err((
                        loc(&span),
                        format!("aliases expand to more than {MAX_ALIAS_EXPANSION} values"),
                    ));
                }
                if self.expects_key() {
                    return Err((loc(&span), "an alias cannot be a mapping key".into()));
                }
                let node = self.tree.push(loc(&span), None, false);
                self.tree.set_alias(node, target);
                self.attach_keyed(node, size, source);
                Ok(())
            }
            Event::SequenceStart(anchor, _) => {
                if self.expects_key() {
                    return Err((loc(&span), "a sequence cannot be a mapping key".into()));
                }
                let node = self.tree.push(loc(&span), None, false);
                self.stack.push(Frame::Seq {
                    kids: Vec::new(),
                    node,
                    anchor,
                    size: 1,
                });
                Ok(())
            }
            Event::MappingStart(anchor, _) => {
                if self.expects_key() {
                    return Err((loc(&span), "a mapping cannot be a mapping key".into()));
                }
                let node = self.tree.push(loc(&span), None, true);
                self.stack.push(Frame::Map {
                    keys: HashSet::new(),
                    kids: Vec::new(),
                    node,
                    pending_key: None,
                    anchor,
                    size: 1,
                });
                Ok(())
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let (node, anchor, size) = match self.stack.pop() {
                    Some(Frame::Seq {
                        kids,
                        node,
                        anchor,
                        size,
                    })
                    | Some(Frame::Map {
                        kids,
                        node,
                        anchor,
                        size,
                        ..
                    }) => {
                        self.tree.set_kids(node, kids, source);
                        (node, anchor, size)
                    }
                    None => return Err((loc(&span), "unbalanced end of collection".into())),
                };
                if anchor > 0 {
                    self.anchors.insert(anchor, (node, size));
                }
                self.attach_keyed(node, size, source);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Attaches a complete value's node (standing for `size` values) to the open
    /// collection, or makes it the root.
    fn attach_keyed(&mut self, node: u32, size: usize, source: &str) {
        match self.stack.last_mut() {
            None => {
                if self.tree.root.is_none() {
                    self.tree.root = Some(node);
                }
            }
            Some(Frame::Seq {
                kids, size: total, ..
            }) => {
                kids.push(node);
                *total += size;
            }
            Some(Frame::Map {
                kids,
                pending_key,
                size: total,
                ..
            }) => {
                if let Some((k, key_at, key_byte)) = pending_key.take() {
                    self.tree.set_key(node, &k, key_at, key_byte, source);
                    kids.push(node);
                    *total += size;
                }
            }
        }
    }
}

/// The JSON value of a scalar: plain ones resolved as SnakeYAML does, others strings.
fn scalar_value(text: &str, style: Option<ScalarStyle>, forced_string: bool) -> Value {
    if style == Some(ScalarStyle::Plain) && !forced_string {
        resolve_plain(text)
    } else {
        Value::String(text.to_string())
    }
}

impl DocTree for YamlDoc {
    fn doc_node(&self, node: u32) -> DocNode<'_> {
        match self.tree.shape(&self.source, node) {
            Shape::Scalar(text, style, forced) => {
                DocNode::Scalar(scalar_value(text, style, forced))
            }
            Shape::Null => DocNode::Scalar(Value::Null),
            Shape::Seq(items) => DocNode::Seq(items),
            Shape::Map(entries) => DocNode::Map(entries),
        }
    }

    fn doc_key(&self, node: u32) -> &str {
        self.tree.key_of(&self.source, node)
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
            *doc.value(),
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
            *doc.value(),
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
    fn many_offsets_in_one_scalar_map_it_once_with_the_same_answers() {
        let text = "v: \"a\\tb \\x41 c\n  d é f\"\nw: 'x''y\r  z'\n";
        let doc = YamlDoc::parse("t.yaml", text).unwrap();
        for key in ["v", "w", "v"] {
            let path = FieldPath::root().key(key);
            let node = doc.node(&path).unwrap().0;
            let start = node.at.location();
            let from = doc.byte_offset(start).unwrap();
            let style = node.style().unwrap();
            for offset in 0..14 {
                assert_eq!(
                    doc.locate_offset(&path, offset),
                    locate_in_scalar(&doc.source, from, start, style, offset),
                    "{key} offset {offset}"
                );
            }
        }
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
        assert_eq!(
            *doc.value(),
            json!([{"a": 1}, {"b": ["x", "y"]}, null, [3]])
        );
        let p = FieldPath::root().index(1).key("b").index(1);
        assert_eq!(doc.locate(&p), Location { line: 3, column: 8 });
        assert_eq!(YamlDoc::parse_stream("s", "").unwrap().value(), &json!([]));
        assert_eq!(
            YamlDoc::parse_stream("s", "# c\n").unwrap().value(),
            &json!([])
        );
        assert_eq!(
            YamlDoc::parse_stream("s", "---\n---\n").unwrap().value(),
            &json!([null, null])
        );
        let e = YamlDoc::parse_stream("s", "a: 1\n---\nb: [1\n").unwrap_err();
        assert!(e.location.line >= 3, "{e}");
    }

    #[test]
    fn empty_document_is_null() {
        assert_eq!(YamlDoc::parse("e", "").unwrap().value(), &Value::Null);
        assert_eq!(
            YamlDoc::parse("e", "# only\n").unwrap().value(),
            &Value::Null
        );
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

    #[test]
    fn scanner_errors_are_located_inside_their_line() {
        // A fuzzing finding: the scanner's column for an unprintable character was past the
        // end of its line (multi-byte characters before it).
        let data = include_bytes!("../../fuzz/corpus/chain/regression-scanner-error-column");
        let text = String::from_utf8_lossy(data);
        let e = YamlDoc::parse("f.yaml", &text).expect_err("an unprintable character");
        let lines: Vec<&str> = crate::located::lines(&text).collect();
        let (line, column) = (e.location.line, e.location.column);
        let width = lines.get(line - 1).map_or(0, |l| l.chars().count());
        assert!(
            column <= width + 1,
            "{e}: column past the end ({width} characters)"
        );
    }

    /// A rule read from the tree parses as it does from the document's JSON value: the same
    /// result or the same message, for each kind of field a rule type has.
    #[test]
    fn the_tree_deserializes_as_the_value_does() {
        use std::collections::BTreeMap;

        #[derive(Debug, PartialEq, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Rule {
            name: String,
            weight: Option<u8>,
            on: Option<bool>,
            ratio: Option<f64>,
            tags: Option<Vec<String>>,
            table: Option<BTreeMap<String, u32>>,
            pair: Option<(u16, char)>,
            kind: Option<Kind>,
            unit: Option<()>,
        }
        #[derive(Debug, PartialEq, serde::Deserialize)]
        #[serde(rename_all = "lowercase")]
        enum Kind {
            Plain,
            Weighted { w: u32 },
        }

        fn both<T: serde::de::DeserializeOwned + PartialEq + std::fmt::Debug>(text: &str) {
            let doc = YamlDoc::parse("r.yaml", text).unwrap();
            let root = FieldPath::root();
            let from_tree = doc.rule_doc(&root).unwrap().parse::<T>();
            let from_value = RuleDoc::new(doc.value(), &root).parse::<T>();
            assert_eq!(from_tree, from_value, "{text}");
        }
        for text in [
            "name: a\nweight: 7\non: true\nratio: 1.5\ntags: [x, y]\ntable: {a: 1}",
            "name: a\npair: [1, c]\nkind: plain\nunit: null",
            "name: a\nkind: {weighted: {w: 3}}",
            "name: 5",
            "name: [a]",
            "name: {a: 1}",
            "name: a\nweight: 300",
            "name: a\nweight: -1",
            "name: a\nweight: x",
            "name: a\nweight: [1]",
            "name: a\nweight: {a: 1}",
            "name: a\non: yes please",
            "name: a\non: [true]",
            "name: a\nratio: '1.5'",
            "name: a\ntags: x",
            "name: a\ntags: {a: b}",
            "name: a\ntags: [1]",
            "name: a\ntable: [1]",
            "name: a\ntable: {a: x}",
            "name: a\npair: [1]",
            "name: a\npair: [1, c, 3]",
            "name: a\npair: [1, cc]",
            "name: a\nkind: other",
            "name: a\nkind: [plain]",
            "name: a\nunit: 1",
            "name: a\nnope: 1",
            "[1, 2]",
            "just text",
            "",
        ] {
            both::<Rule>(text);
        }
        both::<Vec<u8>>("[1, 2, 256]");
        both::<BTreeMap<String, Vec<bool>>>("a: [true, 1]");
        both::<String>("{a: 1}");
        both::<BTreeMap<u32, bool>>("1: true\n2: false");
    }
}
