//! Helpers shared by the CLI test files: run the real binary from the workspace root, and a
//! scratch directory per test.

#![allow(dead_code)] // each test file uses its own subset

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// A throwaway directory for one test's files, removed on drop.
pub struct Scratch(pub PathBuf);

impl Scratch {
    /// A fresh directory named after the test and this process.
    pub fn new(name: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("routechain-cli-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
    /// Writes `text` to `name` in the directory; its path.
    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }
    /// The path of `name` in the directory, as a string.
    pub fn path(&self, name: &str) -> String {
        self.0.join(name).display().to_string()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The workspace root (where the commands run).
pub fn workspace() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root")
}

/// The `XDG_CACHE_HOME` of the commands run: `watch --zookeeper` keeps its cache there,
/// not in the home directory of whoever runs the tests.
pub fn cache_home() -> PathBuf {
    std::env::temp_dir().join(format!("routechain-cli-cache-{}", std::process::id()))
}

/// Runs `routechain ARGS` in the workspace root.
pub fn routechain(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_routechain"))
        .args(args)
        .env("XDG_CACHE_HOME", cache_home())
        .current_dir(workspace())
        .output()
        .expect("run routechain")
}

/// stdout as text.
pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// stderr as text.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// stdout as JSON (panics with both streams when it is not).
pub fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}\nstderr: {}",
            stdout(out),
            stderr(out)
        )
    })
}

/// The exit code, with both streams in the message when it is not `want`.
pub fn assert_exit(out: &Output, want: i32) {
    assert_eq!(
        out.status.code(),
        Some(want),
        "stdout:\n{}\nstderr:\n{}",
        stdout(out),
        stderr(out)
    );
}

/// Runs every `$ routechain …` line of a document: the lines after it up to `[exit N]` are
/// what the command prints (stdout, then stderr), and N its exit code. Returns every output.
pub fn run_samples(doc: &str, name: &str) -> (usize, String) {
    let mut samples = 0;
    let mut shown = String::new();
    let lines: Vec<&str> = doc.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let Some(args) = lines[i].strip_prefix("$ routechain ") else {
            i += 1;
            continue;
        };
        let mut expected = Vec::new();
        i += 1;
        while i < lines.len() && !lines[i].starts_with("[exit ") {
            expected.push(lines[i]);
            i += 1;
        }
        let exit: i32 = lines
            .get(i)
            .unwrap_or_else(|| panic!("{name}: `routechain {args}` has no [exit N] line"))
            .trim_start_matches("[exit ")
            .trim_end_matches(']')
            .parse()
            .unwrap();
        let args: Vec<&str> = args.split_whitespace().collect();
        let out = routechain(&args);
        let got = format!("{}{}", stdout(&out), stderr(&out));
        assert_eq!(
            got.trim_end_matches('\n'),
            expected.join("\n"),
            "{name}: `routechain {}`",
            args.join(" ")
        );
        assert_eq!(
            out.status.code(),
            Some(exit),
            "{name}: routechain {}",
            args.join(" ")
        );
        shown.push_str(&got);
        samples += 1;
        i += 1;
    }
    (samples, shown)
}

/// A running `routechain` process (a `watch`, a `zk register`), its stdout and stderr read
/// line by line on their own threads; killed on drop.
pub struct Running {
    child: std::process::Child,
    stdout: std::sync::mpsc::Receiver<String>,
    stderr: std::sync::mpsc::Receiver<String>,
}

fn lines(r: impl std::io::Read + Send + 'static) -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(r).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

impl Running {
    /// Starts the binary with `args` from the workspace root, stdin closed.
    pub fn spawn(args: &[&str]) -> Self {
        use std::process::Stdio;
        let mut child = Command::new(env!("CARGO_BIN_EXE_routechain"))
            .args(args)
            .env("XDG_CACHE_HOME", cache_home())
            .current_dir(workspace())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn routechain");
        let stdout = lines(child.stdout.take().unwrap());
        let stderr = lines(child.stderr.take().unwrap());
        Running {
            child,
            stdout,
            stderr,
        }
    }

    /// The stderr lines up to the first that contains `needle`, that one last (30 s at most).
    pub fn stderr_until(&self, needle: &str) -> Vec<String> {
        let mut seen = Vec::new();
        loop {
            match self.stderr.recv_timeout(std::time::Duration::from_secs(30)) {
                Ok(line) => {
                    let found = line.contains(needle);
                    seen.push(line);
                    if found {
                        return seen;
                    }
                }
                Err(_) => panic!("no stderr line with {needle:?}; saw {seen:#?}"),
            }
        }
    }

    /// Skips stderr lines until one contains `needle`; returns it.
    pub fn stderr_with(&self, needle: &str) -> String {
        self.stderr_until(needle).pop().unwrap()
    }

    /// The stderr lines printed so far and not yet read.
    pub fn seen(&self) -> Vec<String> {
        self.stderr.try_iter().collect()
    }

    /// The next stdout line, parsed as JSON (30 s at most).
    pub fn next_json(&self) -> Value {
        let line = self
            .stdout
            .recv_timeout(std::time::Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("no stdout line; stderr: {:?}", self.seen()));
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    }

    /// Sends signal `name` (`INT`, `STOP`, `CONT`...) to the process.
    pub fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .args([&format!("-{name}"), &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Sends SIGINT (Ctrl-C) and waits for the process to end.
    pub fn interrupt(&mut self) -> std::process::ExitStatus {
        self.signal("INT");
        self.child.wait().unwrap()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
