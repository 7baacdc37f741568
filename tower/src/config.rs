//! What the layer reads from each HTTP request to build a routechain request, and how it
//! retries: [`RouteConfig`], plus the typed values a caller puts in a request's extensions
//! ([`RouteAttributes`], [`Idempotent`]).

use std::fmt;
use std::sync::Arc;

use http::HeaderName;
use routechain_core::{Attributes, Request};

use crate::grpc::Code;

/// Request-scoped routing values, put in the HTTP request's extensions by the caller
/// (`tonic::Request::extensions_mut().insert(..)` reaches them too): the attributes (local to
/// the caller, e.g. the `group` of the group router) and the arguments condition rules match
/// with `arguments[n]`. Never sent to the provider.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RouteAttributes {
    /// Attributes (`group`, `user`...).
    pub attributes: Attributes,
    /// Arguments, for `arguments[n]` in condition rules.
    pub arguments: Vec<serde_json::Value>,
}

impl RouteAttributes {
    /// No attribute, no argument.
    pub fn new() -> Self {
        Self::default()
    }
    /// Adds an attribute.
    pub fn with(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.attributes.insert(key, value);
        self
    }
    /// Adds an argument.
    pub fn with_argument(mut self, value: serde_json::Value) -> Self {
        self.arguments.push(value);
        self
    }
}

/// Marks a request idempotent: besides transport errors, it fails over on the retryable gRPC
/// statuses ([`RouteConfig::retryable_codes`]). Put it in the request's extensions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Idempotent;

/// Extracts the routechain method (and, optionally, service) from a request head.
pub type MethodExtractor = Arc<
    dyn Fn(&http::Method, &http::Uri, &http::HeaderMap) -> Option<(String, Option<String>)>
        + Send
        + Sync,
>;

/// The layer's settings. The retries, the per-attempt timeout and the health settings are
/// the [`routechain_balance::Cluster`]'s (`retries`, `timeout`, per method in `methods`, and
/// `health` in the chain file), not the layer's.
#[derive(Clone)]
pub struct RouteConfig {
    /// Headers copied into the routechain request's attachments: (header, attachment key).
    /// Default: `dubbo-tag` → `dubbo.tag` (the tag router's key). The headers stay on the
    /// request, so the provider sees them too.
    pub attachment_headers: Vec<(HeaderName, String)>,
    /// The method extractor; `None`: the gRPC path `/pkg.Service/Method` gives method
    /// `Method` and service `pkg.Service`.
    pub method_extractor: Option<MethodExtractor>,
    /// Methods treated as [`Idempotent`] without the marker.
    pub idempotent_methods: Vec<String>,
    /// gRPC statuses an idempotent request fails over on (default `UNAVAILABLE`,
    /// `RESOURCE_EXHAUSTED`).
    pub retryable_codes: Vec<Code>,
    /// The largest body kept for resending (default 4 MiB, gRPC's default message size
    /// limit); a longer body is sent as a stream in one attempt.
    pub buffer_limit: usize,
}

impl fmt::Debug for RouteConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RouteConfig")
            .field("attachment_headers", &self.attachment_headers)
            .field("method_extractor", &self.method_extractor.is_some())
            .field("idempotent_methods", &self.idempotent_methods)
            .field("retryable_codes", &self.retryable_codes)
            .field("buffer_limit", &self.buffer_limit)
            .finish()
    }
}

impl Default for RouteConfig {
    fn default() -> Self {
        RouteConfig {
            attachment_headers: vec![(HeaderName::from_static("dubbo-tag"), "dubbo.tag".into())],
            method_extractor: None,
            idempotent_methods: Vec::new(),
            retryable_codes: vec![Code::UNAVAILABLE, Code::RESOURCE_EXHAUSTED],
            buffer_limit: 4 << 20,
        }
    }
}

impl RouteConfig {
    /// Copies header `header` into attachment `key` (in addition to the ones configured).
    pub fn attachment_header(mut self, header: HeaderName, key: impl Into<String>) -> Self {
        self.attachment_headers.push((header, key.into()));
        self
    }

    /// Sets the method extractor.
    pub fn method_extractor(
        mut self,
        f: impl Fn(&http::Method, &http::Uri, &http::HeaderMap) -> Option<(String, Option<String>)>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        self.method_extractor = Some(Arc::new(f));
        self
    }

    /// Treats `method` as idempotent.
    pub fn idempotent_method(mut self, method: impl Into<String>) -> Self {
        self.idempotent_methods.push(method.into());
        self
    }

    /// Sets the statuses idempotent requests fail over on.
    pub fn retryable_codes(mut self, codes: impl IntoIterator<Item = Code>) -> Self {
        self.retryable_codes = codes.into_iter().collect();
        self
    }

