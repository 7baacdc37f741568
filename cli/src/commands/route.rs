//! `routechain route` and `routechain explain`: route one request through a chain;
//! `explain` also shows the request's call parameters (`timeout`, `retries`,
//! `loadbalance`, `cluster`, `forks`, `weight`, `warmup`): each effective value and where it
//! came from. The chain file's override rules (`overrides:`) are merged into the providers,
//! as `watch` serves them.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use routechain::balance::{Cluster, Registries, SelectError};
use routechain::core::{CallState, ChainState, NoProvider, Request, Snapshot, Trace};
use routechain::live::{LiveChain, LiveOptions};
use routechain::rules::ChainFile;
use serde::Serialize;

use super::EXIT_NO_PROVIDER;
use routechain::rules::load::{self, LoadError};

/// Arguments of `route`.
#[derive(Debug, clap::Args)]
pub struct RouteArgs {
    #[command(flatten)]
    inputs: InputArgs,
    /// Also print what every router did (`"trace"`).
    #[arg(long)]
    explain: bool,
    /// Seed for per-call random draws (weighted destinations, route tables).
    #[arg(long)]
    seed: Option<u64>,
}

/// Arguments of `explain`.
#[derive(Debug, clap::Args)]
pub struct ExplainArgs {
    #[command(flatten)]
    inputs: InputArgs,
    /// Seed for per-call random draws (weighted destinations, route tables).
    #[arg(long)]
    seed: Option<u64>,
    /// Output format: a table, or the `route --explain` JSON.
    #[arg(long, value_enum, default_value_t = ExplainFormat::Table)]
    format: ExplainFormat,
}

/// Output formats of `explain`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExplainFormat {
    /// One row per router.
    Table,
    /// `{"providers": [...], "trace": [...], "error"?: {...}}`, as `route --explain`.
    Json,
}

/// The inputs of one routed request: `--chain`, `--providers`, `--request` (shared by
/// `route`, `explain` and `simulate`).
#[derive(Debug, clap::Args)]
pub struct InputArgs {
    /// The chain file (YAML). Each of the three may be `-` (standard input, for one of
    /// them), a pipe or a FIFO.
    #[arg(long)]
    pub chain: PathBuf,
    /// The provider list: one provider URL per line; blank lines and `#` comments skipped.
    #[arg(long)]
    pub providers: PathBuf,
    /// The request (JSON).
    #[arg(long)]
    pub request: PathBuf,
}

/// How to print the result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Style {
    /// One JSON object, with the trace or not.
    Json {
        /// Include `"trace"`.
        explain: bool,
        /// Include `"parameters"` (`explain`).
        parameters: bool,
    },
    /// A human-readable table.
    Table,
}

/// One provider of a routed set.
#[derive(Serialize)]
pub(crate) struct RoutedProvider {
    /// Its index in the provider list.
    pub index: usize,
    /// `host:port`.
    pub address: String,
}

/// Why a call found no provider: the `"error"` object of `route` (and of `simulate`).
#[derive(Serialize, Clone, Debug)]
pub(crate) struct RouteError {
    /// `no_provider` (or `unavailable` for `simulate`'s breaker).
    pub kind: &'static str,
    /// The router that emptied the set.
    pub router: Option<String>,
    /// The reason in words.
    pub message: String,
}

/// One effective call parameter and where it came from (`explain`, `simulate`).
#[derive(Serialize, Clone, Debug)]
pub(crate) struct Parameter {
    pub key: &'static str,
    pub value: String,
    pub source: &'static str,
}

/// The call parameters of `request`'s method on provider `first` (the routed set's first
/// provider: Dubbo reads `loadbalance` from it, and `timeout`, `weight` and `warmup` are the
/// provider's), as the chain file's settings, the provider URLs and the override rules
/// merged in the providers make them; a warming provider's weight at the service's clock.
pub(crate) fn parameters(
    service: &Cluster,
    request: &Request,
    first: Option<usize>,
) -> Vec<Parameter> {
    let published = service.load();
    let providers = published.state().snapshot().providers();
    let first = first.and_then(|i| providers.get(i).map(|p| (i, p)));
    published
        .params()
        .effective(
            request.method.as_deref(),
            first,
            service.clock().epoch_millis(),
        )
        .into_iter()
        .map(|(key, value, source)| Parameter {
            key,
            value,
            source: source.name(),
        })
        .collect()
}

/// The parameters as table lines.
pub(crate) fn parameters_table(params: &[Parameter]) -> String {
    let rows = params
        .iter()
        .map(|p| vec![p.key.to_string(), p.value.clone(), p.source.to_string()]);
    super::table_within(vec!["parameter", "value", "from"], rows, &[], Some(80))
}

