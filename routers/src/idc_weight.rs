//! The IDC-weight router (`type: idc-weight`): per call, picks the region and the IDC
//! (datacenter) to call, by route table, failover switch, the caller's own IDC or a stable
//! hash, drops degraded providers, and falls back when the choice has no provider (seeds 000
//! and 001).
//!
//! Per call, exactly:
//! 1. Candidates = input minus degraded providers (param `degraded_param` = `true`, or
//!    marked in the live [`routechain_core::DegradedSet`] by the health tracker).
//! 2. Region: the first of [local region] + `cross_region` with a candidate; keep only its
//!    providers. None anywhere → step 5.
//! 3. Target IDC: the region's route table (one draw in `0..100` over cumulative weights);
//!    else, in the local region, `selected[local idc]`; else the local IDC; else (caller's
//!    IDC unknown) a stable hash of the consumer host over the region's known IDCs. In a
//!    cross region without a table, the whole region.
//! 4. Keep the candidates in the target IDC.
//! 5. Nothing left: `force: true` → empty; `force: false` → the candidates of step 2, or
//!    every non-degraded candidate, or (every candidate degraded) the whole input.
//!
//! Prepared per snapshot: region → bitset (a provider without the region param takes the
//! region its IDC is listed under), IDC → bitset, the degraded-param bitset, and the local
//! region/IDC decision for the prepared consumer. The route tables are cumulative weights
//! compiled with the rule. Per call: one copy of the candidates minus degraded into the
//! scratch bitset, a few word scans, at most one random draw; no allocation.

use std::fmt;
use std::sync::Arc;

use routechain_core::{
    BitSet, Candidates, Evaluation, PrepareContext, PrepareError, PreparedRouter, RouteContext,
    Router, RouterFactory, RouterSpec, RuleError, Url, stable_hash,
};
use routechain_rules::schema::idc_weight::{
    Idc, IdcWeightRule, ROUTE_TABLE_TOTAL, RawIdcWeightRule,
};

/// The default priority of the IDC-weight router: last of the built-in filters, after
/// Dubbo's tag (100) and condition (140/150) routers and the group router (160).
pub const IDC_WEIGHT_PRIORITY: i32 = 170;

/// Builds IDC-weight routers from chain entries (`type: idc-weight`). The rule is required
/// (its `idcs` field is).
#[derive(Debug, Clone, Copy, Default)]
pub struct IdcWeightFactory;

impl RouterFactory for IdcWeightFactory {
    fn default_priority(&self, _spec: &RouterSpec<'_>) -> i32 {
        IDC_WEIGHT_PRIORITY
    }

    fn build(&self, spec: &RouterSpec<'_>) -> Result<Arc<dyn Router>, Vec<RuleError>> {
        let Some(doc) = &spec.rule else {
            return Err(vec![RuleError::new(
                spec.entry.path.clone(),
                "an `idc-weight` router needs a rule (`rule` or `rule_file`) with at least \
                 `idcs`, the known IDCs of each region, e.g. `idcs: {beijing: [mt, zf]}`",
            )]);
        };
        Ok(Arc::new(IdcWeightRouter::new(RawIdcWeightRule::parse(
            doc,
        )?)))
    }
}

/// The compiled IDC-weight router.
#[derive(Debug, Clone)]
pub struct IdcWeightRouter {
    rule: Arc<IdcWeightRule>,
}

impl IdcWeightRouter {
    /// A router for `rule`.
    pub fn new(rule: IdcWeightRule) -> Self {
        IdcWeightRouter {
            rule: Arc::new(rule),
        }
    }
    /// The rule.
    pub fn rule(&self) -> &IdcWeightRule {
        &self.rule
    }
}

impl Router for IdcWeightRouter {
    fn name(&self) -> &str {
        "idc-weight"
    }

