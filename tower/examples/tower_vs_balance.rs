//! The routechain layer side by side with tonic's own balanced channel
//! (`Channel::balance_list`, tower's p2c), on the same sixteen real tonic providers on
//! 127.0.0.1 and the same closed-loop load (see `tests/common/versus.rs` for the providers,
//! the chain and the clients):
//!
//! ```text
//! cargo run --release -p routechain-tower --example tower_vs_balance
//! cargo run --release -p routechain-tower --example tower_vs_balance -- \
//!   --rounds 7 --seconds 3 --concurrency 64 --client-threads 1 --server-threads 1
//! ```
//!
//! The providers run on a runtime of their own, the clients on another. After a warm-up of
//! every side, the sides run interleaved, round after round (the order reversed every other
//! round), so a change in the machine's load falls on all of them; the table gives each
//! side's median and range over the rounds, and the median of the per-round ratios to the
//! balanced channel.
#![allow(missing_docs)]

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::Duration;

use common::versus::{self, Run};

/// A side of the comparison.
#[derive(Clone, Copy)]
enum Side {
    Balanced,
    Full,
    Empty,
}

const SIDES: [Side; 3] = [Side::Balanced, Side::Full, Side::Empty];

impl Side {
    fn name(self) -> &'static str {
        match self {
            Side::Balanced => "tonic balance_list (p2c)",
            Side::Full => "routechain layer, full chain",
            Side::Empty => "routechain layer, empty chain",
        }
    }
}

struct Options {
    rounds: usize,
    seconds: f64,
    warmup: f64,
    concurrency: usize,
    client_threads: usize,
    server_threads: usize,
}

fn options() -> Options {
    let mut o = Options {
        rounds: 5,
        seconds: 2.0,
        warmup: 1.0,
        concurrency: 64,
        client_threads: 1,
        server_threads: 1,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: tower_vs_balance [--rounds N] [--seconds S] [--warmup S] \
                 [--concurrency N] [--client-threads N] [--server-threads N]";
    for pair in args.chunks(2) {
        let [flag, value] = pair else {
            eprintln!("{usage}");
            std::process::exit(2);
        };
        let ok = match flag.as_str() {
            "--rounds" => value.parse().map(|v| o.rounds = v).is_ok(),
            "--seconds" => value.parse().map(|v| o.seconds = v).is_ok(),
            "--warmup" => value.parse().map(|v| o.warmup = v).is_ok(),
            "--concurrency" => value.parse().map(|v| o.concurrency = v).is_ok(),
            "--client-threads" => value.parse().map(|v| o.client_threads = v).is_ok(),
            "--server-threads" => value.parse().map(|v| o.server_threads = v).is_ok(),
            _ => false,
        };
        if !ok {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    }
    o
}

fn runtime(threads: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads.max(1))
        .enable_all()
        .build()
        .expect("a runtime")
}

fn main() {
    let o = options();
    let servers = runtime(o.server_threads);
    let clients = runtime(o.client_threads);
    let providers = servers.block_on(versus::start_providers());
    let routed = &providers[versus::ROUTED];

    let full_chain = versus::live(versus::FULL_CHAIN, &providers);
    let empty_chain = versus::live(versus::EMPTY_CHAIN, routed);
    // The balanced channel spawns its worker on the runtime it is made in.
    let (balanced, full, empty) = clients.block_on(async {
        (
            versus::balanced(routed),
            versus::layered(&full_chain),
            versus::layered(&empty_chain),
        )
    });
    let run = |side: Side, seconds: f64| -> Run {
        let duration = Duration::from_secs_f64(seconds);
        let run = match side {
            Side::Balanced => {
                let client = balanced.clone();
                clients.block_on(versus::drive(o.concurrency, duration, move || {
                    let mut c = client.clone();
                    async move { c.say_hello(versus::request(None)).await.is_ok() }
                }))
            }
            Side::Full => {
                let client = full.clone();
                clients.block_on(versus::drive(o.concurrency, duration, move || {
                    let mut c = client.clone();
                    async move { c.say_hello(versus::request(None)).await.is_ok() }
                }))
            }
            Side::Empty => {
                let client = empty.clone();
                clients.block_on(versus::drive(o.concurrency, duration, move || {
                    let mut c = client.clone();
                    async move { c.say_hello(versus::request(None)).await.is_ok() }
                }))
            }
        };
        assert_eq!(run.errors, 0, "{}: calls failed", side.name());
        run
    };

    eprintln!(
        "{} providers ({} routed), {} in flight, {} client / {} server threads, \
         warm-up {}s per side, {} rounds of {}s per side",
        providers.len(),
        routed.len(),
        o.concurrency,
        o.client_threads,
        o.server_threads,
        o.warmup,
        o.rounds,
        o.seconds
    );
    for side in SIDES {
        run(side, o.warmup);
    }
    // results[side][round]
    let mut results: Vec<Vec<Run>> = vec![Vec::new(); SIDES.len()];
    for round in 0..o.rounds {
        let order: Vec<usize> = if round % 2 == 0 {
            (0..SIDES.len()).collect()
        } else {
            (0..SIDES.len()).rev().collect()
        };
        for s in order {
            let r = run(SIDES[s], o.seconds);
            eprintln!(
                "round {round} {:<30} {:>9.0} calls/s  p50 {:>7.1} µs  p99 {:>7.1} µs",
                SIDES[s].name(),
                r.throughput(),
                micros(r.quantile(0.5)),
                micros(r.quantile(0.99)),
            );
            results[s].push(r);
        }
    }

    println!(
        "| {} in flight, {} rounds of {} s | calls/s median (range) | p50 µs median (range) | p99 µs median (range) | calls/s ÷ balanced | p99 ÷ balanced |",
        o.concurrency, o.rounds, o.seconds
    );
    println!("|---|---:|---:|---:|---:|---:|");
    let base = &results[0];
    for (s, side) in SIDES.iter().enumerate() {
        let runs = &results[s];
        let tput: Vec<f64> = runs.iter().map(Run::throughput).collect();
        let p50: Vec<f64> = runs.iter().map(|r| micros(r.quantile(0.5))).collect();
        let p99: Vec<f64> = runs.iter().map(|r| micros(r.quantile(0.99))).collect();
        let tput_ratio: Vec<f64> = runs
            .iter()
            .zip(base)
            .map(|(r, b)| r.throughput() / b.throughput())
            .collect();
        let p99_ratio: Vec<f64> = runs
            .iter()
            .zip(base)
            .map(|(r, b)| micros(r.quantile(0.99)) / micros(b.quantile(0.99)))
            .collect();
        println!(
            "| {} | {} | {} | {} | {:.3} | {:.3} |",
            side.name(),
            spread(&tput, 0),
            spread(&p50, 0),
            spread(&p99, 0),
            median(&tput_ratio),
            median(&p99_ratio),
        );
    }
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// `median (min–max)`.
fn spread(values: &[f64], decimals: usize) -> String {
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!(
        "{:.d$} ({:.d$}–{:.d$})",
        median(values),
        min,
        max,
        d = decimals
    )
}
