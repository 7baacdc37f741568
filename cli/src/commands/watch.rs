//! `routechain watch`: keep a chain live from files or ZooKeeper, print every change.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use routechain::core::{CallState, Request, Snapshot};
use routechain::rules::ChainFile;

use super::route::route_once;
use routechain::live::{
    FileConfig, FileSource, LiveChain, LiveOptions, Report, ServiceKey, Source, ZkConfig, ZkSource,
};
use routechain::rules::load::{self, LoadError};

/// Arguments of `watch`.
#[derive(Debug, clap::Args)]
pub struct WatchArgs {
    /// The chain file (YAML). Watched, with the rule files it names.
    #[arg(long)]
    chain: PathBuf,
    /// A providers file (one URL per line), watched.
    #[arg(long, conflicts_with = "zookeeper")]
    providers: Option<PathBuf>,
    /// ZooKeeper to follow, in Dubbo's layout: `host:port[,host:port...][/chroot]`.
    #[arg(long)]
    zookeeper: Option<String>,
    /// The service (`interface[:version[:group]]`) whose providers and service-scope rules
    /// to follow; default the chain file's `service`.
    #[arg(long, requires = "zookeeper")]
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
    let mut chain = ChainFile::load(&args.chain).map_err(LoadError::Invalid)?;
    let request = args
        .request
        .as_deref()
        .map(load::load_request)
        .transpose()?;
    let providers = match &args.providers {
        Some(p) => load::load_providers(p, 1)?,
        None => Snapshot::new(1, Vec::new()),
    };
    if let Some(service) = &args.service {
        chain.service = Some(service.clone());
    }
    if args.zookeeper.is_some() && chain.service.is_none() {
        return Err(invalid(
            "--zookeeper needs a service: give --service or `service:` in the chain file".into(),
        ));
    }
    let options = LiveOptions {
        protect_empty: !args.allow_empty,
        consumer: request.as_ref().and_then(|r| r.consumer.clone()),
        ..LiveOptions::default()
    };
    let live = Arc::new(LiveChain::with_providers(
        chain,
        routechain::registry(),
        options,
        providers,
    )?);
    let source: Box<dyn Source> = match &args.zookeeper {
        Some(servers) => {
            let config = ZkConfig::for_chain(&live, servers.clone());
            eprintln!(
                "routechain watch: following ZooKeeper {servers}: providers of {}, rules {}",
                config
                    .service
                    .as_ref()
                    .map(ServiceKey::rule_key)
                    .unwrap_or_default(),
                config
                    .rule_keys
                    .iter()
                    .map(routechain::live::rule_path)
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            Box::new(ZkSource::new(config))
        }
        None => Box::new(FileSource::new(FileConfig::new(
            args.chain.clone(),
            args.providers.clone(),
        ))),
    };
    let router = request.map(|r| {
        let call = match args.seed {
            Some(seed) => CallState::seeded(seed),
            None => CallState::new(),
        };
        Arc::new(RequestPrinter {
            request: r,
            call: Mutex::new(call),
        })
    });
    // Hold the printer while the source starts, so the start line comes first; the watches
    // are in place once `watch` returns, so no change made after the start line is missed.
    let start_lock = router
        .as_ref()
        .map(|r| r.call.lock().unwrap_or_else(|p| p.into_inner()));
    let printer = router.clone();
    let live_for_reports = live.clone();
    let _watching = live
        .watch(source, move |report| {
            eprintln!("routechain watch: {report}");
            if let (Report::Applied { .. }, Some(r)) = (report, &printer) {
                let mut call = r.call.lock().unwrap_or_else(|p| p.into_inner());
                r.print(&live_for_reports, &mut call);
            }
        })
        .map_err(|e| invalid(e.to_string()))?;
    if let (Some(r), Some(mut call)) = (&router, start_lock) {
        r.print(&live, &mut call);
    }
    loop {
        std::thread::park();
    }
}

struct RequestPrinter {
    request: Request,
    call: Mutex<CallState>,
}

impl RequestPrinter {
    fn print(&self, live: &LiveChain, call: &mut CallState) {
        let state = live.chain().load();
        let routed = route_once(&state, &self.request, call);
        println!("{}", routed.json(false, Some(state.generation()), false));
    }
}
