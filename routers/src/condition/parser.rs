//! The condition text parser: `[when] => [then]` into [`Term`]s, with located errors.
//!
//! Tokenizing follows Dubbo's `([&!=,]*)\s*([^&!=,\s]+)` scan: each token is a run of
//! separator characters, optional blanks, and a content word; characters that start no
//! token are skipped. A token without separator starts a key, `&` starts (or reopens) a key,
//! `=` / `!=` add a value to the key's match / mismatch set, `,` adds another value to the
//! last set. Errors name the condition index, the offending token and its character offset
//! in the text as written (before `consumer.`/`provider.` removal).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use routechain_core::{FieldPath, RuleError};

use super::matcher::{Key, Pattern, Term};

/// Which side of a condition a text is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The when-part (v3.0 left of `=>`, v3.1 `from.match`): reads the request and consumer.
    When,
    /// The then-part (v3.0 right of `=>`, v3.1 `to[].match`): reads each provider.
    Then,
}

/// A parsed v3.0 condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextCondition {
    /// When-part terms (empty: every request).
    pub when: Vec<Term>,
    /// Then-part terms; `None` is a blocklist (empty or `false` then-part).
    pub then: Option<Vec<Term>>,
}

/// Where a text is, to locate errors: the field (built only when an error is reported, so
/// a rule of 100,000 sound conditions builds no path), the condition index, and the
/// original character offset of every character of the text being parsed.
struct Located<'a> {
    path: &'a dyn Fn() -> FieldPath,
    index: usize,
    /// `None`: nothing was removed, every character is where it was written (no map of 8
    /// bytes per character is built).
    offsets: Option<&'a [usize]>,
    /// The number of characters parsed.
    len: usize,
}

impl Located<'_> {
    fn error(&self, at: usize, message: String) -> RuleError {
        let offset = match self.offsets {
            Some(offsets) => offsets.get(at).or(offsets.last()).copied().unwrap_or(0),
            None if at < self.len => at,
            None => self.len.saturating_sub(1),
        };
        RuleError::at_offset(
            (self.path)(),
            offset,
            format!("condition #{}: {message}", self.index),
        )
    }
}

/// The strings and then-parts of one rule, shared: every key name and then-part value is
/// stored once per rule (`region` written in 10,000 conditions is one `Arc<str>`), and so
/// is every distinct then-part (which the preparation then resolves once). Dropped when the
/// rule is compiled.
#[derive(Default)]
pub struct Interner {
    strings: HashSet<Arc<str>>,
    parts: HashSet<Arc<[Term]>>,
}

impl Interner {
    /// The rule's copy of `s`.
    pub fn str(&mut self, s: &str) -> Arc<str> {
        if let Some(shared) = self.strings.get(s) {
            return shared.clone();
        }
        let shared: Arc<str> = Arc::from(s);
        self.strings.insert(shared.clone());
        shared
    }

    /// The rule's copy of the terms of a then-part (or a v3.1 destination).
    pub fn part(&mut self, terms: Vec<Term>) -> Arc<[Term]> {
        if let Some(shared) = self.parts.get(terms.as_slice()) {
            return shared.clone();
        }
        let shared: Arc<[Term]> = Arc::from(terms);
        self.parts.insert(shared.clone());
        shared
    }
}

/// Removes every `from` in `chars`, left to right, keeping the original offsets.
fn remove_all(chars: &mut Vec<char>, offsets: &mut Vec<usize>, from: &str) {
    let pat: Vec<char> = from.chars().collect();
    let mut out_c = Vec::with_capacity(chars.len());
    let mut out_o = Vec::with_capacity(chars.len());
    let mut i = 0;
    while i < chars.len() {
        if chars[i..].starts_with(&pat) {
            i += pat.len();
        } else {
            out_c.push(chars[i]);
            out_o.push(offsets[i]);
            i += 1;
        }
    }
    *chars = out_c;
    *offsets = out_o;
}

/// Parses a v3.0 condition text at `path` (condition number `index`).
pub fn parse_text_condition(
    text: &str,
    path: &FieldPath,
    index: usize,
) -> Result<TextCondition, Vec<RuleError>> {
    parse_text_in(text, &|| path.clone(), index, &mut Interner::default())
}

