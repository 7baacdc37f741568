//! The compiled mesh rule of one application, and how a node text's documents become one
//! (spec §3–§5): which documents are this router's (`metadata.name` without a `.`), the
//! `DestinationRule`s' subsets, the `VirtualService`s' routes, details and weighted
//! destinations with their flattened fallback chains.

use routechain_core::{FieldPath, RuleError};
use serde_json::Value;

use super::matchers::{MatchRequest, StringMatch};
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

impl SubsetRef {
    /// The name for explain texts.
    pub fn display(&self) -> &str {
        self.name.as_deref().unwrap_or("(nameless)")
    }
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
        let mut sum = 0u64;
        let cumulative = eligible
            .iter()
            .map(|&i| {
                sum += u64::from(list[i].weight);
                sum
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
#[derive(Debug, Clone)]
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

/// Reads the documents of one node text (each with its path) into an application's rule.
/// Their route details (`spec.dubbo[i].routedetail[j]`, when not scalars) may be
/// placeholders: `fetch` builds each when it is read, so a rule of 10,000 details never
/// holds them all as values at once.
pub fn read_documents<'v>(
    documents: impl IntoIterator<Item = (&'v Value, FieldPath)>,
    tracing_prefix: Option<&str>,
    fetch: Fetch<'_>,
) -> Checked<TextOutcome> {
    let mut r = Reader::new(tracing_prefix.map(str::to_string));
    let mut standard = Vec::new();
    let mut typed = 0usize;
    for (doc, path) in documents {
        let Value::Object(map) = doc else {
            r.warn(
                &path,
                format!(
                    "a document that is {} is not a map: ignored (Dubbo: \"Rule format is unacceptable\")",
                    kind_of(doc)
                ),
            );
            continue;
        };
        let mp = path.key("metadata");
        let name = match map.get("metadata") {
            Some(Value::Object(meta)) if !meta.is_empty() => match meta.get("name") {
                Some(Value::String(n)) => n.clone(),
                None | Some(Value::Null) => {
                    r.error(
                        &mp,
                        "metadata has no `name` (Dubbo refuses the whole text too)",
                    );
                    continue;
                }
                Some(other) => {
                    r.error(
                        &mp.key("name"),
                        format!(
                            "metadata.name must be a string, not {} (Dubbo refuses the whole text too)",
                            kind_of(other)
                        ),
                    );
                    continue;
                }
            },
            _ => {
                r.warn(
                    &path,
                    "a document without metadata.name is dropped (as Dubbo drops it)",
                );
                continue;
            }
        };
        typed += 1;
        if let Some((_, rule_type)) = name.split_once('.') {
            r.warn(
                &mp.key("name"),
                format!(
                    "metadata.name {name:?} has a '.': the document belongs to routers of type {rule_type:?}, not to the standard mesh router: ignored"
                ),
            );
            continue;
        }
        standard.push((Fields(map), path, name));
    }
    if !r.errors.is_empty() {
        return Checked {
            result: Err(r.errors),
            warnings: r.warnings,
        };
    }
    if typed == 0 || standard.is_empty() {
        return Checked {
            result: Ok(TextOutcome::Clear),
            warnings: r.warnings,
        };
    }
    let rule = read_standard(&mut r, &standard, fetch);
    let result = match rule {
        Some(rule) if r.errors.is_empty() => Ok(TextOutcome::Apply(rule)),
        _ => Err(r.errors),
    };
    Checked {
        result,
        warnings: r.warnings,
    }
}

type Doc<'v> = (Fields<'v>, FieldPath, String);

const DOCUMENT_KEYS: [&str; 4] = ["apiVersion", "kind", "metadata", "spec"];

fn read_standard(r: &mut Reader, docs: &[Doc<'_>], fetch: Fetch<'_>) -> Option<AppRule> {
    let mut destination_rules = Vec::new();
    let mut subsets: Vec<Subset> = Vec::new();
    let mut vs_docs = Vec::new();
    for (map, path, name) in docs {
        match map.0.get("kind") {
            Some(Value::String(k)) if k == "DestinationRule" => {
                r.unknown_keys(map.0, path, "a document", &DOCUMENT_KEYS);
                destination_rules.push(name.clone());
                read_destination_rule(r, *map, path, &mut subsets);
            }
            Some(Value::String(k)) if k == "VirtualService" => {
                r.unknown_keys(map.0, path, "a document", &DOCUMENT_KEYS);
                vs_docs.push((map, path, name));
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
    if destination_rules.is_empty() || vs_docs.is_empty() {
        let missing = if destination_rules.is_empty() {
            "DestinationRule"
        } else {
            "VirtualService"
        };
        let at = docs.first().map(|d| d.1.clone()).unwrap_or_default();
        r.error(
            &at.parent(),
            format!(
                "a mesh rule needs at least one DestinationRule and one VirtualService; this one has no {missing} (Dubbo keeps the previous rule)"
            ),
        );
        return None;
    }
    let virtual_services = vs_docs
        .into_iter()
        .filter_map(|(map, path, name)| read_virtual_service(r, *map, path, name, &subsets, fetch))
        .collect();
    Some(AppRule {
        destination_rules,
        virtual_services,
        subsets,
    })
}

fn read_destination_rule(
    r: &mut Reader,
    map: Fields<'_>,
    path: &FieldPath,
    subsets: &mut Vec<Subset>,
) {
    let sp = path.key("spec");
    let Some(spec) = map.get("spec") else {
        r.error(
            path,
            "a DestinationRule needs `spec.subsets` (Dubbo fails while building subsets)",
        );
        return;
    };
    let Some(spec) = r.object(spec, &sp, "spec", &["host", "subsets", "trafficPolicy"]) else {
        return;
    };
    r.field(spec, &sp, "host", Reader::string);
    let Some(list) = spec.get("subsets") else {
        r.error(
            &sp,
            "a DestinationRule needs `subsets` (Dubbo fails while building subsets)",
        );
        return;
    };
    r.each(list, &sp.key("subsets"), |r, item, ip| {
        let s = r.object(item, ip, "a subset", &["name", "labels"])?;
        let name = match s.get("name") {
            Some(n) => r.string(n, &ip.key("name")),
            None => {
                r.warn(
                    ip,
                    "a subset without `name`: only a destination without `subset` reaches it",
                );
                None
            }
        };
        let labels = (r.field(s, ip, "labels", Reader::string_map)).unwrap_or_default();
        match subsets.iter_mut().find(|x| x.name == name) {
            Some(existing) => existing.label_sets.push(labels),
            None => subsets.push(Subset {
                name,
                label_sets: vec![labels],
            }),
        }
        Some(())
    });
}

fn read_virtual_service(
    r: &mut Reader,
    map: Fields<'_>,
    path: &FieldPath,
    name: &str,
    subsets: &[Subset],
    fetch: Fetch<'_>,
) -> Option<VirtualService> {
    let sp = path.key("spec");
    let Some(spec) = map.get("spec") else {
        r.error(
            path,
            "a VirtualService needs `spec` (Dubbo fails every call that reaches it)",
        );
        return None;
    };
    let spec = r.object(spec, &sp, "spec", &["hosts", "dubbo"])?;
    r.field(spec, &sp, "hosts", |r, v, p| r.each(v, p, Reader::string));
    let routes = read_in_order(
        r,
        (spec, &sp, "dubbo"),
        "has no `services` and takes every service first",
        |route: &DubboRoute| route.services.is_empty(),
        |r, item, ip| read_route(r, item, ip, subsets, fetch),
    );
    Some(VirtualService {
        name: name.to_string(),
        routes,
    })
}

/// The elements of list `key` of `map` (at `path`) read by `read`, in order, with a
/// warning on each one after the first that `takes_all` holds for: `reason` says why that
/// one takes everything first.
fn read_in_order<T>(
    r: &mut Reader,
    (map, path, key): (Fields<'_>, &FieldPath, &str),
    reason: &str,
    takes_all: impl Fn(&T) -> bool,
    mut read: impl FnMut(&mut Reader, &Value, &FieldPath) -> Option<T>,
) -> Vec<T> {
    let (mut first, mut i): (Option<usize>, usize) = (None, 0);
    let items = r.field(map, path, key, |r, list, lp| {
        r.each(list, lp, |r, item, ip| {
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
    });
    items.unwrap_or_default()
}

fn read_route(
    r: &mut Reader,
    value: &Value,
    path: &FieldPath,
    subsets: &[Subset],
    fetch: Fetch<'_>,
) -> Option<DubboRoute> {
    let map = r.object(
        value,
        path,
        "a dubbo route",
        &["name", "services", "routedetail"],
    )?;
    let name = r.field(map, path, "name", Reader::string);
    let mut services = Vec::new();
    if let Some(v) = map.get("services") {
        let sp = path.key("services");
        services = r.string_match_list(v, &sp).unwrap_or_default();
        for (i, m) in services.iter().enumerate() {
            if m.exact
                .as_deref()
                .is_some_and(|e| e.contains(':') || e.contains('/'))
            {
                r.warn(
                    &sp.index(i).key("exact"),
                    "services match the interface name only (no group or version): this exact value never matches",
                );
            }
        }
    }
    let details = read_in_order(
        r,
        (map, path, "routedetail"),
        "has no `match` and takes every call first",
        |detail: &RouteDetail| detail.matches.is_empty(),
        |r, item, ip| {
            // A detail that is a placeholder is built now (see `read_documents`).
            let built = matches!(item, Value::Object(_) | Value::Array(_))
                .then(|| fetch(ip))
                .flatten();
            read_detail(r, built.as_ref().unwrap_or(item), ip, subsets)
        },
    );
    Some(DubboRoute {
        name,
        services,
        details,
    })
}

fn read_detail(
    r: &mut Reader,
    value: &Value,
    path: &FieldPath,
    subsets: &[Subset],
) -> Option<RouteDetail> {
    let map = r.object(value, path, "a route detail", &["name", "match", "route"])?;
    let name = r.field(map, path, "name", Reader::string);
    let matches = (r.field(map, path, "match", |r, v, p| {
        r.each(v, p, Reader::match_request)
    }))
    .unwrap_or_default();
    let route = match map.get("route") {
        None => {
            r.warn(
                path,
                "a detail without `route` selects nothing: a call it matches gets no subset",
            );
            None
        }
        Some(v) => {
            let rp = path.key("route");
            let items = r.list(v, &rp)?;
            if items.is_empty() {
                r.error(
                    &rp,
                    "`route` is empty (Dubbo fails every call that reaches it); remove the detail or give a destination",
                );
                return None;
            }
            let list: Vec<Destination> = items
                .iter()
                .enumerate()
                .filter_map(|(i, d)| read_route_destination(r, d, &rp.index(i), subsets))
                .collect();
            let d = Destinations::new(list);
            if d.eligible.is_empty() && !d.list.is_empty() {
                r.warn(
                    &rp,
                    "every destination has weight 0: the detail selects nothing",
                );
            }
            Some(d)
        }
    };
    Some(RouteDetail {
        name,
        matches,
        route,
    })
}

fn read_route_destination(
    r: &mut Reader,
    value: &Value,
    path: &FieldPath,
    subsets: &[Subset],
) -> Option<Destination> {
    let map = r.object(
        value,
        path,
        "a route destination",
        &["weight", "destination"],
    )?;
    let weight = match map.get("weight") {
        None => 1,
        Some(v) => {
            let w = r.int(v, &path.key("weight"))?;
            if w < 0 {
                r.warn(
                    &path.key("weight"),
                    format!("weight {w} is negative: read as 1"),
                );
                1
            } else {
                w as u32
            }
        }
    };
    let Some(d) = map.get("destination") else {
        r.error(
            path,
            "a route entry needs a `destination` (Dubbo fails every call that draws it)",
        );
        return None;
    };
    let mut chain = Vec::new();
    read_destination(r, d, &path.key("destination"), subsets, &mut chain)?;
    Some(Destination { weight, chain })
}

/// Reads a `DubboDestination` and its fallbacks into `chain`.
fn read_destination(
    r: &mut Reader,
    value: &Value,
    path: &FieldPath,
    subsets: &[Subset],
    chain: &mut Vec<SubsetRef>,
) -> Option<()> {
    let map = r.object(
        value,
        path,
        "a destination",
        &["host", "subset", "port", "fallback"],
    )?;
    r.field(map, path, "host", Reader::string);
    r.field(map, path, "port", Reader::int);
    let name = match map.get("subset") {
        Some(s) => r.string(s, &path.key("subset")),
        None => {
            r.warn(
                path,
                "a destination without `subset` names the nameless subset",
            );
            None
        }
    };
    let id = subsets.iter().position(|s| s.name == name);
    if id.is_none() {
        r.warn(
            &path.key("subset"),
            format!(
                "no DestinationRule of the application defines subset {}: it never has a provider",
                name.as_deref()
                    .map_or("(nameless)".to_string(), |n| format!("{n:?}"))
            ),
        );
    }
    chain.push(SubsetRef { name, id });
    let Some(fb) = map.get("fallback") else {
        return Some(());
    };
    let fp = path.key("fallback");
    let Value::Object(fmap) = fb else {
        r.error(&fp, format!("must be a mapping, not {}", kind_of(fb)));
        return None;
    };
    let fmap = Fields(fmap);
    if let Some(next) = fmap.get("destination") {
        // Dubbo's own, nested form: {destination: {...}, weight}.
        r.object(fb, &fp, "a fallback", &["destination", "weight"]);
        r.field(fmap, &fp, "weight", Reader::int);
        read_destination(r, next, &fp.key("destination"), subsets, chain)
    } else if fmap.get("subset").is_some() {
        // The flat form {host, subset}: Dubbo reads no fallback here; routechain honours it.
        r.warn(
            &fp,
            "flat fallback {host, subset}: routechain follows it, but Dubbo ignores it (write fallback: {destination: {subset: ...}} for both)",
        );
        read_destination(r, fb, &fp, subsets, chain)
    } else {
        r.warn(
            &fp,
            "a fallback without `destination` (or `subset`) is no fallback",
        );
        Some(())
    }
}
