//! The demo's report: what each phase measured ([`PhaseStats`]), the checks, and the text
//! rendering.

use std::collections::BTreeMap;

use serde::Serialize;

/// What one phase measured.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PhaseStats {
    /// The phase's name.
    pub name: String,
    /// What happened before it.
    pub action: String,
    /// Beijing's route table in force (read from the rule file).
    pub route_table: BTreeMap<String, u32>,
    /// Calls sent.
    pub calls: u64,
    /// Calls answered.
    pub ok: u64,
    /// Untagged, non-reindex calls answered, by the answering provider's IDC.
    pub idc_calls: BTreeMap<String, u64>,
    /// Answers by provider address.
    pub by_provider: BTreeMap<String, u64>,
    /// Answers from a provider of another group than the call asked for.
    pub misrouted_group: u64,
    /// Untagged calls answered by a gray provider.
    pub untagged_on_gray: u64,
    /// Gray calls answered by gray providers.
    pub gray_on_gray: u64,
    /// Gray calls answered by an untagged provider.
    pub gray_on_untagged: u64,
    /// `reindex` calls answered.
    pub reindex_ok: u64,
    /// `reindex` calls answered outside IDC zf.
    pub reindex_outside_zf: u64,
    /// Answers from the provider marked `degraded=true`.
    pub degraded_param_hits: u64,
    /// Replies whose id did not match the call.
    pub id_mismatch: u64,
    /// Calls answered after at least one failed attempt.
    pub failovers: u64,
    /// Attempts that failed (connection refused or closed, timeout).
    pub failed_attempts: u64,
    /// Attempts sent to a killed provider.
    pub attempts_on_killed: u64,
    /// Calls refused by the breaker (service unavailable).
    pub rejected: u64,
    /// Rejected calls that were gray calls.
    pub rejected_gray: u64,
    /// Calls that failed otherwise, by reason.
    pub failed: BTreeMap<String, u64>,
    /// Untagged calls that did not get an answer.
    pub untagged_failed: u64,
    /// Gray calls that did not get an answer (refused included).
    pub gray_failed: u64,
    /// Untagged calls answered.
    pub untagged_ok: u64,
    /// Untagged calls answered by a `canary=true` provider.
    pub canary_calls: u64,
    /// Per user: bit 1 answered by a stable provider, bit 2 by a canary provider.
    #[serde(skip)]
    pub(super) user_sides: BTreeMap<String, u8>,
    /// Wall time of the phase.
    pub seconds: f64,
    /// Breaker trips during the phase.
    pub breaker_trips: u64,
    #[serde(skip)]
    pub(super) call_ns: Vec<u64>,
    #[serde(skip)]
    pub(super) reject_ns: Vec<u64>,
}

impl PhaseStats {
    /// Adds another caller's (or phase's) counts.
    pub fn merge(&mut self, o: PhaseStats) {
        self.calls += o.calls;
        self.ok += o.ok;
        for (k, v) in o.idc_calls {
            *self.idc_calls.entry(k).or_default() += v;
        }
        for (k, v) in o.by_provider {
            *self.by_provider.entry(k).or_default() += v;
        }
        for (k, v) in o.failed {
            *self.failed.entry(k).or_default() += v;
        }
        self.misrouted_group += o.misrouted_group;
        self.untagged_on_gray += o.untagged_on_gray;
        self.gray_on_gray += o.gray_on_gray;
        self.gray_on_untagged += o.gray_on_untagged;
        self.reindex_ok += o.reindex_ok;
        self.reindex_outside_zf += o.reindex_outside_zf;
        self.degraded_param_hits += o.degraded_param_hits;
        self.id_mismatch += o.id_mismatch;
        self.failovers += o.failovers;
        self.failed_attempts += o.failed_attempts;
        self.attempts_on_killed += o.attempts_on_killed;
        self.rejected += o.rejected;
        self.rejected_gray += o.rejected_gray;
        self.untagged_failed += o.untagged_failed;
        self.gray_failed += o.gray_failed;
        self.untagged_ok += o.untagged_ok;
        self.canary_calls += o.canary_calls;
        for (k, v) in o.user_sides {
            *self.user_sides.entry(k).or_default() |= v;
        }
        self.call_ns.extend(o.call_ns);
        self.reject_ns.extend(o.reject_ns);
    }
}

/// One check of the report.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    /// What is checked.
    pub name: String,
    /// What was measured.
    pub detail: String,
    /// Whether it holds.
    pub pass: bool,
}

/// Latency percentiles in microseconds.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Latency {
    /// Samples.
    pub samples: usize,
    /// Median.
    pub p50_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
}

impl Latency {
    /// The percentiles of `ns` (nanoseconds).
    pub fn of(mut ns: Vec<u64>) -> Self {
        if ns.is_empty() {
            return Latency::default();
        }
        ns.sort_unstable();
        let at = |q: usize| ns[(ns.len() * q / 100).min(ns.len() - 1)] as f64 / 1000.0;
        Latency {
            samples: ns.len(),
            p50_us: at(50),
            p99_us: at(99),
        }
    }
}

