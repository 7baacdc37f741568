//! `check --registry` through the real binary against a real ZooKeeper: every rule the
//! registry holds is checked against the providers it holds, its problems located at its
//! node, and the exit code is `check`'s (4 when the registry cannot be reached).

mod common;

use common::{Scratch, assert_exit, routechain, stderr, stdout};
use routechain_testkit as support;

const SERVICE: &str = "com.acme.OrderService";

fn put_rule(addr: &str, key: &str, ty: &str, file: &std::path::Path) {
    let out = routechain(&[
        "registry",
        "put-rule",
        "--registry",
        addr,
        "--key",
        key,
        "--type",
        ty,
        file.to_str().unwrap(),
    ]);
    assert_exit(&out, 0);
}

#[test]
fn check_registry_lints_every_rule_against_the_live_providers_at_its_node() {
    let zk = support::zookeeper::ZooKeeper::start("cli-check-registry");
    let addr = zk.address();
    let s = Scratch::new("check-registry");
    for (n, region) in [(1, "hangzhou"), (2, "beijing")] {
        let out = routechain(&[
            "zk",
            "register",
            "--persistent",
            "--zookeeper",
            &addr,
            "--service",
            SERVICE,
            &format!(
                "dubbo://10.0.0.{n}:20880/{SERVICE}?side=provider&application=orders&region={region}"
            ),
        ]);
        assert_exit(&out, 0);
    }
    let condition = |region: &str| {
        format!(
            "configVersion: v3.0\nscope: service\nkey: {SERVICE}\nenabled: true\nforce: true\n\
             conditions:\n  - '=> region = {region}'\n"
        )
    };
    // Valid alone (put-rule writes it); against the providers, its then-part matches none.
    put_rule(
        &addr,
        &format!("{SERVICE}::"),
        "condition",
        &s.write("c.yaml", &condition("shanghai")),
    );
    // A tag address no provider has.
    put_rule(
        &addr,
        "orders",
        "tag",
        &s.write(
            "t.yaml",
            "configVersion: v3.0\nkey: orders\nenabled: true\nforce: false\ntags:\n  - name: gray\n    addresses: ['10.0.0.9:20880']\n",
        ),
    );
    // A consumer application's rule: no provider of that application.
    put_rule(
        &addr,
        "web",
        "condition",
        &s.write(
            "w.yaml",
            "configVersion: v3.0\nscope: application\nkey: web\nenabled: true\nconditions:\n  - 'method = x => region = hangzhou'\n",
        ),
    );
    let node = |name: &str| format!("/dubbo/config/dubbo/{name}");
    let out = routechain(&["check", "--registry", &addr, "--all"]);
    assert_exit(&out, 2);
    let text = stdout(&out);
    // docs/check.md shows this very output.
    let doc = std::fs::read_to_string(common::workspace().join("docs/check.md")).unwrap();
    let section = doc
        .split("## Auditing a live registry")
        .nth(1)
        .expect("docs/check.md has the audit section");
    let sample = section
        .split("```text\n")
        .nth(2)
        .and_then(|b| b.split("```").next())
        .expect("the sample output");
    assert_eq!(text, sample, "docs/check.md's sample is stale");
    let lines: Vec<&str> = text.lines().collect();
    let has = |prefix: String, what: &str| {
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with(&prefix) && l.contains(what)),
            "no line {prefix}…{what}:\n{text}"
        )
    };
    has(
        format!(
            "{}:7:5: error[RC204]",
            node("com.acme.OrderService::.condition-router")
        ),
        "matches none of the 2 providers",
    );
    has(
        format!("{}:7:17: warning[RC203]", node("orders.tag-router")),
        "10.0.0.9:20880",
    );
    has(
        format!(
            "{}: 1 error",
            node("com.acme.OrderService::.condition-router")
        ),
        "",
    );
    has(
        format!(
            "{}: ok (condition rule; no provider of application web)",
            node("web.condition-router")
        ),
        "",
    );
    assert_eq!(
        lines.last().copied(),
        Some("check: 3 files checked, 1 error, 2 warnings"),
        "{text}"
    );

    // One service: its rule and its providers' application's, not the consumer's.
    let out = routechain(&["check", "--registry", &addr, "--service", SERVICE]);
    assert_exit(&out, 2);
    let text = stdout(&out);
    assert!(!text.contains("web.condition-router"), "{text}");
    assert!(
        text.ends_with("check: 2 files checked, 1 error, 2 warnings\n"),
        "{text}"
    );

    // Fixed: warnings only, which --deny-warnings turns into 1; JSON names the nodes.
    put_rule(
        &addr,
        &format!("{SERVICE}::"),
        "condition",
        &s.write("c.yaml", &condition("hangzhou")),
    );
    assert_exit(&routechain(&["check", "--registry", &addr]), 0);
    assert_exit(
        &routechain(&["check", "--registry", &addr, "--deny-warnings"]),
        1,
    );
    let out = routechain(&["check", "--registry", &addr, "--format", "json"]);
    let v = common::json(&out);
    let files: Vec<&str> = v["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["file"].as_str().unwrap())
        .collect();
    assert_eq!(
        files,
        [
            node("com.acme.OrderService::.condition-router"),
            node("orders.tag-router"),
            node("web.condition-router"),
        ]
    );
}

