//! Plugins loaded through chain files: the canary example routes as its unit tests say and
//! composes with other routers; failures (panics, errors, refusals) are handled and reported.
//!
//! The test builds the plugin crates itself with a separate `CARGO_TARGET_DIR`
//! (`target/plugin-tests`), so it never waits on the outer cargo's lock.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, OnceLock};

use routechain_core::{
    CallState, Chain, ChainEntry, ChainState, NoProvider, PrepareContext, Registry, Request,
    Router, Snapshot, Trace, Url,
};
use routechain_plugin_loader::{LoadedRouter, PluginError, PluginFactory};
use routechain_rules::{ChainFile, LocatedErrors};
use router_canary::logic::bucket;

#[allow(dead_code)]
#[path = "../examples/deny_hosts.rs"]
mod deny_hosts;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// Builds the plugin crates once per test binary; returns the directory holding them.
fn plugin_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let root = workspace_root();
        let target = root.join("target").join("plugin-tests");
        let out = Command::new(env!("CARGO"))
            .current_dir(&root)
            .env("CARGO_TARGET_DIR", &target)
            .args(["build", "--quiet"])
            .args(["-p", "router-canary", "-p", "router-faulty"])
            .args(["-p", "router-wrong-abi", "-p", "router-missing-symbol"])
            .output()
            .expect("cargo runs");
        assert!(
            out.status.success(),
            "building the test plugins failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        target.join("debug")
    })
}

fn lib_name(crate_name: &str) -> String {
    format!(
        "{}{}{}",
        std::env::consts::DLL_PREFIX,
        crate_name.replace('-', "_"),
        std::env::consts::DLL_SUFFIX
    )
}

fn lib(crate_name: &str) -> PathBuf {
    plugin_dir().join(lib_name(crate_name))
}

fn registry() -> (Registry, Arc<PluginFactory>) {
    let mut registry = Registry::new();
    routechain_routers::register_builtins(&mut registry);
    deny_hosts::register(&mut registry);
    let plugins = routechain_plugin_loader::register(&mut registry);
    (registry, plugins)
}

/// Compiles chain text whose relative paths resolve against the plugin directory.
fn compile(text: &str) -> Result<Vec<ChainEntry>, LocatedErrors> {
    compile_with(&registry().0, text)
}

fn compile_with(registry: &Registry, text: &str) -> Result<Vec<ChainEntry>, LocatedErrors> {
    let chain = ChainFile::parse("test.chain.yaml", text, Some(plugin_dir().to_path_buf()))?;
    chain.compile(registry)
}

/// Eight providers on hosts 10.0.0.1..8; 2, 5 and 7 are canaries.
fn snapshot() -> Arc<Snapshot> {
    let text: String = (0..8)
        .map(|i| {
            let canary = if [2, 5, 7].contains(&i) {
                "&canary=true"
            } else {
                ""
            };
            format!("dubbo://10.0.0.{}:20880/svc?zone=z{canary}\n", i + 1)
        })
        .collect();
    Arc::new(Snapshot::parse_lines(1, &text).unwrap())
}

fn state(entries: Vec<ChainEntry>) -> ChainState {
    ChainState::new(None, snapshot(), Url::empty(), entries).unwrap()
}

fn routed(state: &ChainState, request: &Request) -> Result<Vec<usize>, NoProvider> {
    let mut call = CallState::seeded(7);
    state.route(request, &mut call)?;
    Ok(call.candidates.iter().collect())
}

fn traced(state: &ChainState, request: &Request) -> (Vec<usize>, Trace) {
    let mut call = CallState::seeded(7);
    let mut trace = Trace::default();
    let _ = state.route_traced(request, &mut call, &mut trace);
    (call.candidates.iter().collect(), trace)
}

/// Caller keys on each side of a threshold, found from the documented bucket function.
fn keys(threshold: u64, canary: bool, n: usize) -> Vec<String> {
    (0..)
        .map(|i| format!("user-{i}"))
        .filter(|k| (bucket(k) < threshold) == canary)
        .take(n)
        .collect()
}

fn canary_chain(extra: &str) -> String {
    format!(
        "routers:\n  - type: plugin\n    path: {}\n    config: {{ percent: 20, header: x-user }}\n{extra}",
        lib_name("router-canary")
    )
}

