//! CLI tests for registry addresses as Dubbo writes them, through the real binary against
//! real ZooKeeper servers: `watch --registry 'zookeeper://a|zookeeper://b'` merges two
//! registries' providers (an address in both once), reads the rules from the first alone,
//! keeps serving one registry's providers while the other is down, and holds back one
//! registry's empty list alone; `zk --registry` writes rules to the config center.

mod common;

use common::{Running, Scratch, assert_exit, routechain, stderr};
use routechain_testkit as support;

const SERVICE: &str = "com.acme.OrderService";

fn provider(n: u8) -> String {
    format!("dubbo://10.0.0.{n}:20880/{SERVICE}?side=provider&application=orders")
}

fn register(addr: &str, n: u8) {
    let out = routechain(&[
        "zk",
        "register",
        "--persistent",
        "--registry",
        addr,
        "--service",
        SERVICE,
        &provider(n),
    ]);
    assert_exit(&out, 0);
}

fn unregister(addr: &str, n: u8) {
    let out = routechain(&[
        "zk",
        "unregister",
        "--registry",
        addr,
        "--service",
        SERVICE,
        &provider(n),
    ]);
    assert_exit(&out, 0);
}

fn put_rule(addr: &str, rule: &std::path::Path) {
    let out = routechain(&[
        "registry",
        "put-rule",
        "--registry",
        addr,
        "--key",
        &format!("{SERVICE}::"),
        "--type",
        "condition",
        rule.to_str().unwrap(),
    ]);
    assert_exit(&out, 0);
}

/// The next routed result's provider hosts, sorted.
fn routed(w: &Running) -> Vec<String> {
    let v = w.next_json();
    let mut hosts: Vec<String> = v["providers"]
        .as_array()
        .unwrap_or_else(|| panic!("{v}"))
        .iter()
        .map(|p| p["address"].as_str().unwrap().to_string())
        .collect();
    hosts.sort();
    hosts
}

/// Routed results until one equals `want` (each applied change prints one).
fn routed_until(w: &Running, want: &[&str]) {
    let mut seen = Vec::new();
    for _ in 0..20 {
        let got = routed(w);
        if got == want {
            return;
        }
        seen.push(got);
    }
    panic!("never routed to {want:?}; saw {seen:?}");
}

fn rule(s: &Scratch, name: &str, condition: &str) -> std::path::PathBuf {
    s.write(
        name,
        &format!(
            "configVersion: v3.0\nscope: service\nkey: {SERVICE}\nenabled: true\nforce: true\n\
             conditions:\n  - '=> {condition}'\n"
        ),
    )
}

#[test]
fn two_registries_merge_rules_come_from_the_first_and_one_down_keeps_the_others() {
    let a = support::zookeeper::ZooKeeper::start("cli-several-a");
    let mut b = support::zookeeper::ZooKeeper::start("cli-several-b");
    let (addr_a, addr_b) = (a.address(), b.address());
    let s = Scratch::new("several-registries");
    register(&addr_a, 1);
    register(&addr_a, 2);
    register(&addr_b, 2);
    register(&addr_b, 3);
    // The config center (the first registry) leaves 10.0.0.1 out; the second registry's
    // rule, which would leave nothing, is not read.
    put_rule(&addr_a, &rule(&s, "a.yaml", "host != 10.0.0.1"));
    put_rule(&addr_b, &rule(&s, "b.yaml", "host = 10.9.9.9"));
    let chain = s.write(
        "chain.yaml",
        &format!("service: {SERVICE}\nrouters:\n  - type: condition\n"),
    );
    let request = s.write("request.json", "{}");
    let registry = format!("zookeeper://{addr_a} | zookeeper://{addr_b}");
    let w = Running::spawn(&[
        "watch",
        "--chain",
        chain.to_str().unwrap(),
        "--registry",
        &registry,
        "--request",
        request.to_str().unwrap(),
    ]);
    let start = w.stderr_until("and the chain file");
    assert_eq!(
        start[0],
        format!(
            "routechain watch: following 2 registries for {SERVICE} (group=, version=), their providers merged:"
        )
    );
    assert_eq!(start[1], format!("  zookeeper://{addr_a}; watching:"));
    let b_at = start
        .iter()
        .position(|l| *l == format!("  zookeeper://{addr_b}; watching:"))
        .unwrap_or_else(|| panic!("{start:#?}"));
    // The second registry is followed for its providers alone.
    assert_eq!(
        start[b_at + 1..start.len() - 1],
        [format!("    /dubbo/{SERVICE}/providers")],
        "{start:#?}"
    );
    // Merged: 10.0.0.2 (in both) once, 10.0.0.1 left out by the first registry's rule.
    routed_until(&w, &["10.0.0.2:20880", "10.0.0.3:20880"]);

    // The second registry goes down: its providers keep serving, and a change of the
    // first registry is applied meanwhile.
    b.stop();
    register(&addr_a, 4);
    routed_until(&w, &["10.0.0.2:20880", "10.0.0.3:20880", "10.0.0.4:20880"]);
    unregister(&addr_a, 2);
    unregister(&addr_a, 4);
    // 10.0.0.2 is still in the second registry's last list.
    routed_until(&w, &["10.0.0.2:20880", "10.0.0.3:20880"]);

    // Back, the second registry is read again, then empties: its empty list is held back
    // alone.
    b.resume();
    unregister(&addr_b, 3);
    routed_until(&w, &["10.0.0.2:20880"]);
    unregister(&addr_b, 2);
    w.stderr_with(&format!(
        "zookeeper://{addr_b}: held back an empty provider list from zookeeper:/dubbo/{SERVICE}/providers"
    ));
    // The first registry's changes still apply over the second's last provider.
    register(&addr_a, 5);
    routed_until(&w, &["10.0.0.2:20880", "10.0.0.5:20880"]);
    drop(a);
}

