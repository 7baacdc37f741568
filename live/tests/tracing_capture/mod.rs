//! The capture the tracing tests share: a small `tracing-subscriber` layer recording spans
//! (with their fields at close) and events, and a live chain to drive. Each test that
//! captures is its own test binary: tracing caches a callsite's interest process-wide, and
//! two captures in one process (parallel or one after the other) can hide each other's events.
#![allow(dead_code, unused_imports)]

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};

pub use routechain_core::{CallState, Request};
pub use routechain_live::{
    LiveChain, LiveOptions, ProviderText, Report, RuleEvent, RuleKey, Update,
};
use routechain_rules::ChainFile;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

pub type Fields = BTreeMap<String, String>;

/// A closed span: its name and every field recorded on it.
#[derive(Debug, Clone)]
pub struct SpanSeen {
    pub name: String,
    pub fields: Fields,
}

/// An event: its level, message and fields, and the span it happened in.
#[derive(Debug, Clone)]
pub struct EventSeen {
    pub level: Level,
    pub fields: Fields,
    pub span: Option<String>,
}

/// The layer: keeps every closed span and every event.
#[derive(Default, Clone)]
pub struct Capture {
    pub spans: Arc<Mutex<Vec<SpanSeen>>>,
    pub events: Arc<Mutex<Vec<EventSeen>>>,
}

pub struct Collect<'a>(&'a mut Fields);

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
    pub fn during<T>(&self, f: impl FnOnce() -> T) -> T {
        let subscriber = tracing_subscriber::registry().with(self.clone());
        tracing::subscriber::with_default(subscriber, f)
    }

    /// The fields of every closed `routechain_update` span, in order.
    pub fn update_spans(&self) -> Vec<Fields> {
        let spans = self.spans.lock().unwrap();
        spans
            .iter()
            .filter(|s| s.name == "routechain_update")
            .map(|s| s.fields.clone())
            .collect()
    }

    /// The events whose message is `message`.
    pub fn events_with(&self, message: &str) -> Vec<EventSeen> {
        let events = self.events.lock().unwrap();
        events
            .iter()
            .filter(|e| e.fields.get("message").map(String::as_str) == Some(message))
            .cloned()
            .collect()
    }
}

pub fn live_chain(chain_yaml: &str) -> LiveChain {
    let file = ChainFile::parse("t.yaml", chain_yaml, None).unwrap();
    LiveChain::new(
        file,
        routechain_routers::builtin_registry(),
        LiveOptions::default(),
    )
    .unwrap()
}

/// A chain whose one router (a forced condition) leaves no provider on every call.
pub const EMPTIES: &str = "service: com.foo.BarService\nrouters:\n  - type: condition\n    rule:\n      force: true\n      conditions: ['=> zone = c']\n";

pub fn providers() -> Update {
    Update::Providers {
        origin: "providers.txt".into(),
        text: ProviderText::Lines(
            "dubbo://10.0.0.1:20880/com.foo.BarService?zone=a\n\
             dubbo://10.0.0.2:20880/com.foo.BarService?zone=b\n"
                .into(),
        ),
    }
}
