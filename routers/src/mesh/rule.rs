//! The compiled mesh rule of one application, and how a node text's documents become one
//! (spec §3–§5): which documents are this router's (`metadata.name` without a `.`), the
//! `DestinationRule`s' subsets, the `VirtualService`s' routes, details and weighted
//! destinations with their flattened fallback chains.

use routechain_core::{FieldPath, RuleError};
use serde_json::Value;

use super::matchers::{MatchRequest, StringMatch};
use routechain_rules::YamlDoc;

use super::read::{Fields, Reader, kind_of};

/// A named subset of an application's providers: a provider is a member when every label of
/// one of its label sets equals the provider's parameter (subsets of the same name in several
/// `DestinationRule`s are one subset, the union).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subset {
    /// The name (`None`: the nameless subset, which a destination without `subset` names).
    pub name: Option<String>,
    /// Each definition's labels (an empty set: every provider of the application).
    pub label_sets: Vec<Vec<(String, String)>>,
}

/// A subset named by a destination or a fallback.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubsetRef {
    /// The name as written (`None`: no `subset` key).
    pub name: Option<String>,
    /// Index into [`AppRule::subsets`]; `None` when no `DestinationRule` defines it (never
    /// usable).
    pub id: Option<usize>,
}

/// One `route` entry: a weight and its destination's fallback chain, flattened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    /// The weight (absent = 1; negative read as 1; 0 = never chosen).
    pub weight: u32,
    /// The destination's subset, then each fallback's, in order.
    pub chain: Vec<SubsetRef>,
}

/// A detail's weighted destinations, with the draw precomputed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destinations {
    /// Every destination, in rule order.
    pub list: Vec<Destination>,
    /// Indexes of the destinations with a weight above 0, in order.
    pub eligible: Vec<usize>,
    /// Running sums of the eligible weights.
    pub cumulative: Vec<u64>,
}

impl Destinations {
    fn new(list: Vec<Destination>) -> Self {
        let eligible: Vec<usize> = (0..list.len()).filter(|&i| list[i].weight > 0).collect();
        let cumulative = eligible
            .iter()
            .scan(0u64, |sum, &i| {
                *sum += u64::from(list[i].weight);
                Some(*sum)
            })
            .collect();
        Destinations {
            list,
            eligible,
            cumulative,
        }
    }

    /// The sum of the eligible weights.
    pub fn total(&self) -> u64 {
        self.cumulative.last().copied().unwrap_or(0)
    }
}

/// A `routedetail` entry.
#[derive(Debug, Clone)]
pub struct RouteDetail {
    /// `name` (informational).
    pub name: Option<String>,
    /// `match`: every entry must hold (empty: every call).
    pub matches: Vec<MatchRequest>,
    /// `route` (`None`: the detail selects nothing).
    pub route: Option<Destinations>,
}

/// A `spec.dubbo` entry.
#[derive(Debug, Clone)]
pub struct DubboRoute {
    /// `name` (informational).
    pub name: Option<String>,
    /// `services`: any of them matches the interface name (empty: every service).
    pub services: Vec<StringMatch>,
    /// `routedetail`, in order.
    pub details: Vec<RouteDetail>,
}

/// A `VirtualService` document.
#[derive(Debug, Clone)]
pub struct VirtualService {
    /// `metadata.name`.
    pub name: String,
    /// `spec.dubbo`, in order.
    pub routes: Vec<DubboRoute>,
}

/// One application's rule: its standard documents compiled.
#[derive(Debug, Clone, Default)]
pub struct AppRule {
    /// The `DestinationRule` names, in document order.
    pub destination_rules: Vec<String>,
    /// The `VirtualService`s, in document order.
    pub virtual_services: Vec<VirtualService>,
    /// Every subset the `DestinationRule`s define, merged by name.
    pub subsets: Vec<Subset>,
}

