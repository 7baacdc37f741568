//! Provider URLs and provider lists: every bad line located inside the list.
#![no_main]

use libfuzzer_sys::fuzz_target;
use routechain_rules::load::{LoadError, parse_providers};

fuzz_target!(|text: &str| {
    if let Ok(url) = routechain_core::Url::parse(text) {
        let _ = (url.host(), url.port(), url.address());
    }
    match parse_providers("providers.txt", text, 1) {
        Ok(snapshot) => {
            assert!(snapshot.len() <= routechain_rules::located::lines(text).count())
        }
        Err(LoadError::Invalid(errors)) => routechain_fuzz::check_located(
            "providers.txt",
            routechain_rules::input::strip_bom(text),
            &errors,
        ),
        Err(e) => panic!("a provider list fails only with located problems: {e}"),
    }
});
