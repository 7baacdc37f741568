//! Dubbo's override rules (`configurators`): parsing and matching, with no I/O.
//!
//! An override rule changes provider parameters as a consumer sees them: Dubbo Admin's
//! weight adjustment (`weight`), taking a provider out of traffic (`disabled: true`), a
//! `timeout` or `loadbalance`... Three forms are read, as Dubbo's `ConfigParser` reads them:
//!
//! - the YAML of `<service key>.configurators` and `<app>.configurators` nodes,
//!   `{configVersion, scope, key, enabled, configs: [{type, enabled, addresses,
//!   providerAddresses, services, applications, parameters, side, match}]}` (v2.7 and v3.0,
//!   including what Dubbo Admin writes, which has no `configVersion`);
//! - a list of `override://` URLs (Dubbo's JSON-array form, and what the legacy
//!   `/dubbo/<interface>/configurators/` children hold).
//!
//! Each item becomes one or more override URLs exactly as `ConfigParser` builds them
//! ([`OverrideRule::entries`]), and [`OverrideEntry::configure`] is
//! `AbstractConfigurator.configure`: the enabled flag, the side, the host, the provider
//! addresses, the application and service, the v3.0 `match` (or the legacy `~key`
//! conditions) decide whether the entry's parameters are merged into a provider URL.
//!
//! It lives in `routechain-rules` because it is rule parsing (located errors over a
//! [`YamlDoc`]) and pure matching over [`Url`]s; which nodes to read and when to apply
//! them is `routechain-live`'s.

use std::net::IpAddr;

use routechain_core::{FieldPath, PathSegment, RuleError, Url};
use serde_json::Value;

use crate::yaml::{LocatedError, YamlDoc};

/// `0.0.0.0`: any host.
pub const ANY_HOST: &str = "0.0.0.0";

/// Keys of an override URL that select, never set (Dubbo's `genConditionKeys`).
pub const CONDITION_KEYS: [&str; 11] = [
    "category",
    "check",
    "dynamic",
    "enabled",
    "group",
    "version",
    "application",
    "side",
    "configVersion",
    "compatible_config",
    "interfaces",
];

/// A parsed override-rule node: its entries, one per override URL Dubbo builds.
#[derive(Debug, Clone, Default)]
pub struct OverrideRule {
    /// The entries, in document order.
    pub entries: Vec<OverrideEntry>,
}

/// One override URL and its v3.0 `match`, if any.
#[derive(Debug, Clone)]
pub struct OverrideEntry {
    /// The override URL (`override://host[:port]/interface?category=...&weight=...`).
    pub url: Url,
    /// The v3.0 `match` condition.
    pub matcher: Option<ConditionMatch>,
}

/// Which side a provider URL is configured for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// As a consumer sees the provider (Dubbo's consumer applies `side: consumer` items).
    Consumer,
    /// As the provider sees itself (`side: provider` items).
    Provider,
}

impl Side {
    fn as_str(self) -> &'static str {
        match self {
            Side::Consumer => "consumer",
            Side::Provider => "provider",
        }
    }
}

/// The point of view an entry is matched from.
#[derive(Debug, Clone, Copy)]
pub struct View<'a> {
    /// The side.
    pub side: Side,
    /// The host matched against the entry's address: the consumer's host on the consumer
    /// side (Dubbo: `NetUtils.getLocalHost()`), the provider's on the provider side.
    pub host: &'a str,
    /// The application compared with the entry's: the consumer's on the consumer side
    /// (the consumer's parameters win when Dubbo merges them into a provider URL), the
    /// provider's on the provider side.
    pub application: Option<&'a str>,
}

impl OverrideRule {
    /// Parses a node's text. `origin` names it in errors. Every problem is reported,
    /// located by line and column and field path.
    pub fn parse(origin: &str, text: &str) -> Result<Self, Vec<LocatedError>> {
        let doc = YamlDoc::parse(origin, text).map_err(|e| vec![e])?;
        Self::from_doc(&doc)
    }