/// What a node text does to its application's rule (spec §3.3).
#[derive(Debug, Clone)]
pub enum TextOutcome {
    /// The standard documents replace the rule.
    Apply(AppRule),
    /// No standard document: the application has no rule.
    Clear,
}

/// A read that may be refused, with its warnings either way.
#[derive(Debug)]
pub struct Checked<T> {
    /// The result, or every error (the update is refused).
    pub result: Result<T, Vec<RuleError>>,
    /// Every warning.
    pub warnings: Vec<RuleError>,
}

/// Builds a part of a document that was read as a placeholder (see [`read_documents`]):
/// the value at an absolute field path, `None` when the value read is the part itself.
pub type Fetch<'f> = &'f dyn Fn(&FieldPath) -> Option<Value>;

/// Reads one rule value into an application's rule. Its documents: a list of documents, one
/// document (a mapping), or the multi-document text itself (an error locates a YAML problem
/// in it); the documents of a list are borrowed, not copied (a large rule's value is held
/// once). Their route details (`spec.dubbo[i].routedetail[j]`, when not scalars) may be
/// placeholders: `fetch` builds each when it is read, so a rule of 10,000 details never
/// holds them all as values at once.
pub fn read_documents(
    value: &Value,
    path: &FieldPath,
    tracing_prefix: Option<&str>,
    fetch: Fetch<'_>,
) -> Checked<TextOutcome> {
    let mut r = Reader::new(tracing_prefix.map(str::to_string));
    let parsed: Option<Value>;
    let documents: Vec<(&Value, FieldPath)> = match value {
        Value::Null => Vec::new(),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, d)| (d, path.index(i)))
            .collect(),
        Value::String(text) => match YamlDoc::parse_stream("rule text", text) {
            Ok(doc) => {
                parsed = doc.value_at(&FieldPath::root());
                let items = parsed.as_ref().and_then(Value::as_array);
                items
                    .into_iter()
                    .flatten()
                    .map(|d| (d, path.clone()))
                    .collect()
            }
            Err(e) => {
                let (line, column) = (e.location.line, e.location.column);
                let message = format!(
                    "line {line}, column {column} of the rule text: {}",
                    e.message
                );
                r.error(path, message);
                Vec::new()
            }
        },
        other => vec![(other, path.clone())],
    };
    let standard: Vec<_> = documents
        .into_iter()
        .filter_map(|(doc, path)| Some((doc, standard_name(&mut r, doc, &path)?, path)))
        .collect();
    let outcome = match standard.is_empty() {
        _ if !r.errors.is_empty() => None,
        true => Some(TextOutcome::Clear),
        false => read_standard(&mut r, &standard, fetch).map(TextOutcome::Apply),
    };
    let result = match outcome {
        Some(outcome) if r.errors.is_empty() => Ok(outcome),
        _ => Err(r.errors),
    };
    Checked {
        result,
        warnings: r.warnings,
    }
}

/// The name of a standard document (`metadata.name`, without a `.`); `None` for a document
/// of another router or one Dubbo drops, with a warning, or one Dubbo refuses, with an error.
fn standard_name(r: &mut Reader, doc: &Value, path: &FieldPath) -> Option<String> {
    let meta = doc.get("metadata").and_then(Value::as_object);
    let Some(meta) = meta.filter(|m| !m.is_empty()) else {
        r.warn(
            path,
            match doc {
                Value::Object(_) => {
                    "a document without metadata.name is dropped (as Dubbo drops it)".to_string()
                }
                _ => format!(
                    "a document that is {} is not a map: ignored (Dubbo: \"Rule format is unacceptable\")",
                    kind_of(doc)
                ),
            },
        );
        return None;
    };
    let mp = path.key("metadata");
    let name = match meta.get("name") {
        Some(Value::String(n)) => n,
        None | Some(Value::Null) => {
            r.error(
                &mp,
                "metadata has no `name` (Dubbo refuses the whole text too)",
            );
            return None;
        }
        Some(other) => {
            r.error(
                &mp.key("name"),
                format!(
                    "metadata.name must be a string, not {} (Dubbo refuses the whole text too)",
                    kind_of(other)
                ),
            );
            return None;
        }
    };
    if let Some((_, rule_type)) = name.split_once('.') {
        r.warn(
            &mp.key("name"),
            format!(
                "metadata.name {name:?} has a '.': the document belongs to routers of type {rule_type:?}, not to the standard mesh router: ignored"
            ),
        );
        return None;
    }
    Some(name.clone())
}

