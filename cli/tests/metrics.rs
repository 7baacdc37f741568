//! `routechain watch --metrics`: the real binary serves its Prometheus metrics; `promtool
//! check metrics` accepts them; a real Prometheus server (Debian's `prometheus`, installed
//! by `.ci/prometheus.sh`, which `scripts/test.sh` runs) scrapes them and its query API
//! sees one applied and one refused update; docs/metrics.md's example scrape and the
//! Grafana dashboard are checked against the real output.

mod common;

use std::io::{BufRead, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use common::{Scratch, workspace};
use serde_json::Value;

const PROVIDERS: &str = "\
dubbo://10.0.0.1:20880/com.foo.BarService?zone=a
dubbo://10.0.0.2:20880/com.foo.BarService?zone=b
";

/// A running `routechain watch --metrics 127.0.0.1:0`: its stderr lines on a channel, the
/// address it serves metrics on; killed on drop.
struct Watch {
    child: std::process::Child,
    stderr: Receiver<String>,
    metrics: String,
}

impl Watch {
    fn spawn(args: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_routechain"))
            .arg("watch")
            .args(args)
            .args(["--metrics", "127.0.0.1:0"])
            .env("XDG_CACHE_HOME", common::cache_home())
            .current_dir(workspace())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn routechain watch");
        let (tx, stderr) = std::sync::mpsc::channel();
        let pipe = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut w = Watch {
            child,
            stderr,
            metrics: String::new(),
        };
        let line = w.wait_line("serving metrics on http://");
        w.metrics = line
            .split("http://")
            .nth(1)
            .and_then(|s| s.strip_suffix("/metrics"))
            .unwrap()
            .to_string();
        w
    }

    /// Waits (30 s at most) for a stderr line containing `needle`.
    fn wait_line(&self, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut seen = Vec::new();
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.stderr.recv_timeout(left) {
                Ok(line) if line.contains(needle) => return line,
                Ok(line) => seen.push(line),
                Err(_) => break,
            }
        }
        panic!("no stderr line with {needle:?}; got {seen:#?}");
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `GET path` on `addr` (HTTP/1.0, with an `Accept` header): (status, headers, body).
fn get(addr: &str, path: &str, accept: &str) -> (u16, String, String) {
    let mut s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.0\r\nHost: {addr}\r\nAccept: {accept}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, head.to_string(), body.to_string())
}

fn scrape(w: &Watch) -> String {
    let (status, head, body) = get(&w.metrics, "/metrics", "text/plain");
    assert_eq!(status, 200, "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/plain; version=0.0.4; charset=utf-8"),
        "{head}"
    );
    body
}

fn tool(name: &str) -> String {
    for dir in std::env::var("PATH").unwrap_or_default().split(':') {
        let p = std::path::Path::new(dir).join(name);
        if p.is_file() {
            return p.display().to_string();
        }
    }
    panic!("{name} is not installed: run `bash .ci/prometheus.sh` (scripts/test.sh does)");
}

/// A rule file, a chain file naming it, a providers file.
fn files(s: &Scratch) -> (String, String) {
    s.write(
        "bar.rule.yaml",
        "conditions:\n  - method = get => zone = a\n",
    );
    let chain = s.write(
        "bar.chain.yaml",
        "service: com.foo.BarService\nrouters:\n  - type: condition\n    rule_file: bar.rule.yaml\n",
    );
    let providers = s.write("providers.txt", PROVIDERS);
    (chain.display().to_string(), providers.display().to_string())
}

/// Replaces a file in one step (as editors do), so the watcher never reads it half written.
fn replace(s: &Scratch, name: &str, text: &str) {
    let tmp = s.0.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, s.0.join(name)).unwrap();
}

/// Runs the scenario of the docs' example: a good rule change, then a bad one.
fn change_a_rule_then_push_a_bad_one(s: &Scratch, w: &Watch) {
    replace(
        s,
        "bar.rule.yaml",
        "conditions:\n  - method = get => zone = b\n",
    );
    w.wait_line("applied generation 2");
    replace(s, "bar.rule.yaml", "conditions: [\n");
    w.wait_line("refused chain file");
}

