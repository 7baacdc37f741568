//! The mesh router (Dubbo 3's `standard-mesh-rule`): a `DestinationRule` cuts a provider
//! application's providers into named subsets by labels, a `VirtualService` matches each
//! call (service, method, arguments, attachments, consumer labels) and sends it to weighted
//! subsets with fallbacks. Rules are stored per provider application, as the multi-document
//! YAML text of `<app>.MESHAPPRULE`.
//!
//! - `rule`: which documents of a text are this router's and what they compile to;
//! - `read`: Dubbo's value conversions, located, with warnings for what Dubbo ignores;
//! - `matchers`: the compiled matchers;
//! - `prepared`: subsets as provider sets per snapshot, and the per-call route.
//!
//! Semantics and every deliberate difference from Dubbo: `docs/mesh.md`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use routechain_core::{
    Candidates, Evaluation, FieldPath, PrepareContext, RouteContext, RouterSpec, RuleError,
    StickyKey, TypedRouter, Url,
};
use routechain_rules::YamlDoc;
use serde_json::Value;

// The matchers and the reader that builds them: the conformance tests (routechain-tests) run
// Dubbo's match cases against them. Public for those tests, not part of the API.
#[doc(hidden)]
pub mod matchers;
mod prepared;
#[doc(hidden)]
pub mod read;
mod rule;

pub use prepared::PreparedMesh;
pub use rule::{AppRule, Checked, TextOutcome};

/// Dubbo's order for the mesh router (`StandardMeshRuleRouterFactory`): after `mock` (−100),
/// before `tag` (100).
pub const DEFAULT_PRIORITY: i32 = -50;

/// The config-center key suffix of an application's mesh rule: `<app>.MESHAPPRULE`, group
/// `dubbo` (node `/dubbo/config/dubbo/<app>.MESHAPPRULE`).
pub(crate) const RULE_KEY_SUFFIX: &str = ".MESHAPPRULE";

/// Entry fields of a `mesh` entry besides the common ones.
pub(crate) const ENTRY_FIELDS: [&str; 4] = ["app", "empty", "tracing_prefix", "hash_key"];

/// The key of the per-application form of a rule value: `{applications: {app: rule, ...}}`.
pub const APPLICATIONS_KEY: &str = "applications";

/// A provider application name that means "no application" (`MeshRuleConstants.INVALID_APP_NAME`).
pub const INVALID_APP_NAME: &str = "unknown";

/// The chain entry's options.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MeshOptions {
    /// `app`: only providers of this application are governed (default: each provider's
    /// own application).
    pub app: Option<String>,
    /// `empty: fail`: a call the rule covers but selects nothing for fails (default
    /// `protect`: the input passes unchanged, as in Dubbo).
    pub empty_fail: bool,
    /// `tracing_prefix`: `tracingContext` key `k` reads attachment `<prefix>k`.
    pub tracing_prefix: Option<String>,
    /// `hash_key` (routechain's; Dubbo's rule format has no such field): weighted
    /// destinations are drawn by a stable hash of these request values instead of a random
    /// number, so one user always lands in the same subset.
    pub hash_key: Option<StickyKey>,
}

/// Which rule each application has.
#[derive(Debug, Clone, Default)]
pub enum AppRules {
    /// No rule: every call passes unchanged.
    #[default]
    None,
    /// One rule for every application present (a static rule without `app`, or with `app`).
    Every(Arc<AppRule>),
    /// A rule per application (config-center nodes, or `rule: {applications: {...}}`).
    PerApp(BTreeMap<String, Arc<AppRule>>),
}

/// A compiled `mesh` entry: its options and its rules.
#[derive(Debug, Clone, Default)]
pub struct MeshRule {
    /// The entry's options.
    pub options: MeshOptions,
    /// The rules.
    pub rules: AppRules,
    /// The warnings reading the rule produced (accepted; `routechain check` prints them).
    pub warnings: Vec<RuleError>,
}

/// A provider's application: its `remote.application` parameter when present and non-empty,
/// else its `application`; none when empty or `unknown`.
pub fn application_of(provider: &Url) -> Option<&str> {
    let app = provider
        .param("remote.application")
        .filter(|a| !a.is_empty())
        .or_else(|| provider.param("application"))?;
    (!app.is_empty() && app != INVALID_APP_NAME).then_some(app)
}

/// The config-center key of `app`'s mesh rule: `<app>.MESHAPPRULE` (group `dubbo`).
pub fn rule_key(app: &str) -> String {
    format!("{app}{RULE_KEY_SUFFIX}")
}

