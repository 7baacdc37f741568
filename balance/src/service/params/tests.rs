use std::time::Duration;

use routechain_core::Snapshot;

use super::*;
use crate::service::config::MethodCall;

fn snapshot(lines: &[&str]) -> Snapshot {
    Snapshot::parse_lines(1, &lines.join("\n")).unwrap()
}

/// An override layer: a consumer-side rule set `keys` (comma-separated) on the provider at
/// `address`.
#[derive(Debug)]
struct Marked {
    address: &'static str,
    keys: String,
}

impl super::super::OverrideKeys for Marked {
    fn keys(&self, provider: &Provider, each: &mut dyn FnMut(&str)) {
        if provider.address() == self.address {
            self.keys
                .split(',')
                .filter(|k| !k.is_empty())
                .for_each(each);
        }
    }
}

/// `config` with a rule that set `keys` on the provider at `address`.
fn marked(config: ServiceConfig, address: &'static str, keys: &str) -> ServiceConfig {
    ServiceConfig {
        overrides: OverrideLayer::new(Arc::new(Marked {
            address,
            keys: keys.to_string(),
        })),
        ..config
    }
}

/// The consumer: service timeout 700 ms only when `service`, `get`'s 300 ms only when
/// `method`.
fn consumer(service: bool, method: bool) -> ServiceConfig {
    let mut c = ServiceConfig::default();
    if service {
        c.timeout = Some(Duration::from_millis(700));
    }
    if method {
        c.methods.insert(
            "get".into(),
            MethodCall {
                timeout: Some(Duration::from_millis(300)),
                ..MethodCall::default()
            },
        );
    }
    c
}

/// Every layer of Dubbo's order, removed one at a time from the top: each row's winner is
/// the highest layer present.
#[test]
fn timeout_follows_dubbos_precedence_layer_by_layer() {
    let rows: [(&str, bool, bool, u64, Source); 8] = [
        // provider URL, consumer service, consumer method, want, source
        (
            "get.timeout=100&timeout=500&methods=get,put",
            true,
            true,
            100,
            Source::OverrideMethod,
        ),
        (
            "get.timeout=150&timeout=500&methods=get,put",
            true,
            true,
            300,
            Source::ConsumerMethod,
        ),
        (
            "get.timeout=150&timeout=500&methods=get,put",
            true,
            false,
            150,
            Source::ProviderMethod,
        ),
        (
            "get.timeout=150&timeout=500&methods=put",
            true,
            false,
            700,
            Source::ConsumerService,
        ),
        (
            "timeout=500&methods=get",
            true,
            false,
            500,
            Source::OverrideService,
        ),
        (
            "timeout=500&methods=get",
            true,
            false,
            700,
            Source::ConsumerService,
        ),
        (
            "timeout=500&methods=get",
            false,
            false,
            500,
            Source::ProviderService,
        ),
        ("methods=get", false, false, 1000, Source::Default),
    ];
    for (k, (params, svc, method, want, source)) in rows.into_iter().enumerate() {
        // In rows 0 and 4 a rule set those keys.
        let url = format!("dubbo://10.0.0.1:1/s?{params}");
        let config = if k == 0 || k == 4 {
            marked(consumer(svc, method), "10.0.0.1:1", "get.timeout,timeout")
        } else {
            consumer(svc, method)
        };
        let p = CallParams::new(&snapshot(&[&url]), &config);
        let m = p.method(Some("get"));
        assert_eq!(
            p.timeout(m, Some(0)),
            (Some(Duration::from_millis(want)), source),
            "row {k}: {url}"
        );
    }
}

#[test]
fn retries_and_forks_never_come_from_the_provider() {
    let s = snapshot(&[
        "dubbo://10.0.0.1:1/s?retries=7&forks=5",
        "dubbo://10.0.0.2:1/s?retries=4",
    ]);
    let rule = marked(ServiceConfig::default(), "10.0.0.2:1", "retries");
    let p = CallParams::new(&s, &rule);
    let m = p.method(None);
    assert_eq!(p.retries(m, Some(0)), (2, Source::Default));
    assert_eq!(p.forks(m, Some(0)), (2, Source::Default));
    assert_eq!(p.retries(m, Some(1)), (4, Source::OverrideService));
    let consumer = ServiceConfig {
        retries: Some(0),
        ..rule
    };
    let p = p.configured(&consumer);
    assert_eq!(p.retries(m, Some(0)), (0, Source::ConsumerService));
    assert_eq!(p.retries(m, Some(1)), (4, Source::OverrideService));
}