#[test]
fn check_registry_exits_4_when_the_registry_cannot_be_reached_and_2_on_a_bad_address() {
    let s = Scratch::new("check-registry-down");
    let out = routechain(&[
        "check",
        "--registry",
        "zookeeper://admin:s3cret@127.0.0.1:1?session=2000",
    ]);
    assert_exit(&out, 4);
    let err = stderr(&out);
    assert!(
        err.contains("admin:***@127.0.0.1:1") && !err.contains("s3cret"),
        "{err}"
    );
    let out = routechain(&["check", "--registry", "etcd://127.0.0.1:1"]);
    assert_exit(&out, 2);
    // Files and a registry are two different checks.
    let file = s.write("r.yaml", "conditions: []\n");
    let out = routechain(&["check", "--registry", "127.0.0.1:1", file.to_str().unwrap()]);
    assert_exit(&out, 2);
}

/// The dataIds the Nacos audit reports, as `--format json` names them.
fn files(out: &std::process::Output) -> Vec<String> {
    common::json(out)["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["file"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn check_registry_audits_a_nacos_namespace_at_each_data_id() {
    let nacos = support::nacos::Nacos::start("cli-check-registry");
    let addr = nacos.url("namespace=dev");
    // Written by the official Python client, as Dubbo's Nacos registry and config center
    // write them.
    let mut writer = support::nacos::NacosWriter::start(&nacos.address(), "dev");
    for (n, region) in [(1, "hangzhou"), (2, "beijing")] {
        writer.register(
            "DEFAULT_GROUP",
            &format!(
                "dubbo://10.0.0.{n}:20880/{SERVICE}?side=provider&application=orders&region={region}"
            ),
        );
    }
    // Its then-part matches none of the live providers.
    writer.publish(
        "com.acme.OrderService::.condition-router",
        &format!(
            "configVersion: v3.0\nscope: service\nkey: {SERVICE}\nenabled: true\nforce: true\n\
             conditions:\n  - '=> region = shanghai'\n"
        ),
    );
    // A tag address no provider has.
    writer.publish(
        "orders.tag-router",
        "configVersion: v3.0\nkey: orders\nenabled: true\nforce: false\ntags:\n  - name: gray\n    addresses: ['10.0.0.9:20880']\n",
    );
    // A rule that does not parse.
    writer.publish(
        "web.condition-router",
        "configVersion: v3.0\nscope: application\nkey: web\nconditions: ['=> region = hz'\n",
    );
    // Not a rule: left alone.
    writer.publish("dubbo.properties", "dubbo.registry.address=nacos://x\n");
    // Another namespace's rule is not this namespace's.
    let mut other = support::nacos::NacosWriter::start(&nacos.address(), "prod");
    other.publish("prod.tag-router", "tags: [oops\n");

    let at = |id: &str| format!("nacos:dev/dubbo/{id}");
    let out = routechain(&["check", "--registry", &addr, "--all"]);
    assert_exit(&out, 2);
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    let has = |prefix: String, what: &str| {
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with(&prefix) && l.contains(what)),
            "no line {prefix}…{what}:\n{text}"
        )
    };
    has(
        format!(
            "{}:7:5: error[RC204]",
            at("com.acme.OrderService::.condition-router")
        ),
        "matches none of the 2 providers",
    );
    has(
        format!(
            "{}:7:18: warning[RC203]",
            at("com.acme.OrderService::.condition-router")
        ),
        "providers have region = beijing, hangzhou",
    );
    has(
        format!("{}:7:17: warning[RC203]", at("orders.tag-router")),
        "10.0.0.9:20880",
    );
    has(
        format!(
            "{}: ok (tag rule, against the 2 providers of application orders), 1 warning",
            at("orders.tag-router")
        ),
        "",
    );
    has(
        format!("{}:5:1: error[RC002]", at("web.condition-router")),
        "expected ',' or ']'",
    );
    assert!(
        !text.contains("dubbo.properties") && !text.contains("prod"),
        "{text}"
    );
    assert!(
        text.ends_with("check: 3 files checked, 2 errors, 2 warnings\n"),
        "{text}"
    );
    assert_eq!(
        files(&routechain(&[
            "check",
            "--registry",
            &addr,
            "--format",
            "json"
        ])),
        [
            at("com.acme.OrderService::.condition-router"),
            at("orders.tag-router"),
            at("web.condition-router"),
        ]
    );

    // One service: its rule and its providers' application's.
    let out = routechain(&["check", "--registry", &addr, "--service", SERVICE]);
    assert_exit(&out, 2);
    assert!(
        stdout(&out).ends_with("check: 2 files checked, 1 error, 2 warnings\n"),
        "{}",
        stdout(&out)
    );

    // Fixed: warnings only (the tag address), which --deny-warnings turns into 1.
    writer.publish(
        "com.acme.OrderService::.condition-router",
        &format!(
            "configVersion: v3.0\nscope: service\nkey: {SERVICE}\nenabled: true\nforce: true\n\
             conditions:\n  - '=> region = hangzhou'\n"
        ),
    );
    writer.remove("web.condition-router");
    assert_exit(&routechain(&["check", "--registry", &addr]), 0);
    assert_exit(
        &routechain(&["check", "--registry", &addr, "--deny-warnings"]),
        1,
    );

    // Nacos down: 4, the password masked.
    drop(writer);
    drop(other);
    drop(nacos);
    let out = routechain(&[
        "check",
        "--registry",
        &format!("nacos://ops:s3cret@{}", addr.trim_start_matches("nacos://")),
    ]);
    assert_exit(&out, 4);
    let err = stderr(&out);
    assert!(err.contains("ops:***@") && !err.contains("s3cret"), "{err}");
}

