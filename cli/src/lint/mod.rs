//! Lints for rule documents: problems a rule can have that the routers accept, each with a
//! stable code and a severity, located like every other problem (file:line:column, field).
//!
//! The routers decide what is *valid* (a rule they refuse is an error of code
//! [`Code::Invalid`]); this module adds what `routechain check` warns about:
//! condition texts that do not mean what they seem to ([`condition`]), unknown or disabled
//! fields in Dubbo's rule documents ([`fields`]), what a mesh rule's reader warns about
//! ([`mesh`]), and, given a provider list, rules that name
//! IDCs, tags, groups or values no provider has ([`providers`]). It reads the raw rule
//! documents and the routers' public compiled forms, so it never changes what a router does.
//!
//! Every code is listed, with an example, in `docs/check.md`; the codes are stable: a code is
//! never reused for another problem.

pub mod condition;
pub mod fields;
pub mod mesh;
pub mod providers;

use routechain::core::{FieldPath, RuleError};
use routechain::rules::{LocatedError, YamlDoc};
use serde::Serialize;

/// How bad a problem is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The rule is refused, or does something its author cannot have meant (exit 2).
    Error,
    /// Accepted, but probably not what was meant (exit 1 with `--deny-warnings`).
    Warning,
}

impl Severity {
    /// `error` or `warning`.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

/// The stable problem codes. `docs/check.md` has one row per code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Code {
    /// RC001: a file cannot be read.
    Unreadable,
    /// RC002: the loader or a router refuses the input (YAML syntax, schema, rule text,
    /// provider URL).
    Invalid,
    /// RC003: a rule file whose type neither `--type` nor its name gives.
    NoType,
    /// RC004: `--type` (or a name suffix) names no rule type this build knows.
    UnknownType,
    /// RC101: `and` / `or` written as words in a condition.
    AndOrWord,
    /// RC102: `|` in a condition.
    Pipe,
    /// RC103: `->` in a condition.
    Arrow,
    /// RC104: a v3.0 condition without `=>`.
    NoThen,
    /// RC105: a value with spaces (the words after the first start new keys).
    ValueWithSpaces,
    /// RC106: a when- or then-part that can never match.
    NeverMatches,
    /// RC107: an unknown field in a Dubbo rule (Dubbo ignores it).
    UnknownField,
    /// RC108: `enabled: false` / `valid: false`.
    Disabled,
    /// RC109: a part of a mesh rule that Dubbo accepts and ignores or that never holds.
    MeshIgnored,
    /// RC201: an IDC that has providers but is missing from its region's route table.
    IdcNotInRouteTable,
    /// RC202: a route-table IDC with no provider.
    RouteTableIdcWithoutProvider,
    /// RC203: a tag, group or parameter value that a rule names and no provider carries.
    ValueWithoutProvider,
    /// RC204: a condition whose then-part matches no provider.
    ThenMatchesNoProvider,
    /// RC205: a rule shadowed by another (a condition by an earlier one, a tag by a later
    /// one of the same name).
    Shadowed,
    /// RC206: a provider whose `weight` is negative, out of range or not a number.
    ProviderWeight,
}

impl Code {
    /// Every code, in documentation order.
    #[cfg(test)]
    pub const ALL: [Code; 19] = [
        Code::Unreadable,
        Code::Invalid,
        Code::NoType,
        Code::UnknownType,
        Code::AndOrWord,
        Code::Pipe,
        Code::Arrow,
        Code::NoThen,
        Code::ValueWithSpaces,
        Code::NeverMatches,
        Code::UnknownField,
        Code::Disabled,
        Code::MeshIgnored,
        Code::IdcNotInRouteTable,
        Code::RouteTableIdcWithoutProvider,
        Code::ValueWithoutProvider,
        Code::ThenMatchesNoProvider,
        Code::Shadowed,
        Code::ProviderWeight,
    ];

    /// The code as printed: `RC101`.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::Unreadable => "RC001",
            Code::Invalid => "RC002",
            Code::NoType => "RC003",
            Code::UnknownType => "RC004",
            Code::AndOrWord => "RC101",
            Code::Pipe => "RC102",
            Code::Arrow => "RC103",
            Code::NoThen => "RC104",
            Code::ValueWithSpaces => "RC105",
            Code::NeverMatches => "RC106",
            Code::UnknownField => "RC107",
            Code::Disabled => "RC108",
            Code::MeshIgnored => "RC109",
            Code::IdcNotInRouteTable => "RC201",
            Code::RouteTableIdcWithoutProvider => "RC202",
            Code::ValueWithoutProvider => "RC203",
            Code::ThenMatchesNoProvider => "RC204",
            Code::Shadowed => "RC205",
            Code::ProviderWeight => "RC206",
        }
    }

    /// The severity a problem of this code has unless the lint says otherwise
    /// ([`Code::ThenMatchesNoProvider`] is an error under `force: true`).
    pub fn default_severity(self) -> Severity {
        match self {
            Code::Unreadable | Code::Invalid | Code::NoType | Code::UnknownType => Severity::Error,
            _ => Severity::Warning,
        }
    }
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One problem: a located error with a severity and a code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Error or warning.
    pub severity: Severity,
    /// The stable code.
    pub code: Code,
    /// Where (origin, line, column, field path) and what.
    pub error: LocatedError,
}

