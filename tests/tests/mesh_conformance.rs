//! The mesh router's conformance cases (`conformance/mesh-cases.yaml`, ported from Dubbo's
//! `MeshRuleRouterTest`, the match tests, `MeshAppRuleListenerTest`, `MeshRuleCacheTest` and
//! the parsing tests, plus cases derived from Dubbo's source), run through the public API.
//!
//! One test per section (route, match, subset, parse, subscription); each fails when its
//! section is empty. Where routechain differs from Dubbo on purpose the file records both
//! answers; these tests check routechain's (`expect`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use routechain::core::{
    BitSet, FastRng, FieldPath, PrepareContext, RandomSource, Request, RouteContext, RouterSpec,
    RuleDoc, Snapshot, Url,
};
use routechain::routers::mesh::{
    self, AppRules, MeshOptions, MeshRule, PreparedMesh, TextOutcome, matchers::CallView,
    read::Reader,
};
use routechain::rules::YamlDoc;
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Debug, Deserialize)]
struct CaseFile {
    provider_sets: BTreeMap<String, Vec<ProviderDef>>,
    rule_texts: BTreeMap<String, String>,
    cases: Vec<RouteCase>,
    match_cases: Vec<MatchCase>,
    subset_cases: Vec<SubsetCase>,
    parse_cases: Vec<ParseCase>,
    subscription_cases: Vec<SubscriptionCase>,
}

#[derive(Debug, Clone, Deserialize)]
struct ProviderDef {
    id: String,
    url: String,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Providers {
    Named(String),
    Inline(Vec<ProviderDef>),
}

#[derive(Debug, Default, Deserialize)]
struct TextSpec {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    texts: Option<Vec<String>>,
    #[serde(default)]
    text_after: Option<String>,
}

#[derive(Debug, Deserialize)]
struct RouteCase {
    name: String,
    providers: Providers,
    #[serde(default)]
    available: Option<Vec<String>>,
    #[serde(default)]
    rules: BTreeMap<String, TextSpec>,
    #[serde(default)]
    entry: BTreeMap<String, String>,
    request: RequestDef,
    expect: Expect,
    #[serde(default)]
    explain: Option<ExplainFacts>,
    #[serde(default)]
    warnings: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct RequestDef {
    service: Option<String>,
    method: Option<String>,
    #[serde(default)]
    arguments: Vec<Value>,
    #[serde(default)]
    parameter_types: Vec<String>,
    #[serde(default)]
    attachments: BTreeMap<String, String>,
    consumer: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Weighted {
    providers: Vec<String>,
    weight: u64,
}

#[derive(Debug, Deserialize)]
struct Expect {
    #[serde(default)]
    providers: Option<Vec<String>>,
    #[serde(default)]
    distribution: Option<Vec<Weighted>>,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Debug, Deserialize)]
struct ExplainFacts {
    #[serde(default)]
    app: Option<String>,
    #[serde(default)]
    detail: Option<String>,
    #[serde(default)]
    subset: Option<String>,
    #[serde(default)]
    fallback: Option<bool>,
}

#[derive(Debug, Deserialize)]
struct MatchCase {
    name: String,
    #[serde(rename = "type")]
    kind: String,
    #[serde(rename = "match")]
    matcher: Value,
    input: Value,
    expect: bool,
}

#[derive(Debug, Deserialize)]
struct SubsetCase {
    name: String,
    providers: Providers,
    rule_app: String,
    subsets: Value,
    expect: BTreeMap<String, Vec<String>>,
}

#[derive(Debug, Deserialize)]
struct ParseCase {
    name: String,
    steps: Vec<ParseStep>,
}

#[derive(Debug, Deserialize)]
struct ParseStep {
    #[serde(flatten)]
    text: TextSpec,
    #[serde(default)]
    event: Option<String>,
    outcome: String,
    #[serde(default)]
    state: Option<Value>,
    #[serde(default)]
    warnings: Vec<String>,
    #[serde(default)]
    other_types: BTreeMap<String, usize>,
    #[serde(default)]
    compiled: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct SubscriptionCase {
    name: String,
    #[serde(default)]
    entry: BTreeMap<String, String>,
    steps: Vec<SubscriptionStep>,
}

#[derive(Debug, Deserialize)]
struct SubscriptionStep {
    #[serde(default)]
    providers: Vec<String>,
    #[serde(default)]
    stop: bool,
    watched: Vec<String>,
}

fn cases() -> CaseFile {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance/mesh-cases.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let doc = YamlDoc::parse(path.display().to_string(), &text).unwrap();
    serde_json::from_value(doc.value().clone()).unwrap()
}

impl CaseFile {
    fn providers(&self, p: &Providers) -> Vec<ProviderDef> {
        match p {
            Providers::Named(n) => self.provider_sets[n].clone(),
            Providers::Inline(list) => list.clone(),
        }
    }

