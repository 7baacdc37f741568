//! The chain file: which routers, in which order, with which rules.
//!
//! ```yaml
//! service: com.foo.BarService            # optional: the reference's interface
//! group: "*"                             # optional: its group (`*` any, `a,b` either)
//! version: 1.0.0                         # optional: its version (`*` any)
//! consumer: consumer://10.0.0.1/com.foo.BarService?application=web   # optional
//! overrides: [weights.configurators.yaml] # optional: override-rule files (file source)
//! apply_provider_overrides: false        # optional: also apply `side: provider` items
//! routers:
//!   - type: condition                    # a type registered in the registry
//!     priority: 140                      # optional; default per type
//!     rule: { ... }                      # the router's rule document
//!   - type: tag
//!     rule_file: tag-rule.yaml           # or a file, relative to the chain file
//!   - type: group                        # a router whose rule has only defaults needs none
//! load_balance: random                   # optional: balancing, failover and health settings,
//! skip_degraded: true                    # see `service_config`
//! ```
//!
//! Loading is two steps: [`ChainFile::parse`] reads the file and the rule files it names
//! (YAML errors, unknown or mistyped common fields), and [`ChainFile::compile`] builds every
//! router through a [`Registry`] (unknown types, type-specific fields, rule errors).
//! [`ChainFile::load_with`] and [`ChainFile::parse_with`] do both, so loading a file reports
//! everything building a chain from it would. Each reports every problem at once, with
//! origin, line, column and field path, in a [`LocatedErrors`] (a `std::error::Error`: `?`
//! carries it on).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use routechain_balance::ServiceConfig;
use routechain_core::{
    ChainEntry, FieldPath, PathSegment, Registry, RouterSpec, RuleDoc, RuleError, Url,
};
use serde_json::Value;

use crate::located::LocatedErrors;
use crate::service_config::SERVICE_FIELDS;
use crate::yaml::{LocatedError, Location, YamlDoc};

/// Fields every chain entry may have, whatever its type.
pub const COMMON_ENTRY_FIELDS: [&str; 7] = [
    "type",
    "priority",
    "rule",
    "rule_file",
    "application",
    "scope",
    "key",
];

/// Router types whose rule is a stream of YAML documents (Dubbo's `<app>.MESHAPPRULE`): their
/// `rule_file` is read whole (every `---` document, as a list), and their inline `rule` may
/// be a list of documents or the text itself, not only a mapping.
pub const MULTI_DOCUMENT_TYPES: [&str; 1] = ["mesh"];

/// Top-level fields of a chain file (the service settings are in
/// [`crate::service_config::SERVICE_FIELDS`]).
pub const CHAIN_FIELDS: [&str; 7] = [
    "service",
    "group",
    "version",
    "consumer",
    "routers",
    "overrides",
    "apply_provider_overrides",
];

/// Where an entry's rule comes from.
#[derive(Debug, Clone)]
pub enum RuleSource {
    /// No rule: the router's defaults (or, with a config center, the subscribed node).
    None,
    /// `rule:` inline in the chain file.
    Inline,
    /// `rule_file:`, already read and parsed.
    File {
        /// The resolved path.
        path: PathBuf,
        /// The parsed document.
        doc: Box<YamlDoc>,
    },
}

/// One router entry of a chain file, before compilation.
#[derive(Debug, Clone)]
pub struct EntryDef {
    /// Position in the file's `routers` list.
    pub index: usize,
    /// `type`.
    pub type_name: String,
    /// `priority`, when given.
    pub priority: Option<i32>,
    /// `application`: the application whose config-center rule this entry follows.
    pub application: Option<String>,
    /// `scope`: `service` or `application` (which config-center key the entry follows when
    /// neither `application` nor `key` names it).
    pub scope: Option<String>,
    /// `key`: the config-center key this entry follows, as written (overrides the rest).
    pub key: Option<String>,
    /// Where the rule comes from.
    pub rule: RuleSource,
}

impl EntryDef {
    /// The entry's path in the chain file (`routers[i]`).
    pub fn path(&self) -> FieldPath {
        FieldPath::root().key("routers").index(self.index)
    }
}

/// A rule that replaces the entry's own (from a config center), or clears it.
#[derive(Debug, Clone, Copy)]
pub enum RuleOverride<'a> {
    /// Use the chain file's rule (inline, file, or none).
    Own,
    /// Use this document instead.
    Doc(&'a YamlDoc),
    /// No rule (a deleted config-center node).
    Cleared,
}