/// [`parse_text_condition`] with the rule's [`Interner`], the path built on an error only.
pub(super) fn parse_text_in(
    text: &str,
    path: &dyn Fn() -> FieldPath,
    index: usize,
    interner: &mut Interner,
) -> Result<TextCondition, Vec<RuleError>> {
    let mut chars: Vec<char> = text.chars().collect();
    // The original offsets and two more copies of the text only when there is something to
    // remove.
    let mut offsets: Option<Vec<usize>> = None;
    if text.contains("consumer.") || text.contains("provider.") {
        let o = offsets.insert((0..chars.len()).collect());
        remove_all(&mut chars, o, "consumer.");
        remove_all(&mut chars, o, "provider.");
    }
    let loc = Located {
        path,
        index,
        offsets: offsets.as_deref(),
        len: chars.len(),
    };
    if chars.iter().all(|c| c.is_whitespace()) {
        return Err(vec![
            loc.error(0, "the condition is empty; write `when => then`".into()),
        ]);
    }
    let arrow = chars.windows(2).position(|w| w == ['=', '>']);
    let (when, then) = match arrow {
        Some(a) => ((0, a), (a + 2, chars.len())),
        None => ((0, 0), (0, chars.len())),
    };
    let mut errors = Vec::new();
    let when_terms = match side_text(&chars, when) {
        None => Vec::new(),
        Some((s, e)) if is_word(&chars[s..e], "true") => Vec::new(),
        Some((s, e)) => {
            parse_terms(&chars[s..e], s, Side::When, &loc, interner).unwrap_or_else(|mut es| {
                errors.append(&mut es);
                Vec::new()
            })
        }
    };
    let then_terms = match side_text(&chars, then) {
        None => None,
        Some((s, e)) if is_word(&chars[s..e], "false") => None,
        Some((s, e)) => match parse_terms(&chars[s..e], s, Side::Then, &loc, interner) {
            Ok(t) => Some(t),
            Err(mut es) => {
                errors.append(&mut es);
                None
            }
        },
    };
    if errors.is_empty() {
        Ok(TextCondition {
            when: when_terms,
            then: then_terms,
        })
    } else {
        Err(errors)
    }
}

/// Parses a v3.1 `match` text (no prefix removal). An empty or `true` from-match, or an
/// empty or `false` to-match, is no term at all (every request / every provider).
pub fn parse_match(
    text: &str,
    side: Side,
    path: &FieldPath,
    index: usize,
) -> Result<Vec<Term>, Vec<RuleError>> {
    parse_match_in(
        text,
        side,
        &|| path.clone(),
        index,
        &mut Interner::default(),
    )
}

/// [`parse_match`] with the rule's [`Interner`], the path built on an error only.
pub(super) fn parse_match_in(
    text: &str,
    side: Side,
    path: &dyn Fn() -> FieldPath,
    index: usize,
    interner: &mut Interner,
) -> Result<Vec<Term>, Vec<RuleError>> {
    let chars: Vec<char> = text.chars().collect();
    let loc = Located {
        path,
        index,
        offsets: None,
        len: chars.len(),
    };
    let word = match side {
        Side::When => "true",
        Side::Then => "false",
    };
    match side_text(&chars, (0, chars.len())) {
        None => Ok(Vec::new()),
        Some((s, e)) if is_word(&chars[s..e], word) => Ok(Vec::new()),
        Some((s, e)) => parse_terms(&chars[s..e], s, side, &loc, interner),
    }
}

/// The trimmed `(start, end)` of `chars[range]`, `None` when blank.
fn side_text(chars: &[char], (start, end): (usize, usize)) -> Option<(usize, usize)> {
    let s = (start..end).find(|&i| !chars[i].is_whitespace())?;
    let e = (s..end).rev().find(|&i| !chars[i].is_whitespace())? + 1;
    Some((s, e))
}

fn is_word(chars: &[char], word: &str) -> bool {
    chars.iter().copied().eq(word.chars())
}

fn is_sep(c: char) -> bool {
    matches!(c, '&' | '!' | '=' | ',')
}

/// The tokens of a side, one at a time: `(start, separator, content)` with `start` the
/// token's index; the separator and content are read into the two buffers given, so a side
/// of 100,000 tokens allocates no string per token.
struct Tokens<'c> {
    chars: &'c [char],
    pos: usize,
}

