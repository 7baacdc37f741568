//! Where every value and mapping key of a YAML document is: a flat tree of fixed-size nodes
//! in one vector, so a location costs about 40 bytes per value, with no allocation per value
//! (a tree of boxed nodes, each map entry with its own copy of its key, took five times the
//! size of a rule of many small mappings).
//!
//! A node's children are a range of [`Tree::kids`] (a mapping's sorted by key, for a binary
//! search); a mapping key, and a scalar's text, is a byte range of the source when it is
//! written there verbatim (a plain or simple quoted scalar, the usual case), else a string
//! of its own. The tree is the document: readers deserialize from it (see
//! [`routechain_core::DocTree`]); no `serde_json::Value` of the whole document is built
//! unless one is asked for.

use saphyr_parser::ScalarStyle;

use crate::located::Location;

/// A compact 1-based line and column.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Pos {
    pub line: u32,
    pub column: u32,
}

impl Pos {
    pub fn of(l: Location) -> Self {
        let c = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        Pos {
            line: c(l.line),
            column: c(l.column),
        }
    }

    pub fn location(self) -> Location {
        Location {
            line: self.line as usize,
            column: self.column as usize,
        }
    }
}

/// Where a mapping key's text is: bytes `start..start + len` of the source, or
/// [`Tree::keys`]`[start]` when `len` is [`KeyText::OWN`]; none (the empty text) by default.
/// Two words, not an enum of three words: a node is the unit of a document's memory.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct KeyText {
    start: u32,
    len: u32,
}

impl KeyText {
    /// `len` of a key held in [`Tree::keys`].
    const OWN: u32 = u32::MAX;
}

/// One value: where it is, where its key is, its scalar style, its children.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Node {
    /// Where the value starts.
    pub at: Pos,
    /// Where its key starts (its own start when it has no key).
    pub key_at: Pos,
    key: KeyText,
    /// A collection: the range of [`Tree::kids`] holding the children. A scalar: its text,
    /// bytes `kids_start..kids_start + kids_len` of the source ([`Kind::Source`]) or
    /// [`Tree::keys`]`[kids_start]` ([`Kind::Own`]). An alias: the anchored node.
    kids_start: u32,
    kids_len: u32,
    /// The scalar style (0 for a collection or an alias), for locating inside a string.
    style: u8,
    /// A mapping (its children are sorted by key).
    map: bool,
    kind: Kind,
    /// A scalar tagged `!!str`: a string whatever its text.
    forced_string: bool,
}

/// What a node's `kids_start` and `kids_len` hold.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A sequence or mapping.
    #[default]
    Collection,
    /// A scalar written verbatim in the source.
    Source,
    /// A scalar with a text of its own.
    Own,
    /// An alias to another node.
    Alias,
    /// An empty document: null.
    Null,
}

