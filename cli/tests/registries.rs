//! CLI tests for an existing Dubbo deployment: `watch --zookeeper` says what it watches and
//! how many providers match, prints nothing before the first state, follows the chain
//! file; `zk register` holds ephemeral nodes until Ctrl-C; `zk put-rule` writes override
//! and mesh nodes; a bad providers-file line is skipped by `watch` and refused by `route`.

mod common;

use common::Running;
use routechain_testkit as support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "routechain-cli-registries-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
    fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn workspace() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

fn routechain(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_routechain"))
        .args(args)
        .current_dir(workspace())
        .output()
        .expect("run routechain")
}

/// A running `routechain` command whose stdout and stderr lines arrive on channels;
/// killed on drop.
fn addresses(v: &serde_json::Value) -> Vec<String> {
    v["providers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["address"].as_str().unwrap().to_string())
        .collect()
}

fn providers(addr: &str, service: &str) -> String {
    let out = routechain(&["zk", "providers", "--zookeeper", addr, "--service", service]);
    assert_eq!(out.status.code(), Some(0));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

const SERVICE: &str = "com.acme.OrderService";

#[test]
fn zk_register_holds_ephemeral_nodes_until_ctrl_c_and_persistent_keeps_the_old_behaviour() {
    let zk = support::zookeeper::ZooKeeper::start("cli-ephemeral");
    let addr = zk.address();
    let url = "dubbo://10.0.0.1:20880/com.acme.OrderService?side=provider&group=blue";
    let mut reg = Running::spawn(&[
        "zk",
        "register",
        "--zookeeper",
        &addr,
        "--service",
        SERVICE,
        url,
    ]);
    reg.stderr_until("registered 1 provider(s) (ephemeral); holding them until Ctrl-C");
    assert_eq!(providers(&addr, SERVICE), format!("{url}\n"));
    let status = reg.interrupt();
    assert!(status.success(), "{status}");
    assert_eq!(providers(&addr, SERVICE), "");

    let out = routechain(&[
        "zk",
        "register",
        "--persistent",
        "--zookeeper",
        &addr,
        "--service",
        SERVICE,
        url,
    ]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(providers(&addr, SERVICE), format!("{url}\n"));
}

#[test]
fn zk_put_rule_writes_configurators_and_mesh_nodes_and_refuses_a_bad_override_rule() {
    let zk = support::zookeeper::ZooKeeper::start("cli-put-rule");
    let addr = zk.address();
    let s = Scratch::new("put-rule");
    let good = s.write(
        "weights.yaml",
        "configVersion: v2.7\nscope: service\nkey: com.acme.OrderService\nconfigs:\n  - side: consumer\n    \
         providerAddresses: ['10.0.0.1:20880']\n    parameters:\n      weight: '300'\n",
    );
    let put = |kind: &str, key: &str, file: &Path| {
        routechain(&[
            "zk",
            "put-rule",
            "--zookeeper",
            &addr,
            "--key",
            key,
            "--type",
            kind,
            file.to_str().unwrap(),
        ])
    };
    let out = put("configurators", "com.acme.OrderService::", &good);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "wrote /dubbo/config/dubbo/com.acme.OrderService::.configurators\n"
    );
    let mesh = s.write(
        "mesh.yaml",
        "apiVersion: service.dubbo.apache.org/v1alpha1\nkind: DestinationRule\nmetadata: {name: orders}\n\
         spec: {subsets: [{name: all}]}\n---\napiVersion: service.dubbo.apache.org/v1alpha1\n\
         kind: VirtualService\nmetadata: {name: orders}\n\
         spec: {dubbo: [{routedetail: [{route: [{destination: {subset: all}}]}]}]}\n",
    );
    let out = put("mesh", "orders", &mesh);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "wrote /dubbo/config/dubbo/orders.MESHAPPRULE\n"
    );
    // A bad override rule: not written, located.
    let bad = s.write(
        "bad.yaml",
        "key: com.acme.OrderService\nconfigs:\n  - side: sideways\n    parameters: {weight: '1'}\n",
    );
    let out = put("configurators", "com.acme.OrderService::", &bad);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("bad.yaml:3:11: error[RC002]: configs[0].side: unknown side \"sideways\""),
        "{stderr}"
    );
    let out = routechain(&[
        "zk",
        "get-rule",
        "--zookeeper",
        &addr,
        "--key",
        "com.acme.OrderService::",
        "--type",
        "configurators",
    ]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        std::fs::read_to_string(&good).unwrap()
    );
}

