//! [`RouteLayer`] and [`RouteService`]: route, balance, send, fail over, feed health.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use routechain_balance::{CallError, Cluster, InvokeError, Invoked, Selected};
use tower_service::Service as TowerService;

use crate::body::{ResponseBody, buffer};
use crate::config::RouteConfig;
use crate::connect::{ChannelCache, MakeChannel};
use crate::error::{BoxError, RouteError};
use crate::grpc::{self, Code};

/// Wraps a [`MakeChannel`] connector into a [`RouteService`] over a routechain
/// [`Cluster`] (e.g. a `LiveChain`'s, whose rules and providers follow ZooKeeper).
#[derive(Debug, Clone)]
pub struct RouteLayer {
    service: Arc<Cluster>,
    config: Arc<RouteConfig>,
}

impl RouteLayer {
    /// A layer over `service` with the default [`RouteConfig`].
    pub fn new(service: Arc<Cluster>) -> Self {
        Self::with_config(service, RouteConfig::default())
    }

    /// A layer over `service` with `config`.
    pub fn with_config(service: Arc<Cluster>, config: RouteConfig) -> Self {
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

/// Routes every request through a routechain [`Cluster`] to one provider's channel; see the
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
    service: Arc<Cluster>,
    config: Arc<RouteConfig>,
    channels: ChannelCache<M>,
}

impl<M: MakeChannel> RouteService<M> {
    /// The routechain service requests are routed by.
    pub fn service(&self) -> &Arc<Cluster> {
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
        // `route` is the whole future (no wrapper around it): every move of a future copies
        // all of it, and this one holds the attempt's.
        Box::pin(route(self.shared.clone(), req))
    }
}

/// What the caller gets for `result`: a gRPC request gets a routing failure as a
/// trailers-only `UNAVAILABLE` response, any other request as the error.
fn answer<B>(
    grpc: bool,
    result: Result<http::Response<ResponseBody<B>>, RouteError>,
) -> Result<http::Response<ResponseBody<B>>, RouteError> {
    match result {
        Err(e) if grpc => {
            tracing::debug!("routechain: {e}");
            let head = grpc::trailers_only(Code::UNAVAILABLE, &e.to_string(), e.reason());
            Ok(http::Response::from_parts(head, ResponseBody::empty()))
        }
        result => result,
    }
}

/// Why one attempt did not answer.
enum Failure<B> {
    /// A transport error (connect refused or timed out, connection closed or reset before
    /// the response head), on the provider at `address`.
    Transport { address: String, error: BoxError },
    /// A retryable gRPC status in the response head (an idempotent request).
    Status(http::Response<B>),
    /// No request to send (not reached: a streamed body gets exactly one attempt, and a
    /// buffered one always has its head and body).
    NotResent,
}

impl<B> Failure<B> {
    /// The failure in words (the retry budget's error carries it).
    fn describe(&self) -> String {
        match self {
            Failure::Transport { address, error } => format!("{address}: {error}"),
            Failure::Status(response) => format!(
                "grpc-status {}",
                response
                    .headers()
                    .get("grpc-status")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("?")
            ),
            Failure::NotResent => "the request was not sent again".to_string(),
        }
    }
}

/// What a retry sends again of the request head: method, URI, version and headers. The
/// first attempt sends the caller's head itself (moved, not copied), extensions included;
/// a retry sends this copy, without the caller's extensions (they are local values, such
/// as [`RouteAttributes`](crate::RouteAttributes), never sent on the wire). Made only when
/// a retry can send the body again (a buffered body); the headers are copied into the
/// per-thread buffers of [`Reused`] (a map whose capacity is kept), so the copy allocates
/// nothing once warm.
struct RetryHead<'a> {
    method: http::Method,
    uri: http::Uri,
    version: http::Version,
    headers: &'a http::HeaderMap,
}

impl<'a> RetryHead<'a> {
    fn of(head: &http::request::Parts, buffer: &'a mut http::HeaderMap) -> Self {
        buffer.clear();
        // `clone_from` is a plain `clone` for `HeaderMap` (it allocates a new map): refill
        // the kept one instead. `append` keeps repeated headers, in order.
        for (name, value) in &head.headers {
            buffer.append(name.clone(), value.clone());
        }
        RetryHead {
            method: head.method.clone(),
            uri: head.uri.clone(),
            version: head.version,
            headers: buffer,
        }
    }

