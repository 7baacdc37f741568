//! `routechain check`: validate and compile chain files, print every problem.

use std::path::PathBuf;
use std::process::ExitCode;

use routechain::rules::ChainFile;

use super::EXIT_INVALID;

/// Arguments of `check`.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// Chain files to check.
    #[arg(required = true)]
    chains: Vec<PathBuf>,
}

/// Runs `check`: every problem of every file on stderr, a summary line per file on stdout;
/// exits 2 when any file is invalid.
pub fn run(args: &CheckArgs) -> ExitCode {
    let registry = routechain::registry();
    let mut failed = false;
    for path in &args.chains {
        let (chain, mut errors) = ChainFile::load_lenient(path);
        let mut routers = 0;
        if let Some(chain) = chain {
            match chain.compile(&registry) {
                Ok(entries) => routers = entries.len(),
                Err(mut es) => errors.append(&mut es),
            }
        }
        errors.sort_by_key(|e| (e.origin.clone(), e.location));
        if errors.is_empty() {
            println!("{}: ok ({routers} routers)", path.display());
        } else {
            failed = true;
            eprintln!("{}", routechain::rules::located::render_all(&errors));
            println!("{}: {} problem(s)", path.display(), errors.len());
        }
    }
    if failed {
        ExitCode::from(EXIT_INVALID)
    } else {
        ExitCode::SUCCESS
    }
}
