//! The layer's overhead per call, at 10,000 providers in the snapshot.
//!
//! The snapshot holds 10,000 providers; the chain (tag → condition → group → IDC-weight,
//! the full chain of the routing benchmarks) leaves exactly one of them for the benchmark's
//! calls: the call's `group` attribute names the one group only that provider is in. The
//! 9,999 others are registered addresses on 127.1.0.0/16 that the rules exclude — never
//! contacted, but every call routes over all 10,000 (the bitsets are 10,000 wide).
//!
//! Two pairs, each a tonic `GreeterClient::say_hello` call:
//!
//! - `loopback/*`: a real tonic server on 127.0.0.1; `direct` through a tonic `Channel`
//!   connected to it, `layer` through `RouteLayer` + `HttpConnector` (hyper HTTP/2).
//! - `in-memory/*`: a channel that answers at once without I/O (it reads the request body
//!   and returns an encoded reply with `grpc-status: 0` trailers); `direct` is the client
//!   over that channel, `layer` the client over the layer whose connector makes that
//!   channel. The difference is the layer's own cost per call: building the routechain
//!   request, buffering the body, routing and balancing over 10,000 providers, the channel
//!   cache, readiness, health reports, in-flight counting and the response extension.
//!
//! `cargo bench -p routechain-tower --bench layer`
#![allow(missing_docs)] // `criterion_group!` generates an undocumented function.

#[path = "../tests/common/mod.rs"]
mod common;

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use common::greeter::greeter_client::GreeterClient;
use common::greeter::{HelloReply, HelloRequest};
use common::{Provider, SERVICE};
use criterion::{Criterion, criterion_group, criterion_main};
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use prost::Message;
use routechain::core::{Provider as RouteProvider, Snapshot, Url};
use routechain::live::{LiveChain, LiveOptions};
use routechain::rules::ChainFile;
use routechain_tower::{BoxError, HttpConnector, MakeChannel, RouteAttributes, RouteLayer};
use tower_layer::Layer;

/// Providers in the snapshot.
const PROVIDERS: usize = 10_000;

const CHAIN: &str = r#"
service: "*/helloworld.Greeter"
consumer: consumer://127.0.0.1/helloworld.Greeter?application=bench&region=beijing&idc=mt
routers:
  - type: tag
  - type: condition
    rule:
      conditions:
        - method = Reindex => idc = zf
  - type: group
  - type: idc-weight
    rule:
      idcs: {beijing: [mt, zf], shanghai: [sh]}
      route_tables: {beijing: {mt: 90, zf: 10}}
      cross_region: [shanghai]
"#;

/// 10,000 provider URLs: `real` first (group `live`, beijing/mt), then 9,999 in 100 other
/// groups over three IDCs, a tenth of them tagged gray.
fn urls(real: &str) -> Vec<Url> {
    let mut urls = vec![
        format!("tri://{real}/{SERVICE}?region=beijing&idc=mt&group=live")
            .parse()
            .unwrap(),
    ];
    for i in 1..PROVIDERS {
        let (region, idc) = [("beijing", "mt"), ("beijing", "zf"), ("shanghai", "sh")][i % 3];
        let tag = if i % 10 == 0 { "&dubbo.tag=gray" } else { "" };
        urls.push(
            format!(
                "tri://127.1.{}.{}:20880/{SERVICE}?region={region}&idc={idc}&group=g{}{tag}",
                i / 250,
                i % 250 + 1,
                i % 100
            )
            .parse()
            .unwrap(),
        );
    }
    urls
}

fn live(real: &str) -> Arc<LiveChain> {
    let file = ChainFile::parse("bench.chain.yaml", CHAIN, None).unwrap();
    Arc::new(
        LiveChain::with_providers(
            file,
            routechain::registry(),
            LiveOptions::default(),
            Snapshot::new(1, urls(real)),
        )
        .unwrap(),
    )
}

