//! `watch --metrics ADDR`: a small HTTP server answering `GET /metrics` with the chain's
//! Prometheus metrics (docs/metrics.md), on hyper (HTTP/1.1) in a thread of its own.
//!
//! The body is Prometheus's text format (version 0.0.4), or OpenMetrics text when the
//! scraper's `Accept` header asks for `application/openmetrics-text` (Prometheus does);
//! both encoded by `prometheus-client` from the registry at each request.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use routechain::prometheus_client::encoding::{prometheus_text, text};
use routechain::prometheus_client::registry::Registry;

/// The `Content-Type` of an OpenMetrics answer.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Binds `addr` now (an error names it) and serves `registry` on it from a background
/// thread until the process exits. Returns the bound address (for port 0).
pub fn serve(addr: SocketAddr, registry: Arc<Registry>) -> std::io::Result<SocketAddr> {
    let listener = std::net::TcpListener::bind(addr)?;
    listener.set_nonblocking(true)?;
    let bound = listener.local_addr()?;
    std::thread::Builder::new()
        .name("routechain-metrics".into())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_io()
                .build()
            {
                Ok(r) => r,
                Err(e) => {
                    tracing::error!("metrics server: no runtime: {e}");
                    return;
                }
            };
            runtime.block_on(accept(listener, registry));
        })?;
    Ok(bound)
}

async fn accept(listener: std::net::TcpListener, registry: Arc<Registry>) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!("metrics server: {e}");
            return;
        }
    };
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("metrics server: accept failed: {e}");
                continue;
            }
        };
        let registry = registry.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req| {
                let registry = registry.clone();
                async move { Ok::<_, Infallible>(answer(&req, &registry)) }
            });
            if let Err(e) = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                tracing::debug!("metrics server: connection ended: {e}");
            }
        });
    }
}

fn plain(status: StatusCode, body: &'static str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// The answer to one request: the metrics for `GET /metrics`, 404 or 405 otherwise.
fn answer(req: &Request<Incoming>, registry: &Registry) -> Response<Full<Bytes>> {
    if req.uri().path() != "/metrics" {
        return plain(
            StatusCode::NOT_FOUND,
            "not found: the metrics are at /metrics\n",
        );
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return plain(StatusCode::METHOD_NOT_ALLOWED, "use GET\n");
    }
    let openmetrics = req.headers().get_all(header::ACCEPT).iter().any(|v| {
        v.to_str()
            .is_ok_and(|v| v.contains("application/openmetrics-text"))
    });
    let mut body = String::new();
    let (encoded, content_type) = if openmetrics {
        (text::encode(&mut body, registry), OPENMETRICS)
    } else {
        (
            prometheus_text::encode(&mut body, registry),
            prometheus_text::CONTENT_TYPE,
        )
    };
    if encoded.is_err() {
        return plain(StatusCode::INTERNAL_SERVER_ERROR, "encoding failed\n");
    }
    let mut r = Response::new(Full::new(Bytes::from(body)));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(content_type),
    );
    r
}
