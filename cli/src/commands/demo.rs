//! `routechain demo`: start providers, send real calls, print and check the report.

use std::path::PathBuf;
use std::process::ExitCode;

use super::EXIT_INVALID;
use crate::demo::{self, Options};

/// Fewer calls leave phases too small to measure anything.
const MIN_CALLS: u64 = 500;

/// Exit code when a check of the demo fails.
pub const EXIT_CHECK_FAILED: u8 = 1;

/// Arguments of `demo`.
#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// Total calls, over five phases (default 20000; 2000 with --quick; at least 500).
    #[arg(long)]
    calls: Option<u64>,
    /// A short run for CI: 2000 calls unless --calls says otherwise, no progress bar.
    #[arg(long)]
    quick: bool,
    /// Concurrent callers.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// The directory with demo.chain.yaml and its rule files (copied, never modified).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Print the report as JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Leave the example canary plugin out even when its library is built.
    #[arg(long)]
    no_plugin: bool,
}

/// Runs the demo and prints its report; exits 1 when a check failed, 2 when it could not run.
pub fn run(args: &DemoArgs) -> ExitCode {
    let calls = args
        .calls
        .unwrap_or(if args.quick { 2_000 } else { 20_000 })
        .max(MIN_CALLS);
    let opts = Options {
        calls,
        concurrency: args.concurrency.clamp(1, 1024),
        dir: args
            .dir
            .clone()
            .unwrap_or_else(|| routechain::rules::examples_dir().join("demo")),
        progress: !args.quick && !args.json,
        plugin: if args.no_plugin {
            None
        } else {
            demo::find_canary_plugin()
        },
    };
    match demo::run(&opts) {
        Ok(report) => {
            if args.json {
                match serde_json::to_string_pretty(&report) {
                    Ok(s) => outln!("{s}"),
                    Err(e) => errln!("cannot render the report: {e}"),
                }
            } else {
                out!("{}", report.render());
            }
            if report.pass {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(EXIT_CHECK_FAILED)
            }
        }
        Err(e) => {
            errln!("demo could not run: {e}");
            ExitCode::from(EXIT_INVALID)
        }
    }
}
