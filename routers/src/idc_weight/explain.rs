//! The IDC-weight router's explain trace: what step 1 dropped, the region and how the
//! target IDC was chosen, and the outcome, in words (written only when a trace is recorded).

use std::fmt;

use routechain_core::weighted::{self, UNIT};
use routechain_core::{Candidates, RouteContext};

use super::health::effective_weight;
use super::prepared::{PreparedIdcWeight, Strategy};
use super::route::{Decision, Outcome, Panic};
use super::rule::{IdcWeightRule, ROUTE_TABLE_TOTAL};

/// Names, comma-separated, for explain traces.
fn names<'a>(names: impl Iterator<Item = &'a str>) -> String {
    names.collect::<Vec<_>>().join(", ")
}

impl PreparedIdcWeight {
    /// Writes the explain reason (only called when a trace is recorded).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn explain(
        &self,
        rule: &IdcWeightRule,
        cx: &mut RouteContext<'_>,
        candidates: &Candidates,
        input: usize,
        region: Option<(usize, bool)>,
        strategy: Option<Strategy>,
        outcome: Outcome,
        decision: &Decision,
    ) {
        let consumer = cx.consumer();
        let (local_region, local_idc) = Self::local_names(rule, consumer);
        let healthy = cx.scratch().count();
        if input > healthy {
            cx.explain(format_args!(
                "{} {} degraded provider(s) (param `{}`=true or live health)",
                if decision.panic.is_some() {
                    "panic keeps"
                } else {
                    "dropped"
                },
                input - healthy,
                rule.degraded_param
            ));
        }
        if let Some(key) = &rule.options.hash_key {
            match decision.sticky {
                Some(_) => cx.explain(format_args!("draws sticky on {key}")),
                None => cx.explain(format_args!(
                    "hash_key {key} has no value in the request: random draws"
                )),
            }
        }
        if let (Some(opf), Some(_)) = (rule.options.overprovisioning, region) {
            self.explain_levels(rule, cx, opf, decision);
        }
        match region {
            None => cx.explain(format_args!(
                "no region has a non-degraded candidate (local region {}, cross regions [{}])",
                local_region.unwrap_or("unknown"),
                names(rule.cross_region.iter().map(|&r| &*rule.regions[r].name))
            )),
            Some((r, true)) => cx.explain(format_args!("region {} (local)", self.regions.name(r))),
            Some((r, false)) if decision.spill.is_some() => cx.explain(format_args!(
                "cross-region {} (spilled)",
                self.regions.name(r)
            )),
            Some((r, false)) => cx.explain(format_args!(
                "cross-region {}: local region {} has no non-degraded candidate",
                self.regions.name(r),
                local_region.unwrap_or("unknown")
            )),
        }
        match strategy {
            None => {}
            Some(Strategy::Table { draw, idc }) => cx.explain(format_args!(
                "route table of region {}: draw {draw} of 0..{ROUTE_TABLE_TOTAL} → idc {}",
                region.map(|(r, _)| self.regions.name(r)).unwrap_or(""),
                self.idc_name(idc)
            )),
            Some(Strategy::Spill { point, total, idc }) => {
                self.explain_spill(rule, cx, region, decision);
                cx.explain(format_args!(
                    "draw {} of 0..{} → idc {}",
                    Units(point),
                    Units(total),
                    self.idc_name(idc)
                ))
            }
            Some(Strategy::SpillNone) => {
                self.explain_spill(rule, cx, region, decision);
                cx.explain(format_args!(
                    "no idc of the route table has a healthy provider: whole region"
                ))
            }
            Some(Strategy::Selected { local, target }) => cx.explain(format_args!(
                "selected: local idc {} reads from idc {}",
                self.idc_name(local),
                self.idc_name(target)
            )),
            Some(Strategy::Local(k)) => cx.explain(format_args!("local idc {}", self.idc_name(k))),
            Some(Strategy::LocalMissing) => cx.explain(format_args!(
                "local idc {} (no provider has it)",
                local_idc.unwrap_or("")
            )),
            Some(Strategy::Hash(k)) => {
                let known = region
                    .and_then(|(r, _)| rule.regions.get(r))
                    .map(|r| &rule.idcs[r.idcs.clone()])
                    .unwrap_or(&[]);
                cx.explain(format_args!(
                    "caller idc unknown: hash of consumer host {:?} over [{}] → idc {}",
                    consumer.host(),
                    names(known.iter().map(|d| &*d.name)),
                    self.idc_name(k)
                ))
            }
            Some(Strategy::LocalWhole) => cx.explain(format_args!(
                "caller idc unknown and the region lists no idc: whole region"
            )),
            Some(Strategy::CrossWhole) => cx.explain(format_args!(
                "no route table in the cross region: whole region"
            )),
        }
        match decision.panic {
            None => {}
            Some(Panic::Region(c)) => cx.explain(format_args!(
                "panic: region {} has {} of {} provider(s) healthy ({}% < panic_threshold {}%): health ignored in the region",
                region.map(|(r, _)| self.regions.name(r)).unwrap_or(""),
                c.healthy,
                c.total,
                c.percent(),
                rule.options.panic_threshold
            )),
            Some(Panic::Idc(k, c)) => cx.explain(format_args!(
                "panic: idc {} has {} of {} provider(s) healthy ({}% < panic_threshold {}%): all its providers, degraded too",
                self.idc_name(k),
                c.healthy,
                c.total,
                c.percent(),
                rule.options.panic_threshold
            )),
        }
        let target = strategy
            .and_then(Strategy::target)
            .map(|t| t.map(|k| self.idc_name(k)).or(local_idc).unwrap_or(""));
        let kept = candidates.count();
        match outcome {
            Outcome::Target => match target {
                Some(t) => cx.explain(format_args!("kept {kept} provider(s) of idc {t}")),
                None => cx.explain(format_args!("kept {kept} provider(s) of the region")),
            },
            Outcome::ForcedEmpty => cx.explain(format_args!(
                "idc {} has no non-degraded candidate in the region; force=true: none left",
                target.unwrap_or("")
            )),
            Outcome::FallbackRegion => cx.explain(format_args!(
                "idc {} has no non-degraded candidate in the region; fallback: {kept} provider(s) of the region",
                target.unwrap_or("")
            )),
            Outcome::NoRegionForced => cx.explain(format_args!("force=true: none left")),
            Outcome::FallbackHealthy => cx.explain(format_args!(
                "fallback: every non-degraded candidate ({kept})"
            )),
            Outcome::FallbackInput => cx.explain(format_args!(
                "every candidate is degraded; fallback: the whole input ({kept})"
            )),
        }
    }
}

