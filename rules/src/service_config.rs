//! The chain file's service settings: load balancing, failover and health.
//!
//! ```yaml
//! load_balance: random          # random (default) | roundrobin | leastactive | consistenthash | p2c
//!                               #   | shortestresponse | adaptive
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
//!   cooldown: 30s               # how long it stays degraded the first time (default 30s)
//!   max_cooldown: 300s          # the n-th ejection lasts n × cooldown, at most this
//!   max_ejection_percent: 100   # never more of the providers ejected at once (≥ 1 may go)
//!   window: 10s                 # the rates below are counted over this window
//!   min_requests: 20            # calls in the window before a rate ejects
//!   failure_percentage: 50      # eject at this error rate (default: off)
//!   slow_call: 500ms            # a call at least this long is slow (default: off)
//!   slow_call_percentage: 50    # eject at this slow-call rate (with slow_call)
//! retry_budget:                 # failover retries limited (default: by `retries` only)
//!   percent: 20                 # retries per 100 calls over the window (default 20)
//!   min_per_second: 10          # plus this many per second (default 10)
//!   ttl: 10s                    # the window (default 10s)
//! ```
//!
//! Durations are humantime strings (`500ms`, `30s`, `2m`, `1h 30m`) or a number of seconds.
//! Every problem is reported at once, each at its field path. These are the consumer's call
//! parameters: a value not written here is taken from the providers' URLs and the override
//! rules as Dubbo takes it (`routechain_balance::service::params`).

use std::time::Duration;

use routechain_balance::lb::{BalanceConfig, BalancerSpec, LoadBalanceKind};
use routechain_balance::{ClusterMode, HealthConfig, MethodCall, RetryBudget, ServiceConfig};
use routechain_core::{FieldPath, KeyPart, RuleError};
use serde_json::{Map, Value};

/// The top-level chain-file fields read here.
pub const SERVICE_FIELDS: [&str; 11] = [
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
    "retry_budget",
];
const BUDGET_FIELDS: [&str; 3] = ["percent", "min_per_second", "ttl"];

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
const HEALTH_FIELDS: [&str; 9] = [
    "failure_threshold",
    "cooldown",
    "max_cooldown",
    "max_ejection_percent",
    "window",
    "min_requests",
    "failure_percentage",
    "slow_call",
    "slow_call_percentage",
];

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
            let mpath = path.key("max_cooldown");
            match duration_field(h.get("max_cooldown"), &mpath, errors) {
                Some(d) if d < health.cooldown => errors.push(RuleError::new(
                    mpath,
                    "`max_cooldown` must be at least `cooldown`",
                )),
                Some(d) => health.max_cooldown = d,
                None => health.max_cooldown = health.max_cooldown.max(health.cooldown),
            }
            let percent = |key: &str, min: u32, errors: &mut Vec<RuleError>| {
                let p = path.key(key);
                match uint(h.get(key), &p, errors) {
                    Some(n) if n < min || n > 100 => {
                        errors.push(RuleError::new(
                            p,
                            format!("`{key}` must be a percentage from {min} to 100, got {n}"),
                        ));
                        None
                    }
                    n => n,
                }
            };
            if let Some(n) = percent("max_ejection_percent", 0, errors) {
                health.max_ejection_percent = n;
            }
            health.failure_percentage = percent("failure_percentage", 1, errors);
            if let Some(n) = percent("slow_call_percentage", 1, errors) {
                health.slow_call_percentage = n;
            }
            let wpath = path.key("window");
            match duration_field(h.get("window"), &wpath, errors) {
                Some(d) if d.is_zero() => {
                    errors.push(RuleError::new(wpath, "`window` must be longer than 0"))
                }
                Some(d) => health.window = d,
                None => {}
            }
            let rpath = path.key("min_requests");
            match uint(h.get("min_requests"), &rpath, errors) {
                Some(0) => errors.push(RuleError::new(rpath, "`min_requests` must be at least 1")),
                Some(n) => health.min_requests = n,
                None => {}
            }
            let spath = path.key("slow_call");
            match duration_field(h.get("slow_call"), &spath, errors) {
                Some(d) if d.is_zero() => {
                    errors.push(RuleError::new(spath, "`slow_call` must be longer than 0"))
                }
                d => health.slow_call = d,
            }
            if health.slow_call.is_none() && h.get("slow_call_percentage").is_some() {
                errors.push(RuleError::new(
                    path.key("slow_call_percentage"),
                    "`slow_call_percentage` needs `slow_call`, the duration from which a call is slow",
                ));
            }
            config.health = health;
        }
        Some(_) => errors.push(RuleError::new(
            root.key("health"),
            "`health` must be a mapping (`failure_threshold`, `cooldown`, `failure_percentage`, …)",
        )),
    }
    config.retry_budget = retry_budget(top.get("retry_budget"), &root.key("retry_budget"), errors);
    config
}

