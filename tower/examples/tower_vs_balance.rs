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
//! balanced channel. It also gives the CPU time the client threads (client, layer, tonic,
//! hyper, their connection tasks) and the server threads spent per call, read from
//! `/proc/self/task/*/schedstat` (Linux): on a shared machine the least disturbed figure.
//! On a machine busy with other work, running it under a real-time policy (`chrt -f 10`, as
//! root) gives its two runtime threads whole cores, as on an idle machine: the busy
//! machine's other work otherwise batches the calls differently (more requests per write).
//!
//! `--profile SIDE --calls N` makes N calls on one side after a warm-up of 2,000 (no
//! timing), and prints what the client and server threads spent per call: CPU time (user
//! and kernel), context switches and write system calls (`/proc/self/task/*`);
//! `examples/memcount.c` (its header has the commands) counts the bytes the threads copy per
//! call, which instruction counts do not show. Instructions per call =
//! (Ir(N) − Ir(0)) / N, per thread with `--separate-threads=yes`: the files `-02` (the
//! server runtime's thread) and `-03` (the client runtime's: the client, the layer or
//! tonic's channel, hyper and its connection tasks); the client's is what the layer costs
//! a caller:
//!
//! ```text
//! cargo build --release -p routechain-tower --example tower_vs_balance
//! for side in balanced full empty; do for n in 0 20000; do
//!   valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file=cg.$side.$n \
//!     target/release/examples/tower_vs_balance --profile $side --calls $n >/dev/null 2>&1
//! done; grep -h '^totals:' cg.$side.0-03 cg.$side.20000-03; done
//! ```
#![allow(missing_docs)]

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::Duration;

use common::versus::{self, Limit, Run};

/// A side of the comparison.
#[derive(Clone, Copy)]
enum Side {
    Balanced,
    Full,
    Empty,
}

const SIDES: [Side; 3] = [Side::Balanced, Side::Full, Side::Empty];

impl Side {
    fn parse(s: &str) -> Option<Side> {
        Some(match s {
            "balanced" => Side::Balanced,
            "full" => Side::Full,
            "empty" => Side::Empty,
            _ => return None,
        })
    }

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
    profile: Option<Side>,
    calls: u64,
}

fn options() -> Options {
    let mut o = Options {
        rounds: 5,
        seconds: 2.0,
        warmup: 1.0,
        concurrency: 64,
        client_threads: 1,
        server_threads: 1,
        profile: None,
        calls: 0,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: tower_vs_balance [--rounds N] [--seconds S] [--warmup S] \
                 [--concurrency N] [--client-threads N] [--server-threads N] \
                 [--profile balanced|full|empty --calls N]";
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
            "--profile" => Side::parse(value).map(|v| o.profile = Some(v)).is_some(),
            "--calls" => value.parse().map(|v| o.calls = v).is_ok(),
            _ => false,
        };
        if !ok {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    }
    o
}

/// Thread names: the CPU time of each runtime's threads is read by name.
const CLIENT: &str = "vs-client";
const SERVER: &str = "vs-server";

fn runtime(threads: usize, name: &str) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads.max(1))
        .thread_name(name)
        .enable_all()
        .build()
        .expect("a runtime")
}

