//! Providers of the official Python Dubbo implementation (`apache-dubbo` 3.0.0b1 from PyPI,
//! Dubbo's Triple protocol) called through the layer: real Python processes registered by the
//! package itself in a real ZooKeeper, followed by a `ZkSource`, called by a tonic client
//! over `RouteService`, routed by tag and condition rules, failed over when one is killed.
//!
//! The venv is made by `scripts/python-dubbo.sh` (called here; `scripts/test.sh` calls it
//! too); the provider is `tests/python/dubbo_provider.py`. Its `sayHello` takes and returns a
//! protobuf `StringValue` (`hello <name> from <port>`), which prost encodes for `String`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use routechain::live::{LiveChain, LiveOptions, ZkConfig, ZkSource};
use routechain::rules::ChainFile;
use routechain_testkit::zookeeper::ZooKeeper;
use routechain_tower::{HttpConnector, RouteAttributes, RouteLayer, RouteService, RoutedTo};
use tower_layer::Layer;

const INTERFACE: &str = "org.example.Greeter";

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The venv's python, made by the project's script (a failure is a test failure).
fn python() -> PathBuf {
    let out = Command::new("bash")
        .arg(workspace().join("scripts/python-dubbo.sh"))
        .stderr(Stdio::inherit())
        .output()
        .expect("run scripts/python-dubbo.sh");
    assert!(out.status.success(), "scripts/python-dubbo.sh failed");
    let stdout = String::from_utf8(out.stdout).unwrap();
    PathBuf::from(
        stdout
            .lines()
            .last()
            .expect("the venv's python path")
            .trim(),
    )
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A Python Dubbo provider process, killed on drop.
struct PythonProvider {
    child: Child,
    port: u16,
}

impl PythonProvider {
    fn start(python: &Path, zk: &str, params: &[&str]) -> Self {
        let port = free_port();
        let mut cmd = Command::new(python);
        cmd.arg(workspace().join("tests/python/dubbo_provider.py"))
            .args(["--zookeeper", zk, "--interface", INTERFACE])
            .args(["--port", &port.to_string(), "--application", "py-provider"]);
        for p in params {
            cmd.args(["--param", p]);
        }
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the Python provider");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the Python provider said READY within 30 s");
        assert_eq!(line.trim(), format!("READY {port}"), "provider output");
        PythonProvider { child, port }
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for PythonProvider {
    fn drop(&mut self) {
        self.kill();
    }
}

const CHAIN: &str = "
service: org.example.Greeter
retries: 2
health: {failure_threshold: 2, cooldown: 60s}
routers:
  - type: tag
  - type: condition
    rule:
      conditions:
        - arguments[0] = vip => idc = zf
";

type Grpc = tonic::client::Grpc<RouteService<HttpConnector>>;

async fn say_hello(
    grpc: &mut Grpc,
    name: &str,
    tag: Option<&str>,
) -> Result<(String, u32), tonic::Status> {
    grpc.ready().await.unwrap();
    let mut request = tonic::Request::new(name.to_string());
    request
        .extensions_mut()
        .insert(RouteAttributes::new().with_argument(serde_json::json!(name)));
    if let Some(t) = tag {
        request
            .metadata_mut()
            .insert("dubbo-tag", t.parse().unwrap());
    }
    let path = http::uri::PathAndQuery::from_static("/org.example.Greeter/sayHello");
    let codec = tonic_prost::ProstCodec::<String, String>::default();
    let reply = grpc.unary(request, path, codec).await?;
    let attempts = reply.extensions().get::<RoutedTo>().unwrap().attempts;
    Ok((reply.into_inner(), attempts))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_dubbo_triple_providers_are_routed_and_failed_over_through_the_layer() {
    let python = python();
    let zk = ZooKeeper::start("tower-python");
    let mt = PythonProvider::start(&python, &zk.address(), &["region=beijing", "idc=mt"]);
    let zf = PythonProvider::start(&python, &zk.address(), &["region=beijing", "idc=zf"]);
    let mut gray = PythonProvider::start(
        &python,
        &zk.address(),
        &["region=beijing", "idc=mt", "dubbo.tag=gray"],
    );

    let file = ChainFile::parse("python.chain.yaml", CHAIN, None).unwrap();
    let live =
        Arc::new(LiveChain::new(file, routechain::registry(), LiveOptions::default()).unwrap());
    let mut config = ZkConfig::for_chain(&live, zk.address());
    config.following.retry_delay = Duration::from_millis(100);
    let _watching = live
        .watch(Box::new(ZkSource::new(config)), |r| {
            eprintln!("report: {r}")
        })
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    while live.service().state().snapshot().len() != 3 {
        assert!(
            Instant::now() < deadline,
            "the Python providers never arrived from ZooKeeper"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let channel = RouteLayer::new(live.service().clone()).layer(HttpConnector::new());
    let mut grpc = tonic::client::Grpc::new(channel);

    // Untagged calls: both untagged providers, never the gray one.
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..30 {
        let (reply, _) = say_hello(&mut grpc, "alice", None).await.expect("answered");
        seen.insert(reply);
    }
    let from = |p: &PythonProvider, name: &str| format!("hello {name} from {}", p.port);
    assert_eq!(
        seen.into_iter().collect::<Vec<_>>(),
        {
            let mut v = vec![from(&mt, "alice"), from(&zf, "alice")];
            v.sort();
            v
        },
        "untagged calls reach the untagged providers"
    );
    // Tag: the gray provider, through the dubbo-tag header.
    for _ in 0..5 {
        let (reply, _) = say_hello(&mut grpc, "bob", Some("gray")).await.unwrap();
        assert_eq!(reply, from(&gray, "bob"));
    }
    // Condition on the first argument: vip calls run in zf.
    for _ in 0..10 {
        let (reply, _) = say_hello(&mut grpc, "vip", None).await.unwrap();
        assert_eq!(reply, from(&zf, "vip"));
    }
    // The gray provider is killed (SIGKILL: its node stays in ZooKeeper until its session
    // expires): gray calls fail over to... nothing else is gray, so the tag router's
    // fallback does not apply while it is registered; untagged calls are not affected.
    gray.kill();
    for _ in 0..10 {
        let (reply, attempts) = say_hello(&mut grpc, "carol", None).await.unwrap();
        assert_eq!(attempts, 1);
        assert!(
            reply == from(&mt, "carol") || reply == from(&zf, "carol"),
            "{reply}"
        );
    }
    // A killed untagged provider: every call is still answered, failed over to zf.
    drop(mt);
    let mut failovers = 0;
    for _ in 0..20 {
        let (reply, attempts) = say_hello(&mut grpc, "dave", None)
            .await
            .expect("failed over");
        assert_eq!(reply, from(&zf, "dave"));
        failovers += u32::from(attempts > 1);
    }
    assert!(
        failovers >= 1,
        "at least one call tried the dead provider first"
    );
}