/// An override-rule file named by `overrides:`.
#[derive(Debug, Clone)]
pub struct OverrideFile {
    /// The resolved path.
    pub path: PathBuf,
    /// Its text (to tell a change).
    pub text: String,
    /// The parsed rule.
    pub rule: crate::configurators::OverrideRule,
}

/// A parsed chain file.
///
/// Cloning one is cheap: the document, its entries and override files are shared by the
/// clones (reference counts), only the reference (`service`, `group`, `version`), the
/// consumer and the service settings are copied. A process serving many services from one
/// chain configuration parses the file once and builds every service from a clone (with
/// its own reference), or through `routechain_live::ChainTemplate`.
#[derive(Debug, Clone)]
pub struct ChainFile {
    /// The chain document.
    pub doc: YamlDoc,
    /// The chain document as a JSON value without its inline rules (each `routers[i].rule`
    /// that is not null reads `true`): what the chain's own fields are read from. A rule is
    /// read from [`ChainFile::doc`]'s tree, never built as a value.
    skeleton: Arc<Value>,
    /// The directory relative paths resolve against.
    pub base_dir: Option<PathBuf>,
    /// `service`: the reference's interface.
    pub service: Option<String>,
    /// `group`: the reference's group (`*` any, `a,b` either).
    pub group: Option<String>,
    /// `version`: the reference's version (`*` any).
    pub version: Option<String>,
    /// `overrides`: override-rule files, read and parsed (the file source's configurators).
    pub overrides: Arc<[OverrideFile]>,
    /// `apply_provider_overrides`: also apply `side: provider` override items.
    pub apply_provider_overrides: bool,
    /// `consumer`, parsed.
    pub consumer: Option<Url>,
    /// The entries, in file order.
    pub entries: Arc<[EntryDef]>,
    /// Load balancing, failover and health (`load_balance`, `methods`, `skip_degraded`,
    /// `retries`, `health`): see [`crate::service_config`].
    pub service_config: ServiceConfig,
}

impl ChainFile {
    /// Reads and parses a chain file (`-`: standard input, see [`crate::input`]) and the rule
    /// files it names: its fields, not yet its router types and rules, which
    /// [`ChainFile::load_with`] checks too; the error holds every problem, located.
    pub fn load(path: &Path) -> Result<Self, LocatedErrors> {
        match Self::load_lenient(path) {
            (Some(file), errors) if errors.is_empty() => Ok(file),
            (_, errors) => Err(LocatedErrors(errors)),
        }
    }

    /// Parses chain text; `origin` names it in errors, `base_dir` resolves `rule_file`s.
    /// The error holds every problem, located.
    pub fn parse(
        origin: &str,
        text: &str,
        base_dir: Option<PathBuf>,
    ) -> Result<Self, LocatedErrors> {
        match Self::parse_lenient(origin, text, base_dir) {
            (Some(file), errors) if errors.is_empty() => Ok(file),
            (_, errors) => Err(LocatedErrors(errors)),
        }
    }

    /// Reads a chain file like [`ChainFile::load`] and checks every entry against
    /// `registry`, so that loading reports what building a chain from the file would: an
    /// unknown router type (with a "did you mean"), an unknown field of an entry, a rule its
    /// router refuses (an invalid condition text, a bad CIDR, ...). Every problem at once,
    /// the file's own and the entries', each located by file, line, column and field.
    ///
    /// ```
    /// use routechain_rules::ChainFile;
    ///
    /// // In a service: `routechain::registry()`, every router type routechain ships.
    /// let mut registry = routechain_core::Registry::new();
    /// registry.register_fn("keep-all", 100, |_cx, _candidates| {});
    /// let text = "routers:\n  - type: keep-al\n";
    /// let errors = ChainFile::parse_with("c.yaml", text, None, &registry).unwrap_err();
    /// assert_eq!(
    ///     errors.0[0].to_string(),
    ///     "c.yaml:2:11: routers[0].type: unknown router type `keep-al`, expected one of \
    ///      `keep-all`; did you mean `keep-all`?"
    /// );
    /// ```
    pub fn load_with(path: &Path, registry: &Registry) -> Result<Self, LocatedErrors> {
        Self::checked(Self::load_lenient(path), registry)
    }

    /// Parses chain text like [`ChainFile::parse`] and checks every entry against `registry`
    /// (see [`ChainFile::load_with`]).
    pub fn parse_with(
        origin: &str,
        text: &str,
        base_dir: Option<PathBuf>,
        registry: &Registry,
    ) -> Result<Self, LocatedErrors> {
        Self::checked(Self::parse_lenient(origin, text, base_dir), registry)
    }