const DOCUMENT_KEYS: [&str; 4] = ["apiVersion", "kind", "metadata", "spec"];

/// The standard documents (each with its path and name) into a rule: every
/// `DestinationRule`'s subsets first, then the `VirtualService`s that name them.
fn read_standard(
    r: &mut Reader,
    docs: &[(&Value, String, FieldPath)],
    fetch: Fetch<'_>,
) -> Option<AppRule> {
    let mut rule = AppRule::default();
    let mut vs_docs = Vec::new();
    for (doc, name, path) in docs {
        match doc.get("kind") {
            Some(Value::String(k)) if k == "DestinationRule" || k == "VirtualService" => {
                let fields = r.object(doc, path, "a document", &DOCUMENT_KEYS)?;
                if k == "VirtualService" {
                    vs_docs.push((fields, name));
                    continue;
                }
                rule.destination_rules.push(name.clone());
                read_destination_rule(r, &fields);
            }
            other => {
                let what = match other {
                    Some(Value::String(k)) => format!("kind {k:?}"),
                    Some(v) => format!("kind {v}"),
                    None => "no kind".to_string(),
                };
                r.warn(
                    &path.key("kind"),
                    format!(
                        "{what}: only DestinationRule and VirtualService documents are read; ignored"
                    ),
                );
            }
        }
    }
    if rule.destination_rules.is_empty() || vs_docs.is_empty() {
        let missing = if rule.destination_rules.is_empty() {
            "DestinationRule"
        } else {
            "VirtualService"
        };
        r.error(
            &docs[0].2.parent(),
            format!(
                "a mesh rule needs at least one DestinationRule and one VirtualService; this one has no {missing} (Dubbo keeps the previous rule)"
            ),
        );
        return None;
    }
    rule.virtual_services = vs_docs
        .into_iter()
        .filter_map(|(doc, name)| read_virtual_service(r, &doc, name, fetch))
        .collect();
    rule.subsets = std::mem::take(&mut r.subsets);
    Some(rule)
}

/// A `DestinationRule`'s subsets, merged by name into the reader's.
fn read_destination_rule(r: &mut Reader, doc: &Fields<'_>) {
    let needs = "a DestinationRule needs `spec.subsets` (Dubbo fails while building subsets)";
    let Some(spec) = read_spec(r, doc, needs, &["host", "subsets", "trafficPolicy"]) else {
        return;
    };
    r.get::<String>(&spec, "host");
    let Some(list) = spec.get("subsets") else {
        r.error(
            &spec.path,
            "a DestinationRule needs `subsets` (Dubbo fails while building subsets)",
        );
        return;
    };
    r.each(list, &spec.at("subsets"), read_subset);
}

/// A document's `spec` (`known` its keys): an error saying what it `needs` when absent.
fn read_spec<'v>(
    r: &mut Reader,
    doc: &Fields<'v>,
    needs: &str,
    known: &[&str],
) -> Option<Fields<'v>> {
    let Some(spec) = doc.get("spec") else {
        r.error(&doc.path, needs);
        return None;
    };
    r.object(spec, &doc.at("spec"), "spec", known)
}

