//! The memory a rule takes is a small constant times its size: the peak of heap
//! bytes in use while a large generated chain file is parsed, compiled and prepared (as
//! `route` loads it), or parsed, compiled and linted (as `check` reads it), counted by a
//! counting global allocator (`allocation-counter`), as a multiple of the file's size.
//! Nothing here is timed.

use std::sync::Arc;

use routechain::core::{FieldPath, TypedFactory};
use routechain::routers::condition::parser::{parse_match, parse_text_condition};
use routechain::routers::condition::{ConditionRouter, condition_texts};
use routechain::rules::ChainFile;
use routechain_testkit::hostile::{conditions, providers, tag_rule_chain};

/// The peak heap bytes of loading `text` (parse, compile, prepare over 1,000 providers),
/// the source copy the document keeps included, over the size of `text`.
fn peak_multiple(text: &str) -> f64 {
    let snapshot = providers(1_000);
    let registry = routechain::registry();
    peak_over("load", text, || {
        let file = ChainFile::parse("big.chain.yaml", text, None).expect("the chain parses");
        let state =
            routechain::rules::load::build_state(&file, &registry, Arc::clone(&snapshot), None)
                .expect("the chain prepares");
        drop(state);
        drop(file);
    })
}

/// The peak heap bytes in use while `work` runs (counted by the global allocator) over the
/// size of `text`, printed with `label`.
fn peak_over(label: &str, text: &str, work: impl FnOnce()) -> f64 {
    let counted = allocation_counter::measure(work);
    let multiple = counted.bytes_max as f64 / text.len() as f64;
    println!(
        "{label}: {} bytes: peak {} bytes, {multiple:.2}x",
        text.len(),
        counted.bytes_max
    );
    multiple
}

/// Fails when `multiple` (of a rule `what`, written as `text`) is over `bound`.
fn assert_bounded(what: &str, text: &str, multiple: f64, bound: f64) {
    assert!(
        multiple <= bound,
        "{what} of {} bytes peaked at {multiple:.1}x its size",
        text.len()
    );
}

/// The peak heap bytes of reading `text` (a chain of one condition router) as `routechain
/// check` does (`cli/src/commands/check.rs`, `cli/src/lint/condition.rs`), the text itself
/// included, over its size: the file's text is kept; the chain parsed; its entry compiled
/// (and dropped, as `check` drops it before the lints); the rule compiled again for the
/// lints, which read every condition text back from the document and parse it.
fn check_peak_multiple(text: &str) -> f64 {
    let registry = routechain::registry();
    peak_over("check", text, || {
        let text = text.to_string();
        let (file, errors) = ChainFile::parse_lenient("big.chain.yaml", &text, None);
        assert!(errors.is_empty(), "{errors:?}");
        let file = file.expect("the chain parses");
        drop(file.compile(&registry).expect("the chain compiles"));
        let path = FieldPath::root().key("routers").index(0).key("rule");
        let doc = file.doc.rule_doc(&path).expect("an inline rule");
        let def = TypedFactory::new("condition", ConditionRouter)
            .compile(doc)
            .expect("the rule compiles");
        let conditions = path.key("conditions");
        for i in 0..def.conditions.len() {
            let at = conditions.index(i);
            let item = file.doc.value_at(&at).expect("a condition");
            for (text, side) in condition_texts(def.version, &item, &at) {
                let Some(text) = text else { continue };
                let parsed = match side {
                    None => parse_text_condition(&text.text, &text.path, i).map(|_| ()),
                    Some(side) => parse_match(&text.text, side, &text.path, i).map(|_| ()),
                };
                assert!(parsed.is_ok(), "condition #{i} parses");
            }
        }
        drop(def);
        drop(file);
    })
}

#[test]
fn a_large_tag_rule_takes_at_most_a_bounded_multiple_of_its_size() {
    // 20,000 tags of two exact addresses, about 1.5 MB.
    let text = tag_rule_chain(20_000);
    let multiple = peak_multiple(&text);
    assert_bounded("a tag rule", &text, multiple, TAG_BOUND);
}

