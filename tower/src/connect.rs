//! Per-provider channels: the [`MakeChannel`] connector that makes one for a provider, the
//! default [`HttpConnector`] (hyper HTTP/2 over TCP, `http://host:port`), and the cache that
//! keeps one channel per provider of the current snapshot.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use arc_swap::{ArcSwap, ArcSwapOption};
use bytes::Bytes;
use http::uri::{Authority, Scheme};
use hyper::client::conn::http2::SendRequest;
use hyper_util::rt::{TokioIo, TokioTimer};
use routechain_core::{Provider, Snapshot};
use tokio::net::TcpStream;

use crate::body::RequestBody;
use crate::error::BoxError;

/// Makes the channel a provider's requests are sent through (a `MakeService` keyed by
/// provider). The channel is a `tower::Service` taking requests whose URI is only a path
/// (`/pkg.Service/Method`, as tonic's clients make them): it adds its provider's origin.
///
/// A channel is made the first time a provider is picked and kept while the provider stays
/// in the snapshot (by address, across snapshot changes).
pub trait MakeChannel: Send + Sync + 'static {
    /// The per-provider service.
    type Channel: tower_service::Service<
            http::Request<RequestBody>,
            Response = http::Response<Self::Body>,
            Error = Self::Error,
            Future = Self::Future,
        > + Clone
        + Send
        + Sync
        + 'static;
    /// Its response body.
    type Body: http_body::Body<Data = Bytes> + Send + Unpin + 'static;
    /// Its error.
    type Error: Into<BoxError> + Send + 'static;
    /// Its future.
    type Future: std::future::Future<Output = Result<http::Response<Self::Body>, Self::Error>>
        + Send
        + 'static;

    /// The channel to `provider`.
    fn make_channel(&self, provider: &Provider) -> Result<Self::Channel, BoxError>;
}

/// The default connector: HTTP/2 (prior knowledge, as gRPC speaks it) over plain TCP to
/// `http://<provider address>`, one multiplexed connection per provider, made on first use,
/// made again after it closed. A connection unused for the idle timeout (90 s by default)
/// is closed once its calls end, so the connections of providers that left the snapshot
/// do not stay open.
///
/// Each call goes straight to its provider's connection (hyper's `http2::SendRequest`,
/// taken from an atomic pointer): no pool, no lock and no task between the call and the
/// connection once it is made.
#[derive(Debug, Clone)]
pub struct HttpConnector {
    connect_timeout: Duration,
    idle_timeout: Duration,
}

impl Default for HttpConnector {
    fn default() -> Self {
        Self::new()
    }
}

impl HttpConnector {
    /// Connect timeout 1 s, idle timeout 90 s, `TCP_NODELAY`.
    pub fn new() -> Self {
        Self::with_timeouts(Duration::from_secs(1), Duration::from_secs(90))
    }

    /// With a connect timeout and an idle timeout.
    pub fn with_timeouts(connect: Duration, idle: Duration) -> Self {
        HttpConnector {
            connect_timeout: connect,
            idle_timeout: idle,
        }
    }
}

impl MakeChannel for HttpConnector {
    type Channel = HttpChannel;
    type Body = hyper::body::Incoming;
    type Error = HttpError;
    type Future = HttpFuture;

    fn make_channel(&self, provider: &Provider) -> Result<HttpChannel, BoxError> {
        let authority: Authority = provider.address().parse()?;
        Ok(HttpChannel {
            endpoint: Arc::new(Endpoint {
                authority,
                connect_timeout: self.connect_timeout,
                idle_timeout: self.idle_timeout,
                sender: ArcSwapOption::empty(),
                used: AtomicBool::new(false),
                connecting: tokio::sync::Mutex::new(None),
                connects: AtomicU64::new(0),
            }),
        })
    }
}

