//! The chain file's service settings: load balancing, failover and health.
//!
//! ```yaml
//! load_balance: random          # random (default) | roundrobin | leastactive | consistenthash | p2c
//! hash_key: arguments[0]        # consistenthash: arguments[N] | attachments[K] | attributes[K], or a list
//! hash_nodes: 160               # consistenthash: virtual nodes per provider
//! methods:                      # per-method overrides
//!   getUser: {load_balance: consistenthash, hash_key: "attributes[user]", timeout: 200ms}
//!   listUsers: {load_balance: roundrobin, retries: 0}
//!   audit: {cluster: failsafe}
//! skip_degraded: true           # drop degraded providers from every routed set (default false)
//! retries: 2                    # failover retries after the first attempt (default 2)
//! timeout: 1s                   # timeout of one attempt of `Cluster::call` (default 1s; 0: none)
//! cluster: failover             # failover (default) | failfast | failsafe | forking | broadcast
//! forks: 2                      # forking: parallel calls (default 2; 0: every routed provider)
//! health:
//!   failure_threshold: 5        # consecutive failures that degrade a provider (default 5)
//!   cooldown: 30s               # how long it stays degraded (default 30s)
//! ```
//!
//! Durations are humantime strings (`500ms`, `30s`, `2m`, `1h 30m`) or a number of seconds.
//! Every problem is reported at once, each at its field path. These are the consumer's call
//! parameters: a value not written here is taken from the providers' URLs and the override
//! rules as Dubbo takes it (`routechain_balance::service::params`).

use std::time::Duration;

use routechain_balance::lb::{BalanceConfig, BalancerSpec, LoadBalanceKind};
use routechain_balance::{ClusterMode, HealthConfig, MethodCall, ServiceConfig};
use routechain_core::{FieldPath, KeyPart, RuleError};
use serde_json::{Map, Value};

/// The top-level chain-file fields read here.
pub const SERVICE_FIELDS: [&str; 10] = [
    "load_balance",
    "hash_key",
    "hash_nodes",
    "methods",
    "skip_degraded",
    "retries",
    "timeout",
    "cluster",
    "forks",
    "health",
];

const BALANCER_FIELDS: [&str; 3] = ["load_balance", "hash_key", "hash_nodes"];
const METHOD_FIELDS: [&str; 7] = [
    "load_balance",
    "hash_key",
    "hash_nodes",
    "retries",
    "timeout",
    "cluster",
    "forks",
];
const HEALTH_FIELDS: [&str; 2] = ["failure_threshold", "cooldown"];

/// Reads the service settings from the chain file's top-level mapping.
pub fn parse(top: &Map<String, Value>, errors: &mut Vec<RuleError>) -> ServiceConfig {
    let root = FieldPath::root();
    let mut config = ServiceConfig::default();
    let default = balancer(top, &root, &BalancerSpec::default(), errors);
    let mut balance = BalanceConfig::new(default.clone());
    // A balancer the chain file does not name is the providers' or the override rules'.
    balance.default_named = top.get("load_balance").is_some_and(|v| !v.is_null());
    match top.get("methods") {
        None | Some(Value::Null) => {}
        Some(Value::Object(methods)) => {
            for (name, value) in methods {
                let path = root.key("methods").key(name.as_str());
                if name.trim().is_empty() {
                    errors.push(RuleError::new(
                        path.clone(),
                        "a method name must not be blank",
                    ));
                }
                match value {
                    Value::Object(m) => {
                        unknown_fields(m, &path, &METHOD_FIELDS, errors);
                        // A balancer slot of its own only when the method sets one.
                        if BALANCER_FIELDS.iter().any(|k| m.contains_key(*k)) {
                            let spec = balancer(m, &path, &default, errors);
                            let named = m.get("load_balance").is_some_and(|v| !v.is_null());
                            balance = balance.with_method_named(name.clone(), spec, named);
                        }
                        let call = MethodCall {
                            retries: uint(m.get("retries"), &path.key("retries"), errors),
                            timeout: duration_field(m.get("timeout"), &path.key("timeout"), errors),
                            cluster: cluster(m.get("cluster"), &path.key("cluster"), errors),
                            forks: uint(m.get("forks"), &path.key("forks"), errors),
                        };
                        if call != MethodCall::default() {
                            config.methods.insert(name.clone(), call);
                        }
                    }
                    Value::String(kind) => {
                        // Shorthand: `getUser: roundrobin`.
                        let spec = match kind_of(kind, &path, errors) {
                            Some(k) => BalancerSpec {
                                kind: k,
                                ..default.clone()
                            },
                            None => default.clone(),
                        };
                        balance = balance.with_method(name.clone(), spec);
                    }
                    _ => errors.push(RuleError::new(
                        path,
                        "a method entry is a mapping with `load_balance` (or a balancer name)",
                    )),
                }
            }
        }
        Some(_) => errors.push(RuleError::new(
            root.key("methods"),
            "`methods` must be a mapping from method name to its settings",
        )),
    }
    config.balance = balance;
    match top.get("skip_degraded") {
        None | Some(Value::Null) => {}
        Some(Value::Bool(b)) => config.skip_degraded = *b,
        Some(_) => errors.push(RuleError::new(
            root.key("skip_degraded"),
            "`skip_degraded` must be true or false",
        )),
    }
    config.retries = uint(top.get("retries"), &root.key("retries"), errors);
    config.timeout = duration_field(top.get("timeout"), &root.key("timeout"), errors);
    config.cluster = cluster(top.get("cluster"), &root.key("cluster"), errors);
    config.forks = uint(top.get("forks"), &root.key("forks"), errors);
    match top.get("health") {
        None | Some(Value::Null) => {}
        Some(Value::Object(h)) => {
            let path = root.key("health");
            unknown_fields(h, &path, &HEALTH_FIELDS, errors);
            let mut health = HealthConfig::default();
            let tpath = path.key("failure_threshold");
            match uint(h.get("failure_threshold"), &tpath, errors) {
                Some(0) => errors.push(RuleError::new(
                    tpath,
                    "`failure_threshold` must be at least 1",
                )),
                Some(n) => health.failure_threshold = n,
                None => {}
            }
            if let Some(d) = duration_field(h.get("cooldown"), &path.key("cooldown"), errors) {
                health.cooldown = d;
            }
            config.health = health;
        }
        Some(_) => errors.push(RuleError::new(
            root.key("health"),
            "`health` must be a mapping with `failure_threshold` and `cooldown`",
        )),
    }
    config
}

