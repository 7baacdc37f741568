//! The `routechain` command-line tool.
//!
//! Exit codes, for every command: 0 success; 2 invalid input (message on stderr with
//! file:line:column; `check` prints its problems on stdout); 3 no provider left (`route`,
//! `explain`, `simulate` when every call found none); 4 the registry unreachable or an
//! operation on it failed (`registry`/`zk`, `nacos`, `check --registry`); 1 a check of
//! `demo` failed, a golden test of `test` failed, or `check --deny-warnings` found warnings.
//! A closed stdout (`… | head -1`) ends any command quietly with 0 ([`crate::out`]).
//!
//! Commands: `route`, `explain`, `check`, `test` (golden tests), `simulate` (route + balance
//! N calls and count), `demo` (real calls over TCP through the demo chain), `watch`,
//! `registry` (alias `zk`), `nacos`, `completions`.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod audit;
mod check;
mod demo;
mod golden;
mod metrics_server;
mod nacos;
mod route;
mod simulate;
mod watch;
mod zk;

/// Exit code for invalid input.
pub const EXIT_INVALID: u8 = 2;
/// Exit code when no provider remains.
pub const EXIT_NO_PROVIDER: u8 = 3;
/// Exit code when ZooKeeper cannot be reached or an operation on it fails.
pub const EXIT_UNAVAILABLE: u8 = 4;

