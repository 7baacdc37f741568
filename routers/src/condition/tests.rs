//! Router tests: Dubbo's `ConditionStateRouterTest` / `ConditionStateRouterTestV31`
//! semantics as table-driven cases, caching and consumer handling, exact weights, located
//! errors, and property tests (bitsets equal a direct per-provider evaluation; the parser
//! never panics).

use std::sync::Arc;

use proptest::prelude::*;
use routechain_core::{
    BitSet, Evaluation, FastRng, FieldPath, PrepareContext, RandomSource, Request, RouteContext,
    RouterFactory, RouterSpec, RuleDoc, RuleError, Snapshot, TypedFactory, Url,
};
use serde_json::{Value, json};

use super::matcher::{Key, Term};
use super::*;

const LOCAL: &str = "127.0.0.1";

fn snapshot(urls: &[String]) -> Snapshot {
    Snapshot::new(
        1,
        urls.iter()
            .map(|u| Url::parse(u).expect("test URL"))
            .collect::<Vec<_>>(),
    )
}

/// Dubbo's three providers: 10.20.3.3 (with `extra` params) and two on 127.0.0.1.
fn three(extra: &str) -> Snapshot {
    let q = if extra.is_empty() {
        String::new()
    } else {
        format!("?{extra}")
    };
    snapshot(&[
        format!("dubbo://10.20.3.3:20880/com.foo.BarService{q}"),
        format!("dubbo://{LOCAL}:20880/com.foo.BarService"),
        format!("dubbo://{LOCAL}:20880/com.foo.BarService"),
    ])
}

/// Reads and compiles a rule document, as the router type does for a chain entry.
fn from_doc(doc: &RuleDoc<'_>) -> Result<ConditionRule, Vec<RuleError>> {
    let raw: RawConditionRule = doc.parse().map_err(|e| vec![e])?;
    ConditionRule::compile(raw, doc.path)
}

fn compile(doc: Value) -> ConditionRule {
    let root = FieldPath::root();
    from_doc(&RuleDoc::new(&doc, &root)).expect("rule compiles")
}

fn text_rule(text: &str, force: bool) -> ConditionRule {
    compile(json!({"conditions": [text], "force": force}))
}

/// A test random source whose `below(n)` answers `value % n`.
struct FixedBelow(u64);
impl RandomSource for FixedBelow {
    fn next_u64(&mut self) -> u64 {
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.0 % n
    }
}

struct Outcome {
    kept: Vec<usize>,
    evaluation: Evaluation,
    reason: String,
}

/// Prepares `rule` for `prepared_consumer` and routes one call from `consumer`.
fn run_with(
    rule: &ConditionRule,
    snap: &Snapshot,
    prepared_consumer: &Url,
    consumer: &Url,
    request: &Request,
    input: &BitSet,
    rng: &mut dyn RandomSource,
) -> Outcome {
    let prepared = PreparedCondition::build(
        &Arc::new(rule.clone()),
        &PrepareContext {
            snapshot: snap,
            consumer: prepared_consumer,
            service: None,
        },
    );
    let mut candidates = input.clone();
    let is_prepared = prepared_consumer.raw() == consumer.raw();
    let mut builder = RouteContext::builder(request, snap)
        .consumer(consumer, is_prepared)
        .rng(rng)
        .explain(true);
    let evaluation = prepared.route(&mut builder.context(), &mut candidates);
    Outcome {
        kept: candidates.iter().collect(),
        evaluation,
        reason: builder.reason().to_string(),
    }
}

fn run(rule: &ConditionRule, snap: &Snapshot, consumer: &str, request: &Request) -> Outcome {
    let consumer = Url::parse(consumer).expect("consumer URL");
    run_with(
        rule,
        snap,
        &consumer,
        &consumer,
        request,
        &BitSet::full(snap.len()),
        &mut FastRng::seeded(1),
    )
}

fn local_consumer() -> String {
    format!("consumer://{LOCAL}/com.foo.BarService")
}

#[test]
fn when_part_decisions() {
    // (when text, consumer URL, method, matches)
    let consumer = "consumer://1.1.1.1/com.foo.BarService";
    let methods = "consumer://1.1.1.1/com.foo.BarService?methods=setFoo,getFoo,findFoo";
    let cases: &[(&str, &str, Option<&str>, bool)] = &[
        ("", consumer, None, true),
        ("true", consumer, None, true),
        ("host = 2.2.2.2,1.1.1.1,3.3.3.3", consumer, None, true),
        (
            "host = 2.2.2.2,1.1.1.1,3.3.3.3 & host !=1.1.1.1",
            consumer,
            None,
            false,
        ),
        (
            "host !=4.4.4.4 & host = 2.2.2.2,1.1.1.1,3.3.3.3",
            consumer,
            None,
            true,
        ),
        (
            "host !=4.4.4.* & host = 2.2.2.2,1.1.1.1,3.3.3.3",
            consumer,
            None,
            true,
        ),
        (
            "host = 2.2.2.2,1.1.1.*,3.3.3.3 & host != 1.1.1.1",
            consumer,
            None,
            false,
        ),
        (
            "host = 2.2.2.2,1.1.1.*,3.3.3.3 & host != 1.1.1.2",
            consumer,
            None,
            true,
        ),
        // The method comes from the request, not from the consumer's `methods` parameter.
        ("methods=getFoo", methods, Some("getFoo"), true),
        (
            "methods=getFoo & host!=1.1.1.1",
            methods,
            Some("getFoo"),
            false,
        ),
        (
            "methods=getFoo & host=1.1.1.1",
            methods,
            Some("getFoo"),
            true,
        ),
        ("method=setFoo", methods, Some("getFoo"), false),
        // An absent key never matches, not even `!=`.
        ("nokey != x", consumer, None, false),
        ("application = a*", consumer, None, false),
        // `consumer.` prefixes are removed.
        ("consumer.host = 1.1.1.1", consumer, None, true),
    ];
    for (when, consumer, method, want) in cases {
        let rule = text_rule(&format!("{when} => host = 1.2.3.4"), false);
        let consumer = Url::parse(consumer).unwrap();
        let mut req = Request::new();
        req.method = method.map(String::from);
        let got = rule.conditions[0]
            .when
            .iter()
            .all(|t| t.matches_when(&req, &consumer));
        assert_eq!(got, *want, "when {when:?}");
    }
}

/// (rule text, force, provider extra params on 10.20.3.3, consumer params, request, kept)
type RouteCase<'a> = (&'a str, bool, &'a str, &'a str, Request, Vec<usize>);