/// One subset definition, merged by name into the reader's subsets.
fn read_subset(r: &mut Reader, value: &Value, path: &FieldPath) -> Option<()> {
    let s = r.object(value, path, "a subset", &["name", "labels"])?;
    if s.get("name").is_none() {
        r.warn(
            path,
            "a subset without `name`: only a destination without `subset` reaches it",
        );
    }
    let name = r.get(&s, "name");
    let labels = r.get(&s, "labels").unwrap_or_default();
    match r.subsets.iter_mut().find(|x| x.name == name) {
        Some(existing) => existing.label_sets.push(labels),
        None => r.subsets.push(Subset {
            name,
            label_sets: vec![labels],
        }),
    }
    Some(())
}

fn read_virtual_service(
    r: &mut Reader,
    doc: &Fields<'_>,
    name: &str,
    fetch: Fetch<'_>,
) -> Option<VirtualService> {
    let needs = "a VirtualService needs `spec` (Dubbo fails every call that reaches it)";
    let spec = read_spec(r, doc, needs, &["hosts", "dubbo"])?;
    r.get::<Vec<String>>(&spec, "hosts");
    let routes = read_in_order(
        r,
        (&spec, "dubbo"),
        "has no `services` and takes every service first",
        |route: &DubboRoute| route.services.is_empty(),
        |r, item, ip| read_route(r, item, ip, fetch),
    );
    Some(VirtualService {
        name: name.to_string(),
        routes,
    })
}

