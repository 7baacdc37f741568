//! # routechain-tower
//!
//! A [`tower`](https://docs.rs/tower) integration: [`RouteLayer`] wraps a per-provider
//! connector ([`MakeChannel`], by default [`HttpConnector`]: hyper HTTP/2 connections) into a
//! [`RouteService`], a `tower::Service<http::Request<B>>` that routes every request through a
//! [`routechain_balance::Cluster`] (the chain's routers, then the load balancer) and sends it
//! to the chosen provider. It works wherever a tonic `Channel` does:
//! `GreeterClient::new(RouteLayer::new(service).layer(HttpConnector::new()))` (a complete
//! example is in `docs/embedding.md`, compiled as a doc test of this crate).
//!
//! Per request ([`service`]):
//!
//! 1. a routechain [`Request`](routechain_core::Request) is built: the method (and service)
//!    from the gRPC path `/pkg.Service/Method` or a configured extractor, the attributes and
//!    arguments from a [`RouteAttributes`] value in the request's extensions, the
//!    attachments from configured headers (`dubbo-tag` → `dubbo.tag` by default);
//! 2. the body is buffered when it is complete without waiting (every unary and
//!    server-streaming gRPC call), so the request can be sent again; a body that waits (a
//!    client or bidirectional stream) is sent as a stream, in one attempt;
//! 3. a provider is picked (routing + balancing, never one the call already tried), its
//!    channel is taken from a cache kept per provider snapshot (channels of providers that
//!    stay are carried over when the snapshot changes), awaited until ready (`poll_ready`
//!    backpressure) and called, the call counted in flight for `leastactive` meanwhile;
//! 4. the outcome feeds the provider's health, and the call fails over to another provider
//!    of the same routed set ([`RouteConfig`]) on a transport error (connect refused or timed
//!    out, connection closed or reset before the response head, the attempt's timeout) — as
//!    Dubbo's failover cluster does — and, when the request is marked [`Idempotent`] (or its
//!    method is configured idempotent), on a retryable gRPC status in the response head
//!    (`UNAVAILABLE` and `RESOURCE_EXHAUSTED` by default, see [`grpc`]). The failover loop is
//!    [`routechain_balance::Cluster::call`]'s: retries and the per-attempt timeout are the
//!    chain file's `retries` and `timeout` (per method under `methods`), in-flight counting
//!    is a guard, the providers already tried are excluded;
//! 5. when no provider can be picked, or every attempt failed at the transport, a gRPC
//!    request gets a trailers-only response with status `UNAVAILABLE` (tonic turns it into a
//!    `Status`) whose `routechain-error` header says why; any other request gets a
//!    [`RouteError`].
//!
//! The answered response carries a [`RoutedTo`] in its extensions (the provider and the
//! number of attempts).

pub mod body;
pub mod config;
pub mod connect;
pub mod error;
pub mod grpc;
pub mod service;

pub use body::{RequestBody, ResponseBody};
pub use config::{Idempotent, RouteAttributes, RouteConfig};
pub use connect::{HttpChannel, HttpConnector, HttpError, HttpFuture, MakeChannel};
pub use error::{BoxError, RouteError};
pub use service::{RouteLayer, RouteService, RoutedTo};

/// docs/embedding.md's Rust examples, compiled as doc tests.
#[doc = include_str!("../../docs/embedding.md")]
#[cfg(doctest)]
pub struct EmbeddingDoctests;
