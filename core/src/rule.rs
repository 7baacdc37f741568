//! Rule documents as routers receive them, and rule errors located by field path.
//!
//! The `rules` crate parses YAML (chain files, rule files, config-center nodes) into a tree
//! of nodes over the source text, which `core` sees through [`DocTree`]. A router receives
//! its rule as a [`RuleDoc`]: a node of such a tree (or a `serde_json::Value`, for rules
//! built in code), which it deserializes in place with [`RuleDoc::parse`] (serde_json's types,
//! messages and field paths) without building the whole document as a value first. It
//! reports problems as [`RuleError`]s located by field path (`conditions[2].to[0].weight`);
//! the loader turns the path back into file, line and column. So `core` and the routers know
//! nothing of YAML.

use std::fmt;

use serde::de::DeserializeOwned;

/// One step of a field path.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PathSegment {
    /// A mapping key.
    Key(String),
    /// A sequence index.
    Index(usize),
}

/// A path to a field inside a document, e.g. `routers[1].rule.conditions[0]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FieldPath(pub Vec<PathSegment>);

impl FieldPath {
    /// The root of a document.
    pub fn root() -> Self {
        FieldPath(Vec::new())
    }
    /// This path extended by a key.
    pub fn key(&self, key: impl Into<String>) -> Self {
        let mut p = self.clone();
        p.0.push(PathSegment::Key(key.into()));
        p
    }
    /// This path extended by an index.
    pub fn index(&self, index: usize) -> Self {
        let mut p = self.clone();
        p.0.push(PathSegment::Index(index));
        p
    }
    /// This path followed by `other`.
    pub fn join(&self, other: &FieldPath) -> Self {
        let mut p = self.clone();
        p.0.extend(other.0.iter().cloned());
        p
    }
    /// The path one step up (the root stays the root).
    pub fn parent(&self) -> Self {
        let mut p = self.clone();
        p.0.pop();
        p
    }
    /// True for the root.
    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }
    /// Converts a `serde_path_to_error` path.
    pub(crate) fn from_serde(path: &serde_path_to_error::Path) -> Self {
        use serde_path_to_error::Segment;
        FieldPath(
            path.iter()
                .filter_map(|s| match s {
                    Segment::Seq { index } => Some(PathSegment::Index(*index)),
                    Segment::Map { key } => Some(PathSegment::Key(key.clone())),
                    Segment::Enum { variant } => Some(PathSegment::Key(variant.clone())),
                    Segment::Unknown => None,
                })
                .collect(),
        )
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("(document)");
        }
        for (i, seg) in self.0.iter().enumerate() {
            match seg {
                PathSegment::Key(k) if i == 0 => write!(f, "{k}")?,
                PathSegment::Key(k) => write!(f, ".{k}")?,
                PathSegment::Index(n) => write!(f, "[{n}]")?,
            }
        }
        Ok(())
    }
}

/// A problem in a rule document, located by field path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct RuleError {
    /// Where in the document (absolute, from the document root).
    pub path: FieldPath,
    /// What is wrong, naming the offending token where there is one.
    pub message: String,
    /// Character offset of the offending token inside the field's scalar text, when known;
    /// the loader adds it to the scalar's column.
    pub offset: Option<usize>,
}

impl RuleError {
    /// An error at `path`.
    pub fn new(path: FieldPath, message: impl Into<String>) -> Self {
        RuleError {
            path,
            message: message.into(),
            offset: None,
        }
    }
    /// An error at `path`, at character `offset` inside the scalar there.
    pub fn at_offset(path: FieldPath, offset: usize, message: impl Into<String>) -> Self {
        RuleError {
            path,
            message: message.into(),
            offset: Some(offset),
        }
    }
}

