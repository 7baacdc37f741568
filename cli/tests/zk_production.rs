//! CLI tests of ZooKeeper in production, against a real server: digest credentials from the
//! address, an environment variable or a password file; creator-only nodes and
//! `--world-readable`; passwords masked everywhere; a bad address refused at once; `watch`
//! with a rule it may not read (reported, counted, the rest served, read once opened) and
//! its registry connection gauge; `zk register` registering again after its session
//! expired while the process was stopped.

mod common;

use routechain_testkit as support;

use std::io::{Read, Write};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::{Running, Scratch, routechain, stderr, workspace};

const SERVICE: &str = "com.acme.OrderService";
const KEY: &str = "com.acme.OrderService::";

fn routechain_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_routechain"))
        .args(args)
        .envs(env.iter().copied())
        .current_dir(workspace())
        .output()
        .expect("run routechain")
}

/// A running `routechain` command whose stdout and stderr lines arrive on channels;
/// killed on drop.
/// The provider addresses of the next routed request `w` prints.
fn next_route(w: &Running) -> Vec<String> {
    w.next_json()["providers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["address"].as_str().unwrap().to_string())
        .collect()
}

fn get_rule(addr: &str, env: &[(&str, &str)]) -> Output {
    routechain_env(
        &[
            "zk",
            "get-rule",
            "--zookeeper",
            addr,
            "--key",
            KEY,
            "--type",
            "condition",
        ],
        env,
    )
}

fn put_rule(addr: &str, file: &str, extra: &[&str]) -> Output {
    let mut args = vec![
        "zk",
        "put-rule",
        "--zookeeper",
        addr,
        "--key",
        KEY,
        "--type",
        "condition",
    ];
    args.extend_from_slice(extra);
    args.push(file);
    routechain(&args)
}

#[test]
fn credentials_come_from_the_address_the_environment_or_a_file_and_nodes_are_the_creators() {
    let zk = support::zookeeper::ZooKeeper::start("cli-auth");
    let addr = zk.address();
    let s = Scratch::new("zk-auth");
    let rule = s.write("rule.yaml", "conditions: ['=> zone = a']\n");
    let rule = rule.to_str().unwrap();
    let out = put_rule(&format!("admin:s3cret@{addr}"), rule, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    // Without the credentials: refused by the node's ACL, said so.
    let out = get_rule(&addr, &[]);
    assert_eq!(out.status.code(), Some(4));
    assert!(stderr(&out).contains("not authorized"), "{}", stderr(&out));
    // With them, from each place a password can come from.
    let file = s.write("zk.pass", "s3cret\n");
    let user_only = format!("zookeeper://admin@{addr}");
    for (address, env) in [
        (format!("zookeeper://admin:s3cret@{addr}"), vec![]),
        (
            format!("zookeeper://{addr}?username=admin&password=s3cret"),
            vec![],
        ),
        (
            user_only.clone(),
            vec![("ROUTECHAIN_ZK_PASSWORD", "s3cret")],
        ),
        (
            user_only.clone(),
            vec![("ROUTECHAIN_ZK_PASSWORD_FILE", file.to_str().unwrap())],
        ),
    ] {
        let out = get_rule(&address, &env);
        assert_eq!(out.status.code(), Some(0), "{address}: {}", stderr(&out));
        assert_eq!(common::stdout(&out), "conditions: ['=> zone = a']\n");
    }
    // A user without a password anywhere: refused at once, saying where one can come from.
    let out = get_rule(&user_only, &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("ROUTECHAIN_ZK_PASSWORD"),
        "{}",
        stderr(&out)
    );

    // World-readable on purpose: everyone reads it.
    let out = put_rule(&format!("admin:s3cret@{addr}"), rule, &["--world-readable"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = routechain(&[
        "zk",
        "delete-rule",
        "--zookeeper",
        &format!("admin:s3cret@{addr}"),
        "--key",
        KEY,
        "--type",
        "condition",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = put_rule(&format!("admin:s3cret@{addr}"), rule, &["--world-readable"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = get_rule(&addr, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn a_bad_address_is_refused_at_once_with_the_password_masked_and_help_shows_none() {
    let s = Scratch::new("zk-bad-address");
    let chain = s.write(
        "chain.yaml",
        "service: com.acme.OrderService\nrouters: []\n",
    );
    for bad in [
        "zookeeper://admin:s3cret@",
        "admin:s3cret@127.0.0.1:21x81",
        "nacos://admin:s3cret@127.0.0.1:8848",
    ] {
        for args in [
            vec!["zk", "providers", "--zookeeper", bad, "--service", SERVICE],
            vec![
                "watch",
                "--chain",
                chain.to_str().unwrap(),
                "--zookeeper",
                bad,
            ],
        ] {
            // A Nacos address is a registry `watch` follows (this build reads Nacos):
            // only the ZooKeeper commands refuse it.
            if bad.starts_with("nacos://") && args[0] == "watch" {
                continue;
            }
            let started = Instant::now();
            let out = routechain(&args);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
            // A refused address exits instead of being retried: the bound only catches a hang.
            assert!(started.elapsed() < Duration::from_secs(60));
            let err = stderr(&out);
            // A Nacos address is one (this build reads Nacos), but not ZooKeeper's.
            assert!(
                err.contains("bad ZooKeeper address")
                    || err.contains("bad registry address")
                    || err.contains("is not a ZooKeeper registry: write its rules and providers with `routechain nacos"),
                "{err}"
            );
            assert!(err.contains("admin:***"), "{err}");
            assert!(!err.contains("s3cret"), "{err}");
        }
    }
    for sub in ["put-rule", "register"] {
        let out = routechain(&["zk", sub, "--help"]);
        let help = common::stdout(&out);
        assert!(help.contains("--world-readable"), "{sub}: {help}");
        assert!(
            help.contains("user:***@") || help.contains("admin:***@"),
            "{help}"
        );
        assert!(!help.contains("s3cret"));
    }
}

fn scrape(addr: &str) -> String {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(s, "GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    text
}

#[test]
fn watch_reports_an_unreadable_rule_serves_the_rest_reads_it_once_opened_and_masks_the_password() {
    let zk = support::zookeeper::ZooKeeper::start("cli-noauth");
    let addr = zk.address();
    let s = Scratch::new("zk-noauth");
    for n in [1, 2] {
        let out = routechain(&[
            "zk",
            "register",
            "--persistent",
            "--zookeeper",
            &addr,
            "--service",
            SERVICE,
            &format!("dubbo://10.0.0.{n}:20880/{SERVICE}?side=provider"),
        ]);
        assert_eq!(out.status.code(), Some(0));
    }
    let rule = s.write("rule.yaml", "conditions: ['=> host = 10.0.0.2']\n");
    let owner = format!("admin:s3cret@{addr}");
    let out = put_rule(&owner, rule.to_str().unwrap(), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    let chain = s.write(
        "chain.yaml",
        "service: com.acme.OrderService\nrouters:\n  - type: condition\n",
    );
    let request = s.write("request.json", "{}");
    // Another user's credentials: the rule is not theirs to read.
    let w = Running::spawn(&[
        "watch",
        "--chain",
        chain.to_str().unwrap(),
        "--zookeeper",
        &format!("bob:hunter2@{addr}"),
        "--request",
        request.to_str().unwrap(),
        "--metrics",
        "127.0.0.1:0",
    ]);
    let mut seen = w.stderr_until("serving metrics on http://");
    let metrics = seen
        .last()
        .unwrap()
        .rsplit("http://")
        .next()
        .unwrap()
        .trim_end_matches("/metrics")
        .to_string();
    seen.extend(w.stderr_until("NoAuth"));
    let refused = seen.last().unwrap().clone();
    assert!(
        refused.contains("refused unreadable node zookeeper:/dubbo/config/dubbo/com.acme.OrderService::.condition-router"),
        "{refused}"
    );
    // Everything else it could read is served.
    assert_eq!(next_route(&w), ["10.0.0.1:20880", "10.0.0.2:20880"]);
    let text = scrape(&metrics);
    assert!(
        text.contains(&format!(
            "routechain_registry_connected{{registry=\"zookeeper\",address=\"bob:***@{addr}\"}} 1"
        )),
        "{text}"
    );
    assert!(
        text.contains("source=\"zookeeper\",result=\"refused\"} 1"),
        "{text}"
    );

    // The owner rewrites it readable by everyone: it reads, and applies.
    let out = routechain(&[
        "zk",
        "delete-rule",
        "--zookeeper",
        &owner,
        "--key",
        KEY,
        "--type",
        "condition",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let out = put_rule(&owner, rule.to_str().unwrap(), &["--world-readable"]);
    assert_eq!(out.status.code(), Some(0));
    let deadline = Instant::now() + Duration::from_secs(20);
    while next_route(&w) != ["10.0.0.2:20880"] {
        assert!(Instant::now() < deadline, "the opened rule never applied");
    }
    seen.extend(w.stderr_until("reads again"));
    for line in &seen {
        assert!(!line.contains("hunter2"), "{line}");
    }
    assert!(seen.iter().any(|l| l.contains("bob:***@")), "{seen:#?}");
}

#[test]
fn zk_register_registers_again_after_its_session_expired_while_the_process_was_stopped() {
    let zk = support::zookeeper::ZooKeeper::start("cli-reregister");
    let addr = zk.address();
    let url = "dubbo://10.0.0.1:20880/com.acme.OrderService?side=provider";
    let providers = || {
        let out = routechain(&[
            "zk",
            "providers",
            "--zookeeper",
            &addr,
            "--service",
            SERVICE,
        ]);
        common::stdout(&out)
    };
    let reg = Running::spawn(&[
        "zk",
        "register",
        "--zookeeper",
        &format!("zookeeper://{addr}?session=2000"),
        "--service",
        SERVICE,
        url,
    ]);
    reg.stderr_until("holding them until Ctrl-C");
    assert_eq!(providers(), format!("{url}\n"));
    // Stopped past its session timeout: the server expires the session and its node.
    reg.signal("STOP");
    let gone = Instant::now();
    while !providers().is_empty() {
        assert!(
            gone.elapsed() < Duration::from_secs(20),
            "the session never expired"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    reg.signal("CONT");
    reg.stderr_until("session expired; registering 1 provider(s) again on a new session");
    let line = reg.stderr_until("re-registered 1 provider(s)");
    assert!(line.last().unwrap().contains("new session 0x"), "{line:?}");
    assert_eq!(providers(), format!("{url}\n"));
}