#[test]
fn loadbalance_is_the_first_providers_unless_the_consumer_names_one() {
    let s = snapshot(&[
        "dubbo://10.0.0.1:1/s?loadbalance=roundrobin&methods=get&get.loadbalance=leastactive",
        "dubbo://10.0.0.2:1/s",
    ]);
    let p = CallParams::new(&s, &ServiceConfig::default());
    let kind = |p: &CallParams, m: Option<&str>, first| {
        let (slot, source) = p.slot(p.method(m), || first);
        (p.balance().spec(slot).kind, source)
    };
    assert_eq!(
        kind(&p, None, Some(0)),
        (LoadBalanceKind::RoundRobin, Source::ProviderService)
    );
    assert_eq!(
        kind(&p, Some("get"), Some(0)),
        (LoadBalanceKind::LeastActive, Source::ProviderMethod)
    );
    assert_eq!(
        kind(&p, None, Some(1)),
        (LoadBalanceKind::Random, Source::Default)
    );
    let named = ServiceConfig {
        balance: BalanceConfig::new(crate::lb::BalancerSpec::new(LoadBalanceKind::P2c)),
        ..ServiceConfig::default()
    };
    let p = p.configured(&named);
    assert_eq!(
        kind(&p, None, Some(0)),
        (LoadBalanceKind::P2c, Source::ConsumerService)
    );
    // The provider's method level beats the consumer's service level.
    assert_eq!(
        kind(&p, Some("get"), Some(0)),
        (LoadBalanceKind::LeastActive, Source::ProviderMethod)
    );
}

#[test]
fn a_non_positive_provider_timeout_is_dubbos_default_and_a_consumer_zero_is_none() {
    let s = snapshot(&["dubbo://10.0.0.1:1/s?timeout=0"]);
    let p = CallParams::new(&s, &ServiceConfig::default());
    assert_eq!(
        p.timeout(p.method(None), Some(0)),
        (Some(DEFAULT_TIMEOUT), Source::Default)
    );
    let none = ServiceConfig {
        timeout: Some(Duration::ZERO),
        ..ServiceConfig::default()
    };
    let p = p.configured(&none);
    assert_eq!(
        p.timeout(p.method(None), Some(0)),
        (None, Source::ConsumerService)
    );
}

#[test]
fn entries_are_carried_by_an_edit_and_method_ids_stay() {
    let a = "dubbo://10.0.0.1:1/s?methods=get&get.timeout=100";
    let b = "dubbo://10.0.0.2:1/s?methods=put&put.timeout=200";
    let c = "dubbo://10.0.0.3:1/s?methods=del&del.timeout=300&timeout=50";
    let old = snapshot(&[a, b]);
    let config = ServiceConfig::default();
    let p = CallParams::new(&old, &config);
    let next: Vec<_> = vec![
        old.providers()[1].clone(),
        snapshot(&[c]).providers()[0].clone(),
    ];
    let (new, edit) = old.edit_to(2, &next);
    let edited = p.edited(&edit, &new, &config);
    let fresh = CallParams::new(&new, &config);
    for m in ["get", "put", "del", "other"] {
        for i in 0..2 {
            assert_eq!(
                edited.effective(Some(m), Some((i, &new.providers()[i])), 0),
                fresh.effective(Some(m), Some((i, &new.providers()[i])), 0),
                "{m} on {i}"
            );
        }
    }
    assert_eq!(
        edited.timeout(edited.method(Some("put")), Some(0)).0,
        Some(Duration::from_millis(200))
    );
}

#[test]
fn cluster_is_the_consumers_only() {
    let s = snapshot(&["dubbo://10.0.0.1:1/s?cluster=failfast"]);
    let mut config = ServiceConfig {
        cluster: Some(ClusterMode::Forking),
        ..ServiceConfig::default()
    };
    config.methods.insert(
        "log".into(),
        MethodCall {
            cluster: Some(ClusterMode::Failsafe),
            ..MethodCall::default()
        },
    );
    let p = CallParams::new(&s, &config);
    assert_eq!(
        p.cluster(p.method(None)),
        (ClusterMode::Forking, Source::ConsumerService)
    );
    assert_eq!(
        p.cluster(p.method(Some("log"))),
        (ClusterMode::Failsafe, Source::ConsumerMethod)
    );
    let p = p.configured(&ServiceConfig::default());
    assert_eq!(
        p.cluster(p.method(Some("log"))),
        (ClusterMode::Failover, Source::Default)
    );
}