    /// The file when it parsed and every entry compiles through `registry`; else every
    /// problem of both steps.
    fn checked(
        (file, mut errors): (Option<Self>, Vec<LocatedError>),
        registry: &Registry,
    ) -> Result<Self, LocatedErrors> {
        if let Some(file) = &file
            && let Err(more) = file.compile(registry)
        {
            errors.extend(more.into_vec());
        }
        match file {
            Some(file) if errors.is_empty() => Ok(file),
            _ => Err(LocatedErrors(errors)),
        }
    }

    /// Reads a chain file like [`ChainFile::load`], but keeps going past problems: returns the
    /// entries that parsed (when the document itself did) together with every problem, so
    /// `routechain check` can also compile what parsed and report everything at once.
    pub fn load_lenient(path: &Path) -> (Option<Self>, Vec<LocatedError>) {
        // `-` is standard input, whose rule files are found from the working directory.
        let base_dir = (!crate::input::is_stdin(path))
            .then(|| path.parent().map(Path::to_path_buf))
            .flatten();
        match crate::input::read_input(path) {
            // The text is handed over: kept once, as the document's source.
            Ok(text) => Self::parse_doc_lenient(
                YamlDoc::parse_owned(crate::input::origin_of(path), text),
                base_dir,
            ),
            Err(e) => (None, vec![e]),
        }
    }

    /// Parses like [`ChainFile::parse`], keeping the entries that parsed (see
    /// [`ChainFile::load_lenient`]).
    pub fn parse_lenient(
        origin: &str,
        text: &str,
        base_dir: Option<PathBuf>,
    ) -> (Option<Self>, Vec<LocatedError>) {
        Self::parse_doc_lenient(YamlDoc::parse(origin, text), base_dir)
    }

