//! The invariants every fuzz target checks on what a parser reported.
//!
//! - every problem is located inside its file: its line exists (or is the one just past the
//!   end, for an error at end of input) and its column is at most one past the line's end,
//!   lines ending as YAML ends them (`\n`, `\r\n`, lone `\r`: `routechain_rules::located::lines`);
//! - the rendered output is bounded: at most 100 problems per file, each with an excerpt
//!   cut around its column, so the whole report is a bounded number of bytes whatever the
//!   input;
//! - (no panic: libFuzzer reports one as a crash).

use routechain_rules::located::{LocatedError, MAX_PROBLEMS_PER_ORIGIN, lines, render_all};

/// The most bytes one rendered problem may take: the location, a message and a field path
/// cut to 400 characters each, and a 120-character excerpt with its caret line (4 bytes a
/// character at most).
pub const MAX_RENDERED_PROBLEM_BYTES: usize = 200 + 2 * 400 * 4 + 3 * 130 * 4;

/// Checks that every error of `origin` is located inside `text` and that the rendered
/// report is bounded.
pub fn check_located(origin: &str, text: &str, errors: &[LocatedError]) {
    let lines: Vec<&str> = lines(text).collect();
    for e in errors.iter().filter(|e| e.origin == origin) {
        let (line, column) = (e.location.line, e.location.column);
        assert!(line >= 1 && column >= 1, "{e}: location below 1:1");
        assert!(
            line <= lines.len() + 1,
            "{e}: line {line} past the end ({} lines)",
            lines.len()
        );
        let width = lines.get(line - 1).map_or(0, |l| l.chars().count());
        assert!(
            column <= width + 1,
            "{e}: column {column} past the end of line {line} ({width} characters)"
        );
    }
    let rendered = render_all(errors);
    let shown = errors.len().min(MAX_PROBLEMS_PER_ORIGIN * 4) + 4;
    assert!(
        rendered.len() <= shown * MAX_RENDERED_PROBLEM_BYTES,
        "{} bytes rendered for {} problems",
        rendered.len(),
        errors.len()
    );
    assert!(
        rendered.lines().count() <= 3 * errors.len() + errors.len().min(1) + 4,
        "more lines than problems"
    );
}
