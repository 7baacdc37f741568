//! `routechain check`: validate chain files and rule files, lint them, and (with
//! `--providers`) cross-check them against a provider list.
//!
//! A file with a top-level `routers:` is a chain file; anything else is one rule document,
//! whose type comes from `--type` or from a Dubbo node-name suffix in the file name
//! (`<key>.condition-router`, `<key>.tag-router`, `<key>.<type>-router`, optionally followed
//! by `.yaml`/`.yml`). Every problem has a severity and a stable code ([`crate::lint`],
//! `docs/check.md`). Exit: 2 when there is an error, 1 when there are warnings and
//! `--deny-warnings`, 0 otherwise.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use routechain::core::{FieldPath, Registry, RouterSpec, RuleDoc, Snapshot};
use routechain::rules::load::{self, LoadError};
use routechain::rules::{ChainFile, LocatedError, Location, RuleOverride, RuleSource, YamlDoc};
use serde::Serialize;

use super::EXIT_INVALID;
use crate::lint::{self, Code, Problem, RuleRef, Severity};

/// Arguments of `check`.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// The type of the rule files after it, up to the next `--type` (files before the first
    /// `--type` take the first); default: from the file name's Dubbo node suffix.
    #[arg(long = "type", value_name = "TYPE", value_parser = RuleTypeParser)]
    rule_type: Vec<String>,
    /// A provider list (as for `route`) to cross-check the rules against.
    #[arg(long, value_name = "FILE")]
    providers: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Exit 1 when there are warnings (and no error).
    #[arg(long)]
    deny_warnings: bool,
    /// Chain files and rule files to check (`-`: standard input, for one of the files or
    /// `--providers`; pipes and FIFOs are read too).
    #[arg(required_unless_present = "registry", value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Audit a live registry instead of files: every rule its config center holds, checked
    /// against the providers it holds now, located at its node or dataId (docs/check.md,
    /// "Auditing a registry"). Any address `watch --registry` takes.
    #[arg(long, value_name = "ADDRESS", conflicts_with_all = ["files", "providers", "rule_type"])]
    registry: Option<String>,
    /// With --registry: only the rules of this reference (`interface`,
    /// `interface:version:group`) and of its providers' application.
    #[arg(long, requires = "registry", value_name = "SERVICE")]
    service: Option<String>,
    /// With --registry: every rule (the default without --service).
    #[arg(long, requires = "registry", conflicts_with = "service")]
    all: bool,
}

/// The `--type` values of `check` and `zk`: any text (an unknown type is reported with the
/// known ones), with the known types as the possible values that `--help` lists and shell
/// completion offers.
#[derive(Debug, Clone, Copy)]
pub struct RuleTypeParser;

impl clap::builder::TypedValueParser for RuleTypeParser {
    type Value = String;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        clap::builder::StringValueParser::new().parse_ref(cmd, arg, value)
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        let registry = routechain::registry();
        let types: Vec<String> = rule_types(&registry)
            .into_iter()
            .map(str::to_string)
            .collect();
        Some(Box::new(
            types.into_iter().map(clap::builder::PossibleValue::new),
        ))
    }
}

/// The type each of `files` is checked as, from the `--type`s among the arguments
/// (`matches`, the `check` subcommand's): a `--type` applies to the files after it up to
/// the next one; the files before the first take the first. `None`: no `--type`.
fn types_per_file(matches: &clap::ArgMatches, files: usize) -> Vec<Option<String>> {
    let types: Vec<(usize, String)> = match (
        matches.indices_of("rule_type"),
        matches.get_many::<String>("rule_type"),
    ) {
        (Some(at), Some(types)) => at.zip(types.cloned()).collect(),
        _ => Vec::new(),
    };
    let Some(at) = matches.indices_of("files") else {
        return vec![None; files];
    };
    at.map(|file| {
        types
            .iter()
            .rev()
            .find(|(t, _)| *t < file)
            .or(types.first())
            .map(|(_, ty)| ty.clone())
    })
    .collect()
}