    fn parse_doc_lenient(
        doc: Result<YamlDoc, LocatedError>,
        base_dir: Option<PathBuf>,
    ) -> (Option<Self>, Vec<LocatedError>) {
        let doc = match doc {
            Ok(doc) => doc,
            Err(e) => return (None, vec![e]),
        };
        let mut errors = Vec::new();
        let root = FieldPath::root();
        let err = |errors: &mut Vec<LocatedError>, e: RuleError| errors.push(doc.locate_error(&e));
        let skeleton = doc.value_eliding(&|p| is_inline_rule(p), Value::Bool(true));
        let Some(top) = skeleton.as_object() else {
            err(
                &mut errors,
                RuleError::new(root, "a chain file is a mapping with a `routers` list"),
            );
            return (None, errors);
        };
        for key in top.keys() {
            if !CHAIN_FIELDS.contains(&key.as_str()) && !SERVICE_FIELDS.contains(&key.as_str()) {
                err(
                    &mut errors,
                    RuleError::new(
                        root.key(key),
                        routechain_core::unknown_name(
                            "field",
                            key,
                            CHAIN_FIELDS.iter().chain(&SERVICE_FIELDS).copied(),
                        ),
                    ),
                );
            }
        }
        let service = string_field(top.get("service"), &root.key("service"), &mut |e| {
            err(&mut errors, e)
        });
        let group = string_field(top.get("group"), &root.key("group"), &mut |e| {
            err(&mut errors, e)
        });
        let version = string_field(top.get("version"), &root.key("version"), &mut |e| {
            err(&mut errors, e)
        });
        let apply_provider_overrides = match top.get("apply_provider_overrides") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => {
                err(
                    &mut errors,
                    RuleError::new(
                        root.key("apply_provider_overrides"),
                        "`apply_provider_overrides` must be true or false",
                    ),
                );
                false
            }
        };
        let overrides = parse_overrides(&doc, top, base_dir.as_deref(), &mut errors);
        let consumer = string_field(top.get("consumer"), &root.key("consumer"), &mut |e| {
            err(&mut errors, e)
        })
        .and_then(|c| match Url::parse(&c) {
            Ok(u) => Some(u),
            Err(e) => {
                err(
                    &mut errors,
                    RuleError::at_offset(
                        root.key("consumer"),
                        e.column - 1,
                        format!("invalid consumer URL: {}", e.reason),
                    ),
                );
                None
            }
        });
        let service_config = {
            let mut es = Vec::new();
            let c = crate::service_config::parse(top, &mut es);
            for e in &es {
                err(&mut errors, e.clone());
            }
            c
        };
        let mut entries = Vec::new();
        match top.get("routers") {
            None => err(
                &mut errors,
                RuleError::new(root.clone(), "missing field `routers`"),
            ),
            Some(Value::Array(items)) => {
                for (index, item) in items.iter().enumerate() {
                    if let Some(e) =
                        parse_entry(&doc, base_dir.as_deref(), index, item, &mut errors)
                    {
                        entries.push(e);
                    }
                }
            }
            Some(_) => err(
                &mut errors,
                RuleError::new(root.key("routers"), "`routers` must be a list of entries"),
            ),
        }
        let file = ChainFile {
            doc,
            skeleton: Arc::new(skeleton),
            base_dir,
            service,
            group,
            version,
            overrides: overrides.into(),
            apply_provider_overrides,
            consumer,
            entries: entries.into(),
            service_config,
        };
        (Some(file), errors)
    }

    /// Compiles every entry with its own rule.
    pub fn compile(&self, registry: &Registry) -> Result<Vec<ChainEntry>, LocatedErrors> {
        self.compile_with(registry, |_| RuleOverride::Own)
    }

    /// Compiles every entry, taking each entry's rule from `rule_for(entry)`.
    pub fn compile_with<'a>(
        &self,
        registry: &Registry,
        rule_for: impl Fn(&EntryDef) -> RuleOverride<'a>,
    ) -> Result<Vec<ChainEntry>, LocatedErrors> {
        let mut entries = Vec::new();
        let mut errors = Vec::new();
        for def in self.entries.iter() {
            match self.compile_entry(registry, def, rule_for(def)) {
                Ok(e) => entries.push(e),
                Err(mut es) => errors.append(&mut es),
            }
        }
        if errors.is_empty() {
            Ok(entries)
        } else {
            Err(LocatedErrors(errors))
        }
    }

    /// Compiles one entry.
    pub fn compile_entry(
        &self,
        registry: &Registry,
        def: &EntryDef,
        rule: RuleOverride<'_>,
    ) -> Result<ChainEntry, Vec<LocatedError>> {
        let entry_path = def.path();
        let entry_value = self.entry_value(def);
        let Some(factory) = registry.get(&def.type_name) else {
            let known: Vec<&str> = registry.type_names().collect();
            return Err(vec![self.doc.locate_error(&RuleError::new(
                entry_path.key("type"),
                routechain_core::unknown_name("router type", &def.type_name, known),
            ))]);
        };
        let mut errors = Vec::new();
        if let Some(map) = entry_value.as_object() {
            for key in map.keys() {
                if !COMMON_ENTRY_FIELDS.contains(&key.as_str())
                    && !factory.extra_fields().contains(&key.as_str())
                {
                    let expected = COMMON_ENTRY_FIELDS
                        .iter()
                        .chain(factory.extra_fields())
                        .copied();
                    let message = routechain_core::unknown_name("field", key, expected).replacen(
                        ", expected",
                        &format!(" in a `{}` entry, expected", def.type_name),
                        1,
                    );
                    errors.push(
                        self.doc
                            .locate_error(&RuleError::new(entry_path.key(key), message)),
                    );
                }
            }
        }
        let inline_path = entry_path.key("rule");
        let root = FieldPath::root();
        // (document to locate rule errors in, the rule, read from its tree)
        let rule_doc: Option<(&YamlDoc, RuleDoc<'_>)> = match rule {
            RuleOverride::Cleared => None,
            RuleOverride::Doc(doc) => doc.rule_doc(&root).map(|r| (doc, r)),
            RuleOverride::Own => match &def.rule {
                RuleSource::None => None,
                RuleSource::Inline => self.doc.rule_doc(&inline_path).map(|r| (&self.doc, r)),
                RuleSource::File { doc, .. } => doc.rule_doc(&root).map(|r| (&**doc, r)),
            },
        };
        if let Some((doc, value)) = rule_doc
            && !value.is_object()
            && !MULTI_DOCUMENT_TYPES.contains(&def.type_name.as_str())
        {
            errors.push(doc.locate_error(&RuleError::new(
                value.path.clone(),
                if value.is_null() {
                    "the rule document is empty".to_string()
                } else {
                    "a rule document must be a mapping".to_string()
                },
            )));
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        let spec = RouterSpec {
            type_name: &def.type_name,
            entry: RuleDoc::new(entry_value, &entry_path),
            rule: rule_doc.map(|(_, r)| r),
            base_dir: self.base_dir.as_deref(),
            service: self.service.as_deref(),
        };
        let locate = |e: &RuleError| match rule_doc {
            Some((doc, _))
                if !std::ptr::eq(doc, &self.doc) && !e.path.0.starts_with(&entry_path.0) =>
            {
                doc.locate_error(e)
            }
            _ => self.doc.locate_error(e),
        };
        let router = factory
            .build(&spec)
            .map_err(|es| es.iter().map(locate).collect::<Vec<_>>())?;
        let priority = def.priority.unwrap_or_else(|| router.default_priority());
        Ok(ChainEntry::new(def.type_name.as_str(), priority, router))
    }

    /// Entry `def` as a JSON value, its inline rule (when not null) read as `true`: the
    /// entry's own fields. Its rule is read with [`YamlDoc::rule_doc`] on [`ChainFile::doc`].
    pub fn entry_value(&self, def: &EntryDef) -> &Value {
        let mut v = &*self.skeleton;
        for seg in &def.path().0 {
            v = match seg {
                PathSegment::Key(k) => v.get(k.as_str()),
                PathSegment::Index(i) => v.get(*i),
            }
            .unwrap_or(&Value::Null);
        }
        v
    }

    /// The rule files the chain names (for file watching).
    pub fn rule_files(&self) -> impl Iterator<Item = &Path> + '_ {
        self.entries.iter().filter_map(|e| match &e.rule {
            RuleSource::File { path, .. } => Some(path.as_path()),
            _ => None,
        })
    }
}

