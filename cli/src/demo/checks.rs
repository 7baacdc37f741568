//! The demo's checks: each a claim about routing, failover or health, measured from the
//! replies (any failing check makes the demo exit 1).

use super::report::{Check, PhaseStats, Report};
use super::{Options, PLUGIN_PERCENT};

/// Binomial tolerance in percentage points: 1 pp plus 4.5 standard errors.
pub fn tolerance_pp(p: f64, n: u64) -> f64 {
    if n == 0 {
        return 100.0;
    }
    1.0 + 4.5 * (p * (1.0 - p) / n as f64).sqrt() * 100.0
}

fn idc_check(phase: &PhaseStats) -> Check {
    let n: u64 = phase.idc_calls.values().sum();
    let mut worst = Vec::new();
    let mut pass = n > 0;
    let mut idcs: Vec<&str> = phase.route_table.keys().map(String::as_str).collect();
    for idc in phase.idc_calls.keys() {
        if !idcs.contains(&idc.as_str()) {
            idcs.push(idc);
        }
    }
    for idc in idcs {
        let expected = *phase.route_table.get(idc).unwrap_or(&0) as f64 / 100.0;
        let got = *phase.idc_calls.get(idc).unwrap_or(&0) as f64 / n.max(1) as f64;
        let tol = tolerance_pp(expected, n);
        let off = (got - expected).abs() * 100.0;
        pass &= off <= tol;
        worst.push(format!(
            "{idc} {:.1}% (configured {:.0}%, ±{tol:.1}pp)",
            got * 100.0,
            expected * 100.0
        ));
    }
    Check {
        name: format!("IDC split follows the route table ({})", phase.name),
        detail: format!("{n} untagged calls: {}", worst.join(", ")),
        pass,
    }
}

/// Every check of the report.
pub fn checks(
    r: &Report,
    all: &PhaseStats,
    killed_degraded: bool,
    health: routechain::balance::HealthConfig,
    opts: &Options,
) -> Vec<Check> {
    let threshold = health.failure_threshold;
    // A run whose last three phases outlast the cool-down lets the dead provider back in on
    // probation once per cool-down (one attempt each, which fails and degrades it again).
    let since_kill: f64 = r.phases[2..].iter().map(|p| p.seconds).sum();
    let probations = (since_kill / health.cooldown.as_secs_f64().max(1e-3)).floor() as u64;
    let mut c = Vec::new();
    let check = |name: &str, detail: String, pass: bool| Check {
        name: name.to_string(),
        detail,
        pass,
    };
    c.push(idc_check(&r.phases[0]));
    c.push(idc_check(&r.phases[1]));
    c.push(check(
        "every call answered by its own group",
        format!("{} misrouted of {} answered", all.misrouted_group, all.ok),
        all.misrouted_group == 0 && all.ok > 0,
    ));
    c.push(check(
        "tag isolation: no untagged call on a gray provider",
        format!("{} untagged calls answered by gray", all.untagged_on_gray),
        all.untagged_on_gray == 0,
    ));
    let gray_before: u64 = r.phases[..3].iter().map(|p| p.gray_on_gray).sum();
    let gray_escaped: u64 = r.phases[..4].iter().map(|p| p.gray_on_untagged).sum();
    c.push(check(
        "gray calls reach only the gray canaries while they are registered",
        format!("{gray_before} gray calls on gray, {gray_escaped} on untagged"),
        gray_before > 0 && gray_escaped == 0,
    ));
    c.push(check(
        "condition: reindex runs only in zf",
        format!(
            "{} reindex calls, {} outside zf",
            all.reindex_ok, all.reindex_outside_zf
        ),
        all.reindex_ok > 0 && all.reindex_outside_zf == 0,
    ));
    c.push(check(
        "the provider marked degraded=true gets no call",
        format!("{} calls", all.degraded_param_hits),
        all.degraded_param_hits == 0,
    ));
    c.push(check(
        "every reply answers its own call",
        format!("{} mismatched", all.id_mismatch),
        all.id_mismatch == 0,
    ));
    let p3 = &r.phases[2];
    c.push(check(
        "failover: calls to the killed provider are retried elsewhere",
        format!(
            "{} failovers, {} failed attempts, {} untagged calls unanswered",
            p3.failovers, p3.failed_attempts, p3.untagged_failed
        ),
        p3.failovers > 0 && p3.untagged_failed == 0,
    ));
    let bound = threshold as u64 + 2 * opts.concurrency as u64 + probations;
    c.push(check(
        "health: the killed provider is degraded after a few failures",
        format!(
            "{} attempts on it (bound {bound}: threshold {threshold} + in-flight); {} degradations in all",
            p3.attempts_on_killed, r.degradations
        ),
        p3.attempts_on_killed <= bound && r.degradations >= 1,
    ));
    let p4 = &r.phases[3];
    c.push(check(
        "breaker: gray calls fail fast once both canaries are degraded",
        format!(
            "{} trip(s), {} calls refused ({} gray), refusal p99 {:.0} µs",
            p4.breaker_trips, p4.rejected, p4.rejected_gray, r.rejections.p99_us
        ),
        p4.breaker_trips >= 1 && p4.rejected > 0 && p4.rejected == p4.rejected_gray,
    ));
    let p5 = &r.phases[4];
    c.push(check(
        "registry update: gray calls fall back to stable without the canaries",
        format!(
            "{} gray calls on untagged, {} on gray, {} unanswered",
            p5.gray_on_untagged, p5.gray_on_gray, p5.gray_failed
        ),
        p5.gray_on_untagged > 0 && p5.gray_on_gray == 0 && p5.gray_failed == 0,
    ));
    c.push(check(
        "health carried over by address: the dead provider stays out of the new list",
        format!(
            "degraded in the new snapshot: {killed_degraded}; {} attempts on it ({probations} probation(s) allowed)",
            p5.attempts_on_killed
        ),
        (killed_degraded || probations > 0) && p5.attempts_on_killed <= probations,
    ));
    if r.plugin.is_some() {
        let share = r.canary_users as f64 / r.users.max(1) as f64;
        let tol = tolerance_pp(PLUGIN_PERCENT / 100.0, r.users);
        c.push(check(
            "plugin canary: its share of users goes to the canary providers",
            format!(
                "{} of {} users ({:.1}%, configured {PLUGIN_PERCENT}%, ±{tol:.1}pp); {} untagged calls on canary providers",
                r.canary_users,
                r.users,
                share * 100.0,
                all.canary_calls
            ),
            r.users > 0 && (share * 100.0 - PLUGIN_PERCENT).abs() <= tol,
        ));
        c.push(check(
            "plugin canary: a user stays on one side",
            format!(
                "{} users answered by both canary and stable providers",
                r.mixed_users
            ),
            r.mixed_users == 0,
        ));
    }
    c.push(check(
        "every untagged call is answered",
        format!("{} unanswered", all.untagged_failed),
        all.untagged_failed == 0,
    ));
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tolerance_shrinks_with_samples() {
        assert!(tolerance_pp(0.9, 100) > tolerance_pp(0.9, 10_000));
        assert!((tolerance_pp(0.0, 50) - 1.0).abs() < 1e-9);
    }
}