/// The elements of list `key` of `fields` read by `read`, in order, with a warning on each
/// one after the first that `takes_all` holds for: `reason` says why that one takes
/// everything first.
fn read_in_order<T>(
    r: &mut Reader,
    (fields, key): (&Fields<'_>, &str),
    reason: &str,
    takes_all: impl Fn(&T) -> bool,
    mut read: impl FnMut(&mut Reader, &Value, &FieldPath) -> Option<T>,
) -> Vec<T> {
    let (mut first, mut i): (Option<usize>, usize) = (None, 0);
    let Some(list) = fields.get(key) else {
        return Vec::new();
    };
    r.each(list, &fields.at(key), |r, item, ip| {
        if let Some(at) = first {
            r.warn(ip, format!("unreachable: {key}[{at}] {reason}"));
        }
        let element = read(r, item, ip);
        if first.is_none() && element.as_ref().is_some_and(&takes_all) {
            first = Some(i);
        }
        i += 1;
        element
    })
    .unwrap_or_default()
}

fn read_route(
    r: &mut Reader,
    value: &Value,
    path: &FieldPath,
    fetch: Fetch<'_>,
) -> Option<DubboRoute> {
    let known = ["name", "services", "routedetail"];
    let f = r.object(value, path, "a dubbo route", &known)?;
    let name = r.get(&f, "name");
    let services: Vec<StringMatch> = r.get(&f, "services").unwrap_or_default();
    for (i, m) in services.iter().enumerate() {
        if m.exact.as_deref().is_some_and(|e| e.contains([':', '/'])) {
            r.warn(
                &f.at("services").index(i).key("exact"),
                "services match the interface name only (no group or version): this exact value never matches",
            );
        }
    }
    let details = read_in_order(
        r,
        (&f, "routedetail"),
        "has no `match` and takes every call first",
        |detail: &RouteDetail| detail.matches.is_empty(),
        |r, item, ip| {
            // A detail that is a placeholder is built now (see `read_documents`).
            let built = matches!(item, Value::Object(_) | Value::Array(_))
                .then(|| fetch(ip))
                .flatten();
            read_detail(r, built.as_ref().unwrap_or(item), ip)
        },
    );
    Some(DubboRoute {
        name,
        services,
        details,
    })
}

fn read_detail(r: &mut Reader, value: &Value, path: &FieldPath) -> Option<RouteDetail> {
    let f = r.object(value, path, "a route detail", &["name", "match", "route"])?;
    let name = r.get(&f, "name");
    let matches = r.get(&f, "match").unwrap_or_default();
    let route = match f.get("route") {
        None => {
            r.warn(
                path,
                "a detail without `route` selects nothing: a call it matches gets no subset",
            );
            None
        }
        Some(v) => Some(read_destinations(r, v, &f.at("route"))?),
    };
    Some(RouteDetail {
        name,
        matches,
        route,
    })
}

/// A detail's `route`.
fn read_destinations(r: &mut Reader, value: &Value, path: &FieldPath) -> Option<Destinations> {
    let list = r.each(value, path, read_route_destination)?;
    if value.as_array().is_some_and(Vec::is_empty) {
        r.error(
            path,
            "`route` is empty (Dubbo fails every call that reaches it); remove the detail or give a destination",
        );
        return None;
    }
    if !list.is_empty() && list.iter().all(|d| d.weight == 0) {
        r.warn(
            path,
            "every destination has weight 0: the detail selects nothing",
        );
    }
    Some(Destinations::new(list))
}

fn read_route_destination(r: &mut Reader, value: &Value, path: &FieldPath) -> Option<Destination> {
    let f = r.object(
        value,
        path,
        "a route destination",
        &["weight", "destination"],
    )?;
    let weight = match f.get("weight") {
        Some(_) => r.get::<i64>(&f, "weight")?,
        None => 1,
    };
    if weight < 0 {
        let message = format!("weight {weight} is negative: read as 1");
        r.warn(&f.at("weight"), message);
    }
    let Some(d) = f.get("destination") else {
        r.error(
            path,
            "a route entry needs a `destination` (Dubbo fails every call that draws it)",
        );
        return None;
    };
    let chain = read_destination(r, d, &f.at("destination"))?;
    let weight = u32::try_from(weight).unwrap_or(1);
    Some(Destination { weight, chain })
}

/// A `DubboDestination`'s subset, then each of its fallbacks', in order.
fn read_destination(r: &mut Reader, value: &Value, path: &FieldPath) -> Option<Vec<SubsetRef>> {
    let known = ["host", "subset", "port", "fallback"];
    let f = r.object(value, path, "a destination", &known)?;
    r.get::<String>(&f, "host");
    r.get::<i64>(&f, "port");
    if f.get("subset").is_none() {
        r.warn(
            path,
            "a destination without `subset` names the nameless subset",
        );
    }
    let name: Option<String> = r.get(&f, "subset");
    let id = r.subsets.iter().position(|s| s.name == name);
    if id.is_none() {
        r.warn(
            &f.at("subset"),
            format!(
                "no DestinationRule of the application defines subset {}: it never has a provider",
                name.as_deref()
                    .map_or("(nameless)".to_string(), |n| format!("{n:?}"))
            ),
        );
    }
    let mut chain = vec![SubsetRef { name, id }];
    let Some(fb) = f.get("fallback") else {
        return Some(chain);
    };
    let fp = f.at("fallback");
    let Value::Object(map) = fb else {
        r.error(&fp, format!("must be a mapping, not {}", kind_of(fb)));
        return None;
    };
    let present = |key| map.get(key).is_some_and(|v| !v.is_null());
    if present("destination") {
        // Dubbo's own, nested form: {destination: {...}, weight}.
        let fallback = r.object(fb, &fp, "a fallback", &["destination", "weight"])?;
        r.get::<i64>(&fallback, "weight");
        let next = fallback.get("destination")?;
        chain.extend(read_destination(r, next, &fallback.at("destination"))?);
    } else if present("subset") {
        // The flat form {host, subset}: Dubbo reads no fallback here; routechain honours it.
        r.warn(
            &fp,
            "flat fallback {host, subset}: routechain follows it, but Dubbo ignores it (write fallback: {destination: {subset: ...}} for both)",
        );
        chain.extend(read_destination(r, fb, &fp)?);
    } else {
        r.warn(
            &fp,
            "a fallback without `destination` (or `subset`) is no fallback",
        );
    }
    Some(chain)
}
