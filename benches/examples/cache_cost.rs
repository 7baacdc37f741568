//! What the local cache (`LiveOptions::cache`) costs at `N` providers: a burst of `C`
//! provider changes over `S` seconds (one provider replaced each time, the list handed
//! over as a registry source hands it: shared parsed URLs), applied through
//! `LiveChain::watch` with the cache off and on. Printed: the median and 99th percentile
//! of the time from a change sent to its applied report, the files written during the
//! burst (each write is a rename: a new inode), then one write and one read of the file
//! alone, and its size.
//!
//! Run: `cargo run --release -p routechain-benches --example cache_cost -- [N] [C] [S]`
//! (default 100000 2000 5).

use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use routechain::core::{Snapshot, Url};
use routechain::live::{
    CacheOptions, LiveChain, LiveOptions, ProviderText, Report, ServiceKey, Source, SourceError,
    SourceHandle, Update, UpdateSender, cache,
};
use routechain::rules::ChainFile;
use routechain_testkit as testkit;

/// A source whose updates `main` sends by hand.
struct Manual(Arc<Mutex<Option<UpdateSender>>>);

impl Source for Manual {
    fn name(&self) -> &str {
        "zookeeper"
    }
    fn start(self: Box<Self>, tx: UpdateSender) -> Result<SourceHandle, SourceError> {
        *self.0.lock().unwrap() = Some(tx);
        let slot = self.0.clone();
        Ok(SourceHandle::new(
            move || drop(slot.lock().unwrap().take()),
            std::thread::spawn(|| {}),
        ))
    }
}

fn percentile(v: &mut [Duration], p: f64) -> f64 {
    v.sort();
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i].as_secs_f64() * 1e3
}

fn burst(n: usize, urls: &[Url], changes: usize, over: Duration, dir: Option<&std::path::Path>) {
    let chain = testkit::full_chain_yaml();
    let file = ChainFile::parse("cache_cost.yaml", &chain, None).expect("the chain parses");
    let options = LiveOptions {
        cache: dir.map(CacheOptions::new),
        ..LiveOptions::default()
    };
    let live = Arc::new(
        LiveChain::with_providers(
            file,
            routechain::registry(),
            options,
            Snapshot::new(1, urls[..n].to_vec()),
        )
        .expect("the chain builds"),
    );
    let (done_tx, done) = mpsc::channel::<Instant>();
    let slot = Arc::default();
    let watching = live
        .watch(Box::new(Manual(Arc::clone(&slot))), move |r| {
            if matches!(r, Report::Applied { .. }) {
                let _ = done_tx.send(Instant::now());
            }
        })
        .expect("watch");
    let tx = slot.lock().unwrap().clone().expect("started");
    let path = dir.map(|d| CacheOptions::new(d).path_for(&ServiceKey::parse(testkit::SERVICE)));
    // The files written: each write renames a new file over the name.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let (path, stop) = (path.clone(), stop.clone());
        std::thread::spawn(move || {
            use std::os::unix::fs::MetadataExt;
            let mut seen = std::collections::HashSet::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if let Some(m) = path.as_ref().and_then(|p| std::fs::metadata(p).ok()) {
                    seen.insert((m.ino(), m.mtime_nsec()));
                }
                std::thread::sleep(Duration::from_micros(500));
            }
            seen.len()
        })
    };
    let list = |k: usize| -> Vec<Url> {
        let mut v = urls[..n - 1].to_vec();
        v.push(urls[n - 1 + k].clone());
        v
    };
    let pace = over / changes as u32;
    let start = Instant::now();
    let mut latencies = Vec::with_capacity(changes);
    let mut sent = Vec::with_capacity(changes);
    for k in 1..=changes {
        let due = start + pace * k as u32;
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let update = Update::Providers {
            origin: "zookeeper:/dubbo/providers".into(),
            text: ProviderText::Parsed {
                urls: list(k),
                skipped: Vec::new(),
            },
        };
        sent.push(Instant::now());
        tx.send(update).expect("send");
        while let Ok(at) = done.try_recv() {
            latencies.push(at - sent[latencies.len()]);
        }
    }
    while latencies.len() < changes {
        let at = done.recv().expect("applied");
        latencies.push(at - sent[latencies.len()]);
    }
    let took = start.elapsed();
    drop(tx);
    drop(watching);
    std::thread::sleep(Duration::from_millis(50));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let writes = watcher.join().unwrap();
    println!(
        "cache {:<3}: {changes} changes in {:.2} s; send to applied: median {:.2} ms, p99 {:.2} ms; files written: {}",
        if dir.is_some() { "on" } else { "off" },
        took.as_secs_f64(),
        percentile(&mut latencies, 0.5),
        percentile(&mut latencies, 0.99),
        if dir.is_some() {
            writes.to_string()
        } else {
            "-".into()
        }
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let n: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let changes: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(2000);
    let secs: f64 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(5.0);
    let urls = testkit::providers(n + changes + 1, 7);
    let dir = std::env::temp_dir().join(format!("routechain-cache-cost-{}", std::process::id()));
    println!("at {n} providers, {changes} changes over {secs} s:");
    burst(n, &urls, changes, Duration::from_secs_f64(secs), None);
    burst(n, &urls, changes, Duration::from_secs_f64(secs), Some(&dir));

    // One write and one read of the file alone (the writer thread's work per write).
    let path = dir.join("alone.cache");
    let mut writes = Vec::new();
    let mut reads = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        cache::write(&path, "/com.foo.BarService:", 0, &urls[..n], &[]).expect("write");
        writes.push(t.elapsed());
        let t = Instant::now();
        let read = cache::read(&path, "/com.foo.BarService:").expect("read");
        reads.push(t.elapsed());
        assert_eq!(read.map(|c| c.providers.len()), Some(n));
    }
    let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    println!(
        "one write (render, checksum, sync, rename): median {:.1} ms; one read (checksum, parse): median {:.1} ms; file {:.1} MB",
        percentile(&mut writes, 0.5),
        percentile(&mut reads, 0.5),
        size as f64 / 1e6
    );
    let _ = std::fs::remove_dir_all(&dir);
}
