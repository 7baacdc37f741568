//! Chain-file loading with a test registry: located errors, all at once.

use std::sync::Arc;

use routechain_balance::LoadBalanceKind;
use routechain_core::*;
use routechain_rules::{ChainFile, RuleOverride, YamlDoc};
use serde::Deserialize;

/// A test router type whose rule is `{keep: [indexes]}`: keeps those providers. Without
/// a rule every provider passes.
struct Keep;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KeepRule {
    keep: Vec<usize>,
}

impl TypedRouter for Keep {
    type Raw = KeepRule;
    type Rule = Vec<usize>;
    type Prepared = BitSet;

    fn default_priority(&self, _rule: Option<&Vec<usize>>) -> i32 {
        7
    }
    fn extra_fields(&self) -> &'static [&'static str] {
        &["label"]
    }
    fn compile(&self, raw: KeepRule, spec: &RouterSpec<'_>) -> Result<Vec<usize>, Vec<RuleError>> {
        if raw.keep.contains(&99) {
            return Err(vec![
                spec.error(&FieldPath::root().key("keep"), "99 is not allowed"),
            ]);
        }
        Ok(raw.keep)
    }
    fn prepare(keep: &Arc<Vec<usize>>, cx: &PrepareContext<'_>) -> Result<BitSet, String> {
        let n = cx.snapshot.len();
        Ok(BitSet::from_indexes(
            n,
            keep.iter().copied().filter(|&i| i < n),
        ))
    }
    fn route(keep: &BitSet, _: &mut RouteContext<'_>, c: &mut Candidates) -> Evaluation {
        c.and_assign(keep);
        Evaluation::Cached
    }
}

fn registry() -> Registry {
    let mut r = Registry::new();
    r.register_typed("keep", Keep);
    r
}

/// The providers `entries` leave of four.
fn routed(entries: Vec<ChainEntry>) -> Vec<usize> {
    let snapshot = Snapshot::parse_lines(
        1,
        "dubbo://10.0.0.0:1/s\ndubbo://10.0.0.1:1/s\ndubbo://10.0.0.2:1/s\ndubbo://10.0.0.3:1/s\n",
    )
    .unwrap();
    let state = ChainState::new(None, Arc::new(snapshot), Url::empty(), entries).unwrap();
    let mut call = CallState::seeded(1);
    match state.route(&Request::new(), &mut call) {
        Ok(()) => call.candidates.iter().collect(),
        Err(_) => Vec::new(),
    }
}

#[test]
fn compiles_entries_with_default_and_explicit_priorities() {
    let f = ChainFile::parse(
        "c.yaml",
        "service: svc\nrouters:\n  - type: keep\n    rule: {keep: [1, 2]}\n  - type: keep\n    priority: -1\n",
        None,
    )
    .unwrap();
    assert_eq!(f.service.as_deref(), Some("svc"));
    assert_eq!(f.entries.len(), 2);
    assert_eq!(f.entries[0].type_name, "keep");
    assert_eq!(f.entries[0].priority, None);
    assert_eq!(f.entries[1].priority, Some(-1));
    let entries = f.compile(&registry()).unwrap();
    let summary: Vec<(&str, i32, &str)> = entries
        .iter()
        .map(|e| (&*e.kind, e.priority, e.router.name()))
        .collect();
    assert_eq!(summary, [("keep", 7, "keep"), ("keep", -1, "keep")]);
    // The first keeps providers 1 and 2; the second has no rule and passes every provider.
    assert_eq!(routed(entries[..1].to_vec()), [1, 2]);
    assert_eq!(routed(entries[1..].to_vec()), [0, 1, 2, 3]);
    assert_eq!(routed(entries), [1, 2]);
}

#[test]
fn every_problem_is_reported_with_line_column_and_field() {
    let text = "\
routers:
  - type: nope
  - type: keep
    rule: {keep: [1, x]}
  - type: keep
    bogus: 1
  - type: keep
    rule:
      keep: [99]
";
    let f = ChainFile::parse("c.yaml", text, None).unwrap();
    let errors = f.compile(&registry()).unwrap_err();
    let shown: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
    assert_eq!(errors.len(), 4, "{shown:#?}");
    assert!(
        shown[0].starts_with(
            "c.yaml:2:11: routers[0].type: unknown router type `nope`, expected one of"
        ),
        "{}",
        shown[0]
    );
    assert!(
        shown[1].starts_with("c.yaml:4:22: routers[1].rule.keep[1]: invalid type"),
        "{}",
        shown[1]
    );
    assert!(
        shown[2]
            .starts_with("c.yaml:6:5: routers[2].bogus: unknown field `bogus` in a `keep` entry"),
        "{}",
        shown[2]
    );
    assert!(
        shown[3].starts_with("c.yaml:9:13: routers[3].rule.keep: 99 is not allowed"),
        "{}",
        shown[3]
    );
}