/// `retry_budget`: a mapping of `percent`, `min_per_second`, `ttl` (each optional).
fn retry_budget(
    value: Option<&Value>,
    path: &FieldPath,
    errors: &mut Vec<RuleError>,
) -> Option<RetryBudget> {
    let b = match value {
        None | Some(Value::Null) => return None,
        Some(Value::Object(b)) => b,
        Some(_) => {
            errors.push(RuleError::new(
                path.clone(),
                "`retry_budget` must be a mapping with `percent`, `min_per_second` and `ttl`",
            ));
            return None;
        }
    };
    unknown_fields(b, path, &BUDGET_FIELDS, errors);
    let mut budget = RetryBudget::default();
    let ppath = path.key("percent");
    match uint(b.get("percent"), &ppath, errors) {
        Some(n) if n > 1000 => errors.push(RuleError::new(
            ppath,
            format!("`percent` must be from 0 to 1000 (retries per 100 calls), got {n}"),
        )),
        Some(n) => budget.percent = n,
        None => {}
    }
    if let Some(n) = uint(b.get("min_per_second"), &path.key("min_per_second"), errors) {
        budget.min_per_second = n;
    }
    let tpath = path.key("ttl");
    match duration_field(b.get("ttl"), &tpath, errors) {
        Some(d) if d < Duration::from_secs(1) || d > Duration::from_secs(3600) => {
            errors.push(RuleError::new(tpath, "`ttl` must be from 1s to 1h"))
        }
        Some(d) => budget.ttl = d,
        None => {}
    }
    Some(budget)
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
    fn retry_budget_parses_with_defaults_and_is_checked() {
        let (c, e) = parse_value(json!({"retry_budget": {"percent": 10, "ttl": "30s"}}));
        assert!(e.is_empty(), "{e:?}");
        assert_eq!(
            c.retry_budget,
            Some(RetryBudget {
                percent: 10,
                min_per_second: 10,
                ttl: Duration::from_secs(30)
            })
        );
        let (c, e) = parse_value(json!({"retry_budget": {}}));
        assert!(e.is_empty(), "{e:?}");
        assert_eq!(c.retry_budget, Some(RetryBudget::default()));
        assert_eq!(parse_value(json!({})).0.retry_budget, None);
        let (_, e) = parse_value(json!({
            "retry_budget": {"percent": 5000, "min_per_second": -1, "ttl": "10ms", "ratio": 1}
        }));
        let e: Vec<String> = e.iter().map(|e| e.to_string()).collect();
        for x in [
            "retry_budget: unknown field `ratio`",
            "retry_budget.percent: `percent` must be from 0 to 1000",
            "retry_budget.min_per_second: `retry_budget.min_per_second` -1 is out of range",
            "retry_budget.ttl: `ttl` must be from 1s to 1h",
        ] {
            assert!(e.iter().any(|m| m.starts_with(x)), "{x} not in {e:#?}");
        }
        let (_, e) = parse_value(json!({"retry_budget": 0.2}));
        assert!(
            e[0].to_string()
                .starts_with("retry_budget: `retry_budget` must be a mapping")
        );
    }

    #[test]
    fn outlier_ejection_settings_parse_and_are_checked() {
        let (c, e) = parse_value(json!({
            "health": {
                "failure_threshold": 7,
                "cooldown": "10s",
                "max_cooldown": "2m",
                "max_ejection_percent": 30,
                "window": "5s",
                "min_requests": 50,
                "failure_percentage": 40,
                "slow_call": "250ms",
                "slow_call_percentage": 90
            }
        }));
        assert!(e.is_empty(), "{e:?}");
        let h = c.health;
        assert_eq!(
            (h.failure_threshold, h.cooldown, h.max_cooldown),
            (7, Duration::from_secs(10), Duration::from_secs(120))
        );
        assert_eq!(
            (h.max_ejection_percent, h.window, h.min_requests),
            (30, Duration::from_secs(5), 50)
        );
        assert_eq!(h.failure_percentage, Some(40));
        assert_eq!(h.slow_call, Some(Duration::from_millis(250)));
        assert_eq!(h.slow_call_percentage, 90);
        // A cool-down past the default maximum raises the maximum with it.
        let (c, e) = parse_value(json!({"health": {"cooldown": "10m"}}));
        assert!(e.is_empty(), "{e:?}");
        assert_eq!(c.health.max_cooldown, Duration::from_secs(600));

        let (_, e) = parse_value(json!({
            "health": {
                "cooldown": "1m",
                "max_cooldown": "30s",
                "max_ejection_percent": 101,
                "window": "0s",
                "min_requests": 0,
                "failure_percentage": 0,
                "slow_call_percentage": 50,
                "slow_calls": "1s"
            }
        }));
        let e: Vec<String> = e.iter().map(|e| e.to_string()).collect();
        for x in [
            "health: unknown field `slow_calls`",
            "health.max_cooldown: `max_cooldown` must be at least `cooldown`",
            "health.max_ejection_percent: `max_ejection_percent` must be a percentage from 0 to 100, got 101",
            "health.failure_percentage: `failure_percentage` must be a percentage from 1 to 100, got 0",
            "health.window: `window` must be longer than 0",
            "health.min_requests: `min_requests` must be at least 1",
            "health.slow_call_percentage: `slow_call_percentage` needs `slow_call`",
        ] {
            assert!(e.iter().any(|m| m.starts_with(x)), "{x} not in {e:#?}");
        }
    }

    #[test]
    fn full_settings_parse() {
        let (c, e) = parse_value(json!({
            "load_balance": "roundrobin",
            "methods": {
                "getUser": {"load_balance": "consistenthash", "hash_key": ["arguments[1]", "attributes[u]"], "hash_nodes": 80, "timeout": "2s"},
                "list": "p2c",
                "fast": "shortestresponse",
                "load": {"load_balance": "adaptive"},
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
        assert_eq!(
            c.balance.spec(c.balance.slot(Some("fast"))).kind,
            LoadBalanceKind::ShortestResponse
        );
        assert_eq!(
            c.balance.spec(c.balance.slot(Some("load"))).kind,
            LoadBalanceKind::Adaptive
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
