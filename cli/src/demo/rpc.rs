//! The demo's gRPC service, `org.example.UserIndexService`, written as `tonic-build` would
//! generate it from this protobuf definition (so that no `protoc` is needed):
//!
//! ```proto
//! package org.example;
//! service UserIndexService {
//!   rpc getUser (Call) returns (Identity);
//!   rpc listOrders (Call) returns (Identity);
//!   rpc reindex (Call) returns (Identity);
//! }
//! message Call { uint64 id = 1; string user = 2; }
//! message Identity {
//!   uint64 id = 1; string address = 2; string region = 3; string idc = 4;
//!   string group = 5; string tag = 6; bool canary = 7; string method = 8;
//! }
//! ```
//!
//! Every method answers with the provider's identity: what the demo's report is computed
//! from. The method names are the Dubbo method names the chain's rules match
//! (`method = reindex`), carried in the gRPC path `/org.example.UserIndexService/reindex`.

use std::sync::Arc;

use tonic::codegen::{Body, BoxFuture, Bytes, Context, Poll, Service, StdError, http};

/// One call.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Call {
    /// Matches the reply to the call.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// The user the call is about.
    #[prost(string, tag = "2")]
    pub user: String,
}

/// A provider's answer: who it is.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Identity {
    /// The call's id.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// The provider's `host:port`.
    #[prost(string, tag = "2")]
    pub address: String,
    /// Its `region` param.
    #[prost(string, tag = "3")]
    pub region: String,
    /// Its `idc` param.
    #[prost(string, tag = "4")]
    pub idc: String,
    /// Its `group` param.
    #[prost(string, tag = "5")]
    pub group: String,
    /// Its `dubbo.tag` param (empty: untagged).
    #[prost(string, tag = "6")]
    pub tag: String,
    /// Its `canary=true` param.
    #[prost(bool, tag = "7")]
    pub canary: bool,
    /// The method it executed.
    #[prost(string, tag = "8")]
    pub method: String,
}

/// The gRPC service name (the Dubbo interface).
pub const SERVICE_NAME: &str = "org.example.UserIndexService";

/// The demo's methods.
pub const METHODS: [&str; 3] = ["getUser", "listOrders", "reindex"];

/// A `UserIndexService` client over any gRPC service (a routechain `RouteService` here).
#[derive(Debug, Clone)]
pub struct UserIndexClient<T> {
    inner: tonic::client::Grpc<T>,
}

impl<T> UserIndexClient<T>
where
    T: tonic::client::GrpcService<tonic::body::Body>,
    T::Error: Into<StdError>,
    T::ResponseBody: Body<Data = Bytes> + Send + 'static,
    <T::ResponseBody as Body>::Error: Into<StdError> + Send,
{
    /// A client sending through `inner`.
    pub fn new(inner: T) -> Self {
        UserIndexClient {
            inner: tonic::client::Grpc::new(inner),
        }
    }

    /// Calls `method` (one of [`METHODS`]).
    pub async fn call(
        &mut self,
        method: &'static str,
        request: tonic::Request<Call>,
    ) -> Result<tonic::Response<Identity>, tonic::Status> {
        self.inner
            .ready()
            .await
            .map_err(|e| tonic::Status::unknown(format!("Service was not ready: {}", e.into())))?;
        let path = match method {
            "getUser" => "/org.example.UserIndexService/getUser",
            "listOrders" => "/org.example.UserIndexService/listOrders",
            "reindex" => "/org.example.UserIndexService/reindex",
            other => return Err(tonic::Status::unimplemented(other.to_string())),
        };
        let codec = tonic_prost::ProstCodec::default();
        let path = http::uri::PathAndQuery::from_static(path);
        self.inner.unary(request, path, codec).await
    }
}

/// The server side: every method answers with `identity` (the method and the call's id
/// filled in).
#[derive(Debug, Clone)]
pub struct UserIndexServer {
    identity: Arc<Identity>,
}

impl UserIndexServer {
    /// A provider that is `identity`.
    pub fn new(identity: Identity) -> Self {
        UserIndexServer {
            identity: Arc::new(identity),
        }
    }
}

/// One method of the server, as tonic's unary machinery wants it.
struct Answer {
    identity: Arc<Identity>,
    method: &'static str,
}

impl tonic::server::UnaryService<Call> for Answer {
    type Response = Identity;
    type Future = BoxFuture<tonic::Response<Identity>, tonic::Status>;

    fn call(&mut self, request: tonic::Request<Call>) -> Self::Future {
        let reply = Identity {
            id: request.get_ref().id,
            method: self.method.to_string(),
            ..(*self.identity).clone()
        };
        Box::pin(async move { Ok(tonic::Response::new(reply)) })
    }
}

impl<B> Service<http::Request<B>> for UserIndexServer
where
    B: Body + Send + 'static,
    B::Error: Into<StdError> + Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = std::convert::Infallible;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let method = req
            .uri()
            .path()
            .strip_prefix("/org.example.UserIndexService/")
            .and_then(|m| METHODS.into_iter().find(|k| *k == m));
        let identity = self.identity.clone();
        Box::pin(async move {
            Ok(match method {
                Some(method) => {
                    let mut grpc = tonic::server::Grpc::new(tonic_prost::ProstCodec::default());
                    grpc.unary(Answer { identity, method }, req).await
                }
                None => tonic::Status::unimplemented("no such method").into_http(),
            })
        })
    }
}
