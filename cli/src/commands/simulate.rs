//! `routechain simulate`: route and balance one request many times, count where it lands.
//!
//! Operators use it to see what a route-table or canary change does before pushing it:
//! the chain file's routers and its `load_balance` settings run exactly as in a caller, with
//! a seeded random source so a run can be repeated. No call is made, so `leastactive` and
//! `p2c` see no in-flight calls (they then behave as weighted / uniform random).

use std::process::ExitCode;
use std::sync::Arc;

use routechain::balance::Service;
use routechain::core::{CallState, Chain};
use serde::Serialize;

use routechain::rules::load::LoadError;

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
}

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// `{"calls": N, "empty": k, "counts": [...]}`.
    Json,
    /// A table with shares and a bar chart.
    Table,
}

#[derive(Serialize)]
struct Count<'a> {
    index: usize,
    address: &'a str,
    count: u64,
}

#[derive(Serialize)]
struct Output<'a> {
    calls: u64,
    empty: u64,
    counts: Vec<Count<'a>>,
}

/// Runs `simulate`; an input error exits 2.
pub fn run(args: &SimulateArgs) -> ExitCode {
    super::exit_code(simulate(args))
}

fn simulate(args: &SimulateArgs) -> Result<ExitCode, LoadError> {
    let (chain, state, request) = super::route::load_state(&args.inputs)?;
    let service = Service::new(Arc::new(Chain::new(state)), chain.service_config.clone());
    let mut call = CallState::seeded(args.seed);
    let snapshot = service.state().snapshot().clone();
    let mut counts = vec![0u64; snapshot.len()];
    let mut empty = 0u64;
    for _ in 0..args.calls {
        match service.select(&request, &[], &mut call) {
            Ok(s) => counts[s.index()] += 1,
            Err(_) => empty += 1,
        }
    }
    let out = Output {
        calls: args.calls,
        empty,
        counts: counts
            .iter()
            .enumerate()
            .map(|(index, &count)| Count {
                index,
                address: snapshot.providers()[index].address(),
                count,
            })
            .collect(),
    };
    match args.format {
        Format::Json => println!(
            "{}",
            serde_json::to_string_pretty(&out)
                .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
        ),
        Format::Table => print!(
            "{}",
            table(
                &out,
                &chain.service_config.balance.default.kind.to_string(),
                args.seed
            )
        ),
    }
    Ok(ExitCode::SUCCESS)
}

const BAR: usize = 40;

fn table(out: &Output<'_>, balancer: &str, seed: u64) -> String {
    let mut s = format!(
        "calls: {}   routed: {}   empty: {}   (load_balance: {balancer}, seed {seed})\n\n",
        out.calls,
        out.calls - out.empty,
        out.empty
    );
    let aw = out
        .counts
        .iter()
        .map(|c| c.address.len())
        .max()
        .unwrap_or(0)
        .max("address".len());
    let max = out.counts.iter().map(|c| c.count).max().unwrap_or(0).max(1);
    s.push_str(&format!(
        "{:>5}  {:<aw$}  {:>9}  {:>7}\n",
        "#", "address", "count", "share"
    ));
    s.push_str(&format!(
        "{:->5}  {:-<aw$}  {:->9}  {:->7}\n",
        "", "", "", ""
    ));
    for c in &out.counts {
        let share = if out.calls == 0 {
            0.0
        } else {
            100.0 * c.count as f64 / out.calls as f64
        };
        let len = (c.count as usize * BAR).div_ceil(max as usize);
        s.push_str(&format!(
            "{:>5}  {:<aw$}  {:>9}  {:>6.2}%  {}\n",
            c.index,
            c.address,
            c.count,
            share,
            "█".repeat(len)
        ));
    }
    if out.empty > 0 {
        let share = 100.0 * out.empty as f64 / out.calls.max(1) as f64;
        s.push_str(&format!(
            "{:>5}  {:<aw$}  {:>9}  {:>6.2}%\n",
            "-", "(no provider)", out.empty, share
        ));
    }
    s
}
