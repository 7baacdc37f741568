//! CLI tests: run the real `routechain` binary on files, check stdout, stderr and exit codes.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// A throwaway directory for one test's files, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("routechain-cli-{name}-{}", std::process::id()));
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

fn routechain(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_routechain"))
        .args(args)
        .current_dir(workspace())
        .output()
        .expect("run routechain")
}

fn workspace() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn indexes(v: &Value) -> Vec<u64> {
    v["providers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["index"].as_u64().unwrap())
        .collect()
}

const PROVIDERS: &str = "\
# three providers
dubbo://10.20.3.3:20880/com.foo.BarService?region=hangzhou

dubbo://10.20.3.4:20880/com.foo.BarService?region=beijing
dubbo://10.20.3.4:20880/com.foo.BarService?region=beijing
";

#[test]
fn route_with_an_empty_chain_returns_every_provider_with_indexes_in_input_order() {
    let s = Scratch::new("empty-chain");
    let chain = s.write("chain.yaml", "routers: []\n");
    let providers = s.write("providers.txt", PROVIDERS);
    let request = s.write("request.json", "{}");
    let out = routechain(&[
        "route",
        "--chain",
        chain.to_str().unwrap(),
        "--providers",
        providers.to_str().unwrap(),
        "--request",
        request.to_str().unwrap(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json(&out);
    assert_eq!(indexes(&v), [0, 1, 2]);
    assert_eq!(v["providers"][1]["address"], "10.20.3.4:20880");
    assert!(v.get("trace").is_none());
    assert!(v.get("error").is_none());
}

#[test]
fn empty_provider_list_exits_3_with_an_error_object() {
    let s = Scratch::new("no-providers");
    let chain = s.write("chain.yaml", "routers: []\n");
    let providers = s.write("providers.txt", "# none\n");
    let request = s.write("request.json", "{}");
    let out = routechain(&[
        "route",
        "--chain",
        chain.to_str().unwrap(),
        "--providers",
        providers.to_str().unwrap(),
        "--request",
        request.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(3));
    let v = json(&out);
    assert_eq!(indexes(&v), Vec::<u64>::new());
    assert_eq!(v["error"]["kind"], "no_provider");
}

#[test]
fn invalid_inputs_exit_2_naming_file_line_and_column() {
    let s = Scratch::new("invalid");
    let chain = s.write("chain.yaml", "routers:\n  - type: no-such-router\n");
    let providers = s.write(
        "providers.txt",
        "dubbo://10.0.0.1:20880/a\ndubbo://10.0.0.2:99999/a\n",
    );
    let request = s.write("request.json", "{\"method\": 5}");
    let out = routechain(&[
        "route",
        "--chain",
        chain.to_str().unwrap(),
        "--providers",
        providers.to_str().unwrap(),
        "--request",
        request.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "{}:2:18: invalid provider URL",
            providers.display()
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("{}:1:", request.display())),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());

    // A chain problem is reported once the inputs parse.
    let providers = s.write("providers.txt", PROVIDERS);
    let request = s.write("request.json", "{}");
    let out = routechain(&[
        "route",
        "--chain",
        chain.to_str().unwrap(),
        "--providers",
        providers.to_str().unwrap(),
        "--request",
        request.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "{}:2:11: routers[0].type: unknown router type",
            chain.display()
        )),
        "{stderr}"
    );
}

#[test]
fn request_can_come_from_stdin() {
    use std::io::Write;
    let s = Scratch::new("stdin");
    let chain = s.write("chain.yaml", "routers: []\n");
    let providers = s.write("providers.txt", PROVIDERS);
    let mut child = Command::new(env!("CARGO_BIN_EXE_routechain"))
        .args([
            "route",
            "--chain",
            chain.to_str().unwrap(),
            "--providers",
            providers.to_str().unwrap(),
            "--request",
            "-",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"{\"method\": \"get\"}")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(indexes(&json(&out)), [0, 1, 2]);
}

#[test]
fn check_reports_every_problem_and_exit_codes() {
    let s = Scratch::new("check");
    let good = s.write("good.yaml", "routers: []\n");
    let bad = s.write("bad.yaml", "routers:\n  - type: nope\n  - priority: 1\n");
    let out = routechain(&["check", good.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("ok (0 routers)"));
    let out = routechain(&["check", good.to_str().unwrap(), bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "{}:2:11: routers[0].type: unknown router type \"nope\"",
            bad.display()
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "{}:3:5: routers[1]: missing field `type`",
            bad.display()
        )),
        "{stderr}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("bad.yaml: 2 problem(s)"), "{stdout}");
}

#[test]
fn check_reports_refused_plugin_libraries_with_path_and_reason() {
    let s = Scratch::new("check-plugins");
    s.write("libnot_a_plugin.so", "plain text, not a shared library\n");
    let chain = s.write(
        "plugins.yaml",
        "routers:\n  - type: plugin\n    path: libmissing.so\n  - type: plugin\n    path: libnot_a_plugin.so\n",
    );
    let out = routechain(&["check", chain.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let missing = s.0.join("libmissing.so");
    assert!(
        stderr.contains(&format!(
            "{}:3:11: routers[0].path: plugin library {} does not exist",
            chain.display(),
            missing.display()
        )),
        "{stderr}"
    );
    let not_lib = s.0.join("libnot_a_plugin.so");
    assert!(
        stderr.contains(&format!(
            "{}:5:11: routers[1].path: cannot load plugin library {}:",
            chain.display(),
            not_lib.display()
        )),
        "{stderr}"
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("plugins.yaml: 2 problem(s)"));
}

#[test]
fn every_command_has_help_with_an_example() {
    for cmd in [
        vec!["--help"],
        vec!["route", "--help"],
        vec!["explain", "--help"],
        vec!["check", "--help"],
    ] {
        let out = routechain(&cmd);
        assert_eq!(out.status.code(), Some(0), "{cmd:?}");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("Example"), "{cmd:?}: {text}");
    }
}

fn route_example(request_json: &str, seed: &str) -> Output {
    let s = Scratch::new(&format!("full-{seed}-{}", request_json.len()));
    let request = s.write("request.json", request_json);
    routechain(&[
        "route",
        "--chain",
        "rules/examples/full.chain.yaml",
        "--providers",
        "rules/examples/providers.txt",
        "--request",
        request.to_str().unwrap(),
        "--explain",
        "--seed",
        seed,
    ])
}

const BEIJING_MT: &str = "consumer://10.1.9.9/org.apache.dubbo.samples.CommentService?application=comment-web&region=beijing&idc=mt";

#[test]
fn the_full_example_chain_routes_through_all_four_routers() {
    let mut seen = std::collections::BTreeSet::new();
    for seed in 1..=20 {
        let out = routechain(&[
            "route",
            "--chain",
            "rules/examples/full.chain.yaml",
            "--providers",
            "rules/examples/providers.txt",
            "--request",
            "rules/examples/request.json",
            "--explain",
            "--seed",
            &seed.to_string(),
        ]);
        assert_eq!(out.status.code(), Some(0));
        let v = json(&out);
        let steps: Vec<&str> = v["trace"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["router"].as_str().unwrap())
            .collect();
        assert_eq!(steps, ["tag", "condition(service)", "group", "idc-weight"]);
        let counts: Vec<(u64, u64)> = v["trace"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| (s["before"].as_u64().unwrap(), s["after"].as_u64().unwrap()))
            .collect();
        assert_eq!(counts, [(9, 7), (7, 5), (5, 2), (2, 1)]);
        seen.extend(indexes(&v));
    }
    // idx_user in beijing: 10.1.1.1 (mt, index 0) and 10.1.2.1 (zf, index 3), split 50/50.
    assert_eq!(seen.into_iter().collect::<Vec<_>>(), [0, 3]);
}

#[test]
fn a_gray_request_reaches_only_the_gray_provider_of_its_region() {
    for seed in ["1", "2", "3", "4"] {
        let out = route_example(
            &format!(
                r#"{{"consumer": "{BEIJING_MT}", "method": "getComment",
                    "attachments": {{"dubbo.tag": "gray"}}, "attributes": {{"group": "idx_user"}}}}"#
            ),
            seed,
        );
        assert_eq!(out.status.code(), Some(0));
        assert_eq!(indexes(&json(&out)), [2], "seed {seed}");
    }
}

#[test]
fn a_group_without_providers_exits_3_naming_the_group_router() {
    let out = route_example(
        &format!(
            r#"{{"consumer": "{BEIJING_MT}", "method": "getComment", "attributes": {{"group": "idx_nothing"}}}}"#
        ),
        "1",
    );
    assert_eq!(out.status.code(), Some(3));
    let v = json(&out);
    assert_eq!(indexes(&v), Vec::<u64>::new());
    assert_eq!(v["error"]["router"], "group");
    assert_eq!(v["trace"].as_array().unwrap().len(), 3);
}

#[test]
fn explain_prints_a_table_with_one_row_per_router() {
    let out = routechain(&[
        "explain",
        "--chain",
        "rules/examples/full.chain.yaml",
        "--providers",
        "rules/examples/providers.txt",
        "--request",
        "rules/examples/request.json",
        "--seed",
        "3",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with(|c: char| c.is_ascii_digit()))
        .collect();
    assert_eq!(rows.len(), 4, "{text}");
    assert!(
        rows[2].contains("group") && rows[2].contains("idx_user"),
        "{text}"
    );
    assert!(text.contains("result: 1 provider(s)"), "{text}");
}
