// `helloworld.Greeter` (gRPC's example service), written as `tonic-build` would generate it
// from `greeter.proto`, so that no `protoc` is needed (docs/embedding.md includes this file
// with `include!`, hence plain comments and no inner attributes):
//
//     package helloworld;
//     service Greeter { rpc SayHello (HelloRequest) returns (HelloReply); }
//     message HelloRequest { string name = 1; }
//     message HelloReply { string message = 1; }
//
// The server side takes a synchronous handler (enough for providers that answer with their
// identity).

/// The request.
#[derive(Clone, PartialEq, prost::Message)]
pub struct HelloRequest {
    /// Who says hello.
    #[prost(string, tag = "1")]
    pub name: String,
}

/// The reply.
#[derive(Clone, PartialEq, prost::Message)]
pub struct HelloReply {
    /// The greeting.
    #[prost(string, tag = "1")]
    pub message: String,
}

/// The client, as generated.
pub mod greeter_client {
    use tonic::codegen::*;

    /// A `helloworld.Greeter` client over any gRPC service (a tonic `Channel`, a
    /// routechain `RouteService`...).
    #[derive(Debug, Clone)]
    pub struct GreeterClient<T> {
        inner: tonic::client::Grpc<T>,
    }

    impl<T> GreeterClient<T>
    where
        T: tonic::client::GrpcService<tonic::body::Body>,
        T::Error: Into<StdError>,
        T::ResponseBody: Body<Data = Bytes> + std::marker::Send + 'static,
        <T::ResponseBody as Body>::Error: Into<StdError> + std::marker::Send,
    {
        /// A client sending through `inner`.
        pub fn new(inner: T) -> Self {
            let inner = tonic::client::Grpc::new(inner);
            Self { inner }
        }

        /// `SayHello`.
        pub async fn say_hello(
            &mut self,
            request: impl tonic::IntoRequest<super::HelloRequest>,
        ) -> std::result::Result<tonic::Response<super::HelloReply>, tonic::Status> {
            self.inner.ready().await.map_err(|e| {
                tonic::Status::unknown(format!("Service was not ready: {}", e.into()))
            })?;
            let codec = tonic_prost::ProstCodec::default();
            let path = http::uri::PathAndQuery::from_static("/helloworld.Greeter/SayHello");
            let mut req = request.into_request();
            req.extensions_mut()
                .insert(GrpcMethod::new("helloworld.Greeter", "SayHello"));
            self.inner.unary(req, path, codec).await
        }
    }
}

/// The server, as generated (with a synchronous handler).
pub mod greeter_server {
    use std::sync::Arc;
    use tonic::codegen::*;

    /// What a `helloworld.Greeter` provider does.
    pub trait Greeter: std::marker::Send + std::marker::Sync + 'static {
        /// `SayHello`.
        fn say_hello(
            &self,
            request: tonic::Request<super::HelloRequest>,
        ) -> std::result::Result<tonic::Response<super::HelloReply>, tonic::Status>;
    }

    /// The tonic service of a [`Greeter`].
    #[derive(Debug)]
    pub struct GreeterServer<T> {
        inner: Arc<T>,
    }

    impl<T> GreeterServer<T> {
        /// Serves `inner`.
        pub fn new(inner: T) -> Self {
            GreeterServer {
                inner: Arc::new(inner),
            }
        }
    }

    impl<T> Clone for GreeterServer<T> {
        fn clone(&self) -> Self {
            GreeterServer {
                inner: self.inner.clone(),
            }
        }
    }

    struct SayHelloSvc<T>(Arc<T>);

    impl<T: Greeter> tonic::server::UnaryService<super::HelloRequest> for SayHelloSvc<T> {
        type Response = super::HelloReply;
        type Future = BoxFuture<tonic::Response<Self::Response>, tonic::Status>;
        fn call(&mut self, request: tonic::Request<super::HelloRequest>) -> Self::Future {
            let result = self.0.say_hello(request);
            Box::pin(async move { result })
        }
    }

    impl<T, B> Service<http::Request<B>> for GreeterServer<T>
    where
        T: Greeter,
        B: Body + std::marker::Send + 'static,
        B::Error: Into<StdError> + std::marker::Send + 'static,
    {
        type Response = http::Response<tonic::body::Body>;
        type Error = std::convert::Infallible;
        type Future = BoxFuture<Self::Response, Self::Error>;

        fn poll_ready(
            &mut self,
            _cx: &mut Context<'_>,
        ) -> Poll<std::result::Result<(), Self::Error>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, req: http::Request<B>) -> Self::Future {
            match req.uri().path() {
                "/helloworld.Greeter/SayHello" => {
                    let inner = self.inner.clone();
                    Box::pin(async move {
                        let codec = tonic_prost::ProstCodec::default();
                        let mut grpc = tonic::server::Grpc::new(codec);
                        Ok(grpc.unary(SayHelloSvc(inner), req).await)
                    })
                }
                _ => Box::pin(async move {
                    Ok(tonic::Status::unimplemented("no such method").into_http())
                }),
            }
        }
    }

    impl<T> tonic::server::NamedService for GreeterServer<T> {
        const NAME: &'static str = "helloworld.Greeter";
    }
}
