//! A real Nacos server for tests: `rnacos` (the Nacos-compatible server from crates.io,
//! `bash .ci/rnacos.sh` installs it into `~/.cargo/bin`), started on free loopback ports
//! (HTTP `P`, gRPC `P + 1000` where Nacos clients look for it, console elsewhere) with a
//! throwaway data directory, killed on drop, restartable on the same ports and data, and
//! freezable (SIGSTOP); [`NacosCluster`], several such servers forming one raft cluster;
//! and [`NacosWriter`], the official Python Nacos SDK (`tests/python/nacos_writer.py`) writing
//! instances and configs as an independent client.
//!
//! rnacos 0.8 panics on about one start in eight on a fresh data directory, after which
//! naming answers but config writes are lost: the server counts as ready only once a config
//! write reads back, and is started afresh otherwise. It also serves no disabled instance
//! and takes no `healthy=false` from a gRPC registration (the server owns an ephemeral
//! instance's health): those filters are unit-tested (`live/src/nacos/tests.rs`). A missing
//! rnacos is a test failure with the install command, never a skip.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// A running (or stopped) rnacos server owned by one test.
pub struct Nacos {
    dir: PathBuf,
    port: u16,
    console: u16,
    child: Option<Child>,
    binary: PathBuf,
    /// The admin user and password, when the server checks its API's callers.
    auth: Option<(String, String)>,
    /// In a cluster: this node's raft id and the gRPC address of the node it joins
    /// (empty for the first, which starts the cluster).
    raft: Option<(u16, String)>,
    /// Whether the data directory is new: only then does a node start the cluster or ask
    /// to join it. rnacos decides that by an empty raft log, which a node whose log was
    /// compacted into a snapshot also has: restarted with `RNACOS_RAFT_AUTO_INIT=true` the
    /// first node would start a cluster of its own, serving its old state.
    fresh: bool,
}

fn free(port: u16) -> bool {
    TcpListener::bind(("127.0.0.1", port)).is_ok()
}

/// A free port `p` whose `p + 1000` (the gRPC port clients derive) is free too.
fn free_pair() -> u16 {
    for _ in 0..200 {
        let p = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("bind a free loopback port");
        if p < 60000 && free(p + 1000) {
            return p;
        }
    }
    panic!("no free loopback port P with P + 1000 free");
}

/// The rnacos binary: `$RNACOS`, else `~/.cargo/bin/rnacos`, else `rnacos` on `PATH`.
pub fn rnacos_binary() -> PathBuf {
    if let Ok(p) = std::env::var("RNACOS") {
        return PathBuf::from(p);
    }
    let home = std::env::var("HOME").unwrap_or_default();
    let cargo = Path::new(&home).join(".cargo/bin/rnacos");
    if cargo.exists() {
        return cargo;
    }
    if let Ok(out) = Command::new("sh")
        .args(["-c", "command -v rnacos"])
        .output()
        && out.status.success()
    {
        return PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    }
    panic!(
        "rnacos is not installed (neither $RNACOS, ~/.cargo/bin/rnacos nor rnacos on PATH): run \
         `bash .ci/rnacos.sh` (cargo install rnacos --locked)"
    );
}

impl Nacos {
    /// Starts a server on a fresh data directory and waits until a config write reads back
    /// (a server that cannot is started afresh).
    pub fn start(name: &str) -> Self {
        Self::start_as(name, None, None)
    }

    /// Starts a server that admits only callers logged in (Nacos's `accessToken`), its
    /// admin user `user` with `password`.
    pub fn start_with_auth(name: &str, user: &str, password: &str) -> Self {
        Self::start_as(name, Some((user.to_string(), password.to_string())), None)
    }