/// The applications whose rule Dubbo follows over `providers`: the entry's `app` alone (from
/// the start, whether or not it has providers), else every application present. (The live
/// crate follows the same: `app`'s node, else each application's from its first provider to
/// its last.)
pub fn watched_applications<'p>(
    providers: impl IntoIterator<Item = &'p Url>,
    options: &MeshOptions,
) -> BTreeSet<String> {
    match &options.app {
        Some(app) => BTreeSet::from([app.clone()]),
        None => providers
            .into_iter()
            .filter_map(application_of)
            .map(str::to_string)
            .collect(),
    }
}

/// The interface of a service key: `group/interface:version` and `interface:version:group`
/// both reduce to `interface` (Dubbo matches `services` against the interface only).
pub(crate) fn interface_of(service: &str) -> &str {
    let s = service.split_once('/').map_or(service, |(_, rest)| rest);
    s.split_once(':').map_or(s, |(i, _)| i)
}

/// Reads the entry's options (`app`, `empty`, `tracing_prefix`).
pub(crate) fn read_options(
    entry: &Value,
    path: &FieldPath,
    errors: &mut Vec<RuleError>,
) -> MeshOptions {
    let mut o = MeshOptions::default();
    // A key whose value is null is absent; an entry that is no mapping has none.
    let field = |k: &str| entry.get(k).filter(|v| !v.is_null());
    let string = |k: &str, errors: &mut Vec<RuleError>| match field(k)? {
        Value::String(s) => Some(s.clone()),
        _ => {
            errors.push(RuleError::new(
                path.key(k),
                format!("`{k}` must be a string"),
            ));
            None
        }
    };
    o.app = string("app", errors);
    if o.app.as_deref() == Some("") {
        errors.push(RuleError::new(path.key("app"), "`app` must not be empty"));
    }
    o.tracing_prefix = string("tracing_prefix", errors);
    o.hash_key = field("hash_key").and_then(|v| {
        let key = StickyKey::from_value(v, &path.key("hash_key"));
        key.map_err(|es| errors.extend(es)).ok()
    });
    match string("empty", errors).as_deref() {
        None | Some("protect") => {}
        Some("fail") => o.empty_fail = true,
        Some(other) => errors.push(RuleError::new(
            path.key("empty"),
            format!("`empty` is `protect` or `fail`, not {other:?}"),
        )),
    }
    if field("application").is_some() {
        errors.push(RuleError::new(
            path.key("application"),
            "a mesh entry names its provider application with `app` (each provider's own application by default)",
        ));
    }
    o
}

/// Reads one node text (already parsed as a YAML stream) into its outcome for an
/// application: what a config-center update does (apply, clear, or refuse with errors).
pub fn read_text(doc: &YamlDoc, tracing_prefix: Option<&str>) -> Checked<TextOutcome> {
    let root = FieldPath::root();
    // Built for this reading only, not kept with the document.
    let value = doc.value_at(&root).unwrap_or(Value::Null);
    rule::read_documents(&value, &root, tracing_prefix, &|_| None)
}

/// Why a rule written in a chain or rule file without a standard document is refused.
const NO_STANDARD_DOCUMENT: &str = "no standard mesh document (a DestinationRule and a VirtualService whose metadata.name has no '.')";

/// True for the path (from the rule) of a route detail of a standard document, in a rule
/// that is one document or a list of documents: what the reader builds one at a time.
fn is_route_detail(path: &FieldPath) -> bool {
    use routechain_core::PathSegment::{Index, Key};
    let in_document = match &path.0[..] {
        [Index(_), rest @ ..] => rest,
        all => all,
    };
    matches!(in_document, [Key(s), Key(d), Index(_), Key(r), Index(_)]
        if s == "spec" && d == "dubbo" && r == "routedetail")
}

