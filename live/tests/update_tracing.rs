//! What a live chain tells `tracing` about an update, captured by a small subscriber layer:
//! the `routechain_update` span around each update with its `source`, `generation`, `result`
//! and `duration_seconds`, for an applied and a refused update.

mod tracing_capture;

use tracing::Level;
use tracing_capture::*;

#[test]
fn each_update_runs_in_a_span_with_its_source_generation_result_and_duration() {
    let live = live_chain(EMPTIES);
    let before = live.service().state().generation();
    let capture = Capture::default();
    let (applied, refused) = capture.during(|| {
        let applied = live.apply_from("file", providers());
        let refused = live.apply(Update::Rule {
            key: RuleKey::new("com.foo.BarService::", "condition"),
            event: RuleEvent::Added("conditions: [".into()),
            origin: "test".into(),
        });
        (applied, refused)
    });
    assert!(
        matches!(applied.as_slice(), [Report::Applied { .. }]),
        "{applied:?}"
    );
    assert!(
        matches!(refused.as_slice(), [Report::Refused { .. }]),
        "{refused:?}"
    );
    let after = live.service().state().generation();
    assert!(after > before, "{before} -> {after}");

    let spans = capture.update_spans();
    assert_eq!(spans.len(), 2, "{spans:?}");
    for (span, source, result) in [
        (&spans[0], "file", "applied"),
        (&spans[1], "api", "refused"),
    ] {
        let keys: Vec<&str> = span.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            ["duration_seconds", "generation", "result", "source"],
            "{span:?}"
        );
        assert_eq!(span["source"], source, "{span:?}");
        assert_eq!(span["result"], result, "{span:?}");
        // The serving generation after the update: the refused one leaves it as it was.
        assert_eq!(span["generation"], after.to_string(), "{span:?}");
        let seconds: f64 = span["duration_seconds"].parse().unwrap();
        assert!((0.0..10.0).contains(&seconds), "{span:?}");
    }

    // Each ends with a debug event `update done` inside its span, with the same values.
    let done = capture.events_with("update done");
    assert_eq!(done.len(), 2, "{done:?}");
    for (event, result) in done.iter().zip(["applied", "refused"]) {
        assert_eq!(event.level, Level::DEBUG, "{event:?}");
        assert_eq!(
            event.span.as_deref(),
            Some("routechain_update"),
            "{event:?}"
        );
        assert_eq!(event.fields["result"], result, "{event:?}");
        assert_eq!(event.fields["generation"], after.to_string(), "{event:?}");
    }
}