    fn prepare(&self, cx: &PrepareContext<'_>) -> Result<Arc<dyn PreparedRouter>, PrepareError> {
        let rule = &*self.rule;
        let n = cx.snapshot.len();
        // The rule's regions and IDCs come first, at the rule's indexes.
        let mut regions: Vec<(Box<str>, BitSet)> = rule
            .regions
            .iter()
            .map(|r| (r.name.clone(), BitSet::empty(n)))
            .collect();
        let mut idcs: Vec<(Box<str>, BitSet)> = rule
            .idcs
            .iter()
            .map(|d| (d.name.clone(), BitSet::empty(n)))
            .collect();
        let mut degraded = BitSet::empty(n);
        for (i, p) in cx.snapshot.providers().iter().enumerate() {
            if p.get(&rule.degraded_param)
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
            {
                degraded.insert(i);
            }
            let idc = param(p, &rule.idc_param).map(|v| find_or_push(&mut idcs, v, n));
            if let Some(k) = idc {
                idcs[k].1.insert(i);
            }
            let region = match param(p, &rule.region_param) {
                Some(v) => Some(find_or_push(&mut regions, v, n)),
                // No region param: the region the rule lists the provider's IDC under.
                None => idc
                    .filter(|&k| k < rule.idcs.len())
                    .map(|k| rule.idcs[k].region),
            };
            if let Some(r) = region {
                regions[r].1.insert(i);
            }
        }
        let mut prepared = PreparedIdcWeight {
            rule: self.rule.clone(),
            degraded,
            regions,
            idcs,
            local: Local {
                region: None,
                target: LocalTarget::Unknown,
            },
        };
        prepared.local = prepared.resolve(cx.consumer);
        tracing::debug!(
            providers = n,
            regions = prepared.regions.len(),
            idcs = prepared.idcs.len(),
            degraded = prepared.degraded.count(),
            "idc-weight router prepared"
        );
        Ok(Arc::new(prepared))
    }
}

/// A URL's value for `key`, trimmed; `None` when absent or blank.
fn param<'u>(url: &'u Url, key: &str) -> Option<&'u str> {
    url.get(key).map(str::trim).filter(|v| !v.is_empty())
}

/// The index of `name` (case-insensitive) in `list`, adding it (lower-cased, empty set).
fn find_or_push(list: &mut Vec<(Box<str>, BitSet)>, name: &str, n: usize) -> usize {
    match find(list, name) {
        Some(i) => i,
        None => {
            list.push((name.to_ascii_lowercase().into(), BitSet::empty(n)));
            list.len() - 1
        }
    }
}

/// The index of `name` (case-insensitive) in `list`: a short scan, no allocation.
fn find(list: &[(Box<str>, BitSet)], name: &str) -> Option<usize> {
    list.iter().position(|(k, _)| k.eq_ignore_ascii_case(name))
}

/// Word `w` of `set` (0 past its end).
#[inline]
fn word(set: &BitSet, w: usize) -> u64 {
    set.words().get(w).copied().unwrap_or(0)
}

/// The caller's side of the decision: its region and what its IDC implies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Local {
    /// The local region (index into the prepared regions), if it names one that exists.
    region: Option<usize>,
    /// What to target when the local region is chosen and has no route table.
    target: LocalTarget,
}

/// The local region's target IDC when no route table applies (indexes into the prepared
/// IDCs; the rule's IDCs have the same indexes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LocalTarget {
    /// `selected[local]`.
    Selected { local: usize, target: usize },
    /// The local IDC itself.
    Idc(usize),
    /// The caller names an IDC that neither the rule nor any provider has.
    Missing,
    /// The caller's IDC is unknown: the stable hash of its host picked this IDC.
    Hash(usize),
    /// The caller's IDC is unknown and its region lists no IDC to hash over.
    Unknown,
}

/// The IDC-weight router prepared for one snapshot.
struct PreparedIdcWeight {
    rule: Arc<IdcWeightRule>,
    /// Providers whose `degraded_param` is `true`.
    degraded: BitSet,
    /// Region (lower-cased) → providers; the rule's regions first, then others seen.
    regions: Vec<(Box<str>, BitSet)>,
    /// IDC (lower-cased) → providers; the rule's IDCs first, then others seen.
    idcs: Vec<(Box<str>, BitSet)>,
    /// The decision for the consumer the chain was prepared for.
    local: Local,
}

