//! `routechain nacos` and `routechain watch --registry nacos://…` through the real binary,
//! against a real Nacos server (rnacos, started by the test).

mod common;

use common::{Running, Scratch, assert_exit, routechain, stderr, stdout};
use routechain_testkit as support;
use serde_json::Value;

/// The routed addresses, sorted (a live chain keeps its own stable provider order).
fn addresses(v: &Value) -> Vec<&str> {
    let mut a: Vec<&str> = v["providers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["address"].as_str().unwrap())
        .collect();
    a.sort_unstable();
    a
}

/// The body of `GET path` from `addr`.
fn http_get(addr: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out.split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default()
}

#[test]
fn the_nacos_commands_write_rules_and_providers_a_watch_follows() {
    let nacos = support::nacos::Nacos::start("cli");
    let registry = nacos.url("namespace=dev");
    let s = Scratch::new("nacos-cli");
    let key = ["--key", "com.foo.BarService::", "--type", "condition"];

    // An invalid rule is never written; the dry run shows the diff and writes nothing.
    let bad = s.write("bad.yaml", "conditions: ['=> region = hz'\n");
    let mut args = vec!["nacos", "put-rule", "--registry", &registry];
    args.extend(key);
    let mut put_bad = args.clone();
    put_bad.push(bad.to_str().unwrap());
    let out = routechain(&put_bad);
    assert_exit(&out, 2);
    assert!(stderr(&out).contains("nothing written"), "{}", stderr(&out));
    let rule = s.write("rule.yaml", "conditions:\n  - => region = hz\n");
    let mut dry = args.clone();
    dry.extend(["--dry-run", rule.to_str().unwrap()]);
    let out = routechain(&dry);
    assert_exit(&out, 0);
    assert!(
        stdout(&out).contains("+  - => region = hz"),
        "{}",
        stdout(&out)
    );
    assert!(stdout(&out).contains("dubbo/com.foo.BarService::.condition-router (no such node)"));
    let mut get = vec!["nacos", "get-rule", "--registry", &registry];
    get.extend(key);
    assert_exit(&routechain(&get), 1);
    let mut put = args.clone();
    put.push(rule.to_str().unwrap());
    let out = routechain(&put);
    assert_exit(&out, 0);
    assert!(stderr(&out).contains("wrote dubbo/com.foo.BarService::.condition-router"));
    let out = routechain(&get);
    assert_exit(&out, 0);
    assert_eq!(stdout(&out), "conditions:\n  - => region = hz\n");

    // Providers registered as Dubbo does, held while the command runs.
    let urls = [
        "dubbo://10.0.0.1:20880/com.foo.BarService?region=hz&side=provider",
        "dubbo://10.0.0.2:20880/com.foo.BarService?region=bj&side=provider",
    ];
    let mut register = Running::spawn(&[
        "nacos",
        "register",
        "--registry",
        &registry,
        "--service",
        "com.foo.BarService",
        urls[0],
        urls[1],
    ]);
    register.stderr_with("registered 2 provider(s)");
    let list = || {
        routechain(&[
            "nacos",
            "providers",
            "--registry",
            &registry,
            "--service",
            "com.foo.BarService",
        ])
    };
    let start = std::time::Instant::now();
    loop {
        let out = list();
        assert_exit(&out, 0);
        let text = stdout(&out);
        if text.lines().count() == 2 {
            assert!(
                text.contains("dubbo://10.0.0.1:20880/com.foo.BarService?"),
                "{text}"
            );
            assert!(text.contains("category=providers"), "{text}");
            break;
        }
        assert!(start.elapsed().as_secs() < 20, "never listed: {text}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }

    // `watch --registry nacos://…` routes from them, and follows a rule change.
    let chain = s.write(
        "chain.yaml",
        "service: com.foo.BarService\nrouters:\n  - type: condition\n",
    );
    let request = s.write("request.json", "{}");
    let w = Running::spawn(&[
        "watch",
        "--chain",
        chain.to_str().unwrap(),
        "--registry",
        &registry,
        "--request",
        request.to_str().unwrap(),
        "--metrics",
        "127.0.0.1:0",
    ]);
    let line = w.stderr_with("following Nacos");
    assert!(
        line.contains("nacos://127.0.0.1:")
            && line.contains("?namespace=dev for com.foo.BarService"),
        "{line}"
    );
    let mut state = w.next_json();
    while addresses(&state) != ["10.0.0.1:20880"] {
        state = w.next_json();
    }
    // The registry's connection gauge, labelled by kind.
    let line = w.stderr_with("serving metrics on http://");
    let metrics = line
        .split("http://")
        .nth(1)
        .and_then(|r| r.strip_suffix("/metrics"))
        .expect("the metrics address");
    let body = http_get(metrics, "/metrics");
    assert!(
        body.lines().any(|l| l.starts_with(
            "routechain_registry_connected{registry=\"nacos\",address=\"nacos://127.0.0.1:"
        ) && l.contains("?namespace=dev\"}")
            && l.ends_with(" 1")),
        "{body}"
    );
    let rule = s.write("bj.yaml", "conditions:\n  - => region = bj\n");
    put.pop();
    put.push(rule.to_str().unwrap());
    assert_exit(&routechain(&put), 0);
    let mut state = w.next_json();
    while addresses(&state) != ["10.0.0.2:20880"] {
        state = w.next_json();
    }
    let mut delete = vec!["nacos", "delete-rule", "--registry", &registry];
    delete.extend(key);
    let out = routechain(&delete);
    assert_exit(&out, 0);
    assert!(stderr(&out).contains("deleted dubbo/com.foo.BarService::.condition-router"));
    let mut state = w.next_json();
    while addresses(&state) != ["10.0.0.1:20880", "10.0.0.2:20880"] {
        state = w.next_json();
    }
    // Ctrl-C unregisters: the providers are gone.
    assert!(register.interrupt().success());
    let start = std::time::Instant::now();
    while !stdout(&list()).is_empty() {
        assert!(start.elapsed().as_secs() < 20, "still listed");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

#[test]
fn a_bad_nacos_address_exits_2_with_the_password_masked() {
    let s = Scratch::new("nacos-bad");
    let chain = s.write("chain.yaml", "service: com.foo.BarService\nrouters: []\n");
    for args in [
        vec![
            "watch",
            "--chain",
            chain.to_str().unwrap(),
            "--registry",
            "nacos://ops:s3cret@h:notaport",
        ],
        vec![
            "nacos",
            "providers",
            "--registry",
            "nacos://ops:s3cret@h:notaport",
            "--service",
            "com.foo.BarService",
        ],
        vec![
            "watch",
            "--chain",
            chain.to_str().unwrap(),
            "--registry",
            "etcd://ops:s3cret@h:1",
        ],
    ] {
        let out = routechain(&args);
        assert_exit(&out, 2);
        let err = stderr(&out);
        assert!(err.contains("ops:***@") && !err.contains("s3cret"), "{err}");
    }
}