/// The demo's report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The providers, as registered.
    pub providers: Vec<String>,
    /// The phases.
    pub phases: Vec<PhaseStats>,
    /// Whole call time through the layer (route + balance + gRPC round trip, failovers
    /// included), answered calls.
    pub calls: Latency,
    /// Time to the breaker's refusal, calls refused before any network attempt.
    pub rejections: Latency,
    /// Calls per second over all phases.
    pub throughput: f64,
    /// Time from writing the rule file to the file watcher's applied report (debounce
    /// included).
    pub reload_ms: f64,
    /// Breaker trips in total.
    pub breaker_trips: u64,
    /// Providers degraded by the health tracker.
    pub degradations: u64,
    /// The canary plugin library in the chain, if it was built.
    pub plugin: Option<String>,
    /// Users seen on untagged calls.
    pub users: u64,
    /// Users answered only by canary providers.
    pub canary_users: u64,
    /// Users answered by both canary and stable providers.
    pub mixed_users: u64,
    /// The chain's Prometheus metrics at the end, non-zero series only (one per line, as
    /// served, without the `chain` label).
    pub metrics: Vec<String>,
    /// The checks.
    pub checks: Vec<Check>,
    /// True when every check passed.
    pub pass: bool,
}

fn bar(share: f64, width: usize) -> String {
    "█".repeat((share * width as f64).round() as usize)
}

impl Report {
    /// The human-readable report.
    pub fn render(&self) -> String {
        let mut s = String::new();
        s.push_str(&format!(
            "routechain demo — {} gRPC providers on 127.0.0.1 (beijing: mt, zf; shanghai: sh), {} calls\n",
            self.providers.len(),
            self.phases.iter().map(|p| p.calls).sum::<u64>()
        ));
        for (i, p) in self.phases.iter().enumerate() {
            let table = p
                .route_table
                .iter()
                .map(|(k, v)| format!("{k}: {v}"))
                .collect::<Vec<_>>()
                .join(", ");
            s.push_str(&format!(
                "\nPhase {} — {}: {}\n  {} calls in {:.2} s, {} answered; beijing route table {{{table}}}\n",
                i + 1,
                p.name,
                p.action,
                p.calls,
                p.seconds,
                p.ok
            ));
            let n: u64 = p.idc_calls.values().sum();
            s.push_str("  IDC   untagged calls   share   configured\n");
            let mut idcs: Vec<String> = vec!["mt".into(), "zf".into(), "sh".into()];
            for k in p.idc_calls.keys() {
                if !idcs.contains(k) {
                    idcs.push(k.clone());
                }
            }
            for idc in idcs {
                let got = *p.idc_calls.get(&idc).unwrap_or(&0);
                let share = got as f64 / n.max(1) as f64;
                s.push_str(&format!(
                    "  {idc:<4} {got:>15}  {:>5.1}%   {:>5}%  {}\n",
                    share * 100.0,
                    p.route_table.get(&idc).copied().unwrap_or(0),
                    bar(share, 30)
                ));
            }
            s.push_str(&format!(
                "  gray calls: {} on gray, {} on stable   plugin canary calls: {}   reindex calls: {}   failovers: {}   failed attempts: {}   refused by breaker: {}   breaker trips: {}\n",
                p.gray_on_gray, p.gray_on_untagged, p.canary_calls, p.reindex_ok, p.failovers, p.failed_attempts, p.rejected, p.breaker_trips
            ));
            if !p.failed.is_empty() {
                let f = p
                    .failed
                    .iter()
                    .map(|(k, v)| format!("{k}: {v}"))
                    .collect::<Vec<_>>()
                    .join(", ");
                s.push_str(&format!("  unanswered: {f}\n"));
            }
        }
        s.push_str(&format!(
            "\nCalls (through the layer: route + balance + gRPC round trip, failovers included): p50 {:.0} µs, p99 {:.0} µs\n",
            self.calls.p50_us, self.calls.p99_us
        ));
        if self.rejections.samples > 0 {
            s.push_str(&format!(
                "Breaker refusals before any network attempt: {} calls, p50 {:.1} µs, p99 {:.1} µs\n",
                self.rejections.samples, self.rejections.p50_us, self.rejections.p99_us
            ));
        }
        s.push_str(&format!(
            "Throughput: {:.0} calls/s; providers degraded by health: {}; breaker trips: {}; rule file written → applied by the watcher: {:.0} ms\n",
            self.throughput, self.degradations, self.breaker_trips, self.reload_ms
        ));
        match &self.plugin {
            Some(p) => s.push_str(&format!(
                "Plugin router: canary ({p}): {} of {} users on the canary providers\n",
                self.canary_users, self.users
            )),
            None => s.push_str(
                "Plugin router: not in the chain (build it with `cargo build --release -p router-canary` to include it)\n",
            ),
        }
        if !self.metrics.is_empty() {
            s.push_str("\nMetrics (as `routechain watch --metrics` serves them, docs/metrics.md; non-zero series)\n");
            for line in &self.metrics {
                s.push_str(&format!("  {line}\n"));
            }
        }
        s.push_str("\nChecks\n");
        for c in &self.checks {
            s.push_str(&format!(
                "  {} {} — {}\n",
                if c.pass { "PASS" } else { "FAIL" },
                c.name,
                c.detail
            ));
        }
        let passed = self.checks.iter().filter(|c| c.pass).count();
        s.push_str(&format!(
            "\nRESULT: {} ({passed}/{} checks passed)\n",
            if self.pass { "PASS" } else { "FAIL" },
            self.checks.len()
        ));
        s
    }
}
