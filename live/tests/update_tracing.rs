//! What a live chain tells `tracing`, captured by a small subscriber layer: the
//! `routechain_update` span around each update with its `source`, `generation`, `result`
//! and `duration_seconds` (for an applied and a refused update), and the debug event of a
//! call that a router left with no provider.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};

use routechain_core::{CallState, Request};
use routechain_live::{LiveChain, LiveOptions, ProviderText, Report, RuleEvent, RuleKey, Update};
use routechain_rules::ChainFile;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

type Fields = BTreeMap<String, String>;

/// A closed span: its name and every field recorded on it.
#[derive(Debug, Clone)]
struct SpanSeen {
    name: String,
    fields: Fields,
}

/// An event: its level, message and fields, and the span it happened in.
#[derive(Debug, Clone)]
struct EventSeen {
    level: Level,
    fields: Fields,
    span: Option<String>,
}

/// The layer: keeps every closed span and every event.
#[derive(Default, Clone)]
struct Capture {
    spans: Arc<Mutex<Vec<SpanSeen>>>,
    events: Arc<Mutex<Vec<EventSeen>>>,
}

struct Collect<'a>(&'a mut Fields);

impl Visit for Collect<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        self.0.insert(field.name().into(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().into(), value.into());
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = Fields::new();
        attrs.record(&mut Collect(&mut fields));
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(fields);
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id)
            && let Some(fields) = span.extensions_mut().get_mut::<Fields>()
        {
            values.record(&mut Collect(fields));
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut fields = Fields::new();
        event.record(&mut Collect(&mut fields));
        self.events.lock().unwrap().push(EventSeen {
            level: *event.metadata().level(),
            fields,
            span: ctx.event_span(event).map(|s| s.name().to_string()),
        });
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(&id) {
            let fields = span.extensions_mut().remove::<Fields>().unwrap_or_default();
            self.spans.lock().unwrap().push(SpanSeen {
                name: span.name().to_string(),
                fields,
            });
        }
    }
}

impl Capture {
    /// Runs `f` with this layer as the thread's subscriber.
    fn during<T>(&self, f: impl FnOnce() -> T) -> T {
        let subscriber = tracing_subscriber::registry().with(self.clone());
        tracing::subscriber::with_default(subscriber, f)
    }

    /// The fields of every closed `routechain_update` span, in order.
    fn update_spans(&self) -> Vec<Fields> {
        let spans = self.spans.lock().unwrap();
        spans
            .iter()
            .filter(|s| s.name == "routechain_update")
            .map(|s| s.fields.clone())
            .collect()
    }

    /// The events whose message is `message`.
    fn events_with(&self, message: &str) -> Vec<EventSeen> {
        let events = self.events.lock().unwrap();
        events
            .iter()
            .filter(|e| e.fields.get("message").map(String::as_str) == Some(message))
            .cloned()
            .collect()
    }
}

fn live_chain(chain_yaml: &str) -> LiveChain {
    let file = ChainFile::parse("t.yaml", chain_yaml, None).unwrap();
    LiveChain::new(
        file,
        routechain_routers::builtin_registry(),
        LiveOptions::default(),
    )
    .unwrap()
}

/// A chain whose one router (a forced condition) leaves no provider on every call.
const EMPTIES: &str = "service: com.foo.BarService\nrouters:\n  - type: condition\n    rule:\n      force: true\n      conditions: ['=> zone = c']\n";

fn providers() -> Update {
    Update::Providers {
        origin: "providers.txt".into(),
        text: ProviderText::Lines(
            "dubbo://10.0.0.1:20880/com.foo.BarService?zone=a\n\
             dubbo://10.0.0.2:20880/com.foo.BarService?zone=b\n"
                .into(),
        ),
    }
}

#[test]
fn each_update_runs_in_a_span_with_its_source_generation_result_and_duration() {
    let live = live_chain(EMPTIES);
    let before = live.chain().load().generation();
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
    let after = live.chain().load().generation();
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

#[test]
fn a_call_left_with_no_provider_emits_a_debug_event() {
    const EMPTIED: &str = "no provider: the router emptied the candidate set";
    let live = live_chain(EMPTIES);
    live.apply(providers());
    let state = live.chain().load();
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
    let state = open.chain().load();
    let quiet = Capture::default();
    quiet
        .during(|| state.route(&Request::new(), &mut call))
        .unwrap();
    assert!(quiet.events_with(EMPTIED).is_empty());
}