    /// Builds the rule from a parsed document.
    pub fn from_doc(doc: &YamlDoc) -> Result<Self, Vec<LocatedError>> {
        let root = FieldPath::root();
        let mut errors: Vec<RuleError> = Vec::new();
        let mut entries = Vec::new();
        // Built for this reading only, not kept with the document; and without its
        // `configs` items, each built when it is read (a rule of 20,000 items never has
        // them all as values at once: a value takes about 15 times its text).
        let is_item = |p: &FieldPath| matches!(&p.0[..], [PathSegment::Key(k), PathSegment::Index(_)] if k == "configs");
        let value = doc.value_eliding(&is_item, Value::Array(Vec::new()));
        let item_at = |i: usize| doc.value_at(&root.key("configs").index(i));
        match &value {
            // Dubbo's compatible form: a list of override URLs.
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    match item.as_str() {
                        Some(u) => match legacy_entry(u) {
                            Ok(e) => entries.push(e),
                            Err(m) => errors.push(RuleError::new(root.index(i), m)),
                        },
                        None => errors.push(RuleError::new(
                            root.index(i),
                            "a list of override rules holds `override://` URL strings",
                        )),
                    }
                }
            }
            Value::Object(map) => parse_config(map, &item_at, &mut entries, &mut errors),
            Value::Null => errors.push(RuleError::new(root, "the override rule is empty")),
            _ => errors.push(RuleError::new(
                root,
                "an override rule is a mapping with `configs`, or a list of `override://` URLs",
            )),
        }
        if errors.is_empty() {
            Ok(OverrideRule { entries })
        } else {
            Err(errors.iter().map(|e| doc.locate_error(e)).collect())
        }
    }

    /// Parses legacy `override://` URLs (the children of `/dubbo/<interface>/configurators`,
    /// decoded); a URL that is not an override URL is an error naming it.
    pub fn from_urls<'a>(urls: impl IntoIterator<Item = &'a str>) -> Result<Self, String> {
        let mut entries = Vec::new();
        for u in urls {
            entries.push(legacy_entry(u).map_err(|e| format!("{u:?}: {e}"))?);
        }
        Ok(OverrideRule { entries })
    }
}

fn legacy_entry(text: &str) -> Result<OverrideEntry, String> {
    let url = Url::parse_as_written(text)
        .map_err(|e| format!("invalid URL at column {}: {}", e.column, e.reason))?;
    if url.protocol() != "override" && url.protocol() != "absent" {
        return Err(format!(
            "an override rule URL starts with `override://`, not `{}://`",
            url.protocol()
        ));
    }
    Ok(OverrideEntry { url, matcher: None })
}

