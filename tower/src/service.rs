//! [`RouteLayer`] and [`RouteService`]: route, balance, send, fail over, feed health.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use routechain_balance::{SelectError, Selected, Service};
use routechain_core::CallState;
use tower_service::Service as TowerService;

use crate::body::{ResponseBody, buffer};
use crate::config::RouteConfig;
use crate::connect::{ChannelCache, MakeChannel};
use crate::error::{BoxError, RouteError};
use crate::grpc::{self, Code};

/// Wraps a [`MakeChannel`] connector into a [`RouteService`] over a routechain
/// [`Service`] (e.g. a `LiveChain`'s, whose rules and providers follow ZooKeeper).
#[derive(Debug, Clone)]
pub struct RouteLayer {
    service: Arc<Service>,
    config: Arc<RouteConfig>,
}

impl RouteLayer {
    /// A layer over `service` with the default [`RouteConfig`].
    pub fn new(service: Arc<Service>) -> Self {
        Self::with_config(service, RouteConfig::default())
    }

    /// A layer over `service` with `config`.
    pub fn with_config(service: Arc<Service>, config: RouteConfig) -> Self {
        RouteLayer {
            service,
            config: Arc::new(config),
        }
    }
}

impl<M: MakeChannel> tower_layer::Layer<M> for RouteLayer {
    type Service = RouteService<M>;

    fn layer(&self, make: M) -> RouteService<M> {
        let snapshot = self.service.state().snapshot().clone();
        RouteService {
            shared: Arc::new(Shared {
                service: self.service.clone(),
                config: self.config.clone(),
                channels: ChannelCache::new(make, &snapshot),
                pool: Mutex::new(Vec::new()),
            }),
        }
    }
}

/// Where a response came from, in the response's extensions (tonic:
/// `response.extensions().get::<RoutedTo>()`).
#[derive(Debug, Clone)]
pub struct RoutedTo {
    /// The provider that answered.
    pub provider: Selected,
    /// Attempts made (1: no failover).
    pub attempts: u32,
}

/// Routes every request through a routechain [`Service`] to one provider's channel; see the
/// crate documentation. Cloning it is cheap (one `Arc`), and every clone shares the channels.
pub struct RouteService<M: MakeChannel> {
    shared: Arc<Shared<M>>,
}

impl<M: MakeChannel> Clone for RouteService<M> {
    fn clone(&self) -> Self {
        RouteService {
            shared: self.shared.clone(),
        }
    }
}

impl<M: MakeChannel> std::fmt::Debug for RouteService<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RouteService")
            .field("config", &self.shared.config)
            .finish_non_exhaustive()
    }
}

struct Shared<M: MakeChannel> {
    service: Arc<Service>,
    config: Arc<RouteConfig>,
    channels: ChannelCache<M>,
    pool: Mutex<Vec<CallState>>,
}

impl<M: MakeChannel> RouteService<M> {
    /// The routechain service requests are routed by.
    pub fn service(&self) -> &Arc<Service> {
        &self.shared.service
    }
}

/// The response type of a [`RouteService`] over connector `M`.
pub type RouteResponse<M> = http::Response<ResponseBody<<M as MakeChannel>::Body>>;

impl<M, B> TowerService<http::Request<B>> for RouteService<M>
where
    M: MakeChannel,
    B: http_body::Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<BoxError>,
{
    type Response = RouteResponse<M>;
    type Error = RouteError;
    type Future = Pin<Box<dyn Future<Output = Result<RouteResponse<M>, RouteError>> + Send>>;

    /// Always ready: the provider is known only in `call`, which waits for the chosen
    /// provider's channel to be ready before sending (within the attempt timeout).
    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), RouteError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let shared = self.shared.clone();
        Box::pin(async move {
            let grpc = grpc::is_grpc(req.headers());
            match route(&shared, req).await {
                Ok(response) => Ok(response),
                Err(e) if grpc => {
                    tracing::debug!("routechain: {e}");
                    let head = grpc::trailers_only(Code::UNAVAILABLE, &e.to_string(), e.reason());
                    Ok(http::Response::from_parts(head, ResponseBody::empty()))
                }
                Err(e) => Err(e),
            }
        })
    }
}