#[test]
fn a_preferred_registry_serves_alone_while_it_has_providers() {
    let a = support::zookeeper::ZooKeeper::start("cli-preferred-a");
    let b = support::zookeeper::ZooKeeper::start("cli-preferred-b");
    let (addr_a, addr_b) = (a.address(), b.address());
    let s = Scratch::new("preferred-registry");
    register(&addr_a, 1);
    register(&addr_b, 2);
    let chain = s.write("chain.yaml", &format!("service: {SERVICE}\nrouters: []\n"));
    let request = s.write("request.json", "{}");
    let w = Running::spawn(&[
        "watch",
        "--chain",
        chain.to_str().unwrap(),
        "--registry",
        &format!("zookeeper://{addr_a}?zone=hz; u:s3cret@{addr_b}?preferred=true&zone=sh"),
        "--allow-empty",
        "--request",
        request.to_str().unwrap(),
    ]);
    let start = w.stderr_until("and the chain file");
    assert!(start[0].contains("Dubbo's zone-aware choice"), "{start:#?}");
    assert!(
        start.contains(&format!(
            "  zookeeper://u:***@{addr_b} (preferred=true, zone=sh); watching:"
        )),
        "{start:#?}"
    );
    // The printed route says which registry was chosen and why.
    let v = (0..20)
        .map(|_| w.next_json())
        .find(|v| v["providers"][0]["address"] == "10.0.0.2:20880")
        .expect("routed to the preferred registry");
    assert_eq!(
        v["registry"],
        format!("registry zookeeper://u:***@{addr_b}: preferred=true"),
        "{v}"
    );
    // Without providers the preferred registry is passed over.
    unregister(&addr_b, 2);
    routed_until(&w, &["10.0.0.1:20880"]);
    let said = w.seen().join("\n");
    assert!(!said.contains("s3cret"), "{said}");
}

#[test]
fn registry_addresses_are_refused_at_once_with_their_passwords_masked() {
    let s = Scratch::new("registry-bad");
    let chain = s.write("chain.yaml", &format!("service: {SERVICE}\nrouters: []\n"));
    for (bad, reason) in [
        ("zookeeper://a:1|etcd://admin:s3cret@b:2", "etcd://"),
        ("zookeeper://admin:s3cret@a:1?weight=heavy", "whole number"),
        ("zookeeper://admin:s3cret@a:1?group=other", "/other"),
    ] {
        let out = routechain(&[
            "watch",
            "--chain",
            chain.to_str().unwrap(),
            "--registry",
            bad,
        ]);
        assert_exit(&out, 2);
        let err = stderr(&out);
        assert!(err.contains(reason) && !err.contains("s3cret"), "{err}");
    }
    // Providers are registered in one registry named alone.
    let out = routechain(&[
        "zk",
        "providers",
        "--registry",
        "a:1|b:2",
        "--service",
        SERVICE,
    ]);
    assert_exit(&out, 2);
    assert!(
        stderr(&out).contains("names 2 registries"),
        "{}",
        stderr(&out)
    );
    // `--registry` and `--zookeeper` are one flag.
    let out = routechain(&[
        "watch",
        "--chain",
        chain.to_str().unwrap(),
        "--registry",
        "a:1",
        "--zookeeper",
        "b:2",
    ]);
    assert_exit(&out, 2);
}
