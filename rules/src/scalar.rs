//! Where a character of a YAML scalar's value is in the source.
//!
//! A rule error can point inside a string (a condition text's offending token, as a
//! character offset into the value). The value is not the source: quotes, escapes (`\t`,
//! `\x41`, `\u263A`, an escaped line break), doubled single quotes, line folding of plain and
//! quoted scalars, block indentation and folding (`|`, `>`) all separate the two. This module
//! re-reads the scalar's source from its start, style by style, and maps each value
//! character back to its line and column. It is hand-written because the YAML parser
//! (`saphyr-parser`) reports only where a scalar starts and ends, not where each of its
//! characters came from; the parser has already accepted the scalar, so this reader only
//! needs to follow it, not validate it. It costs O(offset + indentation) and runs only when an
//! error is located.

use saphyr_parser::ScalarStyle;

use crate::located::{Location, break_len, lines};

/// The location of value character `offset` of the scalar starting at `start` in `source`,
/// byte `from`. Past the value's end: the last location read.
pub fn locate_in_scalar(
    source: &str,
    from: usize,
    start: Location,
    style: ScalarStyle,
    offset: usize,
) -> Location {
    read_scalar(source, from, start, style, offset, None)
}

/// The location of every value character of the scalar (see [`locate_in_scalar`]), for a
/// scalar in which many offsets are located: one pass instead of one per offset.
pub fn map_scalar(source: &str, from: usize, start: Location, style: ScalarStyle) -> Vec<Location> {
    let mut all = Vec::new();
    read_scalar(source, from, start, style, usize::MAX, Some(&mut all));
    all
}

fn read_scalar(
    source: &str,
    from: usize,
    start: Location,
    style: ScalarStyle,
    offset: usize,
    all: Option<&mut Vec<Location>>,
) -> Location {
    let text = &source[from..];
    let mut out = Emitter {
        target: offset,
        count: 0,
        last: start,
        found: None,
        all,
    };
    match style {
        ScalarStyle::Plain => flow(text, start, None, &mut out),
        ScalarStyle::SingleQuoted => flow(text, start, Some('\''), &mut out),
        ScalarStyle::DoubleQuoted => flow(text, start, Some('"'), &mut out),
        ScalarStyle::Literal | ScalarStyle::Folded => {
            let folded = style == ScalarStyle::Folded;
            if text.starts_with(['|', '>']) {
                // From the indicator: the content starts on the next line.
                let body = text
                    .find(['\n', '\r'])
                    .map_or("", |i| &text[i + break_len(text, i)..]);
                block(body, start.line + 1, folded, &mut out);
            } else {
                // From the first content line (the parser reports that start): the empty
                // lines between the header and it are part of the value.
                let mut body_start = line_start_before(source, from);
                let mut first_line = start.line;
                while body_start > 0 {
                    // The start of the line before: back over its break, then to its start.
                    let mut prev_end = body_start - 1;
                    if source[..prev_end].ends_with('\r') && source[prev_end..].starts_with('\n') {
                        prev_end -= 1;
                    }
                    let prev_start = line_start_before(source, prev_end);
                    if !source[prev_start..body_start].trim().is_empty() {
                        break;
                    }
                    body_start = prev_start;
                    first_line -= 1;
                }
                block(&source[body_start..], first_line, folded, &mut out);
            }
        }
    }
    out.found.unwrap_or(out.last)
}

/// The start of the line holding byte `at` of `source` (lines end as YAML ends them).
fn line_start_before(source: &str, at: usize) -> usize {
    source[..at].rfind(['\n', '\r']).map_or(0, |i| i + 1)
}

/// Counts emitted value characters until the one wanted (or keeps them all).
struct Emitter<'v> {
    target: usize,
    count: usize,
    last: Location,
    found: Option<Location>,
    all: Option<&'v mut Vec<Location>>,
}

