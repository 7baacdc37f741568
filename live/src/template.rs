//! [`ChainTemplate`]: one chain configuration for many services.
//!
//! A Dubbo consumer holds hundreds of references, each routed by the same router chain
//! configuration but with its own service key, providers and config-center rules. Built one
//! by one (`ChainFile::load` and `routechain::registry()` per service), every live chain
//! holds its own parsed chain file (its YAML document and tree, the entry definitions),
//! its own registry of factories and its own compiled routers: about 10 KB a service of the
//! shipped full chain before a single provider (`cargo run --release -p routechain-benches
//! --example many_services`, part `separate`). A template parses and compiles once; the
//! live chains built from it share the parsed file, the registry and the compiled routers
//! (all of them when they route the template's service; for another service, those whose
//! factory does not read the service, [`routechain_core::RouterFactory::reads_service`]:
//! every built-in router). What stays per service is what differs: the
//! reference, the providers, the rules a config center pushes, the prepared state, the
//! balancer and health tables and the call counters.
//!
//! Sharing changes nothing of what a live chain does: a rule pushed to one service is
//! compiled for that service alone (a compiled router is immutable; a new rule makes a new
//! one), and a chain-file reload is parsed by the live chain it is pushed to, which keeps
//! its own reference.

use std::sync::Arc;

use routechain_core::{ChainEntry, Registry, Snapshot};
use routechain_rules::load::LoadError;
use routechain_rules::{ChainFile, RuleOverride};

use crate::LiveChain;
use crate::dubbo::ServiceKey;
use crate::report::LiveOptions;

/// One chain configuration (a parsed chain file and a registry) that many [`LiveChain`]s
/// are built from, sharing what they have in common: see the module documentation.
///
/// ```
/// use routechain_live::{ChainTemplate, LiveOptions, ServiceKey};
/// use routechain_rules::ChainFile;
///
/// let text = "routers:\n  - type: condition\n  - type: tag\n";
/// let file = ChainFile::parse("app.chain.yaml", text, None).unwrap();
/// // Parsed and compiled once: every problem of the file is reported here.
/// let template = ChainTemplate::new(file, routechain_routers::builtin_registry()).unwrap();
/// // One live chain per reference, each following its own service key's rules.
/// let services: Vec<_> = ["com.acme.OrderService", "com.acme.UserService:1.0.0"]
///     .iter()
///     .map(|key| {
///         let options = LiveOptions::default(); // its consumer URL, clock, metrics...
///         template.live_chain_for(&ServiceKey::parse(key), options).unwrap()
///     })
///     .collect();
/// assert_eq!(services[1].service_name().as_deref(), Some("com.acme.UserService"));
/// ```
#[derive(Clone)]
pub struct ChainTemplate {
    inner: Arc<Inner>,
}

struct Inner {
    file: ChainFile,
    registry: Registry,
    /// The entries compiled with the file's own rules, for the file's `service`.
    entries: Arc<[ChainEntry]>,
}

impl std::fmt::Debug for ChainTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChainTemplate")
            .field("origin", &self.inner.file.doc.origin)
            .field("service", &self.inner.file.service)
            .field("entries", &self.inner.entries)
            .finish()
    }
}

impl ChainTemplate {
    /// A template of `file`, its routers built through `registry`: every entry is compiled
    /// now with the file's own rules, so a bad chain file is refused once, here, with every
    /// problem located.
    pub fn new(file: ChainFile, registry: Registry) -> Result<Self, LoadError> {
        let entries = file.compile(&registry)?.into();
        Ok(ChainTemplate {
            inner: Arc::new(Inner {
                file,
                registry,
                entries,
            }),
        })
    }

    /// The chain file.
    pub fn file(&self) -> &ChainFile {
        &self.inner.file
    }

    /// The registry the routers are built through.
    pub fn registry(&self) -> &Registry {
        &self.inner.registry
    }

    /// A live chain with no provider yet, for the chain file's own reference (`service`,
    /// `group`, `version`).
    pub fn live_chain(&self, options: LiveOptions) -> Result<LiveChain, LoadError> {
        self.build(None, options, Snapshot::new(1, Vec::new()))
    }

    /// A live chain with no provider yet, for `reference` in place of the chain file's: its
    /// providers, service-scope rule keys and override-rule nodes are those of `reference`
    /// (see [`LiveChain::subscriptions`]), and it keeps `reference` when the chain file is
    /// reloaded ([`crate::Update::ChainFile`]). Set [`LiveOptions::consumer`] to the
    /// reference's consumer URL when rules match on it.
    pub fn live_chain_for(
        &self,
        reference: &ServiceKey,
        options: LiveOptions,
    ) -> Result<LiveChain, LoadError> {
        self.build(Some(reference), options, Snapshot::new(1, Vec::new()))
    }