#[test]
fn v30_routes_as_dubbo() {
    let args = |v: Value| Request::new().with_argument(v);
    let att = |k: &str, v: &str| Request::new().with_attachment(k, v);
    let none = Request::new;
    let cases: Vec<RouteCase<'_>> = vec![
        // testRoute_matchFilter
        (
            "host = 127.0.0.1 => host = 10.20.3.3",
            true,
            "serialization=fastjson",
            "",
            none(),
            vec![0],
        ),
        (
            "host = 127.0.0.1 => host = 10.20.3.* & host != 10.20.3.3",
            true,
            "serialization=fastjson",
            "",
            none(),
            vec![],
        ),
        (
            "host = 127.0.0.1 => host = 10.20.3.3  & host != 10.20.3.3",
            true,
            "serialization=fastjson",
            "",
            none(),
            vec![],
        ),
        (
            "host = 127.0.0.1 => host = 10.20.3.2,10.20.3.3,10.20.3.4",
            true,
            "serialization=fastjson",
            "",
            none(),
            vec![0],
        ),
        (
            "host = 127.0.0.1 => host != 10.20.3.3",
            true,
            "serialization=fastjson",
            "",
            none(),
            vec![1, 2],
        ),
        (
            "host = 127.0.0.1 => serialization = fastjson",
            true,
            "serialization=fastjson",
            "",
            none(),
            vec![0],
        ),
        // testRoute_methodRoute
        (
            "host = 127.0.0.1 & methods = getFoo => host = 10.20.3.3",
            true,
            "",
            "",
            none().with_method("getFoo"),
            vec![0],
        ),
        (
            "host = 127.0.0.1 & methods = unvalidmethod => host = 10.20.3.3",
            true,
            "",
            "",
            none().with_method("getFoo"),
            vec![0, 1, 2],
        ),
        // testRoute_ReturnFalse / ReturnEmpty: blocklists
        ("host = 127.0.0.1 => false", false, "", "", none(), vec![]),
        ("host = 127.0.0.1 => ", false, "", "", none(), vec![]),
        // testRoute_ReturnAll / HostFilter / Empty_HostFilter / False_HostFilter
        (
            "host = 127.0.0.1 => host = 127.0.0.1",
            false,
            "",
            "",
            none(),
            vec![1, 2],
        ),
        (" => host = 127.0.0.1", false, "", "", none(), vec![1, 2]),
        (
            "true => host = 127.0.0.1",
            false,
            "",
            "",
            none(),
            vec![1, 2],
        ),
        ("host = 127.0.0.1", false, "", "", none(), vec![1, 2]),
        // testRoute_Placeholder
        (
            "host = 127.0.0.1 => host = $host",
            false,
            "",
            "",
            none(),
            vec![1, 2],
        ),
        // testRoute_NoForce / Force
        (
            "host = 127.0.0.1 => host = 1.2.3.4",
            false,
            "",
            "",
            none(),
            vec![0, 1, 2],
        ),
        (
            "host = 127.0.0.1 => host = 1.2.3.4",
            true,
            "",
            "",
            none(),
            vec![],
        ),
        // testRoute_Arguments
        (
            "arguments[0] = a => host = 1.2.3.4",
            true,
            "",
            "",
            args(Value::Null),
            vec![0, 1, 2],
        ),
        (
            "arguments[0] = a => host = 1.2.3.4",
            true,
            "",
            "",
            args(json!("a")),
            vec![],
        ),
        (
            "arguments[0] = null => host = 1.2.3.4",
            true,
            "",
            "",
            args(Value::Null),
            vec![],
        ),
        (
            "arguments = b => host = 1.2.3.4",
            true,
            "",
            "",
            args(json!("a")),
            vec![0, 1, 2],
        ),
        (
            "arguments[10].inner = a => host = 1.2.3.4",
            true,
            "",
            "",
            args(json!("a")),
            vec![0, 1, 2],
        ),
        (
            "arguments[0].inner = 1 => host = 1.2.3.4",
            true,
            "",
            "",
            args(json!(1)),
            vec![],
        ),
        (
            "arguments[0] = true => host = 1.2.3.4",
            true,
            "",
            "",
            args(json!(true)),
            vec![],
        ),
        // Out of range: absent, so even `!=` does not match.
        (
            "arguments[1] != x => host = 1.2.3.4",
            true,
            "",
            "",
            args(json!("a")),
            vec![0, 1, 2],
        ),
        // testRoute_Attachments
        (
            "attachments[foo] = a => host = 1.2.3.4",
            true,
            "region=hangzhou",
            "",
            none(),
            vec![0, 1, 2],
        ),
        (
            "attachments[foo] = a => host = 1.2.3.4",
            true,
            "region=hangzhou",
            "",
            att("foo", "a"),
            vec![],
        ),
        (
            "attachments = a => host = 1.2.3.4",
            true,
            "region=hangzhou",
            "",
            att("foo", "a"),
            vec![0, 1, 2],
        ),
        (
            "attachments[foo] = a => region = hangzhou",
            true,
            "region=hangzhou",
            "",
            att("foo", "a"),
            vec![0],
        ),
        (
            "attachments[dubbo.tag] = gray => region = hangzhou",
            true,
            "region=hangzhou",
            "",
            att("dubbo.tag", "gray"),
            vec![0],
        ),
        // testRoute_Range_Pattern
        (
            "attachments[user_id] = 1~100 => region=hangzhou",
            true,
            "region=hangzhou",
            "",
            none(),
            vec![0, 1, 2],
        ),
        (
            "attachments[user_id] = 1~100 => region=hangzhou",
            true,
            "region=hangzhou",
            "",
            att("user_id", "80"),
            vec![0],
        ),
        (
            "attachments[user_id] = 1~100 => region=hangzhou",
            true,
            "region=hangzhou",
            "",
            att("user_id", "101"),
            vec![0, 1, 2],
        ),
        (
            "attachments[user_id] = ~100 => region = hangzhou",
            true,
            "region=hangzhou",
            "",
            att("user_id", "1"),
            vec![0],
        ),
        (
            "attachments[user_id] = ~100 => region = hangzhou",
            true,
            "region=hangzhou",
            "",
            att("user_id", "101"),
            vec![0, 1, 2],
        ),
        // Deliberate differences: `a~` ranges work; a non-integer never matches a range.
        (
            "attachments[user_id] = 100~ => region = hangzhou",
            true,
            "region=hangzhou",
            "",
            att("user_id", "5000"),
            vec![0],
        ),
        (
            "attachments[user_id] = ~100 => region = hangzhou",
            true,
            "region=hangzhou",
            "",
            att("user_id", "abc"),
            vec![0, 1, 2],
        ),
        // Deliberate difference: globs with several `*`.
        (" => host = *.20.*.3", true, "", "", none(), vec![0]),
        // testRoute_Key_Not_Exist
        (
            "when_key=a => not_exist_then_key = any_value",
            true,
            "then_key=a",
            "when_key=a",
            none(),
            vec![],
        ),
        (
            "not_exist_when_key=a => then_key = a",
            true,
            "then_key=a",
            "when_key=a",
            none(),
            vec![0, 1, 2],
        ),
        // testRoute_Multiple_Conditions
        (
            "application=consumer_app&arguments[0]=a => host = 127.0.0.1",
            true,
            "",
            "application=consumer_app",
            args(json!("a")),
            vec![1, 2],
        ),
        (
            "application=consumer_app&arguments[0]=a => host = 127.0.0.1",
            true,
            "",
            "application=another_consumer_app",
            args(json!("a")),
            vec![0, 1, 2],
        ),
        (
            "application=consumer_app&arguments[0]=a => host = 127.0.0.1",
            true,
            "",
            "application=consumer_app",
            args(json!("b")),
            vec![0, 1, 2],
        ),
        // Derived keys: port, address, protocol, path.
        (" => address = *:20880", true, "", "", none(), vec![0, 1, 2]),
        (
            " => port = 20000~20880",
            true,
            "",
            "",
            none(),
            vec![0, 1, 2],
        ),
        (" => protocol != dubbo", true, "", "", none(), vec![]),
        (" => path = com.foo.*", true, "", "", none(), vec![0, 1, 2]),
        // In the then-part `method` reads the provider's `method` parameter.
        (
            " => method = getFoo",
            false,
            "method=getFoo",
            "",
            none().with_method("other"),
            vec![0],
        ),
    ];
    for (text, force, extra, consumer_params, request, want) in cases {
        let snap = three(extra);
        let consumer = if consumer_params.is_empty() {
            local_consumer()
        } else {
            format!("{}?{consumer_params}", local_consumer())
        };
        let out = run(&text_rule(text, force), &snap, &consumer, &request);
        assert_eq!(out.kept, want, "{text:?} force={force}: {}", out.reason);
    }
}

