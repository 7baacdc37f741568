//! The `routechain` binary: see `routechain --help`. Logging is set up per command by
//! [`routechain::cli::run`].

fn main() -> std::process::ExitCode {
    routechain::cli::run(std::env::args_os())
}