/// Output formats of `check` and `test`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// `file:line:column: warning[CODE]: message`, the source line, a summary line.
    Text,
    /// `{"files": [{"file", "problems": [{"severity", "code", "line", "column", "path",
    /// "message"}]}]}`.
    Json,
}

/// The problems found in one file (or in the rule files a chain file names).
#[derive(Debug, Default)]
pub struct FileReport {
    /// The file as given.
    pub file: String,
    /// What the file is when it has no error: `2 routers`, `condition rule`.
    pub what: String,
    /// Every problem, sorted by origin and location.
    pub problems: Vec<Problem>,
}

#[derive(Serialize)]
struct JsonProblem<'a> {
    severity: &'static str,
    code: &'static str,
    line: usize,
    column: usize,
    path: String,
    message: &'a str,
}

#[derive(Serialize)]
struct JsonFile<'a> {
    file: &'a str,
    problems: Vec<JsonProblem<'a>>,
    /// The problems of this file left out past the first 100 (absent when none).
    #[serde(skip_serializing_if = "is_zero")]
    more: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

#[derive(Serialize)]
struct JsonOutput<'a> {
    files: Vec<JsonFile<'a>>,
}

/// Runs `check`; `matches` are the `check` subcommand's (for the position of every
/// `--type` among the files).
pub fn run(args: &CheckArgs, matches: &clap::ArgMatches) -> ExitCode {
    if let Some(registry) = &args.registry {
        return super::audit::run(&super::audit::Audit {
            registry,
            service: args.service.as_deref(),
            format: args.format,
            deny_warnings: args.deny_warnings,
        });
    }
    let types = types_per_file(matches, args.files.len());
    if let Some(problem) = unused_type(matches) {
        errln!("{}", crate::out::paint_errors(&problem));
        return ExitCode::from(EXIT_INVALID);
    }
    let inputs = args.files.iter().map(|f| ("FILE", f.as_path()));
    if let Err(e) =
        super::one_stdin(inputs.chain(args.providers.iter().map(|p| ("--providers", p.as_path()))))
    {
        errln!("{}", crate::out::paint_errors(&e.render()));
        return ExitCode::from(EXIT_INVALID);
    }
    let registry = routechain::registry();
    let providers = match &args.providers {
        None => Ok(None),
        Some(p) => match load::load_providers(p, 1) {
            Ok(s) => Ok(Some(s)),
            Err(e) => Err(problems_of(e)),
        },
    };
    let mut reports = Vec::new();
    let snapshot = match providers {
        Ok(s) => s,
        Err(problems) => {
            reports.push(FileReport {
                file: args
                    .providers
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default(),
                what: String::new(),
                problems,
            });
            None
        }
    };
    if let (Some(path), Some(snapshot)) = (&args.providers, &snapshot) {
        let origin = path.display().to_string();
        let problems = lint::providers::weights(
            &origin,
            // Read again only from a regular file: a pipe's text is gone.
            || {
                std::fs::metadata(path)
                    .is_ok_and(|m| m.is_file())
                    .then(|| routechain::rules::input::read_text(path, &origin).ok())
                    .flatten()
            },
            snapshot,
        );
        if !problems.is_empty() {
            reports.push(FileReport {
                file: origin,
                what: format!("{} providers", snapshot.len()),
                problems,
            });
        }
    }
    for (path, ty) in args.files.iter().zip(&types) {
        reports.push(check_file(
            path,
            ty.as_deref(),
            snapshot.as_ref(),
            &registry,
        ));
    }
    let (errors, warnings) = count(reports.iter().flat_map(|r| &r.problems));
    match args.format {
        Format::Text => out!("{}", text(&reports)),
        Format::Json => outln!("{}", json(&reports)),
    }
    exit(errors, warnings, args.deny_warnings)
}

