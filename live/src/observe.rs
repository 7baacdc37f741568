//! What a [`LiveChain`] records about each update it applies, for operators: counts by
//! source and result, a histogram of apply times, and a `tracing` span around the apply.
//!
//! Updates are rare (seconds to days apart), so these are plain counters behind a short
//! lock, never touched by calls. The call-path counters are
//! [`routechain_core::ChainMetrics`]; the `metrics` feature exports both.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::{LiveChain, Report, Update};

/// What became of an update, as counted by source: the `result` label of
/// `routechain_updates_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum UpdateResult {
    /// A new state is serving (one per swap).
    Applied,
    /// Refused: it did not parse, validate or prepare; the previous state keeps serving.
    Refused,
    /// An empty provider list held back by empty-push protection.
    HeldBack,
    /// A provider entry that could not be parsed, skipped alone.
    Skipped,
}

impl UpdateResult {
    /// Every result, in label order.
    pub const ALL: [UpdateResult; 4] = [
        UpdateResult::Applied,
        UpdateResult::Refused,
        UpdateResult::HeldBack,
        UpdateResult::Skipped,
    ];

    /// The label value: `applied`, `refused`, `held_back`, `skipped`.
    pub fn as_str(self) -> &'static str {
        match self {
            UpdateResult::Applied => "applied",
            UpdateResult::Refused => "refused",
            UpdateResult::HeldBack => "held_back",
            UpdateResult::Skipped => "skipped",
        }
    }

    fn of(report: &Report) -> Option<Self> {
        match report {
            Report::Applied { .. } => Some(UpdateResult::Applied),
            Report::Refused { .. } => Some(UpdateResult::Refused),
            Report::HeldBack { .. } => Some(UpdateResult::HeldBack),
            Report::Skipped { .. } => Some(UpdateResult::Skipped),
            Report::Ignored { .. } | Report::Status { .. } => None,
        }
    }
}

/// Updates counted for one source and result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceCount {
    /// The source: `file`, `zookeeper`, or `api` (applied directly).
    pub source: Arc<str>,
    /// What became of them.
    pub result: UpdateResult,
    /// How many.
    pub count: u64,
}

/// The upper bounds (seconds) of the apply-time histogram's buckets; the last bucket
/// (`+Inf`) is implied.
pub const APPLY_BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// The apply times of applied updates, as a histogram.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ApplyHistogram {
    /// The sum of the observed times, in seconds.
    pub sum: f64,
    /// How many were observed.
    pub count: u64,
    /// Per bucket of the apply-time bounds (`APPLY_BUCKETS`): the observations at most its bound (not
    /// cumulative).
    pub buckets: [u64; APPLY_BUCKETS.len()],
}

impl ApplyHistogram {
    fn observe(&mut self, seconds: f64) {
        self.sum += seconds;
        self.count += 1;
        if let Some(i) = APPLY_BUCKETS.iter().position(|b| seconds <= *b) {
            self.buckets[i] += 1;
        }
    }

    /// `(upper bound, cumulative count)` per bucket, `+Inf` last: the Prometheus form.
    pub fn cumulative(&self) -> Vec<(f64, u64)> {
        let mut total = 0;
        let mut out: Vec<(f64, u64)> = APPLY_BUCKETS
            .iter()
            .zip(self.buckets)
            .map(|(b, n)| {
                total += n;
                (*b, total)
            })
            .collect();
        out.push((f64::INFINITY, self.count));
        out
    }
}

/// An update's source and result, as counted.
type BySource = (Arc<str>, UpdateResult);

#[derive(Debug, Default)]
pub(crate) struct Observed {
    /// Updates by (source, result), in no order: a handful of entries (one per source and
    /// result seen), so a vector grown one entry at a time (a map would allocate its first
    /// node, a few hundred bytes, in every live chain).
    by_source: Mutex<Vec<(BySource, u64)>>,
    apply: Mutex<ApplyHistogram>,
}

