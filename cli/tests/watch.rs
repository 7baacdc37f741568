//! `routechain watch` against a real ZooKeeper and real files: a change of the chain file's
//! reference re-filters the providers, each state is printed once, and every mode starts
//! with a line saying what it serves.

mod common;

use common::{Running, Scratch, assert_exit, routechain, stderr};
use routechain_testkit as support;
use serde_json::Value;

/// A running `routechain watch`, its output lines on channels; killed on drop.
/// `routechain watch` with `args`.
fn watch(args: &[&str]) -> Running {
    let mut all = vec!["watch"];
    all.extend_from_slice(args);
    Running::spawn(&all)
}

fn addresses(v: &Value) -> Vec<&str> {
    v["providers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["address"].as_str().unwrap())
        .collect()
}

/// Replaces a file like an editor: write a temporary file, rename it over the original.
fn replace(path: &std::path::Path, text: &str) {
    let tmp = path.with_extension("swp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

#[test]
fn a_reference_change_refilters_the_zookeeper_providers_and_each_state_prints_once() {
    let zk = support::zookeeper::ZooKeeper::start("cli-watch");
    let addr = zk.address();
    let s = Scratch::new("watch-reference");
    let service = "com.foo.BarService";
    let out = routechain(&[
        "zk",
        "register",
        "--persistent",
        "--zookeeper",
        &addr,
        "--service",
        service,
        "dubbo://10.0.0.1:20880/com.foo.BarService?version=1.0.0",
        "dubbo://10.0.0.2:20880/com.foo.BarService?version=1.0.0",
    ]);
    assert_exit(&out, 0);
    // A rule node too: the first read then brings two reports (providers unchanged, rule
    // added) about one state.
    let rule = s.write("rule.yaml", "conditions:\n  - => region = hz\n");
    let out = routechain(&[
        "zk",
        "put-rule",
        "--zookeeper",
        &addr,
        "--key",
        "com.foo.BarService::",
        "--type",
        "condition",
        rule.to_str().unwrap(),
    ]);
    assert_exit(&out, 0);
    // No `version:`: the providers (version 1.0.0) do not match.
    let chain = s.write(
        "chain.yaml",
        "service: com.foo.BarService\nrouters:\n  - type: condition\n",
    );
    let request = s.write("request.json", "{}");
    let w = watch(&[
        "--chain",
        chain.to_str().unwrap(),
        "--zookeeper",
        &addr,
        "--request",
        request.to_str().unwrap(),
    ]);
    w.stderr_with("following ZooKeeper");
    let first = w.next_json();
    assert_eq!(addresses(&first), Vec::<&str>::new());
    w.stderr_with("applied generation");
    // Any version: the same providers are read again through the new filter.
    replace(
        &chain,
        "service: com.foo.BarService\nversion: \"*\"\nrouters:\n  - type: condition\n",
    );
    w.stderr_with("changes what to follow in ZooKeeper");
    // The next lines: the chain file applied (still none), then the providers; the first
    // state was printed once (a second line of it would come first here).
    let mut next = w.next_json();
    assert!(
        next["generation"].as_u64() > first["generation"].as_u64(),
        "{first} then {next}"
    );
    if addresses(&next).is_empty() {
        next = w.next_json();
    }
    assert_eq!(addresses(&next), ["10.0.0.1:20880", "10.0.0.2:20880"]);

    // Without --request: the start line says what is followed.
    drop(w);
    let w = watch(&["--chain", chain.to_str().unwrap(), "--zookeeper", &addr]);
    let line = w.stderr_with("following ZooKeeper");
    assert!(
        line.contains(&format!("{addr} for {service} (group=, version=*)")),
        "{line}"
    );

    // `--service` fixes the reference for the run: an edit of the chain file's `version`
    // changes neither the providers nor the rule keys followed.
    drop(w);
    let w = watch(&[
        "--chain",
        chain.to_str().unwrap(),
        "--zookeeper",
        &addr,
        "--service",
        "com.foo.BarService:1.0.0:",
        "--request",
        request.to_str().unwrap(),
    ]);
    let line = w.stderr_with("following ZooKeeper");
    assert!(line.contains("(group=, version=1.0.0)"), "{line}");
    let both = ["10.0.0.1:20880", "10.0.0.2:20880"];
    assert_eq!(addresses(&w.next_json()), both);
    replace(
        &chain,
        "service: com.foo.BarService\nversion: \"2.0.0\"\nrouters:\n  - type: condition\n",
    );
    w.stderr_with("applied generation");
    assert_eq!(addresses(&w.next_json()), both);
    // A rule for the fixed reference's key is still followed.
    let out = routechain(&[
        "zk",
        "put-rule",
        "--zookeeper",
        &addr,
        "--key",
        "com.foo.BarService:1.0.0:",
        "--type",
        "condition",
        rule.to_str().unwrap(),
    ]);
    assert_exit(&out, 0);
    let seen = w.stderr_until("rule com.foo.BarService:1.0.0:.condition-router added");
    assert!(
        !seen.iter().any(|l| l.contains("changes what to follow")),
        "{seen:#?}"
    );
}

#[test]
fn file_mode_says_what_it_serves_and_standard_input_cannot_be_watched() {
    let s = Scratch::new("watch-files");
    let chain = s.write(
        "chain.yaml",
        "service: com.foo.BarService\nrouters:\n  - type: condition\n",
    );
    let providers = s.write(
        "providers.txt",
        "dubbo://10.0.0.1:20880/com.foo.BarService\ndubbo://10.0.0.2:20880/com.foo.BarService\n",
    );
    let w = watch(&[
        "--chain",
        chain.to_str().unwrap(),
        "--providers",
        providers.to_str().unwrap(),
    ]);
    let line = w.stderr_with("routechain watch: serving");
    assert_eq!(
        line,
        format!(
            "routechain watch: serving com.foo.BarService from {} with the providers of {} \
             (2 providers, generation 1); watching them for changes",
            chain.display(),
            providers.display()
        )
    );
    drop(w);
    let out = routechain(&["watch", "--chain", "-"]);
    assert_exit(&out, 2);
    assert!(
        stderr(&out).contains("--chain -: watch follows a file's changes"),
        "{}",
        stderr(&out)
    );
}
