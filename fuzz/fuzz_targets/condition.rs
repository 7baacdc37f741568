//! Condition texts (Dubbo v3.0 `when => then`, and v3.1 `match` texts): every error offset
//! is inside the text, and a text placed in a chain file is located inside the file.
#![no_main]

use libfuzzer_sys::fuzz_target;
use routechain_core::FieldPath;
use routechain_routers::condition::parser::{Side, parse_match, parse_text_condition};

fuzz_target!(|text: &str| {
    let chars = text.chars().count();
    let path = FieldPath::root().key("conditions").index(0);
    let results = [
        parse_text_condition(text, &path, 0).err(),
        parse_match(text, Side::When, &path, 0).err(),
        parse_match(text, Side::Then, &path, 0).err(),
    ];
    for errors in results.into_iter().flatten() {
        for e in errors {
            if let Some(offset) = e.offset {
                assert!(offset <= chars, "offset {offset} past {chars} characters: {e}");
            }
        }
    }
    // In a chain file, as a double-quoted scalar with escapes: located inside the file.
    let quoted = serde_json::to_string(text).unwrap();
    let chain = format!("routers:\n  - type: condition\n    rule:\n      conditions:\n        - {quoted}\n");
    let (file, mut errors) =
        routechain_rules::ChainFile::parse_lenient("c.yaml", &chain, None);
    if let Some(file) = file
        && let Err(mut es) = file.compile(&routechain_routers::builtin_registry())
    {
        errors.append(&mut es.0);
    }
    routechain_fuzz::check_located("c.yaml", &chain, &errors);
});