#[test]
fn watch_serves_metrics_promtool_accepts_and_the_docs_show() {
    let s = Scratch::new("metrics-serve");
    let (chain, providers) = files(&s);
    let w = Watch::spawn(&["--chain", &chain, "--providers", &providers]);
    let text = scrape(&w);
    assert!(
        text.contains("routechain_generation{chain=\"com.foo.BarService::\"} 1\n"),
        "{text}"
    );
    change_a_rule_then_push_a_bad_one(&s, &w);
    let text = scrape(&w);
    for line in [
        "routechain_generation{chain=\"com.foo.BarService::\"} 2",
        "routechain_providers{chain=\"com.foo.BarService::\"} 2",
        "routechain_updates_total{chain=\"com.foo.BarService::\",source=\"file\",result=\"applied\"} 1",
        "routechain_updates_total{chain=\"com.foo.BarService::\",source=\"file\",result=\"refused\"} 1",
        "routechain_update_apply_seconds_count{chain=\"com.foo.BarService::\"} 1",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
    }
    // promtool: no parse error, no lint problem.
    let mut promtool = Command::new(tool("promtool"))
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    promtool
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = promtool.wait_with_output().unwrap();
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "promtool check metrics: {:?}\n{}\n{text}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    // OpenMetrics on request; 404 elsewhere.
    let (status, head, body) = get(&w.metrics, "/metrics", "application/openmetrics-text");
    assert_eq!(status, 200);
    assert!(head.contains("application/openmetrics-text"), "{head}");
    assert!(body.ends_with("# EOF\n"), "{body}");
    assert_eq!(get(&w.metrics, "/", "*/*").0, 404);
    // docs/metrics.md shows this scrape: every line, except the apply-time histogram's
    // values (timings), appears there as it was served.
    let docs = std::fs::read_to_string(workspace().join("docs/metrics.md")).unwrap();
    let start = docs
        .find("<!-- example scrape -->")
        .expect("docs/metrics.md has the example scrape marker");
    let example = &docs[start..];
    for line in text.lines() {
        let timed = line.starts_with("routechain_update_apply_seconds_bucket")
            || line.starts_with("routechain_update_apply_seconds_sum");
        let shown = if timed {
            let series = line.rsplit_once(' ').unwrap().0;
            example.lines().any(|l| l.starts_with(series))
        } else {
            example.lines().any(|l| l == line)
        };
        assert!(
            shown,
            "docs/metrics.md's example scrape lacks:\n{line}\nscrape:\n{text}"
        );
    }
    // The Grafana dashboard's queries name only metrics the scrape has.
    check_dashboard(&text);
}

/// Every `expr` of docs/grafana-dashboard.json names only `routechain_*` series the scrape
/// has, and the dashboard in docs/metrics.md is the same JSON.
fn check_dashboard(scrape: &str) {
    let path = workspace().join("docs/grafana-dashboard.json");
    let text = std::fs::read_to_string(&path).unwrap();
    let dashboard: Value = serde_json::from_str(&text).expect("the dashboard is JSON");
    let mut exprs = Vec::new();
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                for (k, v) in m {
                    match (k.as_str(), v) {
                        ("expr", Value::String(e)) => out.push(e.clone()),
                        _ => walk(v, out),
                    }
                }
            }
            Value::Array(a) => a.iter().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    walk(&dashboard, &mut exprs);
    assert!(exprs.len() >= 8, "{exprs:?}");
    // The series served, and the families declared (a plugin-failure family has no series
    // without a plugin router).
    let names: Vec<&str> = scrape
        .lines()
        .filter_map(|l| match l.strip_prefix("# TYPE ") {
            Some(t) => t.split(' ').next(),
            None if l.starts_with('#') => None,
            None => l.split(['{', ' ']).next(),
        })
        .collect();
    for e in &exprs {
        let used: Vec<&str> = e
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| w.starts_with("routechain_"))
            .collect();
        assert!(!used.is_empty(), "{e}");
        for name in used {
            assert!(names.contains(&name), "{e}: {name} is not served");
        }
    }
    let docs = std::fs::read_to_string(workspace().join("docs/metrics.md")).unwrap();
    let block = docs
        .split("```json\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("docs/metrics.md holds the dashboard JSON");
    let in_docs: Value = serde_json::from_str(block).expect("the docs' dashboard is JSON");
    assert_eq!(
        in_docs, dashboard,
        "docs/metrics.md and docs/grafana-dashboard.json differ"
    );
}

