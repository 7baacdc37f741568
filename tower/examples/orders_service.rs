//! docs/embedding.md's tokio service: it routes and calls with `Cluster::call`, rules and
//! providers live from ZooKeeper. `tower/tests/embedding.rs` runs it against a real
//! ZooKeeper and real providers, checks its answers, and checks that docs/embedding.md
//! shows this file's code (everything below these lines) and the test's sample session.
//!
//! `cargo run -p routechain-tower --example orders_service -- ZOOKEEPER LISTEN`

use std::sync::Arc;

use routechain::live::{ZkConfig, ZkSource};
use routechain::prelude::*;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

const CHAIN: &str = "
service: org.example.OrderService
consumer: consumer://10.0.0.9/org.example.OrderService?application=web&region=beijing&idc=mt
retries: 2          # Dubbo's failover: up to 2 more providers after the first
timeout: 500ms      # one attempt
routers:
  - type: tag         # follows org.example.OrderService::.tag-router in ZooKeeper
  - type: condition   # follows org.example.OrderService::.condition-router
  - type: idc-weight  # follows org.example.OrderService::.idc-weight-router
";

/// `orders_service [ZOOKEEPER [LISTEN]]`, by default `127.0.0.1:2181` and `127.0.0.1:8080`.
#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let zookeeper = args.next().unwrap_or_else(|| "127.0.0.1:2181".into());
    let listen = args.next().unwrap_or_else(|| "127.0.0.1:8080".into());
    run(&zookeeper, TcpListener::bind(&listen).await?).await
}

/// Serves `listener` forever, calling the providers ZooKeeper lists.
pub async fn run(zookeeper: &str, listener: TcpListener) -> Result<(), Box<dyn std::error::Error>> {
    // The error holds every problem of the chain text (router types and rules included),
    // each located by line and column.
    let registry = routechain::registry();
    let chain = ChainFile::parse_with("orders.chain.yaml", CHAIN, None, &registry)?;
    let live = Arc::new(LiveChain::new(chain, registry, LiveOptions::default())?);
    // Rules and providers from ZooKeeper, on the source's own thread and runtime.
    let source = ZkSource::new(ZkConfig::for_chain(&live, zookeeper));
    let _watching = live.watch(Box::new(source), |report| eprintln!("routechain: {report}"))?;

    loop {
        let (socket, _) = listener.accept().await?;
        let service = live.service().clone();
        tokio::spawn(async move {
            if let Err(e) = serve(socket, service).await {
                eprintln!("connection failed: {e}");
            }
        });
    }
}

/// One line in (a user id), one line out (the order list a provider returned).
async fn serve(socket: TcpStream, service: Arc<Cluster>) -> std::io::Result<()> {
    let (read, mut write) = socket.into_split();
    let mut lines = BufReader::new(read).lines();
    while let Some(user) = lines.next_line().await? {
        // Request-scoped values travel in the request, never in thread-locals.
        let request = Request::new()
            .with_service("org.example.OrderService")
            .with_method("listOrders")
            .with_argument(routechain::serde_json::json!(user))
            .with_attribute("user", user.as_str());
        let reply = service
            .call(&request, |provider| {
                let user = user.clone();
                async move {
                    // Connection errors may not happen on another provider: fail over.
                    list_orders(provider.address(), &user)
                        .await
                        .map_err(CallError::Retryable)
                }
            })
            .await;
        let line = match reply {
            Ok(invoked) => format!("{}\n", invoked.value),
            Err(e) => format!("error: {e}\n"),
        };
        write.write_all(line.as_bytes()).await?;
    }
    Ok(())
}

/// The call to one provider (a line protocol here; your RPC client in a real service).
async fn list_orders(address: &str, user: &str) -> std::io::Result<String> {
    let mut stream = TcpStream::connect(address).await?;
    stream
        .write_all(format!("listOrders {user}\n").as_bytes())
        .await?;
    let mut reply = String::new();
    BufReader::new(stream).read_line(&mut reply).await?;
    if reply.is_empty() {
        let closed = "the provider closed the connection without an answer";
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            closed,
        ));
    }
    Ok(reply.trim_end().to_string())
}