const CANARIES: [usize; 3] = [2, 5, 7];
const STABLE: [usize; 5] = [0, 1, 3, 4, 6];

#[test]
fn the_canary_plugin_routes_as_its_unit_tests_say() {
    let state = state(compile(&canary_chain("")).unwrap());
    // percent 20 → threshold 2000 of 10 000 buckets.
    for key in keys(2000, true, 20) {
        let req = Request::new().with_attachment("x-user", key.as_str());
        assert_eq!(
            routed(&state, &req).unwrap(),
            CANARIES,
            "canary caller {key}"
        );
    }
    for key in keys(2000, false, 20) {
        let req = Request::new().with_attachment("x-user", key.as_str());
        assert_eq!(routed(&state, &req).unwrap(), STABLE, "stable caller {key}");
    }
    // No key: a stable caller. The key as an attribute instead of an attachment: not read.
    assert_eq!(routed(&state, &Request::new()).unwrap(), STABLE);
    let canary_key = &keys(2000, true, 1)[0];
    let as_attribute = Request::new().with_attribute("x-user", canary_key.as_str());
    assert_eq!(routed(&state, &as_attribute).unwrap(), STABLE);
}

#[test]
fn the_share_of_canary_callers_matches_percent_through_the_plugin() {
    let state = state(compile(&canary_chain("")).unwrap());
    let n = 4000;
    let canary = (0..n)
        .filter(|i| {
            let req = Request::new().with_attachment("x-user", format!("caller-{i}"));
            routed(&state, &req).unwrap() == CANARIES
        })
        .count();
    let share = canary as f64 * 100.0 / n as f64;
    assert!((share - 20.0).abs() < 2.5, "share {share}%");
}

#[test]
fn the_plugin_explains_and_composes_with_a_compiled_in_router() {
    // deny-hosts (priority 50) runs first and removes 10.0.0.3 (provider 2, a canary) and
    // 10.0.0.1 (provider 0); the plugin (default priority 200) then splits the rest.
    let text = canary_chain("  - type: deny-hosts\n    rule: { hosts: [10.0.0.3, 10.0.0.1] }\n");
    let state = state(compile(&text).unwrap());
    assert_eq!(
        state.router_names().collect::<Vec<_>>(),
        ["deny-hosts", "plugin(canary)"]
    );
    let canary = Request::new().with_attachment("x-user", keys(2000, true, 1)[0].as_str());
    assert_eq!(routed(&state, &canary).unwrap(), [5, 7]);
    let stable = Request::new().with_attachment("x-user", keys(2000, false, 1)[0].as_str());
    let (out, trace) = traced(&state, &stable);
    assert_eq!(out, [1, 3, 4, 6]);
    let step = &trace.steps[1];
    assert_eq!((step.before, step.after), (6, 4));
    assert!(
        step.reason.contains("is a stable caller") && step.reason.contains("stable providers"),
        "{}",
        step.reason
    );
}

#[test]
fn the_plugin_composes_with_the_built_in_condition_router() {
    // condition (priority 140) removes 10.0.0.6 (provider 5, a canary) and, for method
    // `slow`, 10.0.0.8 (provider 7, a canary) too; the plugin (priority 200) runs after.
    let text = canary_chain(
        "  - type: condition\n    rule:\n      conditions:\n        - '=> host != 10.0.0.6'\n        - 'method = slow => host != 10.0.0.8'\n",
    );
    let state = state(compile(&text).unwrap());
    assert_eq!(
        state.router_names().collect::<Vec<_>>(),
        ["condition(service)", "plugin(canary)"]
    );
    let canary = keys(2000, true, 1)[0].clone();
    let stable = keys(2000, false, 1)[0].clone();
    let req = |key: &str, method: &str| {
        Request::new()
            .with_method(method)
            .with_attachment("x-user", key)
    };
    assert_eq!(routed(&state, &req(&canary, "get")).unwrap(), [2, 7]);
    assert_eq!(routed(&state, &req(&canary, "slow")).unwrap(), [2]);
    assert_eq!(routed(&state, &req(&stable, "get")).unwrap(), STABLE);
}