/// What one attempt came back with, when it did not answer.
enum Failure<B> {
    /// A transport error or the attempt timeout.
    Transport(BoxError),
    /// A retryable gRPC status in the response head.
    Status(http::Response<B>),
}

async fn route<M, B>(
    shared: &Shared<M>,
    req: http::Request<B>,
) -> Result<RouteResponse<M>, RouteError>
where
    M: MakeChannel,
    B: http_body::Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<BoxError>,
{
    let (head, body) = req.into_parts();
    let config = &shared.config;
    let request = config.build_request(&head);
    let idempotent = config.is_idempotent(&head, &request);
    let mut body = buffer(body, config.buffer_limit)
        .await
        .map_err(RouteError::Body)?;
    let retries = if body.is_full() {
        shared.service.config().retries
    } else {
        0
    };
    let mut call = shared
        .pool
        .lock()
        .ok()
        .and_then(|mut p| p.pop())
        .unwrap_or_default();
    let mut tried: Vec<Selected> = Vec::new();
    let mut last: Option<(Failure<M::Body>, String)> = None;
    let mut outcome = None;
    for attempt in 1..=retries.saturating_add(1) {
        let selected = match shared.service.select(&request, &tried, &mut call) {
            Ok(s) => s,
            Err(e) => {
                outcome = Some(Err(e));
                break;
            }
        };
        let Some(body) = body.attempt() else { break };
        let result = send(
            shared,
            &selected,
            http::Request::from_parts(head.clone(), body),
        )
        .await;
        match result {
            Ok(mut response) => {
                let status = grpc::head_status(response.headers());
                let retryable = status.is_some_and(|c| config.retryable_codes.contains(&c));
                if retryable {
                    shared.service.report_failure(&selected);
                    if idempotent {
                        last = Some((Failure::Status(response), selected.address().to_string()));
                        tried.push(selected);
                        continue;
                    }
                } else {
                    shared.service.report_success(&selected);
                }
                response.extensions_mut().insert(RoutedTo {
                    provider: selected,
                    attempts: attempt,
                });
                outcome = Some(Ok(response));
                break;
            }
            Err(e) => {
                tracing::debug!(provider = selected.address(), "attempt failed: {e}");
                shared.service.report_failure(&selected);
                last = Some((Failure::Transport(e), selected.address().to_string()));
                tried.push(selected);
            }
        }
    }
    if let Ok(mut pool) = shared.pool.lock() {
        pool.push(call);
    }
    let attempts = tried.len() as u32;
    match (outcome, last) {
        (Some(Ok(response)), _) => Ok(response.map(ResponseBody::new)),
        (_, Some((Failure::Status(response), _))) => Ok(response.map(ResponseBody::new)),
        (_, Some((Failure::Transport(last), address))) => Err(RouteError::Failed {
            attempts,
            address,
            last,
        }),
        (Some(Err(e)), None) => Err(RouteError::Select(e)),
        (None, None) => Err(RouteError::Select(SelectError::Exhausted { tried: 0 })),
    }
}

/// One attempt on `selected`: its channel, ready, called, within the attempt timeout.
async fn send<M: MakeChannel>(
    shared: &Shared<M>,
    selected: &Selected,
    req: http::Request<crate::body::RequestBody>,
) -> Result<http::Response<M::Body>, BoxError> {
    let mut channel = shared
        .channels
        .channel(selected.state().snapshot(), selected.index())?;
    let _in_flight = selected.begin();
    let attempt = async {
        std::future::poll_fn(|cx| channel.poll_ready(cx))
            .await
            .map_err(Into::into)?;
        channel.call(req).await.map_err(Into::into)
    };
    match shared.config.attempt_timeout {
        Some(t) => tokio::time::timeout(t, attempt)
            .await
            .unwrap_or_else(|_| Err(format!("attempt timed out after {t:?}").into())),
        None => attempt.await,
    }
}