#[test]
fn conditions_apply_one_after_another_and_disabled_passes() {
    let snap = three("region=hangzhou");
    let rule = compile(json!({
        "force": true,
        "conditions": [
            " => host = 127.0.0.1,10.20.3.3",
            "host = 127.0.0.1 => region = hangzhou",
            " => host = 127.0.0.1",
        ]
    }));
    // The third condition finds nothing in {0} and force empties the list.
    let out = run(&rule, &snap, &local_consumer(), &Request::new());
    assert_eq!(out.kept, Vec::<usize>::new(), "{}", out.reason);
    assert!(out.reason.contains("force=true"), "{}", out.reason);

    let rule = compile(json!({
        "conditions": [" => host = 127.0.0.1", " => region = hangzhou"]
    }));
    let out = run(&rule, &snap, &local_consumer(), &Request::new());
    assert_eq!(out.kept, vec![1, 2]);
    assert!(
        out.reason
            .contains("condition #1 ignored: then-part matched nothing and force=false"),
        "{}",
        out.reason
    );

    let rule = compile(json!({"enabled": false, "conditions": [" => false"]}));
    assert_eq!(
        run(&rule, &snap, &local_consumer(), &Request::new()).kept,
        vec![0, 1, 2]
    );
}

#[test]
fn empty_input_stays_empty_and_input_subsets_are_respected() {
    let snap = three("");
    let consumer = Url::parse(&local_consumer()).unwrap();
    let rule = text_rule(" => host = 127.0.0.1", true);
    let run_on = |input: BitSet| {
        run_with(
            &rule,
            &snap,
            &consumer,
            &consumer,
            &Request::new(),
            &input,
            &mut FastRng::seeded(1),
        )
        .kept
    };
    assert_eq!(run_on(BitSet::empty(3)), Vec::<usize>::new());
    assert_eq!(run_on(BitSet::from_indexes(3, [0, 2])), vec![2]);
    // Input without any 127.0.0.1 provider: force empties it.
    assert_eq!(run_on(BitSet::from_indexes(3, [0])), Vec::<usize>::new());
}

#[test]
fn evaluation_is_cached_only_without_request_reads_and_runtime() {
    let snap = three("");
    let consumer = local_consumer();
    let cases = [
        (
            json!({"conditions": ["host = 127.0.0.1 => host = $host"]}),
            Evaluation::Cached,
        ),
        (
            json!({"runtime": true, "conditions": ["host = 127.0.0.1 => host = $host"]}),
            Evaluation::Runtime,
        ),
        (
            json!({"conditions": ["method = getFoo => host = $host"]}),
            Evaluation::Runtime,
        ),
        (
            json!({"conditions": [" => host = 1.2.3.4", "attachments[a] = b => false"]}),
            Evaluation::Runtime,
        ),
    ];
    for (doc, want) in cases {
        let out = run(&compile(doc.clone()), &snap, &consumer, &Request::new());
        assert_eq!(out.evaluation, want, "{doc}");
    }
    // Another consumer than the prepared one is evaluated per call.
    let rule = compile(json!({"conditions": ["host = 127.0.0.1 => host = $host"]}));
    let prepared = Url::parse("consumer://10.20.3.3/com.foo.BarService").unwrap();
    let caller = Url::parse(&consumer).unwrap();
    let out = run_with(
        &rule,
        &snap,
        &prepared,
        &caller,
        &Request::new(),
        &BitSet::full(3),
        &mut FastRng::seeded(1),
    );
    assert_eq!(out.evaluation, Evaluation::Runtime);
    assert_eq!(out.kept, vec![1, 2]);
}

#[test]
fn consumer_references_follow_the_calling_consumer() {
    let snap = snapshot(&[
        "dubbo://10.0.0.1:1/s?zone=a".into(),
        "dubbo://10.0.0.2:1/s?zone=b".into(),
        "dubbo://10.0.0.3:1/s?zone=ab".into(),
        "dubbo://10.0.0.4:1/s".into(),
    ]);
    let rule = text_rule(" => zone = $zone", true);
    let prepared = Url::parse("consumer://1.1.1.1/s?zone=a").unwrap();
    // (calling consumer's zone, kept)
    let cases: &[(&str, Vec<usize>)] = &[
        ("zone=a", vec![0]),
        ("zone=b", vec![1]),
        ("zone=a*", vec![0, 2]),
        ("zone=*b", vec![1, 2]),
        ("zone=*", vec![0, 1, 2]),
        ("zone=zz", vec![]),
        ("other=1", vec![]),
    ];
    for (params, want) in cases {
        let caller = Url::parse(&format!("consumer://2.2.2.2/s?{params}")).unwrap();
        let out = run_with(
            &rule,
            &snap,
            &prepared,
            &caller,
            &Request::new(),
            &BitSet::full(4),
            &mut FastRng::seeded(1),
        );
        assert_eq!(&out.kept, want, "{params}");
    }
}