#[test]
fn watch_says_what_it_watches_and_what_matches_prints_nothing_before_the_first_state_and_follows_the_chain_file()
 {
    let zk = support::zookeeper::ZooKeeper::start("cli-watch-registry");
    let addr = zk.address();
    let s = Scratch::new("watch-registry");
    for (n, group, version) in [
        (1, "blue", "2.1.0"),
        (2, "green", "2.1.0"),
        (3, "blue", "1.0.0"),
    ] {
        let out = routechain(&[
            "zk",
            "register",
            "--persistent",
            "--zookeeper",
            &addr,
            "--service",
            SERVICE,
            &format!(
                "dubbo://10.0.0.{n}:20880/{SERVICE}?side=provider&application=orders&group={group}&version={version}"
            ),
        ]);
        assert_eq!(out.status.code(), Some(0));
    }
    // A reference that takes nothing: the excluding filter is named.
    let chain = s.write(
        "chain.yaml",
        "service: com.acme.OrderService\nversion: 3.0.0\nconsumer: consumer://10.9.9.9/x?application=web\n\
         routers:\n  - type: condition\n  - type: tag\n",
    );
    let request = s.write("request.json", "{}");
    let w = Running::spawn(&[
        "watch",
        "--chain",
        chain.to_str().unwrap(),
        "--zookeeper",
        &addr,
        "--request",
        request.to_str().unwrap(),
    ]);
    let start = w.stderr_until("and the chain file");
    assert_eq!(
        start,
        [
            format!(
                "routechain watch: following ZooKeeper {addr} for com.acme.OrderService (group=, version=3.0.0); watching:"
            ),
            "  /dubbo/config/dubbo/com.acme.OrderService:3.0.0:.condition-router".into(),
            "  /dubbo/config/dubbo/com.acme.OrderService:3.0.0:.configurators".into(),
            "  /dubbo/config/dubbo/web.configurators".into(),
            "  /dubbo/com.acme.OrderService/configurators".into(),
            "  /dubbo/com.acme.OrderService/providers".into(),
            "  and, once the providers' application is known, its tag node(s)".into(),
            format!("  and the chain file {}", chain.display()),
        ]
    );
    w.stderr_until(
        "/dubbo/com.acme.OrderService/providers: 3 registered, 0 match (group=, version=3.0.0); excluded 3 by group",
    );
    // The list that arrived (empty) is the first state: one line, no provider.
    let v = w.next_json();
    assert_eq!(addresses(&v), Vec::<String>::new());

    // The chain file is watched: a `group: "*"` reference of version 2.1.0 takes two.
    std::fs::write(
        &chain,
        "service: com.acme.OrderService\nversion: 2.1.0\ngroup: \"*\"\n\
         consumer: consumer://10.9.9.9/x?application=web\nrouters:\n  - type: condition\n  - type: tag\n",
    )
    .unwrap();
    w.stderr_until("applied generation");
    w.stderr_until("the chain file changes what to follow in ZooKeeper; re-reading it");
    w.stderr_until("  /dubbo/config/dubbo/com.acme.OrderService:2.1.0:.condition-router");
    w.stderr_until("3 registered, 2 match (group=*, version=2.1.0); excluded 1 by version");
    w.stderr_until("providers' application orders: watching /dubbo/config/dubbo/orders.tag-router");
    // One line for the reloaded chain (no provider yet), then the providers arrive.
    let mut v = w.next_json();
    while addresses(&v).is_empty() {
        v = w.next_json();
    }
    assert_eq!(addresses(&v), ["10.0.0.1:20880", "10.0.0.2:20880"]);
}

#[test]
fn a_bad_providers_file_line_is_skipped_by_watch_and_refused_by_route_and_check() {
    let s = Scratch::new("bad-line");
    let chain = s.write("chain.yaml", "routers:\n  - type: condition\n");
    let providers = s.write(
        "providers.txt",
        "dubbo://10.0.0.1:20880/a?zone=a\ndubbo://10.0.0.2:x/a\n",
    );
    let request = s.write("request.json", "{}");
    let args = [
        "--chain",
        chain.to_str().unwrap(),
        "--providers",
        providers.to_str().unwrap(),
        "--request",
        request.to_str().unwrap(),
    ];
    let out = routechain(&[&["route"][..], &args].concat());
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("providers.txt:2:18: invalid provider URL")
    );
    let w = Running::spawn(&[&["watch"][..], &args].concat());
    let line = w.stderr_until("skipped provider");
    assert_eq!(
        line.last().unwrap(),
        &format!(
            "routechain watch: skipped provider {}:2:18: invalid provider URL: invalid port \"x\"",
            providers.display()
        )
    );
    assert_eq!(addresses(&w.next_json()), ["10.0.0.1:20880"]);
}