fn string_list(
    v: Option<&Value>,
    path: FieldPath,
    errors: &mut Vec<RuleError>,
) -> Option<Vec<String>> {
    match v {
        None | Some(Value::Null) => None,
        Some(Value::Array(a)) => Some(a.iter().map(scalar).collect()),
        Some(_) => {
            errors.push(RuleError::new(path, "must be a list of strings"));
            None
        }
    }
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Reads an override rule's mapping; `item_at(i)` builds `configs[i]` (the mapping holds
/// a placeholder for each item that is not a scalar).
fn parse_config(
    map: &serde_json::Map<String, Value>,
    item_at: &dyn Fn(usize) -> Option<Value>,
    entries: &mut Vec<OverrideEntry>,
    errors: &mut Vec<RuleError>,
) {
    let root = FieldPath::root();
    let config_version = map.get("configVersion").map(scalar).unwrap_or_default();
    let scope = map.get("scope").map(scalar).unwrap_or_default();
    if !matches!(scope.as_str(), "" | "service" | "application") {
        errors.push(RuleError::new(
            root.key("scope"),
            routechain_core::unknown_name("scope", &scope, ["service", "application"]),
        ));
    }
    let key = match map.get("key") {
        Some(Value::String(k)) if !k.trim().is_empty() => k.clone(),
        _ => {
            errors.push(RuleError::new(
                root.key("key"),
                "missing `key`: the service (`interface`, `group/interface:version`) or application",
            ));
            String::new()
        }
    };
    let enabled = match map.get("enabled") {
        None | Some(Value::Null) => true,
        Some(Value::Bool(b)) => *b,
        Some(_) => {
            errors.push(RuleError::new(root.key("enabled"), "must be true or false"));
            true
        }
    };
    let Some(Value::Array(configs)) = map.get("configs") else {
        errors.push(RuleError::new(
            root.key("configs"),
            "missing `configs`: a list of override items",
        ));
        return;
    };
    for (i, item) in configs.iter().enumerate() {
        let path = root.key("configs").index(i);
        let built = matches!(item, Value::Object(_) | Value::Array(_))
            .then(|| item_at(i))
            .flatten();
        let Some(item) = built.as_ref().unwrap_or(item).as_object() else {
            errors.push(RuleError::new(path, "an override item is a mapping"));
            continue;
        };
        let before = errors.len();
        let typ = item.get("type").map(scalar);
        let item_enabled = match item.get("enabled") {
            None | Some(Value::Null) => false, // ConfigItem's boolean field defaults to false
            Some(Value::Bool(b)) => *b,
            Some(v) => scalar(v) == "true",
        };
        let addresses = string_list(item.get("addresses"), path.key("addresses"), errors)
            .filter(|a| !a.is_empty())
            .unwrap_or_else(|| vec![ANY_HOST.to_string()]);
        let provider_addresses = string_list(
            item.get("providerAddresses"),
            path.key("providerAddresses"),
            errors,
        );
        let services = string_list(item.get("services"), path.key("services"), errors);
        let applications = string_list(item.get("applications"), path.key("applications"), errors);
        let side = item.get("side").map(scalar);
        if let Some(s) = &side
            && s != "consumer"
            && s != "provider"
        {
            errors.push(RuleError::new(
                path.key("side"),
                format!("unknown side {s:?}: `consumer` or `provider`"),
            ));
        }
        let parameters: Vec<(String, String)> = match item.get("parameters") {
            Some(Value::Object(p)) if !p.is_empty() => {
                p.iter().map(|(k, v)| (k.clone(), scalar(v))).collect()
            }
            _ => {
                errors.push(RuleError::new(
                    path.key("parameters"),
                    "an override item needs at least one parameter to change (`parameters`)",
                ));
                Vec::new()
            }
        };
        for (k, v) in &parameters {
            if k.contains(['&', '=', '?']) || v.contains('&') {
                errors.push(RuleError::new(
                    path.key("parameters").key(k.clone()),
                    "a parameter key or value cannot hold `&` (nor a key `=` or `?`)",
                ));
            }
        }
        let matcher = match item.get("match") {
            None | Some(Value::Null) => None,
            Some(m) => match ConditionMatch::parse(m, &path.key("match")) {
                Ok(m) => Some(m),
                Err(mut es) => {
                    errors.append(&mut es);
                    None
                }
            },
        };
        if errors.len() > before || key.is_empty() {
            continue;
        }
        // ConfigParser.toParameterString
        let mut params = String::from("category=dynamicconfigurators");
        if let Some(s) = &side {
            params.push_str(&format!("&side={s}"));
        }
        for (k, v) in &parameters {
            params.push_str(&format!("&{k}={v}"));
        }
        match &provider_addresses {
            Some(p) if !p.is_empty() => {
                params.push_str(&format!("&providerAddresses={}", p.join(",")))
            }
            _ if side.as_deref() == Some("provider") => {
                params.push_str(&format!("&providerAddresses={}", addresses.join(",")))
            }
            _ => {}
        }
        let item_enabled = match typ.as_deref() {
            None | Some("general") => enabled,
            Some(_) => item_enabled,
        };
        let version = if config_version.is_empty() {
            "null" // what Dubbo appends when the rule has none (Dubbo Admin's rules)
        } else {
            config_version.as_str()
        };
        let mut texts = Vec::new();
        for addr in &addresses {
            if scope == "application" {
                let services = services
                    .clone()
                    .filter(|s| !s.is_empty())
                    .unwrap_or_else(|| vec!["*".into()]);
                for s in services {
                    texts.push(format!(
                        "override://{addr}/{}{params}&application={key}&enabled={item_enabled}\
                         &category=appdynamicconfigurators&configVersion={version}",
                        service_part(&s)
                    ));
                }
            } else {
                let base = format!(
                    "override://{addr}/{}{params}&enabled={item_enabled}&configVersion={version}",
                    service_part(&key)
                );
                match applications.as_ref().filter(|a| !a.is_empty()) {
                    Some(apps) => {
                        texts.extend(apps.iter().map(|a| format!("{base}&application={a}")))
                    }
                    None => texts.push(base),
                }
            }
        }
        for text in texts {
            match Url::parse_as_written(&text) {
                Ok(url) => entries.push(OverrideEntry {
                    url,
                    matcher: matcher.clone(),
                }),
                Err(e) => errors.push(RuleError::new(
                    path.clone(),
                    format!(
                        "the item makes an invalid override URL {text:?}: {}",
                        e.reason
                    ),
                )),
            }
        }
    }
}

/// `ConfigParser.appendService`: `group/interface:version` → `interface?group=..&version=..&`.
fn service_part(service: &str) -> String {
    let mut out = String::new();
    let mut interface = service;
    if let Some(i) = interface.find('/').filter(|i| *i > 0) {
        out.push_str(&format!("group={}&", &interface[..i]));
        interface = &interface[i + 1..];
    }
    if let Some(j) = interface.find(':').filter(|j| *j > 0) {
        out.push_str(&format!("version={}&", &interface[j + 1..]));
        interface = &interface[..j];
    }
    format!("{interface}?{out}")
}

/// A provider's service key as Dubbo writes it: `group/interface:version`.
fn service_key(url: &Url) -> String {
    let interface = url
        .param("interface")
        .filter(|i| !i.is_empty())
        .unwrap_or_else(|| url.path());
    let mut key = String::new();
    if let Some(g) = url.param("group").filter(|g| !g.is_empty()) {
        key.push_str(g);
        key.push('/');
    }
    key.push_str(interface);
    if let Some(v) = url.param("version").filter(|v| !v.is_empty()) {
        key.push(':');
        key.push_str(v);
    }
    key
}

/// Whether the override URL's service (`interface`, with `group` and `version` when it
/// names them) is the provider's. Dubbo compares whole service keys against the provider URL
/// as merged with the consumer's reference; routechain compares with the provider's own, and
/// a rule that names no group (version) applies to every group (version) of the interface,
/// so that a rule Dubbo Admin keys by the bare interface reaches the providers of a
/// `group: "*"` reference.
fn service_matches(cu: &Url, url: &Url) -> bool {
    let interface = cu
        .param("interface")
        .filter(|i| !i.is_empty())
        .unwrap_or_else(|| cu.path());
    if interface == "*" {
        return true;
    }
    let provider_interface = url
        .param("interface")
        .filter(|i| !i.is_empty())
        .or(Some(url.path()).filter(|p| !p.is_empty()))
        .or_else(|| url.param("service"));
    let wanted = |k: &str| cu.param(k).filter(|v| !v.is_empty() && *v != "*");
    provider_interface.is_none_or(|i| i == interface)
        && wanted("group").is_none_or(|g| url.param("group") == Some(g))
        && wanted("version").is_none_or(|v| url.param("version") == Some(v))
}

impl OverrideEntry {
    /// The parameters this entry merges into `provider` seen from `view`, or `None` when
    /// it does not apply (`AbstractConfigurator.configure`).
    pub fn configure(&self, provider: &Url, view: View<'_>) -> Option<Vec<(String, String)>> {
        let cu = &self.url;
        if cu.param("enabled") == Some("false") || cu.host().is_empty() {
            return None;
        }
        match cu.param("configVersion").filter(|v| !v.is_empty()) {
            Some(_) => {
                if cu.param("side") != Some(view.side.as_str()) {
                    return None;
                }
                self.configure_if_match(view.host, provider, view)
            }
            // Before 2.7: a port names a provider; no port, a consumer host or 0.0.0.0.
            None if cu.port() != 0 => (provider.port() == cu.port())
                .then(|| self.configure_if_match(provider.host(), provider, view))
                .flatten(),
            None => match view.side {
                Side::Consumer => self.configure_if_match(view.host, provider, view),
                Side::Provider => self.configure_if_match(ANY_HOST, provider, view),
            },
        }
    }

    fn configure_if_match(
        &self,
        host: &str,
        url: &Url,
        view: View<'_>,
    ) -> Option<Vec<(String, String)>> {
        let cu = &self.url;
        if cu.host() != ANY_HOST && cu.host() != host {
            return None;
        }
        // isV27ConditionMatchOrUnset
        if let Some(providers) = cu.param("providerAddresses").filter(|p| !p.is_empty()) {
            let any_port = format!("{ANY_HOST}:{}", url.port());
            let hit = providers.split(',').any(|a| {
                a == url.address()
                    || a == ANY_HOST
                    || a == "0.0.0.0:*"
                    || a == any_port
                    || a == url.host()
            });
            if !hit {
                return None;
            }
        }
        let config_app = cu.param("application").or(cu.username());
        if let Some(app) = config_app
            && app != "*"
            && Some(app) != view.application
        {
            return None;
        }
        if !service_matches(cu, url) {
            return None;
        }
        let version = cu.param("configVersion").unwrap_or("");
        if version.starts_with("v3.0") {
            if let Some(m) = &self.matcher
                && !m.is_match(host, url, view)
            {
                return None;
            }
        } else {
            // isDeprecatedConditionMatch: `application`, `side` and `~key` must equal.
            for (k, v) in cu.params() {
                let tilde = k.strip_prefix('~');
                if tilde.is_none() && k != "application" && k != "side" {
                    continue;
                }
                let current = match (tilde, k) {
                    (Some(t), _) => url.param(t),
                    (None, "application") => view.application,
                    _ => Some(view.side.as_str()),
                };
                if v != "*" && Some(v) != current {
                    return None;
                }
            }
        }
        Some(
            cu.params()
                .filter(|(k, _)| !CONDITION_KEYS.contains(k) && !k.starts_with('~'))
                .filter(|(k, _)| *k != "providerAddresses")
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    /// Dubbo's `Configurator.compareTo` order: by host text (`0.0.0.0` before specific
    /// hosts, so those apply last and win), then by `priority`.
    pub fn order_key(&self) -> (String, i64) {
        (
            self.url.host().to_string(),
            self.url
                .param("priority")
                .and_then(|p| p.parse().ok())
                .unwrap_or(0),
        )
    }
}

/// A v3.0 `match`: every given part must match.
#[derive(Debug, Clone, Default)]
pub struct ConditionMatch {
    address: Option<AddressMatch>,
    provider_address: Option<AddressMatch>,
    service: Option<Vec<StringMatch>>,
    app: Option<Vec<StringMatch>>,
    param: Vec<(String, StringMatch)>,
}

impl ConditionMatch {
    fn parse(v: &Value, path: &FieldPath) -> Result<Self, Vec<RuleError>> {
        let mut errors = Vec::new();
        let Some(map) = v.as_object() else {
            return Err(vec![RuleError::new(path.clone(), "`match` is a mapping")]);
        };
        let mut m = ConditionMatch::default();
        for (k, v) in map {
            let p = path.key(k.clone());
            match k.as_str() {
                "address" => m.address = AddressMatch::parse(v, &p, &mut errors),
                "providerAddress" => m.provider_address = AddressMatch::parse(v, &p, &mut errors),
                "service" | "app" => {
                    let list = v.get("oneof").and_then(Value::as_array).map(|l| {
                        l.iter()
                            .enumerate()
                            .filter_map(|(i, s)| {
                                StringMatch::parse(s, &p.key("oneof").index(i), &mut errors)
                            })
                            .collect::<Vec<_>>()
                    });
                    if list.is_none() {
                        errors.push(RuleError::new(
                            p.clone(),
                            "expected `oneof: [string matches]`",
                        ));
                    }
                    if k == "service" {
                        m.service = list;
                    } else {
                        m.app = list;
                    }
                }
                "param" => match v.as_array() {
                    Some(items) => {
                        for (i, item) in items.iter().enumerate() {
                            let ip = p.index(i);
                            let key = item.get("key").and_then(Value::as_str);
                            let value = item
                                .get("value")
                                .and_then(|s| StringMatch::parse(s, &ip.key("value"), &mut errors));
                            match (key, value) {
                                (Some(k), Some(s)) => m.param.push((k.to_string(), s)),
                                _ => errors.push(RuleError::new(
                                    ip,
                                    "a param match needs `key` and `value`",
                                )),
                            }
                        }
                    }
                    None => errors.push(RuleError::new(p, "`param` is a list of {key, value}")),
                },
                other => errors.push(RuleError::new(
                    p,
                    routechain_core::unknown_name(
                        "match field",
                        other,
                        ["address", "providerAddress", "service", "app", "param"],
                    ),
                )),
            }
        }
        if errors.is_empty() {
            Ok(m)
        } else {
            Err(errors)
        }
    }

    fn is_match(&self, host: &str, url: &Url, view: View<'_>) -> bool {
        let one_of = |l: &Option<Vec<StringMatch>>, input: Option<&str>| {
            l.as_ref()
                .is_none_or(|l| l.iter().any(|s| s.is_match(input)))
        };
        self.address.as_ref().is_none_or(|a| a.is_match(host))
            && self
                .provider_address
                .as_ref()
                .is_none_or(|a| a.is_match(url.address()))
            && one_of(&self.service, Some(&service_key(url)))
            && one_of(&self.app, view.application)
            && self.param.iter().all(|(k, s)| s.is_match(url.param(k)))
    }
}

/// Dubbo's `StringMatch`: the first given of exact, prefix, regex, wildcard, empty, noempty.
#[derive(Debug, Clone)]
enum StringMatch {
    Exact(String),
    Prefix(String),
    Regex(regex::Regex),
    Wildcard(String),
    Empty,
    NoEmpty,
}

impl StringMatch {
    fn parse(v: &Value, path: &FieldPath, errors: &mut Vec<RuleError>) -> Option<Self> {
        let get = |k: &str| v.get(k).map(scalar);
        if let Some(s) = get("exact") {
            Some(StringMatch::Exact(s))
        } else if let Some(s) = get("prefix") {
            Some(StringMatch::Prefix(s))
        } else if let Some(s) = get("regex") {
            // Java's `String.matches`: the whole input.
            match regex::Regex::new(&format!("^(?:{s})$")) {
                Ok(r) => Some(StringMatch::Regex(r)),
                Err(e) => {
                    errors.push(RuleError::new(
                        path.key("regex"),
                        format!("invalid regex: {e}"),
                    ));
                    None
                }
            }
        } else if let Some(s) = get("wildcard") {
            Some(StringMatch::Wildcard(s))
        } else if v.get("empty").is_some() {
            Some(StringMatch::Empty)
        } else if v.get("noempty").is_some() {
            Some(StringMatch::NoEmpty)
        } else {
            errors.push(RuleError::new(
                path.clone(),
                "a string match needs one of `exact`, `prefix`, `regex`, `wildcard`, `empty`, `noempty`",
            ));
            None
        }
    }

    fn is_match(&self, input: Option<&str>) -> bool {
        match (self, input) {
            (StringMatch::Exact(e), Some(i)) => i == e,
            (StringMatch::Prefix(p), Some(i)) => i.starts_with(p.as_str()),
            (StringMatch::Regex(r), Some(i)) => r.is_match(i),
            (StringMatch::Wildcard(w), Some(i)) => i == w || w == "*",
            (StringMatch::Empty, i) => i.is_none_or(str::is_empty),
            (StringMatch::NoEmpty, i) => i.is_some_and(|i| !i.is_empty()),
            _ => false,
        }
    }
}

/// Dubbo's `AddressMatch`: `cird` (sic; a CIDR block or an equal address), `wildcard`
/// (`*`, `0.0.0.0` or a glob with one `*`), `exact`.
#[derive(Debug, Clone, Default)]
struct AddressMatch {
    cird: Option<String>,
    wildcard: Option<String>,
    exact: Option<String>,
}

impl AddressMatch {
    fn parse(v: &Value, path: &FieldPath, errors: &mut Vec<RuleError>) -> Option<Self> {
        let m = AddressMatch {
            cird: v.get("cird").map(scalar),
            wildcard: v.get("wildcard").map(scalar),
            exact: v.get("exact").map(scalar),
        };
        if m.cird.is_none() && m.wildcard.is_none() && m.exact.is_none() {
            errors.push(RuleError::new(
                path.clone(),
                "an address match needs one of `cird`, `wildcard`, `exact`",
            ));
            return None;
        }
        Some(m)
    }

    fn is_match(&self, input: &str) -> bool {
        if let Some(c) = &self.cird
            && (input == c || cidr_contains(c, input))
        {
            return true;
        }
        if let Some(w) = &self.wildcard {
            return w == ANY_HOST || w == "*" || glob(w, input);
        }
        if let Some(e) = &self.exact {
            return input == e;
        }
        false
    }
}

/// Dubbo's `UrlUtils.isMatchGlobPattern` for one `*`.
fn glob(pattern: &str, value: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == value,
        Some((pre, post)) => {
            value.len() >= pre.len() + post.len() && value.starts_with(pre) && value.ends_with(post)
        }
    }
}

/// Whether `input` (an IP, or `ip:port`) is inside the CIDR block `cidr`.
fn cidr_contains(cidr: &str, input: &str) -> bool {
    let host = input
        .rsplit_once(':')
        .filter(|(h, _)| !h.contains(':'))
        .map_or(input, |(h, _)| h);
    let (Some((net, bits)), Ok(ip)) = (cidr.split_once('/'), host.parse::<IpAddr>()) else {
        return false;
    };
    let (Ok(net), Ok(bits)) = (net.parse::<IpAddr>(), bits.parse::<u32>()) else {
        return false;
    };
    match (net, ip) {
        (IpAddr::V4(n), IpAddr::V4(i)) if bits <= 32 => {
            let mask = u32::MAX.checked_shl(32 - bits).unwrap_or(0);
            u32::from(n) & mask == u32::from(i) & mask
        }
        (IpAddr::V6(n), IpAddr::V6(i)) if bits <= 128 => {
            let mask = u128::MAX.checked_shl(128 - bits).unwrap_or(0);
            u128::from(n) & mask == u128::from(i) & mask
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider(q: &str) -> Url {
        Url::parse(&format!("dubbo://10.0.0.1:20880/com.acme.OrderService?{q}")).unwrap()
    }

    const CONSUMER: View<'static> = View {
        side: Side::Consumer,
        host: "10.9.9.9",
        application: Some("web"),
    };
    const PROVIDER: View<'static> = View {
        side: Side::Provider,
        host: "10.0.0.1",
        application: Some("orders"),
    };

    fn apply(rule: &str, p: &Url, view: View<'_>) -> Vec<Vec<(String, String)>> {
        OverrideRule::parse("t", rule)
            .unwrap()
            .entries
            .iter()
            .filter_map(|e| e.configure(p, view))
            .collect()
    }

    #[test]
    fn dubbo_admin_weight_rule_applies_on_the_provider_side_to_its_address_only() {
        let rule = "key: com.acme.OrderService\nconfigs:\n  - type: weight\n    enabled: true\n    \
                    side: provider\n    addresses: ['10.0.0.1:20880']\n    parameters:\n      weight: 300\n";
        let p = provider("application=orders");
        assert!(
            apply(rule, &p, CONSUMER).is_empty(),
            "a consumer ignores side: provider"
        );
        assert_eq!(
            apply(rule, &p, PROVIDER),
            [vec![("weight".into(), "300".into())]]
        );
        let other = Url::parse("dubbo://10.0.0.2:20880/com.acme.OrderService").unwrap();
        let view = View {
            host: "10.0.0.2",
            ..PROVIDER
        };
        assert!(apply(rule, &other, view).is_empty());
        // A rule keyed by the bare interface reaches every group and version of it.
        let grouped = provider("application=orders&group=blue&version=2.1.0");
        assert_eq!(apply(rule, &grouped, PROVIDER).len(), 1);
        // A typed item without `enabled` is off (ConfigItem's default).
        assert!(apply(&rule.replace("    enabled: true\n", ""), &p, PROVIDER).is_empty());
    }

    #[test]
    fn v27_and_v30_items_match_like_dubbo() {
        let p = provider("application=orders&zone=a");
        let table: &[(&str, View<'_>, bool)] = &[
            // consumer side, any address, service scope
            (
                "configVersion: v2.7\nscope: service\nkey: com.acme.OrderService\nconfigs:\n  - side: consumer\n    parameters: {timeout: 9}\n",
                CONSUMER,
                true,
            ),
            // disabled rule
            (
                "configVersion: v2.7\nenabled: false\nkey: com.acme.OrderService\nconfigs:\n  - side: consumer\n    parameters: {timeout: 9}\n",
                CONSUMER,
                false,
            ),
            // another consumer host
            (
                "configVersion: v2.7\nkey: com.acme.OrderService\nconfigs:\n  - side: consumer\n    addresses: [10.1.1.1]\n    parameters: {timeout: 9}\n",
                CONSUMER,
                false,
            ),
            // the consumer's host
            (
                "configVersion: v2.7\nkey: com.acme.OrderService\nconfigs:\n  - side: consumer\n    addresses: [10.9.9.9]\n    parameters: {timeout: 9}\n",
                CONSUMER,
                true,
            ),
            // another service
            (
                "configVersion: v2.7\nkey: com.acme.Other\nconfigs:\n  - side: consumer\n    parameters: {timeout: 9}\n",
                CONSUMER,
                false,
            ),
            // a group, a version the provider does not have
            (
                "configVersion: v2.7\nkey: blue/com.acme.OrderService\nconfigs:\n  - side: consumer\n    parameters: {timeout: 9}\n",
                CONSUMER,
                false,
            ),
            (
                "configVersion: v2.7\nkey: com.acme.OrderService:1.0.0\nconfigs:\n  - side: consumer\n    parameters: {timeout: 9}\n",
                CONSUMER,
                false,
            ),
            // application scope: the consumer's app
            (
                "configVersion: v2.7\nscope: application\nkey: web\nconfigs:\n  - side: consumer\n    parameters: {timeout: 9}\n",
                CONSUMER,
                true,
            ),
            (
                "configVersion: v2.7\nscope: application\nkey: other\nconfigs:\n  - side: consumer\n    parameters: {timeout: 9}\n",
                CONSUMER,
                false,
            ),
            // provider addresses
            (
                "configVersion: v2.7\nkey: com.acme.OrderService\nconfigs:\n  - side: consumer\n    providerAddresses: ['10.0.0.2:20880']\n    parameters: {timeout: 9}\n",
                CONSUMER,
                false,
            ),
            (
                "configVersion: v2.7\nkey: com.acme.OrderService\nconfigs:\n  - side: consumer\n    providerAddresses: ['0.0.0.0:20880']\n    parameters: {timeout: 9}\n",
                CONSUMER,
                true,
            ),
            // v3.0 match on a provider parameter (the Go console's flow weight)
            (
                "configVersion: v3.0\nscope: application\nkey: orders\nconfigs:\n  - side: provider\n    match:\n      param:\n        - key: zone\n          value: {exact: a}\n    parameters: {weight: '5'}\n",
                PROVIDER,
                true,
            ),
            (
                "configVersion: v3.0\nscope: application\nkey: orders\nconfigs:\n  - side: provider\n    match:\n      param:\n        - key: zone\n          value: {exact: b}\n    parameters: {weight: '5'}\n",
                PROVIDER,
                false,
            ),
            (
                "configVersion: v3.0\nkey: com.acme.OrderService\nconfigs:\n  - side: consumer\n    match:\n      providerAddress: {cird: 10.0.0.0/24}\n    parameters: {weight: '5'}\n",
                CONSUMER,
                true,
            ),
            (
                "configVersion: v3.0\nkey: com.acme.OrderService\nconfigs:\n  - side: consumer\n    match:\n      address: {wildcard: '10.9.*'}\n      app: {oneof: [{prefix: we}]}\n    parameters: {weight: '5'}\n",
                CONSUMER,
                true,
            ),
        ];
        for (rule, view, expected) in table {
            assert_eq!(!apply(rule, &p, *view).is_empty(), *expected, "{rule}");
        }
    }

    #[test]
    fn legacy_override_urls_and_the_json_array_form() {
        let p = provider("application=orders");
        let rule = r#"["override://10.0.0.1:20880/com.acme.OrderService?category=configurators&disabled=true", "override://0.0.0.0/com.acme.OrderService?timeout=5&~zone=b"]"#;
        let got = apply(rule, &p, CONSUMER);
        assert_eq!(got, [vec![("disabled".into(), "true".into())]]);
        let r =
            OverrideRule::from_urls(["override://0.0.0.0/com.acme.OrderService?weight=7"]).unwrap();
        assert_eq!(
            r.entries[0].configure(&p, CONSUMER),
            Some(vec![("weight".into(), "7".into())])
        );
        assert!(OverrideRule::from_urls(["dubbo://x/y"]).is_err());
    }

    #[test]
    fn invalid_rules_are_located_errors() {
        for (text, at) in [
            ("key: a\nconfigs:\n  - side: consumer\n", "t:3:5"),
            (
                "key: a\nconfigs:\n  - side: nowhere\n    parameters: {a: 1}\n",
                "t:3:11",
            ),
            ("configs: []\n", "t:1:1"),
            (
                "key: a\nconfigs:\n  - side: consumer\n    parameters: {a: 1}\n    match: {param: [{key: x}]}\n",
                "t:5:21",
            ),
            ("key: a\n", "t:1:1"),
        ] {
            let errors = OverrideRule::parse("t", text).unwrap_err();
            let r = errors[0].render();
            assert!(r.starts_with(at), "{text}: {r}");
        }
    }
}