#[derive(Serialize)]
struct RouteOutput<'a> {
    providers: &'a [RoutedProvider],
    #[serde(skip_serializing_if = "Option::is_none")]
    parameters: Option<&'a [Parameter]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    trace: Option<&'a Trace>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a RouteError>,
    #[serde(skip_serializing_if = "Option::is_none")]
    generation: Option<u64>,
    /// The registry chosen for the call and why, when several are chosen among per call.
    #[serde(skip_serializing_if = "Option::is_none")]
    registry: Option<&'a str>,
}

/// Runs `route`; an input error exits 2.
pub fn run(args: &RouteArgs) -> ExitCode {
    let style = Style::Json {
        explain: args.explain,
        parameters: false,
    };
    super::exit_code(route(&args.inputs, args.seed, style))
}

/// Runs `explain`; an input error exits 2.
pub fn run_explain(args: &ExplainArgs) -> ExitCode {
    let style = match args.format {
        ExplainFormat::Table => Style::Table,
        ExplainFormat::Json => Style::Json {
            explain: true,
            parameters: true,
        },
    };
    super::exit_code(route(&args.inputs, args.seed, style))
}

/// Reads the chain file, provider list and request, reporting every input problem at once.
pub(crate) fn load_inputs(inputs: &InputArgs) -> Result<(ChainFile, Snapshot, Request), LoadError> {
    super::one_stdin([
        ("--chain", inputs.chain.as_path()),
        ("--providers", inputs.providers.as_path()),
        ("--request", inputs.request.as_path()),
    ])?;
    // Router types and rules checked too: every problem of every input at once.
    let chain = ChainFile::load_with(&inputs.chain, &routechain::registry());
    let providers = load::load_providers(&inputs.providers, 1);
    let request = load::load_request(&inputs.request);
    let mut errors = Vec::new();
    for e in [
        chain.as_ref().err().cloned().map(LoadError::from),
        providers.as_ref().err().map(clone_load_error),
        request.as_ref().err().map(clone_load_error),
    ]
    .into_iter()
    .flatten()
    {
        match e {
            LoadError::Invalid(mut es) => errors.append(&mut es),
            other => return Err(other),
        }
    }
    if !errors.is_empty() {
        return Err(LoadError::Invalid(errors));
    }
    Ok((chain?, providers?, request?))
}

/// The service over `providers` as `watch` serves it: the chain file's routers and
/// settings, with the override rules its `overrides:` names merged into the providers (a
/// provider a rule disables is left out, so the indexes count the providers served). The
/// consumer is `request`'s, else the chain file's.
pub(crate) fn build_service(
    chain: &ChainFile,
    providers: Snapshot,
    request: &Request,
) -> Result<Arc<Cluster>, LoadError> {
    let options = LiveOptions {
        consumer: request.consumer.clone(),
        metrics: false,
        ..LiveOptions::default()
    };
    let live =
        LiveChain::with_providers(chain.clone(), routechain::registry(), options, providers)?;
    Ok(live.service().clone())
}

/// Reads the inputs ([`load_inputs`]) and builds the service over the provider list
/// ([`build_service`]; shared by `route` and `explain`).
pub(crate) fn load_service(
    inputs: &InputArgs,
) -> Result<(ChainFile, Arc<Cluster>, Request), LoadError> {
    let (chain, providers, request) = load_inputs(inputs)?;
    let service = build_service(&chain, providers, &request)?;
    Ok((chain, service, request))
}

fn route(inputs: &InputArgs, seed: Option<u64>, style: Style) -> Result<ExitCode, LoadError> {
    let (_, service, request) = load_service(inputs)?;
    let published = service.load();
    let state = published.state();
    let mut call = match seed {
        Some(seed) => CallState::seeded(seed),
        None => CallState::new(),
    };
    let routed = route_once(
        state,
        published.registries().map(|r| &**r),
        &request,
        &mut call,
    );
    let first = routed.providers.first().map(|p| p.index);
    let params = parameters(&service, &request, first);
    match style {
        Style::Json {
            explain,
            parameters: true,
        } => outln!("{}", routed.json_with(explain, Some(&params))),
        Style::Json { explain, .. } => outln!("{}", routed.json(explain, None, true)),
        Style::Table => {
            out!(
                "{}",
                table(&routed.trace, &routed.providers, routed.error.as_ref())
            );
            let method = request.method.as_deref().unwrap_or("(no method)");
            let on = routed.providers.first().map_or(String::new(), |p| {
                format!(", on [{}] {}", p.index, p.address)
            });
            out!(
                "\ncall parameters of {method}{on}:\n{}\n",
                parameters_table(&params)
            );
        }
    }
    Ok(if routed.error.is_none() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_NO_PROVIDER)
    })
}

