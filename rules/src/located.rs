//! Located problems and their bounded rendering.
//!
//! A [`LocatedError`] names its origin (file or config-center node), line, column and field
//! path, and keeps a short [`SourceExcerpt`] of its source line cut around the column, so a
//! problem on a 10 MB line costs a few hundred bytes, not the line. [`render_all`] prints at
//! most [`MAX_PROBLEMS_PER_ORIGIN`] problems of each origin, then `… and N more`: output
//! stays bounded whatever the input (a line with 10,000 mistakes prints 100 short reports).
//!
//! Lines are counted as YAML counts them, in every file routechain reads: a line ends at
//! `\n`, at `\r\n` or at a lone `\r` (old Mac line ends). [`line_starts`], [`lines`] and
//! [`location_of_byte`] are the one definition every location uses (the YAML parser's
//! positions, excerpts, invalid UTF-8, request JSON), so a location always names a line of
//! the file and a column at most one past that line's end.

use std::fmt;

use routechain_core::FieldPath;

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

/// The length of the line break starting at byte `i` of `text` (`\r\n`: 2, `\n` or a lone
/// `\r`: 1), or 0 when none starts there.
pub fn break_len(text: &str, i: usize) -> usize {
    match text.as_bytes().get(i..) {
        Some([b'\r', b'\n', ..]) => 2,
        Some([b'\n' | b'\r', ..]) => 1,
        _ => 0,
    }
}

/// The byte offset of the start of every line of `text`: 0, then the byte after each line
/// break (`\n`, `\r\n`, lone `\r`). A text ending with a break has an empty last line.
pub fn line_starts(text: &str) -> Vec<usize> {
    let bytes = text.as_bytes();
    let mut starts = vec![0];
    let mut i = 0;
    while let Some(at) = bytes[i..].iter().position(|b| matches!(b, b'\n' | b'\r')) {
        i += at;
        i += break_len(text, i);
        starts.push(i);
    }
    starts
}

/// The lines of `text` without their breaks, as [`str::lines`] gives them but ending also at
/// a lone `\r`: no empty last line after a final break.
pub fn lines(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = Some(text);
    std::iter::from_fn(move || {
        let r = rest.take().filter(|r| !r.is_empty())?;
        match r.find(['\n', '\r']) {
            Some(end) => {
                rest = Some(&r[end + break_len(r, end)..]);
                Some(&r[..end])
            }
            None => Some(r),
        }
    })
}

/// The line of `text` starting at byte `start`, without its break.
pub fn line_at(text: &str, start: usize) -> &str {
    let rest = text.get(start..).unwrap_or("");
    rest.find(['\n', '\r']).map_or(rest, |end| &rest[..end])
}

/// The 1-based line and column (characters) of byte `offset` of `text` (clamped to the
/// text's end; inside a multi-byte character, that character).
pub fn location_of_byte(text: &str, offset: usize) -> Location {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let (mut line, mut start, mut end, mut i) = (1, 0, offset, 0);
    let bytes = before.as_bytes();
    while let Some(at) = bytes[i..].iter().position(|b| matches!(b, b'\n' | b'\r')) {
        i += at;
        let len = break_len(text, i);
        if i + len > offset {
            // The offset is inside a `\r\n` break: the break's column.
            end = i;
            break;
        }
        i += len;
        line += 1;
        start = i;
    }
    Location {
        line,
        column: before[start..end].chars().count() + 1,
    }
}

/// How many characters of the source line an excerpt keeps on each side of the column.
pub const EXCERPT_RADIUS: usize = 60;

/// The longest message or field path printed whole; longer ones are cut with `…` (a message
/// may quote a token of the input, which can be megabytes long).
pub const MAX_MESSAGE_CHARS: usize = 400;

/// The most problems [`render_all`] prints for one origin.
pub const MAX_PROBLEMS_PER_ORIGIN: usize = 100;

/// A piece of a source line around a column, for display under a located problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceExcerpt {
    /// The kept characters of the line.
    pub text: String,
    /// The 1-based column (in the whole line) of the first kept character.
    pub first_column: usize,
    /// True when characters after the kept ones were cut.
    pub cut_after: bool,
}

impl SourceExcerpt {
    /// The part of `line` within [`EXCERPT_RADIUS`] characters of the 1-based `column`.
    pub fn around(line: &str, column: usize) -> Self {
        let first_column = column.saturating_sub(EXCERPT_RADIUS).max(1);
        let mut chars = line.chars().skip(first_column - 1);
        let text: String = chars.by_ref().take(2 * EXCERPT_RADIUS).collect();
        SourceExcerpt {
            text,
            first_column,
            cut_after: chars.next().is_some(),
        }
    }

    /// The excerpt of line `line` (1-based) of `source` around `column` (`None` past the end).
    pub fn of_source(source: &str, line: usize, column: usize) -> Option<Box<Self>> {
        lines(source)
            .nth(line.checked_sub(1)?)
            .map(|l| Box::new(Self::around(l, column)))
    }
}