#[test]
fn a_provider_with_many_method_parameters_is_read_whole() {
    let methods: Vec<String> = (0..12).map(|i| format!("m{i:02}")).collect();
    let params: Vec<String> = methods
        .iter()
        .enumerate()
        .flat_map(|(i, m)| {
            [
                format!("{m}.timeout={}", 100 + i),
                format!("{m}.loadbalance=roundrobin"),
            ]
        })
        .collect();
    let url = format!(
        "dubbo://10.0.0.1:1/s?methods={}&{}",
        methods.join(","),
        params.join("&")
    );
    let p = CallParams::new(&snapshot(&[&url]), &ServiceConfig::default());
    for (i, m) in methods.iter().enumerate() {
        assert_eq!(
            p.timeout(p.method(Some(m)), Some(0)),
            (
                Some(Duration::from_millis(100 + i as u64)),
                Source::ProviderMethod
            ),
            "{m}"
        );
    }
}

/// `getWeight`'s `getMethodParameter(method, "weight", 100)` layer by layer: an override
/// rule's `get.weight`, the provider's own (for a method it lists), the service-level
/// weight (the rule's or the provider's), the default; a value that is not an int leaves
/// the next layer to decide, a negative one weighs 0.
#[test]
fn method_weight_follows_dubbos_precedence() {
    // provider URL params, keys an override rule set, want for `get`, its source
    use Source::{Default, OverrideMethod, OverrideService, ProviderMethod, ProviderService};
    let rows: [(&str, &str, u32, Source); 10] = [
        (
            "get.weight=30&weight=200&methods=get",
            "get.weight",
            30,
            OverrideMethod,
        ),
        (
            "get.weight=30&weight=200&methods=put",
            "get.weight",
            30,
            OverrideMethod,
        ),
        (
            "get.weight=50&weight=200&methods=get",
            "",
            50,
            ProviderMethod,
        ),
        (
            "get.weight=50&weight=200&methods=put",
            "",
            200,
            ProviderService,
        ),
        (
            "get.weight=50&weight=300&methods=get",
            "weight",
            50,
            ProviderMethod,
        ),
        (
            "get.weight=50&weight=300&methods=put",
            "weight",
            300,
            OverrideService,
        ),
        ("get.weight=50&methods=put", "", 100, Default),
        (
            "get.weight=-5&weight=200&methods=get",
            "",
            0,
            ProviderMethod,
        ),
        (
            "get.weight=x&weight=200&methods=get",
            "",
            200,
            ProviderService,
        ),
        ("get.weight=2147483648&methods=get", "", 100, Default),
    ];
    for (k, (params, overridden, want, source)) in rows.into_iter().enumerate() {
        let url = format!("dubbo://10.0.0.1:1/s?{params}");
        let s = snapshot(&[&url, "dubbo://10.0.0.2:1/s?weight=7"]);
        let config = marked(ServiceConfig::default(), "10.0.0.1:1", overridden);
        let p = CallParams::new(&s, &config);
        let service = crate::lb::Weights::new(&s);
        let tables: Vec<Box<[u32]>> = p.method_weight_tables(service.table()).collect();
        let get = p.weight_table(p.method(Some("get")));
        let weight = |i: usize| match get {
            Some(t) => tables[usize::from(t)][i],
            None => service.get(i),
        };
        assert_eq!(weight(0), want, "row {k}: {url}");
        // `explain` shows the same weight, and where it came from.
        let shown = p.effective(Some("get"), Some((0, &s.providers()[0])), 0);
        let row = shown.iter().find(|(key, ..)| *key == "weight").unwrap();
        assert_eq!(
            (&*row.1, row.2),
            (&*want.to_string(), source),
            "row {k}: {url}"
        );
        assert_eq!(weight(1), 7, "row {k}: the other provider keeps its weight");
        // Another method, and a call without one, weigh the service's weights.
        for m in [Some("put"), None] {
            assert_eq!(p.weight_table(p.method(m)), None, "row {k}: {m:?}");
        }
    }
}

/// A method with no `<method>.weight` anywhere has no table: its calls read the service's
/// weights as before; one table per method that has its own.
#[test]
fn only_methods_with_their_own_weight_get_a_table() {
    let s = snapshot(&[
        "dubbo://10.0.0.1:1/s?methods=get,put&get.weight=10",
        "dubbo://10.0.0.2:1/s?methods=get,put&put.weight=20&get.timeout=5",
    ]);
    let p = CallParams::new(&s, &ServiceConfig::default());
    let service = crate::lb::Weights::new(&s);
    let tables: Vec<Box<[u32]>> = p.method_weight_tables(service.table()).collect();
    assert_eq!(tables.len(), 2);
    let get = p.weight_table(p.method(Some("get"))).unwrap();
    let put = p.weight_table(p.method(Some("put"))).unwrap();
    assert_eq!(&*tables[usize::from(get)], &[10, 100]);
    assert_eq!(&*tables[usize::from(put)], &[100, 20]);
    assert_eq!(p.weight_table(p.method(Some("del"))), None);
    let none = CallParams::new(
        &snapshot(&["dubbo://10.0.0.1:1/s?methods=get&get.timeout=5&weight=3"]),
        &ServiceConfig::default(),
    );
    assert_eq!(none.weight_table(none.method(Some("get"))), None);
}