/// The per-call form for another consumer, path by path: references resolved to one value
/// set, to every provider with the key (`*`), to nothing; a consumer value that is a glob in
/// `=` and in `!=` (decided per distinct value); several `=` sets combined word by word; more
/// `=` sets than fit on the stack (decided per distinct value). Each case also equals the
/// direct per-provider evaluation.
#[test]
fn per_call_consumer_references_take_every_path() {
    let snap = snapshot(&[
        "dubbo://10.0.0.1:1/s?zone=a&env=x".into(),
        "dubbo://10.0.0.2:1/s?zone=b&env=y".into(),
        "dubbo://10.0.0.3:1/s?zone=ab&env=xy".into(),
        "dubbo://10.0.0.4:1/s?env=x".into(),
        "dubbo://10.0.0.5:1/s?zone=ba".into(),
        "dubbo://10.0.0.6:1/s?zone=c&env=y".into(),
    ]);
    let prepared = Url::parse("consumer://1.1.1.1/s?zone=a&env=x&o=b").unwrap();
    // (then-part, calling consumer's params, kept); force=true, so an empty then-part
    // result empties the candidates.
    let cases: &[(&str, &str, Vec<usize>)] = &[
        ("zone = $zone", "zone=b", vec![1]),
        ("zone = $zone", "zone=zz", vec![]),
        ("zone = $zone", "other=1", vec![]),
        ("zone = $zone", "zone=*", vec![0, 1, 2, 4, 5]),
        ("zone = $zone", "zone=*a", vec![0, 4]),
        ("zone = $zone", "zone=a*", vec![0, 2]),
        ("zone != $zone", "zone=a", vec![1, 2, 4, 5]),
        ("zone != $zone", "zone=a*", vec![1, 4, 5]),
        ("zone != $zone", "zone=*", vec![]),
        ("zone != $zone", "other=1", vec![0, 1, 2, 4, 5]),
        ("zone = $zone,$o", "zone=a&o=c", vec![0, 5]),
        ("zone = $zone,$o", "zone=a&o=*b", vec![0, 1, 2]),
        ("zone = $zone,$o", "zone=*&o=q", vec![0, 1, 2, 4, 5]),
        ("zone = a* & zone != $zone", "zone=*b", vec![0]),
        ("zone = $zone & env != $env", "zone=*&env=x*", vec![1, 5]),
        ("zone = $zone & env = $env", "zone=a*&env=x*", vec![0, 2]),
        ("zone = $zone & env = $env", "zone=*b&env=y", vec![1]),
        ("zone = $zone & arguments[0] = 1", "zone=*", vec![]),
        (
            "zone = a,b,q1,q2,q3,q4,q5,q6,$zone",
            "zone=c",
            vec![0, 1, 5],
        ),
        (
            "zone = a,b,q1,q2,q3,q4,q5,q6,$zone",
            "zone=*b",
            vec![0, 1, 2],
        ),
        ("zone = q1,q2,q3,q4,q5,q6,q7,q8,$zone", "zone=zz", vec![]),
    ];
    for (then, params, want) in cases {
        let rule = text_rule(&format!(" => {then}"), true);
        let caller = Url::parse(&format!("consumer://2.2.2.2/s?{params}")).unwrap();
        let input = BitSet::full(snap.len());
        let out = run_with(
            &rule,
            &snap,
            &prepared,
            &caller,
            &Request::new(),
            &input,
            &mut FastRng::seeded(1),
        );
        assert_eq!(&out.kept, want, "{then} for {params}");
        let direct = direct(
            &rule,
            &snap,
            &caller,
            &Request::new(),
            &input,
            &mut FastRng::seeded(1),
        );
        assert_eq!(&out.kept, &direct, "{then} for {params}");
    }
}

/// Dubbo's forty providers of `ConditionStateRouterTestV31`.
fn forty() -> Snapshot {
    let params = [
        "",
        "",
        "env=normal",
        "env=normal",
        "env=normal",
        "region=beijing",
        "region=beijing",
        "region=beijing",
        "region=beijing&env=gray",
        "region=beijing&env=gray",
        "region=beijing&env=gray",
        "region=beijing&env=gray",
        "region=beijing&env=normal",
        "region=hangzhou",
        "region=hangzhou",
        "region=hangzhou&env=gray",
        "region=hangzhou&env=gray",
        "region=hangzhou&env=normal",
        "region=hangzhou&env=normal",
        "region=hangzhou&env=normal",
    ];
    let mut urls = Vec::new();
    for host in ["127.0.0.1", "dubbo.apache.org"] {
        for p in params {
            let q = if p.is_empty() {
                String::new()
            } else {
                format!("?{p}")
            };
            urls.push(format!("dubbo://{host}/com.foo.BarService{q}"));
        }
    }
    snapshot(&urls)
}

fn v31(force: bool, conditions: Value) -> ConditionRule {
    compile(json!({
        "configVersion": "v3.1", "scope": "service", "key": "com.foo.BarService",
        "force": force, "runtime": true, "enabled": true, "conditions": conditions
    }))
}

fn matching(snap: &Snapshot, pred: impl Fn(&Url) -> bool) -> Vec<usize> {
    (0..snap.len())
        .filter(|&i| pred(&snap.providers()[i]))
        .collect()
}

