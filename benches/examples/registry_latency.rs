//! Update latency from a real registry, ZooKeeper or Nacos (both started here, on the same
//! machine): `providers` instances registered, then the time from a source's start to the
//! first route over all of them, and the time from one instance changed in the registry to
//! its change applied (median and p99 over `changes` changes, one at a time).
//!
//! ZooKeeper is written with routechain's admin (a changed provider is a new node and the
//! old one removed, as Dubbo re-registers); Nacos with the official Python SDK (an instance
//! registered again with new metadata, as a Nacos client updates it).
//!
//! Run: `cargo run --release -p routechain-benches --example registry_latency -- [zookeeper|nacos] [providers] [changes]`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use routechain::core::{CallState, Request};
use routechain::live::{
    LiveChain, LiveOptions, NacosConfig, NacosSource, Source, ZkAdmin, ZkConfig, ZkSource,
};
use routechain::rules::ChainFile;
use routechain_testkit::churn::percentile;
use routechain_testkit::nacos::{Nacos, NacosWriter};
use routechain_testkit::zookeeper::ZooKeeper;

const SERVICE: &str = "com.foo.BarService";

/// The registry's source for a chain.
type MakeSource = Box<dyn FnOnce(&LiveChain) -> Box<dyn Source>>;

fn url(n: usize, version: usize) -> String {
    format!(
        "dubbo://10.{}.{}.{}:20880/{SERVICE}?application=demo&side=provider&region=hz&rev={version}",
        n / 65536,
        n / 256 % 256,
        n % 256
    )
}

fn address(n: usize) -> String {
    format!("10.{}.{}.{}:20880", n / 65536, n / 256 % 256, n % 256)
}

/// The `rev` parameter of provider `n` as the live chain serves it.
fn rev(live: &LiveChain, n: &str) -> Option<String> {
    let state = live.service().state();
    state
        .snapshot()
        .providers()
        .iter()
        .find(|u| u.address() == n)
        .and_then(|u| u.param("rev").map(str::to_string))
}

fn live() -> Arc<LiveChain> {
    let file = ChainFile::parse(
        "bench.chain.yaml",
        "service: com.foo.BarService\nrouters:\n  - type: condition\n",
        None,
    )
    .expect("chain parses");
    Arc::new(LiveChain::new(file, routechain::registry(), LiveOptions::default()).unwrap())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let registry = args.get(1).map_or("nacos", String::as_str).to_string();
    let providers: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let changes: usize = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(100);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // The registry, filled; `change(i)` changes provider i % providers to revision i + 1.
    let mut change: Box<dyn FnMut(usize)>;
    let source: MakeSource;
    let _zk;
    let _nacos;
    let started = Instant::now();
    if registry == "zookeeper" {
        let zk = ZooKeeper::start("latency");
        let admin = Arc::new(rt.block_on(ZkAdmin::connect(&zk.address())).unwrap());
        rt.block_on(async {
            let mut tasks = tokio::task::JoinSet::new();
            for chunk in (0..providers).collect::<Vec<_>>().chunks(500) {
                let admin = admin.clone();
                let chunk = chunk.to_vec();
                tasks.spawn(async move {
                    for n in chunk {
                        admin
                            .register_persistent(SERVICE, &url(n, 0))
                            .await
                            .unwrap();
                    }
                });
            }
            while let Some(r) = tasks.join_next().await {
                r.unwrap();
            }
        });
        let servers = zk.address();
        source = Box::new(move |live: &LiveChain| {
            Box::new(ZkSource::new(ZkConfig::for_chain(live, servers))) as Box<dyn Source>
        });
        let handle = rt.handle().clone();
        change = Box::new(move |i| {
            let n = i % providers;
            handle.block_on(async {
                admin
                    .register_persistent(SERVICE, &url(n, i + 1))
                    .await
                    .unwrap();
                let before = if i < providers {
                    url(n, 0)
                } else {
                    url(n, i + 1 - providers)
                };
                admin.unregister(SERVICE, &before).await.unwrap();
            });
        });
        _zk = Some(zk);
        _nacos = None;
    } else {
        let nacos = Nacos::start("latency");
        let mut w = NacosWriter::start(&nacos.address(), "");
        let urls: Vec<String> = (0..providers).map(|n| url(n, 0)).collect();
        w.batch("DEFAULT_GROUP", &urls);
        let address = nacos.url("");
        source = Box::new(move |live: &LiveChain| {
            Box::new(NacosSource::new(NacosConfig::for_chain(live, address))) as Box<dyn Source>
        });
        change = Box::new(move |i| w.register("DEFAULT_GROUP", &url(i % providers, i + 1)));
        _zk = None;
        _nacos = Some(nacos);
    }
    println!(
        "{registry}: {providers} providers registered in {:?}",
        started.elapsed()
    );

    let live = live();
    let start = Instant::now();
    let _watching = live.watch((source)(&live), |_| {}).unwrap();
    let request = Request::new();
    loop {
        let state = live.service().state();
        if state.snapshot().providers().len() == providers
            && state.route(&request, &mut CallState::seeded(1)).is_ok()
        {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(120), "never listed");
        std::thread::sleep(Duration::from_micros(200));
    }
    println!(
        "start -> first route over {providers}: {:?}",
        start.elapsed()
    );

    let mut ns = Vec::with_capacity(changes);
    for i in 0..changes {
        let n = address(i % providers);
        let want = (i + 1).to_string();
        let t = Instant::now();
        change(i);
        while rev(&live, &n).as_deref() != Some(want.as_str()) {
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "change {i} never applied"
            );
            std::thread::sleep(Duration::from_micros(100));
        }
        ns.push(t.elapsed().as_nanos() as u64);
    }
    let ms = |v: u64| v as f64 / 1e6;
    println!(
        "one instance changed -> applied, {changes} changes: median {:.1} ms, p99 {:.1} ms",
        ms(percentile(&mut ns, 50.0)),
        ms(percentile(&mut ns, 99.0))
    );
}