fn main() {
    let o = options();
    let servers = runtime(o.server_threads, SERVER);
    let clients = runtime(o.client_threads, CLIENT);
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
    let run = |side: Side, limit: Limit| -> Run {
        let duration = limit;
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

    if let Some(side) = o.profile {
        run(side, Limit::Calls(2_000));
        let (client, server) = (Threads::of(CLIENT), Threads::of(SERVER));
        let r = run(side, Limit::Calls(o.calls));
        let (client, server) = (Threads::of(CLIENT) - client, Threads::of(SERVER) - server);
        println!("{}: {} calls", side.name(), r.calls);
        for (name, t) in [("client", client), ("server", server)] {
            let per = |v: f64| v / r.calls.max(1) as f64;
            println!(
                "  {name}: CPU {:.2} µs/call (user {:.2}, sys {:.2}), context switches \
                 {:.3}/call ({:.3} voluntary), scheduled {:.3}/call, \
                 read/write calls {:.3}/{:.3} per call",
                per(t.cpu_ns as f64 / 1e3),
                per(t.user_ticks as f64 * 1e6 / ticks_per_second()),
                per(t.sys_ticks as f64 * 1e6 / ticks_per_second()),
                per((t.voluntary + t.involuntary) as f64),
                per(t.voluntary as f64),
                per(t.slices as f64),
                per(t.reads as f64),
                per(t.writes as f64),
            );
        }
        return;
    }

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
        run(side, Limit::Time(Duration::from_secs_f64(o.warmup)));
    }
    // results[side][round]: the run, and the client's and servers' CPU time per call.
    let mut results: Vec<Vec<(Run, f64, f64)>> = vec![Vec::new(); SIDES.len()];
    for round in 0..o.rounds {
        let order: Vec<usize> = if round % 2 == 0 {
            (0..SIDES.len()).collect()
        } else {
            (0..SIDES.len()).rev().collect()
        };
        for s in order {
            let (client, server) = (cpu(CLIENT), cpu(SERVER));
            let r = run(SIDES[s], Limit::Time(Duration::from_secs_f64(o.seconds)));
            let per_call = |d: Duration| micros(d) / r.calls as f64;
            let client = per_call(cpu(CLIENT) - client);
            let server = per_call(cpu(SERVER) - server);
            eprintln!(
                "round {round} {:<30} {:>7.0} calls/s  p50 {:>7.1} µs  p99 {:>7.1} µs  \
                 CPU/call client {client:>5.1} µs server {server:>5.1} µs",
                SIDES[s].name(),
                r.throughput(),
                micros(r.quantile(0.5)),
                micros(r.quantile(0.99)),
            );
            results[s].push((r, client, server));
        }
    }

    println!(
        "| {} in flight, {} rounds of {} s | calls/s | p50 µs | p99 µs | client CPU µs/call | server CPU µs/call | calls/s ÷ balanced | p99 ÷ balanced | client CPU ÷ balanced |",
        o.concurrency, o.rounds, o.seconds
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    let base = &results[0];
    for (s, side) in SIDES.iter().enumerate() {
        let runs = &results[s];
        let column = |f: &dyn Fn(&(Run, f64, f64)) -> f64| runs.iter().map(f).collect::<Vec<_>>();
        let ratio = |f: &dyn Fn(&(Run, f64, f64)) -> f64| {
            median(
                &runs
                    .iter()
                    .zip(base)
                    .map(|(r, b)| f(r) / f(b))
                    .collect::<Vec<_>>(),
            )
        };
        let tput = |r: &(Run, f64, f64)| r.0.throughput();
        let p50 = |r: &(Run, f64, f64)| micros(r.0.quantile(0.5));
        let p99 = |r: &(Run, f64, f64)| micros(r.0.quantile(0.99));
        let client = |r: &(Run, f64, f64)| r.1;
        let server = |r: &(Run, f64, f64)| r.2;
        println!(
            "| {} | {} | {} | {} | {} | {} | {:.3} | {:.3} | {:.3} |",
            side.name(),
            spread(&column(&tput), 0),
            spread(&column(&p50), 0),
            spread(&column(&p99), 0),
            spread(&column(&client), 1),
            spread(&column(&server), 1),
            ratio(&tput),
            ratio(&p99),
            ratio(&client),
        );
    }
    println!("(median (min–max) over the rounds; ratios: the median of the per-round ratios)");
}

/// The CPU time spent so far by this process's threads named `name` (Linux's
/// `/proc/self/task/*/schedstat`; zero elsewhere).
fn cpu(name: &str) -> Duration {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Duration::ZERO;
    };
    let mut total = 0u64;
    for task in tasks.flatten() {
        let path = task.path();
        let named = std::fs::read_to_string(path.join("comm"))
            .is_ok_and(|comm| comm.trim_end().starts_with(name));
        if !named {
            continue;
        }
        total += std::fs::read_to_string(path.join("schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
            .unwrap_or(0);
    }
    Duration::from_nanos(total)
}

/// What the threads named `name` spent so far (Linux's `/proc/self/task/*`; zeros
/// elsewhere): CPU time (user and kernel), its user/kernel split in clock ticks, context
/// switches, and the times they were scheduled in.
#[derive(Debug, Clone, Copy, Default)]
struct Threads {
    cpu_ns: u64,
    slices: u64,
    user_ticks: u64,
    sys_ticks: u64,
    voluntary: u64,
    involuntary: u64,
    reads: u64,
    writes: u64,
}

impl Threads {
    fn of(name: &str) -> Threads {
        let mut t = Threads::default();
        let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
            return t;
        };
        for task in tasks.flatten() {
            let path = task.path();
            let read = |file: &str| std::fs::read_to_string(path.join(file)).unwrap_or_default();
            if !read("comm").trim_end().starts_with(name) {
                continue;
            }
            let number = |s: Option<&str>| s.and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
            let schedstat = read("schedstat");
            let mut fields = schedstat.split_whitespace();
            t.cpu_ns += number(fields.next());
            t.slices += number(fields.nth(1));
            // `stat`: fields 14 and 15 (utime, stime), counted after the `(comm)` field.
            let stat = read("stat");
            let mut after = stat
                .rsplit_once(')')
                .map_or("", |(_, r)| r)
                .split_whitespace();
            t.user_ticks += number(after.nth(11));
            t.sys_ticks += number(after.next());
            for line in read("io").lines() {
                if let Some(v) = line.strip_prefix("syscr:") {
                    t.reads += number(Some(v.trim()));
                } else if let Some(v) = line.strip_prefix("syscw:") {
                    t.writes += number(Some(v.trim()));
                }
            }
            for line in read("status").lines() {
                if let Some(v) = line.strip_prefix("voluntary_ctxt_switches:") {
                    t.voluntary += number(Some(v.trim()));
                } else if let Some(v) = line.strip_prefix("nonvoluntary_ctxt_switches:") {
                    t.involuntary += number(Some(v.trim()));
                }
            }
        }
        t
    }
}

impl std::ops::Sub for Threads {
    type Output = Threads;

    fn sub(self, o: Threads) -> Threads {
        Threads {
            cpu_ns: self.cpu_ns - o.cpu_ns,
            slices: self.slices - o.slices,
            user_ticks: self.user_ticks - o.user_ticks,
            sys_ticks: self.sys_ticks - o.sys_ticks,
            voluntary: self.voluntary - o.voluntary,
            involuntary: self.involuntary - o.involuntary,
            reads: self.reads - o.reads,
            writes: self.writes - o.writes,
        }
    }
}

/// Clock ticks per second of `/proc/*/stat` (`USER_HZ`: 100 on Linux).
fn ticks_per_second() -> f64 {
    100.0
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