/// The override layer is the only way a value ranks as a rule's: a provider URL naming
/// `routechain.overridden` is a provider's own parameter (routers see it as any other), and
/// a new layer re-ranks the same providers, through an edit or over the same snapshot.
#[test]
fn the_override_layer_ranks_keys_and_a_new_one_rereads_the_providers() {
    let s = snapshot(&[
        "dubbo://10.0.0.1:1/s?timeout=300&routechain.overridden=timeout",
        "dubbo://10.0.0.2:1/s?timeout=400",
    ]);
    let consumer = consumer(true, false);
    let p = CallParams::new(&s, &consumer);
    for i in 0..2 {
        assert_eq!(
            p.timeout(p.method(None), Some(i)).1,
            Source::ConsumerService
        );
    }
    let ruled = marked(consumer.clone(), "10.0.0.2:1", "timeout");
    assert!(!p.reads_overrides_of(&ruled));
    let p = CallParams::new(&s, &ruled);
    assert!(p.reads_overrides_of(&ruled));
    assert_eq!(
        p.timeout(p.method(None), Some(1)),
        (Some(Duration::from_millis(400)), Source::OverrideService)
    );
    // An edit under another layer reads every provider again.
    let next: Vec<_> = s.providers().to_vec();
    let (new, edit) = s.edit_to(2, &next);
    let edited = p.edited(&edit, &new, &consumer);
    assert_eq!(
        edited.timeout(edited.method(None), Some(1)),
        (Some(Duration::from_millis(700)), Source::ConsumerService)
    );
}

/// `explain`'s `warmup` row: the provider's, a rule's or Dubbo's 10 minutes; its `weight`
/// row shows the warm-up weight at `now` while the provider warms up.
#[test]
fn effective_shows_warmup_and_the_warming_weight() {
    let start = 1_700_000_000_000_i64;
    // provider URL params, keys a rule set, now − timestamp, want weight, warmup, its source
    let rows: [(&str, &str, i64, &str, &str, Source); 5] = [
        (
            "weight=300&warmup=120000",
            "",
            60_000,
            "300 (warming up: 150 now)",
            "120000ms",
            Source::ProviderService,
        ),
        (
            "weight=300&warmup=120000",
            "warmup",
            120_000,
            "300",
            "120000ms",
            Source::OverrideService,
        ),
        (
            "weight=300",
            "",
            60_000,
            "300 (warming up: 30 now)",
            "600000ms",
            Source::Default,
        ),
        (
            "methods=get&get.weight=200",
            "",
            300_000,
            "200 (warming up: 100 now)",
            "600000ms",
            Source::Default,
        ),
        (
            "weight=300&warmup=x",
            "",
            600_000,
            "300",
            "600000ms",
            Source::Default,
        ),
    ];
    for (k, (params, overridden, uptime, weight, warmup, source)) in rows.into_iter().enumerate() {
        let url = format!("dubbo://10.0.0.1:1/s?timestamp={start}&{params}");
        let s = snapshot(&[&url]);
        let config = marked(ServiceConfig::default(), "10.0.0.1:1", overridden);
        let p = CallParams::new(&s, &config);
        let shown = p.effective(Some("get"), Some((0, &s.providers()[0])), start + uptime);
        let row = |key: &str| {
            let (_, v, s) = shown.iter().find(|(k, ..)| *k == key).unwrap();
            (v.clone(), *s)
        };
        assert_eq!(row("weight").0, weight, "row {k}: {url}");
        assert_eq!(
            row("warmup"),
            (warmup.to_string(), source),
            "row {k}: {url}"
        );
    }
    // No provider: the defaults.
    let p = CallParams::new(&snapshot(&[]), &ServiceConfig::default());
    let shown = p.effective(None, None, start);
    assert_eq!(
        shown[5..],
        [
            ("weight", "100".to_string(), Source::Default),
            ("warmup", "600000ms".to_string(), Source::Default)
        ]
    );
}