    fn start_as(name: &str, auth: Option<(String, String)>, raft: Option<(u16, String)>) -> Self {
        let binary = rnacos_binary();
        let port = free_pair();
        let dir = std::env::temp_dir().join(format!(
            "routechain-nacos-{name}-{}-{port}",
            std::process::id()
        ));
        let console = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("bind a free loopback port");
        let mut nacos = Nacos {
            dir,
            port,
            console,
            child: None,
            binary,
            auth,
            raft,
            fresh: true,
        };
        for attempt in 1..=8 {
            let _ = std::fs::remove_dir_all(&nacos.dir);
            std::fs::create_dir_all(nacos.dir.join("data")).expect("create the data directory");
            nacos.spawn();
            if nacos.wait_ready(Duration::from_secs(30)) {
                nacos.fresh = false;
                return nacos;
            }
            eprintln!("rnacos (attempt {attempt}) lost a config write or exited; starting afresh");
            nacos.stop();
        }
        panic!("rnacos did not start in 8 attempts:\n{}", nacos.log());
    }

    fn spawn(&mut self) {
        assert!(self.child.is_none(), "rnacos is already running");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("server.log"))
            .expect("open the server log");
        let mut command = Command::new(&self.binary);
        if let Some((id, join)) = &self.raft {
            command
                .env("RNACOS_RAFT_NODE_ID", id.to_string())
                .env(
                    "RNACOS_RAFT_NODE_ADDR",
                    format!("127.0.0.1:{}", self.port + 1000),
                )
                .env(
                    "RNACOS_RAFT_AUTO_INIT",
                    (self.fresh && join.is_empty()).to_string(),
                )
                .env("RNACOS_RAFT_JOIN_ADDR", if self.fresh { join } else { "" });
        }
        if let Some((user, password)) = &self.auth {
            command
                .env("RNACOS_ENABLE_OPEN_API_AUTH", "true")
                .env("RNACOS_INIT_ADMIN_USERNAME", user)
                .env("RNACOS_INIT_ADMIN_PASSWORD", password);
        }
        let child = command
            .current_dir(&self.dir)
            .env("RNACOS_HTTP_PORT", self.port.to_string())
            .env("RNACOS_GRPC_PORT", (self.port + 1000).to_string())
            .env("RNACOS_HTTP_CONSOLE_PORT", self.console.to_string())
            .env("RNACOS_DATA_DIR", self.dir.join("data"))
            .env("RNACOS_ENV_FILE", self.dir.join("none.env"))
            .env("RNACOS_ENABLE_METRICS", "false")
            // An instance's metadata is what it registered last (rnacos otherwise keeps the
            // first metadata of an address across registrations, as no Nacos server does).
            .env(
                "RNACOS_NAMING_INSTANCE_METADATA_PERSISTENCE_ENABLE",
                "false",
            )
            .env("RNACOS_HTTP_WORKERS", "2")
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log handle"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", self.binary.display()));
        self.child = Some(child);
    }

    /// True once a config written over the HTTP API reads back within `limit`.
    fn wait_ready(&mut self, limit: Duration) -> bool {
        let start = Instant::now();
        let nonce = format!("{}-{:?}", std::process::id(), Instant::now());
        while start.elapsed() < limit {
            if !self.is_running() {
                return false;
            }
            let token = match &self.auth {
                None => String::new(),
                Some((user, password)) => {
                    let body = format!("username={user}&password={password}");
                    let answer = http(self.port, "POST", "/nacos/v1/auth/login", &body)
                        .and_then(|b| serde_json::from_str::<serde_json::Value>(&b).ok());
                    match answer.as_ref().and_then(|v| v["accessToken"].as_str()) {
                        Some(t) => format!("&accessToken={t}"),
                        None => {
                            std::thread::sleep(Duration::from_millis(100));
                            continue;
                        }
                    }
                }
            };
            let body = format!("dataId=routechain-ready&group=probe&content={nonce}{token}");
            if http(self.port, "POST", "/nacos/v1/cs/configs", &body).as_deref() == Some("true") {
                // A write that does not read back within 2 s will not: a server alone lost
                // it. A cluster node may still be applying the log it missed: it is asked
                // again until `limit`.
                let written = Instant::now();
                while written.elapsed() < Duration::from_secs(2) {
                    std::thread::sleep(Duration::from_millis(100));
                    let read = http(
                        self.port,
                        "GET",
                        &format!("/nacos/v1/cs/configs?dataId=routechain-ready&group=probe{token}"),
                        "",
                    );
                    if read.is_some_and(|b| b.trim() == nonce) {
                        return true;
                    }
                }
                if self.raft.is_none() {
                    return false;
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    }

    /// `127.0.0.1:<port>`.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `nacos://127.0.0.1:<port>` plus `query` (`namespace=dev&...`) when not empty.
    pub fn url(&self, query: &str) -> String {
        if query.is_empty() {
            format!("nacos://{}", self.address())
        } else {
            format!("nacos://{}?{query}", self.address())
        }
    }

    /// True while the process runs.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.as_mut().map(|c| c.try_wait()), Some(Ok(None)))
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    /// Kills the server (data kept) and waits until its ports refuse connections.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let start = Instant::now();
        while TcpStream::connect(("127.0.0.1", self.port)).is_ok()
            || TcpStream::connect(("127.0.0.1", self.port + 1000)).is_ok()
        {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "rnacos still answers after kill"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Freezes the server (SIGSTOP): its ports stay open and answer nothing.
    pub fn freeze(&self) {
        self.signal("-STOP");
    }

    /// Resumes a frozen server (SIGCONT).
    pub fn thaw(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, signal: &str) {
        let pid = self.child.as_ref().expect("rnacos runs").id().to_string();
        let status = Command::new("kill")
            .args([signal, &pid])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill {signal} {pid}");
    }

    /// Starts a stopped server again on its ports and data, and waits until a config write
    /// reads back.
    pub fn resume(&mut self) {
        for _ in 0..4 {
            self.spawn();
            if self.wait_ready(Duration::from_secs(30)) {
                return;
            }
            self.stop();
        }
        panic!("rnacos did not come back:\n{}", self.log());
    }

    /// Stops and starts the server on the same ports with the same data, and waits until a
    /// config write reads back.
    pub fn restart(&mut self) {
        self.stop();
        self.resume();
    }
}

impl Drop for Nacos {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A cluster of rnacos servers on loopback ports (raft: the first node starts it, the
/// others join it), each [`Nacos`] with its own data.
pub struct NacosCluster {
    /// The nodes, in raft id order (id 1 first).
    pub nodes: Vec<Nacos>,
}

impl NacosCluster {
    /// Starts `n` nodes, each ready once a config written through it reads back on it.
    pub fn start(name: &str, n: u16) -> Self {
        let first = Nacos::start_as(&format!("{name}-1"), None, Some((1, String::new())));
        let join = format!("127.0.0.1:{}", first.port + 1000);
        let mut nodes = vec![first];
        for id in 2..=n {
            nodes.push(Nacos::start_as(
                &format!("{name}-{id}"),
                None,
                Some((id, join.clone())),
            ));
        }
        NacosCluster { nodes }
    }

    /// Stops every node, then starts them all again on their ports and data, and waits
    /// until each takes a config write (once a quorum is back); a node that does not
    /// within 30 s is started again (rnacos 0.8 sometimes comes up without rejoining).
    pub fn restart_all(&mut self) {
        for node in &mut self.nodes {
            node.stop();
        }
        for node in &mut self.nodes {
            node.spawn();
        }
        for node in &mut self.nodes {
            let mut attempts = 1;
            while !node.wait_ready(Duration::from_secs(30)) {
                assert!(attempts < 4, "rnacos did not come back:\n{}", node.log());
                eprintln!("rnacos did not come back (attempt {attempts}); starting it again");
                node.stop();
                node.spawn();
                attempts += 1;
            }
        }
        self.wait_consistent();
    }

    /// Waits until a config written through one node reads back on every node within 5 s;
    /// a node that does not (rnacos 0.8.8 sometimes brings a node back outside the
    /// cluster, taking its own writes and serving its old state) is started again, up to
    /// three times.
    pub fn wait_consistent(&mut self) {
        for round in 1..=4 {
            let nonce = format!("{}-{:?}", std::process::id(), Instant::now());
            let body = format!("dataId=routechain-consistent&group=probe&content={nonce}");
            let written = Instant::now();
            while !(self.nodes.iter()).any(|n| {
                http(n.port, "POST", "/nacos/v1/cs/configs", &body).as_deref() == Some("true")
            }) {
                assert!(
                    written.elapsed() < Duration::from_secs(60),
                    "no node takes a write"
                );
                std::thread::sleep(Duration::from_millis(100));
            }
            let mut behind: Vec<usize> = (0..self.nodes.len()).collect();
            let since = Instant::now();
            while !behind.is_empty() && since.elapsed() < Duration::from_secs(5) {
                behind.retain(|&i| {
                    let read = http(
                        self.nodes[i].port,
                        "GET",
                        "/nacos/v1/cs/configs?dataId=routechain-consistent&group=probe",
                        "",
                    );
                    read.is_none_or(|b| b.trim() != nonce)
                });
                std::thread::sleep(Duration::from_millis(100));
            }
            if behind.is_empty() {
                return;
            }
            assert!(round < 4, "rnacos nodes {behind:?} never caught up");
            for i in behind {
                eprintln!(
                    "rnacos node {} does not see the others' writes ({}); starting it again",
                    i + 1,
                    raft_state(&self.nodes[i].address())
                );
                self.nodes[i].stop();
                self.nodes[i].spawn();
                assert!(
                    self.nodes[i].wait_ready(Duration::from_secs(30)),
                    "rnacos did not come back:\n{}",
                    self.nodes[i].log()
                );
            }
        }
    }

    /// The index of the raft leader, as the running nodes' raft metrics
    /// (`GET /nacos/v1/raft/metrics`) name it; waits up to 30 s for one.
    pub fn leader(&self) -> usize {
        crate::wait_for(Duration::from_secs(30), "a raft leader", || {
            self.nodes.iter().find_map(|n| {
                let body = http(n.port, "GET", "/nacos/v1/raft/metrics", "")?;
                let v: serde_json::Value = serde_json::from_str(&body).ok()?;
                let id = v["current_leader"].as_u64()?;
                self.nodes
                    .iter()
                    .position(|m| m.raft.as_ref().is_some_and(|(i, _)| u64::from(*i) == id))
            })
        })
    }

    /// The HTTP addresses of `nodes` (indexes), comma-separated, as a client takes them.
    pub fn address_of(&self, nodes: &[usize]) -> String {
        nodes
            .iter()
            .map(|&i| self.nodes[i].address())
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// The raft state of the node at `address` (`127.0.0.1:<port>`) as its metrics say it
/// (`state`, `current_leader`, `last_log_index`, `last_applied`), or that it has none: what
/// a test prints when the cluster stops taking writes.
pub fn raft_state(address: &str) -> String {
    let metrics = (address.rsplit_once(':'))
        .and_then(|(_, p)| p.parse().ok())
        .and_then(|port| http(port, "GET", "/nacos/v1/raft/metrics", ""))
        .and_then(|b| serde_json::from_str::<serde_json::Value>(&b).ok());
    match metrics {
        Some(v) => format!(
            "{address}: {} leader={} log={} applied={}",
            v["state"], v["current_leader"], v["last_log_index"], v["last_applied"]
        ),
        None => format!("{address}: no metrics"),
    }
}

/// One HTTP/1.1 request to the server's API; the body of a 200 answer.
fn http(port: u16, method: &str, path: &str, body: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\
         Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(request.as_bytes()).ok()?;
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    let (head, rest) = answer.split_once("\r\n\r\n")?;
    if !head.starts_with("HTTP/1.1 200") {
        return None;
    }
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        // One or more chunks: `<hex>\r\n<data>\r\n`, ending with `0`.
        let mut out = String::new();
        let mut rest = rest;
        while let Some((size, after)) = rest.split_once("\r\n") {
            let n = usize::from_str_radix(size.trim(), 16).ok()?;
            if n == 0 {
                break;
            }
            out.push_str(after.get(..n)?);
            rest = after.get(n + 2..)?;
        }
        return Some(out);
    }
    Some(rest.to_string())
}

/// The official Python Nacos SDK as an independent writer (a process running
/// `tests/python/nacos_writer.py` in the venv `scripts/python-dubbo.sh` makes): its
/// instances live while it runs.
pub struct NacosWriter {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

/// The repository's root.
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The venv's python, made (or found) by `scripts/python-dubbo.sh`; its failure fails the
/// test.
pub fn venv_python() -> PathBuf {
    let out = Command::new("bash")
        .arg(repo().join("scripts/python-dubbo.sh"))
        .stderr(Stdio::inherit())
        .output()
        .expect("run scripts/python-dubbo.sh");
    assert!(
        out.status.success(),
        "scripts/python-dubbo.sh failed ({}): the Python venv with nacos-sdk-python is needed",
        out.status
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    PathBuf::from(
        stdout
            .lines()
            .last()
            .expect("the venv's python path")
            .trim(),
    )
}

impl NacosWriter {
    /// Connects a writer to `server` (`host:port`) in `namespace` (`""`: public).
    pub fn start(server: &str, namespace: &str) -> Self {
        Self::start_as(server, namespace, &[])
    }

    /// Connects a writer logged in as `user` with `password`.
    pub fn start_with_auth(server: &str, namespace: &str, user: &str, password: &str) -> Self {
        Self::start_as(server, namespace, &[user, password])
    }

    fn start_as(server: &str, namespace: &str, credentials: &[&str]) -> Self {
        let mut child = Command::new(venv_python())
            .arg(repo().join("tests/python/nacos_writer.py"))
            .args([server, namespace])
            .args(credentials)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn the Python Nacos writer");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut writer = NacosWriter {
            child,
            stdin,
            stdout,
        };
        let ready = writer.read();
        assert!(
            ready.contains("\"ready\""),
            "the writer did not start: {ready}"
        );
        writer
    }

    fn read(&mut self) -> String {
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("read the writer");
        assert!(!line.is_empty(), "the Python Nacos writer exited");
        line
    }

    /// Sends one command (a JSON object, see the script) and returns its answer; an answer
    /// without `"ok": true` fails the test.
    pub fn send(&mut self, command: serde_json::Value) -> serde_json::Value {
        self.try_send(&command)
            .unwrap_or_else(|answer| panic!("{command} -> {answer}"))
    }

    /// Sends one command; its answer, `Err` when it is not `"ok": true` (a server failing
    /// over refuses writes for a while).
    pub fn try_send(
        &mut self,
        command: &serde_json::Value,
    ) -> Result<serde_json::Value, serde_json::Value> {
        writeln!(self.stdin, "{command}").expect("write to the writer");
        self.stdin.flush().expect("flush");
        let line = self.read();
        let answer: serde_json::Value = serde_json::from_str(&line).expect("a JSON answer");
        if answer["ok"] == true {
            Ok(answer)
        } else {
            Err(answer)
        }
    }

    /// Registers `url` as Dubbo's NacosRegistry does, in Nacos group `group`.
    pub fn register(&mut self, group: &str, url: &str) {
        self.send(serde_json::json!({"op": "register_url", "group": group, "url": url}));
    }

    /// Registers `url` with Nacos instance fields of its own.
    pub fn register_with(&mut self, group: &str, url: &str, weight: f64, healthy: bool) {
        self.send(
            serde_json::json!({"op": "register_url", "group": group, "url": url,
            "weight": weight, "healthy": healthy}),
        );
    }

    /// Removes the instance of `url`.
    pub fn deregister(&mut self, group: &str, url: &str) {
        self.send(serde_json::json!({"op": "deregister_url", "group": group, "url": url}));
    }

    /// Registers many URLs (one registration each, many at a time).
    pub fn batch(&mut self, group: &str, urls: &[String]) {
        self.send(serde_json::json!({"op": "batch_urls", "group": group, "urls": urls}));
    }

    /// Publishes a config of group `dubbo`.
    pub fn publish(&mut self, data_id: &str, content: &str) {
        self.send(serde_json::json!({"op": "publish", "data_id": data_id, "content": content}));
    }

    /// Removes a config of group `dubbo`.
    pub fn remove(&mut self, data_id: &str) {
        self.send(serde_json::json!({"op": "remove", "data_id": data_id}));
    }
}

impl Drop for NacosWriter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
