//! `routechain test CASES.yaml`: golden tests for a chain — requests with the providers they
//! must reach, or the share of calls per IDC (or any provider parameter) they must get.
//!
//! ```yaml
//! chain: order.chain.yaml        # relative to this file
//! providers: providers.txt
//! tests:
//!   - name: refund only reaches version 2
//!     request: {method: refund}                   # as --request
//!     expect: {addresses: ["10.0.0.3:20880", "10.0.0.4:20880"]}   # the exact set, any order
//!   - name: an unknown group has no provider
//!     request: {attributes: {group: purple}}
//!     expect: {no_provider: true}
//!   - name: hangzhou split
//!     request: {consumer: "consumer://10.1.0.1/com.acme.OrderService?region=hz"}
//!     calls: 20000
//!     seed: 1
//!     expect: {share_by: idc, shares: {hz1: 70, hz2: 30}, tolerance: 2}   # percent, ± points
//! ```
//!
//! Output: one `PASS`/`FAIL` line per test, then the coverage (conditions, tags, route-table
//! cells and groups no test reached), then `test: N passed, M failed`. Exit 0 all passed, 1
//! a test failed, 2 invalid input.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use routechain::balance::Cluster;
use routechain::core::{CallState, FieldPath, RuleDoc, Snapshot, Trace};
use routechain::rules::load::{self, LoadError};
use routechain::rules::{ChainFile, RequestSpec, RuleSource, YamlDoc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::route::route_once;

/// Arguments of `test`.
#[derive(Debug, clap::Args)]
pub struct TestArgs {
    /// The test cases (YAML): `chain`, `providers` and `tests` (`-`: standard input, its
    /// `chain` and `providers` then relative to the working directory).
    #[arg(value_name = "CASES.yaml")]
    cases: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
}

/// Output formats of `test`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    /// `PASS  name` or `FAIL  name: why` per test, the coverage lines, then
    /// `test: N passed, M failed`.
    Text,
    /// `{"tests": [{"name", "pass", "message"}], "uncovered": [...], "passed", "failed"}`.
    Json,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Cases {
    chain: String,
    providers: String,
    tests: Vec<Case>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    name: String,
    #[serde(default)]
    request: Option<Value>,
    #[serde(default)]
    calls: Option<u64>,
    #[serde(default)]
    seed: Option<u64>,
    expect: Expect,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Expect {
    #[serde(default)]
    addresses: Option<Vec<String>>,
    #[serde(default)]
    no_provider: Option<bool>,
    #[serde(default)]
    share_by: Option<String>,
    #[serde(default)]
    shares: Option<BTreeMap<String, f64>>,
    #[serde(default)]
    tolerance: Option<f64>,
}

/// The calls of a share test when `calls` is not given.
const DEFAULT_CALLS: u64 = 10_000;
/// The tolerance of a share test, in percentage points, when `tolerance` is not given.
const DEFAULT_TOLERANCE: f64 = 1.0;

#[derive(Serialize)]
struct Outcome {
    name: String,
    pass: bool,
    #[serde(skip_serializing_if = "String::is_empty")]
    message: String,
}

#[derive(Serialize)]
struct Output<'a> {
    tests: &'a [Outcome],
    uncovered: &'a [String],
    passed: usize,
    failed: usize,
}

/// Runs `test`.
pub fn run(args: &TestArgs) -> ExitCode {
    super::exit_code(test(args))
}

fn invalid(doc: &YamlDoc, path: FieldPath, message: impl Into<String>) -> LoadError {
    LoadError::Invalid(vec![
        doc.locate_error(&routechain::core::RuleError::new(path, message)),
    ])
}

fn test(args: &TestArgs) -> Result<ExitCode, LoadError> {
    let origin = routechain::rules::input::origin_of(&args.cases);
    let text = routechain::rules::input::read_input(&args.cases).map_err(|e| vec![e])?;
    let doc = YamlDoc::parse(origin.as_str(), &text).map_err(|e| vec![e])?;
    let root = FieldPath::root();
    let cases: Cases = RuleDoc::new(doc.value(), &root)
        .parse()
        .map_err(|e| vec![doc.locate_error(&e)])?;
    if cases.tests.is_empty() {
        return Err(invalid(
            &doc,
            root.key("tests"),
            "`tests` is empty: nothing was tested (give at least one test)",
        ));
    }
    let base = args.cases.parent().unwrap_or(Path::new("."));
    let chain = ChainFile::load_with(&base.join(&cases.chain), &routechain::registry())?;
    let snapshot = Arc::new(load::load_providers(&base.join(&cases.providers), 1)?);
    let mut coverage = Coverage::new(&chain, &snapshot);
    let mut outcomes = Vec::new();
    for (i, case) in cases.tests.iter().enumerate() {
        let path = root.key("tests").index(i);
        let request = match &case.request {
            None => RequestSpec::default(),
            Some(v) => RuleDoc::new(v, &path.key("request"))
                .parse::<RequestSpec>()
                .map_err(|e| vec![doc.locate_error(&e)])?,
        };
        let request = request
            .into_request()
            .map_err(|e| invalid(&doc, path.key("request").key("consumer"), e.to_string()))?;
        let state = load::build_state(
            &chain,
            &routechain::registry(),
            snapshot.clone(),
            request.consumer.clone(),
        )?;
        let seed = case.seed.unwrap_or(1);
        let routed = route_once(&state, None, &request, &mut CallState::seeded(seed));
        coverage.reach(&routed.trace);
        let e = &case.expect;
        let message = match (&e.addresses, e.no_provider, &e.share_by, &e.shares) {
            (Some(want), None, None, None) => {
                let got: BTreeSet<&str> = routed
                    .providers
                    .iter()
                    .map(|p| p.address.as_str())
                    .collect();
                let want_set: BTreeSet<&str> = want.iter().map(String::as_str).collect();
                if got == want_set {
                    String::new()
                } else if let Some(err) = &routed.error {
                    format!(
                        "no provider ({}), expected {}",
                        err.message,
                        list(&want_set)
                    )
                } else {
                    format!("got {}, expected {}", list(&got), list(&want_set))
                }
            }
            (None, Some(want), None, None) => match (&routed.error, want) {
                (Some(_), true) | (None, false) => String::new(),
                (None, true) => format!(
                    "got {}, expected no provider",
                    list(
                        &routed
                            .providers
                            .iter()
                            .map(|p| p.address.as_str())
                            .collect()
                    )
                ),
                (Some(err), false) => format!("no provider ({}), expected some", err.message),
            },
            (None, None, Some(by), Some(want)) => {
                let service = Cluster::new(state, chain.service_config.clone());
                let calls = case.calls.unwrap_or(DEFAULT_CALLS);
                let tally = super::simulate::tally(&service, &request, calls, seed);
                let mut got: BTreeMap<&str, u64> = BTreeMap::new();
                for (p, &n) in snapshot.providers().iter().zip(&tally.counts) {
                    if n > 0 {
                        *got.entry(p.get(by).unwrap_or("")).or_default() += n;
                        coverage.landed(p);
                    }
                }
                shares_message(
                    by,
                    want,
                    &got,
                    calls,
                    e.tolerance.unwrap_or(DEFAULT_TOLERANCE),
                )
            }
            _ => {
                return Err(invalid(
                    &doc,
                    path.key("expect"),
                    "expect one of: `addresses: [...]`, `no_provider: true|false`, or \
                     `share_by: PARAM` with `shares: {VALUE: PERCENT}` (and `tolerance`)",
                ));
            }
        };
        if e.shares.is_none() {
            for p in &routed.providers {
                coverage.landed(&snapshot.providers()[p.index]);
            }
        }
        outcomes.push(Outcome {
            name: case.name.clone(),
            pass: message.is_empty(),
            message,
        });
    }
    let uncovered = coverage.uncovered();
    let passed = outcomes.iter().filter(|o| o.pass).count();
    let failed = outcomes.len() - passed;
    match args.format {
        Format::Json => outln!(
            "{}",
            serde_json::to_string_pretty(&Output {
                tests: &outcomes,
                uncovered: &uncovered,
                passed,
                failed,
            })
            .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
        ),
        Format::Text => {
            for o in &outcomes {
                if o.pass {
                    outln!("PASS  {}", o.name);
                } else {
                    outln!("FAIL  {}: {}", o.name, o.message);
                }
            }
            if uncovered.is_empty() {
                outln!("coverage: every condition, tag, route-table cell and group was reached");
            } else {
                outln!("coverage: {} reached by no test:", uncovered.len());
                for u in &uncovered {
                    outln!("  {u}");
                }
            }
            outln!("test: {passed} passed, {failed} failed");
        }
    }
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn list(set: &BTreeSet<&str>) -> String {
    if set.is_empty() {
        "none".into()
    } else {
        format!("[{}]", set.iter().copied().collect::<Vec<_>>().join(", "))
    }
}

fn shares_message(
    by: &str,
    want: &BTreeMap<String, f64>,
    got: &BTreeMap<&str, u64>,
    calls: u64,
    tolerance: f64,
) -> String {
    let pct = |n: u64| {
        if calls == 0 {
            0.0
        } else {
            100.0 * n as f64 / calls as f64
        }
    };
    let mut wrong = Vec::new();
    for (value, &expected) in want {
        let actual = pct(got.get(value.as_str()).copied().unwrap_or(0));
        if (actual - expected).abs() > tolerance {
            wrong.push(format!(
                "{by} {value} {actual:.2}% (expected {expected} ± {tolerance})"
            ));
        }
    }
    for (value, &n) in got {
        let actual = pct(n);
        if !want.contains_key(*value) && actual > tolerance {
            let shown = if value.is_empty() { "(none)" } else { value };
            wrong.push(format!(
                "{by} {shown} {actual:.2}% (expected 0 ± {tolerance})"
            ));
        }
    }
    wrong.join(", ")
}

/// What the chain has that a test can reach: conditions, tags, route-table cells, groups.
struct Coverage {
    /// (label, reached).
    items: Vec<(String, bool)>,
    /// Per trace step (the chain's run order): the items it can reach, with the text the
    /// step's reason has when it reached one.
    by_step: Vec<Vec<(usize, String)>>,
    /// Route-table cells by (region param, IDC param, region, IDC): reached when a call
    /// lands on a provider of that region and IDC.
    cells: Vec<(String, String, String, String, usize)>,
}

impl Coverage {
    fn new(chain: &ChainFile, snapshot: &Snapshot) -> Self {
        let mut cov = Coverage {
            items: Vec::new(),
            by_step: Vec::new(),
            cells: Vec::new(),
        };
        let registry = routechain::registry();
        // The run order: by priority, ties in file order (as the chain sorts).
        let mut order: Vec<(i32, usize)> = Vec::new();
        for def in chain.entries.iter() {
            let priority = chain
                .compile_entry(&registry, def, routechain::rules::RuleOverride::Own)
                .map(|e| e.priority)
                .unwrap_or(i32::MAX);
            order.push((priority, def.index));
        }
        order.sort_by_key(|&(p, _)| p);
        for (_, index) in order {
            let def = &chain.entries[index];
            let value = match &def.rule {
                RuleSource::Inline => chain.doc.value_at(&def.path().key("rule")),
                RuleSource::File { doc, .. } => doc.value_at(&FieldPath::root()),
                RuleSource::None => None,
            }
            .unwrap_or(Value::Null);
            let at = format!("routers[{index}] ({})", def.type_name);
            let mut step = Vec::new();
            match def.type_name.as_str() {
                "condition" => {
                    let conds = value.get("conditions").and_then(Value::as_array);
                    for (i, c) in conds.into_iter().flatten().enumerate() {
                        let text = c
                            .as_str()
                            .map(str::to_string)
                            .unwrap_or_else(|| c.to_string());
                        step.push((
                            cov.item(format!("{at} condition #{i}: {text}")),
                            format!("condition #{i}: when matched"),
                        ));
                    }
                }
                "tag" => {
                    let mut names: BTreeSet<String> = value
                        .get("tags")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter_map(|t| t.get("name").and_then(Value::as_str))
                        .map(str::to_string)
                        .collect();
                    names.extend(
                        snapshot
                            .providers()
                            .iter()
                            .filter_map(|p| p.param("dubbo.tag"))
                            .map(str::to_string),
                    );
                    for n in names {
                        step.push((cov.item(format!("{at} tag {n}")), format!("tag {n:?}:")));
                    }
                }
                "group" => {
                    let param = value
                        .get("provider_param")
                        .and_then(Value::as_str)
                        .unwrap_or("group");
                    let groups: BTreeSet<&str> = snapshot
                        .providers()
                        .iter()
                        .filter_map(|p| p.get(param))
                        .flat_map(|v| v.split(',').map(str::trim).filter(|g| !g.is_empty()))
                        .collect();
                    for g in groups {
                        step.push((cov.item(format!("{at} group {g}")), format!("group {g:?}")));
                    }
                }
                "idc-weight" => {
                    let param = |k: &str, d: &str| {
                        value
                            .get(k)
                            .and_then(Value::as_str)
                            .unwrap_or(d)
                            .to_string()
                    };
                    let tables = value.get("route_tables").and_then(Value::as_object);
                    for (region, table) in tables.into_iter().flatten() {
                        for idc in table.as_object().into_iter().flatten().map(|(k, _)| k) {
                            let item = cov.item(format!("{at} route table {region} → {idc}"));
                            cov.cells.push((
                                param("region_param", "region"),
                                param("idc_param", "idc"),
                                region.to_ascii_lowercase(),
                                idc.to_ascii_lowercase(),
                                item,
                            ));
                        }
                    }
                }
                _ => {}
            }
            cov.by_step.push(step);
        }
        cov
    }

    fn item(&mut self, label: String) -> usize {
        self.items.push((label, false));
        self.items.len() - 1
    }

    /// Marks what a routed request's trace reached.
    fn reach(&mut self, trace: &Trace) {
        for (step, items) in trace.steps.iter().zip(&self.by_step) {
            for (item, needle) in items {
                if step.reason.contains(needle.as_str()) {
                    self.items[*item].1 = true;
                }
            }
        }
    }

    /// Marks the route-table cell of a provider a call landed on.
    fn landed(&mut self, p: &routechain::core::Url) {
        for (rp, ip, region, idc, item) in &self.cells {
            let same = |k: &str, v: &str| p.get(k).is_some_and(|x| x.eq_ignore_ascii_case(v));
            if same(rp, region) && same(ip, idc) {
                self.items[*item].1 = true;
            }
        }
    }

    fn uncovered(&self) -> Vec<String> {
        self.items
            .iter()
            .filter(|(_, r)| !r)
            .map(|(l, _)| l.clone())
            .collect()
    }
}