/// Why an [`HttpChannel`] call got no response head.
#[derive(Debug, Clone, thiserror::Error)]
pub enum HttpError {
    /// The TCP connection could not be made (refused, unreachable, unresolved).
    #[error("cannot connect to {address}: {source}")]
    Connect {
        /// The provider's address.
        address: Box<str>,
        /// Why (shared by the calls that waited for the same connect).
        #[source]
        source: Arc<std::io::Error>,
    },
    /// The TCP connection was not made within the connect timeout.
    #[error("connecting to {address} timed out after {timeout:?}")]
    ConnectTimeout {
        /// The provider's address.
        address: Box<str>,
        /// The connect timeout.
        timeout: Duration,
    },
    /// The HTTP/2 handshake failed, or the connection failed, closed or reset the stream
    /// before the response head.
    #[error(transparent)]
    Http(Arc<hyper::Error>),
}

/// The future of an [`HttpChannel`] call (boxed: hyper's send future has no name).
pub type HttpFuture =
    Pin<Box<dyn Future<Output = Result<http::Response<hyper::body::Incoming>, HttpError>> + Send>>;

/// One provider's channel of the [`HttpConnector`]: its HTTP/2 connection, made on the first
/// call and made again when it closed. Clones share the connection.
#[derive(Debug, Clone)]
pub struct HttpChannel {
    endpoint: Arc<Endpoint>,
}

/// What the clones of one provider's channel share.
struct Endpoint {
    authority: Authority,
    connect_timeout: Duration,
    idle_timeout: Duration,
    /// The open connection's sender; empty before the first call and after an idle close.
    sender: ArcSwapOption<SendRequest<RequestBody>>,
    /// Set by a call, cleared by the idle check: a connection not used between two checks
    /// is closed.
    used: AtomicBool,
    /// Held while connecting, so concurrent calls make one connection (taken only when
    /// there is no open one); the last attempt's error, given to the calls that waited for
    /// it.
    connecting: tokio::sync::Mutex<Option<HttpError>>,
    /// Connect attempts finished.
    connects: AtomicU64,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("authority", &self.authority)
            .field("connected", &self.sender.load().is_some())
            .finish_non_exhaustive()
    }
}

impl Endpoint {
    /// A sender on the open connection, if there is one.
    fn open(&self) -> Option<SendRequest<RequestBody>> {
        // Read first: a call writes the shared flag only once per idle period.
        if !self.used.load(Ordering::Relaxed) {
            self.used.store(true, Ordering::Relaxed);
        }
        let sender = self.sender.load();
        sender.as_deref().filter(|s| !s.is_closed()).cloned()
    }

    /// A sender on the open connection, connecting first when there is none. Calls that
    /// wait for another's connect get its outcome (they do not connect again).
    async fn connected(self: &Arc<Self>) -> Result<SendRequest<RequestBody>, HttpError> {
        let seen = self.connects.load(Ordering::Acquire);
        let mut failed = self.connecting.lock().await;
        if let Some(sender) = self.open() {
            return Ok(sender);
        }
        if self.connects.load(Ordering::Acquire) != seen
            && let Some(e) = &*failed
        {
            return Err(e.clone());
        }
        let outcome = self.connect().await;
        *failed = outcome.as_ref().err().cloned();
        self.connects.fetch_add(1, Ordering::Release);
        let sender = outcome?;
        let shared = Arc::new(sender.clone());
        self.sender.store(Some(shared.clone()));
        tokio::spawn(close_when_idle(
            Arc::downgrade(self),
            Arc::downgrade(&shared),
            self.idle_timeout,
        ));
        Ok(sender)
    }