fn unknown_fields(
    map: &Map<String, Value>,
    path: &FieldPath,
    known: &[&str],
    errors: &mut Vec<RuleError>,
) {
    for key in map.keys() {
        if !known.contains(&key.as_str()) {
            errors.push(RuleError::new(
                path.clone(),
                routechain_core::unknown_name("field", key, known.iter().copied()),
            ));
        }
    }
}

fn kind_of(name: &str, path: &FieldPath, errors: &mut Vec<RuleError>) -> Option<LoadBalanceKind> {
    let kind = LoadBalanceKind::parse(name.trim());
    if kind.is_none() {
        let known = LoadBalanceKind::ALL.iter().map(|k| k.name());
        errors.push(RuleError::new(
            path.clone(),
            routechain_core::unknown_name("load balancer", name.trim(), known),
        ));
    }
    kind
}

/// Reads `load_balance`, `hash_key` and `hash_nodes` from `map`, inheriting from `parent`.
fn balancer(
    map: &Map<String, Value>,
    path: &FieldPath,
    parent: &BalancerSpec,
    errors: &mut Vec<RuleError>,
) -> BalancerSpec {
    let mut spec = parent.clone();
    let lb_path = path.key("load_balance");
    match map.get("load_balance") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) => {
            if let Some(k) = kind_of(s, &lb_path, errors) {
                spec.kind = k;
            }
        }
        Some(_) => errors.push(RuleError::new(
            lb_path,
            "`load_balance` must be a balancer name",
        )),
    }
    let hk_path = path.key("hash_key");
    let hash_key = map.get("hash_key").filter(|v| !v.is_null());
    if let Some(v) = hash_key {
        match KeyPart::list_from_value(v, &hk_path) {
            // The balancer reads the request only: a pick by the consumer's host would put
            // every call of a consumer without its own URL on one provider.
            Ok(parts) if parts.contains(&KeyPart::ConsumerHost) => errors.push(RuleError::new(
                hk_path.clone(),
                "`consumer.host` is a router's hash key; a balancer's is read from the request: \
                 arguments[N], attachments[KEY] or attributes[KEY]",
            )),
            Ok(parts) => spec.hash_key = parts,
            Err(e) => errors.extend(e),
        }
    }
    let hn_path = path.key("hash_nodes");
    match uint(map.get("hash_nodes"), &hn_path, errors) {
        Some(n) if n < 4 => errors.push(RuleError::new(
            hn_path.clone(),
            "`hash_nodes` must be at least 4 (points come in groups of 4)",
        )),
        Some(n) if n > 10_000 => errors.push(RuleError::new(
            hn_path.clone(),
            "`hash_nodes` must be at most 10000",
        )),
        Some(n) => spec.hash_nodes = n,
        None => {}
    }
    if spec.kind != LoadBalanceKind::ConsistentHash {
        for (key, p) in [("hash_key", hk_path), ("hash_nodes", hn_path)] {
            if map.get(key).is_some_and(|v| !v.is_null()) {
                errors.push(RuleError::new(
                    p,
                    format!(
                        "`{key}` applies only to load_balance: consistenthash (this is {})",
                        spec.kind
                    ),
                ));
            }
        }
    }
    spec
}