impl Tokens<'_> {
    fn next_into(&mut self, sep: &mut String, content: &mut String) -> Option<usize> {
        let chars = self.chars;
        while self.pos < chars.len() {
            let pos = self.pos;
            let mut j = pos;
            while j < chars.len() && is_sep(chars[j]) {
                j += 1;
            }
            let mut k = j;
            while k < chars.len() && chars[k].is_whitespace() {
                k += 1;
            }
            if k < chars.len() && !is_sep(chars[k]) {
                let mut m = k;
                while m < chars.len() && !is_sep(chars[m]) && !chars[m].is_whitespace() {
                    m += 1;
                }
                sep.clear();
                sep.extend(&chars[pos..j]);
                content.clear();
                content.extend(&chars[k..m]);
                self.pos = m;
                return Some(pos);
            }
            self.pos = pos + 1;
        }
        None
    }
}

/// A term being read: its `=` and `!=` patterns still growing.
struct TermBuilder {
    name: Arc<str>,
    key: Key,
    matches: Vec<Pattern>,
    mismatches: Vec<Pattern>,
}

impl TermBuilder {
    /// The `=` (`is_match`) or `!=` patterns.
    fn patterns(&mut self, is_match: bool) -> &mut Vec<Pattern> {
        if is_match {
            &mut self.matches
        } else {
            &mut self.mismatches
        }
    }
}

fn parse_terms(
    chars: &[char],
    base: usize,
    side: Side,
    loc: &Located<'_>,
    interner: &mut Interner,
) -> Result<Vec<Term>, Vec<RuleError>> {
    let mut terms: Vec<TermBuilder> = Vec::new();
    // Each key's term, so a side of 100,000 keys is read in linear time.
    let mut by_name: HashMap<Arc<str>, usize> = HashMap::new();
    let mut errors = Vec::new();
    // The term being filled, and which of its sets the last value went to.
    let mut current: Option<usize> = None;
    let mut last_set: Option<bool> = None; // Some(true): matches, Some(false): mismatches
    let mut tokens = Tokens { chars, pos: 0 };
    let (mut sep, mut content) = (String::new(), String::new());
    while let Some(start) = tokens.next_into(&mut sep, &mut content) {
        let at = base + start;
        match sep.as_str() {
            "" | "&" => {
                let existing = by_name.get(content.as_str()).copied();
                let i = match existing {
                    // `&` reopens a key named before; a key with no separator replaces it.
                    Some(i) if sep == "&" => i,
                    Some(i) => {
                        terms[i].matches.clear();
                        terms[i].mismatches.clear();
                        i
                    }
                    None => {
                        let name = interner.str(&content);
                        by_name.insert(name.clone(), terms.len());
                        terms.push(TermBuilder {
                            key: make_key(&name, side, interner),
                            name,
                            matches: Vec::new(),
                            mismatches: Vec::new(),
                        });
                        terms.len() - 1
                    }
                };
                current = Some(i);
                last_set = None;
            }
            "=" | "!=" => {
                let Some(i) = current else {
                    errors.push(loc.error(
                        at,
                        format!("`{sep}` before {content:?} has no key on its left"),
                    ));
                    continue;
                };
                let is_match = sep == "=";
                match make_pattern(&content, side, interner) {
                    Ok(p) => terms[i].patterns(is_match).push(p),
                    Err(m) => errors.push(loc.error(at + sep.len(), m)),
                }
                last_set = Some(is_match);
            }
            "," => {
                let (Some(i), Some(is_match)) = (current, last_set) else {
                    errors.push(loc.error(
                        at,
                        format!(
                            "`,` before {content:?} has no value to add to \
                             (write `key = a,b`)"
                        ),
                    ));
                    continue;
                };
                match make_pattern(&content, side, interner) {
                    Ok(p) => terms[i].patterns(is_match).push(p),
                    Err(m) => errors.push(loc.error(at + 1, m)),
                }
            }
            _ => errors.push(loc.error(
                at,
                format!("unexpected `{sep}` before {content:?}; expected `=`, `!=`, `,` or `&`"),
            )),
        }
    }
    if errors.is_empty() {
        // Sized to what they hold: a rule of 10,000 conditions keeps no growth slack (a
        // vector's first push reserves four elements).
        let mut out = Vec::with_capacity(terms.len());
        out.extend(terms.into_iter().map(|t| Term {
            name: t.name,
            key: t.key,
            matches: t.matches.into_boxed_slice(),
            mismatches: t.mismatches.into_boxed_slice(),
        }));
        Ok(out)
    } else {
        Err(errors)
    }
}

