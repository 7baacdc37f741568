//! Helpers shared by the routers' unit tests: snapshots from URL lines, rules from YAML,
//! one-router chains, chains from a chain file's text.

use std::sync::Arc;

use routechain_core::{
    CallState, ChainEntry, ChainState, FieldPath, NoProvider, Request, Router, RouterFactory,
    RouterSpec, RuleDoc, RuleError, Snapshot, TypedFactory, TypedRouter, Url,
};
use routechain_rules::{ChainFile, YamlDoc};

/// Builds a router of `type_name` from the typed `router`, as entry `routers[0]` of a
/// chain file with `rule` (YAML text) as its rule document.
pub(crate) fn build<T: TypedRouter>(
    router: T,
    type_name: &str,
    rule: Option<&str>,
) -> Result<Arc<dyn Router>, Vec<RuleError>> {
    let doc = rule.map(|t| YamlDoc::parse("rule.yaml", t).unwrap());
    let root = FieldPath::root();
    let entry_path = FieldPath::root().key("routers").index(0);
    let entry = serde_json::Value::Null;
    TypedFactory::new(type_name, router).build(&RouterSpec {
        type_name,
        entry: RuleDoc::new(&entry, &entry_path),
        rule: doc.as_ref().and_then(|d| d.rule_doc(&root)),
        base_dir: None,
        service: None,
    })
}

/// A snapshot from provider URL lines.
pub(crate) fn snapshot(lines: &[&str]) -> Arc<Snapshot> {
    Arc::new(Snapshot::parse_lines(1, &lines.join("\n")).expect("test providers parse"))
}

/// A consumer URL.
pub(crate) fn consumer(url: &str) -> Url {
    Url::parse(url).expect("test consumer parses")
}

/// Parses `yaml` and hands its root document to `f` (a router's `from_doc`).
pub(crate) fn with_doc<T>(
    yaml: &str,
    f: impl FnOnce(&RuleDoc<'_>) -> Result<T, Vec<RuleError>>,
) -> Result<T, Vec<RuleError>> {
    let doc = YamlDoc::parse("rule.yaml", yaml).expect("test YAML parses");
    let root = FieldPath::root();
    f(&doc.rule_doc(&root).expect("a document has a root"))
}

/// Compiles `yaml` as a rule of the typed `router`.
pub(crate) fn compile<T: TypedRouter>(router: T, yaml: &str) -> Result<T::Rule, Vec<RuleError>> {
    with_doc(yaml, |doc| TypedFactory::new("test", router).compile(*doc))
}

/// The chain of a chain file's text (the built-in routers) prepared over `providers`, with
/// no consumer.
pub(crate) fn chain_state(chain: &str, providers: Arc<Snapshot>) -> ChainState {
    let file = ChainFile::parse("test.chain.yaml", chain, None).expect("chain parses");
    let entries = file
        .compile(&crate::builtin_registry())
        .expect("chain compiles");
    ChainState::new(None, providers, Url::empty(), entries).expect("chain prepares")
}

/// Routes `request` through a chain of `entries` over `providers`; the routed indexes, or
/// the empty list when a router emptied the candidates.
pub(crate) fn route(
    providers: &Arc<Snapshot>,
    consumer: &Url,
    entries: Vec<ChainEntry>,
    request: &Request,
) -> Vec<usize> {
    let state = ChainState::new(None, providers.clone(), consumer.clone(), entries)
        .expect("routers prepare");
    route_state(&state, request)
}

/// Routes through a prepared state.
pub(crate) fn route_state(state: &ChainState, request: &Request) -> Vec<usize> {
    let mut call = CallState::seeded(7);
    match state.route(request, &mut call) {
        Ok(()) => call.candidates.iter().collect(),
        Err(NoProvider::EmptiedBy { .. } | NoProvider::EmptySnapshot) => Vec::new(),
    }
}

/// A request with the given attachments.
pub(crate) fn request(attachments: &[(&str, &str)]) -> Request {
    let mut r = Request::new().with_method("sayHello");
    for (k, v) in attachments {
        r = r.with_attachment(*k, *v);
    }
    r
}