#[test]
fn v31_routes_as_dubbo() {
    let snap = forty();
    let consumer = "consumer://127.0.0.1/com.foo.BarService?env=gray&region=beijing";
    let has = |u: &Url, k: &str, v: &str| u.get(k) == Some(v);
    let env_not_gray = |u: &Url| u.get("env").is_some_and(|e| e != "gray");
    let cases: Vec<(&str, ConditionRule, Vec<usize>)> = vec![
        (
            "testMultiplyConditionRoute",
            v31(
                false,
                json!([{"from": {"match": "env=gray"}, "to": [{"match": "env!=gray", "weight": 100}]}]),
            ),
            matching(&snap, env_not_gray),
        ),
        (
            "testRemoveDuplicatesCondition",
            v31(
                false,
                json!([
                    {"from": {"match": "env=gray"}, "to": [{"match": "env!=gray", "weight": 100}]},
                    {"from": {"match": "env=gray"}, "to": [{"match": "env!=gray", "weight": 100}]},
                ]),
            ),
            matching(&snap, env_not_gray),
        ),
        (
            "testConsequentCondition",
            v31(
                false,
                json!([
                    {"from": {"match": "env=gray"}, "to": [{"match": "env!=gray", "weight": 100}]},
                    {"from": {"match": "region=beijing"}, "to": [{"match": "region=beijing", "weight": 100}]},
                    {"from": null, "to": [{"match": "host!=127.0.0.1"}]},
                ]),
            ),
            matching(&snap, |u| {
                env_not_gray(u) && has(u, "region", "beijing") && u.host() != "127.0.0.1"
            }),
        ),
        (
            "testUnMatchCondition",
            v31(
                false,
                json!([
                    {"from": {"match": "env!=gray"}, "to": [{"match": "env=gray", "weight": 100}]},
                    {"from": {"match": "region!=beijing"}, "to": [{"match": "region=beijing", "weight": 100}]},
                    {"from": null, "to": [{"match": "host!=127.0.0.1"}]},
                ]),
            ),
            matching(&snap, |u| u.host() != "127.0.0.1"),
        ),
        (
            "testMatchAndRouteZero",
            v31(
                true,
                json!([
                    {"from": {"match": "env=gray"}, "to": [{"match": "env=ErrTag", "weight": 100}]},
                    {"from": {"match": "region!=beijing"}, "to": [{"match": "region=beijing", "weight": 100}]},
                    {"from": null, "to": [{"match": "host!=127.0.0.1"}]},
                ]),
            ),
            vec![],
        ),
        (
            "testMatchRouteZeroAndIgnore",
            v31(
                false,
                json!([
                    {"from": {"match": "region=beijing"}, "to": [{"match": "region!=beijing", "weight": 100}]},
                    {"from": null, "to": [{"match": "host!=127.0.0.1"}]},
                    {"from": {"match": "env=gray"}, "to": [{"match": "env=ErrTag", "weight": 100}]},
                ]),
            ),
            matching(&snap, |u| {
                u.get("region").is_some_and(|r| r != "beijing") && u.host() != "127.0.0.1"
            }),
        ),
        (
            "testTrafficDisabledAndIgnoreConditionRouteForce",
            v31(
                false,
                json!([
                    {"from": {"match": "host=127.0.0.1"}},
                    {"from": {"match": "env=gray"}, "to": [{"match": "env!=gray", "weight": 100}]},
                    {"to": [{"match": "region!=beijing"}]},
                ]),
            ),
            vec![],
        ),
        (
            "empty to.match selects every provider",
            v31(false, json!([{"to": [{"match": ""}]}, {"to": [{}]}])),
            (0..40).collect(),
        ),
        (
            "$param in to.match",
            v31(
                false,
                json!([{"to": [{"match": "region=$region & env=$env"}]}]),
            ),
            matching(&snap, |u| {
                has(u, "region", "beijing") && has(u, "env", "gray")
            }),
        ),
    ];
    for (name, rule, want) in cases {
        let out = run(
            &rule,
            &snap,
            consumer,
            &Request::new().with_method("getComment"),
        );
        assert_eq!(out.kept, want, "{name}: {}", out.reason);
    }
}

#[test]
fn v31_weights_are_exact() {
    let snap = forty();
    let consumer = "consumer://127.0.0.1/com.foo.BarService?env=gray&region=beijing";
    // testMultiplyDestination, first condition: 100 (env!=gray) vs 900 (env=gray), plus an
    // empty destination that must not take part and a zero weight that is never picked.
    let rule = v31(
        false,
        json!([{"from": {"match": "env=gray"}, "to": [
            {"match": "env!=gray", "weight": 100},
            {"match": "env=none"},
            {"match": "host=127.0.0.1", "weight": 0},
            {"match": "env=gray", "weight": 900},
        ]}]),
    );
    let not_gray = matching(&snap, |u| u.get("env").is_some_and(|e| e != "gray"));
    let gray = matching(&snap, |u| u.get("env") == Some("gray"));
    let consumer = Url::parse(consumer).unwrap();
    let (mut first, mut second) = (0, 0);
    // Every draw r in 0..1000: exactly 100 pick the first destination, 900 the second.
    for r in 0..1000 {
        let out = run_with(
            &rule,
            &snap,
            &consumer,
            &consumer,
            &Request::new(),
            &BitSet::full(40),
            &mut FixedBelow(r),
        );
        if out.kept == not_gray {
            first += 1;
        } else if out.kept == gray {
            second += 1;
        } else {
            panic!("unexpected result {:?} for r={r}", out.kept);
        }
    }
    assert_eq!((first, second), (100, 900));

    // With the seeded generator, the first destination's share of 5,000 calls is 10%
    // within ±2 points.
    let mut rng = FastRng::seeded(7);
    let firsts = (0..5_000)
        .filter(|_| {
            run_with(
                &rule,
                &snap,
                &consumer,
                &consumer,
                &Request::new(),
                &BitSet::full(40),
                &mut rng,
            )
            .kept
                == not_gray
        })
        .count();
    assert!((400..=600).contains(&firsts), "{firsts} of 5000");

    // When the input leaves one destination non-empty, it is taken without a draw.
    let input = BitSet::from_indexes(40, gray.iter().copied());
    let out = run_with(
        &rule,
        &snap,
        &consumer,
        &consumer,
        &Request::new(),
        &input,
        &mut FixedBelow(0),
    );
    assert_eq!(out.kept, gray);

    // testMultiplyDestination: both conditions, all four outcomes occur.
    let rule = v31(
        false,
        json!([
            {"from": {"match": "env=gray"}, "to": [
                {"match": "env!=gray", "weight": 100}, {"match": "env=gray", "weight": 900}]},
            {"from": {"match": "region=beijing"}, "to": [
                {"match": "region!=beijing", "weight": 100}, {"match": "region=beijing", "weight": 200}]},
        ]),
    );
    let mut sizes = std::collections::BTreeSet::new();
    let mut rng = FastRng::seeded(42);
    for _ in 0..1000 {
        let out = run_with(
            &rule,
            &snap,
            &consumer,
            &consumer,
            &Request::new(),
            &BitSet::full(40),
            &mut rng,
        );
        sizes.insert(out.kept.len());
    }
    assert_eq!(sizes.into_iter().collect::<Vec<_>>(), vec![2, 4, 6, 8]);
}