    /// A new connection: TCP (`TCP_NODELAY`), the HTTP/2 handshake, its driver spawned.
    async fn connect(&self) -> Result<SendRequest<RequestBody>, HttpError> {
        let address = self.authority.as_str();
        let tcp = tokio::time::timeout(self.connect_timeout, TcpStream::connect(address))
            .await
            .map_err(|_| HttpError::ConnectTimeout {
                address: address.into(),
                timeout: self.connect_timeout,
            })?
            .map_err(|e| HttpError::Connect {
                address: address.into(),
                source: Arc::new(e),
            })?;
        // Only latency: a connection without it still works.
        let _ = tcp.set_nodelay(true);
        let (sender, connection) = hyper::client::conn::http2::Builder::new(BoxingExecutor)
            .timer(TokioTimer::new())
            .handshake(TokioIo::new(tcp))
            .await
            .map_err(|e| HttpError::Http(Arc::new(e)))?;
        let address: Box<str> = address.into();
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(provider = &*address, "connection closed: {e}");
            }
        });
        Ok(sender)
    }
}

/// Spawns hyper's tasks (two per request: the body pipe and the response) boxed, as tonic's
/// executor does: tokio copies a spawned future into its task and again when it ends, and
/// hyper's are large, where a box moves as one pointer. It saves about 2,500 instructions
/// per call (callgrind, the `--profile full` commands in
/// `tower/examples/tower_vs_balance.rs`).
#[derive(Debug, Clone, Copy)]
struct BoxingExecutor;

impl<F> hyper::rt::Executor<F> for BoxingExecutor
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn execute(&self, future: F) {
        tokio::spawn(Box::pin(future));
    }
}

/// Takes the connection's sender out of its endpoint once a whole idle period passed
/// without a call: the connection closes when the calls that hold a sender end. Ends when
/// the endpoint is dropped or the connection was replaced.
async fn close_when_idle(
    endpoint: Weak<Endpoint>,
    sender: Weak<SendRequest<RequestBody>>,
    idle: Duration,
) {
    loop {
        tokio::time::sleep(idle).await;
        let (Some(endpoint), Some(sender)) = (endpoint.upgrade(), sender.upgrade()) else {
            return;
        };
        let current = endpoint.sender.load();
        if !current.as_ref().is_some_and(|c| Arc::ptr_eq(c, &sender)) {
            return;
        }
        if !endpoint.used.swap(false, Ordering::Relaxed) {
            endpoint
                .sender
                .compare_and_swap(&*current, None::<Arc<SendRequest<RequestBody>>>);
            tracing::debug!(provider = endpoint.authority.as_str(), "idle: closing");
            return;
        }
    }
}

impl tower_service::Service<http::Request<RequestBody>> for HttpChannel {
    type Response = http::Response<hyper::body::Incoming>;
    type Error = HttpError;
    type Future = HttpFuture;

    /// Always ready: HTTP/2 multiplexes, and the connection is made (or made again) by the
    /// call that finds none.
    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), HttpError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut req: http::Request<RequestBody>) -> HttpFuture {
        let mut parts = std::mem::take(req.uri_mut()).into_parts();
        parts.scheme = Some(Scheme::HTTP);
        parts.authority = Some(self.endpoint.authority.clone());
        if parts.path_and_query.is_none() {
            parts.path_and_query = Some(http::uri::PathAndQuery::from_static("/"));
        }
        if let Ok(uri) = http::Uri::from_parts(parts) {
            *req.uri_mut() = uri;
        }
        match self.endpoint.open() {
            Some(mut sender) => {
                let sent = sender.send_request(req);
                Box::pin(async move { sent.await.map_err(|e| HttpError::Http(Arc::new(e))) })
            }
            None => {
                let endpoint = self.endpoint.clone();
                Box::pin(async move {
                    let mut sender = endpoint.connected().await?;
                    sender
                        .send_request(req)
                        .await
                        .map_err(|e| HttpError::Http(Arc::new(e)))
                })
            }
        }
    }
}

/// Providers per lazily made chunk of slots.
const CHUNK: usize = 64;

