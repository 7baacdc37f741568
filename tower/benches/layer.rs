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

use std::time::Duration;

use common::Provider;
use common::greeter::greeter_client::GreeterClient;
use common::instant::{Instant, live, request};
use criterion::{Criterion, criterion_group, criterion_main};
use routechain_tower::{HttpConnector, RouteLayer};
use tower_layer::Layer;

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
