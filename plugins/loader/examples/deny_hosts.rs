//! A compiled-in router type, `deny-hosts`: no plugin library, no `unsafe` — a user crate
//! implements routechain's `Router` / `PreparedRouter` traits and registers a factory under
//! a type name in the `Registry` it compiles chain files with.
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
    BitSet, CallState, Candidates, ChainState, Evaluation, PrepareContext, PrepareError,
    PreparedRouter, Registry, Request, RouteContext, Router, RouterFactory, RouterSpec, RuleError,
    Snapshot, Url,
};
use serde::Deserialize;

/// The rule as written (parse, don't validate: this becomes a [`DenyHosts`]).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDenyHostsRule {
    hosts: Vec<String>,
}

/// The compiled rule: the hosts no call may use.
pub struct DenyHosts {
    hosts: Arc<BTreeSet<String>>,
}

/// Per snapshot: the providers whose host is not denied.
struct DenyHostsPrepared {
    allowed: BitSet,
    denied: usize,
}

impl Router for DenyHosts {
    fn name(&self) -> &str {
        "deny-hosts"
    }

    // Off the call path: one pass over the providers per snapshot.
    fn prepare(&self, cx: &PrepareContext<'_>) -> Result<Arc<dyn PreparedRouter>, PrepareError> {
        let providers = cx.snapshot.providers();
        let allowed = BitSet::from_fn(providers.len(), |i| {
            !self.hosts.contains(providers[i].host())
        });
        let denied = providers.len() - allowed.count();
        Ok(Arc::new(DenyHostsPrepared { allowed, denied }))
    }
}

impl PreparedRouter for DenyHostsPrepared {
    // Per call: one AND per 64 providers; no allocation, no string work.
    fn route(&self, cx: &mut RouteContext<'_>, candidates: &mut Candidates) -> Evaluation {
        candidates.and_assign(&self.allowed);
        cx.explain(format_args!("{} provider(s) on denied hosts", self.denied));
        Evaluation::Cached
    }
}

/// Builds `deny-hosts` routers from chain entries.
pub struct DenyHostsFactory;

impl RouterFactory for DenyHostsFactory {
    fn default_priority(&self, _spec: &RouterSpec<'_>) -> i32 {
        50
    }

    fn build(&self, spec: &RouterSpec<'_>) -> Result<Arc<dyn Router>, Vec<RuleError>> {
        let Some(rule) = spec.rule else {
            return Err(vec![RuleError::new(
                spec.entry.path.clone(),
                "deny-hosts needs a rule: { hosts: [...] }",
            )]);
        };
        // A type error names its field path (`routers[0].rule.hosts[1]`).
        let raw: RawDenyHostsRule = rule.parse().map_err(|e| vec![e])?;
        let errors: Vec<RuleError> = raw
            .hosts
            .iter()
            .enumerate()
            .filter(|(_, h)| h.trim().is_empty())
            .map(|(i, _)| rule.error(&rule_path_hosts(i), "a host must not be empty"))
            .collect();
        if !errors.is_empty() {
            return Err(errors); // every problem at once
        }
        Ok(Arc::new(DenyHosts {
            hosts: Arc::new(raw.hosts.into_iter().collect()),
        }))
    }
}

fn rule_path_hosts(i: usize) -> routechain_core::FieldPath {
    routechain_core::FieldPath::root().key("hosts").index(i)
}

/// Registers `deny-hosts` into `registry`.
pub fn register(registry: &mut Registry) {
    registry.register("deny-hosts", Arc::new(DenyHostsFactory));
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
    let state = ChainState::new(None, Arc::new(snapshot), Arc::new(Url::empty()), entries)
        .expect("prepared");
    let mut call = CallState::seeded(1);
    state.route(&Request::new(), &mut call).expect("a provider");
    let routed: Vec<usize> = call.candidates.iter().collect();
    assert_eq!(routed, vec![0, 2]);
    println!("routed to providers {routed:?}");
}
