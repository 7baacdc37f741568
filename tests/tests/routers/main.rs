//! The router test harness: every built-in router's cases as data, run through the public
//! API (chain file → default registry → prepared chain state → route).
//!
//! - `tests/routers/<router>.yaml`: one file per built-in router (format below), one test
//!   per file;
//! - `tests/conformance/dubbo-cases.yaml`: the cases transcribed from Apache Dubbo's own
//!   router tests ([`conformance`]), run through the same harness;
//! - [`harness`]: builds the chain, routes traced and untraced, compares the providers and
//!   the exact explain texts, and checks that routing allocates nothing per call.
//!
//! A case file:
//!
//! ```yaml
//! router: group                  # the router type a case's `rule` is for
//! consumer: consumer://...       # optional: the consumer the chain is prepared for
//! providers:                     # named provider lists, one URL per line (index = line)
//!   basic: |
//!     dubbo://10.0.0.0:20880/svc?group=a
//! cases:
//!   - name: one group              # unique in the file
//!     providers: basic             # a name above, or URL lines
//!     rule: {force: false}         # optional: the router's rule (absent: no rule)
//!     chain: {routers: [...]}      # instead of `rule`: a whole chain file
//!     consumer: consumer://...     # optional: overrides the file's
//!     input: [0, 2]                # optional: the candidates entering the chain
//!     degraded: [1]                # optional: live-degraded providers
//!     seed: 7                      # optional: the call's random seed (default 1)
//!     request: {attributes: {group: a}}   # the command line's request format
//!     expect:
//!       providers: [0]             # the indexes left ([] = none)
//!       explain: "..."             # the router's explain reason, or a list: one per router
//!       evaluation: runtime        # optional: cached | runtime
//! ```

mod conformance;
mod harness;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use routechain::core::{Evaluation, Snapshot, Url};
use routechain::rules::{RequestSpec, YamlDoc};
use serde::Deserialize;
use serde_json::Value;

use harness::{Case, Expect, Providers};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CaseFile {
    router: String,
    #[serde(default)]
    consumer: Option<String>,
    #[serde(default)]
    providers: BTreeMap<String, String>,
    cases: Vec<FileCase>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileCase {
    name: String,
    providers: String,
    #[serde(default)]
    rule: Option<Value>,
    #[serde(default)]
    chain: Option<Value>,
    #[serde(default)]
    consumer: Option<String>,
    #[serde(default)]
    input: Option<Vec<usize>>,
    #[serde(default)]
    degraded: Vec<usize>,
    #[serde(default)]
    seed: Option<u64>,
    #[serde(default)]
    request: RequestSpec,
    expect: FileExpect,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileExpect {
    providers: Vec<usize>,
    explain: Explain,
    #[serde(default)]
    evaluation: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Explain {
    One(String),
    Each(Vec<String>),
}

fn cases_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("routers")
}

/// Reads `tests/routers/<name>.yaml` into harness cases.
fn load(name: &str) -> Vec<Case> {
    let path = cases_dir().join(format!("{name}.yaml"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let doc = YamlDoc::parse(path.display().to_string(), &text).unwrap_or_else(|e| panic!("{}", e));
    let file: CaseFile = serde_json::from_value(doc.value().clone())
        .unwrap_or_else(|e| panic!("{}: not a case file: {e}", path.display()));
    assert!(!file.cases.is_empty(), "{name}: no case");
    let mut names = BTreeSet::new();
    file.cases
        .iter()
        .map(|c| {
            assert!(names.insert(&c.name), "{name}: case {:?} twice", c.name);
            let lines = file.providers.get(&c.providers).unwrap_or(&c.providers);
            let snapshot = Snapshot::parse_lines(1, lines)
                .unwrap_or_else(|e| panic!("{name}: {}: providers: {e:?}", c.name));
            let consumer = c
                .consumer
                .as_ref()
                .or(file.consumer.as_ref())
                .map(|u| Url::parse(u).unwrap_or_else(|e| panic!("{name}: {}: {e}", c.name)));
            let chain = match (&c.chain, &c.rule) {
                (Some(chain), None) => chain.clone(),
                (None, rule) => harness::single(&file.router, rule.clone()),
                (Some(_), Some(_)) => panic!("{name}: {}: `chain` or `rule`, not both", c.name),
            };
            let evaluation = c.expect.evaluation.as_deref().map(|e| match e {
                "cached" => Evaluation::Cached,
                "runtime" => Evaluation::Runtime,
                other => panic!("{name}: {}: evaluation {other:?}", c.name),
            });
            Case {
                id: format!("{name}: {}", c.name),
                snapshot: Arc::new(snapshot),
                consumer,
                chain,
                input: c.input.clone(),
                degraded: c.degraded.clone(),
                request: c
                    .request
                    .clone()
                    .into_request()
                    .unwrap_or_else(|e| panic!("{name}: {}: request: {e}", c.name)),
                seed: c.seed.unwrap_or(1),
                expect: Expect {
                    providers: Providers::Exactly(c.expect.providers.clone()),
                    explain: Some(match &c.expect.explain {
                        Explain::One(s) => vec![s.clone()],
                        Explain::Each(v) => v.clone(),
                    }),
                    evaluation,
                },
            }
        })
        .collect()
}

/// Runs every case of `tests/routers/<name>.yaml`; a router has at least five.
fn run_file(name: &str) {
    let cases = load(name);
    assert!(
        cases.len() >= 5,
        "{name}: {} cases, fewer than five",
        cases.len()
    );
    for case in &cases {
        harness::run(case);
    }
}

#[test]
fn mesh() {
    run_file("mesh");
}

#[test]
fn mock() {
    run_file("mock");
}

#[test]
fn tag() {
    run_file("tag");
}

#[test]
fn affinity() {
    run_file("affinity");
}

#[test]
fn condition() {
    run_file("condition");
}

#[test]
fn group() {
    run_file("group");
}

#[test]
fn idc_weight() {
    run_file("idc-weight");
}

#[test]
fn every_case_file_is_run_and_every_built_in_router_has_one() {
    let files: BTreeSet<String> = std::fs::read_dir(cases_dir())
        .expect("tests/routers")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    let tested: BTreeSet<String> = [
        "mock",
        "mesh",
        "tag",
        "affinity",
        "condition",
        "group",
        "idc-weight",
    ]
    .iter()
    .map(|n| format!("{n}.yaml"))
    .collect();
    assert_eq!(
        files, tested,
        "a case file without its #[test] above, or the reverse"
    );
    let types: BTreeSet<String> = routechain::routers::builtin_registry()
        .type_names()
        .map(|t| format!("{t}.yaml"))
        .collect();
    assert_eq!(types, tested, "a built-in router without a case file");
}
