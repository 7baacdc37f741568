//! The `routechain` binary: see `routechain --help`.

fn main() -> std::process::ExitCode {
    routechain::cli::init_logging();
    routechain::cli::run(std::env::args_os())
}
