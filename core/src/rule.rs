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
    pub fn from_serde(path: &serde_path_to_error::Path) -> Self {
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

/// The `serde_json::Value` of node `node` of `tree`.
pub fn tree_value(tree: &dyn DocTree, node: u32) -> serde_json::Value {
    match tree.doc_node(node) {
        DocNode::Scalar(v) => v,
        DocNode::Seq(items) => {
            serde_json::Value::Array(items.iter().map(|&i| tree_value(tree, i)).collect())
        }
        DocNode::Map(entries) => serde_json::Value::Object(
            entries
                .iter()
                .map(|&i| (tree.doc_key(i).to_string(), tree_value(tree, i)))
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
/// value, or a node of a parsed document's tree (read in place, see [`DocTree`]).
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

    /// Node `node` of `tree` (`None`: nothing there, read as null), rooted at `path`.
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
        fn build(
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
                            let v = build(tree, n, path, elide, placeholder);
                            path.0.pop();
                            v
                        })
                        .collect(),
                ),
                DocNode::Map(entries) => serde_json::Value::Object(
                    entries
                        .iter()
                        .map(|&n| {
                            let key = tree.doc_key(n).to_string();
                            path.0.push(PathSegment::Key(key.clone()));
                            let v = build(tree, n, path, elide, placeholder);
                            path.0.pop();
                            (key, v)
                        })
                        .collect(),
                ),
            }
        }
        match self.repr {
            DocRepr::Tree(t, Some(n)) => {
                std::borrow::Cow::Owned(build(t, n, &mut FieldPath::root(), elide, placeholder))
            }
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
            RuleError::new(path, e.into_inner().to_string())
        })
    }

    /// An error at `relative` below this document.
    pub fn error(&self, relative: &FieldPath, message: impl Into<String>) -> RuleError {
        RuleError::new(self.path.join(relative), message)
    }
}