    /// A live chain serving `providers` from the start, for `reference` (`None`: the chain
    /// file's own).
    pub fn live_chain_with_providers(
        &self,
        reference: Option<&ServiceKey>,
        options: LiveOptions,
        providers: Snapshot,
    ) -> Result<LiveChain, LoadError> {
        self.build(reference, options, providers)
    }

    fn build(
        &self,
        reference: Option<&ServiceKey>,
        options: LiveOptions,
        providers: Snapshot,
    ) -> Result<LiveChain, LoadError> {
        let inner = &*self.inner;
        let mut file = inner.file.clone();
        if let Some(r) = reference {
            set_reference(&mut file, r);
        }
        // A factory is handed the chain's service (`RouterSpec::service`) and nothing else
        // of the reference: the routers compiled for the template's service are the ones
        // this service would compile, and so are those of factories that do not read it.
        let entries: Arc<[ChainEntry]> = if file.service == inner.file.service {
            inner.entries.clone()
        } else {
            let mut entries = Vec::with_capacity(inner.entries.len());
            let mut errors = Vec::new();
            for (def, compiled) in file.entries.iter().zip(inner.entries.iter()) {
                let reads = inner
                    .registry
                    .get(&def.type_name)
                    .is_none_or(|f| f.reads_service());
                if !reads {
                    entries.push(compiled.clone());
                    continue;
                }
                match file.compile_entry(&inner.registry, def, RuleOverride::Own) {
                    Ok(e) => entries.push(e),
                    Err(mut es) => errors.append(&mut es),
                }
            }
            if !errors.is_empty() {
                return Err(errors.into());
            }
            entries.into()
        };
        LiveChain::build(
            file,
            inner.registry.clone(),
            reference.cloned(),
            entries,
            options,
            providers,
        )
    }
}

