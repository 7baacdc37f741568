//! The floor of a text push at `N` providers: reading and hashing `N` provider URL texts
//! (~330 characters each, 33 MB at 100,000) as the live chain's text cache does, on one
//! thread and on two. Each figure is taken over a fresh copy of the texts (not in the
//! cache, as a pushed list is not), median of `runs`.
//!
//! Run: `cargo run --release -p routechain-benches --example hash_floor -- 100000 [runs]`.

use std::hint::black_box;
use std::time::Instant;

use routechain_testkit as testkit;

fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn secret() -> [u8; 192] {
    let mut s = [0u8; 192];
    for (i, b) in s.iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(151).wrapping_add(7);
    }
    s
}

fn time(name: &str, runs: usize, texts: &[String], f: impl Fn(&[String]) -> u64) {
    let mut walls = Vec::new();
    let mut cpus = Vec::new();
    for _ in 0..runs {
        // A fresh copy: the pushed list comes from elsewhere, not from the cache.
        let copy = texts.to_vec();
        let flush: Vec<u8> = vec![1; 64 << 20];
        black_box(flush.iter().map(|&b| b as u64).sum::<u64>());
        drop(flush);
        let (c0, t0) = (thread_cpu_ns(), Instant::now());
        black_box(f(&copy));
        walls.push(t0.elapsed().as_secs_f64() * 1e3);
        cpus.push((thread_cpu_ns() - c0) as f64 / 1e6);
    }
    walls.sort_by(f64::total_cmp);
    cpus.sort_by(f64::total_cmp);
    println!(
        "{name}: wall median {:.3} ms (min {:.3}), this thread's CPU median {:.3} ms",
        walls[runs / 2],
        walls[0],
        cpus[runs / 2]
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let n: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let runs: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(7);
    let texts: Vec<String> = testkit::provider_lines(n, 7)
        .lines()
        .map(str::to_string)
        .collect();
    let bytes: usize = texts.iter().map(String::len).sum();
    println!("{n} texts, {bytes} bytes");
    let secret = secret();
    time("read every byte (xor of the bytes)", runs, &texts, |t| {
        t.iter().map(|s| xor_bytes(s.as_bytes()) as u64).sum()
    });
    time("xxh3-128 with secret, one thread", runs, &texts, |t| {
        t.iter()
            .map(|s| xxhash_rust::xxh3::xxh3_128_with_secret(s.as_bytes(), &secret) as u64)
            .fold(0, u64::wrapping_add)
    });
    time("xxh3-64 with secret, one thread", runs, &texts, |t| {
        t.iter()
            .map(|s| xxhash_rust::xxh3::xxh3_64_with_secret(s.as_bytes(), &secret))
            .fold(0, u64::wrapping_add)
    });
    time("xxh3-128 with secret, two threads", runs, &texts, |t| {
        let (a, b) = t.split_at(t.len() / 2);
        let h = |part: &[String]| {
            part.iter()
                .map(|s| xxhash_rust::xxh3::xxh3_128_with_secret(s.as_bytes(), &secret) as u64)
                .fold(0, u64::wrapping_add)
        };
        std::thread::scope(|s| {
            let other = s.spawn(|| h(b));
            h(a).wrapping_add(other.join().unwrap_or(0))
        })
    });
    // The same texts again, now in the cache (the first copy was just read).
    let warm = texts.clone();
    let (c0, t0) = (thread_cpu_ns(), Instant::now());
    let mut sum = 0u64;
    for _ in 0..5 {
        sum = sum.wrapping_add(
            warm.iter()
                .map(|s| xxhash_rust::xxh3::xxh3_128_with_secret(s.as_bytes(), &secret) as u64)
                .fold(0, u64::wrapping_add),
        );
    }
    black_box(sum);
    println!(
        "xxh3-128 with secret, texts read 5 times in a row: {:.3} ms wall, {:.3} ms CPU per pass",
        t0.elapsed().as_secs_f64() * 1e3 / 5.0,
        (thread_cpu_ns() - c0) as f64 / 5e6
    );
}

/// Reads every byte (vectorized).
fn xor_bytes(b: &[u8]) -> u8 {
    b.iter().fold(0, |a, &x| a ^ x)
}
