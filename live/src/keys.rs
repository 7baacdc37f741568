//! Which config-center keys a chain entry follows: the reference's service key, the
//! consumer's or the providers' application, or a key written on the entry. A `mesh` entry
//! without `app` follows the `<app>.MESHAPPRULE` node of every provider application present
//! (as Dubbo's `MeshRuleManager` does): its rule is the set of those nodes' rules, each
//! governing its own application's providers.

use std::collections::{BTreeSet, HashMap};

use routechain_core::Url;
use routechain_rules::{ChainFile, EntryDef, RuleOverride, RuleSource, YamlDoc};

use crate::RuleKey;
use crate::dubbo::ServiceKey;
use crate::overrides::OverrideContext;

/// What an entry's config-center key may depend on besides the chain file.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct KeyContext<'a> {
    /// The consumer's application (application-scope condition rules).
    pub consumer_app: Option<&'a str>,
    /// The providers' application (tag rules).
    pub provider_app: Option<&'a str>,
    /// Every provider application present (mesh rules without `app`).
    pub provider_apps: Option<&'a BTreeSet<String>>,
}

/// Router types whose application-scope rules are the providers' application's (Dubbo's
/// `TagStateRouter` and mesh rules read `<remote.application>.tag-router` /
/// `.MESHAPPRULE`); the others' are the consumer's.
pub const PROVIDER_APP_TYPES: [&str; 2] = ["tag", RuleKey::MESH];

/// The scope an entry follows: its `scope`, else `application` for tag and mesh entries
/// (Dubbo has no service-scope tag rule), else `service`.
pub(crate) fn entry_scope(def: &EntryDef) -> &str {
    match def.scope.as_deref() {
        Some(s) => s,
        None if PROVIDER_APP_TYPES.contains(&def.type_name.as_str()) => "application",
        None => "service",
    }
}

/// Whether the entry's key is the providers' application (so it follows the providers).
pub(crate) fn follows_provider_app(def: &EntryDef) -> bool {
    matches!(def.rule, RuleSource::None)
        && def.key.is_none()
        && def.application.is_none()
        && entry_scope(def) == "application"
        && PROVIDER_APP_TYPES.contains(&def.type_name.as_str())
}

/// Whether the entry follows the mesh rule of every provider application present (a `mesh`
/// entry without a rule of its own, `app` or `key`).
pub(crate) fn follows_each_provider_app(def: &EntryDef) -> bool {
    def.type_name == RuleKey::MESH && follows_provider_app(def)
}

/// Whether `def` follows the rule node `key`.
pub(crate) fn follows_key(
    file: &ChainFile,
    def: &EntryDef,
    key: &RuleKey,
    cx: KeyContext<'_>,
) -> bool {
    if follows_each_provider_app(def) {
        return key.router_type == RuleKey::MESH
            && cx.provider_apps.is_some_and(|apps| apps.contains(&key.key));
    }
    subscription(file, def, cx).as_ref() == Some(key)
}

/// The rule an entry compiles with: the chain file's, a config-center document, or (for an
/// entry following each provider application's mesh rule) the rules of the applications
/// present, composed as `{applications: {app: documents}}`.
pub(crate) enum EntryRule<'a> {
    /// As the chain file or one config-center node gives it.
    Override(RuleOverride<'a>),
    /// The composed per-application mesh rules.
    Composed(YamlDoc),
}

impl EntryRule<'_> {
    /// The rule to compile the entry with.
    pub(crate) fn get(&self) -> RuleOverride<'_> {
        match self {
            EntryRule::Override(o) => *o,
            EntryRule::Composed(doc) => RuleOverride::Doc(doc),
        }
    }
}

/// The per-application mesh rules of the applications present, composed; cleared when no
/// application present has one.
fn composed_mesh_rule<'a>(
    overrides: &'a HashMap<RuleKey, Option<YamlDoc>>,
    apps: Option<&BTreeSet<String>>,
) -> EntryRule<'a> {
    let mut map = serde_json::Map::new();
    for app in apps.into_iter().flatten() {
        if let Some(Some(doc)) = overrides.get(&RuleKey::new(app.clone(), RuleKey::MESH)) {
            let root = routechain_core::FieldPath::root();
            map.insert(app.clone(), doc.value_at(&root).unwrap_or_default());
        }
    }
    if map.is_empty() {
        return EntryRule::Override(RuleOverride::Cleared);
    }
    let origin = map
        .keys()
        .map(|a| format!("{a}.MESHAPPRULE"))
        .collect::<Vec<_>>()
        .join(", ");
    // The mesh router's per-application form (`mesh::APPLICATIONS_KEY`).
    let value = serde_json::json!({ "applications": map });
    EntryRule::Composed(YamlDoc::from_value(origin, value))
}

pub(crate) fn reference(file: &ChainFile) -> Option<ServiceKey> {
    file.service
        .as_deref()
        .map(|s| ServiceKey::reference(s, file.group.as_deref(), file.version.as_deref()))
}

/// The config-center key an entry follows, if it follows one: entries without a rule of
/// their own (no inline `rule`, no `rule_file`) subscribe to their `key` as written, else
/// to `<application>.<type>-router` when they name an `application`, else by scope: the
/// service key `interface:version:group` (wildcard and list slots empty) for service
/// scope; for application scope the providers' application (tag, mesh) or the consumer's
/// (the others).
pub(crate) fn subscription(
    file: &ChainFile,
    def: &EntryDef,
    cx: KeyContext<'_>,
) -> Option<RuleKey> {
    if !matches!(def.rule, RuleSource::None) {
        return None;
    }
    let key = if let Some(k) = &def.key {
        k.clone()
    } else if let Some(app) = &def.application {
        app.clone()
    } else if entry_scope(def) == "application" {
        let app = if PROVIDER_APP_TYPES.contains(&def.type_name.as_str()) {
            cx.provider_app
        } else {
            cx.consumer_app
        };
        app?.to_string()
    } else {
        reference(file)?.rule_key()
    };
    Some(RuleKey::new(key, def.type_name.clone()))
}

/// The rule `def` compiles with, given the config-center rules read so far.
pub(crate) fn rule_for<'a>(
    file: &ChainFile,
    overrides: &'a HashMap<RuleKey, Option<YamlDoc>>,
    def: &EntryDef,
    cx: KeyContext<'_>,
) -> EntryRule<'a> {
    if follows_each_provider_app(def) {
        return composed_mesh_rule(overrides, cx.provider_apps);
    }
    EntryRule::Override(
        match subscription(file, def, cx).and_then(|k| overrides.get(&k)) {
            Some(Some(doc)) => RuleOverride::Doc(doc),
            Some(None) => RuleOverride::Cleared,
            None => RuleOverride::Own,
        },
    )
}

pub(crate) fn override_context<'a>(
    file: &'a ChainFile,
    consumer: Option<&'a Url>,
) -> OverrideContext<'a> {
    OverrideContext {
        consumer_host: consumer.map_or("", Url::host),
        consumer_app: consumer.and_then(|c| c.param("application")),
        provider_side: file.apply_provider_overrides,
    }
}
