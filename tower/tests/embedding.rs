//! docs/embedding.md's ZooKeeper service (`examples/orders_service.rs`) run for real: a
//! real ZooKeeper (started by the test), line-protocol providers registered there in
//! Dubbo's layout, a condition rule written there while the service runs, and a provider
//! killed; the service's answers are checked, and so is the doc (it shows the example's code
//! and this test's session).

#[allow(dead_code)] // its `main` (the test calls `run`)
#[path = "../examples/orders_service.rs"]
mod orders_service;

use std::time::{Duration, Instant};

use routechain::live::{RuleKey, ZkAdmin};
use routechain_testkit::zookeeper::ZooKeeper;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

const SERVICE: &str = "org.example.OrderService";

/// How long a change may take to reach the calls.
const PATIENCE: Duration = Duration::from_secs(20);

/// A provider of the example's line protocol: `listOrders USER` → `IDC: orders of USER`.
struct LineProvider {
    url: String,
    task: JoinHandle<()>,
}

impl LineProvider {
    async fn start(idc: &str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let answer_idc = idc.to_string();
        let task = tokio::spawn(async move {
            let mut connections = tokio::task::JoinSet::new();
            loop {
                let Ok((socket, _)) = listener.accept().await else {
                    continue;
                };
                let idc = answer_idc.clone();
                connections.spawn(async move {
                    let (read, mut write) = socket.into_split();
                    let mut lines = BufReader::new(read).lines();
                    while let Ok(Some(line)) = lines.next_line().await {
                        let user = line.strip_prefix("listOrders ").unwrap_or("?");
                        let reply = format!("{idc}: orders of {user}\n");
                        if write.write_all(reply.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                });
                while connections.try_join_next().is_some() {}
            }
        });
        LineProvider {
            url: format!("dubbo://{address}/{SERVICE}?region=beijing&idc={idc}"),
            task,
        }
    }

    /// Stops it: once this returns, its port refuses connections.
    async fn kill(self) {
        self.task.abort();
        let _ = self.task.await;
    }
}

/// One connection to the example service.
struct Session {
    lines: tokio::io::Lines<BufReader<tokio::net::tcp::OwnedReadHalf>>,
    write: tokio::net::tcp::OwnedWriteHalf,
}

impl Session {
    async fn ask(&mut self, user: &str) -> String {
        self.write
            .write_all(format!("{user}\n").as_bytes())
            .await
            .unwrap();
        self.lines
            .next_line()
            .await
            .unwrap()
            .expect("an answer line")
    }

    /// Asks until the answer is `expected` ten times in a row (a change has reached the
    /// calls: not a lucky draw of the balancer).
    async fn ask_until(&mut self, user: &str, expected: &str) {
        let deadline = Instant::now() + PATIENCE;
        let mut streak = 0;
        loop {
            let answer = self.ask(user).await;
            streak = if answer == expected { streak + 1 } else { 0 };
            if streak == 10 {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "never answered {expected:?}; last: {answer:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_embedding_guide_service_routes_by_rules_from_zookeeper_and_fails_over() {
    let zk = ZooKeeper::start("embedding-orders");
    let admin = ZkAdmin::connect(&zk.address()).await.expect("ZooKeeper");
    let mt = LineProvider::start("mt").await;
    let zf1 = LineProvider::start("zf").await;
    let zf2 = LineProvider::start("zf").await;
    for p in [&mt, &zf1, &zf2] {
        admin.register(SERVICE, &p.url).await.unwrap();
    }

    // The example, on a thread and runtime of its own as its `main` would run it.
    let (ready, address) = std::sync::mpsc::channel();
    let zookeeper = zk.address();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async move {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            ready.send(listener.local_addr().unwrap()).unwrap();
            orders_service::run(&zookeeper, listener)
                .await
                .expect("the service runs");
        });
    });
    let address = address.recv().unwrap();
    let socket = tokio::net::TcpStream::connect(address).await.unwrap();
    let (read, write) = socket.into_split();
    let mut session = Session {
        lines: BufReader::new(read).lines(),
        write,
    };
    let mut transcript = Vec::new();

    // The providers arrive from ZooKeeper: every call answered, by either IDC.
    let deadline = Instant::now() + PATIENCE;
    loop {
        let answer = session.ask("ada").await;
        if answer.ends_with(": orders of ada") {
            break;
        }
        assert!(answer.starts_with("error: "), "{answer}");
        assert!(Instant::now() < deadline, "no provider arrived: {answer}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..40 {
        let answer = session.ask("ada").await;
        assert!(
            answer == "mt: orders of ada" || answer == "zf: orders of ada",
            "{answer}"
        );
        seen.insert(answer);
    }
    assert_eq!(seen.len(), 2, "both IDCs answer without a rule: {seen:?}");

    // A condition rule written in ZooKeeper while the service runs: vip calls go to zf.
    let rule = "scope: service\nkey: org.example.OrderService\nenabled: true\nforce: true\nconditions:\n  - arguments[0] = vip => idc = zf\n";
    admin
        .put_rule(&RuleKey::new(format!("{SERVICE}::"), "condition"), rule)
        .await
        .unwrap();
    session.ask_until("vip", "zf: orders of vip").await;
    for _ in 0..20 {
        assert_eq!(session.ask("vip").await, "zf: orders of vip");
    }
    transcript.push(("vip", session.ask("vip").await));

    // One zf provider killed (still registered): vip calls fail over to the other one.
    zf1.kill().await;
    for _ in 0..20 {
        assert_eq!(session.ask("vip").await, "zf: orders of vip");
    }
    transcript.push(("vip", session.ask("vip").await));
    // ... and both: the rule is forced, so vip calls fail; the others still reach mt.
    zf2.kill().await;
    let answer = session.ask("vip").await;
    assert!(answer.starts_with("error: "), "{answer}");
    assert_eq!(session.ask("ada").await, "mt: orders of ada");
    transcript.push(("ada", session.ask("ada").await));
    mt.kill().await;

    // docs/embedding.md shows this session and the example's code.
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/embedding.md"))
        .unwrap();
    let session_text: String = transcript
        .iter()
        .map(|(user, answer)| format!("{user}\n{answer}\n"))
        .collect();
    let block = format!("```text\n$ nc 127.0.0.1 8080\n{session_text}```\n");
    assert!(
        doc.contains(&block),
        "docs/embedding.md shows the session:\n{block}"
    );
    let example = include_str!("../examples/orders_service.rs");
    let code: String = example
        .lines()
        .skip_while(|l| l.starts_with("//!") || l.is_empty())
        .map(|l| format!("{l}\n"))
        .collect();
    let block = format!("```rust,no_run\n{code}```\n");
    assert!(
        doc.contains(&block),
        "docs/embedding.md shows examples/orders_service.rs (without its module doc)"
    );
}
