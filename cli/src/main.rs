//! The `routechain` command-line tool: see `routechain --help`. Logging is set up per
//! command by [`commands::run`].
//!
//! The library a service depends on is the `routechain` crate; this crate adds the command
//! line, its terminal output and the demo, so that their dependencies (clap, indicatif,
//! tracing-subscriber) never reach a service.

// Every byte of output goes through `out` (a closed pipe must not panic).
#![deny(clippy::print_stdout, clippy::print_stderr)]

#[macro_use]
mod out;
mod commands;
mod demo;
mod lint;

fn main() -> std::process::ExitCode {
    commands::run(std::env::args_os())
}