#[test]
fn a_large_condition_rule_takes_at_most_a_bounded_multiple_of_its_size() {
    // 20,000 conditions `method = mI => region = rJ & env != eK`, about 1.1 MB.
    let text = conditions(20_000);
    let multiple = peak_multiple(&text);
    assert_bounded("a condition rule", &text, multiple, CONDITION_BOUND);
}

#[test]
fn checking_a_large_condition_rule_takes_at_most_a_bounded_multiple_of_its_size() {
    let text = conditions(20_000);
    let multiple = check_peak_multiple(&text);
    assert_bounded(
        "checking a condition rule",
        &text,
        multiple,
        CONDITION_CHECK_BOUND,
    );
}

/// The bound for tag rules (measured 8.3x: source 1x, location tree 2.7x, the rule as
/// deserialized and as compiled, the prepared trie): see BENCHMARKS.md "Rule memory".
const TAG_BOUND: f64 = 8.5;

/// The bound for condition rules as loaded (measured 5.9x: the source 1x, its location
/// tree 0.9x, the compiled conditions 3.1x with key names, then-part values and then-parts
/// shared, the prepared sets one per distinct then-part): see BENCHMARKS.md "Rule memory".
const CONDITION_BOUND: f64 = 6.5;

/// The bound for condition rules as checked (measured 6.9x: the file's text is held
/// besides the document, and the lints compile the rule once more after the entry's
/// compiled rule is dropped).
const CONDITION_CHECK_BOUND: f64 = 7.5;

/// A mesh rule of one DestinationRule with `n / 10` subsets and one VirtualService with `n`
/// route details (an attachment match and one destination each), inline in a chain.
fn mesh_chain(n: usize) -> String {
    let mut out = String::from(
        "routers:\n  - type: mesh\n    app: app1\n    rule:\n      - kind: DestinationRule\n        \
         metadata: { name: app1 }\n        spec:\n          subsets:\n",
    );
    for i in 0..n.div_ceil(10) {
        out.push_str(&format!(
            "            - {{ name: s{i}, labels: {{ ver: v{i} }} }}\n"
        ));
    }
    out.push_str(
        "      - kind: VirtualService\n        metadata: { name: app1 }\n        spec:\n          \
         dubbo:\n            - routedetail:\n",
    );
    for i in 0..n {
        out.push_str(&format!(
            "                - name: d{i}\n                  match: [{{ attachments: {{ \
             dubboContext: {{ lane: {{ exact: l{i} }} }} }} }}]\n                  route: \
             [{{ destination: {{ subset: s{} }} }}]\n",
            i / 10
        ));
    }
    out
}

#[test]
fn a_large_mesh_rule_takes_at_most_a_bounded_multiple_of_its_size() {
    let text = mesh_chain(5_000);
    let multiple = peak_multiple(&text);
    assert_bounded("a mesh rule", &text, multiple, MESH_BOUND);
}

/// An override rule of `n` configs (an address, a side, a weight each).
fn override_rule(n: usize) -> String {
    let mut out = String::from(
        "configVersion: v3.0\nscope: service\nkey: com.example.Svc\nenabled: true\nconfigs:\n",
    );
    for i in 0..n {
        out.push_str(&format!(
            "  - addresses: [\"10.0.{}.{}:20880\"]\n    side: provider\n    parameters: \
             {{ weight: \"{}\" }}\n",
            (i >> 8) & 255,
            i & 255,
            i % 200
        ));
    }
    out
}

#[test]
fn a_large_override_rule_takes_at_most_a_bounded_multiple_of_its_size() {
    let text = override_rule(20_000);
    let multiple = peak_over("override", &text, || {
        let rule =
            routechain::rules::configurators::OverrideRule::parse("big.configurators", &text)
                .expect("the override rule parses");
        drop(rule);
    });
    assert_bounded("an override rule", &text, multiple, OVERRIDE_BOUND);
}

/// The bound for mesh rules (measured 13.9x: the document 3.8x, the compiled rule 9x). Each
/// route detail's value is built only when it is read, since a `serde_json::Value` of a rule
/// of many small mappings takes about 25 times its text; see BENCHMARKS.md "Rule memory".
const MESH_BOUND: f64 = 15.0;

/// The bound for override rules (measured 13.5x: the document 4x, each item's override URL
/// and its parameters; each `configs` item is built as a value only when it is read).
const OVERRIDE_BOUND: f64 = 15.0;