/// Makes `reference` the chain file's (`service`, `group`, `version`).
pub(crate) fn set_reference(file: &mut ChainFile, reference: &ServiceKey) {
    file.service = Some(reference.interface.clone());
    file.group = reference.group.clone();
    file.version = reference.version.clone();
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use routechain_core::Request;

    use super::*;
    use crate::chain::tests::routed_for;
    use crate::{ProviderText, Report, RuleEvent, RuleKey, Update};

    const CHAIN: &str = "
service: com.foo.BarService
consumer: consumer://10.9.9.9/com.foo.BarService?application=web
routers:
  - type: condition
  - type: condition
    application: web
  - type: condition
    rule:
      conditions: ['=> zone = a']
  - type: tag
";

    const OTHER: &str = "com.foo.OtherService:1.0.0:blue";

    fn template() -> ChainTemplate {
        let file = ChainFile::parse("t.yaml", CHAIN, None).unwrap();
        ChainTemplate::new(file, routechain_routers::builtin_registry()).unwrap()
    }

    /// The same service built alone: its own chain file (with `reference` written in it)
    /// and its own registry.
    fn alone(reference: Option<&ServiceKey>) -> LiveChain {
        let mut file = ChainFile::parse("t.yaml", CHAIN, None).unwrap();
        if let Some(r) = reference {
            set_reference(&mut file, r);
        }
        LiveChain::new(
            file,
            routechain_routers::builtin_registry(),
            LiveOptions::default(),
        )
        .unwrap()
    }

    fn providers(interface: &str, list: &[(u8, &str)]) -> Update {
        Update::Providers {
            origin: "test".into(),
            text: ProviderText::Urls(
                list.iter()
                    .map(|(n, q)| {
                        format!("dubbo://10.0.0.{n}:20880/{interface}?application=app&{q}")
                    })
                    .collect(),
            ),
        }
    }

    fn rule(key: RuleKey, text: Option<&str>) -> Update {
        Update::Rule {
            origin: format!("test:{key}"),
            key,
            event: match text {
                Some(t) => RuleEvent::Modified(t.into()),
                None => RuleEvent::Deleted,
            },
        }
    }

    /// What a report says, without the generation (two chains count their own).
    fn outcome(r: &Report) -> String {
        match r {
            Report::Applied {
                change, providers, ..
            } => format!("applied {change} ({providers})"),
            other => other.to_string(),
        }
    }

    #[test]
    fn a_service_of_the_template_shares_its_routers_and_a_rule_pushed_to_it_stays_its_own() {
        let template = template();
        let a = template.live_chain(LiveOptions::default()).unwrap();
        let b = template.live_chain(LiveOptions::default()).unwrap();
        let (sa, sb) = (a.chain().state(), b.chain().state());
        for (x, y) in sa.entries().iter().zip(sb.entries().iter()) {
            assert!(Arc::ptr_eq(&x.router, &y.router), "compiled once");
        }
        let list = [
            (1, "zone=a&region=hz"),
            (2, "zone=a&region=bj"),
            (3, "zone=b"),
        ];
        a.apply(providers("com.foo.BarService", &list));
        b.apply(providers("com.foo.BarService", &list));
        // (The tag entry follows the providers' application, known now: both recompiled it.)
        let sb = b.chain().state();
        let request = Request::new();
        assert_eq!(
            routed_for(&a, &request),
            ["10.0.0.1:20880", "10.0.0.2:20880"]
        );
        // A service-key rule pushed to `a` narrows `a` alone.
        let key = RuleKey::new("com.foo.BarService::", "condition");
        let reports = a.apply(rule(key, Some("conditions: ['=> region = hz']")));
        assert!(
            matches!(reports[..], [Report::Applied { .. }]),
            "{reports:?}"
        );
        assert_eq!(routed_for(&a, &request), ["10.0.0.1:20880"]);
        assert_eq!(
            routed_for(&b, &request),
            ["10.0.0.1:20880", "10.0.0.2:20880"]
        );
        let after = b.chain().state();
        for (x, y) in sb.entries().iter().zip(after.entries().iter()) {
            assert!(
                Arc::ptr_eq(&x.router, &y.router),
                "b's routers are untouched"
            );
        }
        assert!(!Arc::ptr_eq(
            &sa.entries()[0].router,
            &a.chain().state().entries()[0].router
        ));
    }

    #[test]
    fn a_service_for_another_reference_follows_its_keys_and_keeps_them_over_a_reload() {
        let dir =
            std::env::temp_dir().join(format!("routechain-live-template-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.chain.yaml");
        std::fs::write(&path, CHAIN).unwrap();
        let file = ChainFile::load(&path).unwrap();
        let template = ChainTemplate::new(file, routechain_routers::builtin_registry()).unwrap();
        let other = ServiceKey::parse(OTHER);
        let live = template
            .live_chain_for(&other, LiveOptions::default())
            .unwrap();
        let sibling = template.live_chain(LiveOptions::default()).unwrap();
        let alone = alone(Some(&other));
        assert_eq!(live.subscriptions(), alone.subscriptions());
        assert_eq!(live.reference(), Some(other.clone()));
        assert_eq!(live.chain().state().service(), Some("com.foo.OtherService"));
        let list = [(1, "zone=a"), (2, "zone=b")];
        live.apply(providers(&other.interface, &list));
        sibling.apply(providers("com.foo.BarService", &list));
        let request = Request::new();
        assert_eq!(routed_for(&live, &request), ["10.0.0.1:20880"]);
        // The file is edited and reloaded by one service: the reference stays the
        // service's, and the other service of the template keeps its own chain file.
        std::fs::write(&path, CHAIN.replace("zone = a", "zone = b")).unwrap();
        let reports = live.apply(Update::ChainFile(path.clone()));
        assert!(
            matches!(reports[..], [Report::Applied { .. }]),
            "{reports:?}"
        );
        assert_eq!(live.reference(), Some(other));
        assert_eq!(live.subscriptions(), alone.subscriptions());
        assert_eq!(live.service_name().as_deref(), Some("com.foo.OtherService"));
        assert_eq!(routed_for(&live, &request), ["10.0.0.2:20880"]);
        assert_eq!(routed_for(&sibling, &request), ["10.0.0.1:20880"]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Builds routers named after the chain's service (a factory that reads it).
    struct ByService;

    impl routechain_core::RouterFactory for ByService {
        fn build(
            &self,
            spec: &routechain_core::RouterSpec<'_>,
        ) -> Result<Arc<dyn routechain_core::Router>, Vec<routechain_core::RuleError>> {
            let name = format!("by-service({})", spec.service.unwrap_or_default());
            Ok(Arc::new(routechain_core::router_fn(name, |_, _| {})))
        }
    }

    #[test]
    fn another_reference_shares_the_routers_whose_factory_does_not_read_the_service() {
        let mut registry = routechain_routers::builtin_registry();
        registry.register("by-service", Arc::new(ByService));
        let text = "service: com.foo.BarService\nrouters:\n  - type: by-service\n  \
                    - type: condition\n    rule: {conditions: ['=> zone = a']}\n";
        let file = ChainFile::parse("t.yaml", text, None).unwrap();
        let template = ChainTemplate::new(file, registry).unwrap();
        let own = template.live_chain(LiveOptions::default()).unwrap();
        let other = template
            .live_chain_for(&ServiceKey::parse(OTHER), LiveOptions::default())
            .unwrap();
        let (own, other) = (own.chain().state(), other.chain().state());
        let names = |s: &routechain_core::ChainState| -> Vec<String> {
            s.entries()
                .iter()
                .map(|e| e.router.name().to_string())
                .collect()
        };
        assert_eq!(
            names(&own),
            ["by-service(com.foo.BarService)", "condition(service)"]
        );
        assert_eq!(
            names(&other),
            ["by-service(com.foo.OtherService)", "condition(service)"]
        );
        assert!(!Arc::ptr_eq(
            &own.entries()[0].router,
            &other.entries()[0].router
        ));
        assert!(Arc::ptr_eq(
            &own.entries()[1].router,
            &other.entries()[1].router
        ));
    }

    #[test]
    fn a_bad_chain_file_is_refused_by_the_template() {
        let file = ChainFile::parse(
            "t.yaml",
            "routers:\n  - type: nosuch\n  - type: condition\n    rule: {conditions: ['=> ']}\n",
            None,
        )
        .unwrap();
        let err = ChainTemplate::new(file, routechain_routers::builtin_registry()).unwrap_err();
        let text = err.render();
        assert!(text.contains("unknown router type `nosuch`"), "{text}");
    }

    /// One step of a service's life: a provider list (by its providers' numbers and zones),
    /// a rule at the service key or the consumer's application (set or deleted), or a tag
    /// rule at the providers' application.
    #[derive(Debug, Clone)]
    enum Step {
        Providers(Vec<(u8, bool)>),
        ServiceRule(Option<u8>),
        AppRule(Option<u8>),
        TagRule(Option<u8>),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            proptest::collection::vec((1u8..12, any::<bool>()), 0..8).prop_map(Step::Providers),
            proptest::option::of(0u8..4).prop_map(Step::ServiceRule),
            proptest::option::of(0u8..4).prop_map(Step::AppRule),
            proptest::option::of(0u8..3).prop_map(Step::TagRule),
        ]
    }

    fn update(step: &Step, reference: &ServiceKey) -> Update {
        let region = |r: u8| ["hz", "bj", "sh", "sz"][r as usize % 4];
        match step {
            Step::Providers(list) => {
                let list: Vec<(u8, String)> = list
                    .iter()
                    .map(|&(n, a)| {
                        let zone = if a { "a" } else { "b" };
                        (
                            n,
                            format!("zone={zone}&region={}&dubbo.tag=t{}", region(n), n % 3),
                        )
                    })
                    .collect();
                let list: Vec<(u8, &str)> = list.iter().map(|(n, q)| (*n, q.as_str())).collect();
                providers(&reference.interface, &list)
            }
            Step::ServiceRule(r) => rule(
                RuleKey::new(reference.rule_key(), "condition"),
                r.map(|r| format!("conditions: ['=> region = {}']", region(r)))
                    .as_deref(),
            ),
            Step::AppRule(r) => rule(
                RuleKey::new("web", "condition"),
                r.map(|r| format!("conditions: ['=> region != {}']", region(r)))
                    .as_deref(),
            ),
            Step::TagRule(r) => rule(
                RuleKey::new("app", "tag"),
                r.map(|r| {
                    format!(
                        "force: false\ntags:\n  - name: gray\n    addresses: ['10.0.0.{}:20880']\n",
                        r + 1
                    )
                })
                .as_deref(),
            ),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// Two services built from one template (one for the file's reference, one for
        /// another) go through the same updates as the same two services built alone: every
        /// report, subscription and routed set agrees, whatever the other service was sent.
        #[test]
        fn services_of_one_template_behave_as_services_built_alone(
            steps in proptest::collection::vec((step(), any::<bool>()), 1..12)
        ) {
            let template = template();
            let own = ServiceKey::parse("com.foo.BarService");
            let other = ServiceKey::parse(OTHER);
            let shared = [
                template.live_chain(LiveOptions::default()).unwrap(),
                template.live_chain_for(&other, LiveOptions::default()).unwrap(),
            ];
            let separate = [alone(None), alone(Some(&other))];
            let requests = [
                Request::new(),
                Request::new().with_attachment("dubbo.tag", "gray"),
            ];
            for (step, to_other) in &steps {
                let i = usize::from(*to_other);
                let reference = if *to_other { &other } else { &own };
                let a: Vec<String> = shared[i].apply(update(step, reference)).iter().map(outcome).collect();
                let b: Vec<String> = separate[i].apply(update(step, reference)).iter().map(outcome).collect();
                prop_assert_eq!(a, b, "{:?}", step);
                for j in 0..2 {
                    prop_assert_eq!(shared[j].subscriptions(), separate[j].subscriptions());
                    prop_assert_eq!(shared[j].provider_app_kinds(), separate[j].provider_app_kinds());
                    for r in &requests {
                        prop_assert_eq!(routed_for(&shared[j], r), routed_for(&separate[j], r));
                    }
                }
            }
        }
    }
}
