//! `routechain watch`: keep a chain live from files, ZooKeeper or Nacos, print every change.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use routechain::core::{CallState, Request, Snapshot};
use routechain::rules::ChainFile;

use super::route::route_once;
use routechain::live::{
    ChainTemplate, FileConfig, FileSource, LiveChain, LiveOptions, NacosConfig, NacosSource,
    ProviderText, RegistryConnection, Report, RuleKey, ServiceKey, SingleRegistry, Source, Sources,
    Watching, ZkConfig, ZkSource, parse_providers,
};
use routechain::rules::load::{self, LoadError};

/// Arguments of `watch`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("registry_source").args(["zookeeper", "registry"])))]
pub struct WatchArgs {
    /// The chain file (YAML). Watched, with the rule files it names.
    #[arg(long)]
    chain: PathBuf,
    /// A providers file (one URL per line), watched.
    #[arg(long, conflicts_with = "registry_source")]
    providers: Option<PathBuf>,
    /// ZooKeeper to follow, in Dubbo's layout: `host:port[,host:port...][/chroot]`, with
    /// digest credentials `user:pass@host:port` or `zookeeper://user:pass@host:port` (as
    /// `routechain zk`; shown masked). A bad address exits 2 at once.
    #[arg(long)]
    zookeeper: Option<String>,
    /// A registry to follow, as Dubbo users write its address: `zookeeper://host:port...`
    /// (as --zookeeper) or `nacos://host:port[,host:port]?namespace=NS&group=G&username=U&password=P`
    /// (Dubbo's Nacos registry and config center; `dubbo-exact=true` keeps unhealthy
    /// instances and ignores the Nacos weight, as Dubbo does; a user without a password
    /// reads it from ROUTECHAIN_NACOS_PASSWORD or the file named by
    /// ROUTECHAIN_NACOS_PASSWORD_FILE). Shown masked. A bad address exits 2 at once.
    #[arg(long, conflicts_with = "zookeeper")]
    registry: Option<String>,
    /// The reference whose providers and service-scope rules to follow:
    /// `interface`, `interface:version:group` or `group/interface:version` (`*` any
    /// group or version, `a,b` either group); default the chain file's `service`, `group`
    /// and `version`, followed as the file changes. A bare interface keeps the file's
    /// group and version. Given, the reference is fixed for the run.
    #[arg(long, requires = "registry_source")]
    service: Option<String>,
    /// A request (JSON) to route at start and after every applied change.
    #[arg(long)]
    request: Option<PathBuf>,
    /// Seed for per-call random draws.
    #[arg(long)]
    seed: Option<u64>,
    /// Apply a provider list that becomes empty (default: hold it back).
    #[arg(long)]
    allow_empty: bool,
    /// Serve the chain's Prometheus metrics at `http://ADDR/metrics` (docs/metrics.md),
    /// e.g. `127.0.0.1:9464`.
    #[arg(long, value_name = "ADDR")]
    metrics: Option<std::net::SocketAddr>,
    /// With --metrics, also count calls per provider address
    /// (`routechain_provider_picks_total`; one series per provider: high-cardinality).
    #[arg(long, requires = "metrics")]
    provider_picks: bool,
}

/// Runs `watch` until killed; invalid starting files exit 2.
pub fn run(args: &WatchArgs) -> ExitCode {
    super::exit_code(watch(args))
}

fn invalid(message: String) -> LoadError {
    LoadError::Invalid(vec![routechain::rules::LocatedError {
        origin: "routechain watch".into(),
        location: routechain::rules::Location { line: 1, column: 1 },
        field: None,
        message,
        source_line: None,
    }])
}