/// Reads an optional cluster mode (Dubbo's `cluster` names).
fn cluster(
    value: Option<&Value>,
    path: &FieldPath,
    errors: &mut Vec<RuleError>,
) -> Option<ClusterMode> {
    match value {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => {
            let mode = ClusterMode::parse(s.trim());
            if mode.is_none() {
                let known = ClusterMode::ALL.iter().map(|m| m.name());
                errors.push(RuleError::new(
                    path.clone(),
                    routechain_core::unknown_name("cluster", s.trim(), known),
                ));
            }
            mode
        }
        Some(_) => {
            errors.push(RuleError::new(
                path.clone(),
                "`cluster` must be a cluster name",
            ));
            None
        }
    }
}

fn uint(value: Option<&Value>, path: &FieldPath, errors: &mut Vec<RuleError>) -> Option<u32> {
    match value {
        None | Some(Value::Null) => None,
        Some(v) => match v.as_u64().and_then(|n| u32::try_from(n).ok()) {
            Some(n) => Some(n),
            None => {
                errors.push(RuleError::new(
                    path.clone(),
                    routechain_core::integer_range_message(&format!("`{path}`"), v, 0, u32::MAX),
                ));
                None
            }
        },
    }
}

/// Reads an optional duration field; a bad one is reported at `path`.
fn duration_field(
    value: Option<&Value>,
    path: &FieldPath,
    errors: &mut Vec<RuleError>,
) -> Option<Duration> {
    match value {
        None | Some(Value::Null) => None,
        Some(v) => duration(v)
            .map_err(|msg| errors.push(RuleError::new(path.clone(), msg)))
            .ok(),
    }
}