#[test]
fn parse_errors_are_all_reported() {
    let errors = ChainFile::parse(
        "c.yaml",
        "servic: x\nrouters:\n  - priority: 1\n  - type: keep\n    priority: high\n    rule_file: missing.yaml\n",
        None,
    )
    .unwrap_err();
    let shown: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
    assert_eq!(errors.len(), 4, "{shown:#?}");
    assert!(
        shown[0].starts_with("c.yaml:1:1: servic: unknown field `servic`")
            && shown[0].ends_with("did you mean `service`?"),
        "{}",
        shown[0]
    );
    assert!(
        shown[1].starts_with("c.yaml:3:5: routers[0]: missing field `type`"),
        "{}",
        shown[1]
    );
    assert!(
        shown[2].starts_with("c.yaml:5:15: routers[1].priority"),
        "{}",
        shown[2]
    );
    assert!(
        shown[3].contains("cannot read rule file missing.yaml"),
        "{}",
        shown[3]
    );
}

/// `ChainFile::parse`'s error is a `std::error::Error`: `?` carries it into
/// `Box<dyn Error>`, whose text is every problem on a line of its own.
#[test]
fn chain_file_errors_go_through_question_mark_with_every_problem() {
    fn load(text: &str) -> Result<ChainFile, Box<dyn std::error::Error>> {
        Ok(ChainFile::parse("c.yaml", text, None)?)
    }
    let text = "servic: x\nrouters:\n  - priority: 1\n  - type: keep\n    priority: high\n";
    let error = load(text).unwrap_err();
    let shown = error.to_string();
    let lines: Vec<&str> = shown.lines().collect();
    assert_eq!(lines.len(), 3, "{shown}");
    assert!(
        lines[0].starts_with("c.yaml:1:1: servic: unknown field `servic`"),
        "{shown}"
    );
    assert_eq!(lines[1], "c.yaml:3:5: routers[0]: missing field `type`");
    assert!(
        lines[2].starts_with("c.yaml:5:15: routers[1].priority: "),
        "{shown}"
    );
    // The typed error is there too, for a caller that wants the located problems.
    let errors = error.downcast::<routechain_rules::LocatedErrors>().unwrap();
    assert_eq!(errors.len(), 3);
    assert_eq!(
        errors[1].location,
        routechain_rules::Location { line: 3, column: 5 }
    );
    // `render` adds each source line and a caret.
    assert!(
        errors
            .render()
            .contains("\n 3 |   - priority: 1\n   |     ^"),
        "{}",
        errors.render()
    );
    assert!(load("routers: []\n").is_ok());
}