/// One node of a [`DocTree`], as a reader sees it (an alias already resolved).
#[derive(Debug)]
pub enum DocNode<'a> {
    /// A scalar, as the JSON value it resolves to.
    Scalar(serde_json::Value),
    /// A sequence: its items' nodes, in order.
    Seq(&'a [u32]),
    /// A mapping: its values' nodes, sorted by key (as a `serde_json::Map` iterates).
    Map(&'a [u32]),
}

/// A parsed document held as a tree of nodes over its source text (the `rules` crate's YAML
/// documents), so a rule is read without first building it whole as a `serde_json::Value`
/// (which takes about twelve times the text of a rule of many small mappings).
pub trait DocTree: Send + Sync + fmt::Debug {
    /// Node `node` (aliases resolved).
    fn doc_node(&self, node: u32) -> DocNode<'_>;
    /// The key under which node `node` is a mapping value (empty when it is none).
    fn doc_key(&self, node: u32) -> &str;
}

/// The closest of `known` to `word` when it is close enough to be a typo (Jaro-Winkler
/// similarity of at least 0.8, case ignored): the "did you mean" of every unknown name.
pub fn did_you_mean<'a>(word: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let word = word.to_ascii_lowercase();
    known
        .into_iter()
        .map(|k| (strsim::jaro_winkler(&word, &k.to_ascii_lowercase()), k))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, k)| k)
}

