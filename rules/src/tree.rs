//! Where every value and mapping key of a YAML document is: a flat tree of fixed-size nodes
//! in one vector, so a location costs about 40 bytes per value, with no allocation per value
//! (a tree of boxed nodes, each map entry with its own copy of its key, took five times the
//! size of a rule of many small mappings).
//!
//! A node's children are a range of [`Tree::kids`] (a mapping's sorted by key, for a binary
//! search); a mapping key is a byte range of the source when it is written there verbatim
//! (a plain or simple quoted key, the usual case), else a string of its own.

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

/// Where a mapping key's text is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum KeyText {
    /// Not a mapping entry.
    #[default]
    None,
    /// Bytes `start..start + len` of the source.
    Source { start: u32, len: u32 },
    /// [`Tree::keys`]`[i]`.
    Own(u32),
}

/// One value: where it is, where its key is, its scalar style, its children.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Node {
    /// Where the value starts.
    pub at: Pos,
    /// Where its key starts (its own start when it has no key).
    pub key_at: Pos,
    key: KeyText,
    /// The range of [`Tree::kids`] holding the children.
    kids_start: u32,
    kids_len: u32,
    /// The scalar style (0 for a collection or an alias), for locating inside a string.
    style: u8,
    /// A mapping (its children are sorted by key).
    map: bool,
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
                && u32::try_from(key.len()).is_ok()
        });
        let text = match verbatim {
            Some(b) => KeyText::Source {
                start: b as u32,
                len: key.len() as u32,
            },
            None => {
                self.keys.push(key.into());
                KeyText::Own(self.keys.len() as u32 - 1)
            }
        };
        let node = &mut self.nodes[i as usize];
        node.key = text;
        node.key_at = Pos::of(key_at);
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

    /// Node `i`.
    pub fn node(&self, i: u32) -> &Node {
        &self.nodes[i as usize]
    }

    /// The key of node `i` (empty when it has none).
    fn key<'a>(&'a self, source: &'a str, i: u32) -> &'a str {
        match self.nodes[i as usize].key {
            KeyText::None => "",
            KeyText::Source { start, len } => source
                .get(start as usize..(start + len) as usize)
                .unwrap_or(""),
            KeyText::Own(k) => &self.keys[k as usize],
        }
    }

    fn kids(&self, i: u32) -> &[u32] {
        let n = &self.nodes[i as usize];
        &self.kids[n.kids_start as usize..(n.kids_start + n.kids_len) as usize]
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
            std::mem::size_of::<Node>() <= 40,
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
