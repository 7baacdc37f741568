//! The IDC-weight router's spillover, panic threshold and subnets through the real binary:
//! the worked example of `docs/group-and-idc.md` is what `simulate` prints, `simulate
//! --explain` carries the first call's trace, and `check` locates bad options.

mod common;

use common::{Scratch, assert_exit, json, routechain, run_samples, stderr, workspace};

/// The `simulate` sample of `docs/group-and-idc.md` (41.2% / 58.8%) is what it prints.
#[test]
fn docs_group_and_idc_sample_is_what_simulate_prints() {
    let doc = std::fs::read_to_string(workspace().join("docs/group-and-idc.md")).unwrap();
    let (samples, shown) = run_samples(&doc, "docs/group-and-idc.md");
    assert_eq!(samples, 1);
    assert!(shown.contains("41.18%"), "{shown}");
}

#[test]
fn simulate_explain_carries_the_first_calls_trace_in_json() {
    let out = routechain(&[
        "simulate",
        "--chain",
        "rules/examples/idc-weight/spillover.chain.yaml",
        "--providers",
        "rules/examples/idc-weight/spillover.providers.txt",
        "--request",
        "rules/examples/idc-weight/empty.request.json",
        "--calls",
        "1000",
        "--explain",
    ]);
    assert_exit(&out, 0);
    let v = json(&out);
    let reason = v["trace"][0]["reason"].as_str().unwrap();
    assert!(
        reason.contains(
            "effective weights mt 50 × 5 of 10 healthy → 35.0, zf 50 × 4 of 4 healthy → 50.0"
        ),
        "{reason}"
    );
    assert_eq!(v["trace"][0]["router"], "idc-weight");
}

#[test]
fn check_locates_bad_spillover_options() {
    let s = Scratch::new("idc-spill-check");
    let chain = s.write(
        "bad.chain.yaml",
        "routers:\n  - type: idc-weight\n    rule:\n      idcs: {beijing: [mt, zf]}\n      spillover: {overprovisioning: 0.5}\n      idc_cidrs: {mt: [\"10.20.0.0/16\"], zf: [\"10.20.1.0/24\"]}\n",
    );
    let out = routechain(&["check", chain.to_str().unwrap()]);
    assert_exit(&out, 2);
    let err = format!("{}{}", common::stdout(&out), stderr(&out));
    assert!(err.contains("bad.chain.yaml:5:37"), "{err}");
    assert!(
        err.contains("routers[0].rule.spillover.overprovisioning"),
        "{err}"
    );
    assert!(err.contains("bad.chain.yaml:6:46"), "{err}");
    assert!(
        err.contains(
            "subnet `10.20.1.0/24` of IDC `zf` overlaps subnet `10.20.0.0/16` of IDC `mt`"
        ),
        "{err}"
    );
}