fn request() -> tonic::Request<HelloRequest> {
    let mut r = tonic::Request::new(HelloRequest {
        name: "bench".into(),
    });
    r.extensions_mut()
        .insert(RouteAttributes::new().with("group", "live"));
    r
}

/// A channel that answers every call at once, without I/O.
#[derive(Clone)]
struct Instant {
    reply: Bytes,
}

impl Instant {
    fn new() -> Self {
        let message = HelloReply {
            message: "instant".into(),
        }
        .encode_to_vec();
        let mut frame = BytesMut::new();
        frame.put_u8(0);
        frame.put_u32(message.len() as u32);
        frame.put_slice(&message);
        Instant {
            reply: frame.freeze(),
        }
    }
}

/// The reply body: one data frame, then `grpc-status: 0` trailers.
struct Reply {
    data: Option<Bytes>,
    trailers: bool,
}

impl Body for Reply {
    type Data = Bytes;
    type Error = BoxError;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if let Some(d) = self.data.take() {
            return Poll::Ready(Some(Ok(Frame::data(d))));
        }
        if std::mem::take(&mut self.trailers) {
            let mut t = http::HeaderMap::new();
            t.insert("grpc-status", http::HeaderValue::from_static("0"));
            return Poll::Ready(Some(Ok(Frame::trailers(t))));
        }
        Poll::Ready(None)
    }
}

impl<B> tower_service::Service<http::Request<B>> for Instant
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = http::Response<Reply>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<http::Response<Reply>, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let reply = self.reply.clone();
        Box::pin(async move {
            req.into_body().collect().await.map_err(Into::into)?;
            let mut response = http::Response::new(Reply {
                data: Some(reply),
                trailers: true,
            });
            response.headers_mut().insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static("application/grpc"),
            );
            Ok(response)
        })
    }
}

impl MakeChannel for Instant {
    type Channel = Instant;
    type Body = Reply;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<http::Response<Reply>, BoxError>> + Send>>;
    fn make_channel(&self, _: &RouteProvider) -> Result<Instant, BoxError> {
        Ok(self.clone())
    }
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let provider = rt.block_on(Provider::start("real", ""));
    let live = live(&provider.address);
    let channel = rt.block_on(async {
        tonic::transport::Endpoint::from_shared(format!("http://{}", provider.address))
            .unwrap()
            .tcp_nodelay(true)
            .connect()
            .await
            .unwrap()
    });

    let mut direct = GreeterClient::new(channel);
    let mut layered =
        GreeterClient::new(RouteLayer::new(live.service().clone()).layer(HttpConnector::new()));
    // Both answer, from the one real provider.
    rt.block_on(async {
        direct.say_hello(request()).await.unwrap();
        let reply = layered.say_hello(request()).await.unwrap();
        assert_eq!(common::who(&reply), "real");
    });

    let mut g = c.benchmark_group("tower-layer/loopback");
    g.measurement_time(Duration::from_secs(8));
    g.bench_function("direct", |b| {
        b.to_async(&rt).iter(|| {
            let mut client = direct.clone();
            async move { client.say_hello(request()).await.unwrap() }
        })
    });
    g.bench_function("layer", |b| {
        b.to_async(&rt).iter(|| {
            let mut client = layered.clone();
            async move { client.say_hello(request()).await.unwrap() }
        })
    });
    g.finish();

    let mut direct = GreeterClient::new(Instant::new());
    let mut layered =
        GreeterClient::new(RouteLayer::new(live.service().clone()).layer(Instant::new()));
    rt.block_on(async {
        direct.say_hello(request()).await.unwrap();
        layered.say_hello(request()).await.unwrap();
    });
    let mut g = c.benchmark_group("tower-layer/in-memory");
    g.bench_function("direct", |b| {
        b.to_async(&rt).iter(|| {
            let mut client = direct.clone();
            async move { client.say_hello(request()).await.unwrap() }
        })
    });
    g.bench_function("layer", |b| {
        b.to_async(&rt).iter(|| {
            let mut client = layered.clone();
            async move { client.say_hello(request()).await.unwrap() }
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
