//! The chain file's `timeout` settings (service and per method): read as durations, and a
//! bad one reported at its file, line and column.

use std::time::Duration;

use routechain_rules::ChainFile;

#[test]
fn timeouts_and_method_retries_are_read() {
    let text = "routers: []\ntimeout: 300ms\nmethods:\n  report: {timeout: 5s, retries: 0}\n  stream: {timeout: 0}\n";
    let c = ChainFile::parse("c.yaml", text, None)
        .unwrap()
        .service_config;
    assert_eq!(c.timeout_for(None), Some(Duration::from_millis(300)));
    assert_eq!(c.timeout_for(Some("report")), Some(Duration::from_secs(5)));
    assert_eq!(c.retries_for(Some("report")), 0);
    assert_eq!(c.retries_for(Some("stream")), 2);
    assert_eq!(c.timeout_for(Some("stream")), None);
}

#[test]
fn a_bad_timeout_is_located() {
    let text = "routers: []\ntimeout: soon\nmethods:\n  report:\n    timeout: -1s\n";
    let errors = ChainFile::parse("c.yaml", text, None).unwrap_err();
    let shown: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(shown.len(), 2, "{shown:#?}");
    for expected in [
        "c.yaml:2:10: timeout: invalid duration \"soon\": expected number at 0",
        "c.yaml:5:14: methods.report.timeout: invalid duration \"-1s\": a duration cannot be negative",
    ] {
        assert!(
            shown.iter().any(|s| s.starts_with(expected)),
            "missing {expected:?} in {shown:#?}"
        );
    }
}
