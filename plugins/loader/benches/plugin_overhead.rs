//! The per-call cost of a plugin router against the same logic compiled in.
//!
//! Both chains hold one router running `router_canary::logic` over the same snapshot and
//! request; one calls it through the shared library (C ABI, request view callbacks, input
//! copy and narrowing check), the other directly. The difference is the plugin overhead
//! (target: under 100 ns per call). The bench builds the plugin in release mode with its own
//! `CARGO_TARGET_DIR` (`target/plugin-tests`).

use std::hint::black_box;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use criterion::{Criterion, criterion_main};
use routechain_core::{
    CallState, Candidates, ChainEntry, ChainState, Evaluation, PrepareContext, Request,
    RouteContext, Router, RouterSpec, RuleError, Snapshot, TypedFactory, TypedRouter, Url,
};
use routechain_plugin_loader::LoadedRouter;
use router_canary::logic::{CanaryRule, CanarySets, KeySource};

const CONFIG: &str = r#"{"percent": 20, "header": "x-user"}"#;

/// The canary logic compiled in, as a typed router (its config is the compiled rule).
struct NativeCanary;

impl TypedRouter for NativeCanary {
    type Raw = serde::de::IgnoredAny;
    type Rule = CanaryRule;
    type Prepared = (Arc<CanaryRule>, CanarySets);

    fn default_priority(&self, _rule: Option<&CanaryRule>) -> i32 {
        0
    }
    fn compile(
        &self,
        _raw: serde::de::IgnoredAny,
        _: &RouterSpec<'_>,
    ) -> Result<CanaryRule, Vec<RuleError>> {
        Ok(CanaryRule::from_json(CONFIG).expect("config"))
    }
    fn prepare(
        rule: &Arc<CanaryRule>,
        cx: &PrepareContext<'_>,
    ) -> Result<(Arc<CanaryRule>, CanarySets), String> {
        let providers = cx.snapshot.providers();
        let sets = rule.prepare(providers.len(), |i, k| providers[i].get(k));
        Ok((rule.clone(), sets))
    }
    fn route(
        (rule, sets): &(Arc<CanaryRule>, CanarySets),
        cx: &mut RouteContext<'_>,
        candidates: &mut Candidates,
    ) -> Evaluation {
        let request = cx.request();
        let value = match &rule.key {
            KeySource::Attachment(k) => request.attachments.get(k),
            KeySource::Attribute(k) => request.attributes.get(k),
        };
        let canary = rule.is_canary_caller(value);
        sets.route(canary, candidates.words_mut());
        Evaluation::Runtime
    }
}

fn build_plugin() -> std::path::PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let target = root.join("target").join("plugin-tests");
    // `cargo bench` passes `--bench`: measure a release build. `cargo test --all-targets`
    // runs each benchmark once as a smoke test: a debug build is enough there.
    let release = std::env::args().any(|a| a == "--bench");
    let mut cargo = Command::new(env!("CARGO"));
    cargo
        .current_dir(&root)
        .env("CARGO_TARGET_DIR", &target)
        .args(["build", "--quiet", "-p", "router-canary"]);
    if release {
        cargo.arg("--release");
    }
    let status = cargo.status().expect("cargo runs");
    assert!(status.success(), "building router-canary failed");
    let profile = if release { "release" } else { "debug" };
    target.join(profile).join(format!(
        "{}router_canary{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    ))
}

fn snapshot(n: usize) -> Arc<Snapshot> {
    let text: String = (0..n)
        .map(|i| {
            let canary = if i % 10 == 3 { "&canary=true" } else { "" };
            format!(
                "dubbo://10.0.{}.{}:20880/svc?zone=z{canary}\n",
                i / 250,
                i % 250
            )
        })
        .collect();
    Arc::new(Snapshot::parse_lines(1, &text).expect("providers"))
}

fn bench(c: &mut Criterion) {
    let path = build_plugin();
    let rule = CanaryRule::from_json(CONFIG).expect("config");
    let request = Request::new()
        .with_method("sayHello")
        .with_attachment("trace-id", "abc")
        .with_attachment("x-user", "user-1234");
    for providers in [64, 1024] {
        let snap = snapshot(providers);
        let make = |router: Arc<dyn Router>| {
            ChainState::new(
                None,
                snap.clone(),
                Url::empty(),
                vec![ChainEntry::new("canary", 0, router)],
            )
            .expect("prepared")
        };
        let native = make(TypedFactory::new("canary", NativeCanary).router(Some(rule.clone())));
        let plugin = make(Arc::new(
            LoadedRouter::load(&path, None, CONFIG).expect("plugin loads"),
        ));
        // Same answer both ways.
        let (mut a, mut b) = (CallState::seeded(1), CallState::seeded(1));
        native.route(&request, &mut a).expect("routed");
        plugin.route(&request, &mut b).expect("routed");
        assert_eq!(a.candidates, b.candidates);

        let mut group = c.benchmark_group(format!("canary/{providers}-providers"));
        let mut call = CallState::seeded(1);
        group.bench_function("compiled-in", |bch| {
            bch.iter(|| native.route(black_box(&request), &mut call))
        });
        group.bench_function("plugin", |bch| {
            bch.iter(|| plugin.route(black_box(&request), &mut call))
        });
        group.finish();
    }
}

/// The criterion group (its generated function carries no docs).
mod group {
    #![allow(missing_docs)]
    criterion::criterion_group!(benches, super::bench);
}

criterion_main!(group::benches);
