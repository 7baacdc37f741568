//! `routechain simulate`: route and balance one request many times, count where it lands.
//!
//! Operators use it to see what a route-table or canary change does before pushing it:
//! the chain file's routers and its `load_balance` settings run exactly as in a caller, with
//! a seeded random source so a run can be repeated. `--group-by PARAM` sums the calls per
//! value of a provider parameter (an IDC, a group, a tag); `--against OTHER.chain.yaml` runs
//! a second chain on the same seeded draws and shows the change per row. No call is made, so
//! `leastactive` and `p2c` see no in-flight calls (they then behave as weighted / uniform
//! random).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use routechain::balance::{Caller, Cluster, SelectError};
use routechain::core::{CallState, Request, Snapshot, Trace};
use routechain::rules::ChainFile;
use routechain::rules::load::LoadError;
use serde::Serialize;

use super::EXIT_NO_PROVIDER;
use super::route::RouteError;

/// Arguments of `simulate`.
#[derive(Debug, clap::Args)]
pub struct SimulateArgs {
    /// The chain (with its routers and `load_balance` settings), providers and request.
    #[command(flatten)]
    inputs: super::route::InputArgs,
    /// How many calls to route and balance.
    #[arg(long, default_value_t = 10_000)]
    calls: u64,
    /// Seed for the random draws (route tables, weighted routers, balancers).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Json)]
    format: Format,
    /// Also sum the calls per value of this provider parameter (`idc`, `region`, `group`,
    /// `dubbo.tag`, any key; providers without it count under "").
    #[arg(long, value_name = "PARAM")]
    group_by: Option<String>,
    /// List providers (and groups) that got no call too.
    #[arg(long)]
    all: bool,
    /// Run this chain too, on the same seeded draws, and show the change per row.
    #[arg(long, value_name = "OTHER.chain.yaml")]
    against: Option<PathBuf>,
    /// Also show the explain trace of the first call: what each router did and why (the
    /// IDC-weight router's effective weights, spillover and panic, say).
    #[arg(long)]
    explain: bool,
}

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// `{"calls": N, "empty": k, "counts": [...], "groups"?: [...], "error"?: {...},
    /// "trace"?: [...]}`;
    /// with `--against`, `{"base": <report>, "against": <report>}`.
    Json,
    /// A table with shares and a bar chart.
    Table,
}

#[derive(Serialize, Clone)]
struct Count {
    index: usize,
    address: String,
    count: u64,
}

#[derive(Serialize, Clone)]
struct Group {
    value: String,
    count: u64,
    share: f64,
}

/// One chain's report.
#[derive(Serialize)]
struct Report {
    calls: u64,
    empty: u64,
    counts: Vec<Count>,
    #[serde(skip_serializing_if = "Option::is_none")]
    groups: Option<Vec<Group>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<RouteError>,
    /// The first call's routing, with `--explain`.
    #[serde(skip_serializing_if = "Option::is_none")]
    trace: Option<Trace>,
    /// The call parameters of the request's method on the routed set's first provider.
    parameters: Vec<super::route::Parameter>,
    #[serde(skip)]
    balancer: String,
}

impl Report {
    fn all_empty(&self) -> bool {
        self.calls > 0 && self.empty == self.calls
    }
}

/// Runs `simulate`; an input error exits 2, every call without a provider exits 3.
pub fn run(args: &SimulateArgs) -> ExitCode {
    super::exit_code(simulate(args))
}

/// Calls per provider of `calls` seeded selections through `service`.
pub(crate) struct Tally {
    /// Calls per provider index.
    pub counts: Vec<u64>,
    /// Calls that found no provider.
    pub empty: u64,
    /// The last reason a call found no provider.
    pub last_error: Option<SelectError>,
}

/// Routes and balances `request` `calls` times with a random source seeded with `seed`.
pub(crate) fn tally(service: &Cluster, request: &Request, calls: u64, seed: u64) -> Tally {
    let mut call = Caller::seeded(seed);
    let mut t = Tally {
        counts: vec![0; service.state().snapshot().len()],
        empty: 0,
        last_error: None,
    };
    for _ in 0..calls {
        match service.select(request, &[], &mut call) {
            Ok(s) => t.counts[s.index()] += 1,
            Err(e) => {
                t.empty += 1;
                t.last_error = Some(e);
            }
        }
    }
    t
}

