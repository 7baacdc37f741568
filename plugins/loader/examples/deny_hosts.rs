//! A compiled-in router type, `deny-hosts`: no plugin library, no `unsafe` — a user crate
//! implements routechain's typed router trait and registers it under a type name in the
//! `Registry` it compiles chain files with.
//!
//! ```yaml
//! routers:
//!   - type: deny-hosts
//!     rule: { hosts: [10.0.0.2, 10.0.0.3] }
//! ```
//!
//! Run it: `cargo run -p routechain-plugin-loader --example deny_hosts`. The loader's tests
//! include this file and check the router (tests/plugins.rs).

use std::collections::BTreeSet;
use std::sync::Arc;

use routechain_core::{
    BitSet, CallState, Candidates, ChainState, Evaluation, PrepareContext, Registry, Request,
    RouteContext, RouterSpec, RuleError, Snapshot, TypedRouter, Url,
};

/// The rule as written: `{hosts: [...]}`.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDenyHosts {
    hosts: Vec<String>,
}

/// Removes the providers on the rule's hosts (a type error names its field path).
pub struct DenyHosts;

impl TypedRouter for DenyHosts {
    type Raw = RawDenyHosts;
    type Rule = BTreeSet<String>; // the hosts no call may use
    type Prepared = (BitSet, usize); // the allowed providers, how many are denied

    fn default_priority(&self, _: Option<&Self::Rule>) -> i32 {
        50
    }
    fn compile(&self, raw: RawDenyHosts, _: &RouterSpec<'_>) -> Result<Self::Rule, Vec<RuleError>> {
        Ok(raw.hosts.into_iter().collect())
    }
    // Off the call path: one pass over the providers per snapshot.
    fn prepare(hosts: &Arc<Self::Rule>, cx: &PrepareContext<'_>) -> Result<Self::Prepared, String> {
        let p = cx.snapshot.providers();
        let allowed = BitSet::from_fn(p.len(), |i| !hosts.contains(p[i].host()));
        let denied = p.len() - allowed.count();
        Ok((allowed, denied))
    }
    // Per call: one AND per 64 providers; no allocation, no string work.
    fn route(p: &Self::Prepared, cx: &mut RouteContext<'_>, c: &mut Candidates) -> Evaluation {
        c.and_assign(&p.0);
        cx.explain(format_args!("{} provider(s) on denied hosts", p.1));
        Evaluation::Cached
    }
}

/// Registers `deny-hosts` into `registry`.
pub fn register(registry: &mut Registry) {
    registry.register_typed("deny-hosts", DenyHosts);
}

/// Compiles a one-router chain and routes a call through it.
pub fn main() {
    let mut registry = Registry::new();
    routechain_routers::register_builtins(&mut registry);
    register(&mut registry);

    let chain = routechain_rules::ChainFile::parse(
        "example.chain.yaml",
        "routers:\n  - type: deny-hosts\n    rule: { hosts: [10.0.0.2] }\n",
        None,
    )
    .expect("chain file");
    let entries = chain.compile(&registry).expect("routers");
    let snapshot = Snapshot::parse_lines(
        1,
        "dubbo://10.0.0.1:20880/svc\ndubbo://10.0.0.2:20880/svc\ndubbo://10.0.0.3:20880/svc\n",
    )
    .expect("providers");
    let state = ChainState::new(None, Arc::new(snapshot), Url::empty(), entries).expect("prepared");
    let mut call = CallState::seeded(1);
    state.route(&Request::new(), &mut call).expect("a provider");
    let routed: Vec<usize> = call.candidates.iter().collect();
    assert_eq!(routed, vec![0, 2]);
    println!("routed to providers {routed:?}");
}