    fn parts(&self) -> http::request::Parts {
        let mut req = http::Request::new(());
        *req.method_mut() = self.method.clone();
        *req.uri_mut() = self.uri.clone();
        *req.version_mut() = self.version;
        *req.headers_mut() = self.headers.clone();
        req.into_parts().0
    }
}

async fn route<M, B>(
    shared: Arc<Shared<M>>,
    req: http::Request<B>,
) -> Result<RouteResponse<M>, RouteError>
where
    M: MakeChannel,
    B: http_body::Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<BoxError>,
{
    let shared = &*shared;
    let grpc = grpc::is_grpc(req.headers());
    let (head, body) = req.into_parts();
    let config = &shared.config;
    let mut pooled = routechain_balance::Pooled::<Reused>::take();
    let Buffers {
        request,
        retry_headers,
    } = &mut *pooled.get().0;
    config.fill_request(&head, request);
    let request = &*request;
    let idempotent = config.is_idempotent(&head, request);
    let mut body = match buffer(body, config.buffer_limit).await {
        Ok(body) => body,
        Err(e) => return answer(grpc, Err(RouteError::Body(e))),
    };
    // A streamed body can be sent once: one attempt, so no second provider is selected,
    // counted in flight or reported to health for a request that could not be sent.
    let streamed = !body.is_full();
    // Copied whether or not the method's `retries` allow a retry: reading the configuration
    // for that (an atomic load and a reference count) costs about what the copy into kept
    // buffers does.
    let retry_head = (!streamed).then(|| RetryHead::of(&head, retry_headers));
    let mut first = Some(head);
    let outcome = shared
        .service
        .call_limited(request, if streamed { 1 } else { u32::MAX }, |selected| {
            let mut req = body.attempt().and_then(|b| {
                let head = match first.take() {
                    Some(head) => head,
                    None => retry_head.as_ref()?.parts(),
                };
                Some(http::Request::from_parts(head, b))
            });
            // The channel is looked up here, not in the attempt's future: the failover loop
            // moves that future (into the timeout, into its own state), so it holds only
            // what it waits on.
            let channel = shared
                .channels
                .channel(selected.state().snapshot(), selected.index());
            async move {
                let transport = |error: BoxError| {
                    tracing::debug!(provider = selected.address(), "attempt failed: {error}");
                    CallError::Retryable(Failure::Transport {
                        address: selected.address().to_string(),
                        error,
                    })
                };
                let mut channel = channel.map_err(transport)?;
                std::future::poll_fn(|cx| channel.poll_ready(cx))
                    .await
                    .map_err(|e| transport(e.into()))?;
                // Taken only now: a request held across the wait would be stored twice in
                // the future (as the captured value and as this binding).
                let Some(req) = req.take() else {
                    return Err(CallError::Final(Failure::NotResent));
                };
                let response = channel.call(req).await.map_err(|e| transport(e.into()))?;
                // Only an idempotent request fails over on a status: the head is read for
                // it only then.
                let retryable = idempotent
                    && grpc::head_status(response.headers())
                        .is_some_and(|c| config.retryable_codes.contains(&c));
                if retryable {
                    Err(CallError::Retryable(Failure::Status(response)))
                } else {
                    Ok(response)
                }
            }
        })
        .await;
    drop(pooled);
    answer(grpc, finish(outcome, streamed, grpc))
}

