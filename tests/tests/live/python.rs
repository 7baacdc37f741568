//! Real providers of the official Python Dubbo implementation (`apache-dubbo[zookeeper]`
//! 3.0.0b1, in the virtual environment `scripts/python-dubbo.sh` makes) register themselves
//! in a real ZooKeeper; routechain must see exactly those providers, with the values they
//! registered (form-encoded by the package), route them per call, reach the one it picks,
//! and take one out of traffic with an override rule (the package never reads override
//! rules, so only `apply_provider_overrides` or a consumer-side rule can).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use routechain::balance::Caller;
use routechain::core::Request;
use routechain::live::{Report, ZkConfig, ZkSource};

use super::support::zookeeper::ZooKeeper;
use super::zk::Raw;
use super::{live, wait_report, wait_route, wait_route_for, watch};

const INTERFACE: &str = "org.example.Greeter";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The venv's python, made (or found) by `scripts/python-dubbo.sh`; its failure fails the test.
fn python() -> PathBuf {
    let out = Command::new("bash")
        .arg(repo().join("scripts/python-dubbo.sh"))
        .stderr(Stdio::inherit())
        .output()
        .expect("run scripts/python-dubbo.sh");
    assert!(
        out.status.success(),
        "scripts/python-dubbo.sh failed ({}): the Python Dubbo venv is needed by this test",
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

/// A free loopback port (bound then released).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A running Python provider; SIGTERM on drop (it then closes its ZooKeeper session).
struct Provider {
    child: Child,
    port: u16,
}

impl Provider {
    fn start(py: &Path, zk: &str, args: &[&str]) -> Self {
        let port = free_port();
        let mut child = Command::new(py)
            .arg(repo().join("tests/python/dubbo_provider.py"))
            .args(["--zookeeper", zk, "--interface", INTERFACE])
            .args(["--port", &port.to_string()])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start a Python provider");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), format!("READY {port}"), "provider {args:?}");
        Provider { child, port }
    }

    fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn stop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

impl Drop for Provider {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.stop();
        }
    }
}

/// Calls `sayHelloRaw` on `address` over Triple (tests/python/triple_call.py) and returns
/// the answer's text as the call printed it.
fn call(py: &Path, address: &str) -> String {
    let out = Command::new(py)
        .arg(repo().join("tests/python/triple_call.py"))
        .args([
            address,
            &format!("/{INTERFACE}/sayHelloRaw"),
            "--raw",
            "alice",
        ])
        .output()
        .expect("run triple_call.py");
    assert!(out.status.success(), "Triple call to {address} failed");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

const CHAIN: &str = "\
service: org.example.Greeter
group: \"*\"
version: 1.0.0
consumer: consumer://127.0.0.1/org.example.Greeter?application=web
apply_provider_overrides: true
routers:
  - type: condition
  - type: group
";

#[test]
fn real_python_dubbo_providers_are_seen_exactly_routed_reached_and_disabled_by_an_override_rule() {
    let py = python();
    let zk = ZooKeeper::start("python");
    let addr = zk.address();
    let common = ["--version", "1.0.0", "--application", "demo-app"];
    let with =
        |extra: &[&'static str]| -> Vec<&str> { common.iter().chain(extra).copied().collect() };
    let blue1 = Provider::start(
        &py,
        &addr,
        &with(&["--group", "blue", "--param", "methods=sayHello,sayHelloRaw"]),
    );
    let blue2 = Provider::start(
        &py,
        &addr,
        &with(&["--group", "blue", "--param", "note=x y/z:1"]),
    );
    let mut green = Provider::start(
        &py,
        &addr,
        &with(&["--group", "green", "--param", "discount=100%"]),
    );
    // Another version: not for this reference.
    let _other = Provider::start(
        &py,
        &addr,
        &[
            "--version",
            "2.0.0",
            "--group",
            "blue",
            "--application",
            "demo-app",
        ],
    );
    let live = live(CHAIN);
    let mut config = ZkConfig::for_chain(&live, addr.clone());
    config.session_timeout = Duration::from_secs(4);
    config.following.retry_delay = Duration::from_millis(100);
    let (_watching, rx) = watch(&live, Box::new(ZkSource::new(config)));

    // Exactly the three providers of version 1.0.0, with the values they registered.
    let mut all = [blue1.address(), blue2.address(), green.address()];
    all.sort();
    let all_refs: Vec<&str> = all.iter().map(String::as_str).collect();
    wait_route(&live, &all_refs);
    wait_report(&rx, "the providers' count", |r| {
        matches!(r, Report::Status { message, .. }
            if message.ends_with("4 registered, 3 match (group=*, version=1.0.0); excluded 1 by version"))
    });
    let state = live.service().state();
    let find = |p: &Provider| {
        state
            .snapshot()
            .providers()
            .iter()
            .find(|u| u.address() == p.address())
            .cloned()
            .unwrap()
    };
    assert_eq!(find(&blue1).param("methods"), Some("sayHello,sayHelloRaw"));
    assert_eq!(find(&blue2).param("note"), Some("x y/z:1"));
    assert_eq!(find(&green).param("discount"), Some("100%"));
    assert_eq!(find(&green).param("service"), Some(INTERFACE));
    assert_eq!(live.stats().skipped(), 0);

    // Routed per call by group, and the chosen provider answers a real Triple call.
    let blue = Request::new().with_attribute("group", "blue");
    let mut blues = [blue1.address(), blue2.address()];
    blues.sort();
    let blue_refs: Vec<&str> = blues.iter().map(String::as_str).collect();
    wait_route_for(&live, &blue, &blue_refs);
    let green_req = Request::new().with_attribute("group", "green");
    let mut call_state = Caller::seeded(3);
    let selected = live
        .service()
        .select(&green_req, &[], &mut call_state)
        .expect("a green provider");
    assert_eq!(selected.provider().address(), green.address());
    let answer = call(&py, selected.provider().address());
    assert!(
        answer.contains(&format!("hello alice from {}", green.port)),
        "{answer}"
    );

    // Dubbo's documented "disable a provider" override rule, at the providers'
    // application: the Python provider never applies it, routechain does.
    let raw = Raw::connect(&addr);
    raw.put(
        "/dubbo/config/dubbo/demo-app.configurators",
        &format!(
            "configVersion: v2.7\nscope: application\nkey: demo-app\nenabled: true\nconfigs:\n\
             - addresses: [\"{}\"]\n  side: provider\n  parameters:\n    disabled: true\n",
            blue1.address()
        ),
    );
    wait_route_for(&live, &blue, &[&blue2.address()]);
    raw.delete("/dubbo/config/dubbo/demo-app.configurators");
    wait_route_for(&live, &blue, &blue_refs);

    // A provider that stops closes its session: its ephemeral node, and so the provider, goes.
    green.stop();
    let rest: Vec<&str> = blue_refs.clone();
    wait_route(&live, &rest);
}
