//! The demo's providers: real tonic gRPC servers (HTTP/2 over TCP) on 127.0.0.1, each
//! answering with its identity, and killed for real (listener and connections dropped).

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use routechain::core::Url;
use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};

use super::rpc::{Identity, UserIndexServer};

/// What a demo provider is: where it runs and what it serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProviderSpec {
    /// `region` param.
    pub region: &'static str,
    /// `idc` param.
    pub idc: &'static str,
    /// `group` param.
    pub group: &'static str,
    /// `weight` param.
    pub weight: u32,
    /// `dubbo.tag` param (the canary tag).
    pub tag: Option<&'static str>,
    /// `degraded=true` param (an operator took it out).
    pub degraded: bool,
    /// `canary=true` param (the example canary plugin's canary providers).
    pub canary: bool,
}

const fn spec(
    region: &'static str,
    idc: &'static str,
    group: &'static str,
    weight: u32,
) -> ProviderSpec {
    ProviderSpec {
        region,
        idc,
        group,
        weight,
        tag: None,
        degraded: false,
        canary: false,
    }
}

const fn canary(region: &'static str, idc: &'static str, group: &'static str) -> ProviderSpec {
    ProviderSpec {
        canary: true,
        ..spec(region, idc, group, 100)
    }
}

/// The demo's providers: 3 IDCs in 2 regions, 2 groups, 2 gray canaries (tag), 4 plugin
/// canaries (`canary=true`), 1 degraded.
pub const LAYOUT: [ProviderSpec; 17] = [
    spec("beijing", "mt", "idx_user", 100),
    spec("beijing", "mt", "idx_user", 100),
    spec("beijing", "mt", "idx_order", 200),
    spec("beijing", "mt", "idx_order", 100),
    ProviderSpec {
        degraded: true,
        ..spec("beijing", "mt", "idx_order", 100)
    },
    ProviderSpec {
        tag: Some("gray"),
        ..spec("beijing", "mt", "idx_user", 100)
    },
    spec("beijing", "zf", "idx_user", 100),
    spec("beijing", "zf", "idx_user", 100),
    spec("beijing", "zf", "idx_order", 100),
    spec("beijing", "zf", "idx_order", 100),
    ProviderSpec {
        tag: Some("gray"),
        ..spec("beijing", "zf", "idx_user", 100)
    },
    spec("shanghai", "sh", "idx_user", 100),
    spec("shanghai", "sh", "idx_order", 100),
    canary("beijing", "mt", "idx_user"),
    canary("beijing", "mt", "idx_order"),
    canary("beijing", "zf", "idx_user"),
    canary("beijing", "zf", "idx_order"),
];

/// A running provider.
#[derive(Debug)]
pub struct RunningProvider {
    /// What it is.
    pub spec: ProviderSpec,
    /// Its URL, as registered.
    pub url: Url,
    killed: AtomicBool,
    task: JoinHandle<()>,
}

impl RunningProvider {
    /// Binds 127.0.0.1 on an ephemeral port and starts serving `service`.
    pub async fn start(spec: ProviderSpec, service: &str) -> io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let weight = spec.weight.to_string();
        let mut params = vec![
            ("application", "user-index"),
            ("region", spec.region),
            ("idc", spec.idc),
            ("group", spec.group),
            ("weight", weight.as_str()),
        ];
        if let Some(tag) = spec.tag {
            params.push(("dubbo.tag", tag));
        }
        if spec.degraded {
            params.push(("degraded", "true"));
        }
        if spec.canary {
            params.push(("canary", "true"));
        }
        // `tri`: Dubbo's Triple protocol, its gRPC-compatible one.
        let url = Url::from_parts("tri", "127.0.0.1", port, service, params);
        let server = UserIndexServer::new(Identity {
            id: 0,
            address: url.address().to_string(),
            region: spec.region.to_string(),
            idc: spec.idc.to_string(),
            group: spec.group.to_string(),
            tag: spec.tag.unwrap_or_default().to_string(),
            canary: spec.canary,
            method: String::new(),
        });
        let task = tokio::spawn(accept_loop(listener, server));
        Ok(RunningProvider {
            spec,
            url,
            killed: AtomicBool::new(false),
            task,
        })
    }

    /// The provider's address.
    pub fn address(&self) -> &str {
        self.url.address()
    }

    /// Stops the server: the listener closes and every open connection is dropped.
    pub fn kill(&self) {
        self.killed.store(true, Ordering::Relaxed);
        self.task.abort();
    }

    /// True once killed.
    pub fn is_killed(&self) -> bool {
        self.killed.load(Ordering::Relaxed)
    }
}

impl Drop for RunningProvider {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn accept_loop(listener: TcpListener, server: UserIndexServer) {
    // Dropping the JoinSet (when this task is aborted) aborts every connection task.
    let mut connections = JoinSet::new();
    loop {
        match listener.accept().await {
            Ok((socket, _)) => {
                let _ = socket.set_nodelay(true);
                let service = TowerToHyperService::new(server.clone());
                connections.spawn(async move {
                    let served = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(socket), service)
                        .await;
                    if let Err(e) = served {
                        tracing::debug!("connection ended: {e}");
                    }
                });
            }
            Err(e) => tracing::debug!("accept failed: {e}"),
        }
        while connections.try_join_next().is_some() {}
    }
}
