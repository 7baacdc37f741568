//! Lints of condition texts: what Dubbo's condition language accepts but cannot mean what
//! its author meant.
//!
//! Dubbo reads a condition with the scan `([&!=,]*)\s*([^&!=,\s]+)`: `&` joins keys, `,`
//! lists values, and a word after a blank with no separator starts a new key. So
//! `method = refund and region = hz` has the keys `method`, `and` and `region` (`and` has no
//! value and never matches), `method = refund | method = cancel` has a key `|`, and
//! `method = refund -> version = 2.*` (no `=>`) is all then-part, applied to every request.
//! The routers accept all of these; this module warns about them, at the character.

use routechain::core::TypedFactory;
use routechain::routers::condition::matcher::{Key, Pattern, Term};
use routechain::routers::condition::parser::{Side, parse_match, parse_text_condition};
use routechain::routers::condition::{ConditionRouter, ConditionRule, SourceText, condition_texts};

use super::{Code, Problem, RuleRef};

/// One condition text to lint: the text, where it is, and which part(s) it is.
struct Text<'a> {
    field: &'a SourceText,
    /// `None`: a v3.0 `when => then` text; `Some(side)`: a v3.1 `match`.
    side: Option<Side>,
    /// The condition's index.
    index: usize,
}

/// The texts of condition `index` of the compiled rule `def`, read again from the document
/// (the compiled rule keeps none): `None` for a v3.0 `when => then` text or the side of a
/// v3.1 `match`; a v3.1 destination without `match` is `(None, Some(Side::Then))`, so each
/// destination has its entry. Read one condition at a time: a rule of 100,000 conditions
/// never has every text and path copied at once.
pub fn texts(
    rule: RuleRef<'_>,
    def: &ConditionRule,
    index: usize,
) -> Vec<(Option<SourceText>, Option<Side>)> {
    let path = rule.path.key("conditions").index(index);
    match rule.doc.value_at(&path) {
        Some(item) => condition_texts(def.version, &item, &path),
        None => Vec::new(),
    }
}

/// The compiled condition rule, when it compiles (otherwise the router reports its errors).
pub fn definition(rule: RuleRef<'_>) -> Option<ConditionRule> {
    let doc = rule.rule_doc()?;
    TypedFactory::new("condition", ConditionRouter)
        .compile(doc)
        .ok()
}

/// Every text lint of a condition rule, `def` its compiled form.
pub fn lint(rule: RuleRef<'_>, def: &ConditionRule) -> Vec<Problem> {
    let mut out = Vec::new();
    for index in 0..def.conditions.len() {
        for (field, side) in texts(rule, def, index) {
            if let Some(field) = &field {
                lint_text(rule, &Text { field, side, index }, &mut out);
            }
        }
    }
    out
}

fn lint_text(rule: RuleRef<'_>, t: &Text<'_>, out: &mut Vec<Problem>) {
    let text = t.field.text.as_str();
    let path = &t.field.path;
    let at = |code: Code, offset: usize, message: String| {
        Problem::at(code, rule.doc, path, Some(offset), message)
    };
    let arrow = text.find("=>");
    if let Some(o) = text.find("->") {
        out.push(at(
            Code::Arrow,
            o,
            "`->` is not an arrow in a condition: write `=>` (`when => then`)".into(),
        ));
    } else if t.side.is_none() && arrow.is_none() {
        out.push(at(
            Code::NoThen,
            0,
            "no `=>`: the whole text is a then-part applied to every request; write \
             `when => then`, or `=> then` to mean every request"
                .into(),
        ));
    }
    // The sides as Dubbo scans them: (offset of the side in the text, its text).
    let sides: Vec<(usize, &str)> = match arrow {
        Some(a) if t.side.is_none() => vec![(0, &text[..a]), (a + 2, &text[a + 2..])],
        _ => vec![(0, text)],
    };
    let mut spaced = false;
    for (base, side) in sides {
        let mut after_value = false;
        for (sep, word, offset) in tokens(side) {
            let offset = char_offset(text, base + offset);
            let is_pipe = word.starts_with('|') || word.ends_with('|');
            if word.starts_with("->") {
                spaced = true; // said above
            } else if is_pipe {
                out.push(at(
                    Code::Pipe,
                    offset,
                    "`|` is not an operator in a condition: list several values with `,` \
                     (`method = refund,cancel`), join keys with `&`"
                        .into(),
                ));
                spaced = true;
            } else if sep.is_empty() && after_value {
                spaced = true;
                if word.eq_ignore_ascii_case("and") || word.eq_ignore_ascii_case("or") {
                    let fix = if word.eq_ignore_ascii_case("and") {
                        "join keys with `&` (`method = refund & region = hz`)"
                    } else {
                        "list several values with `,` (`method = refund,cancel`)"
                    };
                    out.push(at(
                        Code::AndOrWord,
                        offset,
                        format!(
                            "`{word}` is not an operator in a condition: it starts a key \
                             `{word}` with no value, which never matches; {fix}"
                        ),
                    ));
                } else {
                    out.push(at(
                        Code::ValueWithSpaces,
                        offset,
                        format!(
                            "a value cannot contain spaces: `{word}` starts a new key with no \
                             value, which never matches; quote nothing, write one word or use \
                             `*` (`name = new*`)"
                        ),
                    ));
                }
            }
            after_value = sep.contains('=') || sep.contains(',');
        }
    }
    // Parts that can never match, from the router's own parse.
    let parsed: Vec<(Side, Vec<Term>)> = match t.side {
        None => match parse_text_condition(text, path, t.index) {
            Ok(c) => {
                let mut v = vec![(Side::When, c.when)];
                if let Some(then) = c.then {
                    v.push((Side::Then, then));
                }
                v
            }
            Err(_) => Vec::new(),
        },
        Some(side) => parse_match(text, side, path, t.index)
            .map(|terms| vec![(side, terms)])
            .unwrap_or_default(),
    };
    for (side, terms) in parsed {
        for term in &terms {
            let Some(why) = never_matches(term) else {
                continue;
            };
            if spaced && term.matches.is_empty() && term.mismatches.is_empty() {
                continue; // already said: a word after a value
            }
            let part = match side {
                Side::When => "when-part",
                Side::Then => "then-part",
            };
            let offset = text.find(&*term.name).map_or(0, |o| char_offset(text, o));
            out.push(at(
                Code::NeverMatches,
                offset,
                format!(
                    "condition #{}: the {part} can never match: `{}` {why}",
                    t.index, term.name
                ),
            ));
        }
    }
}