#[test]
fn factory_priorities_and_passthrough() {
    let f = TypedFactory::new("condition", ConditionRouter);
    let entry = json!({"type": "condition"});
    let root = FieldPath::root();
    let build = |rule: Option<&Value>| {
        f.build(&RouterSpec {
            type_name: "condition",
            entry: RuleDoc::new(&entry, &root),
            rule: rule.map(|r| RuleDoc::new(r, &root)),
            base_dir: None,
            service: None,
        })
        .unwrap()
    };
    let priority = |rule: Option<&Value>| build(rule).default_priority();
    assert_eq!(priority(None), 140);
    let rule = |scope: &str| json!({"scope": scope, "conditions": ["a=b => c=d"]});
    assert_eq!(priority(Some(&rule("service"))), 140);
    assert_eq!(priority(Some(&rule("application"))), 150);

    let router = build(None);
    assert_eq!(router.name(), "condition");
    let snap = three("");
    let consumer = Url::parse(&local_consumer()).unwrap();
    let prepared = router
        .prepare(&PrepareContext {
            snapshot: &snap,
            consumer: &consumer,
            service: None,
        })
        .unwrap();
    let req = Request::new();
    let mut builder = RouteContext::builder(&req, &snap).consumer(&consumer, true);
    let mut c = BitSet::full(3);
    assert_eq!(
        prepared.route(&mut builder.context(), &mut c),
        Evaluation::Cached
    );
    assert_eq!(c.count(), 3);
    assert_eq!(
        f.router(Some(text_rule("a=b", false))).name(),
        "condition(service)"
    );
    assert_eq!(
        build(Some(&rule("application"))).name(),
        "condition(application)"
    );
}

#[test]
fn a_range_bound_past_i64_is_out_of_range_not_a_non_integer() {
    for (text, want) in [
        (
            "a = 1~99999999999999999999 => b = c",
            "bound 99999999999999999999 is out of range: a bound is an integer from -9223372036854775808 to 9223372036854775807",
        ),
        (
            "a = -99999999999999999999~0 => b = c",
            "bound -99999999999999999999 is out of range",
        ),
        ("a = 1~z => b = c", "needs integer bounds"),
    ] {
        let doc = json!({"conditions": [text]});
        let e = from_doc(&RuleDoc::new(&doc, &FieldPath::root())).unwrap_err();
        assert!(e[0].message.contains(want), "{text}: {}", e[0].message);
    }
}

#[test]
fn rule_errors_are_all_reported_with_index_and_token() {
    let doc = json!({
        "conditions": ["host = 10.20.3.3 => ,abc", "ok = 1 => x = 2", "a = 1~z => b == c"]
    });
    let root = FieldPath::root().key("routers").index(0).key("rule");
    let e = from_doc(&RuleDoc::new(&doc, &root)).unwrap_err();
    assert_eq!(e.len(), 3, "{e:#?}");
    assert_eq!(e[0].path.to_string(), "routers[0].rule.conditions[0]");
    assert_eq!(e[0].offset, Some(20));
    assert!(e[0].message.contains("condition #0") && e[0].message.contains("\"abc\""));
    assert_eq!(e[1].path.to_string(), "routers[0].rule.conditions[2]");
    assert!(e[1].message.contains("condition #2") && e[1].message.contains("1~z"));
    assert!(e[2].message.contains("`==`"));

    let doc = json!({"configVersion": "v3.1", "conditions": [
        {"from": {"match": "a = b"}, "to": [{"match": "= x"}, {"match": "y", "weight": "heavy"}]}
    ]});
    let e = from_doc(&RuleDoc::new(&doc, &FieldPath::root())).unwrap_err();
    let paths: Vec<String> = e.iter().map(|e| e.path.to_string()).collect();
    assert_eq!(
        paths,
        ["conditions[0].to[1].weight"],
        "field errors come first"
    );
    let doc = json!({"configVersion": "v3.1", "conditions": [
        {"from": {"match": "a = b"}, "to": [{"match": "= x"}, {"match": ",y"}]}
    ]});
    let e = from_doc(&RuleDoc::new(&doc, &FieldPath::root())).unwrap_err();
    let paths: Vec<String> = e.iter().map(|e| e.path.to_string()).collect();
    assert_eq!(
        paths,
        ["conditions[0].to[0].match", "conditions[0].to[1].match"]
    );
}

#[test]
fn a_rule_priority_that_is_no_integer_or_too_large_says_the_accepted_range() {
    const RANGE: &str = "from -9223372036854775808 to 9223372036854775807";
    for (priority, message) in [
        (
            json!("99999999999999999999"),
            format!("priority 99999999999999999999 is out of range: an integer {RANGE}"),
        ),
        (
            json!("high"),
            format!("priority must be an integer {RANGE}, found \"high\""),
        ),
        (
            json!(1.5),
            format!("priority must be an integer {RANGE}, found 1.5"),
        ),
    ] {
        let doc = json!({"priority": priority, "conditions": ["=> host = 1"]});
        let e = from_doc(&RuleDoc::new(&doc, &FieldPath::root())).unwrap_err();
        assert_eq!(e.len(), 1, "{e:#?}");
        assert_eq!(e[0].path.to_string(), "priority");
        assert_eq!(e[0].message, message);
    }
    let doc = json!({"priority": "-7", "conditions": ["=> host = 1"]});
    assert!(from_doc(&RuleDoc::new(&doc, &FieldPath::root())).is_ok());
}

#[test]
fn chain_file_errors_have_file_line_and_column() {
    let text = "\
routers:
  - type: condition
    rule:
      conditions:
        - host = 10.20.3.3 => ,abc
  - type: condition
    rule:
      configVersion: v3.1
      conditions:
        - from: {match: env=gray}
          to:
            - {match: env!=gray, weight: heavy}
  - type: condition
    rule:
      configVersion: v9
      conditions: [a => b]
";
    let file = routechain_rules::ChainFile::parse("chain.yaml", text, None).unwrap();
    let errors = file.compile(&crate::builtin_registry()).unwrap_err();
    let shown: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
    assert_eq!(errors.len(), 3, "{shown:#?}");
    assert_eq!(
        (errors[0].location.line, errors[0].location.column),
        (5, 31),
        "{}",
        shown[0]
    );
    assert!(shown[0].starts_with("chain.yaml:5:31: routers[0].rule.conditions[0]: condition #0"));
    assert!(shown[0].contains("\"abc\""));
    assert_eq!(errors[1].location.line, 12, "{}", shown[1]);
    assert!(shown[1].contains("to[0].weight") && shown[1].contains("heavy"));
    assert_eq!(errors[2].location.line, 15, "{}", shown[2]);
    assert!(shown[2].contains("v9"));
}