/// How step 3 chose the target.
#[derive(Debug, Clone, Copy)]
enum Strategy {
    /// The region's route table; the draw and the IDC it picked.
    Table { draw: u32, idc: usize },
    /// `selected[local]`.
    Selected { local: usize, target: usize },
    /// The local IDC.
    Local(usize),
    /// The local IDC, which no provider has.
    LocalMissing,
    /// The stable hash of the consumer host.
    Hash(usize),
    /// The whole local region (caller's IDC unknown, no known IDC to hash over).
    LocalWhole,
    /// A cross region without a route table: the whole region.
    CrossWhole,
}

impl Strategy {
    /// The target IDC, `Some(None)` for "an IDC no provider has", `None` for the whole region.
    fn target(self) -> Option<Option<usize>> {
        match self {
            Strategy::Table { idc, .. }
            | Strategy::Selected { target: idc, .. }
            | Strategy::Local(idc)
            | Strategy::Hash(idc) => Some(Some(idc)),
            Strategy::LocalMissing => Some(None),
            Strategy::LocalWhole | Strategy::CrossWhole => None,
        }
    }
}

/// What the call ended with.
#[derive(Debug, Clone, Copy)]
enum Outcome {
    /// Step 4 kept the target (or whole region).
    Target,
    /// The target had no candidate; force → empty.
    ForcedEmpty,
    /// The target had no candidate; fell back to the region's candidates.
    FallbackRegion,
    /// No region had a candidate; force → empty.
    NoRegionForced,
    /// No region had a candidate; fell back to every non-degraded candidate.
    FallbackHealthy,
    /// Every candidate is degraded; fell back to the whole input.
    FallbackInput,
}

impl PreparedIdcWeight {
    /// The local region and IDC names for `consumer`: the rule's `local`, else the consumer
    /// URL's params; a missing region is the region the rule lists the local IDC under.
    fn local_names<'s>(&'s self, consumer: &'s Url) -> (Option<&'s str>, Option<&'s str>) {
        let rule = &*self.rule;
        let idc = rule
            .local_idc
            .as_deref()
            .or_else(|| param(consumer, &rule.idc_param));
        let region = rule
            .local_region
            .as_deref()
            .or_else(|| param(consumer, &rule.region_param))
            .or_else(|| {
                idc.and_then(|d| rule.idc_index(d))
                    .map(|k| &*rule.regions[rule.idcs[k].region].name)
            });
        (region, idc)
    }

    /// The local decision for `consumer` (no allocation).
    fn resolve(&self, consumer: &Url) -> Local {
        let rule = &*self.rule;
        let (region_name, idc_name) = self.local_names(consumer);
        let region = region_name.and_then(|r| find(&self.regions, r));
        let target = match idc_name {
            Some(d) => match find(&self.idcs, d) {
                Some(k) => match rule.selected_for(k) {
                    Some(t) => LocalTarget::Selected {
                        local: k,
                        target: t,
                    },
                    None => LocalTarget::Idc(k),
                },
                None => LocalTarget::Missing,
            },
            None => match region.and_then(|r| rule.regions.get(r)) {
                Some(r) if !r.idcs.is_empty() => {
                    let h = stable_hash(consumer.host().as_bytes()) % r.idcs.len() as u64;
                    LocalTarget::Hash(r.idcs.start + h as usize)
                }
                _ => LocalTarget::Unknown,
            },
        };
        Local { region, target }
    }

    fn idc_name(&self, k: usize) -> &str {
        &self.idcs[k].0
    }
}

