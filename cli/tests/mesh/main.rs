//! The real `routechain` binary on chains with a `mesh` entry: `check` locates every problem
//! of a multi-document rule file by file, line, column and field path; `route` routes the
//! shipped example.

use std::path::PathBuf;
use std::process::{Command, Output};

fn routechain(args: &[&str], dir: &std::path::Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_routechain"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run routechain")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("routechain-mesh-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn check_locates_mesh_rule_errors_in_the_rule_file() {
    let dir = scratch("check");
    std::fs::write(
        dir.join("shop.MESHAPPRULE"),
        "kind: DestinationRule\n\
         metadata: { name: shop }\n\
         spec:\n\
         \x20 subsets: [{ name: v1, labels: { version: v1 } }]\n\
         ---\n\
         kind: VirtualService\n\
         metadata: { name: shop }\n\
         spec:\n\
         \x20 dubbo:\n\
         \x20   - routedetail:\n\
         \x20       - route:\n\
         \x20           - weight: \"10\"\n\
         \x20             destination: { subset: v1 }\n\
         \x20       - match: [{ attachments: { dubboContext: { lane: gray } } }]\n\
         \x20         route: [{ destination: { subset: v1 } }]\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("c.chain.yaml"),
        "routers:\n  - type: mesh\n    app: shop\n    empty: sometimes\n    rule_file: shop.MESHAPPRULE\n",
    )
    .unwrap();
    let out = routechain(&["check", "c.chain.yaml"], &dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{stdout}\n{stderr}");
    let all = format!("{stdout}{stderr}");
    // Each problem on a line `file:line:column: ... field path: message`.
    let located = |at: &str, path: &str| {
        all.lines()
            .any(|l| l.starts_with(at) && l.contains(&format!(" {path}: ")))
    };
    // The entry option, in the chain file.
    assert!(located("c.chain.yaml:4:12:", "routers[0].empty"), "{all}");
    // The weight given as a string, in the rule file (document 1, line 12).
    assert!(
        located(
            "shop.MESHAPPRULE:12:23:",
            "[1].spec.dubbo[0].routedetail[0].route[0].weight"
        ),
        "{all}"
    );
    // A string where a string match is expected (line 14).
    assert!(
        located(
            "shop.MESHAPPRULE:14:58:",
            "[1].spec.dubbo[0].routedetail[1].match[0].attachments.dubboContext.lane"
        ),
        "{all}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn route_runs_the_shipped_example() {
    let examples = routechain::rules::examples_dir().join("mesh");
    let out = routechain(
        &[
            "route",
            "--chain",
            "mesh.chain.yaml",
            "--providers",
            "providers.txt",
            "--request",
            "gray-request.json",
            "--explain",
        ],
        &examples,
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let addresses: Vec<&str> = json["providers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["address"].as_str().unwrap())
        .collect();
    assert_eq!(addresses, ["10.0.0.4:20880", "10.0.0.5:20880"]);
    let reason = json["trace"][0]["reason"].as_str().unwrap();
    assert!(reason.contains("detail \"gray-requests\""), "{reason}");
}

/// `(value, share)` of every group of `simulate --format json` output.
fn groups(stdout: &[u8]) -> Vec<(String, f64)> {
    let v: serde_json::Value = serde_json::from_slice(stdout).unwrap();
    v["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                g["value"].as_str().unwrap().to_string(),
                g["share"].as_f64().unwrap(),
            )
        })
        .collect()
}

/// `simulate` over the shipped example shows the weighted split per subset: the
/// `vip-orders` detail sends 20% to `canary` (version v2) and 80% to `stable` (v1).
#[test]
fn simulate_shows_the_weighted_split_per_subset() {
    let examples = routechain::rules::examples_dir().join("mesh");
    let dir = scratch("simulate");
    let request = dir.join("vip.json");
    std::fs::write(
        &request,
        r#"{"method":"getOrder","arguments":["vip-7",1500],"parameter_types":["java.lang.String","long"]}"#,
    )
    .unwrap();
    let simulate = |chain: &str, request: &std::path::Path| {
        let out = routechain(
            &[
                "simulate",
                "--chain",
                chain,
                "--providers",
                "providers.txt",
                "--request",
                request.to_str().unwrap(),
                "--calls",
                "20000",
                "--group-by",
                "version",
                "--format",
                "json",
            ],
            &examples,
        );
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        groups(&out.stdout)
    };
    let split = simulate("mesh.chain.yaml", &request);
    assert_eq!(split.len(), 2, "{split:?}");
    assert_eq!((split[0].0.as_str(), split[1].0.as_str()), ("v1", "v2"));
    assert!((split[0].1 - 80.0).abs() <= 2.0, "{split:?}");
    assert!((split[1].1 - 20.0).abs() <= 2.0, "{split:?}");

    // With `hash_key` on the entry, one user's calls all land in one subset.
    let sticky = dir.join("sticky.chain.yaml");
    let text = std::fs::read_to_string(examples.join("mesh.chain.yaml"))
        .unwrap()
        .replace(
            "rule_file: shop-detail.MESHAPPRULE",
            &format!(
                "rule_file: {}\n    hash_key: \"attachments[uid]\"",
                examples.join("shop-detail.MESHAPPRULE").display()
            ),
        );
    std::fs::write(&sticky, text).unwrap();
    let user = dir.join("user.json");
    std::fs::write(
        &user,
        r#"{"method":"getOrder","arguments":["vip-7",1500],"parameter_types":["java.lang.String","long"],"attachments":{"uid":"alice"}}"#,
    )
    .unwrap();
    let one = simulate(sticky.to_str().unwrap(), &user);
    assert_eq!(one.len(), 1, "one subset for one user: {one:?}");
    assert_eq!(one[0].1, 100.0);
    let _ = std::fs::remove_dir_all(&dir);
}
