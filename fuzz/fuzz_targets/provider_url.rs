//! Provider URLs and provider lists: every bad line located inside the list.
#![no_main]

use libfuzzer_sys::fuzz_target;
use routechain_core::{Snapshot, Url};

fuzz_target!(|text: &str| {
    if let Ok(url) = Url::parse(text) {
        let _ = (url.host(), url.port(), url.address());
    }
    let lines: Vec<&str> = routechain_rules::located::lines(text).collect();
    match Snapshot::parse_lines(1, text) {
        Ok(snapshot) => assert!(snapshot.len() <= lines.len()),
        Err(e) => {
            for l in &e.lines {
                assert!(l.line >= 1 && l.column >= 1, "{l}: location below 1:1");
                let width = lines.get(l.line - 1).map_or(0, |t| t.chars().count());
                assert!(l.line <= lines.len(), "{l}: past the end");
                assert!(l.column <= width + 1, "{l}: past the end of its line");
            }
            assert_eq!(e.to_string().lines().count(), e.lines.len());
        }
    }
});