/// True for `routers[i].rule`: an inline rule, read from the tree, not as a value.
fn is_inline_rule(path: &FieldPath) -> bool {
    matches!(
        path.0.as_slice(),
        [PathSegment::Key(r), PathSegment::Index(_), PathSegment::Key(k)] if r == "routers" && k == "rule"
    )
}

fn parse_entry(
    doc: &YamlDoc,
    base_dir: Option<&Path>,
    index: usize,
    item: &Value,
    errors: &mut Vec<LocatedError>,
) -> Option<EntryDef> {
    let path = FieldPath::root().key("routers").index(index);
    let mut err = |e: RuleError| errors.push(doc.locate_error(&e));
    let Some(map) = item.as_object() else {
        err(RuleError::new(
            path,
            "a router entry is a mapping with a `type`",
        ));
        return None;
    };
    let type_name = match map.get("type") {
        Some(Value::String(t)) if !t.trim().is_empty() => t.clone(),
        Some(_) => {
            err(RuleError::new(
                path.key("type"),
                "`type` must be a router type name",
            ));
            return None;
        }
        None => {
            err(RuleError::new(path, "missing field `type`"));
            return None;
        }
    };
    let priority = match map.get("priority") {
        None | Some(Value::Null) => None,
        Some(v) => match v.as_i64().and_then(|p| i32::try_from(p).ok()) {
            Some(p) => Some(p),
            None => {
                let what = if routechain_core::is_integer(v) {
                    "is out of range"
                } else {
                    "must be an integer"
                };
                err(RuleError::new(
                    path.key("priority"),
                    format!(
                        "`priority` {what}: found {}, expected an integer from {} to {}",
                        bounded_value(v),
                        i32::MIN,
                        i32::MAX
                    ),
                ));
                None
            }
        },
    };
    let mut application = string_field(map.get("application"), &path.key("application"), &mut err);
    // A mesh entry names its provider application with `app` (its config-center node is
    // `<app>.MESHAPPRULE`); the mesh router itself refuses `application`.
    if MULTI_DOCUMENT_TYPES.contains(&type_name.as_str())
        && let Some(Value::String(app)) = map.get("app")
    {
        application = Some(app.clone());
    }
    let key = string_field(map.get("key"), &path.key("key"), &mut err);
    let scope = string_field(map.get("scope"), &path.key("scope"), &mut err);
    if let Some(s) = &scope
        && s != "service"
        && s != "application"
    {
        err(RuleError::new(
            path.key("scope"),
            routechain_core::unknown_name("scope", s, ["service", "application"]),
        ));
    }
    let rule_file = string_field(map.get("rule_file"), &path.key("rule_file"), &mut err);
    let has_inline = map.get("rule").is_some_and(|v| !v.is_null());
    let rule = match (has_inline, rule_file) {
        (true, Some(_)) => {
            err(RuleError::new(
                path.key("rule_file"),
                "`rule` and `rule_file` are exclusive: give one",
            ));
            RuleSource::Inline
        }
        (true, None) => RuleSource::Inline,
        (false, None) => RuleSource::None,
        (false, Some(file)) => {
            let resolved = match base_dir {
                Some(dir) => dir.join(&file),
                None => PathBuf::from(&file),
            };
            let origin = resolved.display().to_string();
            let stream = MULTI_DOCUMENT_TYPES.contains(&type_name.as_str());
            match crate::input::read_text(&resolved, &origin) {
                Ok(text) => match if stream {
                    YamlDoc::parse_stream_owned(origin, text)
                } else {
                    YamlDoc::parse_owned(origin, text)
                } {
                    Ok(d) => RuleSource::File {
                        path: resolved,
                        doc: Box::new(d),
                    },
                    Err(e) => {
                        errors.push(e);
                        RuleSource::None
                    }
                },
                Err(e) if !e.message.starts_with("cannot read") => {
                    // Inside the file (invalid UTF-8): located there.
                    errors.push(e);
                    RuleSource::None
                }
                Err(e) => {
                    let reason = e
                        .message
                        .strip_prefix("cannot read: ")
                        .unwrap_or(&e.message);
                    let mut le = doc.locate_error(&RuleError::new(
                        path.key("rule_file"),
                        format!("cannot read rule file {origin}: {reason}"),
                    ));
                    le.field = Some(path.key("rule_file"));
                    errors.push(le);
                    RuleSource::None
                }
            }
        }
    };
    Some(EntryDef {
        index,
        type_name,
        priority,
        application,
        scope,
        key,
        rule,
    })
}