impl Emitter<'_> {
    /// One value character came from `at`; true when it is the one wanted (stop reading).
    fn emit(&mut self, at: Location) -> bool {
        self.last = at;
        if let Some(all) = self.all.as_deref_mut() {
            all.push(at);
        }
        if self.count == self.target {
            self.found = Some(at);
            return true;
        }
        self.count += 1;
        false
    }
}

/// A cursor over source characters that knows its line and column.
struct Cursor<'a> {
    chars: std::iter::Peekable<std::str::Chars<'a>>,
    at: Location,
}

impl<'a> Cursor<'a> {
    fn new(text: &'a str, start: Location) -> Self {
        Cursor {
            chars: text.chars().peekable(),
            at: start,
        }
    }

    fn peek(&mut self) -> Option<char> {
        self.chars.peek().copied()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.chars.next()?;
        if c == '\n' {
            self.at = Location {
                line: self.at.line + 1,
                column: 1,
            };
        } else if c != '\r' {
            self.at.column += 1;
        }
        Some(c)
    }

    /// Skips spaces and tabs.
    fn skip_blanks(&mut self) {
        while matches!(self.peek(), Some(' ' | '\t')) {
            self.bump();
        }
    }

    /// Skips one line break (`\n`, `\r\n` or `\r`), if there is one.
    fn skip_break(&mut self) -> bool {
        match self.peek() {
            Some('\r') => {
                self.bump();
                if self.peek() == Some('\n') {
                    self.bump();
                } else {
                    self.at = Location {
                        line: self.at.line + 1,
                        column: 1,
                    };
                }
                true
            }
            Some('\n') => {
                self.bump();
                true
            }
            _ => false,
        }
    }
}

/// Plain, single-quoted (`quote == '\''`) and double-quoted (`quote == '"'`) scalars: line
/// folding, `''`, and backslash escapes.
fn flow(text: &str, start: Location, quote: Option<char>, out: &mut Emitter<'_>) {
    let mut cur = Cursor::new(text, start);
    if quote.is_some() {
        cur.bump();
    }
    // Blanks are part of the value only when something other than a line break follows.
    let mut blanks: Vec<Location> = Vec::new();
    let flush = |blanks: &mut Vec<Location>, out: &mut Emitter<'_>| {
        let stop = blanks.iter().any(|at| out.emit(*at));
        blanks.clear();
        stop
    };
    while let Some(c) = cur.peek() {
        let at = cur.at;
        if Some(c) == quote {
            cur.bump();
            if c == '\'' && cur.peek() == Some('\'') {
                cur.bump();
                if flush(&mut blanks, out) || out.emit(at) {
                    return;
                }
                continue;
            }
            return;
        }
        match c {
            '\\' if quote == Some('"') => {
                if flush(&mut blanks, out) {
                    return;
                }
                cur.bump();
                if cur.skip_break() {
                    // An escaped line break: nothing, and the next line's indentation neither.
                    cur.skip_blanks();
                    continue;
                }
                let extra = match cur.bump() {
                    Some('x') => 2,
                    Some('u') => 4,
                    Some('U') => 8,
                    _ => 0,
                };
                for _ in 0..extra {
                    cur.bump();
                }
                if out.emit(at) {
                    return;
                }
            }
            ' ' | '\t' => {
                blanks.push(at);
                cur.bump();
            }
            '\n' | '\r' => {
                blanks.clear();
                cur.skip_break();
                cur.skip_blanks();
                let mut empty = 0;
                while cur.skip_break() {
                    empty += 1;
                    cur.skip_blanks();
                }
                // One break folds to a space; each empty line after it is a newline.
                for _ in 0..empty.max(1) {
                    if out.emit(at) {
                        return;
                    }
                }
            }
            _ => {
                if flush(&mut blanks, out) || out.emit(at) {
                    return;
                }
                cur.bump();
            }
        }
    }
}

