//! The Dubbo conformance cases (`conformance/dubbo-cases.yaml`), run through the public
//! API: the file is read with `routechain::rules::YamlDoc`, providers are built with
//! `Url::from_parts`, routers come from `routechain::routers::builtin_registry()` through a
//! `RouterSpec`, are prepared on the case's snapshot, and route the case's request.
//!
//! One test per router kind (`condition`, `condition_v31`, `tag`); each runs every case of
//! its kind and fails when there is none.

use std::collections::BTreeMap;
use std::path::Path;

use routechain::core::{
    BitSet, FastRng, FieldPath, PrepareContext, Request, RouteContext, RouterSpec, RuleDoc,
    Snapshot, Url,
};
use routechain::rules::YamlDoc;
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Debug, Deserialize)]
struct CaseFile {
    provider_sets: BTreeMap<String, Vec<ProviderDef>>,
    cases: Vec<Case>,
}

#[derive(Debug, Clone, Deserialize)]
struct ProviderDef {
    #[serde(default)]
    id: String,
    protocol: String,
    host: String,
    port: u16,
    path: String,
    #[serde(default)]
    params: BTreeMap<String, Value>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Providers {
    Named(String),
    Inline(Vec<ProviderDef>),
}

#[derive(Debug, Deserialize)]
struct Case {
    id: String,
    router: String,
    #[serde(default)]
    kind: Option<String>,
    rule: Option<RuleSpec>,
    providers: Providers,
    #[serde(default)]
    available: Option<Vec<String>>,
    request: RequestDef,
    expect: Expect,
}

#[derive(Debug, Deserialize)]
struct RuleSpec {
    format: String,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    yaml: Option<String>,
    #[serde(default)]
    force: Option<bool>,
    #[serde(default)]
    enabled: Option<bool>,
}

#[derive(Debug, Deserialize)]
struct RequestDef {
    consumer: ProviderDef,
    invocation: Option<Invocation>,
}

#[derive(Debug, Deserialize)]
struct Invocation {
    method: Option<String>,
    #[serde(default)]
    args: Vec<Value>,
    #[serde(default)]
    attachments: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
struct Expect {
    #[serde(default)]
    providers: Option<Vec<String>>,
    #[serde(default)]
    one_of: Option<Vec<Vec<String>>>,
    #[serde(default)]
    all_outcomes_observed_in_trials: Option<usize>,
}

fn load() -> CaseFile {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance/dubbo-cases.yaml");
    let text = std::fs::read_to_string(&path).expect("the conformance file is readable");
    let doc = YamlDoc::parse(path.display().to_string(), &text).expect("the file is YAML");
    serde_json::from_value(doc.value).expect("the file follows the case schema")
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn url(p: &ProviderDef) -> Url {
    let params: Vec<(String, String)> = p
        .params
        .iter()
        .map(|(k, v)| (k.clone(), scalar(v)))
        .collect();
    Url::from_parts(
        &p.protocol,
        &p.host,
        p.port,
        &p.path,
        params.iter().map(|(k, v)| (k.as_str(), v.as_str())),
    )
}

fn rule_doc(spec: &RuleSpec) -> Value {
    match spec.format.as_str() {
        "condition_text" => json!({
            "conditions": [spec.text.as_deref().expect("condition_text has `text`")],
            "force": spec.force.unwrap_or(false),
            "enabled": spec.enabled.unwrap_or(true),
        }),
        _ => {
            let yaml = spec.yaml.as_deref().expect("a raw rule format has `yaml`");
            YamlDoc::parse("rule", yaml)
                .expect("the rule is YAML")
                .value
        }
    }
}

fn request(def: &RequestDef) -> Request {
    let mut r = Request::new();
    if let Some(inv) = &def.invocation {
        r.method = inv.method.clone();
        r.arguments = inv.args.clone();
        for (k, v) in &inv.attachments {
            r = r.with_attachment(k, v);
        }
    }
    r
}

/// The registry type that serves a case's `router`.
fn type_name(router: &str) -> &str {
    match router {
        "condition" | "condition_v31" => "condition",
        other => other,
    }
}

fn run_cases(kind: &str) {
    let file = load();
    let registry = routechain::routers::builtin_registry();
    let mut ran = 0;
    for case in file.cases.iter().filter(|c| c.router == kind) {
        assert!(
            case.kind.as_deref().is_none_or(|k| k == "route"),
            "{}: unsupported case kind {:?}",
            case.id,
            case.kind
        );
        let providers: Vec<ProviderDef> = match &case.providers {
            Providers::Named(name) => file.provider_sets[name].clone(),
            Providers::Inline(list) => list.clone(),
        };
        let snapshot = Snapshot::new(1, providers.iter().map(url).collect::<Vec<_>>());
        let id_of = |i: usize| providers[i].id.clone();
        let index_of = |id: &str| {
            providers
                .iter()
                .position(|p| p.id == id)
                .unwrap_or_else(|| panic!("{}: unknown provider id {id}", case.id))
        };
        let consumer = url(&case.request.consumer);
        let req = request(&case.request);

        let factory = registry
            .get(type_name(kind))
            .unwrap_or_else(|| panic!("router type {kind} is registered"));
        let entry = json!({"type": type_name(kind)});
        let rule = case.rule.as_ref().map(rule_doc);
        let (entry_path, rule_path) = (FieldPath::root(), FieldPath::root());
        let router = factory
            .build(&RouterSpec {
                type_name: type_name(kind),
                entry: RuleDoc::new(&entry, &entry_path),
                rule: rule.as_ref().map(|r| RuleDoc::new(r, &rule_path)),
                base_dir: None,
                service: None,
            })
            .unwrap_or_else(|e| panic!("{}: the rule compiles: {e:?}", case.id));
        let prepared = router
            .prepare(&PrepareContext {
                snapshot: &snapshot,
                consumer: &consumer,
                service: None,
            })
            .unwrap_or_else(|e| panic!("{}: prepares: {e}", case.id));
        let input = match &case.available {
            None => BitSet::full(snapshot.len()),
            Some(ids) => BitSet::from_indexes(snapshot.len(), ids.iter().map(|id| index_of(id))),
        };
        let mut rng = FastRng::seeded(20_241_024);
        let route_once = |rng: &mut FastRng| -> Vec<String> {
            let mut candidates = input.clone();
            let mut builder = RouteContext::builder(&req, &snapshot)
                .consumer(&consumer, true)
                .rng(rng)
                .explain(true);
            prepared.route(&mut builder.context(), &mut candidates);
            candidates.iter().map(id_of).collect()
        };

        if let Some(want) = &case.expect.providers {
            let got = route_once(&mut rng);
            assert_eq!(&got, want, "case {}", case.id);
        }
        if let Some(outcomes) = &case.expect.one_of {
            // Weighted choices: every result is one of the listed sets and, when the case
            // says so, every listed set occurs within the stated number of trials. (Dubbo's
            // off-by-one bias towards the first destination is a deliberate difference; the
            // listed outcomes do not depend on it.)
            let trials = case.expect.all_outcomes_observed_in_trials.unwrap_or(1);
            let mut seen = vec![false; outcomes.len()];
            for _ in 0..trials {
                let got = route_once(&mut rng);
                let k = outcomes
                    .iter()
                    .position(|o| *o == got)
                    .unwrap_or_else(|| panic!("case {}: {got:?} is none of {outcomes:?}", case.id));
                seen[k] = true;
            }
            if case.expect.all_outcomes_observed_in_trials.is_some() {
                assert!(
                    seen.iter().all(|s| *s),
                    "case {}: outcomes seen {seen:?}",
                    case.id
                );
            }
        }
        assert!(
            case.expect.providers.is_some() || case.expect.one_of.is_some(),
            "case {}: no expectation",
            case.id
        );
        ran += 1;
    }
    assert!(ran > 0, "no conformance case for router kind {kind}");
}

#[test]
fn condition() {
    run_cases("condition");
}

#[test]
fn condition_v31() {
    run_cases("condition_v31");
}

#[test]
fn tag() {
    run_cases("tag");
}
