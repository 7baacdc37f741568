//! `routechain check` through the real binary: chain files and rule files, the type from
//! `--type` or a Dubbo node name, codes and severities, the text and JSON formats, the exit
//! codes, every lint; `zk put-rule` validating as `check` does (against a real ZooKeeper);
//! `completions`; `explain --format json`; and every `$ routechain …` sample of
//! `docs/check.md`, run and compared.

mod common;

use common::{Scratch, assert_exit, json, routechain, run_samples, stderr, stdout, workspace};
use serde_json::Value;

use routechain_testkit as support;

/// `(code, line, column, severity)` of every problem in `check --format json` output.
fn problems(v: &Value) -> Vec<(String, u64, u64, String)> {
    v["files"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|f| f["problems"].as_array().unwrap().clone())
        .map(|p| {
            (
                p["code"].as_str().unwrap().to_string(),
                p["line"].as_u64().unwrap(),
                p["column"].as_u64().unwrap(),
                p["severity"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn chain_files_say_1_router_and_2_routers() {
    let s = Scratch::new("check-routers");
    let one = s.write("one.yaml", "routers:\n  - type: group\n");
    let two = s.write("two.yaml", "routers:\n  - type: group\n  - type: mock\n");
    let none = s.write("none.yaml", "routers: []\n");
    let out = routechain(&[
        "check",
        one.to_str().unwrap(),
        two.to_str().unwrap(),
        none.to_str().unwrap(),
    ]);
    assert_exit(&out, 0);
    let text = stdout(&out);
    assert!(text.contains("one.yaml: ok (1 router)\n"), "{text}");
    assert!(text.contains("two.yaml: ok (2 routers)\n"), "{text}");
    assert!(text.contains("none.yaml: ok (0 routers)\n"), "{text}");
    assert!(
        text.ends_with("check: 3 files checked, 0 errors, 0 warnings\n"),
        "{text}"
    );
}

#[test]
fn errors_are_located_with_a_code_and_the_source_line_and_exit_2() {
    let s = Scratch::new("check-errors");
    let bad = s.write("bad.yaml", "routers:\n  - type: nope\n  - priority: 1\n");
    let out = routechain(&["check", bad.to_str().unwrap()]);
    assert_exit(&out, 2);
    let text = stdout(&out);
    let b = bad.display();
    assert!(
        text.contains(&format!(
            "{b}:2:11: error[RC002]: routers[0].type: unknown router type `nope`, expected one of `affinity`, `condition`,"
        )),
        "{text}"
    );
    assert!(text.contains(" 2 |   - type: nope\n"), "{text}");
    assert!(
        text.contains(&format!(
            "{b}:3:5: error[RC002]: routers[1]: missing field `type`"
        )),
        "{text}"
    );
    assert!(text.contains(&format!("{b}: 2 errors\n")), "{text}");
    assert!(
        text.ends_with("check: 1 file checked, 2 errors, 0 warnings\n"),
        "{text}"
    );
}

#[test]
fn a_standalone_rule_file_is_checked_by_its_type_not_as_a_chain() {
    // The demo's IDC-weight rule file: checked as a chain, it would give six problems
    // that do not apply.
    let rule = "rules/examples/demo/idc-weight.rule.yaml";
    let out = routechain(&["check", "--type", "idc-weight", rule]);
    assert_exit(&out, 0);
    assert!(
        stdout(&out).contains(&format!("{rule}: ok (idc-weight rule)\n")),
        "{}",
        stdout(&out)
    );
    // Without a type: say so and how to give one.
    let out = routechain(&["check", rule]);
    assert_exit(&out, 2);
    let text = stdout(&out);
    assert!(
        text.contains(&format!("{rule}:1:1: error[RC003]:")),
        "{text}"
    );
    assert!(text.contains("--type TYPE"), "{text}");
    assert!(text.contains("<key>.condition-router"), "{text}");
    // An unknown type is refused, with a suggestion.
    let out = routechain(&["check", "--type", "idc_weight", rule]);
    assert_exit(&out, 2);
    let text = stdout(&out);
    assert!(
        text.contains("error[RC004]: unknown rule type `idc_weight`, expected one of `affinity`, `condition`, `configurators`, `group`, `idc-weight`, `mesh`, `mock`, `tag`; did you mean `idc-weight`?"),
        "{text}"
    );
}

#[test]
fn the_type_comes_from_a_dubbo_node_name() {
    let s = Scratch::new("check-node-names");
    let cond = "configVersion: v3.0\nconditions:\n  - method = a => region = hz\n";
    let tag = "configVersion: v3.0\nkey: app\ntags:\n  - name: gray\n    addresses: [\"10.0.0.1:20880\"]\n";
    let idc = "idcs:\n  hz: [a, b]\nroute_tables:\n  hz: {a: 60, b: 40}\n";
    for (name, text, what) in [
        (
            "com.foo.BarService::.condition-router",
            cond,
            "condition rule",
        ),
        (
            "com.foo.BarService::.condition-router.yaml",
            cond,
            "condition rule",
        ),
        ("app.tag-router.yml", tag, "tag rule"),
        (
            "com.foo.BarService::.idc-weight-router.yaml",
            idc,
            "idc-weight rule",
        ),
    ] {
        let p = s.write(name, text);
        let out = routechain(&["check", p.to_str().unwrap()]);
        assert_exit(&out, 0);
        assert!(
            stdout(&out).contains(&format!("{name}: ok ({what})")),
            "{}",
            stdout(&out)
        );
    }
    // A tag rule is not a condition rule: the name decides, and the rule is validated as a tag.
    let p = s.write("app.tag-router.yaml", cond);
    let out = routechain(&["check", p.to_str().unwrap()]);
    assert_exit(&out, 2);
    // Override rules (`<key>.configurators`) by their own parser.
    let p = s.write(
        "com.foo.BarService.configurators",
        "configVersion: v2.7\nscope: service\nkey: com.foo.BarService\nconfigs:\n  - side: consumer\n    parameters: {weight: '300'}\n",
    );
    let out = routechain(&["check", p.to_str().unwrap()]);
    assert_exit(&out, 0);
    assert!(
        stdout(&out).contains("com.foo.BarService.configurators: ok (override rule)"),
        "{}",
        stdout(&out)
    );
    let p = s.write(
        "com.foo.BarService.configurators.yaml",
        "key: com.foo.BarService\nconfigs:\n  - side: sideways\n    parameters: {weight: '1'}\n",
    );
    let out = routechain(&["check", p.to_str().unwrap()]);
    assert_exit(&out, 2);
    assert!(
        stdout(&out).contains(":3:11: error[RC002]: configs[0].side: unknown side"),
        "{}",
        stdout(&out)
    );
    // A mesh rule (every `---` document of `<app>.MESHAPPRULE`) is validated as one.
    let mesh = "kind: DestinationRule\nmetadata: {name: app}\nspec: {subsets: [{name: all}]}\n---\n\
                kind: VirtualService\nmetadata: {name: app}\n\
                spec: {dubbo: [{routedetail: [{route: [{destination: {subset: all}}]}]}]}\n";
    let p = s.write("app.MESHAPPRULE", mesh);
    let out = routechain(&["check", p.to_str().unwrap()]);
    assert_exit(&out, 0);
    assert!(
        stdout(&out).contains("app.MESHAPPRULE: ok (mesh rule)"),
        "{}",
        stdout(&out)
    );
    let p = s.write("app.MESHAPPRULE.yaml", "key: x\n");
    let out = routechain(&["check", p.to_str().unwrap()]);
    assert_exit(&out, 2);
}

#[test]
fn json_has_the_documented_shape() {
    let s = Scratch::new("check-json");
    let rule = s.write(
        "x.condition-router",
        "enabled: false\nconditions:\n  - method = a and b = c => region = hz\n",
    );
    let out = routechain(&["check", "--format", "json", rule.to_str().unwrap()]);
    assert_exit(&out, 0);
    let v = json(&out);
    let files = v["files"].as_array().unwrap();
    assert_eq!(files.len(), 1);
    assert_eq!(files[0]["file"], rule.display().to_string());
    let first = &files[0]["problems"][0];
    let keys: Vec<&str> = first
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        ["code", "column", "line", "message", "path", "severity"]
    );
    assert_eq!(
        problems(&v),
        [
            ("RC108".into(), 1, 10, "warning".into()),
            ("RC101".into(), 3, 16, "warning".into()),
        ]
    );
    assert_eq!(first["path"], "enabled");
    assert_eq!(files[0]["problems"][1]["path"], "conditions[0]");
}

#[test]
fn json_is_capped_at_100_problems_per_file_with_the_rest_counted() {
    let s = Scratch::new("check-json-cap");
    let mut text = String::from("conditions:\n");
    for i in 0..130 {
        text.push_str(&format!("  - method = m{i} and b = c => region = hz\n"));
    }
    let many = s.write("many.condition-router", &text);
    let few = s.write(
        "few.condition-router",
        "conditions:\n  - a = b and c = d => e = f\n",
    );
    let out = routechain(&[
        "check",
        "--format",
        "json",
        many.to_str().unwrap(),
        few.to_str().unwrap(),
    ]);
    // Warnings only: exit 0; every warning still counts for --deny-warnings.
    assert_exit(&out, 0);
    let v = json(&out);
    let files = v["files"].as_array().unwrap();
    assert_eq!(files[0]["problems"].as_array().unwrap().len(), 100);
    assert_eq!(files[0]["more"], 30);
    assert_eq!(files[1]["problems"].as_array().unwrap().len(), 1);
    assert!(
        files[1].get("more").is_none(),
        "no `more` when nothing is left out"
    );
    // The text format has the same bound.
    let out = routechain(&["check", many.to_str().unwrap()]);
    let text = stdout(&out);
    assert_eq!(text.matches("warning[RC101]").count(), 100, "{text}");
    assert!(text.contains("… and 30 more problem(s) in "), "{text}");
    assert!(
        text.ends_with("check: 1 file checked, 0 errors, 130 warnings\n"),
        "{text}"
    );
    assert_exit(
        &routechain(&[
            "check",
            "--format",
            "json",
            "--deny-warnings",
            many.to_str().unwrap(),
        ]),
        1,
    );
}

#[test]
fn unknown_fields_in_tag_and_affinity_rules_are_warnings_not_errors() {
    let s = Scratch::new("check-tag-affinity-fields");
    let tag = s.write(
        "app.tag-router",
        "configVersion: v3.0\nforse: true\ntags:\n  - name: gray\n    adresses: [\"10.0.0.1:20880\"]\n    match:\n      - key: env\n        vlaue: {exact: gray}\n",
    );
    let affinity = s.write(
        "app.affinity-router",
        "configVersion: v3.1\naffinityAware:\n  key: region\n  ratoi: 20\n",
    );
    let out = routechain(&["check", tag.to_str().unwrap(), affinity.to_str().unwrap()]);
    assert_exit(&out, 0);
    let text = stdout(&out);
    for want in [
        ":2:1: warning[RC107]: forse: unknown field `forse` in a tag rule",
        "did you mean `force`?",
        ":5:5: warning[RC107]: tags[0].adresses: unknown field `adresses` in a tag rule",
        "did you mean `addresses`?",
        ":8:9: warning[RC107]: tags[0].match[0].vlaue: unknown field `vlaue`",
        "did you mean `value`?",
        ":4:3: warning[RC107]: affinityAware.ratoi: unknown field `ratoi` in an affinity rule",
        "did you mean `ratio`?",
        "app.tag-router: ok (tag rule), 3 warnings",
        "app.affinity-router: ok (affinity rule), 1 warning",
    ] {
        assert!(text.contains(want), "{want}\n{text}");
    }
    assert_exit(
        &routechain(&["check", "--deny-warnings", tag.to_str().unwrap()]),
        1,
    );
}

/// An override rule with two misspelt fields (`enabeld`, `adresses`), on lines 4 and 7.
const MISSPELT_OVERRIDE: &str = "configVersion: v3.0\nscope: service\nkey: com.foo.BarService\nenabeld: true\nconfigs:\n  - side: consumer\n    adresses: [\"10.0.0.1\"]\n    parameters: {timeout: 1000}\n";
/// An override rule with `enabled: false` on line 4.
const SWITCHED_OFF_OVERRIDE: &str = "configVersion: v3.0\nscope: service\nkey: k\nenabled: false\nconfigs:\n  - side: consumer\n    parameters: {timeout: 1000}\n";

#[test]
fn unknown_fields_in_override_rules_are_warnings() {
    let s = Scratch::new("check-configurators-fields");
    let rule = s.write("com.foo.BarService.configurators", MISSPELT_OVERRIDE);
    let out = routechain(&["check", rule.to_str().unwrap()]);
    assert_exit(&out, 0);
    let text = stdout(&out);
    for want in [
        ":4:1: warning[RC107]: enabeld: unknown field `enabeld` in an override rule: Dubbo ignores it, and so does routechain; did you mean `enabled`?",
        ":7:5: warning[RC107]: configs[0].adresses: unknown field `adresses` in an override rule",
        "did you mean `addresses`?",
        "com.foo.BarService.configurators: ok (override rule), 2 warnings",
    ] {
        assert!(text.contains(want), "{want}\n{text}");
    }
    let off = s.write("off.configurators", SWITCHED_OFF_OVERRIDE);
    let out = routechain(&["check", "--deny-warnings", off.to_str().unwrap()]);
    assert_exit(&out, 1);
    assert!(
        stdout(&out).contains("warning[RC108]: enabled: `enabled: false`: this override rule is switched off and changes nothing"),
        "{}",
        stdout(&out)
    );
}

/// The override files a chain names under `overrides:` are linted as a standalone
/// `.configurators` file is, each problem located in the override file.
#[test]
fn unknown_fields_in_a_chains_override_files_are_warnings() {
    let s = Scratch::new("check-chain-overrides-fields");
    s.write("weights.configurators.yaml", MISSPELT_OVERRIDE);
    s.write("off.configurators.yaml", SWITCHED_OFF_OVERRIDE);
    let chain = s.write(
        "chain.yaml",
        "overrides: [weights.configurators.yaml, off.configurators.yaml]\nrouters:\n  - type: group\n",
    );
    let out = routechain(&["check", chain.to_str().unwrap()]);
    assert_exit(&out, 0);
    let text = stdout(&out);
    for want in [
        "weights.configurators.yaml:4:1: warning[RC107]: enabeld: unknown field `enabeld` in an override rule",
        "did you mean `enabled`?",
        "weights.configurators.yaml:7:5: warning[RC107]: configs[0].adresses: unknown field `adresses` in an override rule",
        "off.configurators.yaml:4:10: warning[RC108]: enabled: `enabled: false`: this override rule is switched off and changes nothing",
        "chain.yaml: ok (1 router), 3 warnings",
    ] {
        assert!(text.contains(want), "{want}\n{text}");
    }
    let out = routechain(&["check", "--deny-warnings", chain.to_str().unwrap()]);
    assert_exit(&out, 1);
    // The JSON report gives each override file its own entry.
    let out = routechain(&["check", "--format", "json", chain.to_str().unwrap()]);
    let v = json(&out);
    let files: Vec<&str> = v["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["file"].as_str().unwrap())
        .collect();
    assert!(
        files
            .iter()
            .any(|f| f.ends_with("weights.configurators.yaml")),
        "{files:?}"
    );
}

#[test]
fn mesh_warnings_are_printed_for_rule_files_and_chain_entries() {
    let s = Scratch::new("check-mesh-warnings");
    let rule = "kind: DestinationRule\nmetadata: { name: shop }\nspec:\n  subsets: [{ name: v1, labels: { ver: v1 }, lables: {} }]\n---\nkind: VirtualService\nmetadata: { name: shop }\nspec:\n  dubbo:\n    - routedetail:\n        - match: [{ headers: { a: { exact: b } } }]\n          route: [{ destination: { subset: v1, subsett: v2 } }]\n";
    let file = s.write("shop.MESHAPPRULE", rule);
    let out = routechain(&["check", "--format", "json", file.to_str().unwrap()]);
    assert_exit(&out, 0);
    let v = json(&out);
    let got: Vec<(String, String)> = v["files"][0]["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["code"].as_str().unwrap().to_string(),
                p["path"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (
                "RC107".to_string(),
                "[0].spec.subsets[0].lables".to_string()
            ),
            (
                "RC109".to_string(),
                "[1].spec.dubbo[0].routedetail[0].match[0].headers".to_string()
            ),
            (
                "RC107".to_string(),
                "[1].spec.dubbo[0].routedetail[0].route[0].destination.subsett".to_string()
            ),
        ],
        "{v}"
    );
    let messages = v["files"][0]["problems"].to_string();
    assert!(messages.contains("did you mean `labels`?"), "{messages}");
    assert!(messages.contains("did you mean `subset`?"), "{messages}");
    // The same rule inline in a chain entry, located in the chain file; --deny-warnings fails.
    let chain = s.write(
        "c.chain.yaml",
        "routers:\n  - type: mesh\n    rule_file: shop.MESHAPPRULE\n  - type: mesh\n    app: other\n    rule:\n      - kind: DestinationRule\n        metadata: { name: o }\n        spec: { subsets: [{ name: v1, labels: { ver: v1 } }], hots: x }\n      - kind: VirtualService\n        metadata: { name: o }\n        spec: { dubbo: [{ routedetail: [{ route: [{ destination: { subset: v1 } }] }] }] }\n",
    );
    let out = routechain(&["check", chain.to_str().unwrap()]);
    assert_exit(&out, 0);
    let text = stdout(&out);
    assert!(
        text.contains(
            "c.chain.yaml:9:63: warning[RC107]: routers[1].rule[0].spec.hots: unknown field `hots`"
        ),
        "{text}"
    );
    assert!(
        text.contains("shop.MESHAPPRULE:11:30: warning[RC109]:"),
        "{text}"
    );
    assert!(
        text.contains("c.chain.yaml: ok (2 routers), 4 warnings"),
        "{text}"
    );
    assert_exit(
        &routechain(&["check", "--deny-warnings", chain.to_str().unwrap()]),
        1,
    );
}

#[test]
fn deny_warnings_exits_1_and_errors_win() {
    let s = Scratch::new("check-deny");
    let warn = s.write("w.condition-router", "conditions:\n  - region = hz\n");
    let bad = s.write("b.condition-router", "conditions: 5\n");
    let w = warn.to_str().unwrap();
    assert_exit(&routechain(&["check", w]), 0);
    assert_exit(&routechain(&["check", "--deny-warnings", w]), 1);
    assert_exit(
        &routechain(&["check", "--deny-warnings", w, bad.to_str().unwrap()]),
        2,
    );
}

#[test]
fn condition_lints_point_at_the_character() {
    let s = Scratch::new("check-condition");
    let rule = s.write(
        "r.condition-router",
        "\
conditions:
  - method = refund and region = hz => version = 2.*
  - method = refund | method = cancel => version = 2.*
  - method = refund -> version = 2.*
  - version = 2.*
  - application = order admin => region = hz
  - method = a & method != a => region = hz
  - method = a => arguments = 1
  - method = refund => version = 2.*
",
    );
    let out = routechain(&["check", "--format", "json", rule.to_str().unwrap()]);
    assert_exit(&out, 0);
    let got: Vec<(String, u64, u64)> = problems(&json(&out))
        .into_iter()
        .map(|(c, l, col, _)| (c, l, col))
        .collect();
    let want = [
        ("RC101", 2, 21),
        ("RC102", 3, 21),
        ("RC103", 4, 21),
        ("RC104", 5, 5),
        ("RC105", 6, 25),
        ("RC106", 7, 5),
        ("RC106", 8, 19),
    ]
    .map(|(c, l, col)| (c.to_string(), l, col));
    assert_eq!(got, want);
}

#[test]
fn unknown_fields_in_dubbo_rules_are_warnings_with_did_you_mean() {
    let s = Scratch::new("check-fields");
    let rule = s.write(
        "r.condition-router",
        "configVersion: v3.0\nforse: true\nconditions:\n  - method = a => region = hz\n",
    );
    let out = routechain(&["check", rule.to_str().unwrap()]);
    assert_exit(&out, 0);
    let text = stdout(&out);
    assert!(
        text.contains(":2:1: warning[RC107]: forse: unknown field `forse` in a condition rule"),
        "{text}"
    );
    assert!(text.contains("did you mean `force`?"), "{text}");
    // In a chain file too, at the inline rule's field.
    let chain = s.write(
        "c.yaml",
        "routers:\n  - type: condition\n    rule:\n      runtme: true\n      conditions: [\"=> a = b\"]\n",
    );
    let out = routechain(&["check", "--format", "json", chain.to_str().unwrap()]);
    let v = json(&out);
    assert_eq!(problems(&v)[0], ("RC107".into(), 4, 7, "warning".into()));
    assert_eq!(
        v["files"][0]["problems"][0]["path"],
        "routers[0].rule.runtme"
    );
    assert!(
        v["files"][0]["problems"][0]["message"]
            .as_str()
            .unwrap()
            .contains("did you mean `runtime`?")
    );
}

#[test]
fn rule_file_problems_are_reported_in_the_rule_file() {
    let s = Scratch::new("check-rule-file");
    s.write(
        "r.rule.yaml",
        "enabled: false\nconditions: [\"=> a = b\"]\n",
    );
    let chain = s.write(
        "c.chain.yaml",
        "routers:\n  - type: condition\n    rule_file: r.rule.yaml\n",
    );
    let out = routechain(&["check", "--format", "json", chain.to_str().unwrap()]);
    let v = json(&out);
    let files: Vec<&str> = v["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["file"].as_str().unwrap())
        .collect();
    assert_eq!(files, [chain.display().to_string(), s.path("r.rule.yaml")]);
    assert_eq!(v["files"][1]["problems"][0]["code"], "RC108");
}

#[test]
fn provider_lints_cross_check_the_rules() {
    let out = routechain(&[
        "check",
        "--format",
        "json",
        "--providers",
        "rules/examples/providers.txt",
        "docs/check/review.chain.yaml",
    ]);
    assert_exit(&out, 2);
    let got = problems(&json(&out));
    let want = [
        ("RC205", 9, 11, "warning"),
        ("RC203", 12, 41, "warning"),
        ("RC204", 17, 11, "error"),
        ("RC203", 17, 44, "warning"),
        ("RC205", 19, 11, "warning"),
        ("RC203", 22, 22, "warning"),
        ("RC201", 29, 18, "warning"),
        ("RC202", 29, 31, "warning"),
    ]
    .map(|(c, l, col, s)| (c.to_string(), l, col, s.to_string()));
    assert_eq!(got, want);
    // The shipped examples pass the same cross-check.
    let out = routechain(&[
        "check",
        "--deny-warnings",
        "--providers",
        "rules/examples/providers.txt",
        "rules/examples/full.chain.yaml",
    ]);
    assert_exit(&out, 0);
}

#[test]
fn a_then_part_matching_no_provider_is_an_error_only_with_force() {
    let s = Scratch::new("check-force");
    let providers = s.write("p.txt", "dubbo://10.0.0.1:20880/svc?version=1\n");
    for (force, severity, exit) in [("true", "error", 2), ("false", "warning", 0)] {
        let rule = s.write(
            "r.condition-router",
            &format!("force: {force}\nconditions:\n  - method = refund -> version = 2.*\n"),
        );
        let out = routechain(&[
            "check",
            "--format",
            "json",
            "--providers",
            providers.to_str().unwrap(),
            rule.to_str().unwrap(),
        ]);
        assert_exit(&out, exit);
        let p = problems(&json(&out));
        let rc204: Vec<_> = p.iter().filter(|p| p.0 == "RC204").collect();
        assert_eq!(rc204.len(), 1, "{p:?}");
        assert_eq!(rc204[0].3, severity);
    }
}

#[test]
fn an_invalid_provider_list_is_an_error() {
    let s = Scratch::new("check-bad-providers");
    let providers = s.write("p.txt", "dubbo://10.0.0.1:notaport/svc\n");
    let out = routechain(&[
        "check",
        "--providers",
        providers.to_str().unwrap(),
        "rules/examples/full.chain.yaml",
    ]);
    assert_exit(&out, 2);
    assert!(
        stdout(&out).contains(&format!("{}:1:", providers.display())),
        "{}",
        stdout(&out)
    );
}

/// Every sample of `docs/check.md` is what the command prints, and every code of its table
/// appears in some sample.
#[test]
fn docs_check_md_samples_are_what_the_commands_print() {
    let doc = std::fs::read_to_string(workspace().join("docs/check.md")).unwrap();
    let (samples, shown) = run_samples(&doc, "docs/check.md");
    assert!(samples >= 5, "found {samples} samples");
    let table_codes: Vec<&str> = doc
        .lines()
        .filter_map(|l| l.strip_prefix("| RC"))
        .map(|l| &l[..3])
        .collect();
    assert_eq!(table_codes.len(), 19, "one row per code");
    for c in table_codes {
        assert!(shown.contains(&format!("[RC{c}]")), "RC{c} has no example");
    }
}

/// The README's "Before you push a rule" samples are what the commands print.
#[test]
fn readme_samples_are_what_the_commands_print() {
    let doc = std::fs::read_to_string(workspace().join("README.md")).unwrap();
    let (samples, _) = run_samples(&doc, "README.md");
    assert!(samples >= 4, "found {samples} samples");
}

#[test]
fn zk_put_rule_validates_before_writing_and_dry_run_prints_the_diff() {
    let zk = support::zookeeper::ZooKeeper::start("cli-put-rule");
    let addr = zk.address();
    let s = Scratch::new("check-put-rule");
    let node = |key: &str, ty: &str| {
        vec![
            "--zookeeper".to_string(),
            addr.clone(),
            "--key".into(),
            key.into(),
            "--type".into(),
            ty.into(),
        ]
    };
    let run = |sub: &str, node: &[String], extra: &[&str]| {
        let mut args = vec!["zk", sub];
        args.extend(node.iter().map(String::as_str));
        args.extend_from_slice(extra);
        routechain(&args)
    };
    let service = node("com.foo.BarService::", "idc-weight");
    // Weights summing to 90: refused with the located error, nothing written.
    let bad = s.write(
        "bad.yaml",
        "idcs:\n  hz: [a, b]\nroute_tables:\n  hz: {a: 50, b: 40}\n",
    );
    let out = run("put-rule", &service, &[bad.to_str().unwrap()]);
    assert_exit(&out, 2);
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "{}:4:7: error[RC002]: route_tables.hz:",
            bad.display()
        )),
        "{err}"
    );
    assert!(err.contains("nothing written"), "{err}");
    assert_exit(&run("get-rule", &service, &[]), 1);
    // An unknown type is refused.
    let out = run(
        "put-rule",
        &node("com.foo.BarService::", "idc_weight"),
        &[bad.to_str().unwrap()],
    );
    assert_exit(&out, 2);
    assert!(
        stderr(&out).contains("did you mean `idc-weight`?"),
        "{}",
        stderr(&out)
    );
    // A dry run of a valid rule: the diff against no node, nothing written.
    let good = s.write(
        "good.yaml",
        "idcs:\n  hz: [a, b]\nroute_tables:\n  hz: {a: 60, b: 40}\n",
    );
    let out = run("put-rule", &service, &["--dry-run", good.to_str().unwrap()]);
    assert_exit(&out, 0);
    let path = "/dubbo/config/dubbo/com.foo.BarService::.idc-weight-router";
    assert!(
        stdout(&out).contains(&format!("--- {path} (no such node)\n+++ {path} (new)\n")),
        "{}",
        stdout(&out)
    );
    assert!(
        stdout(&out).contains("+  hz: {a: 60, b: 40}\n"),
        "{}",
        stdout(&out)
    );
    assert_exit(&run("get-rule", &service, &[]), 1);
    // Written; then a dry run of a change shows only the changed line.
    assert_exit(&run("put-rule", &service, &[good.to_str().unwrap()]), 0);
    let next = s.write(
        "next.yaml",
        "idcs:\n  hz: [a, b]\nroute_tables:\n  hz: {a: 80, b: 20}\n",
    );
    let out = run("put-rule", &service, &["--dry-run", next.to_str().unwrap()]);
    assert_exit(&out, 0);
    let diff = stdout(&out);
    assert!(
        diff.contains("-  hz: {a: 60, b: 40}\n+  hz: {a: 80, b: 20}\n"),
        "{diff}"
    );
    assert!(!diff.contains("+idcs"), "{diff}");
    assert_eq!(
        stdout(&run("get-rule", &service, &[])),
        "idcs:\n  hz: [a, b]\nroute_tables:\n  hz: {a: 60, b: 40}\n"
    );
    // A service key without colons: written, with a warning naming the key consumers watch.
    let cond = s.write("c.yaml", "conditions:\n  - => region = hz\n");
    let out = run(
        "put-rule",
        &node("com.foo.BarService", "condition"),
        &[cond.to_str().unwrap()],
    );
    assert_exit(&out, 0);
    assert!(
        stderr(&out).contains("/dubbo/config/dubbo/com.foo.BarService::.condition-router"),
        "{}",
        stderr(&out)
    );
    // Warnings alone do not stop a write.
    let warn = s.write("w.yaml", "forse: true\nconditions:\n  - => region = hz\n");
    let out = run(
        "put-rule",
        &node("com.foo.BarService::", "condition"),
        &[warn.to_str().unwrap()],
    );
    assert_exit(&out, 0);
    assert!(stderr(&out).contains("warning[RC107]"), "{}", stderr(&out));
}

#[test]
fn completions_for_bash_zsh_and_fish() {
    for (shell, marker) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef routechain"),
        ("fish", "complete -c routechain"),
    ] {
        let out = routechain(&["completions", shell]);
        assert_exit(&out, 0);
        let text = stdout(&out);
        assert!(text.contains(marker), "{shell}: {text}");
        assert!(
            text.contains("simulate") && text.contains("check"),
            "{shell}"
        );
    }
    assert_exit(&routechain(&["completions", "powershell"]), 2);
}

#[test]
fn explain_has_json_and_only_its_own_flags() {
    let out = routechain(&[
        "explain",
        "--format",
        "json",
        "--chain",
        "rules/examples/full.chain.yaml",
        "--providers",
        "rules/examples/providers.txt",
        "--request",
        "rules/examples/request.json",
        "--seed",
        "3",
    ]);
    assert_exit(&out, 0);
    let v = json(&out);
    assert_eq!(v["trace"].as_array().unwrap().len(), 4);
    assert_eq!(v["providers"].as_array().unwrap().len(), 1);
    let help = stdout(&routechain(&["explain", "--help"]));
    let flags: Vec<&str> = help
        .lines()
        .filter_map(|l| l.strip_prefix("      --"))
        .map(|l| l.split(' ').next().unwrap())
        .collect();
    assert_eq!(flags, ["chain", "providers", "request", "seed", "format"]);
    assert!(
        help.contains("--format") && help.contains("--seed"),
        "{help}"
    );
}

/// A number past its field's range is reported as out of range, with the range, wherever it
/// is written: a YAML literal past 64 bits, a condition range bound past i64, a priority,
/// a retry count; a value that is no number is still said to be none.
#[test]
fn out_of_range_numbers_are_out_of_range_with_the_range() {
    let s = Scratch::new("check-numbers");
    let cases = [
        (
            "routers:\n  - type: idc-weight\n    rule:\n      idcs: {beijing: [mt, zf]}\n      route_tables:\n        beijing: {mt: 18446744073709551616, zf: 0}\n",
            "weight 18446744073709551616 of IDC `mt` in the route table of region `beijing` is out of range; weights are integers from 0 to 18446744073709551615",
        ),
        (
            "routers:\n  - type: condition\n    rule:\n      conditions: ['a = 1~99999999999999999999 => b = c']\n",
            "bound 99999999999999999999 is out of range: a bound is an integer from -9223372036854775808 to 9223372036854775807",
        ),
        (
            "routers:\n  - type: tag\n    priority: 99999999999999999999\n",
            "`priority` is out of range: found \"99999999999999999999\", expected an integer from -2147483648 to 2147483647",
        ),
        (
            "retries: 5000000000\nrouters: []\n",
            "`retries` 5000000000 is out of range: an integer from 0 to 4294967295",
        ),
        (
            "retries: many\nrouters: []\n",
            "`retries` must be an integer from 0 to 4294967295, found \"many\"",
        ),
        (
            "routers:\n  - type: condition\n    rule:\n      configVersion: v3.1\n      conditions:\n        - from: {match: a = b}\n          to: [{match: c = d, weight: 99999999999999999999}]\n",
            "weight 99999999999999999999 is out of range: an integer from 0 to 4294967295",
        ),
    ];
    for (i, (text, want)) in cases.iter().enumerate() {
        let chain = s.write(&format!("c{i}.chain.yaml"), text);
        let out = routechain(&["check", chain.to_str().unwrap()]);
        assert_exit(&out, 2);
        assert!(stdout(&out).contains(want), "case {i}: {}", stdout(&out));
    }
}

/// Every unknown field and type name gets a "did you mean" when a known one is close, and
/// the expected values in one style: in a chain file, a rule file and a CLI value.
#[test]
fn unknown_names_get_a_did_you_mean_everywhere() {
    let s = Scratch::new("check-did-you-mean");
    let chain = s.write(
        "c.chain.yaml",
        "consumr: consumer://10.0.0.1/svc\nqqq: 1\nrouters:\n  - type: conditon\n  - type: condition\n    priorty: 3\n    rule_fiel: a.yaml\nload_balance: randm\n",
    );
    let rule = s.write(
        "r.idc-weight-router.yaml",
        "idcs: {beijing: [mt]}\nroute_tabels: {}\n",
    );
    let out = routechain(&["check", chain.to_str().unwrap(), rule.to_str().unwrap()]);
    assert_exit(&out, 2);
    let text = stdout(&out);
    for (word, hint) in [
        ("field `consumr`", "consumer"),
        ("router type `conditon`", "condition"),
        ("field `priorty` in a `condition` entry", "priority"),
        ("field `rule_fiel` in a `condition` entry", "rule_file"),
        ("load balancer `randm`", "random"),
        ("field `route_tabels`", "route_tables"),
    ] {
        let line = text
            .lines()
            .find(|l| l.contains(&format!("unknown {word}, expected one of `")))
            .unwrap_or_else(|| panic!("no {word}: {text}"));
        assert!(
            line.ends_with(&format!("; did you mean `{hint}`?")),
            "{line}"
        );
    }
    // A name close to none gets the list only.
    let line = text.lines().find(|l| l.contains("`qqq`")).unwrap();
    assert!(line.contains("`qqq`, expected one of `service`"), "{line}");
    assert!(!line.contains("did you mean"), "{line}");
    let out = routechain(&["check", "--type", "conditon", rule.to_str().unwrap()]);
    assert!(
        stdout(&out)
            .contains("unknown rule type `conditon`, expected one of `affinity`, `condition`")
            && stdout(&out).contains("; did you mean `condition`?"),
        "{}",
        stdout(&out)
    );
}

/// Every problem at once: a rule's lint warnings are shown together with its errors.
#[test]
fn warnings_are_shown_together_with_errors() {
    let s = Scratch::new("check-warnings-and-errors");
    let rule = s.write(
        "x.condition-router.yaml",
        "forse: true\nconditions:\n  - \"=> ,abc\"\n",
    );
    let chain = s.write(
        "c.chain.yaml",
        "routers:\n  - type: tag\n    rule:\n      forse: true\n      tags:\n        - name: gray\n          addresses: [\"10.0.0.0/33\"]\n",
    );
    for (file, error) in [(&rule, "conditions[0]"), (&chain, "addresses[0]")] {
        let out = routechain(&["check", file.to_str().unwrap()]);
        assert_exit(&out, 2);
        let text = stdout(&out);
        assert!(
            text.contains("warning[RC107]") && text.contains("did you mean `force`?"),
            "{text}"
        );
        assert!(
            text.contains("error[RC002]") && text.contains(error),
            "{text}"
        );
        assert!(text.contains(": 1 error, 1 warning\n"), "{text}");
    }
}