/// Literal (`|`) and folded (`>`) block scalars from the first line after the header (`body`,
/// line `first_line`): the content indentation, and (folded) line folding between lines
/// that are not more indented.
fn block(body: &str, first_line: usize, folded: bool, out: &mut Emitter<'_>) {
    // (line, its text without the break).
    let lines: Vec<(usize, &str)> = lines(body)
        .enumerate()
        .map(|(i, l)| (first_line + i, l))
        .collect();
    let blank = |l: &str| l.chars().all(|c| c == ' ' || c == '\t');
    let indent_of = |l: &str| l.chars().take_while(|c| *c == ' ').count();
    let Some(indent) = lines
        .iter()
        .find(|(_, l)| !blank(l))
        .map(|(_, l)| indent_of(l))
    else {
        return;
    };
    let content: Vec<(usize, &str)> = lines
        .into_iter()
        .take_while(|(_, l)| blank(l) || indent_of(l) >= indent)
        .collect();
    let mut i = 0;
    while i < content.len() {
        let (line, l) = content[i];
        if blank(l) {
            // A leading empty line: one newline.
            if out.emit(Location { line, column: 1 }) {
                return;
            }
            i += 1;
            continue;
        }
        let text: &str = &l[indent..];
        let mut column = indent + 1;
        for _ in text.chars() {
            if out.emit(Location { line, column }) {
                return;
            }
            column += 1;
        }
        let line_end = Location { line, column };
        // The empty lines up to the next content line.
        let mut j = i + 1;
        while j < content.len() && blank(content[j].1) {
            j += 1;
        }
        if j == content.len() {
            out.emit(line_end);
            return;
        }
        let empty = j - i - 1;
        let more_indented = |l: &str| l[indent..].starts_with([' ', '\t']);
        let breaks = if folded && !more_indented(l) && !more_indented(content[j].1) {
            empty.max(1)
        } else {
            empty + 1
        };
        for _ in 0..breaks {
            if out.emit(line_end) {
                return;
            }
        }
        i = j;
    }
}

#[cfg(test)]
mod tests {
    use crate::YamlDoc;
    use routechain_core::FieldPath;
    use serde_json::Value;

    /// For a document whose `v` is a string containing `X` once, checks that `X`'s value
    /// offset maps to the `X` in the source.
    fn assert_x_located(yaml: &str) {
        let doc = YamlDoc::parse("t.yaml", yaml).unwrap();
        let path = FieldPath::root().key("v");
        let Some(Value::String(value)) = doc.get(&path) else {
            panic!("no string v in {yaml:?}");
        };
        let offset = value.chars().position(|c| c == 'X').expect("X in value");
        let at = doc.locate_offset(&path, offset);
        let line = crate::located::lines(yaml).nth(at.line - 1).unwrap();
        assert_eq!(
            line.chars().nth(at.column - 1),
            Some('X'),
            "{yaml:?} value {value:?}: {at}"
        );
    }

    #[test]
    fn every_scalar_style_maps_value_offsets_back_to_the_source() {
        for yaml in [
            "v: a = b & X == d\n",
            "v: 'a = b '' & X'\n",
            "v: \"a\\t\\t\\t\\t = b & X == d\"\n",
            "v: \"\\x41\\u263A\\U0001F600 X\"\n",
            "v: \"a \\\n   b X\"\n",
            "v: \"first\n   second   \n\n   X\"\n",
            "v: plain\n  continued\n  and X\n",
            "v: 'one\n  two X'\n",
            "v: >\n  host = 1\n  & b X c => x = y\n",
            "v: >-\n  a\n\n  b\n    more\n  X\n",
            "v: |\n  one\n  two\n    three X\n",
            "w: 1\nv: |\n\n  after empty X\n",
            "v: \"a\\\"X\"\n",
            "v: 'héllo wörld X'\n",
            "v: \"a\r\n  X\"\r\n",
            "v: \"a\r  X\"\r",
            "v: 'a\r\r  b X'\r",
            "v: plain\r  X\r",
            "w: 1\rv: |\r\r  after\r  empty X\r",
            "w: 1\r\nv: >\r\n\r\n  after\r\n\r\n  empty X\r\n",
            "v: >\r  a\r  b X\r",
        ] {
            assert_x_located(yaml);
        }
    }
}
