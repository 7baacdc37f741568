//! `routechain simulate` through the real binary: balancers from the chain file, seeded
//! repeatability, rows with no call left out unless `--all`, `--group-by`, `--against` on
//! the same seeded draws, exit 3 with the route error when every call found no provider.

mod common;

use common::{Scratch, assert_exit, json, routechain, run_samples, stderr, stdout, workspace};
use serde_json::Value;

const WEIGHTED: &str = "\
dubbo://10.0.0.1:20880/svc?weight=100&idc=a
dubbo://10.0.0.2:20880/svc?weight=300&idc=b
dubbo://10.0.0.3:20880/svc?weight=0&idc=b
dubbo://10.0.0.4:20880/svc?weight=100
";

fn simulate(s: &Scratch, chain: &str, providers: &str, extra: &[&str]) -> std::process::Output {
    let chain = s.write("chain.yaml", chain);
    let providers = s.write("providers.txt", providers);
    let request = s.write("request.json", r#"{"method": "get", "arguments": ["u1"]}"#);
    let mut args = vec![
        "simulate",
        "--chain",
        chain.to_str().unwrap(),
        "--providers",
        providers.to_str().unwrap(),
        "--request",
        request.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    routechain(&args)
}

/// `(index, count)` of every row.
fn counts(v: &Value) -> Vec<(u64, u64)> {
    v["counts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["index"].as_u64().unwrap(), c["count"].as_u64().unwrap()))
        .collect()
}

#[test]
fn random_follows_weights_is_repeatable_and_zero_rows_are_left_out() {
    let s = Scratch::new("sim-random");
    let args = ["--calls", "40000", "--seed", "3"];
    let out = simulate(&s, "routers: []\n", WEIGHTED, &args);
    assert_exit(&out, 0);
    let v = json(&out);
    assert_eq!(v["calls"], 40000);
    assert_eq!(v["empty"], 0);
    assert_eq!(v["counts"][1]["address"], "10.0.0.2:20880");
    let c = counts(&v);
    assert_eq!(
        c.iter().map(|r| r.0).collect::<Vec<_>>(),
        [0, 1, 3],
        "weight 0: no row"
    );
    assert_eq!(c.iter().map(|r| r.1).sum::<u64>(), 40000);
    assert!((c[1].1 as f64 / 40000.0 - 0.6).abs() < 0.01, "{c:?}");
    assert_eq!(
        counts(&json(&simulate(&s, "routers: []\n", WEIGHTED, &args))),
        c
    );
    // --all lists the row with no call.
    let mut all = args.to_vec();
    all.push("--all");
    let c_all = counts(&json(&simulate(&s, "routers: []\n", WEIGHTED, &all)));
    assert_eq!(c_all.len(), 4);
    assert_eq!(c_all[2], (2, 0));
}

#[test]
fn roundrobin_and_consistenthash_from_the_chain_file() {
    let s = Scratch::new("sim-rr");
    let out = simulate(
        &s,
        "routers: []\nload_balance: roundrobin\n",
        WEIGHTED,
        &["--calls", "500"],
    );
    assert_eq!(counts(&json(&out)), [(0, 100), (1, 300), (3, 100)]);
    let out = simulate(
        &s,
        "routers: []\nmethods:\n  get: {load_balance: consistenthash, hash_key: \"arguments[0]\"}\n",
        WEIGHTED,
        &["--calls", "500"],
    );
    let c = counts(&json(&out));
    assert_eq!(c.len(), 1, "one key, one provider: {c:?}");
    assert_eq!(c[0].1, 500);
}

#[test]
fn group_by_sums_calls_per_parameter_value() {
    let s = Scratch::new("sim-group-by");
    let out = simulate(
        &s,
        "routers: []\nload_balance: roundrobin\n",
        WEIGHTED,
        &["--calls", "500", "--group-by", "idc"],
    );
    assert_exit(&out, 0);
    let v = json(&out);
    assert_eq!(
        v["groups"],
        serde_json::json!([
            {"value": "", "count": 100, "share": 20.0},
            {"value": "a", "count": 100, "share": 20.0},
            {"value": "b", "count": 300, "share": 60.0},
        ])
    );
    let out = simulate(
        &s,
        "routers: []\nload_balance: roundrobin\n",
        WEIGHTED,
        &["--calls", "500", "--group-by", "idc", "--format", "table"],
    );
    let text = stdout(&out);
    let b = text.lines().find(|l| l.starts_with("b ")).unwrap();
    assert!(
        b.contains("300") && b.contains("60.00%") && b.contains('█'),
        "{text}"
    );
    assert!(text.lines().any(|l| l.starts_with("(none)")), "{text}");
}

#[test]
fn against_runs_both_chains_on_the_same_draws() {
    let out = routechain(&[
        "simulate",
        "--chain",
        "rules/examples/full.chain.yaml",
        "--providers",
        "rules/examples/providers.txt",
        "--request",
        "rules/examples/request.json",
        "--group-by",
        "idc",
        "--against",
        "rules/examples/full-next.chain.yaml",
        "--calls",
        "20000",
    ]);
    assert_exit(&out, 0);
    let v = json(&out);
    let share = |r: &str, idc: &str| {
        v[r]["groups"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["value"] == idc)
            .map(|g| g["share"].as_f64().unwrap())
            .unwrap()
    };
    assert!((share("base", "mt") - 50.0).abs() < 2.0, "{v}");
    assert!((share("against", "mt") - 80.0).abs() < 2.0, "{v}");
    assert!((share("against", "zf") - 20.0).abs() < 2.0, "{v}");
    // The same chain against itself: the same draws, so the same counts exactly.
    let same = routechain(&[
        "simulate",
        "--chain",
        "rules/examples/full.chain.yaml",
        "--providers",
        "rules/examples/providers.txt",
        "--request",
        "rules/examples/request.json",
        "--against",
        "rules/examples/full.chain.yaml",
    ]);
    let v = json(&same);
    assert_eq!(v["base"], v["against"]);
    // The table shows both shares and the change per row.
    let out = routechain(&[
        "simulate",
        "--chain",
        "rules/examples/full.chain.yaml",
        "--providers",
        "rules/examples/providers.txt",
        "--request",
        "rules/examples/request.json",
        "--against",
        "rules/examples/full-next.chain.yaml",
        "--format",
        "table",
    ]);
    let text = stdout(&out);
    assert!(
        text.contains("against") && text.contains("change"),
        "{text}"
    );
    let mt = text.lines().find(|l| l.contains("10.1.1.1:20880")).unwrap();
    assert!(mt.contains('+'), "{mt}");
}

#[test]
fn every_call_without_a_provider_exits_3_with_the_route_error() {
    let s = Scratch::new("sim-empty");
    let out = simulate(
        &s,
        "routers:\n  - type: condition\n    rule:\n      force: true\n      conditions: [\"=> idc = nowhere\"]\n",
        WEIGHTED,
        &["--calls", "25"],
    );
    assert_exit(&out, 3);
    let v = json(&out);
    assert_eq!(v["empty"], 25);
    assert_eq!(v["counts"].as_array().unwrap().len(), 0);
    assert_eq!(v["error"]["kind"], "no_provider");
    assert!(
        v["error"]["router"]
            .as_str()
            .unwrap()
            .starts_with("condition"),
        "{v}"
    );
    // No provider at all: exit 3 too, no router to blame.
    let out = simulate(&s, "routers: []\n", "# none\n", &["--calls", "5"]);
    assert_exit(&out, 3);
    assert_eq!(json(&out)["error"]["router"], Value::Null);
}

#[test]
fn table_has_shares_and_bars() {
    let s = Scratch::new("sim-table");
    let out = simulate(
        &s,
        "routers: []\nload_balance: roundrobin\n",
        WEIGHTED,
        &["--calls", "500", "--format", "table"],
    );
    let text = stdout(&out);
    assert!(text.contains("calls: 500"), "{text}");
    assert!(text.contains("load_balance: roundrobin"), "{text}");
    let line = text.lines().find(|l| l.contains("10.0.0.2:20880")).unwrap();
    assert!(
        line.contains("300") && line.contains("60.00%") && line.contains('█'),
        "{line}"
    );
    assert!(!text.contains("10.0.0.3:20880"), "no call, no row: {text}");
}

#[test]
fn a_bad_balancer_is_reported_with_its_location() {
    let s = Scratch::new("sim-bad");
    let out = simulate(&s, "routers: []\nload_balance: fastest\n", WEIGHTED, &[]);
    assert_exit(&out, 2);
    let err = stderr(&out);
    assert!(err.contains("chain.yaml:2:15"), "{err}");
    assert!(err.contains("unknown load balancer `fastest`"), "{err}");
}

/// The `simulate` sample of `docs/load-balancing.md` is what the command prints.
#[test]
fn docs_load_balancing_sample_is_what_simulate_prints() {
    let doc = std::fs::read_to_string(workspace().join("docs/load-balancing.md")).unwrap();
    let (samples, _) = run_samples(&doc, "docs/load-balancing.md");
    assert_eq!(samples, 2);
}

/// The providers' `loadbalance=roundrobin` picks the balancer when the chain file names
/// none (Dubbo reads it from the first provider), and the JSON says where each call
/// parameter came from.
#[test]
fn the_providers_loadbalance_and_timeout_apply_and_the_json_names_their_source() {
    let s = Scratch::new("sim-params");
    let providers = "\
dubbo://10.0.0.1:20880/svc?loadbalance=roundrobin&timeout=250&retries=7&methods=get&get.timeout=80
dubbo://10.0.0.2:20880/svc?loadbalance=roundrobin&timeout=250&retries=7&methods=get&get.timeout=80
";
    let out = simulate(&s, "routers: []\n", providers, &["--calls", "10"]);
    assert_exit(&out, 0);
    let v = json(&out);
    assert_eq!(counts(&v), [(0, 5), (1, 5)], "round robin: exactly even");
    let params: Vec<(String, String, String)> = v["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let f = |k: &str| p[k].as_str().unwrap().to_string();
            (f("key"), f("value"), f("source"))
        })
        .collect();
    let want = [
        ("timeout", "80ms", "provider URL (method)"),
        ("retries", "2", "default"),
        ("loadbalance", "roundrobin", "provider URL"),
        ("cluster", "failover", "default"),
        ("forks", "2", "default"),
        ("weight", "100", "default"),
        ("warmup", "600000ms", "default"),
    ];
    let want: Vec<(String, String, String)> = want
        .iter()
        .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
        .collect();
    assert_eq!(params, want);
    // The chain file names a balancer: the consumer's wins over the providers'.
    let out = simulate(
        &s,
        "routers: []\nload_balance: random\n",
        providers,
        &["--calls", "10"],
    );
    let v = json(&out);
    assert_eq!(v["parameters"][2]["value"], "random");
    assert_eq!(v["parameters"][2]["source"], "consumer");
}