/// A weight in millionths, shown in weight units with one decimal (`35.0`).
struct Units(u64);

impl fmt::Display for Units {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tenths = (u128::from(self.0) * 10 + u128::from(UNIT) / 2) / u128::from(UNIT);
        write!(f, "{}.{}", tenths / 10, tenths % 10)
    }
}

/// A load in millionths of the calls, shown as a percentage with one decimal.
struct Percent(u64);

impl fmt::Display for Percent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}%", Units(self.0 * 100))
    }
}

/// The overprovisioning factor (thousandths) as written (`1.4`).
struct Factor(u32);

impl fmt::Display for Factor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = format!("{}.{:03}", self.0 / 1000, self.0 % 1000);
        f.write_str(s.trim_end_matches('0').trim_end_matches('.'))
    }
}

impl PreparedIdcWeight {
    /// The spillover levels: each region's healthy count and load.
    fn explain_levels(
        &self,
        rule: &IdcWeightRule,
        cx: &mut RouteContext<'_>,
        opf: u32,
        decision: &Decision,
    ) {
        let live = cx.degraded();
        let within = cx.within();
        let consumer = cx.consumer();
        let local = &if cx.consumer_is_prepared() {
            self.local
        } else {
            self.resolve(rule, consumer)
        };
        let levels = 1 + rule.cross_region.len();
        let scratch = cx.scratch();
        let available = |i: usize| {
            Self::level_region(rule, local, i)
                .filter(|&r| {
                    let set = self.regions.set(r);
                    scratch.any_with(|w| set.word(w))
                })
                .map_or(0, |r| {
                    let c = self.region_counts(r, live, within);
                    weighted::availability(opf, c.healthy.into(), c.total.into()).max(1)
                })
        };
        let mut text = format!("spillover levels (overprovisioning {}):", Factor(opf));
        weighted::priority_loads(levels, available, |i, load| {
            if let Some(r) = Self::level_region(rule, local, i) {
                let c = self.region_counts(r, live, within);
                text.push_str(&format!(
                    " {} {} of {} healthy → {},",
                    self.regions.name(r),
                    c.healthy,
                    c.total,
                    Percent(load)
                ));
            }
        });
        text.pop();
        if let Some((point, _)) = decision.spill {
            text.push_str(&format!("; draw {}", Percent(point)));
        }
        cx.explain(format_args!("{text}"));
    }

    /// The effective weights of the chosen region's route table.
    fn explain_spill(
        &self,
        rule: &IdcWeightRule,
        cx: &mut RouteContext<'_>,
        region: Option<(usize, bool)>,
        decision: &Decision,
    ) {
        let Some((r, _)) = region else { return };
        let (Some(table), Some(opf)) = (
            rule.regions.get(r).and_then(|r| r.route_table.as_ref()),
            rule.options.overprovisioning,
        ) else {
            return;
        };
        let live = cx.degraded();
        let within = cx.within();
        let region_panic = matches!(decision.panic, Some(Panic::Region(_)));
        let mut text = format!(
            "route table of region {} with spillover (overprovisioning {}){}: effective weights",
            self.regions.name(r),
            Factor(opf),
            if region_panic {
                " in panic, so the configured weights"
            } else {
                ""
            }
        );
        for i in 0..table.len() {
            let (k, w) = table.entry(i);
            let c = self.idc_counts(k, live, within);
            let eff = if region_panic {
                u64::from(w) * UNIT
            } else {
                effective_weight(w, c, opf)
            };
            text.push_str(&format!(
                " {} {w} × {} of {} healthy → {},",
                self.idc_name(k),
                c.healthy,
                c.total,
                Units(eff)
            ));
        }
        text.pop();
        cx.explain(format_args!("{text}"));
    }
}