fn watch(args: &WatchArgs) -> Result<ExitCode, LoadError> {
    // The chain file and the providers file are watched: standard input cannot be.
    for (name, path) in [
        ("--chain", Some(&args.chain)),
        ("--providers", args.providers.as_ref()),
    ] {
        if path.is_some_and(|p| routechain::rules::input::is_stdin(p)) {
            return Err(invalid(format!(
                "{name} -: watch follows a file's changes; standard input has none"
            )));
        }
    }
    let chain = ChainFile::load_with(&args.chain, &routechain::registry())?;
    let request = args
        .request
        .as_deref()
        .map(load::load_request)
        .transpose()?;
    // A providers file that cannot be read is an error; a bad line in it is skipped alone
    // (and reported) like any later change of the file.
    let providers_text = match &args.providers {
        Some(p) => Some(std::fs::read_to_string(p).map_err(|e| {
            LoadError::Invalid(vec![routechain::rules::chain_file::io_error(
                &p.display().to_string(),
                &e,
            )])
        })?),
        None => None,
    };
    // `--service` fixes the reference for the run, over every reload of the chain file;
    // without it the file's `service`, `group` and `version` are followed as they change.
    let reference = args.service.as_deref().map(|service| {
        if service.contains([':', '/']) {
            // The form names the group and version: it overrides the file's.
            ServiceKey::parse(service)
        } else {
            ServiceKey::reference(service, chain.group.as_deref(), chain.version.as_deref())
        }
    });
    // A bad address is refused now, its password masked.
    let address = match (&args.zookeeper, &args.registry) {
        (Some(zk), _) => Some(
            routechain::live::ZkAddress::parse(zk)
                .map(SingleRegistry::ZooKeeper)
                .map_err(|e| invalid(e.to_string()))?,
        ),
        (None, Some(text)) => Some(routechain::live::registry_address(text).map_err(invalid)?),
        (None, None) => None,
    };
    if address.is_some() && reference.is_none() && chain.service.is_none() {
        let flag = if args.zookeeper.is_some() {
            "--zookeeper"
        } else {
            "--registry"
        };
        return Err(invalid(format!(
            "{flag} needs a service: give --service or `service:` in the chain file"
        )));
    }
    let options = LiveOptions {
        protect_empty: !args.allow_empty,
        provider_picks: args.provider_picks,
        consumer: request.as_ref().and_then(|r| r.consumer.clone()),
        ..LiveOptions::default()
    };
    // A bad line of the providers file is skipped alone (and reported), as in every later
    // change of the file.
    let providers = match (&args.providers, providers_text) {
        (Some(path), Some(text)) => {
            let origin = path.display().to_string();
            let (urls, skipped) = parse_providers(&origin, ProviderText::Lines(text));
            for s in skipped {
                errln!(
                    "routechain watch: {}",
                    Report::Skipped {
                        location: s.location,
                        reason: s.reason
                    }
                );
            }
            Snapshot::from_shared(1, urls)
        }
        _ => Snapshot::new(1, Vec::new()),
    };
    let live = Arc::new(
        ChainTemplate::new(chain, routechain::registry())?.live_chain_with_providers(
            reference.as_ref(),
            options,
            providers,
        )?,
    );
    let router = request.map(|r| {
        let call = match args.seed {
            Some(seed) => CallState::seeded(seed),
            None => CallState::new(),
        };
        Arc::new(RequestPrinter {
            request: r,
            call: Mutex::new((call, None)),
        })
    });
    // From files the state is loaded now; from ZooKeeper, once the source has delivered
    // its first read (nothing is printed to stdout before that).
    let loaded = Arc::new(AtomicBool::new(address.is_none()));
    let (reload_tx, reload_rx) = std::sync::mpsc::channel::<()>();
    // Hold the printer while the source starts, so the start line comes first; the watches
    // are in place once `watch` returns, so no change made after the start line is missed.
    let start_lock = router
        .as_ref()
        .map(|r| r.call.lock().unwrap_or_else(|p| p.into_inner()));
    let connection = RegistryConnection::default();
    let (source, mut following) = sources(args, &live, address.as_ref(), &connection);
    let mut watching = start(&live, source, &router, &loaded, &reload_tx)?;
    // Served once the watches are in place: a change made after the line below is seen.
    if let Some(addr) = args.metrics {
        let collector = routechain::live::metrics::ChainCollector::new();
        collector.add(&live);
        let mut registry = routechain::prometheus_client::registry::Registry::default();
        collector.register(&mut registry);
        match &address {
            Some(SingleRegistry::ZooKeeper(a)) => {
                routechain::live::metrics::RegistryCollector::zookeeper(a, connection.clone())
                    .register(&mut registry)
            }
            Some(SingleRegistry::Nacos(a)) => {
                routechain::live::metrics::RegistryCollector::nacos(a, connection.clone())
                    .register(&mut registry)
            }
            None => {}
        }
        let bound = super::metrics_server::serve(addr, Arc::new(registry))
            .map_err(|e| invalid(format!("--metrics {addr}: cannot listen: {e}")))?;
        errln!("routechain watch: serving metrics on http://{bound}/metrics");
    }
    if address.is_none() {
        let state = live.service().state();
        let providers = match &args.providers {
            Some(p) => format!("the providers of {}", p.display()),
            None => "no provider list".into(),
        };
        errln!(
            "routechain watch: serving {} from {} with {providers} ({}, generation {}); watching \
             them for changes",
            live.service_name().unwrap_or_else(|| "the chain".into()),
            args.chain.display(),
            super::check::plural(state.snapshot().providers().len(), "provider"),
            state.generation()
        );
    }
    if let (Some(r), Some(mut call)) = (&router, start_lock)
        && address.is_none()
    {
        r.print(&live, &mut call);
    }
    // A reloaded chain file may change what to follow in the registry (the reference, the
    // consumer's application, the entries' keys): then the sources start afresh.
    while reload_rx.recv().is_ok() {
        if address.is_none() {
            continue;
        }
        if Following::of(&live) == following {
            continue;
        }
        let registry = match &address {
            Some(SingleRegistry::Nacos(_)) => "Nacos",
            _ => "ZooKeeper",
        };
        errln!(
            "routechain watch: the chain file changes what to follow in {registry}; re-reading it"
        );
        drop(watching);
        let (source, now) = sources(args, &live, address.as_ref(), &connection);
        following = now;
        watching = start(&live, source, &router, &loaded, &reload_tx)?;
    }
    loop {
        std::thread::park();
    }
}

