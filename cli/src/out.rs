//! The command line's output: every byte to stdout or stderr goes through here (the crate
//! denies `outln!` and `errln!`, which panic on a closed pipe).
//!
//! - A closed stdout (`routechain route … | head -1`) ends the process quietly with status
//!   0, ripgrep's convention: the reader has all it wanted. Any other failure to write to
//!   stdout (a full disk) is reported on stderr and exits 1. A failed write to stderr is
//!   dropped: there is nowhere left to report it.
//! - Colour: the text carries `anstyle` styles ([`ERROR`], [`WARNING`], [`HEADER`]) and
//!   `anstream` drops them unless the stream is a terminal, drops them when `NO_COLOR` is
//!   set, and keeps them when `CLICOLOR_FORCE` is set (<https://bixense.com/clicolors/>).

use std::io::Write;

/// The style of an error's label or message.
pub const ERROR: anstyle::Style = anstyle::AnsiColor::Red.on_default().bold();
/// The style of a warning's label.
pub const WARNING: anstyle::Style = anstyle::AnsiColor::Yellow.on_default().bold();
/// The style of a table's header.
pub const HEADER: anstyle::Style = anstyle::Style::new().bold();

/// `text` in `style` (the codes are dropped on output where colour is off).
pub fn paint(style: anstyle::Style, text: &str) -> String {
    format!("{style}{text}{style:#}")
}

/// `text` with its first line in `style` (a table's header).
pub fn paint_first_line(style: anstyle::Style, text: &str) -> String {
    match text.split_once('\n') {
        Some((first, rest)) => format!("{}\n{rest}", paint(style, first)),
        None => paint(style, text),
    }
}

/// Rendered errors with every message line in [`ERROR`]; the source excerpts (the lines
/// starting with a space) stay plain.
pub fn paint_errors(rendered: &str) -> String {
    rendered
        .split('\n')
        .map(|line| {
            if line.is_empty() || line.starts_with(' ') {
                line.to_string()
            } else {
                paint(ERROR, line)
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Writes `text` to stdout (see the module documentation for a closed stdout).
pub fn stdout(text: &str) {
    let mut out = anstream::stdout().lock();
    if let Err(e) = out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        stderr(&format!("routechain: cannot write to stdout: {e}\n"));
        std::process::exit(1);
    }
}

/// Writes `text` to stderr; a failure is dropped.
pub fn stderr(text: &str) {
    let mut err = anstream::stderr().lock();
    let _ = err.write_all(text.as_bytes()).and_then(|()| err.flush());
}

/// Whether colour is on for stderr (for the log lines, which `tracing` colours itself).
pub fn stderr_has_colour() -> bool {
    anstream::AutoStream::choice(&std::io::stderr()) != anstream::ColorChoice::Never
}

/// `print!` through [`stdout`].
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::out::stdout(&format!($($arg)*))
    };
}

/// `println!` through [`stdout`].
macro_rules! outln {
    () => {
        $crate::out::stdout("\n")
    };
    ($($arg:tt)*) => {
        $crate::out::stdout(&format!("{}\n", format_args!($($arg)*)))
    };
}

/// `eprintln!` through [`stderr`].
macro_rules! errln {
    () => {
        $crate::out::stderr("\n")
    };
    ($($arg:tt)*) => {
        $crate::out::stderr(&format!("{}\n", format_args!($($arg)*)))
    };
}