/// Parses a duration: a humantime string (`500ms`, `30s`, `2m`, `1h 30m`) or a number of
/// seconds (also quoted).
pub fn duration(value: &Value) -> Result<Duration, String> {
    let bad = |why: &dyn std::fmt::Display| {
        format!(
            "invalid duration {value}: {why}; expected a number of seconds or a duration such as 500ms, 30s, 2m or 1h 30m"
        )
    };
    let seconds = |s: f64| {
        // Negative, not finite or past `Duration::MAX`: refused, never a panic.
        Duration::try_from_secs_f64(s).map_err(|e| bad(&e))
    };
    match value {
        Value::Number(n) => seconds(n.as_f64().unwrap_or(f64::NAN)),
        Value::String(s) => match s.trim().parse::<f64>() {
            Ok(n) => seconds(n),
            Err(_) if s.trim().starts_with('-') => Err(bad(&"a duration cannot be negative")),
            Err(_) => humantime::parse_duration(s.trim()).map_err(|e| bad(&e)),
        },
        _ => Err(bad(&"not a number or a string")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse_value(v: Value) -> (ServiceConfig, Vec<String>) {
        let mut errors = Vec::new();
        let c = parse(v.as_object().unwrap(), &mut errors);
        (c, errors.iter().map(ToString::to_string).collect())
    }

    #[test]
    fn defaults_are_dubbos() {
        let (c, e) = parse_value(json!({}));
        assert!(e.is_empty());
        assert_eq!(c, ServiceConfig::default());
        assert_eq!(c.retries_for(None), 2);
        assert_eq!(
            c.retries, None,
            "not the consumer's: the providers' and the defaults"
        );
        assert_eq!(c.health.failure_threshold, 5);
        assert_eq!(c.health.cooldown, Duration::from_secs(30));
        assert_eq!(c.balance.default.kind, LoadBalanceKind::Random);
    }

    #[test]
    fn full_settings_parse() {
        let (c, e) = parse_value(json!({
            "load_balance": "roundrobin",
            "methods": {
                "getUser": {"load_balance": "consistenthash", "hash_key": ["arguments[1]", "attributes[u]"], "hash_nodes": 80, "timeout": "2s"},
                "list": "p2c",
                "stream": {"retries": 0, "timeout": 0}
            },
            "skip_degraded": true,
            "retries": 4,
            "timeout": "250ms",
            "health": {"failure_threshold": 3, "cooldown": "500ms"}
        }));
        assert!(e.is_empty(), "{e:?}");
        assert_eq!(c.balance.default.kind, LoadBalanceKind::RoundRobin);
        let get = c.balance.spec(c.balance.slot(Some("getUser")));
        assert_eq!(get.kind, LoadBalanceKind::ConsistentHash);
        assert_eq!(
            get.hash_key,
            [KeyPart::Argument(1), KeyPart::Attribute("u".into())]
        );
        assert_eq!(get.hash_nodes, 80);
        assert_eq!(
            c.balance.spec(c.balance.slot(Some("list"))).kind,
            LoadBalanceKind::P2c
        );
        assert!(c.skip_degraded);
        assert_eq!(c.retries, Some(4));
        assert_eq!(c.timeout, Some(Duration::from_millis(250)));
        assert_eq!(c.timeout_for(Some("getUser")), Some(Duration::from_secs(2)));
        assert_eq!(c.retries_for(Some("getUser")), 4);
        assert_eq!(
            c.timeout_for(Some("list")),
            Some(Duration::from_millis(250))
        );
        assert_eq!(
            c.timeout_for(Some("stream")),
            None,
            "0 disables the timeout"
        );
        assert_eq!(c.retries_for(Some("stream")), 0);
        // `stream` sets no balancer: it shares the chain's (slot 0).
        assert_eq!(c.balance.slot(Some("stream")), 0);
        assert_eq!(c.health.failure_threshold, 3);
        assert_eq!(c.health.cooldown, Duration::from_millis(500));
    }

    #[test]
    fn every_problem_is_reported_at_its_path() {
        let (_, e) = parse_value(json!({
            "load_balance": "fastest",
            "hash_key": "arguments[0]",
            "methods": {
                "a": {"load_balance": "consistenthash", "hash_key": "user", "weight": 3},
                "b": 7,
                "c": {"timeout": "fast", "retries": "many"},
                "d": {"load_balance": "consistenthash", "hash_key": ["arguments[0]", "consumer.host"]},
                "e": {"load_balance": "consistenthash", "hash_key": []}
            },
            "skip_degraded": "yes",
            "retries": -1,
            "timeout": "-5s",
            "health": {"failure_threshold": 0, "cooldown": "soon"}
        }));
        let expected = [
            "load_balance: unknown load balancer `fastest`, expected one of `random`",
            "hash_key: `hash_key` applies only to load_balance: consistenthash",
            "methods.a: unknown field `weight`",
            "methods.a.hash_key: invalid hash key \"user\"",
            "methods.b: a method entry is a mapping",
            "methods.c.timeout: invalid duration \"fast\"",
            "methods.d.hash_key: `consumer.host` is a router's hash key",
            "methods.e.hash_key: `hash_key` must name at least one part",
            "methods.c.retries: `methods.c.retries` must be an integer from 0 to 4294967295",
            "timeout: invalid duration \"-5s\"",
            "skip_degraded: `skip_degraded` must be true or false",
            "retries: `retries` -1 is out of range: an integer from 0 to 4294967295",
            "health.failure_threshold: `failure_threshold` must be at least 1",
            "health.cooldown: invalid duration \"soon\"",
        ];
        for x in expected {
            assert!(
                e.iter().any(|m| m.starts_with(x)),
                "missing {x:?} in {e:#?}"
            );
        }
        assert_eq!(e.len(), expected.len(), "{e:#?}");
    }

    #[test]
    fn durations() {
        for (v, d) in [
            (json!(2), Duration::from_secs(2)),
            (json!(0.5), Duration::from_millis(500)),
            (json!("250ms"), Duration::from_millis(250)),
            (json!("30s"), Duration::from_secs(30)),
            (json!("2m"), Duration::from_secs(120)),
            (json!("1h"), Duration::from_secs(3600)),
        ] {
            assert_eq!(duration(&v), Ok(d), "{v}");
        }
        assert_eq!(duration(&json!("1h 30m")), Ok(Duration::from_secs(5400)));
        assert_eq!(
            duration(&json!("3 days")),
            Ok(Duration::from_secs(3 * 86400))
        );
        assert_eq!(duration(&json!("2")), Ok(Duration::from_secs(2)));
        for v in [
            json!("-1s"),
            json!("3 parsecs"),
            json!(""),
            json!(true),
            json!(-2),
        ] {
            assert!(duration(&v).is_err(), "{v}");
        }
    }

    #[test]
    fn a_duration_past_the_largest_is_refused() {
        for v in [
            json!(1e300),
            json!("1e300s"),
            json!("99999999999999999999999h"),
        ] {
            assert!(duration(&v).is_err(), "{v}");
        }
    }

    #[test]
    fn cluster_and_forks_per_service_and_method() {
        let (c, errors) = parse_value(json!({
            "cluster": "forking",
            "forks": 3,
            "methods": {"audit": {"cluster": "failsafe"}, "x": {"cluster": "failback"}}
        }));
        assert_eq!(c.cluster, Some(ClusterMode::Forking));
        assert_eq!(c.forks, Some(3));
        assert_eq!(c.methods["audit"].cluster, Some(ClusterMode::Failsafe));
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].starts_with("methods.x.cluster: unknown cluster `failback`"),
            "{errors:?}"
        );
        assert!(
            !c.balance.default_named,
            "no load_balance: not the consumer's"
        );
        let (c, _) = parse_value(json!({"load_balance": "random"}));
        assert!(c.balance.default_named);
    }
}