/// A free loopback port (bound, read, closed).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A Prometheus server on a free loopback port with its own storage, killed on drop.
struct Prometheus {
    child: std::process::Child,
    addr: String,
    _dir: Scratch,
}

impl Prometheus {
    fn start(target: &str) -> Self {
        let binary = tool("prometheus");
        for attempt in 0..5 {
            let dir = Scratch::new(&format!("prometheus-{attempt}"));
            let config = dir.write(
                "prometheus.yml",
                &format!(
                    "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: routechain\n    scrape_interval: 1s\n    scrape_timeout: 1s\n    static_configs:\n      - targets: ['{target}']\n"
                ),
            );
            let addr = format!("127.0.0.1:{}", free_port());
            let log = std::fs::File::create(dir.0.join("prometheus.log")).unwrap();
            let mut child = Command::new(&binary)
                .arg(format!("--config.file={}", config.display()))
                .arg(format!("--storage.tsdb.path={}", dir.path("data")))
                .arg(format!("--web.listen-address={addr}"))
                .arg("--log.level=warn")
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .expect("start prometheus");
            let deadline = Instant::now() + Duration::from_secs(20);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    break; // the port was taken: another try
                }
                if TcpStream::connect(&addr).is_ok() && get(&addr, "/-/ready", "*/*").0 == 200 {
                    return Prometheus {
                        child,
                        addr,
                        _dir: dir,
                    };
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
            let log = std::fs::read_to_string(dir.0.join("prometheus.log")).unwrap_or_default();
            eprintln!("prometheus did not start on {addr}: {log}");
        }
        panic!("prometheus did not start (5 attempts)");
    }

    /// The value of the instant query `query`'s single series, once it has one.
    fn value(&self, query: &str) -> Option<String> {
        let encoded: String = query
            .chars()
            .map(|c| match c {
                'a'..='z' | 'A'..='Z' | '0'..='9' | '_' => c.to_string(),
                c => format!("%{:02X}", c as u32),
            })
            .collect();
        let (status, _, body) = get(&self.addr, &format!("/api/v1/query?query={encoded}"), "*/*");
        if status != 200 {
            return None;
        }
        let v: Value = serde_json::from_str(&body).ok()?;
        assert_eq!(v["status"], "success", "{body}");
        let result = v["data"]["result"].as_array()?;
        match result.as_slice() {
            [one] => one["value"][1].as_str().map(str::to_string),
            _ => None,
        }
    }

    /// Polls `query` (every 100 ms, 40 s at most) until its value is `want`.
    fn wait_value(&self, query: &str, want: &str) {
        let deadline = Instant::now() + Duration::from_secs(40);
        let mut last = None;
        while Instant::now() < deadline {
            last = self.value(query);
            if last.as_deref() == Some(want) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("{query}: Prometheus answers {last:?}, not {want:?}");
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_real_prometheus_scrapes_watch_and_sees_one_applied_and_one_refused_update() {
    let s = Scratch::new("metrics-prometheus");
    let (chain, providers) = files(&s);
    let w = Watch::spawn(&["--chain", &chain, "--providers", &providers]);
    let prometheus = Prometheus::start(&w.metrics);
    // The first scrape (about 5 s after the start: Prometheus's discovery tick).
    prometheus.wait_value("up{job=\"routechain\"}", "1");
    prometheus.wait_value("routechain_generation", "1");
    change_a_rule_then_push_a_bad_one(&s, &w);
    prometheus.wait_value(
        "routechain_updates_total{chain=\"com.foo.BarService::\",source=\"file\",result=\"applied\"}",
        "1",
    );
    prometheus.wait_value(
        "routechain_updates_total{chain=\"com.foo.BarService::\",source=\"file\",result=\"refused\"}",
        "1",
    );
    prometheus.wait_value("sum(routechain_updates_total)", "2");
    prometheus.wait_value("routechain_generation", "2");
}
