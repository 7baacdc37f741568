//! CLI tests: run the real `routechain` binary on files, check stdout, stderr and exit codes.

use routechain_testkit as support;

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

/// Runs `routechain CMD --chain C --providers P --request R`.
fn run_inputs(cmd: &str, chain: &Path, providers: &Path, request: &Path) -> Output {
    routechain(&[
        cmd,
        "--chain",
        chain.to_str().unwrap(),
        "--providers",
        providers.to_str().unwrap(),
        "--request",
        request.to_str().unwrap(),
    ])
}

fn workspace() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root")
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
    let out = run_inputs("route", &chain, &providers, &request);
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
    let out = run_inputs("route", &chain, &providers, &request);
    assert_eq!(out.status.code(), Some(3));
    let v = json(&out);
    assert_eq!(indexes(&v), Vec::<u64>::new());
    assert_eq!(v["error"]["kind"], "no_provider");
}

#[test]
fn invalid_inputs_exit_2_naming_file_line_and_column() {
    let s = Scratch::new("invalid");
    let chain = s.write("chain.yaml", "routers:\n  - type: conditon\n");
    let providers = s.write(
        "providers.txt",
        "dubbo://10.0.0.1:20880/a\ndubbo://10.0.0.2:99999/a\n",
    );
    let request = s.write("request.json", "{\"method\": 5}");
    let out = run_inputs("route", &chain, &providers, &request);
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
    // The chain's router types are checked when it is read: every input's problems at once.
    assert!(
        stderr.contains(&format!(
            "{}:2:11: routers[0].type: unknown router type `conditon`",
            chain.display()
        )) && stderr.contains("did you mean `condition`?"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());

    // Alone, too.
    let providers = s.write("providers.txt", PROVIDERS);
    let request = s.write("request.json", "{}");
    let out = run_inputs("route", &chain, &providers, &request);
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
fn check_reports_refused_plugin_libraries_with_path_and_reason() {
    let s = Scratch::new("check-plugins");
    s.write("libnot_a_plugin.so", "plain text, not a shared library\n");
    let chain = s.write(
        "plugins.yaml",
        "routers:\n  - type: plugin\n    path: libmissing.so\n  - type: plugin\n    path: libnot_a_plugin.so\n",
    );
    let out = routechain(&["check", chain.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stdout);
    let missing = s.0.join("libmissing.so");
    assert!(
        stderr.contains(&format!(
            "{}:3:11: error[RC002]: routers[0].path: plugin library {} does not exist",
            chain.display(),
            missing.display()
        )),
        "{stderr}"
    );
    let not_lib = s.0.join("libnot_a_plugin.so");
    assert!(
        stderr.contains(&format!(
            "{}:5:11: error[RC002]: routers[1].path: cannot load plugin library {}:",
            chain.display(),
            not_lib.display()
        )),
        "{stderr}"
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("plugins.yaml: 2 errors"));
}

#[test]
fn every_command_has_help_with_an_example() {
    for cmd in [
        vec!["--help"],
        vec!["route", "--help"],
        vec!["explain", "--help"],
        vec!["check", "--help"],
        vec!["test", "--help"],
        vec!["simulate", "--help"],
        vec!["completions", "--help"],
        vec!["watch", "--help"],
        vec!["zk", "--help"],
        vec!["zk", "put-rule", "--help"],
        vec!["zk", "get-rule", "--help"],
        vec!["zk", "delete-rule", "--help"],
        vec!["zk", "register", "--help"],
        vec!["zk", "unregister", "--help"],
        vec!["zk", "providers", "--help"],
    ] {
        let out = routechain(&cmd);
        assert_eq!(out.status.code(), Some(0), "{cmd:?}");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("Example"), "{cmd:?}: {text}");
    }
}

/// A running `routechain watch`: its stdout and stderr lines arrive on channels; killed on
/// drop.
struct Watch {
    child: std::process::Child,
    stdout: std::sync::mpsc::Receiver<String>,
    stderr: std::sync::mpsc::Receiver<String>,
}

impl Watch {
    fn spawn(args: &[&str]) -> Self {
        use std::io::BufRead;
        let mut child = Command::new(env!("CARGO_BIN_EXE_routechain"))
            .arg("watch")
            .args(args)
            .env(
                "XDG_CACHE_HOME",
                std::env::temp_dir().join(format!("routechain-cli-cache-{}", std::process::id())),
            )
            .current_dir(workspace())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn routechain watch");
        let lines = |r: Box<dyn std::io::Read + Send>| {
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                for line in std::io::BufReader::new(r).lines() {
                    let Ok(line) = line else { break };
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
            rx
        };
        let stdout = lines(Box::new(child.stdout.take().unwrap()));
        let stderr = lines(Box::new(child.stderr.take().unwrap()));
        Watch {
            child,
            stdout,
            stderr,
        }
    }

    /// The next stdout line, parsed.
    fn next_json(&self) -> Value {
        let line = self
            .stdout
            .recv_timeout(std::time::Duration::from_secs(30))
            .unwrap_or_else(|_| {
                panic!(
                    "no stdout line; stderr: {:?}",
                    self.stderr.try_iter().collect::<Vec<_>>()
                )
            });
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    }

    /// Skips stderr lines until one contains `needle`; returns it.
    fn stderr_with(&self, needle: &str) -> String {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.stderr.recv_timeout(left) {
                Ok(line) if line.contains(needle) => return line,
                Ok(line) => seen.push(line),
                Err(_) => panic!("no stderr line with {needle:?}; saw {seen:#?}"),
            }
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn addresses(v: &Value) -> Vec<String> {
    v["providers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["address"].as_str().unwrap().to_string())
        .collect()
}

/// Replaces a file like an editor: write a temporary file, rename it over the original.
fn replace(path: &Path, text: &str) {
    let tmp = path.with_extension("swp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

#[test]
fn watch_prints_a_route_line_per_applied_change_and_the_reason_of_every_refusal() {
    let s = Scratch::new("watch");
    let chain = s.write("chain.yaml", "routers: []\n");
    let providers = s.write("providers.txt", PROVIDERS);
    let request = s.write("request.json", "{}");
    let w = Watch::spawn(&[
        "--chain",
        chain.to_str().unwrap(),
        "--providers",
        providers.to_str().unwrap(),
        "--request",
        request.to_str().unwrap(),
    ]);
    // At start: the route command's JSON plus the generation, on one line.
    let v = w.next_json();
    assert_eq!(v["generation"], 1);
    assert_eq!(indexes(&v), [0, 1, 2]);
    assert_eq!(v["providers"][0]["address"], "10.20.3.3:20880");
    assert!(v.get("error").is_none());

    replace(
        &providers,
        "dubbo://10.20.3.5:20880/com.foo.BarService\ndubbo://10.20.3.6:20880/com.foo.BarService\n",
    );
    let v = w.next_json();
    assert_eq!(v["generation"], 2);
    assert_eq!(addresses(&v), ["10.20.3.5:20880", "10.20.3.6:20880"]);
    w.stderr_with("applied generation 2: providers from");

    // Bad edits: a bad provider line is skipped alone (here leaving none: held back), a bad
    // chain file refused with its reason; nothing routed differently.
    replace(&providers, "dubbo://10.20.3.7:99999/com.foo.BarService\n");
    let line = w.stderr_with("skipped provider");
    assert!(
        line.contains(&format!(
            "{}:1:19: invalid provider URL",
            providers.display()
        )),
        "{line}"
    );
    w.stderr_with("held back providers from");
    replace(&chain, "routers:\n  - type: no-such-router\n");
    let line = w.stderr_with("refused chain file");
    assert!(
        line.contains(&format!(
            "{}:2:11: routers[0].type: unknown router type",
            chain.display()
        )),
        "{line}"
    );
    // An empty provider list is held back.
    replace(&providers, "# nobody\n");
    w.stderr_with("held back providers from");

    // A good edit applies: the next line is generation 3 (the refusals made none).
    replace(&chain, "routers: []  # fixed\n");
    let v = w.next_json();
    assert_eq!(v["generation"], 3);
    assert_eq!(addresses(&v), ["10.20.3.5:20880", "10.20.3.6:20880"]);

    // Service settings follow the chain file too: a bad balancer is refused with its
    // location, a good one applies (and the report says the settings changed).
    replace(&chain, "load_balance: fastest\nrouters: []\n");
    let line = w.stderr_with("refused chain file");
    assert!(
        line.contains(&format!(
            "{}:1:15: load_balance: unknown load balancer `fastest`",
            chain.display()
        )),
        "{line}"
    );
    replace(&chain, "load_balance: roundrobin\nrouters: []\n");
    let v = w.next_json();
    assert_eq!(v["generation"], 4);
    let line = w.stderr_with("applied generation 4: chain file");
    assert!(line.contains("(service settings changed)"), "{line}");
}

#[test]
fn watch_exits_2_when_the_starting_files_are_invalid() {
    let s = Scratch::new("watch-invalid");
    let chain = s.write("chain.yaml", "routers:\n  - type: nope\n");
    let out = routechain(&["watch", "--chain", chain.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("unknown router type"), "{stderr}");
    let chain = s.write("chain.yaml", "routers: []\n");
    let out = routechain(&[
        "watch",
        "--chain",
        chain.to_str().unwrap(),
        "--zookeeper",
        "127.0.0.1:1",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs a service"));
}

#[test]
fn zk_commands_seed_dubbos_layout_and_watch_follows_zookeeper() {
    let zk = support::zookeeper::ZooKeeper::start("cli");
    let addr = zk.address();
    let s = Scratch::new("zk");
    let url1 = "dubbo://10.20.3.3:20880/com.foo.BarService?region=hangzhou";
    let url2 = "dubbo://10.20.3.4:20880/com.foo.BarService?region=beijing";
    let out = routechain(&[
        "zk",
        "register",
        "--persistent",
        "--zookeeper",
        &addr,
        "--service",
        "com.foo.BarService",
        url1,
        url2,
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = routechain(&[
        "zk",
        "providers",
        "--zookeeper",
        &addr,
        "--service",
        "com.foo.BarService",
    ]);
    // Sorted: the 10.20.3.3 URL first.
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("{url1}\n{url2}\n")
    );

    // Rules: put, get, delete.
    let rule = s.write(
        "rule.yaml",
        "configVersion: v3.0\nconditions:\n  - => region = hangzhou\n",
    );
    let node = [
        "--zookeeper",
        addr.as_str(),
        "--key",
        "com.foo.BarService::",
        "--type",
        "condition",
    ];
    let out = routechain(&[&["zk", "put-rule"][..], &node, &[rule.to_str().unwrap()]].concat());
    assert_eq!(out.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("/dubbo/config/dubbo/com.foo.BarService::.condition-router")
    );
    let out = routechain(&[&["zk", "get-rule"][..], &node].concat());
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "configVersion: v3.0\nconditions:\n  - => region = hangzhou\n"
    );
    let out = routechain(&[&["zk", "delete-rule"][..], &node].concat());
    assert_eq!(out.status.code(), Some(0));
    let out = routechain(&[&["zk", "get-rule"][..], &node].concat());
    assert_eq!(out.status.code(), Some(1));

    // watch follows the providers and the service's condition rule.
    let chain = s.write(
        "chain.yaml",
        "service: com.foo.BarService\nrouters:\n  - type: condition\n",
    );
    let request = s.write("request.json", "{}");
    let w = Watch::spawn(&[
        "--chain",
        chain.to_str().unwrap(),
        "--zookeeper",
        &addr,
        "--service",
        "com.foo.BarService",
        "--request",
        request.to_str().unwrap(),
    ]);
    // Nothing is printed before the first state is loaded from ZooKeeper.
    let v = w.next_json();
    assert_eq!(addresses(&v), ["10.20.3.3:20880", "10.20.3.4:20880"]);
    w.stderr_with("zookeeper: connected to");
    let out = routechain(&[&["zk", "put-rule"][..], &node, &[rule.to_str().unwrap()]].concat());
    assert_eq!(out.status.code(), Some(0));
    let v = w.next_json();
    assert_eq!(addresses(&v), ["10.20.3.3:20880"]);
    w.stderr_with("rule com.foo.BarService::.condition-router added");
    // A bad rule: refused with its node, line and column; no new line. (`zk put-rule`
    // refuses to write it, so it is written with the library's admin client.)
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let admin = routechain::live::ZkAdmin::connect(&addr).await.unwrap();
        let key = routechain::live::RuleKey::new("com.foo.BarService::", "condition");
        admin.put_rule(&key, "conditions: []\n").await.unwrap();
    });
    let line = w.stderr_with("refused rule com.foo.BarService::.condition-router modified");
    assert!(
        line.contains(
            "zookeeper:/dubbo/config/dubbo/com.foo.BarService::.condition-router:1:13: conditions:"
        ),
        "{line}"
    );
    let before = v["generation"].as_u64().unwrap();
    let out = routechain(&[&["zk", "delete-rule"][..], &node].concat());
    assert_eq!(out.status.code(), Some(0));
    let v = w.next_json();
    assert_eq!(v["generation"].as_u64(), Some(before + 1));
    assert_eq!(addresses(&v), ["10.20.3.3:20880", "10.20.3.4:20880"]);
    let out = routechain(&[
        "zk",
        "unregister",
        "--zookeeper",
        &addr,
        "--service",
        "com.foo.BarService",
        url1,
    ]);
    assert_eq!(out.status.code(), Some(0));
    let v = w.next_json();
    assert_eq!(v["generation"].as_u64(), Some(before + 2));
    assert_eq!(addresses(&v), ["10.20.3.4:20880"]);
}

#[test]
fn zk_commands_exit_4_when_zookeeper_is_unreachable() {
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = routechain(&[
        "zk",
        "providers",
        "--zookeeper",
        &format!("127.0.0.1:{port}"),
        "--service",
        "com.foo.BarService",
    ]);
    assert_eq!(out.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot connect to ZooKeeper"));
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
    assert!(text.contains("result: 1 provider\n"), "{text}");
}

/// The canary plugin library, when built (what `routechain demo` looks for).
fn canary_plugin_built() -> bool {
    let name = format!(
        "{}router_canary{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    );
    std::env::var_os("ROUTECHAIN_CANARY_PLUGIN").is_some()
        || ["release", "debug"]
            .iter()
            .any(|p| workspace().join("target").join(p).join(&name).is_file())
}

#[test]
fn demo_quick_runs_real_calls_and_every_check_passes() {
    let out = routechain(&["demo", "--quick", "--calls", "1600", "--json"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let v = json(&out);
    assert_eq!(out.status.code(), Some(0), "{v:#}\n{stderr}");
    assert_eq!(v["pass"], true);
    let checks = v["checks"].as_array().unwrap();
    // scripts/test.sh builds the plugin first: then the demo chain includes it.
    if canary_plugin_built() {
        assert!(v["plugin"].is_string(), "{v:#}");
        assert_eq!(checks.len(), 16);
        assert!(v["canary_users"].as_u64().unwrap() > 0);
        assert_eq!(v["mixed_users"], 0);
    } else {
        assert!(v["plugin"].is_null());
        assert_eq!(checks.len(), 14);
    }
    assert!(checks.iter().all(|c| c["pass"] == true), "{checks:#?}");
    // Numbers come from the replies: they add up.
    let phases = v["phases"].as_array().unwrap();
    assert_eq!(phases.len(), 5);
    let calls: u64 = phases.iter().map(|p| p["calls"].as_u64().unwrap()).sum();
    assert_eq!(calls, 1600);
    for p in phases {
        let by_provider: u64 = p["by_provider"]
            .as_object()
            .unwrap()
            .values()
            .map(|n| n.as_u64().unwrap())
            .sum();
        assert_eq!(by_provider, p["ok"].as_u64().unwrap());
    }
    assert_eq!(phases[0]["route_table"]["mt"], 90);
    assert_eq!(phases[1]["route_table"]["mt"], 50);
    assert_eq!(v["providers"].as_array().unwrap().len(), 17);
    assert!(phases[2]["failovers"].as_u64().unwrap() > 0);
    assert!(phases[3]["breaker_trips"].as_u64().unwrap() >= 1);
    assert!(phases[4]["gray_on_untagged"].as_u64().unwrap() > 0);
    assert_eq!(phases[4]["attempts_on_killed"], 0);
    // One latency sample per answered call (through the tower layer).
    let answered: u64 = phases.iter().map(|p| p["ok"].as_u64().unwrap()).sum();
    assert_eq!(v["calls"]["samples"].as_u64().unwrap(), answered);
    // The metrics summary: the chain's Prometheus series, as served (docs/metrics.md).
    let metrics: Vec<&str> = v["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap())
        .collect();
    for line in [
        "routechain_calls_total 1600",
        "routechain_updates_total{source=\"file\",result=\"applied\"} 1",
        "routechain_updates_total{source=\"api\",result=\"applied\"} 1",
    ] {
        assert!(metrics.contains(&line), "{line} in {metrics:#?}");
    }
    assert!(
        metrics
            .iter()
            .any(|m| m.starts_with("routechain_breaker_trips_total ")),
        "{metrics:#?}"
    );
    // The shipped example files are untouched (the demo works on a copy).
    let rule =
        std::fs::read_to_string(workspace().join("rules/examples/demo/idc-weight.rule.yaml"))
            .unwrap();
    assert!(rule.contains("beijing: {mt: 90, zf: 10}"));
}

#[test]
fn demo_without_the_plugin_runs_the_built_in_routers_only() {
    let out = routechain(&[
        "demo",
        "--quick",
        "--calls",
        "1000",
        "--no-plugin",
        "--json",
    ]);
    let v = json(&out);
    assert_eq!(out.status.code(), Some(0), "{v:#}");
    assert!(v["plugin"].is_null());
    assert_eq!(v["checks"].as_array().unwrap().len(), 14);
    // Without the plugin the canary=true providers are ordinary: users reach them freely.
    let on_canary: u64 = v["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["canary_calls"].as_u64().unwrap())
        .sum();
    assert!(on_canary > 0);
}

#[test]
fn demo_with_a_missing_directory_is_a_setup_error() {
    let out = routechain(&["demo", "--quick", "--dir", "/nonexistent/routechain-demo"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("demo could not run"));
}