impl Observed {
    pub(crate) fn by_source(&self) -> Vec<SourceCount> {
        let mut counts: Vec<_> = {
            let map = self.by_source.lock().unwrap_or_else(|p| p.into_inner());
            map.iter()
                .map(|((source, result), count)| SourceCount {
                    source: source.clone(),
                    result: *result,
                    count: *count,
                })
                .collect()
        };
        // In (source, result) order, as they were listed from a map.
        counts.sort_by(|a, b| (&a.source, a.result).cmp(&(&b.source, b.result)));
        counts
    }

    pub(crate) fn apply_seconds(&self) -> ApplyHistogram {
        self.apply.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn record(&self, source: &str, reports: &[Report], seconds: f64) {
        let mut map = self.by_source.lock().unwrap_or_else(|p| p.into_inner());
        let mut applied = false;
        for result in reports.iter().filter_map(UpdateResult::of) {
            applied |= result == UpdateResult::Applied;
            match map
                .iter_mut()
                .find(|((s, r), _)| &**s == source && *r == result)
            {
                Some((_, n)) => *n += 1,
                None => {
                    map.reserve_exact(1);
                    map.push(((Arc::from(source), result), 1));
                }
            }
        }
        drop(map);
        if applied {
            self.apply
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .observe(seconds);
        }
    }
}

/// The source an update came from: `zookeeper` for a ZooKeeper node (origin
/// `zookeeper:...`), `file` for a reloaded chain file, else `default` (the running
/// source's name, `api` for direct calls).
fn source_of<'a>(update: &Update, default: &'a str) -> &'a str {
    match update {
        Update::Rule { origin, .. }
        | Update::Providers { origin, .. }
        | Update::Unreadable { origin, .. }
            if origin.starts_with("zookeeper:") =>
        {
            "zookeeper"
        }
        Update::ChainFile(_) => "file",
        Update::Batch(items) => items.first().map_or(default, |u| source_of(u, default)),
        _ => default,
    }
}

impl LiveChain {
    /// Applies one update: parses and validates it, builds the new state off the call path
    /// and swaps it in. A batch makes one swap; its bad parts are refused one by one and the
    /// good parts applied. Returns what happened to each part.
    ///
    /// Counted under the source `api` ([`LiveChain::apply_from`] names another); runs in a
    /// `routechain_update` span (see there).
    pub fn apply(&self, update: Update) -> Vec<Report> {
        self.apply_from("api", update)
    }

    /// [`LiveChain::apply`] for an update from `source` (a [`crate::Source`]'s name:
    /// `file`, `zookeeper`; a ZooKeeper node or a chain file is counted under its own kind
    /// whatever the name, so several sources feeding one chain are told apart).
    ///
    /// The apply runs inside an info-level `tracing` span `routechain_update` with the
    /// fields `source`, `generation` (the serving generation after it), `result`
    /// (`applied`, `refused`, `held_back`, `skipped`, `ignored`, joined with `+` for a
    /// batch) and `duration_seconds`, recorded when it ends, followed by a debug event
    /// `update done` in the span. The outcomes are counted by source and result
    /// ([`crate::LiveStats::by_source`]) and the apply time of every applied update goes to
    /// [`crate::LiveStats::apply_seconds`].
    pub fn apply_from(&self, source: &str, update: Update) -> Vec<Report> {
        let source = match source {
            // Several sources in one (`Sources`): what is not ZooKeeper's comes from files.
            "sources" => source_of(&update, "file"),
            s => source_of(&update, s),
        };
        match &update {
            Update::Status { .. } => return self.apply_update(update),
            // A source's read that found nothing (sent so that a merge knows it was read).
            Update::Batch(items) if items.is_empty() => return Vec::new(),
            _ => {}
        }
        self.observed(source, || self.apply_update(update))
    }