/// Reads the `overrides:` files (a string or a list of strings, relative to the chain file).
fn parse_overrides(
    doc: &YamlDoc,
    top: &serde_json::Map<String, Value>,
    base_dir: Option<&Path>,
    errors: &mut Vec<LocatedError>,
) -> Vec<OverrideFile> {
    let path = FieldPath::root().key("overrides");
    let names: Vec<(FieldPath, String)> = match top.get("overrides") {
        None | Some(Value::Null) => return Vec::new(),
        Some(Value::String(s)) => vec![(path.clone(), s.clone())],
        Some(Value::Array(items)) if items.iter().all(Value::is_string) => items
            .iter()
            .enumerate()
            .map(|(i, v)| (path.index(i), v.as_str().unwrap_or_default().to_string()))
            .collect(),
        Some(_) => {
            errors.push(doc.locate_error(&RuleError::new(
                path,
                "`overrides` is a file name or a list of file names",
            )));
            return Vec::new();
        }
    };
    let mut out = Vec::new();
    for (field, name) in names {
        let resolved = match base_dir {
            Some(dir) => dir.join(&name),
            None => PathBuf::from(&name),
        };
        let origin = resolved.display().to_string();
        // As every input: a regular file within the size limit, UTF-8 errors located, a
        // byte-order mark skipped.
        match crate::input::read_text(&resolved, &origin) {
            Ok(text) => match crate::configurators::OverrideRule::parse(&origin, &text) {
                Ok(rule) => out.push(OverrideFile {
                    path: resolved,
                    text,
                    rule,
                }),
                Err(mut es) => errors.append(&mut es),
            },
            Err(e) if !e.message.starts_with("cannot read") => errors.push(e),
            Err(e) => {
                let reason = e
                    .message
                    .strip_prefix("cannot read: ")
                    .unwrap_or(&e.message);
                errors.push(doc.locate_error(&RuleError::new(
                    field,
                    format!("cannot read override file {origin}: {reason}"),
                )))
            }
        }
    }
    out
}

fn string_field(
    value: Option<&Value>,
    path: &FieldPath,
    err: &mut dyn FnMut(RuleError),
) -> Option<String> {
    match value {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => {
            err(RuleError::new(
                path.clone(),
                format!("`{path}` must be a string"),
            ));
            None
        }
    }
}

/// A value as it appears in a message: cut after 40 characters.
fn bounded_value(v: &Value) -> String {
    let text = v.to_string();
    match text.char_indices().nth(40) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text,
    }
}

/// An I/O error on a whole file, located at 1:1.
pub fn io_error(origin: &str, e: &std::io::Error) -> LocatedError {
    LocatedError {
        origin: origin.to_string(),
        location: Location { line: 1, column: 1 },
        field: None,
        message: format!("cannot read: {e}"),
        source_line: None,
    }
}
