//! What a live chain tells `tracing` about a call that a router left with no provider: one
//! debug event, captured by a small subscriber layer.

mod tracing_capture;

use tracing::Level;
use tracing_capture::*;

#[test]
fn a_call_left_with_no_provider_emits_a_debug_event() {
    const EMPTIED: &str = "no provider: the router emptied the candidate set";
    let live = live_chain(EMPTIES);
    live.apply(providers());
    let state = live.service().state();
    let capture = Capture::default();
    let mut call = CallState::seeded(1);
    let routed = capture.during(|| state.route(&Request::new(), &mut call));
    assert!(routed.is_err(), "the forced condition empties every call");

    let emptied = capture.events_with(EMPTIED);
    assert_eq!(emptied.len(), 1, "{:?}", capture.events.lock().unwrap());
    let event = &emptied[0];
    assert_eq!(event.level, Level::DEBUG, "{event:?}");
    assert_eq!(event.fields["service"], "com.foo.BarService", "{event:?}");
    assert_eq!(
        event.fields["generation"],
        state.generation().to_string(),
        "{event:?}"
    );
    assert!(event.fields["router"].starts_with("condition"), "{event:?}");
    assert!(event.fields.contains_key("priority"), "{event:?}");

    // A call that keeps a provider emits no such event.
    let open = live_chain("service: com.foo.BarService\nrouters: []\n");
    open.apply(providers());
    let state = open.service().state();
    let quiet = Capture::default();
    quiet
        .during(|| state.route(&Request::new(), &mut call))
        .unwrap();
    assert!(quiet.events_with(EMPTIED).is_empty());
}