fn report(
    chain: &ChainFile,
    snapshot: Arc<Snapshot>,
    request: &Request,
    args: &SimulateArgs,
) -> Result<Report, LoadError> {
    // The providers served: the chain file's override rules merged in.
    let service = super::route::build_service(chain, (*snapshot).clone(), request)?;
    let snapshot = service.state().snapshot().clone();
    // The first call's routing, traced on its own call state with the same seed, so it
    // draws what the first counted call draws.
    let trace = args.explain.then(|| {
        let mut trace = Trace::default();
        let _ =
            service
                .state()
                .route_traced(request, &mut CallState::seeded(args.seed), &mut trace);
        trace
    });
    let first = {
        let mut call = CallState::seeded(args.seed);
        service
            .state()
            .route(request, &mut call)
            .ok()
            .and_then(|()| call.candidates.first())
    };
    let parameters = super::route::parameters(&service, request, first);
    let balancer = parameters
        .iter()
        .find(|p| p.key == "loadbalance")
        .map_or_else(String::new, |p| p.value.clone());
    let t = tally(&service, request, args.calls, args.seed);
    let counts: Vec<Count> = t
        .counts
        .iter()
        .enumerate()
        .filter(|(_, c)| args.all || **c > 0)
        .map(|(index, &count)| Count {
            index,
            address: snapshot.providers()[index].address().to_string(),
            count,
        })
        .collect();
    let groups = args.group_by.as_ref().map(|param| {
        let mut by: BTreeMap<String, u64> = BTreeMap::new();
        for (i, p) in snapshot.providers().iter().enumerate() {
            let c = t.counts[i];
            if c > 0 || args.all {
                *by.entry(p.get(param).unwrap_or("").to_string())
                    .or_default() += c;
            }
        }
        by.into_iter()
            .map(|(value, count)| Group {
                value,
                count,
                share: share(count, args.calls),
            })
            .collect()
    });
    let error = if args.calls > 0 && t.empty == args.calls {
        t.last_error.as_ref().map(route_error)
    } else {
        None
    };
    Ok(Report {
        calls: args.calls,
        empty: t.empty,
        counts,
        groups,
        error,
        trace,
        parameters,
        balancer,
    })
}

/// The `route` command's `"error"` object for a call that found no provider.
fn route_error(e: &SelectError) -> RouteError {
    super::route::no_provider(e).unwrap_or_else(|| RouteError {
        kind: "unavailable",
        router: None,
        message: e.to_string(),
    })
}

/// A percentage with two decimals.
fn share(count: u64, calls: u64) -> f64 {
    if calls == 0 {
        0.0
    } else {
        (10_000.0 * count as f64 / calls as f64).round() / 100.0
    }
}

fn simulate(args: &SimulateArgs) -> Result<ExitCode, LoadError> {
    let (chain, providers, request) = super::route::load_inputs(&args.inputs)?;
    let snapshot = Arc::new(providers);
    let base = report(&chain, snapshot.clone(), &request, args)?;
    let against = match &args.against {
        None => None,
        Some(path) => {
            let other = ChainFile::load_with(path, &routechain::registry())?;
            Some(report(&other, snapshot, &request, args)?)
        }
    };
    let all_empty = base.all_empty() || against.as_ref().is_some_and(Report::all_empty);
    match (args.format, &against) {
        (Format::Json, None) => outln!("{}", pretty(&base)),
        (Format::Json, Some(other)) => outln!(
            "{}",
            pretty(&serde_json::json!({"base": base, "against": other}))
        ),
        (Format::Table, None) => out!("{}", table(&base, None, args)),
        (Format::Table, Some(other)) => out!("{}", table(&base, Some(other), args)),
    }
    Ok(if all_empty {
        ExitCode::from(EXIT_NO_PROVIDER)
    } else {
        ExitCode::SUCCESS
    })
}

fn pretty(v: &impl Serialize) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}

const BAR: usize = 40;

