//! Per-provider channels: the [`MakeChannel`] connector that makes one for a provider, the
//! default [`HttpConnector`] (hyper HTTP/2 over TCP, `http://host:port`), and the cache that
//! keeps one channel per provider of the current snapshot.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use arc_swap::ArcSwap;
use bytes::Bytes;
use http::uri::{Authority, Scheme};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector as HyperHttpConnector;
use hyper_util::rt::TokioExecutor;
use routechain_core::{Provider, Snapshot};

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
/// made again after it closed. Connections of providers that left the snapshot close when
/// idle for the idle timeout (90 s by default).
#[derive(Debug, Clone)]
pub struct HttpConnector {
    client: Client<HyperHttpConnector, RequestBody>,
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
        let mut tcp = HyperHttpConnector::new();
        tcp.set_nodelay(true);
        tcp.set_connect_timeout(Some(connect));
        let client = Client::builder(TokioExecutor::new())
            .http2_only(true)
            .pool_idle_timeout(idle)
            .timer(hyper_util::rt::TokioTimer::new())
            .pool_timer(hyper_util::rt::TokioTimer::new())
            .build(tcp);
        HttpConnector { client }
    }
}

impl MakeChannel for HttpConnector {
    type Channel = HttpChannel;
    type Body = hyper::body::Incoming;
    type Error = hyper_util::client::legacy::Error;
    type Future = hyper_util::client::legacy::ResponseFuture;

    fn make_channel(&self, provider: &Provider) -> Result<HttpChannel, BoxError> {
        let authority: Authority = provider.address().parse()?;
        Ok(HttpChannel {
            client: self.client.clone(),
            authority,
        })
    }
}

/// One provider's channel of the [`HttpConnector`].
#[derive(Debug, Clone)]
pub struct HttpChannel {
    client: Client<HyperHttpConnector, RequestBody>,
    authority: Authority,
}

impl tower_service::Service<http::Request<RequestBody>> for HttpChannel {
    type Response = http::Response<hyper::body::Incoming>;
    type Error = hyper_util::client::legacy::Error;
    type Future = hyper_util::client::legacy::ResponseFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.client.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<RequestBody>) -> Self::Future {
        let mut parts = std::mem::take(req.uri_mut()).into_parts();
        parts.scheme = Some(Scheme::HTTP);
        parts.authority = Some(self.authority.clone());
        if parts.path_and_query.is_none() {
            parts.path_and_query = Some(http::uri::PathAndQuery::from_static("/"));
        }
        if let Ok(uri) = http::Uri::from_parts(parts) {
            *req.uri_mut() = uri;
        }
        self.client.request(req)
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