/// A list of expected values as every message writes it: `` `a`, `b`, `c` ``.
pub fn one_of<'a>(known: impl IntoIterator<Item = &'a str>) -> String {
    known
        .into_iter()
        .map(|k| format!("`{k}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The message for an unknown name: `` unknown {what} `word`, expected one of `a`, `b`; did
/// you mean `a`? `` (the hint when a known name is close).
pub fn unknown_name<'a>(
    what: &str,
    word: &str,
    known: impl IntoIterator<Item = &'a str> + Clone,
) -> String {
    let hint = did_you_mean(word, known.clone())
        .map(|k| format!("; did you mean `{k}`?"))
        .unwrap_or_default();
    format!(
        "unknown {what} `{word}`, expected one of {}{hint}",
        one_of(known)
    )
}

/// serde's message for an unknown field or variant (`unknown field `priorty`, expected one
/// of `type`, `priority``) with the "did you mean" of [`unknown_name`].
fn with_did_you_mean(message: String) -> String {
    let Some((word, known)) = ["unknown field `", "unknown variant `"]
        .iter()
        .find_map(|p| message.strip_prefix(p))
        .and_then(|rest| rest.split_once("`, expected one of "))
    else {
        return message;
    };
    let names = known.split(", ").map(|k| k.trim_matches('`'));
    match did_you_mean(word, names) {
        Some(k) => format!("{message}; did you mean `{k}`?"),
        None => message,
    }
}

/// True for an integer: a JSON integer, or the text of an integer no 64-bit integer holds
/// (an optional sign and digits) — how a YAML integer literal past 64 bits arrives, since a
/// JSON value cannot hold it. A field that wants a number says such a value is out of range,
/// not that it is no number.
pub fn is_integer(value: &serde_json::Value) -> bool {
    match value {
        serde_json::Value::Number(n) => n.is_i64() || n.is_u64(),
        serde_json::Value::String(s) => {
            let digits = s.strip_prefix(['-', '+']).unwrap_or(s);
            !digits.is_empty()
                && digits.bytes().all(|b| b.is_ascii_digit())
                && s.parse::<i64>().is_err()
                && s.parse::<u64>().is_err()
        }
        _ => false,
    }
}

/// The message for `value` in a field `name` that takes an integer from `low` to `high`: out
/// of range when it is an integer ([`is_integer`]), else not an integer.
pub fn integer_range_message(
    name: &str,
    value: &serde_json::Value,
    low: impl fmt::Display,
    high: impl fmt::Display,
) -> String {
    if is_integer(value) {
        let shown = match value {
            serde_json::Value::String(s) => s.clone(),
            v => v.to_string(),
        };
        format!("{name} {shown} is out of range: an integer from {low} to {high}")
    } else {
        format!("{name} must be an integer from {low} to {high}, found {value}")
    }
}

/// serde's message for an integer that does not fit its field (`invalid value: integer
/// `5000000000`, expected u32`), or for an integer literal past 64 bits (text: see
/// [`is_integer`]), said as what it is, with the field's range.
fn out_of_range(message: &str) -> Option<String> {
    let (found, ty) = if let Some(rest) = message.strip_prefix("invalid value: integer `") {
        rest.split_once("`, expected ")?
    } else {
        let rest = message.strip_prefix("invalid type: string \"")?;
        let (text, ty) = rest.split_once("\", expected ")?;
        if !is_integer(&serde_json::Value::String(text.to_string())) {
            return None;
        }
        (text, ty)
    };
    let (low, high): (i128, i128) = match ty {
        "u8" => (0, u8::MAX.into()),
        "u16" => (0, u16::MAX.into()),
        "u32" => (0, u32::MAX.into()),
        "u64" | "usize" => (0, u64::MAX.into()),
        "i8" => (i8::MIN.into(), i8::MAX.into()),
        "i16" => (i16::MIN.into(), i16::MAX.into()),
        "i32" => (i32::MIN.into(), i32::MAX.into()),
        "i64" | "isize" => (i64::MIN.into(), i64::MAX.into()),
        _ => return None,
    };
    Some(format!(
        "{found} is out of range: expected an integer from {low} to {high}"
    ))
}

/// The `serde_json::Value` of node `node` of `tree`.
pub fn tree_value(tree: &dyn DocTree, node: u32) -> serde_json::Value {
    build_value(tree, node, &mut FieldPath::root(), &|_| false, &NULL)
}

/// The value of node `node` (at `path`, relative to the value built), each non-scalar value
/// at a path `elide` accepts read as `placeholder` rather than built.
fn build_value(
    tree: &dyn DocTree,
    node: u32,
    path: &mut FieldPath,
    elide: &dyn Fn(&FieldPath) -> bool,
    placeholder: &serde_json::Value,
) -> serde_json::Value {
    match tree.doc_node(node) {
        DocNode::Scalar(v) => v,
        _ if elide(path) => placeholder.clone(),
        DocNode::Seq(items) => serde_json::Value::Array(
            items
                .iter()
                .enumerate()
                .map(|(i, &n)| {
                    path.0.push(PathSegment::Index(i));
                    let v = build_value(tree, n, path, elide, placeholder);
                    path.0.pop();
                    v
                })
                .collect(),
        ),
        DocNode::Map(entries) => serde_json::Value::Object(
            entries
                .iter()
                .map(|&n| {
                    path.0.push(PathSegment::Key(tree.doc_key(n).to_string()));
                    let v = build_value(tree, n, path, elide, placeholder);
                    // The key pushed above, taken back for the entry (no second copy).
                    match path.0.pop() {
                        Some(PathSegment::Key(key)) => (key, v),
                        _ => unreachable!("the path ends with the key pushed"),
                    }
                })
                .collect(),
        ),
    }
}

#[derive(Debug, Clone, Copy)]
enum DocRepr<'a> {
    Value(&'a serde_json::Value),
    /// A node of a tree (`None`: no value there, read as null).
    Tree(&'a dyn DocTree, Option<u32>),
}

/// A borrowed rule document (or part of one) with its path from the document root: a JSON
/// value, or a node of a parsed document's tree (read in place).
#[derive(Debug, Clone, Copy)]
pub struct RuleDoc<'a> {
    repr: DocRepr<'a>,
    /// Its path from the root of the file or node it came from.
    pub path: &'a FieldPath,
}

static NULL: serde_json::Value = serde_json::Value::Null;

impl<'a> RuleDoc<'a> {
    /// A document rooted at `path`.
    pub fn new(value: &'a serde_json::Value, path: &'a FieldPath) -> Self {
        RuleDoc {
            repr: DocRepr::Value(value),
            path,
        }
    }

    /// Node `node` of `tree` (`None`: nothing there, read as null), rooted at `path`
    /// (how `routechain-rules` hands over its YAML trees).
    #[doc(hidden)]
    pub fn from_tree(tree: &'a dyn DocTree, node: Option<u32>, path: &'a FieldPath) -> Self {
        RuleDoc {
            repr: DocRepr::Tree(tree, node),
            path,
        }
    }

    /// The document as a JSON value: borrowed when it is one, else built from the tree (for
    /// readers that walk values; deserialize with [`RuleDoc::parse`] instead where possible,
    /// which builds no value of the whole document).
    pub fn value(&self) -> std::borrow::Cow<'a, serde_json::Value> {
        match self.repr {
            DocRepr::Value(v) => std::borrow::Cow::Borrowed(v),
            DocRepr::Tree(_, None) => std::borrow::Cow::Borrowed(&NULL),
            DocRepr::Tree(t, Some(n)) => std::borrow::Cow::Owned(tree_value(t, n)),
        }
    }

    /// The document as a JSON value, each non-scalar value at a path (relative to this
    /// document) that `elide` accepts read as `placeholder` rather than built: a reader that
    /// walks a large rule as a value builds its many parts one at a time
    /// ([`RuleDoc::tree_value_at`]). Borrowed, nothing elided, when the document is a value.
    pub fn value_eliding(
        &self,
        elide: &dyn Fn(&FieldPath) -> bool,
        placeholder: &serde_json::Value,
    ) -> std::borrow::Cow<'a, serde_json::Value> {
        match self.repr {
            DocRepr::Tree(t, Some(n)) => std::borrow::Cow::Owned(build_value(
                t,
                n,
                &mut FieldPath::root(),
                elide,
                placeholder,
            )),
            _ => self.value(),
        }
    }

    /// The value at `relative` (a path from this document), built from the tree; `None` when
    /// nothing is there, or when the document is a value (which holds it already).
    pub fn tree_value_at(&self, relative: &FieldPath) -> Option<serde_json::Value> {
        let DocRepr::Tree(tree, Some(mut node)) = self.repr else {
            return None;
        };
        for seg in &relative.0 {
            node = match (seg, tree.doc_node(node)) {
                (PathSegment::Index(i), DocNode::Seq(items)) => *items.get(*i)?,
                (PathSegment::Key(k), DocNode::Map(entries)) => {
                    // Sorted by key.
                    let at = entries.partition_point(|&e| tree.doc_key(e) < k.as_str());
                    let &e = entries.get(at)?;
                    (tree.doc_key(e) == k).then_some(e)?
                }
                _ => return None,
            };
        }
        Some(tree_value(tree, node))
    }

    /// True when the document is null (or absent).
    pub fn is_null(&self) -> bool {
        match self.repr {
            DocRepr::Value(v) => v.is_null(),
            DocRepr::Tree(_, None) => true,
            DocRepr::Tree(t, Some(n)) => {
                matches!(t.doc_node(n), DocNode::Scalar(serde_json::Value::Null))
            }
        }
    }

    /// True when the document is a mapping.
    pub fn is_object(&self) -> bool {
        match self.repr {
            DocRepr::Value(v) => v.is_object(),
            DocRepr::Tree(_, None) => false,
            DocRepr::Tree(t, Some(n)) => matches!(t.doc_node(n), DocNode::Map(_)),
        }
    }

    /// Deserializes the document into a typed raw rule; a type error names the field path.
    /// Messages are serde_json's, whichever form the document has.
    pub fn parse<T: DeserializeOwned>(&self) -> Result<T, RuleError> {
        let result = match self.repr {
            DocRepr::Value(v) => serde_path_to_error::deserialize(v),
            DocRepr::Tree(_, None) => serde_path_to_error::deserialize(&NULL),
            DocRepr::Tree(tree, Some(node)) => {
                serde_path_to_error::deserialize(crate::rule_de::TreeDe { tree, node })
            }
        };
        result.map_err(|e| {
            let path = self.path.join(&FieldPath::from_serde(e.path()));
            let message = e.into_inner().to_string();
            let message = out_of_range(&message).unwrap_or_else(|| with_did_you_mean(message));
            RuleError::new(path, message)
        })
    }
}
