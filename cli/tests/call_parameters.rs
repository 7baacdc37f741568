//! The call parameters `explain` and `simulate` show, through the real binary: the weight
//! the balancer uses for the request's method and `warmup`, each with where it came from
//! (the provider's URL at method or service level, the chain file's override rules at
//! either level, Dubbo's default), and a warming provider's weight now.

mod common;

use common::{Scratch, assert_exit, json, routechain, stdout};

const PROVIDERS: &str = "\
dubbo://10.0.0.1:20880/com.acme.UserService?methods=getUser,listUsers&getUser.weight=300&weight=50
dubbo://10.0.0.2:20880/com.acme.UserService?methods=getUser,listUsers&weight=50
";

/// A consumer-side override rule on 10.0.0.1 setting `parameters` (a YAML flow map).
fn rule(parameters: &str) -> String {
    format!(
        "configVersion: v2.7\nscope: service\nkey: com.acme.UserService\nconfigs:\n  - side: consumer\n    addresses: [0.0.0.0]\n    providerAddresses: ['10.0.0.1:20880']\n    parameters: {parameters}\n"
    )
}

/// Runs `command` (`explain` or `simulate`) for `method` over `providers`, with a chain
/// file balancing by round robin under an override rule setting `parameters`.
fn run(
    s: &Scratch,
    command: &str,
    method: &str,
    providers: &str,
    parameters: &str,
    extra: &[&str],
) -> std::process::Output {
    s.write("rule.configurators.yaml", &rule(parameters));
    let chain = s.write(
        "chain.yaml",
        "service: com.acme.UserService\nrouters: []\nload_balance: roundrobin\noverrides: [rule.configurators.yaml]\n",
    );
    let providers = s.write("providers.txt", providers);
    let request = s.write(
        "request.json",
        &format!(r#"{{"service": "com.acme.UserService", "method": "{method}"}}"#),
    );
    let mut args = vec![
        command,
        "--chain",
        chain.to_str().unwrap(),
        "--providers",
        providers.to_str().unwrap(),
        "--request",
        request.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    routechain(&args)
}

/// The `(value, source)` of `key` in a JSON `"parameters"` array.
/// The weight now of a warming provider's row value `<full> (warming up: <now> now)`.
fn warming(value: &str, full: &str) -> u128 {
    value
        .strip_prefix(&format!("{full} (warming up: "))
        .and_then(|w| w.strip_suffix(" now)"))
        .and_then(|w| w.parse().ok())
        .unwrap_or_else(|| panic!("not a warming weight of {full}: {value}"))
}

fn json_row(v: &serde_json::Value, key: &str) -> (String, String) {
    let p = v["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["key"] == key)
        .unwrap_or_else(|| panic!("no {key} in {v}"));
    let f = |k: &str| p[k].as_str().unwrap().to_string();
    (f("value"), f("source"))
}

/// The `(value, source)` of `key` in `explain`'s table (columns apart by 2+ spaces).
fn table_row(text: &str, key: &str) -> (String, String) {
    text.lines()
        .map(|l| {
            l.split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .collect::<Vec<_>>()
        })
        .find(|cells| cells.len() == 3 && cells[0] == key)
        .map(|cells| (cells[1].to_string(), cells[2].to_string()))
        .unwrap_or_else(|| panic!("no {key} row in:\n{text}"))
}

fn pair(value: &str, source: &str) -> (String, String) {
    (value.to_string(), source.to_string())
}

/// A provider's `getUser.weight=300` beats the rule's service-level `weight` for `getUser`,
/// the rule's `weight` beats the provider's `weight=50` for another method, a rule's
/// `getUser.weight` beats them all; the rule's `warmup` is shown as the rule's. The table
/// and the JSON of `explain` and `simulate`'s JSON and table agree, and the weight shown
/// is the one round robin follows.
#[test]
fn weight_and_warmup_show_the_value_the_balancer_uses_and_its_source() {
    let s = Scratch::new("params-weight");
    let rule = "{weight: '20', warmup: '120000'}";
    // method, rule parameters, want weight and source, want round-robin counts of 700 calls
    let rows = [
        (
            "getUser",
            rule,
            ("300", "provider URL (method)"),
            [600, 100],
        ),
        ("listUsers", rule, ("20", "override rule"), [200, 500]),
        (
            "getUser",
            "{getUser.weight: '500', warmup: '120000'}",
            ("500", "override rule (method)"),
            [700 * 500 / 550, 700 - 700 * 500 / 550],
        ),
    ];
    for (method, parameters, (weight, source), want) in rows {
        let want_weight = pair(weight, source);
        let want_warmup = pair("120000ms", "override rule");
        let case = format!("{method} under {parameters}");

        let out = run(&s, "explain", method, PROVIDERS, parameters, &[]);
        assert_exit(&out, 0);
        let text = stdout(&out);
        assert!(
            text.contains(&format!(
                "call parameters of {method}, on [0] 10.0.0.1:20880:"
            )),
            "{case}: {text}"
        );
        assert_eq!(table_row(&text, "weight"), want_weight, "{case}: {text}");
        assert_eq!(table_row(&text, "warmup"), want_warmup, "{case}: {text}");

        let out = run(
            &s,
            "explain",
            method,
            PROVIDERS,
            parameters,
            &["--format", "json"],
        );
        assert_exit(&out, 0);
        let v = json(&out);
        assert_eq!(json_row(&v, "weight"), want_weight, "{case}: {v}");
        assert_eq!(json_row(&v, "warmup"), want_warmup, "{case}: {v}");

        let calls = ["--calls", "700", "--seed", "1"];
        let out = run(&s, "simulate", method, PROVIDERS, parameters, &calls);
        assert_exit(&out, 0);
        let v = json(&out);
        assert_eq!(json_row(&v, "weight"), want_weight, "{case}: {v}");
        assert_eq!(json_row(&v, "warmup"), want_warmup, "{case}: {v}");
        let counts: Vec<u64> = v["counts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["count"].as_u64().unwrap())
            .collect();
        assert_eq!(counts, want, "{case}: round robin follows the weight shown");

        let table = [&calls[..], &["--format", "table"]].concat();
        let out = run(&s, "simulate", method, PROVIDERS, parameters, &table);
        assert_exit(&out, 0);
        let text = stdout(&out);
        for row in [
            format!("  weight {weight} ({source})"),
            "  warmup 120000ms (override rule)".to_string(),
        ] {
            assert!(text.contains(&row), "{case}: no {row:?} in:\n{text}");
        }
    }
}

/// A provider that started a minute ago, with the rule's two-minute `warmup`, weighs half
/// its weight now, and the value says so; without a rule, Dubbo's 10 minutes is the
/// provider's own `warmup` or the default.
#[test]
fn a_warming_provider_shows_its_weight_now() {
    let s = Scratch::new("params-warming");
    let now_ms = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis()
    };
    let started = now_ms() - 60_000;
    let providers = PROVIDERS.replace("&weight=50\n", &format!("&weight=50&timestamp={started}\n"));
    // The weight is uptime × 300 / 120,000 ms: 150 at the start of the run, and at most
    // what the uptime gives once the binary is done, however long it took.
    let out = run(
        &s,
        "explain",
        "getUser",
        &providers,
        "{warmup: '120000'}",
        &[],
    );
    assert_exit(&out, 0);
    let text = stdout(&out);
    let (weight, source) = table_row(&text, "weight");
    assert_eq!(source, "provider URL (method)", "{text}");
    let at_most = (now_ms() - started) * 300 / 120_000;
    assert!((150..=at_most).contains(&warming(&weight, "300")), "{text}");
    assert_eq!(
        table_row(&text, "warmup"),
        pair("120000ms", "override rule")
    );

    // No rule for this provider's warmup: its own, else the default (weight
    // 50: 1 more every 6 s, then every 12 s).
    let own = providers.replace("&weight=50&timestamp", "&weight=50&warmup=300000&timestamp");
    let out = run(
        &s,
        "explain",
        "listUsers",
        &own,
        "{timeout: '100'}",
        &["--format", "json"],
    );
    assert_exit(&out, 0);
    let v = json(&out);
    // 50 × uptime / 300,000 ms: 10 at the start, at most what the uptime gives now.
    let (weight, source) = json_row(&v, "weight");
    assert_eq!(source, "provider URL", "{v}");
    let at_most = (now_ms() - started) * 50 / 300_000;
    assert!((10..=at_most).contains(&warming(&weight, "50")), "{v}");
    assert_eq!(
        json_row(&v, "warmup"),
        pair("300000ms", "provider URL"),
        "{v}"
    );
    assert_eq!(
        json_row(&v, "timeout"),
        pair("100ms", "override rule"),
        "{v}"
    );
    let out = run(
        &s,
        "explain",
        "listUsers",
        &providers,
        "{timeout: '100'}",
        &["--format", "json"],
    );
    let v = json(&out);
    // 50 × uptime / 600,000 ms (the default warm-up): 5 at the start.
    let (weight, source) = json_row(&v, "weight");
    assert_eq!(source, "provider URL", "{v}");
    let at_most = (now_ms() - started) * 50 / 600_000;
    assert!((5..=at_most).contains(&warming(&weight, "50")), "{v}");
    assert_eq!(json_row(&v, "warmup"), pair("600000ms", "default"), "{v}");
}