#[test]
fn the_plugin_routes_concurrently_from_many_threads() {
    let state = Arc::new(state(compile(&canary_chain("")).unwrap()));
    let canary = keys(2000, true, 50);
    let stable = keys(2000, false, 50);
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let (state, canary, stable) = (state.clone(), canary.clone(), stable.clone());
            std::thread::spawn(move || {
                let mut call = CallState::seeded(t);
                for round in 0..200 {
                    let (key, expected): (&str, &[usize]) = if round % 2 == 0 {
                        (&canary[round % 50], &CANARIES)
                    } else {
                        (&stable[round % 50], &STABLE)
                    };
                    let req = Request::new().with_attachment("x-user", key);
                    state.route(&req, &mut call).unwrap();
                    assert_eq!(call.candidates.iter().collect::<Vec<_>>(), expected);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn the_canary_keeps_the_input_when_its_group_is_gone() {
    // Only canaries survive deny-hosts: a stable caller keeps them (force is off).
    let text = canary_chain(
        "  - type: deny-hosts\n    rule: { hosts: [10.0.0.1, 10.0.0.2, 10.0.0.4, 10.0.0.5, 10.0.0.7] }\n",
    );
    let state = state(compile(&text).unwrap());
    let stable = Request::new().with_attachment("x-user", keys(2000, false, 1)[0].as_str());
    let (out, trace) = traced(&state, &stable);
    assert_eq!(out, CANARIES);
    assert!(
        trace.steps[1].reason.contains("kept"),
        "{:?}",
        trace.steps[1]
    );
}

fn faulty_chain(config: &str) -> String {
    format!(
        "routers:\n  - type: plugin\n    path: {}\n    config: {config}\n  - type: deny-hosts\n    priority: 300\n    rule: {{ hosts: [10.0.0.8] }}\n",
        lib_name("router-faulty")
    )
}

#[test]
fn a_panicking_plugin_leaves_the_input_unchanged_and_is_counted_and_traced() {
    for (config, needle) in [
        ("{ fail: panic }", "panic: faulty plugin panics in route"),
        ("{ fail: error }", "error: faulty plugin fails in route"),
    ] {
        let (registry, plugins) = registry();
        let state = state(compile_with(&registry, &faulty_chain(config)).unwrap());
        let stats = plugins.stats();
        assert_eq!(stats.len(), 1);
        assert_eq!(stats[0].failures(), 0);
        for _ in 0..5 {
            // The plugin narrowed to provider 0 before failing: the host restored the input,
            // and the next router (deny-hosts, removes provider 7) still ran.
            assert_eq!(
                routed(&state, &Request::new()).unwrap(),
                [0, 1, 2, 3, 4, 5, 6]
            );
        }
        let (out, trace) = traced(&state, &Request::new());
        assert_eq!(out, [0, 1, 2, 3, 4, 5, 6]);
        let step = &trace.steps[0];
        assert_eq!(step.router, "plugin(faulty)");
        assert_eq!((step.before, step.after), (8, 8));
        assert!(step.reason.contains(needle), "{}", step.reason);
        assert!(
            step.reason.contains("6 failure(s) so far"),
            "{}",
            step.reason
        );
        assert_eq!(stats[0].failures(), 6);
        assert!(stats[0].path().ends_with(lib_name("router-faulty")));
    }
}

#[test]
fn a_plugin_that_fails_to_prepare_keeps_the_previous_chain_serving() {
    let good = compile(&canary_chain("")).unwrap();
    let chain = Chain::new(state(good));
    let (registry, plugins) = registry();
    let bad = compile_with(&registry, &faulty_chain("{ fail: panic, in: prepare }")).unwrap();
    let err = chain
        .update(|s| s.with_entries(bad.clone()))
        .expect_err("prepare fails");
    assert!(
        err.reason.contains("faulty plugin panics in prepare") && err.reason.contains("panic"),
        "{err}"
    );
    assert_eq!(plugins.stats()[0].failures(), 1);
    // Still the canary chain.
    assert_eq!(
        chain.load().router_names().collect::<Vec<_>>(),
        ["plugin(canary)"]
    );
    assert_eq!(routed(&chain.load(), &Request::new()).unwrap(), STABLE);
}

fn refusal(text: &str) -> String {
    let errors = compile(text).expect_err("refused");
    assert_eq!(errors.len(), 1, "{errors:#?}");
    errors[0].to_string()
}

fn plugin_entry(path: &str) -> String {
    format!("routers:\n  - type: plugin\n    path: {path}\n    config: {{}}\n")
}

#[test]
fn bad_libraries_are_refused_with_the_path_and_the_reason() {
    let dir = std::env::temp_dir().join(format!("routechain-plugin-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let not_a_library = dir.join(lib_name("not-a-library"));
    std::fs::write(&not_a_library, "this is text, not a shared library\n").unwrap();
    let missing = dir.join(lib_name("does-not-exist"));

    let cases = [
        (
            lib("router-wrong-abi"),
            "speaks routechain plugin ABI version 999, this host speaks version 1",
        ),
        (
            lib("router-missing-symbol"),
            "is not a routechain plugin: missing symbol `routechain_plugin_v1`",
        ),
        (missing.clone(), "does not exist"),
        (not_a_library.clone(), "cannot load plugin library"),
    ];
    for (path, reason) in cases {
        let shown = refusal(&plugin_entry(&path.display().to_string()));
        assert!(shown.contains(&path.display().to_string()), "{shown}");
        assert!(shown.contains(reason), "{shown}");
        // Located at the entry's `path` field: line 3.
        assert!(shown.starts_with("test.chain.yaml:3:"), "{shown}");
    }
    // A relative path is resolved against the chain file's directory and shown resolved.
    let shown = refusal(&plugin_entry("nowhere/librouter_x.so"));
    let resolved = plugin_dir().join("nowhere/librouter_x.so");
    assert!(
        shown.contains(&format!("{} does not exist", resolved.display())),
        "{shown}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_entries_and_refused_configs_are_located() {
    let canary = lib_name("router-canary");
    // The plugin refuses its config: located at `config`, with the plugin's message.
    let shown = refusal(&format!(
        "routers:\n  - type: plugin\n    path: {canary}\n    config:\n      percent: 200\n      header: x-user\n"
    ));
    assert!(shown.starts_with("test.chain.yaml:5:"), "{shown}");
    assert!(
        shown.contains("refused its config (bad config): `percent` must be between 0 and 100"),
        "{shown}"
    );
    // Unknown router name: lists the exported ones.
    let shown = refusal(&format!(
        "routers:\n  - type: plugin\n    path: {canary}\n    name: nope\n"
    ));
    assert!(shown.starts_with("test.chain.yaml:4:"), "{shown}");
    assert!(
        shown.contains("exports no router named \"nope\"; it exports [\"canary\"]"),
        "{shown}"
    );
    // No path; a path that is not a string; config and rule both.
    assert!(refusal("routers:\n  - type: plugin\n").contains("missing field `path`"));
    assert!(refusal("routers:\n  - type: plugin\n    path: [1]\n").contains("`path` must be"));
    let both = refusal(&format!(
        "routers:\n  - type: plugin\n    path: {canary}\n    config: {{}}\n    rule: {{ percent: 1 }}\n"
    ));
    assert!(both.contains("not both"), "{both}");
}

#[test]
fn the_config_may_come_from_the_rule() {
    let text = format!(
        "routers:\n  - type: plugin\n    path: {}\n    rule: {{ percent: 20, header: x-user }}\n",
        lib_name("router-canary")
    );
    let state = state(compile(&text).unwrap());
    let req = Request::new().with_attachment("x-user", keys(2000, true, 1)[0].as_str());
    assert_eq!(routed(&state, &req).unwrap(), CANARIES);
}

#[test]
fn the_library_stays_loaded_while_a_prepared_state_lives() {
    let router = LoadedRouter::load(
        &lib("router-canary"),
        None,
        r#"{"percent": 20, "header": "x-user"}"#,
    )
    .unwrap();
    let snap = snapshot();
    let consumer = Url::empty();
    let prepared = router
        .prepare(&PrepareContext {
            snapshot: &snap,
            consumer: &consumer,
            service: None,
        })
        .unwrap();
    drop(router); // the last handle on the router and the library, but the prepared state's
    let entry = ChainEntry::new(
        "kept",
        0,
        Arc::new(routechain_core::router_fn("kept", move |cx, c| {
            prepared.route(cx, c);
        })),
    );
    let state = ChainState::new(None, snap, consumer, vec![entry]).unwrap();
    let req = Request::new().with_attachment("x-user", keys(2000, true, 1)[0].as_str());
    assert_eq!(routed(&state, &req).unwrap(), CANARIES);
}

#[test]
fn load_errors_are_typed() {
    let e = LoadedRouter::load(&lib("router-wrong-abi"), None, "{}").unwrap_err();
    assert!(matches!(
        e,
        PluginError::AbiVersion {
            found: 999,
            expected: 1,
            ..
        }
    ));
    let e = LoadedRouter::load(&lib("router-missing-symbol"), None, "{}").unwrap_err();
    assert!(matches!(
        e,
        PluginError::MissingSymbol {
            symbol: "routechain_plugin_v1",
            ..
        }
    ));
    let e = LoadedRouter::load(&lib("router-faulty"), None, r#"{"in": "create"}"#).unwrap_err();
    assert!(
        matches!(&e, PluginError::Create { status: "panic", message, .. } if message == "faulty plugin panics in create"),
        "{e}"
    );
}

#[test]
fn the_deny_hosts_example_runs_and_reports_bad_rules_at_their_field() {
    deny_hosts::main(); // asserts its own routing
    let errors = compile(
        "routers:\n  - type: deny-hosts\n    rule: { hosts: [a, [b]] }\n  - type: deny-hosts\n    rule: { host: [a] }\n",
    )
    .unwrap_err();
    let shown: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
    assert_eq!(shown.len(), 2, "{shown:#?}");
    assert!(
        shown[0].starts_with("test.chain.yaml:3:24: routers[0].rule.hosts[1]: invalid type: sequence, expected a string"),
        "{}",
        shown[0]
    );
    assert!(
        shown[1].contains("routers[1].rule")
            && shown[1].contains("unknown field `host`, expected `hosts`"),
        "{}",
        shown[1]
    );
    // Without a rule every provider passes.
    let state = state(compile("routers:\n  - type: deny-hosts\n").unwrap());
    let (out, trace) = traced(&state, &Request::new());
    assert_eq!(out, [0, 1, 2, 3, 4, 5, 6, 7]);
    assert_eq!(
        trace.steps[0].reason,
        "no deny-hosts rule: every provider passes"
    );
}

#[test]
fn a_c_plugin_built_from_the_header_loads_and_routes() {
    let Some(cc) = ["cc", "gcc", "clang"]
        .into_iter()
        .find(|c| Command::new(c).arg("--version").output().is_ok())
    else {
        eprintln!("no C compiler found: skipping the C plugin test");
        return;
    };
    let root = workspace_root();
    let out_dir = plugin_dir().join("c");
    std::fs::create_dir_all(&out_dir).unwrap();
    let lib_path = out_dir.join(lib_name("healthy"));
    let out = Command::new(cc)
        .args([
            "-std=c99", "-Wall", "-Werror", "-shared", "-fPIC", "-O2", "-I",
        ])
        .arg(root.join("plugins/abi"))
        .arg("-o")
        .arg(&lib_path)
        .arg(root.join("plugins/examples/c/healthy.c"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let snap = Arc::new(
        Snapshot::parse_lines(
            1,
            "dubbo://a:1/s?healthy=true\ndubbo://b:1/s\ndubbo://c:1/s?healthy=true\ndubbo://d:1/s?healthy=no\n",
        )
        .unwrap(),
    );
    for (name, expected) in [("", vec![0, 2]), ("    name: unhealthy\n", vec![1, 3])] {
        let text = format!(
            "routers:\n  - type: plugin\n    path: c/{}\n{name}",
            lib_name("healthy")
        );
        let entries = compile(&text).unwrap();
        let state = ChainState::new(None, snap.clone(), Url::empty(), entries).unwrap();
        assert_eq!(routed(&state, &Request::new()).unwrap(), expected);
        let any = Request::new().with_attachment("x-any-health", "1");
        let (out, trace) = traced(&state, &any);
        assert_eq!(out, [0, 1, 2, 3]);
        assert_eq!(trace.steps[0].reason, "x-any-health: all kept");
    }
}
