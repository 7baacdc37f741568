//! `watch`'s local cache, through the real binary against a real ZooKeeper: written while
//! it follows the registry, served at a start while ZooKeeper is down (and said so),
//! replaced by the registry's first read once it is back; with neither registry nor cache
//! it says it has nothing to serve; a corrupt file is ignored with the reason.

mod common;

use routechain_testkit as support;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{Running, Scratch, routechain, stdout};

const SERVICE: &str = "com.acme.CacheService";

fn routed(w: &Running) -> Vec<String> {
    let mut out: Vec<String> = w.next_json()["providers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["address"].as_str().unwrap().to_string())
        .collect();
    out.sort();
    out
}

fn zk(args: &[&str]) {
    let out = routechain(&[&["zk"][..], args].concat());
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn register(addr: &str, k: u32) {
    zk(&[
        "register",
        "--persistent",
        "--zookeeper",
        addr,
        "--service",
        SERVICE,
        &format!("dubbo://10.0.0.{k}:20880/{SERVICE}?side=provider"),
    ]);
}

/// Waits until the cache file in `dir` holds `needle`.
fn cached(dir: &Path, needle: &str) {
    let start = Instant::now();
    loop {
        let text = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".cache"))
            .filter_map(|e| std::fs::read_to_string(e.path()).ok())
            .collect::<String>();
        if text.contains(needle) {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the cache never held {needle:?}: {text}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn watch_serves_its_cache_while_zookeeper_is_down_and_the_registry_replaces_it() {
    let mut server = support::zookeeper::ZooKeeper::start("cli-cache");
    let addr = server.address();
    let s = Scratch::new("cache");
    let cache_dir = s.0.join("cache");
    let cache = cache_dir.to_str().unwrap();
    register(&addr, 1);
    register(&addr, 2);
    let rule = s.write("rule.yaml", "conditions: ['=> host = 10.0.0.2']\n");
    let key = format!("{SERVICE}::");
    let put = [
        "put-rule",
        "--zookeeper",
        &addr,
        "--key",
        &key,
        "--type",
        "condition",
        rule.to_str().unwrap(),
    ];
    zk(&put);
    let chain = s.write(
        "chain.yaml",
        &format!("service: {SERVICE}\nrouters:\n  - type: condition\n"),
    );
    let request = s.write("request.json", "{}");
    let args = [
        "watch",
        "--chain",
        chain.to_str().unwrap(),
        "--zookeeper",
        &addr,
        "--request",
        request.to_str().unwrap(),
        "--cache-dir",
        cache,
    ];

    // 1. Following the registry: the state is served and written to the cache.
    let w = Running::spawn(&args);
    let line = w.stderr_with("routechain watch: cache: ");
    // One file per reference and registry, named in the line.
    let file = std::path::PathBuf::from(
        line.trim_start_matches("routechain watch: cache: ")
            .split("; ")
            .next()
            .unwrap(),
    );
    assert!(file.starts_with(&cache_dir), "{line}");
    let name = file.file_name().unwrap().to_str().unwrap().to_string();
    assert!(
        name.starts_with("_com.acme.CacheService_-") && name.ends_with(".cache"),
        "{line}"
    );
    assert_eq!(routed(&w), ["10.0.0.2:20880"]);
    cached(&cache_dir, "conditions: ['=> host = 10.0.0.2']");
    cached(&cache_dir, "dubbo://10.0.0.2:20880/");
    drop(w);

    // The registry moves on while no watch runs: a third provider, the rule deleted.
    register(&addr, 3);
    zk(&[
        "delete-rule",
        "--zookeeper",
        &addr,
        "--key",
        &key,
        "--type",
        "condition",
    ]);
    server.stop();

    // 2. ZooKeeper down at start: the cache serves, and watch says so.
    let w = Running::spawn(&args);
    let seen = w.stderr_until("from the cache written at");
    let line = seen.last().unwrap();
    assert!(
        line.contains(
            "routechain watch: cache: serving 2 provider(s) from the cache written at 20"
        ),
        "{line}"
    );
    assert!(line.contains(&file.display().to_string()), "{line}");
    assert!(
        seen.iter()
            .any(|l| l.contains("cannot connect to ZooKeeper")),
        "{seen:#?}"
    );
    assert_eq!(routed(&w), ["10.0.0.2:20880"], "routed by the cached rule");

    // 3. ZooKeeper back: its first read replaces the cache, the deleted rule with it.
    server.resume();
    w.stderr_with("the sources' first state replaces the cache");
    assert_eq!(
        routed(&w),
        ["10.0.0.1:20880", "10.0.0.2:20880", "10.0.0.3:20880"]
    );
    cached(&cache_dir, "dubbo://10.0.0.3:20880/");
    drop(w);
    server.stop();

    // 4. A corrupt cache is ignored, with the reason; so nothing is served.
    let mut bytes = std::fs::read(&file).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x01;
    std::fs::write(&file, bytes).unwrap();
    let w = Running::spawn(&args);
    let line = w.stderr_with("nothing to serve");
    assert!(
        line.contains("the cache was ignored") && line.contains("checksum mismatch"),
        "{line}"
    );
    drop(w);

    // 5. Neither registry nor cache: nothing to serve, said once; no route printed.
    let empty = s.0.join("empty");
    let mut neither = args.to_vec();
    let last = neither.len() - 1;
    let empty_dir = empty.to_str().unwrap();
    neither[last] = empty_dir;
    let w = Running::spawn(&neither);
    let line = w.stderr_with("routechain watch: cache: nothing to serve");
    assert!(
        line.contains("there is no cache at") && line.contains("routing nothing until they do"),
        "{line}"
    );
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !w.seen().iter().any(|l| l.contains("nothing to serve")),
        "said once"
    );
    drop(w);
    assert!(!empty.join(&name).exists());

    // `--no-cache`: no cache line, no file.
    let mut off = args[..args.len() - 2].to_vec();
    off.push("--no-cache");
    let w = Running::spawn(&off);
    let seen = w.stderr_until("cannot connect to ZooKeeper");
    assert!(
        !seen.iter().any(|l| l.contains("routechain watch: cache")),
        "{seen:#?}"
    );
    drop(w);
}

#[test]
fn watch_help_shows_the_cache_options() {
    let out = routechain(&["watch", "--help"]);
    let help = stdout(&out);
    assert!(help.contains("--cache-dir <DIR>"), "{help}");
    assert!(help.contains("~/.cache/routechain"), "{help}");
    assert!(help.contains("--no-cache"), "{help}");
    let out = routechain(&["watch", "--chain", "x", "--cache-dir", "d", "--no-cache"]);
    assert_eq!(out.status.code(), Some(2));
}