/// What a registry source follows for a chain: when a reloaded chain file changes it, the
/// sources start afresh.
#[derive(Debug, PartialEq)]
struct Following {
    rule_keys: Vec<RuleKey>,
    service: Option<ServiceKey>,
    provider_app_kinds: Vec<String>,
    each_app_kinds: Vec<String>,
}

impl Following {
    fn of(live: &LiveChain) -> Self {
        Following {
            rule_keys: live.subscriptions(),
            service: live.reference(),
            provider_app_kinds: live.provider_app_kinds(),
            each_app_kinds: live.each_provider_app_kinds(),
        }
    }
}

/// The sources `watch` runs: the file source (chain file, rule files, providers file), and
/// the registry (ZooKeeper or Nacos) for rules and providers (what it follows printed).
fn sources(
    args: &WatchArgs,
    live: &LiveChain,
    address: Option<&SingleRegistry>,
    connection: &RegistryConnection,
) -> (Box<dyn Source>, Following) {
    let chain_source = Box::new(FileSource::new(FileConfig::new(
        args.chain.clone(),
        args.providers.clone(),
    )));
    let following = Following::of(live);
    let Some(registry) = address else {
        return (chain_source, following);
    };
    let reference = following.service.clone().unwrap_or_else(|| {
        routechain::live::ServiceKey::parse(&live.service_name().unwrap_or_default())
    });
    let text = args
        .zookeeper
        .clone()
        .or(args.registry.clone())
        .unwrap_or_default();
    let (source, watched): (Box<dyn Source>, Vec<String>) = match registry {
        SingleRegistry::ZooKeeper(_) => {
            let mut config = ZkConfig::for_chain(live, text);
            config.connection = connection.clone();
            let watched = config.watched_paths();
            (Box::new(ZkSource::new(config)), watched)
        }
        SingleRegistry::Nacos(_) => {
            let mut config = NacosConfig::for_chain(live, text);
            config.connection = connection.clone();
            let watched = config.watched();
            (Box::new(NacosSource::new(config)), watched)
        }
    };
    let (what, node) = match registry {
        SingleRegistry::ZooKeeper(a) => (format!("ZooKeeper {a}"), "node"),
        SingleRegistry::Nacos(a) => (format!("Nacos {a}"), "config"),
    };
    errln!(
        "routechain watch: following {what} for {} ({}); watching:",
        reference.interface,
        reference.describe_filter()
    );
    for path in watched {
        errln!("  {path}");
    }
    if !following.provider_app_kinds.is_empty() {
        errln!(
            "  and, once the providers' application is known, its {} {node}(s)",
            following.provider_app_kinds.join(", ")
        );
    }
    if !following.each_app_kinds.is_empty() {
        errln!(
            "  and the {} {node}(s) of every provider application present, from its first provider to its last",
            following.each_app_kinds.join(", ")
        );
    }
    errln!("  and the chain file {}", args.chain.display());
    (Box::new(Sources(vec![source, chain_source])), following)
}

/// Starts `source` on `live`: every report to stderr, the routed request to stdout after
/// the first state and after every applied change, a signal on `reloads` per applied
/// chain-file change.
fn start(
    live: &Arc<LiveChain>,
    source: Box<dyn Source>,
    router: &Option<Arc<RequestPrinter>>,
    loaded: &Arc<AtomicBool>,
    reloads: &std::sync::mpsc::Sender<()>,
) -> Result<Watching, LoadError> {
    let printer = router.clone();
    let live_for_reports = live.clone();
    let loaded = loaded.clone();
    let reloads = reloads.clone();
    live.watch(source, move |report| {
        errln!("routechain watch: {report}");
        let first = match report {
            Report::Status { .. } | Report::Skipped { .. } => false,
            _ => !loaded.swap(true, Ordering::SeqCst),
        };
        if let Report::Applied { change, .. } = report
            && change.contains("chain file ")
        {
            let _ = reloads.send(());
        }
        if let Some(r) = &printer
            && (first || matches!(report, Report::Applied { .. }))
        {
            let mut call = r.call.lock().unwrap_or_else(|p| p.into_inner());
            r.print(&live_for_reports, &mut call);
        }
    })
    .map_err(|e| invalid(e.to_string()))
}

/// The request routed after every applied change, with the generation last printed.
struct RequestPrinter {
    request: Request,
    call: Mutex<(CallState, Option<u64>)>,
}

impl RequestPrinter {
    /// Prints the routed request, once per generation: one read can bring several reports
    /// (providers ignored, a rule applied) about one state.
    fn print(&self, live: &LiveChain, (call, printed): &mut (CallState, Option<u64>)) {
        let state = live.service().state();
        if *printed == Some(state.generation()) {
            return;
        }
        *printed = Some(state.generation());
        let routed = route_once(&state, &self.request, call);
        outln!("{}", routed.json(false, Some(state.generation()), false));
    }
}