/// A `--type` after the last file while another `--type` comes before it applies to no
/// file: the message saying so.
fn unused_type(matches: &clap::ArgMatches) -> Option<String> {
    let last_file = matches.indices_of("files")?.max()?;
    let types: Vec<usize> = matches.indices_of("rule_type")?.collect();
    let last_type = *types.last()?;
    let ty = matches.get_many::<String>("rule_type")?.next_back()?;
    (types.len() > 1 && last_type > last_file).then(|| {
        format!(
            "routechain check: `--type {ty}` comes after the last file: a `--type` applies to \
             the files after it"
        )
    })
}

/// The exit code for a count of errors and warnings.
pub fn exit(errors: usize, warnings: usize, deny_warnings: bool) -> ExitCode {
    if errors > 0 {
        ExitCode::from(EXIT_INVALID)
    } else if warnings > 0 && deny_warnings {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// (errors, warnings) among `problems`.
pub fn count<'a>(problems: impl IntoIterator<Item = &'a Problem>) -> (usize, usize) {
    problems
        .into_iter()
        .fold((0, 0), |(e, w), p| match p.severity {
            Severity::Error => (e + 1, w),
            Severity::Warning => (e, w + 1),
        })
}

fn problems_of(e: LoadError) -> Vec<Problem> {
    match e {
        LoadError::Invalid(es) => lint::invalid(es),
        LoadError::Prepare(p) => vec![Problem::new(
            Code::Invalid,
            LocatedError {
                origin: String::new(),
                location: Location { line: 1, column: 1 },
                field: None,
                message: p.to_string(),
                source_line: None,
            },
        )],
    }
}

/// `n thing` / `n things`.
pub fn plural(n: usize, thing: &str) -> String {
    if n == 1 {
        format!("{n} {thing}")
    } else {
        format!("{n} {thing}s")
    }
}

/// The text report: the problems of each file, a line per file, the summary line.
pub fn text(reports: &[FileReport]) -> String {
    let mut out = String::new();
    for r in reports {
        // Bounded output: at most 100 problems per file, then how many more.
        let shown = routechain::rules::located::MAX_PROBLEMS_PER_ORIGIN;
        for p in r.problems.iter().take(shown) {
            out.push_str(&p.render());
            out.push('\n');
        }
        if r.problems.len() > shown {
            out.push_str(&format!(
                "… and {} more problem(s) in {}\n",
                r.problems.len() - shown,
                r.file
            ));
        }
        let (e, w) = count(&r.problems);
        let status = match (e, w) {
            (0, 0) => format!("ok ({})", r.what),
            (0, w) => format!("ok ({}), {}", r.what, plural(w, "warning")),
            (e, 0) => plural(e, "error"),
            (e, w) => format!("{}, {}", plural(e, "error"), plural(w, "warning")),
        };
        out.push_str(&format!("{}: {status}\n", r.file));
    }
    let (e, w) = count(reports.iter().flat_map(|r| &r.problems));
    out.push_str(&format!(
        "check: {} checked, {}, {}\n",
        plural(reports.len(), "file"),
        plural(e, "error"),
        plural(w, "warning")
    ));
    out
}

/// The JSON report: one entry per file that was checked or holds a problem (a rule file a
/// chain names has its own entry after the chain's). Bounded as the text is: at most 100
/// problems per file, the rest counted in `"more"`.
pub fn json(reports: &[FileReport]) -> String {
    let shown = routechain::rules::located::MAX_PROBLEMS_PER_ORIGIN;
    let mut files: Vec<JsonFile<'_>> = Vec::new();
    for r in reports {
        let at = files.len();
        files.push(JsonFile {
            file: &r.file,
            problems: Vec::new(),
            more: 0,
        });
        for p in &r.problems {
            let origin = if p.error.origin.is_empty() {
                r.file.as_str()
            } else {
                p.error.origin.as_str()
            };
            let entry = match files[at..].iter().position(|f| f.file == origin) {
                Some(i) => at + i,
                None => {
                    files.push(JsonFile {
                        file: origin,
                        problems: Vec::new(),
                        more: 0,
                    });
                    files.len() - 1
                }
            };
            if files[entry].problems.len() >= shown {
                files[entry].more += 1;
                continue;
            }
            files[entry].problems.push(JsonProblem {
                severity: p.severity.as_str(),
                code: p.code.as_str(),
                line: p.error.location.line,
                column: p.error.location.column,
                path: p
                    .error
                    .field
                    .as_ref()
                    .map(ToString::to_string)
                    .unwrap_or_default(),
                message: &p.error.message,
            });
        }
    }
    serde_json::to_string_pretty(&JsonOutput { files })
        .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}

/// Checks one file: a chain file or a rule file.
pub fn check_file(
    path: &Path,
    rule_type: Option<&str>,
    providers: Option<&Snapshot>,
    registry: &Registry,
) -> FileReport {
    let origin = routechain::rules::input::origin_of(path);
    // Regular files and pipes (`-`: stdin) within the size limit, invalid UTF-8 located, a
    // BOM skipped.
    let text = match routechain::rules::input::read_input(path) {
        Ok(t) => t,
        Err(e) => {
            return FileReport {
                file: origin.clone(),
                what: String::new(),
                problems: lint::invalid([e]),
            };
        }
    };
    let routers = FieldPath::root().key("routers");
    let parsed = YamlDoc::parse(origin.as_str(), &text);
    let is_chain = parsed
        .as_ref()
        .is_ok_and(|d| d.is_object_at(&FieldPath::root()) && d.rule_doc(&routers).is_some());
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    let ty = rule_type
        .map(str::to_string)
        .or_else(|| name.as_deref().and_then(type_from_name));
    let mut report = match parsed {
        _ if is_chain => check_chain(&origin, &text, path.parent(), providers, registry),
        // Neither a chain file nor a rule of a known type: the YAML error, where it is (as
        // `route` reports it), unless the text is a valid stream of documents (a mesh rule).
        Err(e) if ty.is_none() && YamlDoc::parse_stream(origin.as_str(), &text).is_err() => {
            FileReport {
                file: origin.clone(),
                what: String::new(),
                problems: lint::invalid([e]),
            }
        }
        _ => check_rule(&origin, &text, ty.as_deref(), providers, registry),
    };
    report.problems.sort_by(|a, b| {
        (&a.error.origin, a.error.location, a.code).cmp(&(
            &b.error.origin,
            b.error.location,
            b.code,
        ))
    });
    report.problems.dedup();
    report
}

/// The rule type a Dubbo node name gives: `<key>.condition-router` → `condition`,
/// `<key>.<type>-router` → `<type>`, `<key>.configurators` → `configurators`,
/// `<key>.MESHAPPRULE` → `mesh`; a `.yaml` / `.yml` after it is ignored.
pub fn type_from_name(name: &str) -> Option<String> {
    let name = name
        .strip_suffix(".yaml")
        .or_else(|| name.strip_suffix(".yml"))
        .unwrap_or(name);
    if name.ends_with(".configurators") {
        return Some("configurators".into());
    }
    if name.ends_with(".MESHAPPRULE") {
        return Some("mesh".into());
    }
    let stem = name.strip_suffix("-router")?;
    let (_, ty) = stem.rsplit_once('.')?;
    (!ty.is_empty()).then(|| ty.to_string())
}

/// The types a rule file can be checked as: the registry's, but not `plugin` (a plugin
/// entry names its library in the chain file, so it has no rule file of its own).
/// Dubbo's override rules (`<key>.configurators`) are checked too, by their own parser.
pub fn rule_types(registry: &Registry) -> Vec<&str> {
    let mut types: Vec<&str> = registry.type_names().filter(|t| *t != "plugin").collect();
    types.push(CONFIGURATORS);
    types.sort_unstable();
    types
}

/// The type of Dubbo's override rules (not a router: `routechain::rules::configurators`).
const CONFIGURATORS: &str = "configurators";

/// Validates and lints one rule document of type `rule_type` (as `check` and `zk put-rule`
/// do).
pub fn check_rule(
    origin: &str,
    text: &str,
    rule_type: Option<&str>,
    providers: Option<&Snapshot>,
    registry: &Registry,
) -> FileReport {
    let mut report = FileReport {
        file: origin.to_string(),
        ..FileReport::default()
    };
    let whole = |message: String| LocatedError {
        origin: origin.to_string(),
        location: Location { line: 1, column: 1 },
        field: None,
        message,
        source_line: None,
    };
    let known = rule_types(registry);
    let Some(ty) = rule_type else {
        report.problems.push(Problem::new(
            Code::NoType,
            whole(format!(
                "not a chain file (no `routers:`) and no rule type: give one with `--type TYPE` \
                 ({}), or name the file after its Dubbo node (`<key>.condition-router`, \
                 `<key>.tag-router`, `<key>.<type>-router`)",
                known.join(", ")
            )),
        ));
        return report;
    };
    if ty == CONFIGURATORS {
        match routechain::rules::configurators::OverrideRule::parse(origin, text) {
            Ok(_) => {
                report.what = "override rule".into();
                // Unknown fields (Dubbo ignores them) and `enabled: false`.
                if let Ok(doc) = YamlDoc::parse(origin, text) {
                    let root = FieldPath::root();
                    report.problems = lint::lint_rule(RuleRef {
                        type_name: CONFIGURATORS,
                        doc: &doc,
                        path: &root,
                    });
                }
            }
            Err(es) => report.problems = lint::invalid(es),
        }
        return report;
    }
    let Some(factory) = registry.get(ty).filter(|_| ty != "plugin") else {
        report.problems.push(Problem::new(
            Code::UnknownType,
            whole(routechain::core::unknown_name(
                "rule type",
                ty,
                known.iter().copied(),
            )),
        ));
        return report;
    };
    // A mesh rule is a stream of documents (Dubbo's `<app>.MESHAPPRULE`).
    let stream = routechain::rules::chain_file::MULTI_DOCUMENT_TYPES.contains(&ty);
    let parsed = if stream {
        YamlDoc::parse_stream(origin, text)
    } else {
        YamlDoc::parse(origin, text)
    };
    let doc = match parsed {
        Ok(d) => d,
        Err(e) => {
            report.problems = lint::invalid([e]);
            return report;
        }
    };
    let root = FieldPath::root();
    let null = serde_json::Value::Null;
    let rule_doc = doc
        .rule_doc(&root)
        .unwrap_or_else(|| RuleDoc::new(&null, &root));
    if !rule_doc.is_object() && !stream {
        report.problems.push(Problem::at(
            Code::Invalid,
            &doc,
            &root,
            None,
            if rule_doc.is_null() {
                "the rule document is empty"
            } else {
                "a rule document must be a mapping"
            },
        ));
        return report;
    }
    // Named as a rule file: a mesh text without any standard document is then an error
    // (in a config center the same text would clear the rule).
    let entry = if stream {
        serde_json::json!({ "type": ty, "rule_file": origin })
    } else {
        serde_json::json!({ "type": ty })
    };
    let entry_path = FieldPath::root();
    let spec = RouterSpec {
        type_name: ty,
        entry: RuleDoc::new(&entry, &entry_path),
        rule: Some(rule_doc),
        base_dir: Path::new(origin).parent(),
        service: None,
    };
    let rule = RuleRef {
        type_name: ty,
        doc: &doc,
        path: &root,
    };
    match factory.build(&spec) {
        Err(es) => {
            report.problems = lint::invalid(es.iter().map(|e| doc.locate_error(e)));
        }
        Ok(router) => {
            // Not kept while the lints compile the rule again (a large rule held twice).
            drop(router);
            report.what = format!("{ty} rule");
            if let Some(snapshot) = providers {
                report
                    .problems
                    .extend(lint::providers::lint(rule, snapshot, None));
            }
        }
    }
    // Every problem at once: the warnings of a rule that has errors too (a lint that needs
    // the compiled rule finds nothing in one that does not compile).
    report.problems.extend(rule_lints(rule, None));
    report
}

fn check_chain(
    origin: &str,
    text: &str,
    base_dir: Option<&Path>,
    providers: Option<&Snapshot>,
    registry: &Registry,
) -> FileReport {
    let mut report = FileReport {
        file: origin.to_string(),
        ..FileReport::default()
    };
    let (chain, errors) = ChainFile::parse_lenient(origin, text, base_dir.map(Path::to_path_buf));
    report.problems = lint::invalid(errors);
    let Some(chain) = chain else {
        return report;
    };
    let mut routers = 0;
    let root = FieldPath::root();
    // The override files `overrides:` names, linted as a standalone `.configurators` file
    // is (unknown fields, `enabled: false`); each problem is located in its own file.
    for file in chain.overrides.iter() {
        let origin = file.path.display().to_string();
        if let Ok(doc) = YamlDoc::parse(origin, &file.text) {
            report.problems.extend(lint::lint_rule(RuleRef {
                type_name: CONFIGURATORS,
                doc: &doc,
                path: &root,
            }));
        }
    }
    for def in chain.entries.iter() {
        let inline = def.path().key("rule");
        let rule = match &def.rule {
            RuleSource::None => None,
            RuleSource::Inline => Some(RuleRef {
                type_name: &def.type_name,
                doc: &chain.doc,
                path: &inline,
            }),
            RuleSource::File { doc, .. } => Some(RuleRef {
                type_name: &def.type_name,
                doc,
                path: &root,
            }),
        };
        match chain.compile_entry(registry, def, RuleOverride::Own) {
            Err(es) => report.problems.extend(lint::invalid(es)),
            Ok(entry) => {
                // Not kept while the lints compile the rule again (a large rule held twice).
                drop(entry);
                routers += 1;
                if let (Some(rule), Some(snapshot)) = (rule, providers) {
                    report.problems.extend(lint::providers::lint(
                        rule,
                        snapshot,
                        chain.consumer.as_ref(),
                    ));
                }
            }
        }
        // Every problem at once: an entry with errors gets its warnings too.
        if let Some(rule) = rule {
            report
                .problems
                .extend(rule_lints(rule, Some(chain.entry_value(def))));
        }
    }
    if let Some(snapshot) = providers
        && report
            .problems
            .iter()
            .all(|p| p.severity != Severity::Error)
        && let Err(e) = load::build_state(&chain, registry, Arc::new(snapshot.clone()), None)
    {
        report.problems.extend(problems_of(e));
    }
    report.what = plural(routers, "router");
    report
}

/// The lints of one rule that need no provider list (a mesh rule's reader warnings among
/// them); `entry` is the chain entry holding it, when it has one.
fn rule_lints(rule: RuleRef<'_>, entry: Option<&serde_json::Value>) -> Vec<Problem> {
    let mut out = lint::lint_rule(rule);
    if rule.type_name == "mesh" {
        out.extend(lint::mesh::lint(rule, entry));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_from_dubbo_node_names() {
        let cases = [
            ("com.foo.BarService::.condition-router", Some("condition")),
            (
                "com.foo.BarService::.condition-router.yaml",
                Some("condition"),
            ),
            ("demo-provider.tag-router.yml", Some("tag")),
            ("app.affinity-router", Some("affinity")),
            (
                "com.foo.BarService::.idc-weight-router.yaml",
                Some("idc-weight"),
            ),
            ("com.foo.BarService.configurators", Some("configurators")),
            ("demo.MESHAPPRULE.yaml", Some("mesh")),
            ("idc-weight.rule.yaml", None),
            ("rule.yaml", None),
            ("-router", None),
        ];
        for (name, want) in cases {
            assert_eq!(type_from_name(name).as_deref(), want, "{name}");
        }
    }
}
