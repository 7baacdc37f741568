//! `routechain watch`: keep a chain live from files or registries (ZooKeeper, Nacos; one
//! or several), print every change.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use routechain::core::{CallState, Request, Snapshot};
use routechain::rules::ChainFile;

use super::route::route_once;
use routechain::live::registry::Registry;
use routechain::live::{
    CacheOptions, ChainTemplate, FileConfig, FileSource, LiveChain, LiveOptions, ProviderText,
    RegistryAddress, RegistryConnection, RegistryOptions, RegistrySource, Report, ServiceKey,
    Source, Sources, Watching, parse_providers,
};
use routechain::rules::load::{self, LoadError};

/// Arguments of `watch`.
#[derive(Debug, clap::Args)]
#[command(group = clap::ArgGroup::new("registries").args(["zookeeper", "registry"]))]
pub struct WatchArgs {
    /// The chain file (YAML). Watched, with the rule files it names.
    #[arg(long)]
    chain: PathBuf,
    /// A providers file (one URL per line), watched.
    #[arg(long, conflicts_with = "registries")]
    providers: Option<PathBuf>,
    /// ZooKeeper to follow, in Dubbo's layout: `host:port[,host:port...][/chroot]`, with
    /// digest credentials `user:pass@host:port` or `zookeeper://user:pass@host:port` (as
    /// `routechain zk`; shown masked): any address `--registry` takes, under its first
    /// name. A bad address exits 2 at once.
    #[arg(long)]
    zookeeper: Option<String>,
    /// The registries to follow, as Dubbo writes them (docs/live.md, "Registry
    /// addresses"): `zookeeper://h1:2181?backup=h2:2181`; several separated by `|` or `;`
    /// have their providers merged (Dubbo's zone-aware choice with `preferred=true`,
    /// `zone=`), the rules read from the first (or the one with
    /// `use-as-config-center=true`). Shown masked. A bad address exits 2 at once.
    #[arg(long, value_name = "ADDRESS")]
    registry: Option<String>,
    /// The consumer's zone, matched against the registries' `zone=` for a call whose
    /// request has no `registry_zone` attachment (Dubbo's default zone detector).
    #[arg(long, value_name = "ZONE", requires = "registries")]
    registry_zone: Option<String>,
    /// The reference whose providers and service-scope rules to follow:
    /// `interface`, `interface:version:group` or `group/interface:version` (`*` any
    /// group or version, `a,b` either group); default the chain file's `service`, `group`
    /// and `version`, followed as the file changes. A bare interface keeps the file's
    /// group and version. Given, the reference is fixed for the run.
    #[arg(long, requires = "registries")]
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
    /// Keep the providers and rules last read from the registry in DIR (one file per
    /// reference, rewritten at most once a second) and serve them at a start while the
    /// registry cannot be reached; default `$XDG_CACHE_HOME/routechain`, else
    /// `~/.cache/routechain`.
    #[arg(long, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
    /// Keep no cache: a start while the registry cannot be reached serves nothing until
    /// it answers.
    #[arg(long, conflicts_with = "cache_dir")]
    no_cache: bool,
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
    let address = args
        .registry
        .as_deref()
        .or(args.zookeeper.as_deref())
        .map(RegistryAddress::parse)
        .transpose()
        .map_err(|e| invalid(e.to_string()))?;
    if address.is_some() && reference.is_none() && chain.service.is_none() {
        let flag = if args.registry.is_some() {
            "--registry"
        } else {
            "--zookeeper"
        };
        return Err(invalid(format!(
            "{flag} needs a service: give --service or `service:` in the chain file"
        )));
    }
    let options = LiveOptions {
        protect_empty: !args.allow_empty,
        provider_picks: args.provider_picks,
        consumer: request.as_ref().and_then(|r| r.consumer.clone()),
        // A registry's state is kept for a start while it cannot be reached.
        cache: args
            .cache_dir
            .clone()
            .or_else(CacheOptions::default_dir)
            .filter(|_| !args.no_cache)
            .zip(address.as_ref())
            .map(|(dir, address)| CacheOptions {
                // One directory may hold the caches of several registries (staging,
                // production): each registry has its own files.
                scope: address.to_string(),
                ..CacheOptions::new(dir)
            }),
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
    // From files the state is loaded now; from registries, once the source has delivered
    // its first read (nothing is printed to stdout before that).
    let loaded = Arc::new(AtomicBool::new(address.is_none()));
    let (reload_tx, reload_rx) = std::sync::mpsc::channel::<()>();
    // Hold the printer while the source starts, so the start line comes first; the watches
    // are in place once `watch` returns, so no change made after the start line is missed.
    let start_lock = router
        .as_ref()
        .map(|r| r.call.lock().unwrap_or_else(|p| p.into_inner()));
    // One connection state per registry, kept over restarts of the sources.
    let connections: Vec<RegistryConnection> = address
        .iter()
        .flat_map(|a| (0..a.entries().len()).filter(|&i| a.followed(i)))
        .map(|_| RegistryConnection::default())
        .collect();
    let (source, mut following) = sources(args, &live, address.as_ref(), &connections);
    if address.is_some() && !args.no_cache {
        match (&live.options().cache, live.reference()) {
            (Some(cache), Some(reference)) => errln!(
                "routechain watch: cache: {}; served at a start while the registry cannot be \
                 reached (--no-cache: none)",
                cache.path_for(&reference).display()
            ),
            _ => errln!(
                "routechain watch: cache: none (neither XDG_CACHE_HOME nor HOME is set; \
                 give --cache-dir)"
            ),
        }
    }
    let mut watching = start(&live, source, &router, &loaded, &reload_tx)?;
    // Served once the watches are in place: a change made after the line below is seen.
    if let Some(addr) = args.metrics {
        let collector = routechain::live::metrics::ChainCollector::new();
        collector.add(&live);
        let mut registry = routechain::prometheus_client::registry::Registry::default();
        collector.register(&mut registry);
        if let Some(collector) = address
            .as_ref()
            .and_then(|a| registry_collector(a, &connections))
        {
            collector.register(&mut registry);
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
    // A reloaded chain file may change what to follow in the registries (the reference,
    // the consumer's application, the entries' keys): then the sources start afresh.
    while reload_rx.recv().is_ok() {
        let Some(address) = &address else {
            continue;
        };
        // The reference (`service`, `group`, `version`) filters the providers read.
        let now = RegistrySource::for_chain(address, &live, RegistryOptions::default());
        if following.as_ref().is_some_and(|f| f.follows_same(&now)) {
            continue;
        }
        let kinds: std::collections::BTreeSet<&str> =
            address.entries().iter().map(|e| e.kind()).collect();
        let registry = match kinds.into_iter().collect::<Vec<_>>().as_slice() {
            ["nacos"] => "Nacos",
            ["zookeeper"] => "ZooKeeper",
            _ => "the registries",
        };
        errln!(
            "routechain watch: the chain file changes what to follow in {registry}; re-reading it"
        );
        drop(watching);
        let (source, now) = sources(args, &live, Some(address), &connections);
        following = now;
        watching = start(&live, source, &router, &loaded, &reload_tx)?;
    }
    loop {
        std::thread::park();
    }
}

/// The sources `watch` runs: the file source (chain file, rule files, providers file), and
/// the registries of `--registry` (or `--zookeeper`) for rules and providers, their watched
/// paths printed; with them, what the registries follow (to compare after a reload).
fn sources(
    args: &WatchArgs,
    live: &LiveChain,
    address: Option<&RegistryAddress>,
    connections: &[RegistryConnection],
) -> (Box<dyn Source>, Option<RegistrySource>) {
    let chain_source = Box::new(FileSource::new(FileConfig::new(
        args.chain.clone(),
        args.providers.clone(),
    )));
    let Some(address) = address else {
        return (chain_source, None);
    };
    let options = RegistryOptions {
        protect_empty: !args.allow_empty,
        zone: args.registry_zone.clone(),
    };
    let mut registries = RegistrySource::for_chain(address, live, options);
    for (config, connection) in registries.following_mut().zip(connections) {
        config.following_mut().connection = connection.clone();
    }
    let reference = live
        .reference()
        .unwrap_or_else(|| ServiceKey::parse(&live.service_name().unwrap_or_default()));
    let several = registries.following().len() > 1;
    if several {
        errln!(
            "routechain watch: following {} registries for {} ({}), {}:",
            registries.following().len(),
            reference.interface,
            reference.describe_filter(),
            if address.zone_aware() {
                "Dubbo's zone-aware choice, one registry per call (the preferred one, else the call's or the consumer's zone, else a draw by weight)"
            } else {
                "their providers merged"
            }
        );
    }
    for (entry, following) in registries.following() {
        let (what, node) = match &entry.registry {
            Registry::ZooKeeper(a) => (format!("ZooKeeper {a}"), "node"),
            Registry::Nacos(a) => (format!("Nacos {a}"), "config"),
        };
        let provider_app_kinds = &following.following().provider_app_kinds;
        let each_app_kinds = &following.following().each_app_kinds;
        // One registry: one line names it and the reference; several: each registry's.
        let lead = if several {
            errln!("  {entry}; watching:");
            "  "
        } else {
            errln!(
                "routechain watch: following {what} for {} ({}); watching:",
                reference.interface,
                reference.describe_filter()
            );
            ""
        };
        for path in following.watched() {
            errln!("{lead}  {path}");
        }
        if !provider_app_kinds.is_empty() {
            errln!(
                "{lead}  and, once the providers' application is known, its {} {node}(s)",
                provider_app_kinds.join(", ")
            );
        }
        if !each_app_kinds.is_empty() {
            errln!(
                "{lead}  and the {} {node}(s) of every provider application present, from its first provider to its last",
                each_app_kinds.join(", ")
            );
        }
    }
    errln!("  and the chain file {}", args.chain.display());
    let source: Box<dyn Source> = Box::new(registries.clone());
    (
        Box::new(Sources(vec![source, chain_source])),
        Some(registries),
    )
}

/// The connection-state gauges of the registries followed.
fn registry_collector(
    address: &RegistryAddress,
    connections: &[RegistryConnection],
) -> Option<routechain::live::metrics::RegistryCollector> {
    let mut collector: Option<routechain::live::metrics::RegistryCollector> = None;
    let followed = (address.entries().iter().enumerate())
        .filter(|(i, _)| address.followed(*i))
        .map(|(_, e)| e);
    for (entry, connection) in followed.zip(connections) {
        let c = collector.unwrap_or_default();
        collector = Some(match &entry.registry {
            Registry::ZooKeeper(zk) => c.and_zookeeper(zk, connection.clone()),
            Registry::Nacos(nacos) => c.and_nacos(nacos, connection.clone()),
        });
    }
    collector
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
        let published = live.service().load();
        let state = published.state();
        if *printed == Some(state.generation()) {
            return;
        }
        *printed = Some(state.generation());
        let routed = route_once(
            state,
            published.registries().map(|r| &**r),
            &self.request,
            call,
        );
        outln!("{}", routed.json(false, Some(state.generation()), false));
    }
}