#[test]
fn chain_runs_service_before_application_rules() {
    let text = "\
routers:
  - type: condition
    rule: {scope: application, conditions: [' => host = 127.0.0.1'], force: true}
  - type: condition
    rule: {scope: service, conditions: [' => host = 10.20.3.3, 127.0.0.1']}
  - type: condition
";
    let file = routechain_rules::ChainFile::parse("chain.yaml", text, None).unwrap();
    let entries = file.compile(&crate::builtin_registry()).unwrap();
    let priorities: Vec<i32> = entries.iter().map(|e| e.priority).collect();
    assert_eq!(priorities, [150, 140, 140]);
    let state = routechain_core::ChainState::new(
        None,
        Arc::new(three("")),
        Url::parse(&local_consumer()).unwrap(),
        entries,
    )
    .unwrap();
    assert_eq!(state.run_order().collect::<Vec<_>>(), [1, 2, 0]);
    let mut call = routechain_core::CallState::seeded(1);
    let mut trace = routechain_core::Trace::default();
    state
        .route_traced(&Request::new(), &mut call, &mut trace)
        .unwrap();
    assert_eq!(call.candidates.iter().collect::<Vec<_>>(), [1, 2]);
    assert_eq!(trace.steps[0].router, "condition(service)");
    assert_eq!(trace.steps[2].router, "condition(application)");
    assert!(
        trace.steps[2].reason.contains("2 providers by then-part"),
        "{:?}",
        trace.steps[2]
    );
}

#[test]
fn a_rule_that_fails_to_load_keeps_the_previous_one() {
    let chain_text = |conditions: &str| {
        format!(
            "routers:\n  - type: condition\n    rule:\n      force: true\n      conditions: [{conditions}]\n"
        )
    };
    let registry = crate::builtin_registry();
    let compile_text = |text: &str| {
        routechain_rules::ChainFile::parse("chain.yaml", text, None)
            .and_then(|f| f.compile(&registry))
    };
    let consumer = Url::parse(&local_consumer()).unwrap();
    let snap = Arc::new(three(""));
    let first = compile_text(&chain_text("' => host = 10.20.3.3'")).unwrap();
    let chain =
        routechain_core::ChainState::new(None, snap.clone(), consumer.clone(), first).unwrap();
    let routed = |chain: &routechain_core::ChainState| {
        let mut call = routechain_core::CallState::seeded(1);
        chain.route(&Request::new(), &mut call).unwrap();
        call.candidates.iter().collect::<Vec<_>>()
    };
    assert_eq!(routed(&chain), [0]);
    // The bad rule is refused before any state is built: the serving one is untouched.
    let bad = compile_text(&chain_text("' => host = 127.0.0.1', 'x = 1 => ,y'"));
    let errors = bad.unwrap_err();
    assert_eq!(errors.len(), 1);
    assert!(errors[0].to_string().contains("condition #1"));
    assert_eq!(routed(&chain), [0], "the previous rule still routes");
    assert_eq!(chain.generation(), 1);
}

// ---- property tests ----------------------------------------------------------------------

/// Direct evaluation, provider by provider, of a compiled rule (the reference for the
/// bitset implementation).
fn direct(
    rule: &ConditionRule,
    snap: &Snapshot,
    consumer: &Url,
    request: &Request,
    input: &BitSet,
    rng: &mut dyn RandomSource,
) -> Vec<usize> {
    let mut cur: Vec<usize> = input.iter().collect();
    if !rule.enabled {
        return cur;
    }
    let then_matches = |terms: &[Term], i: usize| {
        let p = &snap.providers()[i];
        terms.iter().all(|t| {
            let value = match &t.key {
                Key::Provider(k) => p.get(k),
                _ => None,
            };
            t.matches_value(value, Some(consumer))
        })
    };
    for c in &rule.conditions {
        if cur.is_empty() {
            break;
        }
        if !c.when.iter().all(|t| t.matches_when(request, consumer)) {
            continue;
        }
        match &c.action {
            Action::Blocklist | Action::TrafficDisabled => cur.clear(),
            Action::Then(terms) => {
                let kept: Vec<usize> = cur
                    .iter()
                    .copied()
                    .filter(|&i| then_matches(terms, i))
                    .collect();
                if !kept.is_empty() {
                    cur = kept;
                } else if rule.force {
                    cur.clear();
                }
            }
            Action::Destinations(ds) => {
                let subsets: Vec<(Vec<usize>, u64)> = ds
                    .iter()
                    .map(|d| {
                        let s = if d.terms.is_empty() {
                            cur.clone()
                        } else {
                            cur.iter()
                                .copied()
                                .filter(|&i| then_matches(&d.terms, i))
                                .collect()
                        };
                        (s, u64::from(d.weight))
                    })
                    .filter(|(s, w)| !s.is_empty() && *w > 0)
                    .collect();
                match subsets.len() {
                    0 if rule.force => cur.clear(),
                    0 => {}
                    1 => cur = subsets[0].0.clone(),
                    _ => {
                        let sum: u64 = subsets.iter().map(|(_, w)| w).sum();
                        let mut r = rng.below(sum);
                        for (s, w) in &subsets {
                            if r < *w {
                                cur = s.clone();
                                break;
                            }
                            r -= w;
                        }
                    }
                }
            }
        }
    }
    cur
}

fn provider_strategy() -> impl Strategy<Value = String> {
    let opt = |vals: &'static [&'static str]| proptest::option::of(proptest::sample::select(vals));
    (
        proptest::sample::select(&["10.0.0.1", "10.0.0.2", "10.1.0.1"][..]),
        proptest::sample::select(&[0u16, 20880, 20881][..]),
        opt(&["a", "b", "ab", "ba", "", "1", "10", "a*b"]),
        opt(&["a", "b", "hz", "1", "7", "100", "+5", "010", "-3"]),
    )
        .prop_map(|(host, port, env, zone)| {
            let mut params = Vec::new();
            if let Some(e) = env {
                params.push(format!("env={e}"));
            }
            if let Some(z) = zone {
                params.push(format!("zone={z}"));
            }
            let port = if port > 0 {
                format!(":{port}")
            } else {
                String::new()
            };
            format!("dubbo://{host}{port}/svc?{}", params.join("&"))
        })
}

fn consumer_strategy() -> impl Strategy<Value = String> {
    (
        proptest::option::of(proptest::sample::select(
            &["a", "b", "a*", "*", "1", ""][..],
        )),
        proptest::option::of(proptest::sample::select(
            &["hz", "7", "b", "h*", "1*", "*"][..],
        )),
    )
        .prop_map(|(env, zone)| {
            let mut q = vec!["application=app".to_string()];
            if let Some(e) = env {
                q.push(format!("env={e}"));
            }
            if let Some(z) = zone {
                q.push(format!("zone={z}"));
            }
            format!("consumer://10.0.0.1/svc?{}", q.join("&"))
        })
}

fn clause(
    keys: &'static [&'static str],
    values: &'static [&'static str],
    max_values: usize,
) -> BoxedStrategy<String> {
    (
        proptest::sample::select(keys),
        proptest::sample::select(&["=", "!="][..]),
        proptest::collection::vec(proptest::sample::select(values), 1..=max_values),
    )
        .prop_map(|(k, op, vs)| format!("{k} {op} {}", vs.join(",")))
        .boxed()
}