/// A table of rows `(key, label, count)`, with shares, the other report's share and the
/// change (keyed by `key`), and a bar; `numbered`: the key is shown as the first column.
fn rows_table(
    head: &str,
    rows: &[(String, String, u64)],
    other: Option<&BTreeMap<String, u64>>,
    calls: u64,
    numbered: bool,
) -> String {
    let mut header = vec![head, "count", "share"];
    if numbered {
        header.insert(0, "#");
    }
    if other.is_some() {
        header.extend(["against", "change"]);
    }
    // No bar column when no row has a call (`--calls 0`): it would be empty.
    let bars = rows.iter().any(|r| r.2 > 0);
    if bars {
        header.push("");
    }
    let max = rows.iter().map(|r| r.2).max().unwrap_or(0).max(1);
    let body = rows.iter().map(|(key, label, count)| {
        let mut cells = vec![
            label.clone(),
            count.to_string(),
            format!("{:.2}%", share(*count, calls)),
        ];
        if numbered {
            cells.insert(0, key.clone());
        }
        if let Some(other) = other {
            let theirs = other.get(key).copied().unwrap_or(0);
            cells.push(format!("{:.2}%", share(theirs, calls)));
            cells.push(format!(
                "{:+.2}",
                share(theirs, calls) - share(*count, calls)
            ));
        }
        if bars {
            cells.push("█".repeat((*count as usize * BAR).div_ceil(max as usize)));
        }
        cells
    });
    let first = usize::from(numbered);
    let right: Vec<usize> = [0]
        .into_iter()
        .filter(|_| numbered)
        .chain([first + 1, first + 2])
        .chain(other.map(|_| [first + 3, first + 4]).into_iter().flatten())
        .collect();
    super::table(header, body, &right)
}

fn table(base: &Report, against: Option<&Report>, args: &SimulateArgs) -> String {
    let mut s = format!(
        "calls: {}   routed: {}   empty: {}   (load_balance: {}, seed {})\n",
        base.calls,
        base.calls - base.empty,
        base.empty,
        base.balancer,
        args.seed
    );
    if let Some(a) = against {
        s.push_str(&format!(
            "against {}: routed: {}   empty: {}   (load_balance: {})\n",
            args.against
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            a.calls - a.empty,
            a.empty,
            a.balancer
        ));
    }
    s.push('\n');
    // Rows of both reports, keyed by provider index; a row either side has is shown.
    let mut keys: BTreeMap<usize, (String, u64)> = base
        .counts
        .iter()
        .map(|c| (c.index, (c.address.clone(), c.count)))
        .collect();
    let other: Option<BTreeMap<String, u64>> = against.map(|a| {
        for c in &a.counts {
            keys.entry(c.index).or_insert((c.address.clone(), 0));
        }
        a.counts
            .iter()
            .map(|c| (c.index.to_string(), c.count))
            .collect()
    });
    let mut rows: Vec<(String, String, u64)> = keys
        .into_iter()
        .map(|(i, (addr, n))| (i.to_string(), addr, n))
        .collect();
    if base.empty > 0 || against.is_some_and(|a| a.empty > 0) {
        rows.push(("-".into(), "(no provider)".into(), base.empty));
    }
    let other = other.map(|mut o| {
        if let Some(a) = against {
            o.insert("-".into(), a.empty);
        }
        o
    });
    s.push_str(&rows_table(
        "address",
        &rows,
        other.as_ref(),
        base.calls,
        true,
    ));
    if let (Some(param), Some(groups)) = (&args.group_by, &base.groups) {
        let mut keys: BTreeMap<String, u64> =
            groups.iter().map(|g| (g.value.clone(), g.count)).collect();
        let other: Option<BTreeMap<String, u64>> =
            against.and_then(|a| a.groups.as_ref()).map(|gs| {
                for g in gs {
                    keys.entry(g.value.clone()).or_insert(0);
                }
                gs.iter().map(|g| (g.value.clone(), g.count)).collect()
            });
        let rows: Vec<(String, String, u64)> = keys
            .into_iter()
            .map(|(v, n)| (v.clone(), if v.is_empty() { "(none)".into() } else { v }, n))
            .collect();
        s.push('\n');
        s.push_str(&rows_table(param, &rows, other.as_ref(), base.calls, false));
    }
    s.push_str("\ncall parameters:");
    for p in &base.parameters {
        s.push_str(&format!("  {} {} ({})", p.key, p.value, p.source));
    }
    s.push('\n');
    if let Some(trace) = &base.trace {
        s.push_str("\nfirst call:\n");
        for step in &trace.steps {
            s.push_str(&format!("  {}: {}\n", step.router, step.reason));
        }
    }
    s
}
