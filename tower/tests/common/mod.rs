//! Test support: real tonic gRPC providers on 127.0.0.1 that answer with their identity,
//! and can be killed (listener and every connection closed, and `kill` returns only when
//! they are).
#![allow(dead_code)]

// tonic::Status is large, as tonic-build generated code returns it.
#[allow(dead_code, clippy::result_large_err)]
pub mod greeter;
pub mod instant;
pub mod versus;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use greeter::greeter_server::{Greeter, GreeterServer};
use greeter::{HelloReply, HelloRequest};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio::task::{JoinHandle, JoinSet};

/// The service the providers serve (the gRPC service name is the Dubbo interface).
pub const SERVICE: &str = "helloworld.Greeter";

struct Identity {
    name: String,
    status: Option<tonic::Code>,
    served: Arc<AtomicU64>,
}

impl Greeter for Identity {
    fn say_hello(
        &self,
        request: tonic::Request<HelloRequest>,
    ) -> Result<tonic::Response<HelloReply>, tonic::Status> {
        self.served.fetch_add(1, Ordering::Relaxed);
        if let Some(code) = self.status {
            return Err(tonic::Status::new(code, format!("{} refuses", self.name)));
        }
        let tag = request
            .metadata()
            .get("dubbo-tag")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        Ok(tonic::Response::new(HelloReply {
            message: format!("{} (tag seen: {tag:?})", self.name),
        }))
    }
}

/// A running provider.
pub struct Provider {
    /// Its name, the first word of every reply.
    pub name: String,
    /// Its URL, as registered: `tri://127.0.0.1:PORT/helloworld.Greeter?name=..&PARAMS`.
    pub url: String,
    /// `127.0.0.1:PORT`.
    pub address: String,
    served: Arc<AtomicU64>,
    stop: Arc<Notify>,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl Provider {
    /// Starts a provider answering with its name.
    pub async fn start(name: &str, params: &str) -> Provider {
        Self::start_with(name, params, None).await
    }

    /// Starts a provider answering every call with `status` (when given).
    pub async fn start_with(name: &str, params: &str, status: Option<tonic::Code>) -> Provider {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1");
        let address = listener.local_addr().unwrap().to_string();
        let served = Arc::new(AtomicU64::new(0));
        let server = GreeterServer::new(Identity {
            name: name.to_string(),
            status,
            served: served.clone(),
        });
        let stop = Arc::new(Notify::new());
        let stopped = stop.clone();
        let task = tokio::spawn(async move {
            let mut connections = JoinSet::new();
            loop {
                let accepted = tokio::select! {
                    _ = stopped.notified() => break,
                    accepted = listener.accept() => accepted,
                };
                let Ok((socket, _)) = accepted else {
                    continue;
                };
                let _ = socket.set_nodelay(true);
                let service = TowerToHyperService::new(server.clone());
                connections.spawn(async move {
                    let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(socket), service)
                        .await;
                });
                while connections.try_join_next().is_some() {}
            }
            // Killed: no new connection, then every open one closed, and waited for (an
            // aborted task is only dropped when its runtime gets to it: without the wait a
            // connection could still answer a call made after `kill`).
            drop(listener);
            connections.shutdown().await;
        });
        let sep = if params.is_empty() { "" } else { "&" };
        Provider {
            name: name.to_string(),
            url: format!("tri://{address}/{SERVICE}?name={name}{sep}{params}"),
            address,
            served,
            stop,
            task: Mutex::new(Some(task)),
        }
    }

    /// Calls it answered.
    pub fn served(&self) -> u64 {
        self.served.load(Ordering::Relaxed)
    }

    /// Kills it: the listener and every open connection close; returns once they are
    /// closed, so a call made afterwards cannot reach it.
    pub async fn kill(&self) {
        self.stop.notify_one();
        let task = self.task.lock().unwrap().take();
        if let Some(task) = task {
            let _ = task.await;
        }
    }
}

impl Drop for Provider {
    fn drop(&mut self) {
        if let Some(task) = self.task.lock().unwrap().take() {
            task.abort();
        }
    }
}

/// The provider name a reply starts with.
pub fn who(reply: &tonic::Response<HelloReply>) -> String {
    reply
        .get_ref()
        .message
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string()
}

/// A Greeter client through the routechain layer over a live chain of `chain_text` (a
/// chain file) with `providers`, and the chain.
pub fn layer_client(
    chain_text: &str,
    providers: &[&Provider],
) -> (
    Arc<routechain::live::LiveChain>,
    greeter::greeter_client::GreeterClient<
        routechain_tower::RouteService<routechain_tower::HttpConnector>,
    >,
) {
    use tower_layer::Layer;
    let file = routechain::rules::ChainFile::parse("test.chain.yaml", chain_text, None)
        .expect("chain parses");
    let urls = providers
        .iter()
        .map(|p| p.url.parse().expect("provider URL"))
        .collect::<Vec<_>>();
    let live = Arc::new(
        routechain::live::LiveChain::with_providers(
            file,
            routechain::registry(),
            routechain::live::LiveOptions::default(),
            routechain::core::Snapshot::new(1, urls),
        )
        .expect("chain builds"),
    );
    let channel = routechain_tower::RouteLayer::new(live.service().clone())
        .layer(routechain_tower::HttpConnector::new());
    (live, greeter::greeter_client::GreeterClient::new(channel))
}

/// A request the layer may retry (marked [`routechain_tower::Idempotent`]).
pub fn idempotent_hello() -> tonic::Request<HelloRequest> {
    let mut r = tonic::Request::new(HelloRequest { name: "x".into() });
    r.extensions_mut().insert(routechain_tower::Idempotent);
    r
}