    /// The node text of a rule: `text`, or the named `texts` joined with `---`, then
    /// `text_after` as one more document.
    fn text(&self, t: &TextSpec) -> String {
        let mut parts: Vec<String> = Vec::new();
        if let Some(text) = &t.text {
            parts.push(text.clone());
        }
        for name in t.texts.iter().flatten() {
            parts.push(self.rule_texts[name].clone());
        }
        if let Some(after) = &t.text_after {
            parts.push(after.clone());
        }
        parts.join("---\n")
    }
}

fn snapshot_of(defs: &[ProviderDef]) -> Snapshot {
    let lines: String = defs.iter().map(|d| format!("{}\n", d.url)).collect();
    Snapshot::parse_lines(1, &lines).unwrap()
}

/// Answers `below(n)` with 0, 1, 2, ... (mod n): over `n` calls every value once.
struct CountingRng(u64);

impl RandomSource for CountingRng {
    fn next_u64(&mut self) -> u64 {
        self.0 += 1;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        let v = self.0 % n;
        self.0 += 1;
        v
    }
}

/// The entry value of a case: `entry` options, `application` written as `app`.
fn entry_value(entry: &BTreeMap<String, String>) -> Value {
    let mut map = serde_json::Map::new();
    map.insert("type".into(), json!("mesh"));
    for (k, v) in entry {
        let k = if k == "application" {
            "app"
        } else {
            k.as_str()
        };
        map.insert(k.to_string(), json!(v));
    }
    Value::Object(map)
}

/// Compiles a case's rules in the per-application form (`{applications: {app: text}}`).
fn compile(
    file: &CaseFile,
    rules: &BTreeMap<String, TextSpec>,
    entry: &BTreeMap<String, String>,
) -> (MeshRule, Vec<String>) {
    let apps: serde_json::Map<String, Value> = rules
        .iter()
        .map(|(app, t)| (app.clone(), Value::String(file.text(t))))
        .collect();
    let rule = json!({ "applications": apps });
    let entry = entry_value(entry);
    let ep = FieldPath::root().key("routers").index(0);
    let rp = ep.key("rule");
    let spec = RouterSpec {
        type_name: "mesh",
        entry: RuleDoc::new(&entry, &ep),
        rule: (!rules.is_empty()).then(|| RuleDoc::new(&rule, &rp)),
        base_dir: None,
        service: None,
    };
    let checked = mesh::check(&spec);
    let warnings = checked
        .warnings
        .iter()
        .map(|w| format!("{}: {}", w.path, w.message))
        .collect();
    (checked.result.expect("the case's rule compiles"), warnings)
}

fn request_of(r: &RequestDef) -> Request {
    Request {
        service: r.service.clone(),
        consumer: r.consumer.as_ref().map(|c| Url::parse(c).unwrap()),
        method: r.method.clone(),
        arguments: r.arguments.clone(),
        parameter_types: r.parameter_types.clone(),
        attachments: r.attachments.iter().collect(),
        attributes: Default::default(),
    }
}

/// Routes one call; returns the provider ids left (or `None` when the router emptied the set)
/// and the explain text.
fn route_once(
    prepared: &Arc<dyn routechain::core::PreparedRouter>,
    snapshot: &Snapshot,
    ids: &[String],
    available: &BitSet,
    request: &Request,
    rng: &mut dyn RandomSource,
) -> (Option<Vec<String>>, String) {
    let mut candidates = available.clone();
    let chain_consumer = Url::empty();
    let consumer = request.consumer.as_ref().unwrap_or(&chain_consumer);
    let mut builder = RouteContext::builder(request, snapshot)
        .consumer(consumer, request.consumer.is_none())
        .rng(rng)
        .explain(true);
    prepared.route(&mut builder.context(), &mut candidates);
    let left =
        (!candidates.is_empty()).then(|| candidates.iter().map(|i| ids[i].clone()).collect());
    (left, builder.reason().to_string())
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

#[test]
fn route_cases() {
    let file = cases();
    assert!(!file.cases.is_empty(), "no route case");
    for case in &file.cases {
        let defs = file.providers(&case.providers);
        let ids: Vec<String> = defs.iter().map(|d| d.id.clone()).collect();
        let snapshot = snapshot_of(&defs);
        let (rule, warnings) = compile(&file, &case.rules, &case.entry);
        for w in &case.warnings {
            assert!(
                warnings
                    .iter()
                    .any(|x| x.to_lowercase().contains(&w.to_lowercase())),
                "{}: no warning mentions {w:?}: {warnings:#?}",
                case.name
            );
        }
        let router =
            routechain::core::TypedFactory::new("mesh", mesh::MeshRouter).router(Some(rule));
        let prepared = router
            .prepare(&PrepareContext {
                snapshot: &snapshot,
                consumer: &Url::empty(),
                service: None,
            })
            .unwrap();
        let available = match &case.available {
            None => BitSet::full(snapshot.len()),
            Some(list) => BitSet::from_indexes(
                snapshot.len(),
                list.iter()
                    .map(|id| ids.iter().position(|i| i == id).unwrap()),
            ),
        };
        let request = request_of(&case.request);
        let name = &case.name;
        if let Some(error) = &case.expect.error {
            assert_eq!(error, "no_provider");
            let (left, why) = route_once(
                &prepared,
                &snapshot,
                &ids,
                &available,
                &request,
                &mut FastRng::seeded(1),
            );
            assert_eq!(left, None, "{name}: expected no provider ({why})");
            assert!(why.contains("empty=fail"), "{name}: {why}");
        }
        if let Some(expected) = &case.expect.providers {
            for seed in 0..20 {
                let (left, why) = route_once(
                    &prepared,
                    &snapshot,
                    &ids,
                    &available,
                    &request,
                    &mut FastRng::seeded(seed),
                );
                assert_eq!(
                    left.map(sorted),
                    Some(sorted(expected.clone())),
                    "{name}: {why}"
                );
                if let Some(facts) = &case.explain {
                    check_explain(name, facts, &why);
                }
            }
        }
        if let Some(dist) = &case.expect.distribution {
            let total: u64 = dist.iter().map(|w| w.weight).sum();
            // Exact: a source answering every draw value once gives counts equal to weights.
            let mut rng = CountingRng(0);
            let mut counts: BTreeMap<Vec<String>, u64> = BTreeMap::new();
            for _ in 0..total {
                let (left, why) =
                    route_once(&prepared, &snapshot, &ids, &available, &request, &mut rng);
                *counts
                    .entry(sorted(left.unwrap_or_else(|| panic!("{name}: {why}"))))
                    .or_default() += 1;
            }
            let want: BTreeMap<Vec<String>, u64> = dist
                .iter()
                .map(|w| (sorted(w.providers.clone()), w.weight))
                .collect();
            assert_eq!(counts, want, "{name}: exact split");
            // Statistical: 10,000 seeded calls, each share within 0.02 of its probability.
            let mut rng = FastRng::seeded(7);
            let mut counts: BTreeMap<Vec<String>, u64> = BTreeMap::new();
            for _ in 0..10_000 {
                let (left, _) =
                    route_once(&prepared, &snapshot, &ids, &available, &request, &mut rng);
                *counts.entry(sorted(left.unwrap())).or_default() += 1;
            }
            for (set, w) in &want {
                let share = *counts.get(set).unwrap_or(&0) as f64 / 10_000.0;
                let p = *w as f64 / total as f64;
                assert!((share - p).abs() < 0.02, "{name}: {set:?} {share} vs {p}");
            }
        }
    }
}

fn check_explain(name: &str, facts: &ExplainFacts, why: &str) {
    if let Some(app) = &facts.app {
        assert!(
            why.contains(&format!("app {app}:")),
            "{name}: app {app}: {why}"
        );
    }
    if let Some(detail) = &facts.detail {
        assert!(
            why.contains(&format!("detail {detail:?}")),
            "{name}: detail {detail}: {why}"
        );
    }
    if let Some(subset) = &facts.subset {
        assert!(
            why.contains(&format!("subset {subset:?}")),
            "{name}: subset {subset}: {why}"
        );
    }
    if let Some(fallback) = facts.fallback {
        assert_eq!(
            why.contains("no candidate,"),
            fallback,
            "{name}: fallback {fallback}: {why}"
        );
    }
}

fn consumer_of(input: &Value) -> Url {
    if let Some(url) = input.get("consumer_url").and_then(Value::as_str) {
        return Url::parse(url).unwrap();
    }
    let params: Vec<(String, String)> = input
        .get("consumer_params")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
                .collect()
        })
        .unwrap_or_default();
    Url::from_parts(
        "consumer",
        "10.9.9.9",
        0,
        "x",
        params.iter().map(|(k, v)| (k.as_str(), v.as_str())),
    )
}

#[test]
fn match_cases() {
    let file = cases();
    assert!(!file.match_cases.is_empty(), "no match case");
    let p = FieldPath::root();
    for case in &file.match_cases {
        let input = &case.input;
        let prefix = input
            .get("tracing_prefix")
            .and_then(Value::as_str)
            .map(str::to_string);
        let mut r = Reader::new(prefix);
        let m = &case.matcher;
        let as_str = |v: &Value| v.as_str().map(str::to_string);
        let got = match case.kind.as_str() {
            "string_match" => r
                .string_match(m, &p)
                .unwrap()
                .is_match(as_str(input).as_deref()),
            "double_match" => r
                .double_match(m, &p)
                .unwrap()
                .is_match(input.as_f64().unwrap()),
            "bool_match" => r
                .bool_match(m, &p)
                .unwrap()
                .is_match(input.as_bool().unwrap()),
            "list_string_match" => r
                .oneof(m, &p, "x", |r, v, p| r.string_match(v, p))
                .unwrap()
                .iter()
                .any(|s| s.is_match(as_str(input).as_deref())),
            "list_double_match" => r
                .oneof(m, &p, "x", |r, v, p| r.double_match(v, p))
                .unwrap()
                .iter()
                .any(|s| s.is_match(input.as_f64().unwrap())),
            "list_bool_match" => r
                .oneof(m, &p, "x", |r, v, p| r.bool_match(v, p))
                .unwrap()
                .iter()
                .any(|s| s.is_match(input.as_bool().unwrap())),
            "method_match" | "attachment_match" | "match_request" => {
                let attachments: routechain::core::Attributes = input
                    .get("attachments")
                    .and_then(Value::as_object)
                    .map(|m| {
                        m.iter()
                            .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
                            .collect()
                    })
                    .unwrap_or_default();
                let arguments: Vec<Value> = input
                    .get("arguments")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                let types: Vec<String> = input
                    .get("parameter_types")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().map(|t| t.as_str().unwrap().to_string()).collect())
                    .unwrap_or_default();
                let consumer = consumer_of(input);
                let call = CallView {
                    method: input.get("method").and_then(Value::as_str),
                    arguments: &arguments,
                    parameter_types: &types,
                    attachments: &attachments,
                    consumer: &consumer,
                };
                match case.kind.as_str() {
                    "method_match" => r.method_match(m, &p).unwrap().is_match(&call),
                    "attachment_match" => r.attachment_match(m, &p).unwrap().is_match(&attachments),
                    _ => r.match_request(m, &p).unwrap().is_match(&call),
                }
            }
            other => panic!("{}: unknown match type {other}", case.name),
        };
        assert!(r.errors.is_empty(), "{}: {:?}", case.name, r.errors);
        assert_eq!(got, case.expect, "{} ({})", case.name, case.kind);
    }
}

#[test]
fn subset_cases() {
    let file = cases();
    assert!(!file.subset_cases.is_empty(), "no subset case");
    for case in &file.subset_cases {
        let defs = file.providers(&case.providers);
        let ids: Vec<String> = defs.iter().map(|d| d.id.clone()).collect();
        let snapshot = snapshot_of(&defs);
        let text = format!(
            "kind: DestinationRule\nmetadata: {{name: dr}}\nspec: {{subsets: {}}}\n---\n\
             kind: VirtualService\nmetadata: {{name: vs}}\nspec: {{dubbo: []}}\n",
            case.subsets
        );
        let doc = YamlDoc::parse_stream("case", &text).unwrap();
        let TextOutcome::Apply(rule) = mesh::read_text(&doc, None).result.unwrap() else {
            panic!("{}: no rule", case.name)
        };
        let rule = MeshRule {
            rules: AppRules::PerApp(BTreeMap::from([(case.rule_app.clone(), Arc::new(rule))])),
            ..Default::default()
        };
        let prepared = PreparedMesh::build(&rule, &snapshot, None);
        for (name, want) in &case.expect {
            let got: Vec<String> = prepared
                .subset_members(&case.rule_app, Some(name))
                .unwrap_or_default()
                .into_iter()
                .map(|i| ids[i].clone())
                .collect();
            assert_eq!(
                sorted(got),
                sorted(want.clone()),
                "{}: subset {name}",
                case.name
            );
        }
    }
}

fn names(state: &Option<(Vec<String>, Vec<String>)>) -> Value {
    match state {
        None => Value::Null,
        Some((dr, vs)) => json!({"destination_rules": dr, "virtual_services": vs}),
    }
}

#[test]
fn parse_cases() {
    let file = cases();
    assert!(!file.parse_cases.is_empty(), "no parse case");
    for case in &file.parse_cases {
        let mut state: Option<(Vec<String>, Vec<String>)> = None;
        for (n, step) in case.steps.iter().enumerate() {
            let name = format!("{} step {n}", case.name);
            let text = match step.event.as_deref() {
                Some("deleted") => String::new(),
                _ => file.text(&step.text),
            };
            let (outcome, warnings, rule) = match YamlDoc::parse_stream("node", &text) {
                Err(_) => ("refuse", Vec::new(), None),
                Ok(doc) => {
                    let checked = mesh::read_text(&doc, None);
                    let warnings: Vec<String> = checked
                        .warnings
                        .iter()
                        .map(|w| format!("{}: {}", w.path, w.message))
                        .collect();
                    match checked.result {
                        Err(_) => ("refuse", warnings, None),
                        Ok(TextOutcome::Clear) => ("clear", warnings, None),
                        Ok(TextOutcome::Apply(r)) => ("apply", warnings, Some(r)),
                    }
                }
            };
            assert_eq!(outcome, step.outcome, "{name}: {warnings:#?}");
            match (outcome, &rule) {
                ("apply", Some(r)) => {
                    state = Some((
                        r.destination_rules.clone(),
                        r.virtual_services.iter().map(|v| v.name.clone()).collect(),
                    ))
                }
                ("clear", _) => state = None,
                _ => {}
            }
            if let Some(want) = &step.state {
                assert_eq!(&names(&state), want, "{name}: state");
            }
            for w in &step.warnings {
                assert!(
                    warnings
                        .iter()
                        .any(|x| x.to_lowercase().contains(&w.to_lowercase())),
                    "{name}: no warning mentions {w:?}: {warnings:#?}"
                );
            }
            for (t, count) in &step.other_types {
                let n = warnings
                    .iter()
                    .filter(|w| w.contains(&format!("routers of type {t:?}")))
                    .count();
                assert_eq!(n, *count, "{name}: documents of type {t}");
            }
            if let (Some(want), Some(r)) = (&step.compiled, &rule) {
                check_compiled(&name, want, r);
            }
        }
    }
}

fn check_compiled(name: &str, want: &Value, rule: &mesh::AppRule) {
    let subsets: Vec<Value> = rule
        .subsets
        .iter()
        .map(|s| {
            let labels: serde_json::Map<String, Value> = s.label_sets[0]
                .iter()
                .map(|(k, v)| (k.clone(), json!(v)))
                .collect();
            json!({"name": s.name, "labels": labels})
        })
        .collect();
    let want_dr = &want["destination_rules"][0];
    assert_eq!(json!(rule.destination_rules[0]), want_dr["name"], "{name}");
    assert_eq!(Value::Array(subsets), want_dr["subsets"], "{name}: subsets");
    let vs = &rule.virtual_services[0];
    let want_vs = &want["virtual_services"][0];
    assert_eq!(json!(vs.name), want_vs["name"], "{name}");
    let want_route = &want_vs["routes"][0];
    let route = &vs.routes[0];
    assert_eq!(json!(route.name), want_route["name"]);
    assert_eq!(
        route.services.len(),
        want_route["services"].as_array().unwrap().len()
    );
    for (d, wd) in route
        .details
        .iter()
        .zip(want_route["routedetail"].as_array().unwrap())
    {
        assert_eq!(json!(d.name), wd["name"], "{name}: detail");
        assert_eq!(
            d.matches.len(),
            wd["match"].as_array().map_or(0, Vec::len),
            "{name}: match"
        );
        let subsets: Vec<Value> = d
            .route
            .as_ref()
            .unwrap()
            .list
            .iter()
            .map(|x| json!({"subset": x.chain[0].name}))
            .collect();
        assert_eq!(Value::Array(subsets), wd["route"], "{name}: route");
    }
}

/// The subscription cases against `mesh::watched_applications` (the nodes Dubbo follows: one
/// per application present, or the entry's `app`). The live crate follows the same nodes in
/// the real ZooKeeper, each from its application's first provider to its last:
/// `tests/tests/live/mesh.rs` tests that.
#[test]
fn subscription_cases() {
    let file = cases();
    assert!(!file.subscription_cases.is_empty(), "no subscription case");
    for case in &file.subscription_cases {
        let options = MeshOptions {
            app: case.entry.get("application").cloned(),
            ..Default::default()
        };
        for (n, step) in case.steps.iter().enumerate() {
            let urls: Vec<Url> = step
                .providers
                .iter()
                .map(|u| Url::parse(u).unwrap())
                .collect();
            let watched: BTreeSet<String> = if step.stop {
                BTreeSet::new()
            } else {
                mesh::watched_applications(&urls, &options)
                    .iter()
                    .map(|app| format!("/dubbo/config/dubbo/{}", mesh::rule_key(app)))
                    .collect()
            };
            let want: BTreeSet<String> = step.watched.iter().cloned().collect();
            assert_eq!(watched, want, "{} step {n}", case.name);
        }
    }
}