/// The key a name reads, per side.
fn make_key(shared: &Arc<str>, side: Side, interner: &mut Interner) -> Key {
    let name: &str = shared;
    let request_key = name.starts_with("arguments") || name.starts_with("attachments");
    match side {
        Side::Then if request_key => Key::Absent,
        Side::Then => Key::Provider(shared.clone()),
        Side::When if name == "method" || name == "methods" => Key::Method(shared.clone()),
        Side::When if name.starts_with("arguments") => {
            // As Dubbo: the part before the first `.` holds `arguments[<digits>]`.
            let head = name.split('.').next().unwrap_or(name);
            head.strip_prefix("arguments[")
                .and_then(|r| r.split_once(']'))
                .and_then(|(digits, _)| {
                    if digits.bytes().all(|b| b.is_ascii_digit()) {
                        digits.parse::<usize>().ok()
                    } else {
                        None
                    }
                })
                .map_or(Key::Absent, Key::Argument)
        }
        Side::When if name.starts_with("attachments") => {
            // `attachments[k]`, `k` up to the last `]` (dots allowed: `attachments[dubbo.tag]`).
            name.strip_prefix("attachments[")
                .and_then(|r| r.rfind(']').map(|e| &r[..e]))
                .filter(|k| !k.is_empty())
                .map_or(Key::Absent, |k| Key::Attachment(interner.str(k)))
        }
        Side::When => Key::Consumer(shared.clone()),
    }
}