#[test]
fn rule_files_and_overrides_locate_in_their_own_document() {
    let dir = std::env::temp_dir().join(format!("rc-rules-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("r.yaml"), "# rule\nkeep:\n  - 99\n").unwrap();
    std::fs::write(
        dir.join("chain.yaml"),
        "routers:\n  - type: keep\n    rule_file: r.yaml\n",
    )
    .unwrap();
    let f = ChainFile::load(&dir.join("chain.yaml")).unwrap();
    assert_eq!(
        f.rule_files().collect::<Vec<_>>(),
        [dir.join("r.yaml").as_path()]
    );
    let e = f.compile(&registry()).unwrap_err();
    assert_eq!(e[0].origin, dir.join("r.yaml").display().to_string());
    assert_eq!((e[0].location.line, e[0].location.column), (3, 3));

    let node = YamlDoc::parse(
        "/dubbo/config/dubbo/svc.keep-router",
        "keep: [1]\nweight: 2\n",
    )
    .unwrap();
    let e = f
        .compile_entry(&registry(), &f.entries[0], RuleOverride::Doc(&node))
        .unwrap_err();
    assert_eq!(e[0].origin, "/dubbo/config/dubbo/svc.keep-router");
    assert_eq!(e[0].location.line, 2);
    // A cleared rule compiles to the entry without a rule: every provider passes.
    let cleared = f
        .compile_entry(&registry(), &f.entries[0], RuleOverride::Cleared)
        .unwrap();
    assert_eq!((&*cleared.kind, cleared.priority), ("keep", 7));
    assert_eq!(routed(vec![cleared]), [0, 1, 2, 3]);
    let pushed = YamlDoc::parse("/dubbo/config/dubbo/svc.keep-router", "keep: [3, 0]\n").unwrap();
    let entry = f
        .compile_entry(&registry(), &f.entries[0], RuleOverride::Doc(&pushed))
        .unwrap();
    assert_eq!(routed(vec![entry]), [0, 3]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn non_mapping_rule_documents_are_refused() {
    let f = ChainFile::parse("c.yaml", "routers:\n  - type: keep\n    rule: [1]\n", None).unwrap();
    let e = f.compile(&registry()).unwrap_err();
    assert!(e[0].to_string().contains("must be a mapping"), "{}", e[0]);
    let empty = YamlDoc::parse("node", "").unwrap();
    let e = f
        .compile_entry(&registry(), &f.entries[0], RuleOverride::Doc(&empty))
        .unwrap_err();
    assert!(e[0].to_string().contains("empty"), "{}", e[0]);
}

#[test]
fn service_settings_are_read_and_their_errors_located() {
    let ok = ChainFile::parse(
        "c.yaml",
        "routers: []\nload_balance: leastactive\nmethods:\n  getUser: {load_balance: consistenthash, hash_key: \"attributes[user]\"}\nskip_degraded: true\nhealth: {cooldown: 5s}\n",
        None,
    )
    .unwrap();
    let c = &ok.service_config;
    assert_eq!(c.balance.default.kind, LoadBalanceKind::LeastActive);
    assert_eq!(
        c.balance.spec(c.balance.slot(Some("getUser"))).kind,
        LoadBalanceKind::ConsistentHash
    );
    assert!(c.skip_degraded);
    assert_eq!(c.health.cooldown, std::time::Duration::from_secs(5));

    let errors = ChainFile::parse(
        "c.yaml",
        "routers: []\nload_balance: fastest\nmethods:\n  getUser:\n    load_balance: consistenthash\n    hash_key: user\n",
        None,
    )
    .unwrap_err();
    let found: Vec<(usize, usize, String)> = errors
        .iter()
        .map(|e| (e.location.line, e.location.column, e.message.clone()))
        .collect();
    assert_eq!(errors.len(), 2, "{found:?}");
    assert_eq!((found[0].0, found[0].1), (2, 15), "{found:?}");
    assert!(found[0].2.contains("unknown load balancer `fastest`"));
    assert_eq!((found[1].0, found[1].1), (6, 15), "{found:?}");
    assert!(found[1].2.contains("invalid hash key \"user\""));
}

/// `load_with` / `parse_with` report what building the chain would, at parse time: an
/// unknown router type (with a "did you mean"), an unknown field of an entry and a rule its
/// router refuses, together with the file's own problems, each located. `parse` alone reads
/// the fields only.
#[test]
fn parsing_with_a_registry_reports_types_and_rules_too() {
    let text = "\
servic: x
routers:
  - type: kep
  - type: keep
    rule: {keep: [99]}
  - type: keep
    rule: {keep: [1]}
";
    assert_eq!(
        ChainFile::parse("c.yaml", text, None).unwrap_err().len(),
        1,
        "parse reads the fields only"
    );
    let errors = ChainFile::parse_with("c.yaml", text, None, &registry()).unwrap_err();
    let shown: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
    assert_eq!(
        shown,
        [
            "c.yaml:1:1: servic: unknown field `servic`, expected one of `service`, `group`, \
             `version`, `consumer`, `routers`, `overrides`, `apply_provider_overrides`, \
             `load_balance`, `hash_key`, `hash_nodes`, `methods`, `skip_degraded`, `retries`, \
             `timeout`, `cluster`, `forks`, `health`, `retry_budget`; did you mean `service`?",
            "c.yaml:3:11: routers[0].type: unknown router type `kep`, expected one of `keep`; \
             did you mean `keep`?",
            "c.yaml:5:18: routers[1].rule.keep: 99 is not allowed",
        ]
    );
    let ok = "routers:\n  - type: keep\n    rule: {keep: [1]}\n";
    let file = ChainFile::parse_with("c.yaml", ok, None, &registry()).unwrap();
    assert_eq!(routed(file.compile(&registry()).unwrap()), [1]);
    // From a file: the same.
    let dir = std::env::temp_dir().join(format!("routechain-load-with-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("c.yaml");
    std::fs::write(
        &path,
        "routers:\n  - type: keep\n    label: x\n    rule: {keep: [99]}\n",
    )
    .unwrap();
    let errors = ChainFile::load_with(&path, &registry()).unwrap_err();
    assert!(ChainFile::load(&path).is_ok());
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0]
            .to_string()
            .ends_with(":4:18: routers[0].rule.keep: 99 is not allowed")
    );
}