impl PreparedRouter for PreparedIdcWeight {
    fn route(&self, cx: &mut RouteContext<'_>, candidates: &mut Candidates) -> Evaluation {
        let rule = &*self.rule;
        let n = candidates.len();
        let live = cx.degraded();
        let input = if cx.explaining() {
            candidates.count()
        } else {
            0
        };

        // Step 1: healthy = input minus degraded (param or live), kept in the scratch set.
        // The live set is read once here, so later steps agree with each other.
        {
            let healthy = cx.scratch();
            if healthy.len() != n {
                healthy.reset_full(n);
            }
            for (w, (h, c)) in healthy
                .words_mut()
                .iter_mut()
                .zip(candidates.words())
                .enumerate()
            {
                *h = c & !word(&self.degraded, w) & !live.word(w);
            }
        }

        let local_call;
        let local = if cx.consumer_is_prepared() {
            &self.local
        } else {
            local_call = self.resolve(cx.consumer());
            &local_call
        };

        // Step 2: the first region with a healthy candidate.
        let chosen = {
            let healthy: &BitSet = cx.scratch();
            let has = |r: usize| {
                let set = &self.regions[r].1;
                healthy.any_with(|w| word(set, w))
            };
            match local.region.filter(|&r| has(r)) {
                Some(r) => Some((r, true)),
                None => rule
                    .cross_region
                    .iter()
                    .copied()
                    .find(|&r| Some(r) != local.region && has(r))
                    .map(|r| (r, false)),
            }
        };

        let Some((region, is_local)) = chosen else {
            // Step 5 without a region.
            let outcome = if rule.force {
                candidates.clear();
                Outcome::NoRegionForced
            } else {
                let healthy: &BitSet = cx.scratch();
                if healthy.is_empty() {
                    Outcome::FallbackInput
                } else {
                    candidates.and_with(|w| word(healthy, w));
                    Outcome::FallbackHealthy
                }
            };
            if cx.explaining() {
                self.explain(cx, candidates, input, None, None, outcome);
            }
            return Evaluation::Runtime;
        };

        // Step 3: the target IDC.
        let table = rule
            .regions
            .get(region)
            .and_then(|r| r.route_table.as_ref());
        let strategy = if let Some(table) = table {
            let draw = cx.rng().below(u64::from(ROUTE_TABLE_TOTAL)) as u32;
            Strategy::Table {
                draw,
                idc: table.pick(draw),
            }
        } else if is_local {
            match local.target {
                LocalTarget::Selected { local, target } => Strategy::Selected { local, target },
                LocalTarget::Idc(k) => Strategy::Local(k),
                LocalTarget::Missing => Strategy::LocalMissing,
                LocalTarget::Hash(k) => Strategy::Hash(k),
                LocalTarget::Unknown => Strategy::LocalWhole,
            }
        } else {
            Strategy::CrossWhole
        };

        // Step 4: keep the target; step 5: fall back.
        let healthy: &BitSet = cx.scratch();
        let region_set = &self.regions[region].1;
        let outcome = match strategy.target() {
            None => {
                candidates.and_with(|w| word(healthy, w) & word(region_set, w));
                Outcome::Target
            }
            Some(target) => {
                let target_set = target.map(|k| &self.idcs[k].1);
                let hit = target_set
                    .is_some_and(|t| healthy.any_with(|w| word(region_set, w) & word(t, w)));
                match target_set {
                    Some(t) if hit => {
                        candidates
                            .and_with(|w| word(healthy, w) & word(region_set, w) & word(t, w));
                        Outcome::Target
                    }
                    _ if rule.force => {
                        candidates.clear();
                        Outcome::ForcedEmpty
                    }
                    _ => {
                        candidates.and_with(|w| word(healthy, w) & word(region_set, w));
                        Outcome::FallbackRegion
                    }
                }
            }
        };
        if cx.explaining() {
            self.explain(
                cx,
                candidates,
                input,
                Some((region, is_local)),
                Some(strategy),
                outcome,
            );
        }
        Evaluation::Runtime
    }
}

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
    fn explain(
        &self,
        cx: &mut RouteContext<'_>,
        candidates: &Candidates,
        input: usize,
        region: Option<(usize, bool)>,
        strategy: Option<Strategy>,
        outcome: Outcome,
    ) {
        let rule = &*self.rule;
        let consumer = cx.consumer();
        let (local_region, local_idc) = self.local_names(consumer);
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
            Some((r, true)) => cx.explain(format_args!("region {} (local)", self.regions[r].0)),
            Some((r, false)) => cx.explain(format_args!(
                "cross-region {}: local region {} has no non-degraded candidate",
                self.regions[r].0,
                local_region.unwrap_or("unknown")
            )),
        }
        match strategy {
            None => {}
            Some(Strategy::Table { draw, idc }) => cx.explain(format_args!(
                "route table of region {}: draw {draw} of 0..{ROUTE_TABLE_TOTAL} → idc {}",
                region.map(|(r, _)| &*self.regions[r].0).unwrap_or(""),
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
