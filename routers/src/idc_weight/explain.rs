//! The IDC-weight router's explain trace: what step 1 dropped, the region and how the
//! target IDC was chosen, and the outcome, in words (written only when a trace is recorded).

use std::fmt;

use routechain_core::{Candidates, RouteContext};

use super::prepared::{PreparedIdcWeight, Strategy};
use super::route::Outcome;
use super::rule::{Idc, IdcWeightRule, ROUTE_TABLE_TOTAL};

/// IDC names, comma-separated, for explain traces.
struct Names<'a>(&'a [Idc]);

impl fmt::Display for Names<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(&d.name)?;
        }
        Ok(())
    }
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
    ) {
        let consumer = cx.consumer();
        let (local_region, local_idc) = Self::local_names(rule, consumer);
        let healthy = cx.scratch().count();
        if input > healthy {
            cx.explain(format_args!(
                "dropped {} degraded provider(s) (param `{}`=true or live health)",
                input - healthy,
                rule.degraded_param
            ));
        }
        match region {
            None => cx.explain(format_args!(
                "no region has a non-degraded candidate (local region {}, cross regions [{}])",
                local_region.unwrap_or("unknown"),
                CrossNames(rule)
            )),
            Some((r, true)) => cx.explain(format_args!("region {} (local)", self.regions.name(r))),
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
                    Names(known),
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

/// The cross regions' names, for explain traces.
struct CrossNames<'a>(&'a IdcWeightRule);

impl fmt::Display for CrossNames<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, &r) in self.0.cross_region.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(&self.0.regions[r].name)?;
        }
        Ok(())
    }
}