    /// Builds the routechain request of an HTTP request head.
    pub fn build_request(&self, head: &http::request::Parts) -> Request {
        let mut request = Request::new();
        self.fill_request(head, &mut request);
        request
    }

    /// Makes `request` the routechain request of an HTTP request head, reusing its strings
    /// and buffers: the layer refills one pooled request per call, so once warm this
    /// allocates nothing (unless a configured method extractor does).
    pub fn fill_request(&self, head: &http::request::Parts, request: &mut Request) {
        match &self.method_extractor {
            Some(f) => {
                (request.method, request.service) = match f(&head.method, &head.uri, &head.headers)
                {
                    Some((method, service)) => (Some(method), service),
                    None => (None, None),
                };
            }
            None => {
                let (service, method) = grpc_method(head.uri.path()).unzip();
                set(&mut request.method, method);
                set(&mut request.service, service);
            }
        }
        request.consumer = None;
        request.parameter_types.clear();
        request
            .attachments
            .assign(self.attachment_headers.iter().filter_map(|(header, key)| {
                let v = head.headers.get(header)?.to_str().ok()?;
                Some((key.as_str(), v))
            }));
        match head.extensions.get::<RouteAttributes>() {
            Some(a) => {
                request.attributes.assign(a.attributes.iter());
                request.arguments.clone_from(&a.arguments);
            }
            None => {
                request.attributes.assign([]);
                request.arguments.clear();
            }
        }
    }

    /// True when the request may be sent again after a retryable status.
    pub fn is_idempotent(&self, head: &http::request::Parts, request: &Request) -> bool {
        head.extensions.get::<Idempotent>().is_some()
            || request
                .method
                .as_deref()
                .is_some_and(|m| self.idempotent_methods.iter().any(|i| i == m))
    }
}

/// Sets `slot` to `value`, reusing the string already there.
fn set(slot: &mut Option<String>, value: Option<&str>) {
    match (slot.as_mut(), value) {
        (Some(s), Some(v)) => {
            s.clear();
            s.push_str(v);
        }
        (None, Some(v)) => *slot = Some(v.to_owned()),
        (_, None) => *slot = None,
    }
}

/// `(service, method)` of a gRPC path `/pkg.Service/Method`.
pub fn grpc_method(path: &str) -> Option<(&str, &str)> {
    let (service, method) = path.strip_prefix('/')?.split_once('/')?;
    (!service.is_empty() && !method.is_empty() && !method.contains('/'))
        .then_some((service, method))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grpc_path_names_service_and_method() {
        assert_eq!(
            grpc_method("/helloworld.Greeter/SayHello"),
            Some(("helloworld.Greeter", "SayHello"))
        );
        for bad in ["", "/", "//x", "/a/", "/a/b/c", "a/b"] {
            assert_eq!(grpc_method(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_request_head_gives_method_attachments_attributes_and_arguments() {
        let mut head = http::Request::post("http://x/org.example.Users/getUser")
            .header("dubbo-tag", "gray")
            .header("x-other", "1")
            .body(())
            .unwrap()
            .into_parts()
            .0;
        head.extensions.insert(
            RouteAttributes::new()
                .with("group", "idx_user")
                .with_argument(serde_json::json!("u-1")),
        );
        let config = RouteConfig::default().idempotent_method("getUser");
        // Refilling a used request gives the same request as building a new one.
        let mut reused = Request::new()
            .with_method("old")
            .with_attachment("a", "1")
            .with_attribute("b", "2")
            .with_argument(serde_json::json!(9));
        config.fill_request(&head, &mut reused);
        let r = config.build_request(&head);
        assert_eq!(format!("{reused:?}"), format!("{r:?}"));
        assert_eq!(r.method.as_deref(), Some("getUser"));
        assert_eq!(r.service.as_deref(), Some("org.example.Users"));
        assert_eq!(r.attachments.get("dubbo.tag"), Some("gray"));
        assert_eq!(r.attachments.len(), 1);
        assert_eq!(r.attributes.get("group"), Some("idx_user"));
        assert_eq!(r.arguments, [serde_json::json!("u-1")]);
        assert!(config.is_idempotent(&head, &r));
        assert!(!RouteConfig::default().is_idempotent(&head, &r));
        head.extensions.insert(Idempotent);
        assert!(RouteConfig::default().is_idempotent(&head, &r));
    }

    #[test]
    fn a_configured_extractor_replaces_the_grpc_path() {
        let head = http::Request::get("http://x/users/7?op=get")
            .body(())
            .unwrap()
            .into_parts()
            .0;
        let config = RouteConfig::default().method_extractor(|_, uri, _| {
            uri.query()
                .and_then(|q| q.strip_prefix("op="))
                .map(|m| (m.to_string(), None))
        });
        assert_eq!(config.build_request(&head).method.as_deref(), Some("get"));
    }
}