const THEN_KEYS: &[&str] = &[
    "env",
    "env",
    "zone",
    "zone",
    "host",
    "port",
    "address",
    "missing",
    "arguments[0]",
];
const THEN_VALUES: &[&str] = &[
    "a", "b", "a*", "*b", "*", "1~10", "~5", "7~", "$env", "$env", "$zone", "$zone", "$missing",
    "10.0.*", "*:20880", "a*b*", "*a*", "1*0", "b*a", "a*b", "05~100",
];
const WHEN_KEYS: &[&str] = &[
    "env",
    "env",
    "zone",
    "application",
    "method",
    "arguments[0]",
    "attachments[k]",
    "missing",
];
const WHEN_VALUES: &[&str] = &[
    "a", "b", "a*", "*", "*", "app", "get*", "1~5", "$env", "x", "hz,7",
];

fn side(
    keys: &'static [&'static str],
    values: &'static [&'static str],
    max_values: usize,
) -> BoxedStrategy<String> {
    proptest::collection::vec(clause(keys, values, max_values), 0..=2)
        .prop_map(|cs| cs.join(" & "))
        .boxed()
}

/// Rules whose then-part clauses list up to `max_then_values` patterns.
fn rule_strategy(max_then_values: usize) -> impl Strategy<Value = Value> {
    let v30 = (
        proptest::collection::vec(
            (
                side(WHEN_KEYS, WHEN_VALUES, 2),
                side(THEN_KEYS, THEN_VALUES, max_then_values),
            )
                .prop_map(|(w, t)| format!("{w} => {t}")),
            1..4,
        ),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(conditions, force, runtime, enabled)| {
            json!({"conditions": conditions, "force": force, "runtime": runtime, "enabled": enabled})
        });
    let dest = (side(THEN_KEYS, THEN_VALUES, max_then_values), 0u32..4)
        .prop_map(|(m, w)| json!({"match": m, "weight": w * 50}));
    let cond = (
        proptest::option::of(side(WHEN_KEYS, WHEN_VALUES, 2)),
        proptest::option::of(proptest::collection::vec(dest, 0..4)),
    )
        .prop_map(|(from, to)| {
            let mut c = serde_json::Map::new();
            if let Some(f) = from {
                c.insert("from".into(), json!({"match": f}));
            }
            if let Some(t) = to {
                c.insert("to".into(), Value::Array(t));
            }
            Value::Object(c)
        });
    let v31 = (proptest::collection::vec(cond, 1..4), any::<bool>()).prop_map(
        |(conditions, force)| {
            json!({"configVersion": "v3.1", "conditions": conditions, "force": force})
        },
    );
    prop_oneof![v30, v31]
}

fn request_strategy() -> impl Strategy<Value = Request> {
    (
        proptest::option::of(proptest::sample::select(&["getFoo", "setFoo"][..])),
        proptest::option::of(proptest::sample::select(&["a", "3", "7"][..])),
        proptest::option::of(proptest::sample::select(&["a", "b"][..])),
    )
        .prop_map(|(m, arg, att)| {
            let mut r = Request::new();
            r.method = m.map(String::from);
            if let Some(a) = arg {
                r = r.with_argument(a.parse::<i64>().map_or_else(|_| json!(a), |n| json!(n)));
            }
            if let Some(a) = att {
                r = r.with_attachment("k", a);
            }
            r
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn bitsets_equal_direct_evaluation(
        providers in proptest::collection::vec(provider_strategy(), 1..150),
        doc in rule_strategy(2),
        prepared_consumer in consumer_strategy(),
        caller in consumer_strategy(),
        same_consumer in any::<bool>(),
        request in request_strategy(),
        input_seed in any::<u64>(),
        rng_seed in any::<u64>(),
    ) {
        let snap = snapshot(&providers);
        let rule = compile(doc);
        let prepared = Url::parse(&prepared_consumer).unwrap();
        let caller = if same_consumer { prepared.clone() } else { Url::parse(&caller).unwrap() };
        let mut bits = FastRng::seeded(input_seed);
        let input = BitSet::from_fn(snap.len(), |_| bits.below(4) != 0);
        let got = run_with(
            &rule, &snap, &prepared, &caller, &request, &input, &mut FastRng::seeded(rng_seed),
        );
        let want = direct(&rule, &snap, &caller, &request, &input, &mut FastRng::seeded(rng_seed));
        prop_assert_eq!(got.kept, want, "{}", got.reason);
    }

    /// Always a consumer other than the prepared one (the per-call form), with glob values
    /// (`a*`, `*`, `h*`, `1*`) for `$env`/`$zone`, and then-clauses long enough to exceed the
    /// patterns combined on the stack.
    #[test]
    fn per_call_consumers_equal_direct_evaluation(
        providers in proptest::collection::vec(provider_strategy(), 1..150),
        doc in rule_strategy(11),
        caller in consumer_strategy(),
        request in request_strategy(),
        input_seed in any::<u64>(),
        rng_seed in any::<u64>(),
    ) {
        let snap = snapshot(&providers);
        let rule = compile(doc);
        let prepared = Url::parse("consumer://10.9.9.9/svc?env=a&zone=hz").unwrap();
        let caller = Url::parse(&caller).unwrap();
        let mut bits = FastRng::seeded(input_seed);
        let input = BitSet::from_fn(snap.len(), |_| bits.below(4) != 0);
        let got = run_with(
            &rule, &snap, &prepared, &caller, &request, &input, &mut FastRng::seeded(rng_seed),
        );
        let want = direct(&rule, &snap, &caller, &request, &input, &mut FastRng::seeded(rng_seed));
        prop_assert_eq!(got.kept, want, "{}", got.reason);
    }

    #[test]
    fn the_parser_never_panics(text in "[ a-z0-9=!,&~*$.\\[\\]>é\t-]{0,40}") {
        let p = FieldPath::root();
        let _ = parser::parse_text_condition(&text, &p, 0);
        let _ = parser::parse_match(&text, parser::Side::When, &p, 0);
        let _ = parser::parse_match(&text, parser::Side::Then, &p, 0);
        let doc = json!({"conditions": [text.clone()]});
        if let Ok(rule) = from_doc(&RuleDoc::new(&doc, &p)) {
            // Whatever compiles also prepares and routes.
            let _ = run(&rule, &three(""), &local_consumer(), &Request::new());
        }
    }

    #[test]
    fn parser_errors_point_inside_the_text(text in "[ a-z=!,&~]{1,30}") {
        let p = FieldPath::root();
        if let Err(errors) = parser::parse_text_condition(&text, &p, 3) {
            for e in errors {
                prop_assert!(e.offset.is_some_and(|o| o < text.chars().count()));
                prop_assert!(e.message.starts_with("condition #3"));
            }
        }
    }
}