/// The response (or the error) of the failover loop's outcome.
fn finish<B>(
    outcome: Result<Invoked<http::Response<B>>, InvokeError<Failure<B>>>,
    streamed: bool,
    grpc: bool,
) -> Result<http::Response<ResponseBody<B>>, RouteError> {
    match outcome {
        // The failsafe cluster: the failure is swallowed, the caller gets the default
        // answer (for gRPC an OK status and the reply message with default fields).
        Err(InvokeError::Swallowed { provider, .. }) => {
            let mut response = if grpc {
                let mut head = http::Response::new(());
                head.headers_mut().insert(
                    http::header::CONTENT_TYPE,
                    http::HeaderValue::from_static("application/grpc"),
                );
                http::Response::from_parts(head.into_parts().0, ResponseBody::default_message())
            } else {
                http::Response::new(ResponseBody::empty())
            };
            response.extensions_mut().insert(RoutedTo {
                provider,
                attempts: 1,
            });
            Ok(response)
        }
        Ok(invoked) => {
            let mut response = invoked.value.map(ResponseBody::new);
            response.extensions_mut().insert(RoutedTo {
                provider: invoked.provider,
                attempts: invoked.attempts,
            });
            Ok(response)
        }
        Err(InvokeError::Select(e)) => Err(RouteError::Select(e)),
        Err(InvokeError::RetryBudgetExhausted { last, attempts }) => Err(RouteError::RetryBudget {
            attempts,
            last: match last {
                CallError::Retryable(f) | CallError::Final(f) => f.describe().into(),
                CallError::Timeout(d) => format!("the attempt timed out after {d:?}").into(),
            },
        }),
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
                Failure::Transport { address, error } if streamed => Err(RouteError::Failed {
                    attempts,
                    last: format!(
                        "{address}: {error} (the request body was a stream: sent once, not sent again)"
                    )
                    .into(),
                    stopped,
                }),
                Failure::Transport { address, error } => Err(RouteError::Failed {
                    attempts,
                    last: format!("{address}: {error}").into(),
                    stopped,
                }),
                Failure::NotResent => Err(RouteError::Failed {
                    attempts: attempts.saturating_sub(1),
                    last: "the request could not be sent again".into(),
                    stopped,
                }),
            }
        }
    }
}

/// The buffers of one call: the routechain [`Request`](routechain_core::Request) and the
/// retry copy of the headers, taken from a small per-thread cache
/// ([`routechain_balance::Pooled`]) and given back when the call ends (or its future is
/// dropped), so the layer refills strings and maps instead of allocating new ones. Only
/// buffers are cached: everything about a request is rewritten by
/// [`RouteConfig::fill_request`] before use, and the headers are cleared when given back.
/// Boxed: taking it from the cache and giving it back moves a pointer, not the buffers.
#[derive(Debug, Default)]
struct Reused(Box<Buffers>);

/// What [`Reused`] keeps.
#[derive(Debug, Default)]
struct Buffers {
    request: routechain_core::Request,
    retry_headers: http::HeaderMap,
}

thread_local! {
    static REUSED: std::cell::RefCell<Vec<Reused>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

impl routechain_balance::PerThread for Reused {
    fn cache() -> &'static std::thread::LocalKey<std::cell::RefCell<Vec<Self>>> {
        &REUSED
    }

    /// The copied header values are the caller's (they may be large): not kept.
    fn recycle(&mut self) {
        self.0.retry_headers.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RouteAttributes;

    /// What the layer does per call before sending (the routechain request refilled, the
    /// retry copy of the headers made) reuses the per-thread buffers: no allocation once
    /// warm.
    #[test]
    fn the_request_refill_and_the_retry_copy_allocate_nothing_once_warm() {
        let mut head = http::Request::post("http://x/helloworld.Greeter/SayHello")
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .header("dubbo-tag", "gray")
            .header("x-request-id", "r-1")
            .body(())
            .unwrap()
            .into_parts()
            .0;
        head.extensions
            .insert(RouteAttributes::new().with("group", "user"));
        let config = RouteConfig::default();
        let per_call = |head: &http::request::Parts| {
            let mut pooled = routechain_balance::Pooled::<Reused>::take();
            let Buffers {
                request,
                retry_headers,
            } = &mut *pooled.get().0;
            config.fill_request(head, request);
            let retry = RetryHead::of(head, retry_headers);
            assert_eq!(retry.headers.len(), 4);
            assert_eq!(request.attachments.get("dubbo.tag"), Some("gray"));
        };
        per_call(&head);
        per_call(&head);
        let info = allocation_counter::measure(|| per_call(&head));
        assert_eq!(info.count_total, 0, "{info:?}");
    }
}