impl Problem {
    /// A problem of `code` with the code's default severity.
    pub fn new(code: Code, error: LocatedError) -> Self {
        Problem {
            severity: code.default_severity(),
            code,
            error,
        }
    }

    /// The same problem as an error.
    pub fn into_error(mut self) -> Self {
        self.severity = Severity::Error;
        self
    }

    /// A problem in `doc` at `path` (at `offset` characters into its scalar, when given).
    pub fn at(
        code: Code,
        doc: &YamlDoc,
        path: &FieldPath,
        offset: Option<usize>,
        message: impl Into<String>,
    ) -> Self {
        let e = match offset {
            Some(o) => RuleError::at_offset(path.clone(), o, message),
            None => RuleError::new(path.clone(), message),
        };
        Problem::new(code, doc.locate_error(&e))
    }

    /// The text form: `file:line:column: warning[RC101]: field: message`, then the source
    /// line with a caret, rendered by [`LocatedError::render`] so that every command shows
    /// problems alike. The label is styled (an error red, a warning yellow: [`crate::out`]).
    pub fn render(&self) -> String {
        let mut e = self.error.clone();
        let field = e
            .field
            .take()
            .filter(|f| !f.is_root())
            .map(|f| format!("{f}: "))
            .unwrap_or_default();
        let style = match self.severity {
            Severity::Error => crate::out::ERROR,
            Severity::Warning => crate::out::WARNING,
        };
        let label = format!("{}[{}]", self.severity.as_str(), self.code);
        e.message = format!("{label}: {field}{}", e.message);
        // Styled after rendering, which escapes control characters in the message.
        let at = format!(": {label}: ");
        e.render()
            .replacen(&at, &format!(": {}: ", crate::out::paint(style, &label)), 1)
    }
}

/// Every located error as a problem of code [`Code::Invalid`] (or [`Code::Unreadable`]
/// when the file could not be read).
pub fn invalid(errors: impl IntoIterator<Item = LocatedError>) -> Vec<Problem> {
    errors
        .into_iter()
        .map(|e| {
            let code = if e.message.starts_with("cannot read") {
                Code::Unreadable
            } else {
                Code::Invalid
            };
            Problem::new(code, e)
        })
        .collect()
}

/// The closest known name to a typo: the library's, so every message suggests alike.
pub use routechain::core::did_you_mean;

/// One rule document to lint: its type, the document it is in and its path there (the
/// root for a rule file, `routers[i].rule` for an inline rule).
#[derive(Debug, Clone, Copy)]
pub struct RuleRef<'a> {
    /// The router type (`condition`, `tag`, ...).
    pub type_name: &'a str,
    /// The document holding the rule.
    pub doc: &'a YamlDoc,
    /// The rule's path in `doc`.
    pub path: &'a FieldPath,
}

impl RuleRef<'_> {
    /// The rule's value, built for the caller (not kept): for lints of small rules.
    pub fn value(&self) -> Option<serde_json::Value> {
        self.doc.value_at(self.path)
    }

    /// The rule for a router to read, in the document's tree (no value built).
    pub fn rule_doc(&self) -> Option<routechain::core::RuleDoc<'_>> {
        self.doc.rule_doc(self.path)
    }
}

/// The lints that need only the rule itself (no provider list).
pub fn lint_rule(rule: RuleRef<'_>) -> Vec<Problem> {
    let mut out = fields::lint(rule);
    if rule.type_name == "condition"
        && let Some(def) = condition::definition(rule)
    {
        out.extend(condition::lint(rule, &def));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_and_ordered() {
        let names: Vec<&str> = Code::ALL.iter().map(|c| c.as_str()).collect();
        let mut sorted = names.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(names, sorted);
    }

    #[test]
    fn docs_check_md_has_one_row_per_code_with_its_severity() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/check.md");
        let doc = std::fs::read_to_string(path).unwrap();
        let rows: Vec<&str> = doc.lines().filter(|l| l.starts_with("| RC")).collect();
        assert_eq!(rows.len(), Code::ALL.len());
        for (row, code) in rows.iter().zip(Code::ALL) {
            let severity = code.default_severity().as_str();
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            assert_eq!(cells[1], code.as_str(), "{row}");
            assert!(cells[2].contains(severity), "{row}: expected {severity}");
        }
    }

    #[test]
    fn did_you_mean_finds_typos_only() {
        let known = ["force", "enabled", "conditions", "runtime"];
        assert_eq!(did_you_mean("forse", known), Some("force"));
        assert_eq!(did_you_mean("enable", known), Some("enabled"));
        assert_eq!(did_you_mean("condition", known), Some("conditions"));
        assert_eq!(did_you_mean("xyz", known), None);
    }
}