/// A problem located in a source: origin (file or config-center node), line, column, field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct LocatedError {
    /// The file path or config-center node the text came from.
    pub origin: String,
    /// Line and column.
    pub location: Location,
    /// The field path, when the problem is in a field.
    pub field: Option<FieldPath>,
    /// What is wrong.
    pub message: String,
    /// The source line around the column, for display.
    pub source_line: Option<Box<SourceExcerpt>>,
}

impl fmt::Display for LocatedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: ", self.origin, self.location)?;
        if let Some(field) = &self.field {
            write!(f, "{}: ", bounded(&field.to_string()))?;
        }
        f.write_str(&bounded(&self.message))
    }
}

/// `text` cut to [`MAX_MESSAGE_CHARS`] characters (with `…` when cut), on one line: a
/// control character (a line break or an escape code inside a quoted token of the input)
/// is written escaped (`\n`, `\u{1b}`), so a problem is one line and cannot drive a terminal.
fn bounded(text: &str) -> std::borrow::Cow<'_, str> {
    let short = text.char_indices().nth(MAX_MESSAGE_CHARS).is_none();
    if short && !text.chars().any(char::is_control) {
        return text.into();
    }
    let mut out = String::new();
    for (n, c) in text.chars().enumerate() {
        if n == MAX_MESSAGE_CHARS {
            out.push('…');
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out.into()
}

impl LocatedError {
    /// A problem at `line`:`column` of `source` (both 1-based; 0 counts as 1), with the
    /// excerpt of that line.
    pub fn in_source(
        origin: &str,
        source: &str,
        location: Location,
        field: Option<FieldPath>,
        message: impl Into<String>,
    ) -> Self {
        let location = Location {
            line: location.line.max(1),
            column: location.column.max(1),
        };
        LocatedError {
            origin: origin.to_string(),
            location,
            field,
            message: message.into(),
            source_line: SourceExcerpt::of_source(source, location.line, location.column),
        }
    }

    /// The error with its source excerpt and a caret under the column, as the CLI prints it.
    /// The output is bounded: the excerpt is cut around the column and long messages are cut.
    pub fn render(&self) -> String {
        let mut out = self.to_string();
        if let Some(excerpt) = &self.source_line {
            let gutter = self.location.line.to_string();
            let cut_before = excerpt.first_column > 1;
            let lead = if cut_before { "…" } else { "" };
            let tail = if excerpt.cut_after { "…" } else { "" };
            let caret =
                self.location.column.saturating_sub(excerpt.first_column) + usize::from(cut_before);
            // One character per column, none that moves the cursor or drives a terminal: a
            // tab shows as a space (so the caret stays under its column), any other control
            // character as `�`.
            let text: String = excerpt
                .text
                .chars()
                .map(|c| match c {
                    '\t' => ' ',
                    c if c.is_control() => '\u{fffd}',
                    c => c,
                })
                .collect();
            out.push_str(&format!(
                "\n {gutter} | {lead}{text}{tail}\n {} | {}^",
                " ".repeat(gutter.len()),
                " ".repeat(caret)
            ));
        }
        out
    }
}

/// Every problem found in one input (a chain file and the rule files it names), each
/// located. An error type of its own, so `?` carries it into `Box<dyn Error>` or
/// `anyhow::Error`: its `Display` is every problem on a line of its own,
/// `file:line:column: field: message` ([`display_all`]); [`LocatedErrors::render`] adds
/// each source line and a caret, as the CLI prints them. It derefs to the slice of problems.
#[derive(Debug, Clone, PartialEq, Eq, Default, thiserror::Error)]
#[error("{}", display_all(&self.0))]
pub struct LocatedErrors(pub Vec<LocatedError>);

impl LocatedErrors {
    /// Every problem with its source excerpt and a caret ([`render_all`]).
    pub fn render(&self) -> String {
        render_all(&self.0)
    }

    /// The problems.
    pub fn into_vec(self) -> Vec<LocatedError> {
        self.0
    }
}

impl std::ops::Deref for LocatedErrors {
    type Target = [LocatedError];

    fn deref(&self) -> &[LocatedError] {
        &self.0
    }
}

impl From<Vec<LocatedError>> for LocatedErrors {
    fn from(errors: Vec<LocatedError>) -> Self {
        LocatedErrors(errors)
    }
}

impl From<LocatedError> for LocatedErrors {
    fn from(error: LocatedError) -> Self {
        LocatedErrors(vec![error])
    }
}

impl IntoIterator for LocatedErrors {
    type Item = LocatedError;
    type IntoIter = std::vec::IntoIter<LocatedError>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl<'a> IntoIterator for &'a LocatedErrors {
    type Item = &'a LocatedError;
    type IntoIter = std::slice::Iter<'a, LocatedError>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

/// Every problem on one line each (as its `Display`), bounded as [`render_all`] bounds them.
pub fn display_all(errors: &[LocatedError]) -> String {
    bounded_per_origin(errors, |e| e.to_string())
}

/// Renders every problem (as [`LocatedError::render`]), at most
/// [`MAX_PROBLEMS_PER_ORIGIN`] per origin in their order, each origin's surplus summed up as
/// `… and N more problem(s) in ORIGIN`.
pub fn render_all(errors: &[LocatedError]) -> String {
    bounded_per_origin(errors, LocatedError::render)
}

fn bounded_per_origin(errors: &[LocatedError], show: impl Fn(&LocatedError) -> String) -> String {
    let mut shown: Vec<(&str, usize)> = Vec::new();
    let mut lines = Vec::new();
    for e in errors {
        let i = match shown.iter().position(|(o, _)| *o == e.origin) {
            Some(i) => i,
            None => {
                shown.push((&e.origin, 0));
                shown.len() - 1
            }
        };
        shown[i].1 += 1;
        if shown[i].1 <= MAX_PROBLEMS_PER_ORIGIN {
            lines.push(show(e));
        }
    }
    for (origin, count) in shown {
        if count > MAX_PROBLEMS_PER_ORIGIN {
            lines.push(format!(
                "… and {} more problem(s) in {origin}",
                count - MAX_PROBLEMS_PER_ORIGIN
            ));
        }
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_end_at_lf_crlf_and_a_lone_cr() {
        let text = "a\nb\r\nc\rd\r\re";
        assert_eq!(
            lines(text).collect::<Vec<_>>(),
            ["a", "b", "c", "d", "", "e"]
        );
        assert_eq!(line_starts(text), [0, 2, 5, 7, 9, 10]);
        assert_eq!(lines("x\r").collect::<Vec<_>>(), ["x"]);
        assert_eq!(line_starts("x\r"), [0, 2]);
        assert_eq!(lines("").count(), 0);
        assert_eq!(line_at(text, 7), "d");
        let at = |line, column| Location { line, column };
        assert_eq!(location_of_byte(text, 0), at(1, 1));
        assert_eq!(location_of_byte(text, 3), at(2, 2)); // the \r of \r\n ends line 2
        assert_eq!(location_of_byte(text, 4), at(2, 2)); // inside the \r\n break
        assert_eq!(location_of_byte(text, 5), at(3, 1));
        assert_eq!(location_of_byte(text, 7), at(4, 1));
        assert_eq!(location_of_byte(text, 10), at(6, 1));
        assert_eq!(location_of_byte("é\ré", 4), at(2, 1)); // inside the second é
        assert_eq!(location_of_byte("é\ré", 5), at(2, 2));
        assert_eq!(location_of_byte("é", 1), at(1, 1));
    }

    #[test]
    fn excerpts_follow_lone_cr_lines() {
        let e = LocatedError::in_source(
            "f",
            "a\rbb\rccc",
            Location { line: 3, column: 2 },
            None,
            "m",
        );
        assert_eq!(e.source_line.unwrap().text, "ccc");
    }

    fn error(line: &str, column: usize) -> LocatedError {
        LocatedError::in_source("f.yaml", line, Location { line: 1, column }, None, "bad")
    }

    #[test]
    fn a_short_line_is_shown_whole_with_the_caret_under_the_column() {
        assert_eq!(
            error("a = b & c == d", 11).render(),
            "f.yaml:1:11: bad\n 1 | a = b & c == d\n   |           ^"
        );
    }

    #[test]
    fn a_long_line_is_cut_around_the_column_and_the_caret_follows() {
        let line = format!("{}X{}", "a".repeat(10_000), "b".repeat(10_000));
        let out = error(&line, 10_001).render();
        assert!(out.len() < 400, "{} bytes", out.len());
        let lines: Vec<&str> = out.lines().collect();
        let x = lines[1].chars().position(|c| c == 'X').unwrap();
        assert_eq!(lines[2].chars().position(|c| c == '^'), Some(x));
        assert!(lines[1].contains('…') && lines[1].ends_with('…'));
    }

    #[test]
    fn long_messages_and_paths_are_cut() {
        let mut e = error("x", 1);
        e.message = "m".repeat(100_000);
        e.field = Some(FieldPath::root().key("k".repeat(100_000)));
        assert!(e.to_string().len() < 2 * MAX_MESSAGE_CHARS + 40);
    }

    #[test]
    fn a_problem_is_one_line_whatever_its_message_quotes() {
        let mut e = error("x", 1);
        e.message = "unknown field `a\n\n\rb\u{1b}[31m`".into();
        e.field = Some(FieldPath::root().key("k\nl"));
        assert_eq!(
            e.to_string(),
            "f.yaml:1:1: k\\nl: unknown field `a\\n\\n\\rb\\u{1b}[31m`"
        );
        assert_eq!(e.render().lines().count(), 3);
    }

    #[test]
    fn at_most_a_hundred_problems_per_origin_then_a_count() {
        let mut errors: Vec<LocatedError> = (0..250).map(|c| error("x", c + 1)).collect();
        errors.push(LocatedError::in_source(
            "g.yaml",
            "y",
            Location::default(),
            None,
            "other",
        ));
        let out = render_all(&errors);
        assert_eq!(out.matches("f.yaml:1:").count(), 100);
        assert!(out.contains("g.yaml:1:1: other"));
        assert!(
            out.ends_with("… and 150 more problem(s) in f.yaml"),
            "{out}"
        );
    }
}