/// One routed request: the providers left, the trace, the error if none is left. Shared by
/// `route`, `explain` and `watch`.
pub(crate) struct Routed {
    /// What every router did.
    pub trace: Trace,
    /// The providers left.
    pub providers: Vec<RoutedProvider>,
    /// Why none is left.
    pub error: Option<RouteError>,
}

impl Routed {
    /// The registry chosen for the call and why (the trace's `registries` step).
    fn registry(&self) -> Option<&str> {
        self.trace
            .steps
            .iter()
            .find(|s| s.router == "registries")
            .map(|s| s.reason.as_str())
    }

    /// The `route` command's JSON: `{"providers": [{"index", "address"}], "trace"?,
    /// "error"?}`, plus `"generation"` when given (`watch`); pretty-printed or on one line.
    /// The `explain` command's JSON: `route --explain`'s with the call parameters.
    fn json_with(&self, explain: bool, parameters: Option<&[Parameter]>) -> String {
        let out = RouteOutput {
            providers: &self.providers,
            parameters,
            trace: explain.then_some(&self.trace),
            error: self.error.as_ref(),
            generation: None,
            registry: self.registry(),
        };
        serde_json::to_string_pretty(&out).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }

    pub(crate) fn json(&self, explain: bool, generation: Option<u64>, pretty: bool) -> String {
        let out = RouteOutput {
            providers: &self.providers,
            parameters: None,
            trace: explain.then_some(&self.trace),
            error: self.error.as_ref(),
            generation,
            registry: self.registry(),
        };
        let text = if pretty {
            serde_json::to_string_pretty(&out)
        } else {
            serde_json::to_string(&out)
        };
        text.unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }
}

/// Routes `request` through `state` (through the registry chosen for it when there are
/// several `registries`) and records the result.
pub(crate) fn route_once(
    state: &ChainState,
    registries: Option<&Registries>,
    request: &Request,
    call: &mut CallState,
) -> Routed {
    let mut trace = Trace::default();
    let outcome = match registries {
        Some(r) => r.route(state, request, call, Some(&mut trace)),
        None => state
            .route_traced(request, call, &mut trace)
            .map_err(SelectError::from),
    };
    let snapshot = state.snapshot();
    let providers = match outcome {
        Ok(()) => call
            .candidates
            .iter()
            .map(|i| RoutedProvider {
                index: i,
                address: snapshot.providers()[i].address().to_string(),
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    let error = outcome.as_ref().err().and_then(no_provider);
    Routed {
        trace,
        providers,
        error,
    }
}

/// The `"error"` object of a call that routing left without a provider, naming the router
/// that emptied the set (`registries`: the choice among several registries); `None` for
/// the errors of balancing.
pub(crate) fn no_provider(e: &SelectError) -> Option<RouteError> {
    let router = match e {
        SelectError::NoProvider(NoProvider::EmptiedBy { router, .. }) => Some(router.to_string()),
        SelectError::NoProvider(NoProvider::EmptySnapshot) => None,
        SelectError::ZoneForced { .. } | SelectError::NoRegistry => Some("registries".into()),
        SelectError::ServiceUnavailable { .. } | SelectError::Exhausted { .. } => return None,
    };
    Some(RouteError {
        kind: "no_provider",
        router,
        message: e.to_string(),
    })
}

fn clone_load_error(e: &LoadError) -> LoadError {
    match e {
        LoadError::Invalid(es) => LoadError::Invalid(es.clone()),
        LoadError::Prepare(p) => LoadError::Prepare(p.clone()),
    }
}

fn table(trace: &Trace, providers: &[RoutedProvider], error: Option<&RouteError>) -> String {
    let rows = trace.steps.iter().enumerate().map(|(i, s)| {
        vec![
            (i + 1).to_string(),
            s.router.clone(),
            s.priority.to_string(),
            s.evaluation.to_string(),
            s.before.to_string(),
            s.after.to_string(),
            s.reason.clone(),
        ]
    });
    let header = vec![
        "#", "router", "priority", "eval", "before", "after", "reason",
    ];
    // The reasons wrap inside their column: the table fits a terminal of 80 columns.
    let table = super::table_within(header, rows, &[0, 2, 4, 5], Some(80));
    let mut out = crate::out::paint_first_line(crate::out::HEADER, &table);
    out.push('\n');
    match error {
        Some(e) => out.push_str(&format!("result: NO PROVIDER — {}\n", e.message)),
        None => {
            out.push_str(&format!(
                "result: {}\n",
                super::check::plural(providers.len(), "provider")
            ));
            for p in providers {
                out.push_str(&format!("  [{}] {}\n", p.index, p.address));
            }
        }
    }
    out
}