#[derive(Debug, Parser)]
#[command(
    name = "routechain",
    version,
    about = "Dubbo-style service routing: narrow a provider list per call with a chain of routers",
    after_help = "Examples:\n  routechain route --chain rules/examples/full.chain.yaml --providers rules/examples/providers.txt --request rules/examples/request.json\n  routechain check rules/examples/*.chain.yaml\n  routechain watch --chain bar.chain.yaml --zookeeper 127.0.0.1:2181 --service com.foo.BarService --request request.json"
)]
struct Cli {
    /// The largest chain, rule or request file read (e.g. 16MiB, 512KiB, 1GiB); a larger
    /// file is refused with an error. Given before the command:
    /// `routechain --max-file-size 64MiB check ...`.
    #[arg(long, value_name = "SIZE", default_value = "16MiB",
          value_parser = routechain::rules::input::parse_size)]
    max_file_size: u64,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Route one request and print the remaining providers as JSON.
    #[command(
        after_help = "Example:\n  routechain route --chain rules/examples/full.chain.yaml \\\n    --providers rules/examples/providers.txt --request rules/examples/request.json --explain\n\nOutput: {\"providers\": [{\"index\": 0, \"address\": \"10.20.3.3:20880\"}, ...]}\nExit: 0 providers left, 3 none left (with an \"error\" object), 2 invalid input."
    )]
    Route(route::RouteArgs),
    /// Route one request and print a table of how each router narrowed the set, and why.
    #[command(
        after_help = "Example:\n  routechain explain --chain rules/examples/full.chain.yaml \\\n    --providers rules/examples/providers.txt --request rules/examples/request.json"
    )]
    Explain(route::ExplainArgs),
    /// Validate and lint chain files and rule files; cross-check them with a provider list.
    #[command(
        after_help = "Examples:\n  routechain check rules/examples/*.chain.yaml\n  routechain check --providers rules/examples/providers.txt rules/examples/full.chain.yaml\n  routechain check --type idc-weight rules/examples/demo/idc-weight.rule.yaml\n  routechain check --type tag a.yaml --type condition b.yaml   # a --type applies to the files after it\n  routechain zk providers --zookeeper 127.0.0.1:2181 --service S | routechain check --providers - bar.chain.yaml\n  routechain check rules/examples/live/com.foo.BarService.condition-router.yaml\n  routechain check --registry zookeeper://127.0.0.1:2181 --all   # every rule a registry holds, against its providers\n  ROUTECHAIN_ZK_PASSWORD_FILE=/etc/routechain/zk.pass routechain check \\\n    --registry 'zookeeper://admin@127.0.0.1:2181' --service com.foo.BarService   # shown as admin:***@\n\nOutput: file:line:column: warning[CODE]: message (codes: docs/check.md), a summary line.\nExit: 2 any error, 1 warnings with --deny-warnings, 0 otherwise; 4 the registry unreachable."
    )]
    Check(check::CheckArgs),
    /// Route and balance one request N times; print how many calls each provider got.
    #[command(
        after_help = "Examples:\n  routechain simulate --chain rules/examples/demo/demo.chain.yaml \\\n    --providers rules/examples/demo/providers.txt --request rules/examples/demo/request.json \\\n    --calls 10000 --seed 7 --format table\n  routechain simulate --chain rules/examples/full.chain.yaml --providers rules/examples/providers.txt \\\n    --request rules/examples/request.json --group-by idc --against rules/examples/full-next.chain.yaml\n\nOutput (json): {\"calls\": N, \"empty\": k, \"counts\": [{\"index\": i, \"address\": \"...\", \"count\": c}, ...],\n  \"groups\": [{\"value\", \"count\", \"share\"}] (--group-by), \"error\" (every call found none)};\n  with --against: {\"base\": <report>, \"against\": <report>}. Rows with 0 calls only with --all.\nExit: 0, 3 every call found no provider, 2 invalid input."
    )]
    Simulate(simulate::SimulateArgs),
    /// Run golden tests for a chain: requests with the providers (or shares) they must get.
    #[command(
        after_help = "Example:\n  routechain test rules/examples/CASES.yaml\n\nOutput: PASS/FAIL per test, the coverage (conditions, tags, route-table cells, groups\nno test reached), then `test: N passed, M failed`.\nExit: 0 all passed, 1 a test failed, 2 invalid input."
    )]
    Test(golden::TestArgs),
    /// Print a shell completion script.
    #[command(
        after_help = "Examples:\n  routechain completions bash > /etc/bash_completion.d/routechain\n  routechain completions zsh > \"${fpath[1]}/_routechain\"\n  routechain completions fish > ~/.config/fish/completions/routechain.fish"
    )]
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: CompletionShell,
    },
    /// Start providers on 127.0.0.1, send thousands of real calls through the demo chain,
    /// change a rule, kill providers, and print a checked report.
    #[command(
        after_help = "Example:\n  cargo run --release -- demo\n  routechain demo --quick          # 2000 calls, no progress bar (CI)\n\nExit: 0 every check passed, 1 a check failed, 2 the demo could not start."
    )]
    Demo(demo::DemoArgs),
    /// Keep a chain live from files or registries (ZooKeeper, Nacos; one or several); print
    /// every applied or refused change (stderr) and, with --request, the routed result
    /// after each applied one (stdout).
    #[command(
        after_help = "Examples:\n  routechain watch --chain bar.chain.yaml --providers providers.txt --request request.json\n  routechain watch --chain bar.chain.yaml --zookeeper 127.0.0.1:2181 \\\n    --service com.foo.BarService --request request.json\n  routechain watch --chain bar.chain.yaml --providers providers.txt --metrics 127.0.0.1:9464\n  routechain watch --chain bar.chain.yaml --service com.foo.BarService \\\n    --registry 'zookeeper://zk-a:2181?backup=zk-a2:2181 | zookeeper://zk-b:2181'   # two registries, merged\n  ROUTECHAIN_ZK_PASSWORD_FILE=/etc/routechain/zk.pass routechain watch --chain bar.chain.yaml \\\n    --registry 'zookeeper://admin@zk-a:2181?zone=hz' --service com.foo.BarService   # shown as admin:***@\n  routechain watch --chain bar.chain.yaml --registry 'nacos://127.0.0.1:8848?namespace=dev' \\\n    --request request.json   # Nacos\n\nstdout: one line per applied change, the `route` JSON plus \"generation\":\n  {\"providers\":[{\"index\":0,\"address\":\"10.0.0.1:20880\"}],\"generation\":2}\nstderr: \"routechain watch: applied generation 2: ...\" / \"refused ...: reason\" / \"held back ...\".\nRuns until killed; exits 2 at once when the starting files are invalid."
    )]
    Watch(watch::WatchArgs),
    /// Read and write rules and providers in a registry (ZooKeeper, in Dubbo's layout);
    /// `zk` is the same command.
    #[command(
        name = "registry",
        visible_alias = "zk",
        after_help = "Examples:\n  routechain registry put-rule --registry zookeeper://127.0.0.1:2181 --key com.foo.BarService:: --type condition rule.yaml\n  ROUTECHAIN_ZK_PASSWORD_FILE=/etc/routechain/zk.pass routechain zk put-rule \\\n    --zookeeper 'zookeeper://admin@127.0.0.1:2181' --key com.foo.BarService:: --type condition rule.yaml\n  routechain registry register --registry 127.0.0.1:2181 --service com.foo.BarService 'dubbo://10.0.0.1:20880/com.foo.BarService'\n\nCredentials are shown masked (`admin:***@`); `admin@host` reads the password from\nROUTECHAIN_ZK_PASSWORD or the file ROUTECHAIN_ZK_PASSWORD_FILE names, out of the shell history.\nExit: 0 done, 2 invalid input, 4 the registry unreachable or the operation failed."
    )]
    Zk(zk::ZkArgs),
    /// Read and write rules and providers in Nacos, in Dubbo's layout (the `zk` commands
    /// for Nacos).
    #[command(
        after_help = "Examples:\n  routechain nacos put-rule --registry nacos://127.0.0.1:8848 --key com.foo.BarService:: --type condition rule.yaml\n  routechain nacos register --registry nacos://127.0.0.1:8848 --service com.foo.BarService 'dubbo://10.0.0.1:20880/com.foo.BarService'\n\nExit: 0 done, 2 invalid input, 4 Nacos unreachable or the operation failed."
    )]
    Nacos(nacos::NacosArgs),
}

