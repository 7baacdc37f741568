//! `routechain test CASES.yaml` through the real binary: the shipped cases pass, failures
//! say what came back against what was expected, coverage names what no test reached,
//! invalid cases are located, and the exit codes.

mod common;

use common::{Scratch, assert_exit, json, routechain, stderr, stdout};

#[test]
fn the_shipped_cases_for_the_full_chain_pass_and_cover_it() {
    let out = routechain(&["test", "rules/examples/CASES.yaml"]);
    assert_exit(&out, 0);
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines.iter().filter(|l| l.starts_with("PASS  ")).count() >= 5,
        "{text}"
    );
    assert!(
        text.contains("coverage: every condition, tag, route-table cell and group was reached"),
        "{text}"
    );
    assert_eq!(*lines.last().unwrap(), "test: 5 passed, 0 failed");
}

const CHAIN: &str = "\
routers:
  - type: condition
    rule:
      conditions:
        - method = refund => version = 2
        - method = audit => version = 3
  - type: group
  - type: idc-weight
    rule:
      idcs: {hz: [hz1, hz2]}
      route_tables: {hz: {hz1: 70, hz2: 30}}
";

const PROVIDERS: &str = "\
dubbo://10.0.0.1:20880/com.acme.OrderService?version=1&region=hz&idc=hz1&group=blue
dubbo://10.0.0.2:20880/com.acme.OrderService?version=1&region=hz&idc=hz2&group=blue
dubbo://10.0.0.3:20880/com.acme.OrderService?version=2&region=hz&idc=hz1&group=green
dubbo://10.0.0.4:20880/com.acme.OrderService?version=2&region=hz&idc=hz1&group=green
";

fn cases(s: &Scratch, tests: &str) -> String {
    s.write("order.chain.yaml", CHAIN);
    s.write("providers.txt", PROVIDERS);
    s.write(
        "CASES.yaml",
        &format!("chain: order.chain.yaml\nproviders: providers.txt\ntests:\n{tests}"),
    )
    .display()
    .to_string()
}

const HZ: &str = "consumer://10.1.0.1/com.acme.OrderService?region=hz&idc=hz1";

#[test]
fn the_issue_cases_pass_and_coverage_names_what_no_test_reached() {
    let s = Scratch::new("golden-pass");
    let file = cases(
        &s,
        &format!(
            "  - name: refund only reaches version 2
    request: {{method: refund, consumer: \"{HZ}\"}}
    expect: {{addresses: [\"10.0.0.3:20880\", \"10.0.0.4:20880\"]}}
  - name: an unknown group has no provider
    request: {{attributes: {{group: purple}}, consumer: \"{HZ}\"}}
    expect: {{no_provider: true}}
  - name: hangzhou split
    request: {{consumer: \"consumer://10.1.0.1/com.acme.OrderService?region=hz\"}}
    calls: 20000
    seed: 1
    expect: {{share_by: idc, shares: {{hz1: 70, hz2: 30}}, tolerance: 2}}
"
        ),
    );
    let out = routechain(&["test", &file]);
    assert_exit(&out, 0);
    let text = stdout(&out);
    assert_eq!(
        text,
        format!(
            "\
PASS  refund only reaches version 2
PASS  an unknown group has no provider
PASS  hangzhou split
coverage: 3 reached by no test:
  routers[0] (condition) condition #1: method = audit => version = 3
  routers[1] (group) group blue
  routers[1] (group) group green
test: 3 passed, 0 failed
"
        )
    );
    let out = routechain(&["test", "--format", "json", &file]);
    assert_exit(&out, 0);
    let v = json(&out);
    assert_eq!(v["passed"], 3);
    assert_eq!(v["failed"], 0);
    assert_eq!(v["tests"][0]["pass"], true);
    assert_eq!(v["uncovered"].as_array().unwrap().len(), 3);
}

#[test]
fn failures_say_what_came_back_against_what_was_expected() {
    let s = Scratch::new("golden-fail");
    let file = cases(
        &s,
        &format!(
            "  - name: wrong set
    request: {{method: refund, consumer: \"{HZ}\"}}
    expect: {{addresses: [\"10.0.0.3:20880\"]}}
  - name: expected none
    request: {{method: refund, consumer: \"{HZ}\"}}
    expect: {{no_provider: true}}
  - name: wrong split
    request: {{consumer: \"consumer://10.1.0.1/com.acme.OrderService?region=hz\"}}
    calls: 10000
    expect: {{share_by: idc, shares: {{hz1: 50, hz2: 50}}, tolerance: 2}}
"
        ),
    );
    let out = routechain(&["test", &file]);
    assert_exit(&out, 1);
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "FAIL  wrong set: got [10.0.0.3:20880, 10.0.0.4:20880], expected [10.0.0.3:20880]"
    );
    assert_eq!(
        lines[1],
        "FAIL  expected none: got [10.0.0.3:20880, 10.0.0.4:20880], expected no provider"
    );
    assert!(
        lines[2].starts_with("FAIL  wrong split: idc hz1 "),
        "{text}"
    );
    assert!(lines[2].contains("(expected 50 ± 2)"), "{text}");
    assert_eq!(*lines.last().unwrap(), "test: 0 passed, 3 failed");
}

#[test]
fn invalid_cases_are_located_and_exit_2() {
    let s = Scratch::new("golden-invalid");
    let file = cases(
        &s,
        "  - name: no expectation\n    request: {method: refund}\n    expect: {share_by: idc}\n",
    );
    let out = routechain(&["test", &file]);
    assert_exit(&out, 2);
    let err = stderr(&out);
    assert!(
        err.contains(&format!("{file}:6:13: tests[0].expect: expect one of")),
        "{err}"
    );
    let file = cases(
        &s,
        "  - name: typo\n    reqest: {}\n    expect: {no_provider: true}\n",
    );
    let out = routechain(&["test", &file]);
    assert_exit(&out, 2);
    assert!(
        stderr(&out).contains("unknown field `reqest`"),
        "{}",
        stderr(&out)
    );
    let file = s
        .write(
            "missing.yaml",
            "chain: nope.yaml\nproviders: providers.txt\ntests:\n  - name: t\n    expect: {no_provider: true}\n",
        )
        .display()
        .to_string();
    let out = routechain(&["test", &file]);
    assert_exit(&out, 2);
    assert!(
        stderr(&out).contains("nope.yaml:1:1: cannot read"),
        "{}",
        stderr(&out)
    );
}
