//! Benchmark support: 10,000 providers of which the chain leaves one for the calls below,
//! and `Instant`, a channel that answers every gRPC call at once without I/O (shared by
//! `benches/layer.rs` and `examples/layer_calls.rs`).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{BufMut, Bytes, BytesMut};
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use prost::Message;
use routechain::core::{Provider as RouteProvider, Snapshot, Url};
use routechain::live::{LiveChain, LiveOptions};
use routechain::rules::ChainFile;
use routechain_tower::{BoxError, MakeChannel, RouteAttributes};

use super::SERVICE;
use super::greeter::{HelloReply, HelloRequest};

/// Providers in the snapshot.
pub const PROVIDERS: usize = 10_000;

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

pub fn live(real: &str) -> Arc<LiveChain> {
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

pub fn request() -> tonic::Request<HelloRequest> {
    let mut r = tonic::Request::new(HelloRequest {
        name: "bench".into(),
    });
    r.extensions_mut()
        .insert(RouteAttributes::new().with("group", "live"));
    r
}

/// A channel that answers every call at once, without I/O.
#[derive(Clone)]
pub struct Instant {
    reply: Bytes,
}

impl Default for Instant {
    fn default() -> Self {
        Self::new()
    }
}

impl Instant {
    pub fn new() -> Self {
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
pub struct Reply {
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