/// The shells `completions` writes scripts for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum CompletionShell {
    /// bash.
    Bash,
    /// zsh.
    Zsh,
    /// fish.
    Fish,
}

/// Runs the command line in `args` (the first item is the program name).
pub fn run(args: impl IntoIterator<Item = std::ffi::OsString>) -> ExitCode {
    use clap::{CommandFactory, FromArgMatches};
    // The matches are kept: `check` reads where each `--type` stands among its files.
    let parsed = Cli::command()
        .try_get_matches_from(args)
        .and_then(|matches| Cli::from_arg_matches(&matches).map(|cli| (cli, matches)));
    let (cli, matches) = match parsed {
        Ok(parsed) => parsed,
        Err(e) => {
            // Help and version on stdout, usage errors on stderr (through `out`: a closed
            // pipe ends quietly).
            let text = e.render().ansi().to_string();
            if e.use_stderr() {
                crate::out::stderr(&text);
            } else {
                crate::out::stdout(&text);
            }
            return if e.use_stderr() {
                ExitCode::from(EXIT_INVALID)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    routechain::rules::input::set_max_file_size(cli.max_file_size);
    init_logging_with_default(match cli.command {
        // The demo's report is the output; health events are in it.
        Command::Demo(_) => "error",
        // The mesh reader's warnings are problems of their own there (RC107, RC109).
        Command::Check(_) | Command::Zk(_) | Command::Nacos(_) => {
            "warn,routechain_live=error,routechain_routers::mesh=error,nacos_sdk=off"
        }
        _ => DEFAULT_LOG_FILTER,
    });
    match cli.command {
        Command::Route(args) => route::run(&args),
        Command::Explain(args) => route::run_explain(&args),
        Command::Check(args) => match matches.subcommand_matches("check") {
            Some(matches) => check::run(&args, matches),
            None => ExitCode::from(EXIT_INVALID),
        },
        Command::Test(args) => golden::run(&args),
        Command::Completions { shell } => {
            let shell = match shell {
                CompletionShell::Bash => clap_complete::Shell::Bash,
                CompletionShell::Zsh => clap_complete::Shell::Zsh,
                CompletionShell::Fish => clap_complete::Shell::Fish,
            };
            let mut command = <Cli as clap::CommandFactory>::command();
            // Written whole through `out` (clap_complete panics on a closed pipe).
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut command, "routechain", &mut script);
            out!("{}", String::from_utf8_lossy(&script));
            ExitCode::SUCCESS
        }
        Command::Simulate(args) => simulate::run(&args),
        Command::Demo(args) => demo::run(&args),
        Command::Watch(args) => watch::run(&args),
        Command::Zk(args) => zk::run(&args),
        Command::Nacos(args) => nacos::run(&args),
    }
}

/// The exit code of a command that returns its own code or fails on its inputs: an input
/// error is printed (with its file:line:column) and exits [`EXIT_INVALID`].
fn exit_code(result: Result<ExitCode, routechain::rules::load::LoadError>) -> ExitCode {
    result.unwrap_or_else(|e| {
        errln!("{}", crate::out::paint_errors(&e.render()));
        ExitCode::from(EXIT_INVALID)
    })
}

/// Refuses standard input (`-`) given to more than one of `inputs` (argument name, path):
/// it can be read once.
pub fn one_stdin<'a>(
    inputs: impl IntoIterator<Item = (&'a str, &'a std::path::Path)>,
) -> Result<(), routechain::rules::load::LoadError> {
    let readers: Vec<&str> = inputs
        .into_iter()
        .filter(|(_, path)| routechain::rules::input::is_stdin(path))
        .map(|(name, _)| name)
        .collect();
    if readers.len() < 2 {
        return Ok(());
    }
    Err(routechain::rules::load::LoadError::Invalid(vec![
        routechain::rules::input::file_error(
            "<stdin>",
            format!(
                "standard input (`-`) is given to {}: it can be read by one of them only",
                readers.join(" and ")
            ),
        ),
    ]))
}

/// A terminal table (comfy-table, the one table implementation of the CLI): no borders,
/// a dashed line under the header, two spaces between columns, the columns in `right`
/// aligned right, trailing blanks trimmed; one `\n` after every line.
pub fn table<R, C>(header: Vec<&str>, rows: R, right: &[usize]) -> String
where
    R: IntoIterator<Item = Vec<C>>,
    C: Into<comfy_table::Cell>,
{
    table_within(header, rows, right, None)
}

/// The narrowest the last column of [`table_within`] gets.
const MIN_LAST_COLUMN: u16 = 16;

/// A [`table`] whose last column wraps inside itself (at blanks where it can) so that the
/// table fits `width` columns, when given; the last column keeps at least
/// [`MIN_LAST_COLUMN`].
pub fn table_within<R, C>(header: Vec<&str>, rows: R, right: &[usize], width: Option<u16>) -> String
where
    R: IntoIterator<Item = Vec<C>>,
    C: Into<comfy_table::Cell>,
{
    use comfy_table::{CellAlignment, ColumnConstraint, ContentArrangement, TableComponent, Width};
    let mut t = comfy_table::Table::new();
    t.load_preset(comfy_table::presets::NOTHING)
        .set_style(TableComponent::HeaderLines, '-')
        .set_style(TableComponent::MiddleHeaderIntersections, ' ')
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(header);
    for row in rows {
        t.add_row(row);
    }
    let columns = t.column_count();
    let widths = t.column_max_content_widths();
    // The other columns, each with its padding and the separator after it.
    let before: u16 = widths.iter().rev().skip(1).map(|w| w + 3).sum();
    let last = width.map(|w| w.saturating_sub(before).max(MIN_LAST_COLUMN));
    for (i, c) in t.column_iter_mut().enumerate() {
        c.set_padding((0, if i + 1 == columns { 0 } else { 2 }));
        c.set_constraint(match last {
            Some(w) if i + 1 == columns => ColumnConstraint::UpperBoundary(Width::Fixed(w)),
            _ => ColumnConstraint::ContentWidth,
        });
        if right.contains(&i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    let mut out = String::new();
    for line in t.lines() {
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// The log filter when `RUST_LOG` is unset: `warn`, except the live chain's refusals, which
/// `routechain watch` prints itself, and the Nacos client (`nacos-sdk`): its login errors
/// name the login URL with the password in it, and it logs an error on every retry while a
/// server is unreachable. routechain reports both itself, once, with the password masked.
const DEFAULT_LOG_FILTER: &str = "warn,routechain_live=error,nacos_sdk=off";

/// Installs the `tracing` subscriber with `default` as the filter when `RUST_LOG` is unset
/// (a subscriber already installed stays). Colour as for the rest of stderr
/// ([`crate::out`]).
pub fn init_logging_with_default(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(crate::out::stderr_has_colour())
        .try_init();
}