    /// Runs `apply` (one update's application) inside the `routechain_update` span, counts
    /// its reports under `source` and times it (see [`LiveChain::apply_from`]).
    pub(crate) fn observed(
        &self,
        source: &str,
        apply: impl FnOnce() -> Vec<Report>,
    ) -> Vec<Report> {
        let span = tracing::info_span!(
            "routechain_update",
            source,
            generation = tracing::field::Empty,
            result = tracing::field::Empty,
            duration_seconds = tracing::field::Empty,
        );
        let _entered = span.enter();
        let started = Instant::now();
        let reports = apply();
        let seconds = started.elapsed().as_secs_f64();
        self.stats().observed.record(source, &reports, seconds);
        let mut results: Vec<&str> = Vec::new();
        for r in &reports {
            let name = match (UpdateResult::of(r), r) {
                (Some(result), _) => result.as_str(),
                (None, Report::Ignored { .. }) => "ignored",
                (None, _) => continue,
            };
            if !results.contains(&name) {
                results.push(name);
            }
        }
        let generation = self.service().state().generation();
        let result = results.join("+");
        span.record("generation", generation);
        span.record("result", result.as_str());
        span.record("duration_seconds", seconds);
        tracing::debug!(generation, result = %result, duration_seconds = seconds, "update done");
        reports
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{LiveOptions, ProviderText, RuleEvent, RuleKey};
    use routechain_rules::ChainFile;

    fn live() -> LiveChain {
        crate::test_chain("service: com.foo.BarService\nrouters:\n  - type: condition\n")
    }

    fn providers(origin: &str, lines: &str) -> Update {
        Update::Providers {
            origin: origin.into(),
            text: ProviderText::Lines(lines.into()),
        }
    }

    #[test]
    fn updates_are_counted_by_source_and_result_and_applied_ones_timed() {
        let live = live();
        let zk = "zookeeper:/dubbo/com.foo.BarService/providers";
        live.apply_from(
            "zookeeper",
            providers(zk, "dubbo://10.0.0.1:20880/com.foo.BarService\nnot a url\n"),
        );
        live.apply_from("zookeeper", providers(zk, ""));
        live.apply(Update::Rule {
            key: RuleKey::new("com.foo.BarService::", "condition"),
            event: RuleEvent::Added("conditions: [".into()),
            origin: "test".into(),
        });
        // Files: a provider list from a file, through several sources in one.
        live.apply_from(
            "sources",
            providers(
                "providers.txt",
                "dubbo://10.0.0.2:20880/com.foo.BarService\n",
            ),
        );
        let counts: Vec<(String, &str, u64)> = live
            .stats()
            .by_source()
            .into_iter()
            .map(|c| (c.source.to_string(), c.result.as_str(), c.count))
            .collect();
        assert_eq!(
            counts,
            [
                ("api".to_string(), "refused", 1),
                ("file".to_string(), "applied", 1),
                ("zookeeper".to_string(), "applied", 1),
                ("zookeeper".to_string(), "held_back", 1),
                ("zookeeper".to_string(), "skipped", 1),
            ]
        );
        let h = live.stats().apply_seconds();
        assert_eq!(h.count, 2);
        assert!(h.sum > 0.0 && h.sum < 10.0, "{h:?}");
        let cumulative = h.cumulative();
        assert_eq!(cumulative.last(), Some(&(f64::INFINITY, 2)));
        assert!(cumulative.windows(2).all(|w| w[0].1 <= w[1].1));
    }

    #[test]
    fn the_histogram_puts_each_time_in_its_bucket() {
        let mut h = ApplyHistogram::default();
        h.observe(0.0004);
        h.observe(0.003);
        h.observe(60.0);
        let c = h.cumulative();
        assert_eq!(c[0], (0.0005, 1));
        assert_eq!(c[3], (0.005, 2));
        assert_eq!(c[APPLY_BUCKETS.len() - 1], (10.0, 2));
        assert_eq!(c[APPLY_BUCKETS.len()], (f64::INFINITY, 3));
    }

    #[test]
    fn a_live_chain_counts_calls_unless_told_not_to() {
        let live = live();
        assert!(live.service().state().metrics().is_some());
        let file = ChainFile::parse("t.yaml", "routers: []\n", None).unwrap();
        let off = LiveChain::new(
            file,
            routechain_routers::builtin_registry(),
            LiveOptions {
                metrics: false,
                ..LiveOptions::default()
            },
        )
        .unwrap();
        assert!(off.service().state().metrics().is_none());
        // The metrics follow every update.
        live.apply(providers(
            "p",
            "dubbo://10.0.0.1:20880/com.foo.BarService\n",
        ));
        assert!(live.service().state().metrics().is_some());
    }
}
