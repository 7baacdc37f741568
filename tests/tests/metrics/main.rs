//! The chain's call-path metrics with the real built-in routers: every router that has a
//! fallback or force path counts it (`routechain_router_fallback_total`) on exactly the
//! calls that take it, and the full chain with metrics on allocates nothing per call.

use std::sync::Arc;

use routechain::balance::Caller;
use routechain::balance::{Cluster, ServiceConfig};
use routechain::core::{CallState, ChainMetrics, Request, Snapshot, Url};
use routechain::rules::ChainFile;
use routechain_testkit as testkit;

const PROVIDERS: &str = "\
dubbo://10.0.0.1:20880/com.foo.BarService?zone=a&group=blue&application=orders&region=beijing&idc=mt
dubbo://10.0.0.2:20880/com.foo.BarService?zone=b&group=blue&application=orders&region=beijing&idc=zf
";

/// The mesh rule of the mesh cases: subset `a` has a provider, subset `c` none. A call with
/// `lane=gray` goes to `c` alone (nothing selected: empty protection); `lane=canary` to `c`
/// with a fallback to `a`; any other call to `a`.
const MESH_RULE: &str = "
      kind: DestinationRule
      metadata: { name: orders }
      spec:
        subsets:
          - { name: a, labels: { zone: a } }
          - { name: c, labels: { zone: c } }
      ---
      kind: VirtualService
      metadata: { name: orders }
      spec:
        dubbo:
          - routedetail:
              - name: gray
                match: [{ attachments: { dubboContext: { lane: { exact: gray } } } }]
                route: [{ destination: { subset: c } }]
              - name: canary
                match: [{ attachments: { dubboContext: { lane: { exact: canary } } } }]
                route: [{ destination: { subset: c, fallback: { destination: { subset: a } } } }]
              - name: rest
                route: [{ destination: { subset: a } }]
";

/// Routes each request once through the chain and returns, per request, how much the
/// chain's fallback counters (summed over its routers) moved: 1 on a call that took a
/// fallback or force path, 0 on one that did not.
fn fallbacks(chain_yaml: &str, requests: &[Request]) -> Vec<u64> {
    let file = ChainFile::parse("t.chain.yaml", chain_yaml, None)
        .unwrap_or_else(|e| panic!("{chain_yaml}: {e:?}"));
    let snapshot = Arc::new(Snapshot::parse_lines(1, PROVIDERS).unwrap());
    let consumer =
        Url::parse("consumer://10.9.9.9/com.foo.BarService?zone=a&region=beijing&idc=mt").unwrap();
    let metrics = Arc::new(ChainMetrics::new());
    let state = routechain::rules::load::build_state(
        &file,
        &routechain::registry(),
        snapshot,
        Some(consumer),
    )
    .unwrap()
    .with_metrics(Some(metrics.clone()));
    let mut call = CallState::seeded(1);
    let mut before = 0;
    requests
        .iter()
        .map(|r| {
            let _ = state.route(r, &mut call);
            let now: u64 = metrics.routers().iter().map(|s| s.fallback).sum();
            let moved = now - before;
            before = now;
            moved
        })
        .collect()
}

#[test]
fn every_router_counts_its_fallback_and_force_paths() {
    let plain = Request::new();
    let cases: &[(&str, &str, Vec<Request>, Vec<bool>)] = &[
        (
            "condition: then-part matches nothing (force=false: ignored; force=true: empty)",
            "routers:\n  - type: condition\n    rule:\n      conditions: ['method = get => zone = c', 'method = put => zone = a']\n",
            vec![
                plain.clone().with_method("get"),
                plain.clone().with_method("put"),
                plain.clone(),
            ],
            vec![true, false, false],
        ),
        (
            "condition, force=true",
            "routers:\n  - type: condition\n    rule:\n      force: true\n      conditions: ['=> zone = c']\n",
            vec![plain.clone()],
            vec![true],
        ),
        (
            "tag: a request tag no provider has falls back to the untagged",
            "routers:\n  - type: tag\n",
            vec![
                plain.clone().with_attachment("dubbo.tag", "gray"),
                plain.clone(),
            ],
            vec![true, false],
        ),
        (
            "tag: dubbo.force.tag=true and no provider with the tag: forced empty",
            "routers:\n  - type: tag\n",
            vec![
                plain
                    .clone()
                    .with_attachment("dubbo.tag", "gray")
                    .with_attachment("dubbo.force.tag", "true"),
            ],
            vec![true],
        ),
        (
            "group: a group no provider has",
            "routers:\n  - type: group\n",
            vec![
                plain.clone().with_attribute("group", "green"),
                plain.clone().with_attribute("group", "blue"),
            ],
            vec![true, false],
        ),
        (
            "affinity: below the ratio, candidates unchanged",
            "routers:\n  - type: affinity\n    rule:\n      configVersion: v3.1\n      key: com.foo.BarService\n      affinityAware: {key: zone, ratio: 80}\n",
            vec![plain.clone()],
            vec![true],
        ),
        (
            "affinity: at the ratio, kept",
            "routers:\n  - type: affinity\n    rule:\n      configVersion: v3.1\n      key: com.foo.BarService\n      affinityAware: {key: zone, ratio: 50}\n",
            vec![plain.clone()],
            vec![false],
        ),
    ];
    for (what, yaml, requests, want) in cases {
        let want: Vec<u64> = want.iter().map(|&took| u64::from(took)).collect();
        assert_eq!(fallbacks(yaml, requests), want, "{what}");
    }
}