/// What a node is, for a reader.
pub(crate) enum Shape<'a> {
    /// A scalar: its text, style and whether it is forced to be a string.
    Scalar(&'a str, Option<ScalarStyle>, bool),
    /// A null with no text (an empty document).
    Null,
    /// A sequence's items.
    Seq(&'a [u32]),
    /// A mapping's values (sorted by key).
    Map(&'a [u32]),
}

fn style_code(style: Option<ScalarStyle>) -> u8 {
    match style {
        None => 0,
        Some(ScalarStyle::Plain) => 1,
        Some(ScalarStyle::SingleQuoted) => 2,
        Some(ScalarStyle::DoubleQuoted) => 3,
        Some(ScalarStyle::Literal) => 4,
        Some(ScalarStyle::Folded) => 5,
    }
}

impl Node {
    /// The scalar style, `None` for a collection or an alias.
    pub fn style(&self) -> Option<ScalarStyle> {
        match self.style {
            1 => Some(ScalarStyle::Plain),
            2 => Some(ScalarStyle::SingleQuoted),
            3 => Some(ScalarStyle::DoubleQuoted),
            4 => Some(ScalarStyle::Literal),
            5 => Some(ScalarStyle::Folded),
            _ => None,
        }
    }
}

/// The nodes of one document (or stream), children by index range.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tree {
    nodes: Vec<Node>,
    kids: Vec<u32>,
    /// Mapping keys not written verbatim in the source.
    keys: Vec<Box<str>>,
    /// The root node, once a value is complete at the top.
    pub root: Option<u32>,
}

/// Maps the parser's character indexes to byte offsets, moving forward through the source
/// (events come in source order, so the whole document is walked once).
#[derive(Debug, Default)]
pub(crate) struct ByteCursor {
    ascii: Option<bool>,
    chars: usize,
    bytes: usize,
}

impl ByteCursor {
    /// The byte offset of character `index` of `source` (`None` behind the cursor).
    pub fn byte_of(&mut self, source: &str, index: usize) -> Option<usize> {
        if *self.ascii.get_or_insert_with(|| source.is_ascii()) {
            return Some(index);
        }
        if index < self.chars {
            return None;
        }
        let rest = source.get(self.bytes..)?;
        let skip = index - self.chars;
        let within = rest.char_indices().nth(skip).map_or(rest.len(), |(b, _)| b);
        self.chars = index;
        self.bytes += within;
        Some(self.bytes)
    }
}

impl Tree {
    /// Adds a node with no children yet; returns its index.
    pub fn push(&mut self, at: Location, style: Option<ScalarStyle>, map: bool) -> u32 {
        let i = self.nodes.len() as u32;
        self.nodes.push(Node {
            at: Pos::of(at),
            key_at: Pos::of(at),
            style: style_code(style),
            map,
            ..Node::default()
        });
        i
    }

    /// Records that node `i` is the value of the key `key` (written at `key_at`, starting at
    /// byte `key_byte` of `source` when known).
    pub fn set_key(
        &mut self,
        i: u32,
        key: &str,
        key_at: Location,
        key_byte: Option<usize>,
        source: &str,
    ) {
        let verbatim = key_byte.filter(|&b| {
            source.get(b..b + key.len()) == Some(key)
                && u32::try_from(b).is_ok()
                && u32::try_from(key.len()).is_ok_and(|n| n < KeyText::OWN)
        });
        let text = match verbatim {
            Some(b) => KeyText {
                start: b as u32,
                len: key.len() as u32,
            },
            None => {
                self.keys.push(key.into());
                KeyText {
                    start: self.keys.len() as u32 - 1,
                    len: KeyText::OWN,
                }
            }
        };
        let node = &mut self.nodes[i as usize];
        node.key = text;
        node.key_at = Pos::of(key_at);
    }

    /// Makes node `i` a scalar of text `text`, found at byte `byte` (or just after it, past
    /// a quote) of `source` when known; `forced_string` for a `!!str` tag.
    pub fn set_scalar(
        &mut self,
        i: u32,
        text: &str,
        byte: Option<usize>,
        forced_string: bool,
        source: &str,
    ) {
        let fits = |b: usize| {
            source.get(b..b + text.len()) == Some(text)
                && u32::try_from(b).is_ok()
                && u32::try_from(text.len()).is_ok()
        };
        let verbatim = byte.and_then(|b| [b, b + 1].into_iter().find(|&b| fits(b)));
        let node = &mut self.nodes[i as usize];
        node.forced_string = forced_string;
        match verbatim {
            Some(b) => {
                node.kind = Kind::Source;
                node.kids_start = b as u32;
                node.kids_len = text.len() as u32;
            }
            None => {
                self.keys.push(text.into());
                let node = &mut self.nodes[i as usize];
                node.kind = Kind::Own;
                node.kids_start = self.keys.len() as u32 - 1;
            }
        }
    }

    /// Makes node `i` an alias to node `target`.
    pub fn set_alias(&mut self, i: u32, target: u32) {
        let node = &mut self.nodes[i as usize];
        node.kind = Kind::Alias;
        node.kids_start = target;
    }

    /// Makes node `i` a null with no text.
    pub fn set_null(&mut self, i: u32) {
        self.nodes[i as usize].kind = Kind::Null;
    }

    /// What node `i` is, following aliases.
    pub fn shape<'a>(&'a self, source: &'a str, mut i: u32) -> Shape<'a> {
        let mut hops = 0;
        loop {
            let n = &self.nodes[i as usize];
            match n.kind {
                Kind::Alias if hops < self.nodes.len() => {
                    i = n.kids_start;
                    hops += 1;
                }
                Kind::Alias | Kind::Null => return Shape::Null,
                Kind::Source => {
                    let text = source
                        .get(n.kids_start as usize..(n.kids_start + n.kids_len) as usize)
                        .unwrap_or("");
                    return Shape::Scalar(text, n.style(), n.forced_string);
                }
                Kind::Own => {
                    return Shape::Scalar(
                        &self.keys[n.kids_start as usize],
                        n.style(),
                        n.forced_string,
                    );
                }
                Kind::Collection if n.map => return Shape::Map(self.kids(i)),
                Kind::Collection => return Shape::Seq(self.kids(i)),
            }
        }
    }

    /// The key of node `i` (empty when it has none).
    pub fn key_of<'a>(&'a self, source: &'a str, i: u32) -> &'a str {
        self.key(source, i)
    }

    /// Gives node `i` its children (a mapping's are sorted by key here).
    pub fn set_kids(&mut self, i: u32, mut kids: Vec<u32>, source: &str) {
        if self.nodes[i as usize].map {
            kids.sort_unstable_by(|&a, &b| self.key(source, a).cmp(self.key(source, b)));
        }
        let node = &mut self.nodes[i as usize];
        node.kids_start = self.kids.len() as u32;
        node.kids_len = kids.len() as u32;
        self.kids.extend_from_slice(&kids);
    }

    /// Gives back the vectors' spare capacity (up to half of them, grown by doubling), once
    /// the document is complete: the tree is kept while the rule compiles.
    pub fn shrink(&mut self) {
        self.nodes.shrink_to_fit();
        self.kids.shrink_to_fit();
        self.keys.shrink_to_fit();
    }

    /// Node `i`.
    pub fn node(&self, i: u32) -> &Node {
        &self.nodes[i as usize]
    }

    /// The key of node `i` (empty when it has none).
    fn key<'a>(&'a self, source: &'a str, i: u32) -> &'a str {
        match self.nodes[i as usize].key {
            KeyText {
                start,
                len: KeyText::OWN,
            } => &self.keys[start as usize],
            KeyText { start, len } => source
                .get(start as usize..start as usize + len as usize)
                .unwrap_or(""),
        }
    }

    fn kids(&self, i: u32) -> &[u32] {
        let n = &self.nodes[i as usize];
        if n.kind != Kind::Collection {
            return &[];
        }
        &self.kids[n.kids_start as usize..(n.kids_start + n.kids_len) as usize]
    }

    /// The one of `kids` (a mapping's values, sorted by key) whose key is `key`.
    pub fn find_key(&self, source: &str, kids: &[u32], key: &str) -> Option<u32> {
        kids.binary_search_by(|&k| self.key(source, k).cmp(key))
            .ok()
            .map(|at| kids[at])
    }

    /// Child `index` of sequence node `i`.
    pub fn item(&self, i: u32, index: usize) -> Option<u32> {
        let n = &self.nodes[i as usize];
        (!n.map).then(|| self.kids(i).get(index).copied()).flatten()
    }

    /// The value of key `key` of mapping node `i`.
    pub fn entry(&self, source: &str, i: u32, key: &str) -> Option<u32> {
        let n = &self.nodes[i as usize];
        if !n.map {
            return None;
        }
        let kids = self.kids(i);
        kids.binary_search_by(|&k| self.key(source, k).cmp(key))
            .ok()
            .map(|at| kids[at])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_is_small() {
        assert!(
            std::mem::size_of::<Node>() <= 36,
            "{}",
            std::mem::size_of::<Node>()
        );
    }

    #[test]
    fn keys_in_the_source_or_their_own() {
        let source = "b: 1\n\"a\\tx\": 2\n";
        let mut tree = Tree::default();
        let at = Location { line: 1, column: 1 };
        let map = tree.push(at, None, true);
        let b = tree.push(at, Some(ScalarStyle::Plain), false);
        tree.set_key(b, "b", at, Some(0), source);
        let a = tree.push(at, Some(ScalarStyle::Plain), false);
        tree.set_key(a, "a\tx", at, Some(5), source);
        tree.set_kids(map, vec![b, a], source);
        assert_eq!(tree.entry(source, map, "b"), Some(b));
        assert_eq!(tree.entry(source, map, "a\tx"), Some(a));
        assert_eq!(tree.entry(source, map, "c"), None);
        assert_eq!(tree.keys.len(), 1, "only the escaped key is copied");
        assert_eq!(tree.item(map, 0), None);
    }

    #[test]
    fn byte_offsets_of_characters_past_multibyte_ones() {
        let source = "é: 1\nk: 2\n";
        let mut cursor = ByteCursor::default();
        assert_eq!(cursor.byte_of(source, 0), Some(0));
        assert_eq!(cursor.byte_of(source, 5), Some(6));
        assert_eq!(cursor.byte_of(source, 1), None, "behind the cursor");
    }
}