/// Compiles one value: range, `$name` (then-part), `*`, glob, or exact.
fn make_pattern(value: &str, side: Side, interner: &mut Interner) -> Result<Pattern, String> {
    if value.contains('~') {
        let bad = || {
            format!(
                "range {value:?} needs integer bounds: `a~b`, `~b` or `a~` \
                 (a non-integer value never matches a range)"
            )
        };
        let (lo, hi) = value.split_once('~').ok_or_else(bad)?;
        if hi.contains('~') || (lo.is_empty() && hi.is_empty()) {
            return Err(bad());
        }
        let bound = |s: &str| -> Result<Option<i64>, String> {
            if s.is_empty() {
                Ok(None)
            } else {
                s.parse::<i64>().map(Some).map_err(|e| match e.kind() {
                    std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow => {
                        format!(
                            "range {value:?}: bound {s} is out of range: a bound is an integer \
                             from {} to {}",
                            i64::MIN,
                            i64::MAX
                        )
                    }
                    _ => bad(),
                })
            }
        };
        return Ok(Pattern::Range {
            low: bound(lo)?,
            high: bound(hi)?,
        });
    }
    if side == Side::Then
        && let Some(name) = value.strip_prefix('$')
    {
        return Ok(Pattern::ConsumerRef(interner.str(name)));
    }
    // A then-part's values are shared (then-parts repeat, and are stored once); a
    // when-part's are mostly distinct (`method = mI` per condition), and not looked up.
    let mut text = |value: &str| match side {
        Side::Then => interner.str(value),
        Side::When => Arc::from(value),
    };
    Ok(if value == "*" {
        Pattern::Any
    } else if value.contains('*') {
        Pattern::Glob(text(value))
    } else {
        Pattern::Exact(text(value))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path() -> FieldPath {
        FieldPath::root().key("conditions").index(2)
    }

    fn parse(text: &str) -> Result<TextCondition, Vec<RuleError>> {
        parse_text_condition(text, &path(), 2)
    }

    fn term(name: &str, key: Key, m: Vec<Pattern>, mm: Vec<Pattern>) -> Term {
        Term {
            name: name.into(),
            key,
            matches: m.into(),
            mismatches: mm.into(),
        }
    }

    fn exact(s: &str) -> Pattern {
        Pattern::Exact(s.into())
    }

    #[test]
    fn when_and_then_with_merge_and_lists() {
        let c = parse(
            "host = 2.2.2.2,1.1.1.* & host != 1.1.1.1 & method=getFoo => region=hz & port=~20880",
        )
        .unwrap();
        assert_eq!(
            c.when,
            vec![
                term(
                    "host",
                    Key::Consumer("host".into()),
                    vec![exact("2.2.2.2"), Pattern::Glob("1.1.1.*".into())],
                    vec![exact("1.1.1.1")]
                ),
                term(
                    "method",
                    Key::Method("method".into()),
                    vec![exact("getFoo")],
                    vec![]
                ),
            ]
        );
        assert_eq!(
            c.then.unwrap(),
            vec![
                term(
                    "region",
                    Key::Provider("region".into()),
                    vec![exact("hz")],
                    vec![]
                ),
                term(
                    "port",
                    Key::Provider("port".into()),
                    vec![Pattern::Range {
                        low: None,
                        high: Some(20880)
                    }],
                    vec![]
                ),
            ]
        );
    }

    #[test]
    fn empty_true_and_false_sides() {
        let c = parse(" => host = 1.2.3.4").unwrap();
        assert!(c.when.is_empty());
        assert_eq!(c.then.unwrap().len(), 1);
        assert!(parse("true => host = 1").unwrap().when.is_empty());
        assert_eq!(parse("host = 1 => false").unwrap().then, None);
        assert_eq!(parse("host = 1 =>").unwrap().then, None);
        // Without `=>` the whole text is the then-part.
        let c = parse("host = 1.2.3.4").unwrap();
        assert!(c.when.is_empty());
        assert_eq!(c.then.unwrap()[0].name.as_ref(), "host");
    }

    #[test]
    fn prefixes_are_removed_everywhere_and_keys_classified() {
        let c = parse(
            "consumer.application = consumer.app & arguments[1].x = 5 & attachments[dubbo.tag] = a \
             & arguments = b & attachments = c => provider.region = $region & arguments[0] = 1",
        )
        .unwrap();
        let keys: Vec<&Key> = c.when.iter().map(|t| &t.key).collect();
        assert_eq!(
            keys,
            [
                &Key::Consumer("application".into()),
                &Key::Argument(1),
                &Key::Attachment("dubbo.tag".into()),
                &Key::Absent,
                &Key::Absent,
            ]
        );
        assert_eq!(c.when[0].matches.to_vec(), vec![exact("app")]);
        let then = c.then.unwrap();
        assert_eq!(then[0].key, Key::Provider("region".into()));
        assert_eq!(
            then[0].matches.to_vec(),
            vec![Pattern::ConsumerRef("region".into())]
        );
        assert_eq!(then[1].key, Key::Absent);
    }

    #[test]
    fn dollar_is_literal_in_the_when_part() {
        let c = parse("host = $host => host = $host").unwrap();
        assert_eq!(c.when[0].matches.to_vec(), vec![exact("$host")]);
        assert_eq!(
            c.then.unwrap()[0].matches.to_vec(),
            vec![Pattern::ConsumerRef("host".into())]
        );
    }

    #[test]
    fn located_errors_name_index_and_token() {
        let text = "host = 10.20.3.3 => ,abc";
        let e = parse(text).unwrap_err();
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].path, path());
        assert_eq!(e[0].offset, Some(text.find(',').unwrap()));
        assert!(e[0].message.contains("condition #2"), "{}", e[0].message);
        assert!(e[0].message.contains("\"abc\""), "{}", e[0].message);

        // Offsets point into the text as written, before prefix removal.
        let text = "consumer.host = 1 => provider.x == y";
        let e = parse(text).unwrap_err();
        assert_eq!(e[0].offset, Some(text.find("==").unwrap()));
        assert!(e[0].message.contains("`==`"));

        // Several errors in one text, both sides.
        let e = parse("= a => host = 1~x & y = ~").unwrap_err();
        assert_eq!(e.len(), 3, "{e:?}");
        assert_eq!(e[0].offset, Some(0));
        assert!(e[1].message.contains("\"1~x\""));

        assert!(parse("   ").is_err());
    }

    #[test]
    fn v31_match_texts() {
        let p = FieldPath::root();
        assert!(parse_match("", Side::When, &p, 0).unwrap().is_empty());
        assert!(parse_match("true", Side::When, &p, 0).unwrap().is_empty());
        assert!(parse_match("false", Side::Then, &p, 0).unwrap().is_empty());
        let t = parse_match("consumer.env=gray", Side::When, &p, 0).unwrap();
        assert_eq!(
            t[0].name.as_ref(),
            "consumer.env",
            "no prefix removal in v3.1"
        );
        assert!(
            parse_match("env=gray,", Side::Then, &p, 4).is_ok(),
            "a trailing separator starts no token, as in Dubbo"
        );
        let e = parse_match(", x", Side::Then, &p, 4).unwrap_err();
        assert!(e[0].message.starts_with("condition #4"));
    }
}
