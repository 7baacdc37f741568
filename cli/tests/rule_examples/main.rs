//! Every shipped example under `rules/examples/` loads and compiles, and every rule file
//! there is used by some chain; `routechain check` (the real binary) accepts every chain.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use routechain::rules::{ChainFile, RuleSource};

fn files_with_suffix(dir: &Path, suffix: &str, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files_with_suffix(&path, suffix, out);
        } else if path.to_string_lossy().ends_with(suffix) {
            out.push(path);
        }
    }
}

fn examples(suffix: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    files_with_suffix(&routechain::rules::examples_dir(), suffix, &mut out);
    out.sort();
    out
}

#[test]
fn every_example_chain_compiles_and_every_rule_file_is_used() {
    let registry = routechain::registry();
    let chains = examples(".chain.yaml");
    assert!(!chains.is_empty(), "no example chains found");
    let mut used = BTreeSet::new();
    let mut problems = Vec::new();
    for path in &chains {
        match ChainFile::load(path) {
            Ok(chain) => {
                for e in chain.entries.iter() {
                    if let RuleSource::File { path, .. } = &e.rule {
                        used.insert(path.canonicalize().unwrap());
                    }
                }
                if let Err(errors) = chain.compile(&registry) {
                    problems.extend(errors.iter().map(|e| e.render()));
                }
            }
            Err(errors) => problems.extend(errors.iter().map(|e| e.render())),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    for rule in examples(".rule.yaml") {
        assert!(
            used.contains(&rule.canonicalize().unwrap()),
            "{} is not used by any example chain",
            rule.display()
        );
    }
}

#[test]
fn check_accepts_every_example_chain() {
    let chains = examples(".chain.yaml");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_routechain"))
        .arg("check")
        .args(&chains)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout.matches(": ok (").count(), chains.len(), "{stdout}");
}