/// One channel slot per provider of one snapshot, in chunks of [`CHUNK`] made on first use:
/// a new snapshot costs one empty pointer per 64 providers, not a slot per provider.
struct Slots<C> {
    snapshot: Arc<Snapshot>,
    chunks: Box<[OnceLock<Chunk<C>>]>,
}

/// [`CHUNK`] slots, each filled on its provider's first pick.
type Chunk<C> = Box<[OnceLock<C>]>;

impl<C> Slots<C> {
    fn new(snapshot: &Arc<Snapshot>) -> Self {
        Slots {
            snapshot: snapshot.clone(),
            chunks: (0..snapshot.len().div_ceil(CHUNK))
                .map(|_| OnceLock::new())
                .collect(),
        }
    }

    fn slot(&self, index: usize) -> Option<&OnceLock<C>> {
        let chunk = self
            .chunks
            .get(index / CHUNK)?
            .get_or_init(|| (0..CHUNK).map(|_| OnceLock::new()).collect());
        chunk.get(index % CHUNK)
    }
}

/// The channels of the current snapshot's providers, made on first use. Looking one up is
/// an atomic load and two indexes, without a lock. A snapshot change stores new, empty slots
/// (O(providers / 64)); each provider's slot is then filled on its first pick from the
/// channels already made, by address (a provider that stays keeps its channel), under a
/// lock taken only on that first pick; a channel is made only for a new address.
pub(crate) struct ChannelCache<M: MakeChannel> {
    make: M,
    slots: ArcSwap<Slots<M::Channel>>,
    /// Every channel made, by provider address. Pruned to the current snapshot's addresses
    /// when it has grown to twice the snapshot (amortized O(1) per channel made).
    made: Mutex<HashMap<Box<str>, M::Channel>>,
}

impl<M: MakeChannel> ChannelCache<M> {
    pub(crate) fn new(make: M, snapshot: &Arc<Snapshot>) -> Self {
        ChannelCache {
            make,
            slots: ArcSwap::from_pointee(Slots::new(snapshot)),
            made: Mutex::new(HashMap::new()),
        }
    }

    /// The channel to provider `index` of `snapshot`.
    pub(crate) fn channel(
        &self,
        snapshot: &Arc<Snapshot>,
        index: usize,
    ) -> Result<M::Channel, BoxError> {
        let mut cur = self.slots.load();
        if !Arc::ptr_eq(&cur.snapshot, snapshot) {
            self.slots.rcu(|cur| {
                if Arc::ptr_eq(&cur.snapshot, snapshot)
                    || cur.snapshot.generation() > snapshot.generation()
                {
                    Arc::clone(cur)
                } else {
                    Arc::new(Slots::new(snapshot))
                }
            });
            cur = self.slots.load();
        }
        let provider = snapshot
            .providers()
            .get(index)
            .ok_or("no such provider in the snapshot")?;
        let slot = Arc::ptr_eq(&cur.snapshot, snapshot)
            .then(|| cur.slot(index))
            .flatten();
        if let Some(c) = slot.and_then(OnceLock::get) {
            return Ok(c.clone());
        }
        let channel = self.by_address(snapshot, provider)?;
        Ok(match slot {
            Some(slot) => slot.get_or_init(|| channel).clone(),
            // Another caller stored a newer snapshot meanwhile (this is an older call).
            None => channel,
        })
    }

    /// The channel made for `provider`'s address, made now when there is none.
    fn by_address(&self, snapshot: &Snapshot, provider: &Provider) -> Result<M::Channel, BoxError> {
        let mut made = self.made.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = made.get(provider.address()) {
            return Ok(c.clone());
        }
        let channel = self.make.make_channel(provider)?;
        if made.len() >= 2 * snapshot.len().max(32) {
            let current: std::collections::HashSet<&str> =
                snapshot.providers().iter().map(|p| p.address()).collect();
            made.retain(|address, _| current.contains(&**address));
        }
        made.insert(provider.address().into(), channel.clone());
        Ok(channel)
    }
}