#[test]
fn check_registry_logs_in_to_a_nacos_that_admits_only_its_users() {
    let nacos = support::nacos::Nacos::start_with_auth("cli-check-auth", "ops", "s3cret");
    let mut writer =
        support::nacos::NacosWriter::start_with_auth(&nacos.address(), "", "ops", "s3cret");
    writer.register(
        "DEFAULT_GROUP",
        &format!("dubbo://10.0.0.1:20880/{SERVICE}?side=provider&application=orders"),
    );
    writer.publish(
        "orders.tag-router",
        "configVersion: v3.0\nkey: orders\nenabled: true\nforce: false\ntags:\n  - name: gray\n    addresses: ['10.0.0.9:20880']\n",
    );
    let out = routechain(&[
        "check",
        "--registry",
        &format!("nacos://ops:s3cret@{}", nacos.address()),
    ]);
    assert_exit(&out, 0);
    let text = stdout(&out);
    assert!(
        text.starts_with("nacos:public/dubbo/orders.tag-router:7:17: warning[RC203]")
            && text.ends_with("check: 1 file checked, 0 errors, 1 warning\n"),
        "{text}"
    );
    // A wrong password: the registry cannot be read (4), the password never shown.
    let out = routechain(&[
        "check",
        "--registry",
        &format!("nacos://ops:wrong-one@{}", nacos.address()),
    ]);
    assert_exit(&out, 4);
    let err = stderr(&out);
    assert!(err.contains("ops") && !err.contains("wrong-one"), "{err}");
}