/// Compiles a `mesh` entry: its options and rule, every error and warning located by field
/// path. What `routechain check` shows for a mesh entry.
pub fn check(spec: &RouterSpec<'_>) -> Checked<MeshRule> {
    let mut errors = Vec::new();
    let mut warnings = Vec::new();
    let options = read_options(&spec.entry.value(), spec.entry.path, &mut errors);
    // The rule as a value with each route detail a placeholder, built when it is read: the
    // reader walks values, and a value takes about 25 times the text of a rule of many
    // small mappings.
    let placeholder = Value::Array(Vec::new());
    let rule_value = spec
        .rule
        .map(|doc| doc.value_eliding(&is_route_detail, &placeholder));
    let fetch = |at: &FieldPath| {
        let doc = spec.rule?;
        let relative = at.0.strip_prefix(&doc.path.0[..])?;
        doc.tree_value_at(&FieldPath(relative.to_vec()))
    };
    // A config-center node's text (the entry names no `rule` or `rule_file` of its own) may
    // clear its application's rule, as Dubbo's may; a rule of the entry's own may not.
    let clearable = spec
        .entry
        .value()
        .as_object()
        .is_some_and(|m| !m.contains_key("rule") && !m.contains_key("rule_file"));
    let mut read = |value: &Value, path: &FieldPath, errors: &mut Vec<RuleError>| {
        let prefix = options.tracing_prefix.as_deref();
        let checked = rule::read_documents(value, path, prefix, &fetch);
        warnings.extend(checked.warnings);
        match checked.result {
            Ok(TextOutcome::Apply(r)) => return Some(Arc::new(r)),
            Ok(TextOutcome::Clear) if clearable => {}
            Ok(TextOutcome::Clear) => {
                errors.push(RuleError::new(path.clone(), NO_STANDARD_DOCUMENT))
            }
            Err(mut es) => errors.append(&mut es),
        }
        None
    };
    let rules = match spec.rule.zip(rule_value.as_deref()) {
        None => AppRules::None,
        // The rules of several applications (a live chain composes their config-center nodes).
        Some((doc, Value::Object(map)))
            if map.contains_key(APPLICATIONS_KEY) && !map.contains_key("kind") =>
        {
            let ap = doc.path.key(APPLICATIONS_KEY);
            let apps = map[APPLICATIONS_KEY].as_object();
            if apps.is_none() {
                let message = "`applications` maps each provider application to its rule";
                errors.push(RuleError::new(ap.clone(), message));
            }
            let per_app = apps.into_iter().flatten().filter_map(|(app, value)| {
                let rule = read(value, &ap.key(app.clone()), &mut errors)?;
                Some((app.clone(), rule))
            });
            AppRules::PerApp(per_app.collect())
        }
        // One rule for every application.
        Some((doc, value)) => {
            let rule = read(value, doc.path, &mut errors);
            rule.map_or(AppRules::None, AppRules::Every)
        }
    };
    let result = if errors.is_empty() {
        Ok(MeshRule {
            options,
            rules,
            warnings: warnings.clone(),
        })
    } else {
        Err(errors)
    };
    Checked { result, warnings }
}

/// The `mesh` router type. Its rule comes in several forms (a multi-document text, a list
/// of documents, one document, or `{applications: {app: rule}}`) and depends on the entry's
/// own fields, so it is read from the whole entry ([`check`]) rather than deserialized. An
/// entry without a rule has no rule for any application: every call passes unchanged.
#[derive(Debug, Clone, Copy, Default)]
pub struct MeshRouter;

/// [`check`], with the warnings logged.
fn compile_logged(spec: &RouterSpec<'_>) -> Result<MeshRule, Vec<RuleError>> {
    let checked = check(spec);
    for w in &checked.warnings {
        tracing::warn!(field = %w.path, "mesh rule: {}", w.message);
    }
    checked.result
}

impl TypedRouter for MeshRouter {
    type Raw = serde::de::IgnoredAny;
    type Rule = MeshRule;
    type Prepared = PreparedMesh;

    /// Compiled alike for every service: services of one chain configuration share it.
    fn reads_service(&self) -> bool {
        false
    }

    fn default_priority(&self, _rule: Option<&MeshRule>) -> i32 {
        DEFAULT_PRIORITY
    }

    fn extra_fields(&self) -> &'static [&'static str] {
        &ENTRY_FIELDS
    }

    fn compile(
        &self,
        _raw: serde::de::IgnoredAny,
        spec: &RouterSpec<'_>,
    ) -> Result<MeshRule, Vec<RuleError>> {
        compile_logged(spec)
    }

    fn without_rule(&self, spec: &RouterSpec<'_>) -> Result<Option<MeshRule>, Vec<RuleError>> {
        compile_logged(spec).map(Some)
    }

    fn prepare(rule: &Arc<MeshRule>, cx: &PrepareContext<'_>) -> Result<PreparedMesh, String> {
        Ok(PreparedMesh::build(rule, cx.snapshot, cx.service))
    }

    fn route(
        prepared: &PreparedMesh,
        cx: &mut RouteContext<'_>,
        candidates: &mut Candidates,
    ) -> Evaluation {
        prepared.route(cx, candidates)
    }
}

#[cfg(test)]
mod examples_tests;
#[cfg(test)]
mod oracle_tests;
#[cfg(test)]
mod sticky_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod zero_alloc_tests;
