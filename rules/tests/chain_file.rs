//! Chain-file loading with a test registry: located errors, all at once.

use std::sync::Arc;

use routechain_balance::LoadBalanceKind;
use routechain_core::*;
use routechain_rules::{ChainFile, RuleOverride, YamlDoc};
use serde::Deserialize;

/// A test router type whose rule is `{keep: [indexes]}`.
struct KeepFactory;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KeepRule {
    keep: Vec<usize>,
}

impl RouterFactory for KeepFactory {
    fn default_priority(&self, _: &RouterSpec<'_>) -> i32 {
        7
    }
    fn extra_fields(&self) -> &'static [&'static str] {
        &["label"]
    }
    fn build(&self, spec: &RouterSpec<'_>) -> Result<Arc<dyn Router>, Vec<RuleError>> {
        let keep = match spec.rule {
            Some(doc) => doc.parse::<KeepRule>().map_err(|e| vec![e])?.keep,
            None => vec![],
        };
        if keep.contains(&99) {
            let path = spec.rule.unwrap().path.key("keep");
            return Err(vec![RuleError::new(path, "99 is not allowed")]);
        }
        Ok(Arc::new(router_fn("keep", move |_, c| {
            c.and_with(|w| {
                keep.iter()
                    .filter(|i| *i / 64 == w)
                    .fold(0, |acc, i| acc | 1 << (i % 64))
            })
        })))
    }
}

fn registry() -> Registry {
    let mut r = Registry::new();
    r.register("keep", Arc::new(KeepFactory));
    r
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
    let entries = f.compile(&registry()).unwrap();
    assert_eq!(entries[0].priority, 7);
    assert_eq!(entries[1].priority, -1);
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
        shown[0].starts_with("c.yaml:2:11: routers[0].type: unknown router type \"nope\""),
        "{}",
        shown[0]
    );
    assert!(
        shown[1].starts_with("c.yaml:4:22: routers[1].rule.keep[1]: invalid type"),
        "{}",
        shown[1]
    );
    assert!(
        shown[2].starts_with("c.yaml:6:5: routers[2]: unknown field `bogus`"),
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
        shown[0].starts_with("c.yaml:1:1: (document): unknown field `servic`"),
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
    assert_eq!(f.rule_files().count(), 1);
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
    let cleared = f.compile_entry(&registry(), &f.entries[0], RuleOverride::Cleared);
    assert!(cleared.is_ok());
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
    assert!(found[0].2.contains("unknown load balancer \"fastest\""));
    assert_eq!((found[1].0, found[1].1), (6, 15), "{found:?}");
    assert!(found[1].2.contains("invalid hash key \"user\""));
}