#[test]
fn mesh_and_idc_weight_count_their_fallback_paths() {
    let plain = Request::new();
    let gray = plain.clone().with_attachment("lane", "gray");
    let canary = plain.clone().with_attachment("lane", "canary");
    let mesh = |extra: &str| {
        format!(
            "routers:\n  - type: mesh\n    app: orders\n{extra}    rule: |{}",
            MESH_RULE.replace("\n      ", "\n        ")
        )
    };
    // The condition router first narrows some calls (`method = get`) to the provider in
    // zone b / IDC zf; it never takes its own fallback here (its then-part always matches).
    let idc = |narrow: &str, rule: &str| {
        format!(
            "routers:\n  - type: condition\n    rule:\n      conditions: ['method = get => {narrow}']\n  - type: idc-weight\n    rule: {rule}\n"
        )
    };
    let cases: Vec<(&str, String, Vec<Request>, Vec<u64>)> = vec![
        (
            "mesh: a subset without candidates, empty protection; a fallback destination used",
            mesh(""),
            vec![
                gray.clone(),
                plain.clone(),
                canary.clone(),
                plain.clone(),
                gray.clone(),
            ],
            vec![1, 0, 1, 0, 1],
        ),
        (
            "mesh, empty: fail: nothing selected, forced empty",
            mesh("    empty: fail\n"),
            vec![gray.clone(), plain.clone(), canary.clone()],
            vec![1, 0, 1],
        ),
        (
            "idc-weight: the local IDC has no candidate, the region is kept",
            idc("idc = zf", "{idcs: {beijing: [mt, zf]}}"),
            vec![
                plain.clone().with_method("get"),
                plain.clone(),
                plain.clone().with_method("get"),
                plain.clone().with_method("put"),
            ],
            vec![1, 0, 1, 0],
        ),
        (
            "idc-weight, force=true: the local IDC has no candidate, none left",
            idc("idc = zf", "{idcs: {beijing: [mt, zf]}, force: true}"),
            vec![plain.clone(), plain.clone().with_method("get")],
            vec![0, 1],
        ),
        (
            "idc-weight: no region has a candidate, every candidate kept",
            idc("zone = b", "{region_param: zone, idcs: {a: [mt], b: [zf]}}"),
            vec![
                plain.clone().with_method("get"),
                plain.clone(),
                plain.clone().with_method("get"),
            ],
            vec![1, 0, 1],
        ),
    ];
    for (what, yaml, requests, want) in &cases {
        assert_eq!(&fallbacks(yaml, requests), want, "{what}\n{yaml}");
    }
}

#[test]
fn the_full_chain_with_metrics_on_allocates_nothing_per_call() {
    let yaml = testkit::full_chain_yaml();
    let snapshot = Arc::new(testkit::snapshot(10_000, 42));
    let metrics = Arc::new(ChainMetrics::new());
    let state = testkit::build_state(&yaml, snapshot)
        .unwrap_or_else(|e| panic!("{}", e.render()))
        .with_metrics(Some(metrics.clone()));
    let service = Cluster::new(state, ServiceConfig::default());
    let requests = testkit::requests(64, 42);
    let mut call = Caller::seeded(7);
    service.select(&requests[0], &[], &mut call).ok(); // grows the buffers
    let mut selected = 0u64;
    let info = allocation_counter::measure(|| {
        for i in 0..2_000 {
            if let Ok(s) = service.select(&requests[i % requests.len()], &[], &mut call) {
                std::hint::black_box(s.index());
                selected += 1;
            }
        }
    });
    assert_eq!(info.count_total, 0, "allocations while routing: {info:?}");
    assert_eq!(metrics.calls(), 2_001);
    let no_provider: u64 = metrics.routers().iter().map(|r| r.no_provider).sum();
    // Every call that selected nothing was emptied by a router and counted.
    assert!(
        no_provider >= 2_000 - selected,
        "{no_provider} vs {selected}"
    );
    assert!(selected > 1_500, "selected {selected} of 2,000");
}
