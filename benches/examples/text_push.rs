//! One provider added, then removed, at `N` providers, the whole list pushed as `N` URL
//! texts (`ProviderText::Urls`, or `Lines` with `lines`): each push timed alone, in wall
//! time and in the applying thread's CPU time (`/proc/thread-self/schedstat`), so that a
//! figure taken on the shared machine can be read without the other processes' load.
//!
//! Unlike `update_cost`, which applies its pushes back to back, each push here is applied
//! after a pause (`--pause-ms`, default 100 ms) in which the process's drop thread frees
//! what the previous one left (the pushed strings, the replaced state): a source pushes a
//! list when a provider comes or goes, not continuously. `--pause-ms 0` measures back to
//! back as `update_cost` does.
//!
//! The push itself is in [`push_once`] (not inlined), so that
//! `valgrind --tool=callgrind --toggle-collect='*text_push*push_once*'` counts the pushes only.
//!
//! Run: `cargo run --release -p routechain-benches --example text_push -- 100000 [urls|lines]
//! [full|bare] [runs] [--pause-ms P]`.

use std::time::{Duration, Instant};

use routechain::core::Snapshot;
use routechain::live::{LiveChain, ProviderText, Update};
use routechain_testkit as testkit;

/// This thread's CPU time so far and its time spent runnable but waiting for a processor,
/// in nanoseconds (`/proc/thread-self/schedstat`'s first two fields); 0 where they are not
/// available.
fn thread_cpu_ns() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    let mut fields = stat.split_whitespace().map(|f| f.parse().unwrap_or(0));
    (fields.next().unwrap_or(0), fields.next().unwrap_or(0))
}

/// Applies one push; what callgrind is told to count.
#[inline(never)]
fn push_once(live: &LiveChain, update: Update) -> Vec<routechain::live::Report> {
    live.apply(update)
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut pause = Duration::from_millis(100);
    if let Some(i) = args.iter().position(|a| a == "--pause-ms") {
        let ms: u64 = args
            .get(i + 1)
            .and_then(|a| a.parse().ok())
            .expect("--pause-ms takes a number");
        pause = Duration::from_millis(ms);
        args.drain(i..i + 2);
    }
    let n: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let lines_form = args.get(1).is_some_and(|a| a == "lines");
    let bare = args.get(2).is_some_and(|a| a == "bare");
    let runs: usize = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(10);
    let seed = 7;
    let lines = testkit::provider_lines(n + 1, seed);
    let urls: Vec<String> = lines.lines().map(str::to_string).collect();
    let snapshot = Snapshot::new(1, testkit::providers(n, seed));
    let live = if bare {
        testkit::live_bare_chain(snapshot)
    } else {
        testkit::live_full_chain("text_push.chain.yaml", snapshot)
    };
    let push = |k: usize| Update::Providers {
        origin: "text_push".into(),
        text: if lines_form {
            let mut s = String::with_capacity(k * 340);
            for u in &urls[..k] {
                s.push_str(u);
                s.push('\n');
            }
            ProviderText::Lines(s)
        } else {
            ProviderText::Urls(urls[..k].to_vec())
        },
    };
    // Warm: the live chain's text cache learns the list.
    live.apply(push(n));
    let mut walls = Vec::with_capacity(runs);
    let mut cpus = Vec::with_capacity(runs);
    let mut waits = Vec::with_capacity(runs);
    let mut size = n;
    let mut process = 0.0;
    for i in 0..runs {
        size = if size == n { n + 1 } else { n };
        // Built before the clock starts (a source hands over a list it holds), then the
        // pause lets the drop thread finish with the previous push.
        let update = push(size);
        std::thread::sleep(pause);
        let p0 = testkit::cpu_seconds();
        let (c0, t0) = (thread_cpu_ns(), Instant::now());
        let reports = push_once(&live, update);
        let c1 = thread_cpu_ns();
        let (wall, cpu, waited) = (t0.elapsed(), c1.0 - c0.0, c1.1 - c0.1);
        assert_eq!(live.service().state().snapshot().len(), size, "{reports:?}");
        drop(reports);
        // The process's CPU over the push and what it left to free (10 ms ticks: summed).
        std::thread::sleep(pause);
        if i > 0 || runs == 1 {
            walls.push(wall.as_secs_f64() * 1e3);
            cpus.push(cpu as f64 / 1e6);
            waits.push(waited as f64 / 1e6);
            process += testkit::cpu_seconds() - p0;
        }
    }
    walls.sort_by(f64::total_cmp);
    cpus.sort_by(f64::total_cmp);
    waits.sort_by(f64::total_cmp);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "text push ({}, {}, pause {} ms) at {n}: wall median {:.3} ms (min {:.3}, max {:.3}), \
         applying thread CPU median {:.3} ms (min {:.3}), waiting for a \
         processor median {:.3} ms, over {}; process CPU (all threads, \
         freeing included) {:.1} ms per push; load {}",
        if lines_form { "lines" } else { "urls" },
        if bare { "no router" } else { "full chain" },
        pause.as_millis(),
        walls[walls.len() / 2],
        walls[0],
        walls[walls.len() - 1],
        cpus[cpus.len() / 2],
        cpus[0],
        waits[waits.len() / 2],
        walls.len(),
        process * 1e3 / walls.len() as f64,
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" "),
    );
}
