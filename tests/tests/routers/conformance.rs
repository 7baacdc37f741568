//! The Dubbo conformance cases (`tests/conformance/dubbo-cases.yaml`, transcribed from Apache
//! Dubbo's router unit tests) run through the router harness: providers are built with
//! `Url::from_parts`, the case's router gets the case's rule as one chain entry prepared for
//! the case's consumer, and the result is compared by provider id. Dubbo has no explain
//! texts, so only the providers (and zero allocation) are checked.
//!
//! One test per router kind (`condition`, `condition_v31`, `tag`); each runs every case of
//! its kind and fails when there is none.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use routechain::core::{Request, Snapshot, Url};
use routechain::rules::YamlDoc;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::harness::{self, Case, Expect, Providers};

#[derive(Debug, Deserialize)]
struct CaseFile {
    provider_sets: BTreeMap<String, Vec<ProviderDef>>,
    cases: Vec<DubboCase>,
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
enum ProvidersDef {
    Named(String),
    Inline(Vec<ProviderDef>),
}

#[derive(Debug, Deserialize)]
struct DubboCase {
    id: String,
    router: String,
    #[serde(default)]
    kind: Option<String>,
    rule: Option<RuleSpec>,
    providers: ProvidersDef,
    #[serde(default)]
    available: Option<Vec<String>>,
    request: RequestDef,
    expect: ExpectDef,
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
struct ExpectDef {
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
    serde_json::from_value(doc.value().clone()).expect("the file follows the case schema")
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
                .value()
                .clone()
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

/// The harness case of a Dubbo case.
fn case(file: &CaseFile, c: &DubboCase) -> Case {
    assert!(
        c.kind.as_deref().is_none_or(|k| k == "route"),
        "{}: unsupported case kind {:?}",
        c.id,
        c.kind
    );
    let providers: &[ProviderDef] = match &c.providers {
        ProvidersDef::Named(name) => &file.provider_sets[name],
        ProvidersDef::Inline(list) => list,
    };
    let index_of = |id: &String| {
        providers
            .iter()
            .position(|p| p.id == *id)
            .unwrap_or_else(|| panic!("{}: unknown provider id {id}", c.id))
    };
    let indexes = |ids: &[String]| ids.iter().map(index_of).collect::<Vec<_>>();
    let expected = match (&c.expect.providers, &c.expect.one_of) {
        (Some(ids), None) => Providers::Exactly(indexes(ids)),
        (None, Some(sets)) => Providers::OneOf {
            sets: sets.iter().map(|s| indexes(s)).collect(),
            trials: c.expect.all_outcomes_observed_in_trials.unwrap_or(1),
            all_seen: c.expect.all_outcomes_observed_in_trials.is_some(),
        },
        _ => panic!("{}: one expectation, `providers` or `one_of`", c.id),
    };
    Case {
        id: format!("dubbo-cases: {}", c.id),
        snapshot: Arc::new(Snapshot::new(
            1,
            providers.iter().map(url).collect::<Vec<_>>(),
        )),
        consumer: Some(url(&c.request.consumer)),
        chain: harness::single(type_name(&c.router), c.rule.as_ref().map(rule_doc)),
        input: c.available.as_deref().map(indexes),
        degraded: Vec::new(),
        request: request(&c.request),
        seed: 20_241_024,
        expect: Expect {
            providers: expected,
            explain: None,
            evaluation: None,
        },
    }
}

fn run_kind(kind: &str) {
    let file = load();
    let mut ran = 0;
    for c in file.cases.iter().filter(|c| c.router == kind) {
        harness::run(&case(&file, c));
        ran += 1;
    }
    assert!(ran > 0, "no conformance case for router kind {kind}");
}

#[test]
fn dubbo_condition() {
    run_kind("condition");
}

#[test]
fn dubbo_condition_v31() {
    run_kind("condition_v31");
}

#[test]
fn dubbo_tag() {
    run_kind("tag");
}

#[test]
fn every_dubbo_case_is_run() {
    let file = load();
    for c in &file.cases {
        assert!(
            ["condition", "condition_v31", "tag"].contains(&c.router.as_str()),
            "{}: router kind {} has no test above",
            c.id,
            c.router
        );
    }
}
