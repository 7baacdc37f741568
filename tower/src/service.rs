//! [`RouteLayer`] and [`RouteService`]: route, balance, send, fail over, feed health.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use routechain_balance::{CallError, InvokeError, Selected, Service};
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

/// Why one attempt did not answer.
enum Failure<B> {
    /// A transport error (connect refused or timed out, connection closed or reset before
    /// the response head), on the provider at `address`.
    Transport { address: String, error: BoxError },
    /// A retryable gRPC status in the response head (an idempotent request).
    Status(http::Response<B>),
    /// A streamed body, already sent by an attempt that failed: it cannot be sent again.
    NotResent,
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
    let head = &head;
    let outcome = shared
        .service
        .call(&request, |selected| {
            let req = body
                .attempt()
                .map(|b| http::Request::from_parts(head.clone(), b));
            async move {
                let Some(req) = req else {
                    return Err(CallError::Final(Failure::NotResent));
                };
                match send(shared, &selected, req).await {
                    Ok(response) => {
                        let retryable = grpc::head_status(response.headers())
                            .is_some_and(|c| config.retryable_codes.contains(&c));
                        if retryable && idempotent {
                            Err(CallError::Retryable(Failure::Status(response)))
                        } else {
                            Ok(response)
                        }
                    }
                    Err(error) => {
                        tracing::debug!(provider = selected.address(), "attempt failed: {error}");
                        Err(CallError::Retryable(Failure::Transport {
                            address: selected.address().to_string(),
                            error,
                        }))
                    }
                }
            }
        })
        .await;
    match outcome {
        Ok(invoked) => {
            let mut response = invoked.value.map(ResponseBody::new);
            response.extensions_mut().insert(RoutedTo {
                provider: invoked.provider,
                attempts: invoked.attempts,
            });
            Ok(response)
        }
        Err(InvokeError::Select(e)) => Err(RouteError::Select(e)),
        Err(InvokeError::Failed {
            last,
            attempts,
            stopped,
        }) => {
            let last = match last {
                CallError::Retryable(f) | CallError::Final(f) => f,
                CallError::Timeout(d) => {
                    return Err(RouteError::Failed {
                        attempts,
                        last: format!("the attempt timed out after {d:?}").into(),
                        stopped,
                    });
                }
            };
            match last {
                Failure::Status(response) => Ok(response.map(ResponseBody::new)),
                Failure::Transport { address, error } => Err(RouteError::Failed {
                    attempts,
                    last: format!("{address}: {error}").into(),
                    stopped,
                }),
                Failure::NotResent => Err(RouteError::Failed {
                    attempts: attempts.saturating_sub(1),
                    last: "the request body was a stream: sent once, not sent again after the attempt failed".into(),
                    stopped,
                }),
            }
        }
    }
}

/// One attempt on `selected`: its channel, ready, called (the service's timeout bounds it).
async fn send<M: MakeChannel>(
    shared: &Shared<M>,
    selected: &Selected,
    req: http::Request<crate::body::RequestBody>,
) -> Result<http::Response<M::Body>, BoxError> {
    let mut channel = shared
        .channels
        .channel(selected.state().snapshot(), selected.index())?;
    std::future::poll_fn(|cx| channel.poll_ready(cx))
        .await
        .map_err(Into::into)?;
    channel.call(req).await.map_err(Into::into)
}