/// Why a term never matches, if it never does.
pub fn never_matches(term: &Term) -> Option<&'static str> {
    if term.key == Key::Absent {
        return Some(
            "has no value here (`arguments[N]`/`attachments[K]` need an index or key, and a \
             provider has neither)",
        );
    }
    if term.matches.is_empty() && term.mismatches.is_empty() {
        return Some("has no `=` or `!=` value");
    }
    if term.mismatches.contains(&Pattern::Any) {
        return Some("excludes every value (`!= *`)");
    }
    let empty_range =
        |p: &Pattern| matches!(p, Pattern::Range { low: Some(l), high: Some(h) } if l > h);
    if !term.matches.is_empty()
        && term
            .matches
            .iter()
            .all(|p| empty_range(p) || term.mismatches.contains(p))
    {
        return Some("excludes with `!=` every value it asks for with `=`");
    }
    None
}

/// The character offset of byte offset `byte` in `text`.
fn char_offset(text: &str, byte: usize) -> usize {
    text[..byte.min(text.len())].chars().count()
}

fn is_sep(c: char) -> bool {
    matches!(c, '&' | '!' | '=' | ',')
}

/// Dubbo's tokens of one side: `(separator, word, byte offset of the word)`.
fn tokens(side: &str) -> Vec<(String, &str, usize)> {
    let b = side.as_bytes();
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < b.len() {
        let mut j = pos;
        while j < b.len() && is_sep(b[j] as char) {
            j += 1;
        }
        let sep: String = side[pos..j].to_string();
        let mut k = j;
        while k < b.len() && (b[k] as char).is_ascii_whitespace() {
            k += 1;
        }
        if k < b.len() && !is_sep(b[k] as char) {
            let mut m = k;
            while m < b.len() && !is_sep(b[m] as char) && !(b[m] as char).is_ascii_whitespace() {
                m += 1;
            }
            out.push((sep, &side[k..m], k));
            pos = m;
        } else {
            pos = k.max(pos + 1);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use routechain::core::FieldPath;
    use routechain::rules::YamlDoc;

    fn codes(text: &str) -> Vec<(&'static str, usize)> {
        let yaml = format!("conditions:\n  - \"{text}\"\n");
        let doc = YamlDoc::parse("t.yaml", &yaml).unwrap();
        let root = FieldPath::root();
        let rule = RuleRef {
            type_name: "condition",
            doc: &doc,
            path: &root,
        };
        definition(rule)
            .map(|def| lint(rule, &def))
            .unwrap_or_default()
            .into_iter()
            .map(|p| (p.code.as_str(), p.error.location.column))
            .collect()
    }

    #[test]
    fn every_text_lint_at_its_character() {
        let cases: [(&str, &[(&str, usize)]); 9] = [
            ("method = refund => version = 2.*", &[]),
            (
                "method = refund and region = hz => version = 2",
                &[("RC101", 22)],
            ),
            (
                "method = refund or method = cancel => v = 2",
                &[("RC101", 22)],
            ),
            (
                "method = refund | method = cancel => v = 2",
                &[("RC102", 22)],
            ),
            ("method = refund -> version = 2.*", &[("RC103", 22)]),
            ("version = 2.*", &[("RC104", 6)]),
            (
                "application = comment admin => region = hz",
                &[("RC105", 28)],
            ),
            ("method = a & method != a => region = hz", &[("RC106", 6)]),
            ("=> arguments = 1", &[("RC106", 9)]),
        ];
        for (text, want) in cases {
            assert_eq!(codes(text), want.to_vec(), "{text}");
        }
    }

    #[test]
    fn tokens_follow_dubbos_scan() {
        let t = tokens("a = b,c & d != e f");
        let words: Vec<(&str, &str)> = t.iter().map(|(s, w, _)| (s.as_str(), *w)).collect();
        assert_eq!(
            words,
            [
                ("", "a"),
                ("= ", "b"),
                (",", "c"),
                ("& ", "d"),
                ("!= ", "e"),
                ("", "f")
            ]
            .map(|(s, w)| (s.trim_end(), w))
        );
    }

    proptest::proptest! {
        /// Lints never panic and stay inside the text, whatever it is (multi-byte
        /// characters, separators anywhere).
        #[test]
        fn never_panics(text in "[a-z =!,&|>~*$.\\-éß中]{0,40}") {
            let yaml = format!("conditions:\n  - {:?}\n", text);
            if let Ok(doc) = YamlDoc::parse("t.yaml", &yaml) {
                let root = FieldPath::root();
                let rule = RuleRef { type_name: "condition", doc: &doc, path: &root };
                let problems = definition(rule).map(|def| lint(rule, &def)).unwrap_or_default();
                for p in problems {
                    proptest::prop_assert!(p.error.location.line == 2);
                }
            }
        }
    }
}
