//! The bits of the gRPC protocol the layer needs: status codes, the status of a response
//! head, and a trailers-only response for routing failures.
//!
//! ## Which statuses fail over
//!
//! A request marked [`Idempotent`](crate::Idempotent) fails over on the codes of
//! [`RouteConfig::retryable_codes`](crate::RouteConfig::retryable_codes), by default:
//!
//! - `UNAVAILABLE` (14): the provider cannot serve now (shutting down, overloaded, a proxy in
//!   front of it cannot reach it) — gRPC's own retry guidance names it as the retryable code;
//! - `RESOURCE_EXHAUSTED` (8): the provider ran out of a resource (quota, memory, a
//!   concurrency limit); another provider may have it.
//!
//! Only a status in the response **head** (a trailers-only response, how gRPC servers answer
//! with an error and no message) can fail over: a status in the trailers comes after the
//! response was handed to the caller. A request that is not idempotent gets the provider's
//! status as it is. Transport errors fail over whatever the marker says, as in Dubbo's
//! failover cluster (set `retries: 0` for methods that must never run twice).

use http::{HeaderMap, HeaderValue};

/// A gRPC status code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Code(pub u32);

impl Code {
    /// 0.
    pub const OK: Code = Code(0);
    /// 4.
    pub const DEADLINE_EXCEEDED: Code = Code(4);
    /// 8.
    pub const RESOURCE_EXHAUSTED: Code = Code(8);
    /// 10.
    pub const ABORTED: Code = Code(10);
    /// 13.
    pub const INTERNAL: Code = Code(13);
    /// 14.
    pub const UNAVAILABLE: Code = Code(14);
}

/// The header that says why the layer answered itself: `no-provider`, `breaker`,
/// `exhausted` (every provider of the routed set failed), `failed` (every attempt failed at the
/// transport), `body` (the request body could not be read).
pub const ERROR_HEADER: &str = "routechain-error";

/// True when the request is gRPC (`content-type: application/grpc...`).
pub fn is_grpc(headers: &HeaderMap) -> bool {
    headers
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"))
}

/// `grpc-status`, made once (a `&str` name is parsed on every lookup).
const GRPC_STATUS: http::HeaderName = http::HeaderName::from_static("grpc-status");

/// The `grpc-status` of a response head (a trailers-only response), if it has one.
pub fn head_status(headers: &HeaderMap) -> Option<Code> {
    let v = headers.get(&GRPC_STATUS)?;
    std::str::from_utf8(v.as_bytes())
        .ok()?
        .parse()
        .ok()
        .map(Code)
}

/// gRPC's `grpc-message` encoding: percent-encode everything but printable ASCII other than
/// `%`.
const MESSAGE: &percent_encoding::AsciiSet = &percent_encoding::CONTROLS.add(b'%');

/// The head of a trailers-only gRPC response with `code`, `message` and the
/// [`ERROR_HEADER`] `reason`.
pub fn trailers_only(code: Code, message: &str, reason: &'static str) -> http::response::Parts {
    let mut response = http::Response::new(());
    let headers = response.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/grpc"),
    );
    headers.insert("grpc-status", HeaderValue::from(code.0));
    let encoded = percent_encoding::utf8_percent_encode(message, MESSAGE).to_string();
    if let Ok(v) = HeaderValue::from_str(&encoded) {
        headers.insert("grpc-message", v);
    }
    headers.insert(ERROR_HEADER, HeaderValue::from_static(reason));
    response.into_parts().0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trailers_only_head_round_trips_its_status() {
        let head = trailers_only(
            Code::UNAVAILABLE,
            "no provider: tag 100% → ∅",
            "no-provider",
        );
        assert_eq!(head_status(&head.headers), Some(Code::UNAVAILABLE));
        assert!(is_grpc(&head.headers));
        let message = head.headers["grpc-message"].to_str().unwrap();
        assert!(message.starts_with("no provider: tag 100%25 "), "{message}");
        assert_eq!(head.headers[ERROR_HEADER], "no-provider");
        assert_eq!(head_status(&HeaderMap::new()), None);
    }
}
