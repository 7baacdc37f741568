//! Live health per IDC and per region for the IDC-weight router's `spillover` and
//! `panic_threshold`: how many providers each has and how many are healthy, read per call in
//! O(1) per IDC.
//!
//! Prepared per snapshot: each IDC's and region's provider count (`total`) and the count not
//! degraded by the `degraded_param` (`usable`). Live health comes from the chain's
//! [`DegradedSet`]: when the prepared router is attached to a chain state
//! ([`routechain_core::PreparedRouter::attach`]) it registers two [`DegradedTally`]s, per
//! IDC and per region, counting the live-degraded providers that the param does not already
//! count; the set's `mark`/`clear` keep them (O(1) per flip, per tally). So per call,
//! `healthy = usable − live` is two loads per IDC or region, no scan.
//!
//! When a call's degraded set is not the attached one (a host driving the prepared router by
//! hand with another set), the count falls back to a word scan of that IDC's or region's
//! set (O(providers / 64)), correct but slower; with no provider live-degraded it is 0
//! without a scan.
//!
//! Totals are over the whole snapshot, not the call's candidates: capacity belongs to the
//! IDC's fleet, and counting the candidates would need a scan per call. When the chain
//! chose one of several registries for the call ([`routechain_core::RouteContext::within`]),
//! the fleet is that registry's providers: the counts are a word scan within them, so the
//! call routes as over that registry's own list.

use std::sync::{Arc, OnceLock, Weak};

use routechain_core::weighted;
use routechain_core::{BitSet, DegradedSet, DegradedTally, ProviderSet};

/// Provider counts of one IDC or region: all of them and the healthy ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Counts {
    /// Providers not degraded (param or live).
    pub healthy: u32,
    /// Providers.
    pub total: u32,
}

impl Counts {
    /// The healthy share in percent, rounded down (for traces).
    pub fn percent(self) -> u64 {
        if self.total == 0 {
            0
        } else {
            u64::from(self.healthy) * 100 / u64::from(self.total)
        }
    }
}

/// One grouping (IDCs or regions): the group of each provider, and per group its totals.
#[derive(Debug)]
struct Grouping {
    /// Provider → group, or [`DegradedTally::NONE`] (no group).
    group: Box<[u32]>,
    total: Box<[u32]>,
    usable: Box<[u32]>,
}

impl Grouping {
    /// The counts of `group` (each provider's group `< groups`, or
    /// [`DegradedTally::NONE`]).
    fn new(groups: usize, group: Box<[u32]>, param_degraded: &BitSet) -> Self {
        let mut total = vec![0u32; groups];
        let mut usable = vec![0u32; groups];
        for (i, &g) in group.iter().enumerate() {
            if let Some(t) = total.get_mut(g as usize) {
                *t += 1;
                if !param_degraded.contains(i) {
                    usable[g as usize] += 1;
                }
            }
        }
        Grouping {
            group,
            total: total.into_boxed_slice(),
            usable: usable.into_boxed_slice(),
        }
    }

    /// The tally's table: each provider's group, [`DegradedTally::NONE`] for a provider the
    /// param degrades (the tally counts only providers the param does not already count).
    fn tally_groups(&self, param_degraded: &BitSet) -> Box<[u32]> {
        self.group
            .iter()
            .enumerate()
            .map(|(i, &g)| {
                if param_degraded.contains(i) {
                    DegradedTally::NONE
                } else {
                    g
                }
            })
            .collect()
    }
}

/// The tallies registered with one degraded set.
#[derive(Debug)]
struct Attached {
    set: Weak<DegradedSet>,
    idcs: Arc<DegradedTally>,
    regions: Arc<DegradedTally>,
}

/// Per-IDC and per-region provider counts with live health (see the module docs).
#[derive(Debug)]
pub(crate) struct Health {
    idcs: Grouping,
    regions: Grouping,
    attached: OnceLock<Attached>,
}

impl Health {
    /// Counts for a snapshot: `idc_of[i]` / `region_of[i]` are provider `i`'s prepared IDC
    /// and region indexes (`< idcs` / `< regions`, or [`DegradedTally::NONE`]),
    /// `param_degraded` the providers the degraded param marks.
    pub fn new(
        idcs: usize,
        idc_of: Box<[u32]>,
        regions: usize,
        region_of: Box<[u32]>,
        param_degraded: &BitSet,
    ) -> Self {
        Health {
            idcs: Grouping::new(idcs, idc_of, param_degraded),
            regions: Grouping::new(regions, region_of, param_degraded),
            attached: OnceLock::new(),
        }
    }

    /// Each provider's IDC and region (what [`Health::new`] was given): what a preparation
    /// carried over a provider edit starts from.
    pub fn groups(&self) -> (&[u32], &[u32]) {
        (&self.idcs.group, &self.regions.group)
    }

    /// Registers the tallies with `set` (once; a later call with another set is ignored and
    /// that set is read by scanning); `param_degraded` are the providers the degraded param
    /// marks, which the tallies do not count.
    pub fn attach(&self, set: &Arc<DegradedSet>, param_degraded: &BitSet) {
        self.attached.get_or_init(|| Attached {
            set: Arc::downgrade(set),
            idcs: set.tally(
                self.idcs.tally_groups(param_degraded),
                self.idcs.total.len(),
            ),
            regions: set.tally(
                self.regions.tally_groups(param_degraded),
                self.regions.total.len(),
            ),
        });
    }

    /// The counts as one call sees them: the tallies are looked up once per call (they are
    /// used when `live` is the attached set), within the chosen registry's providers when
    /// the chain chose one.
    #[inline]
    pub fn view<'a>(&'a self, live: &'a DegradedSet, within: Option<&'a BitSet>) -> HealthView<'a> {
        HealthView {
            health: self,
            live,
            within,
            tallies: self
                .attached
                .get()
                .filter(|a| std::ptr::eq(a.set.as_ptr(), live)),
        }
    }
}

/// [`Health`] for one call's live degraded set.
#[derive(Clone, Copy)]
pub(crate) struct HealthView<'a> {
    health: &'a Health,
    live: &'a DegradedSet,
    within: Option<&'a BitSet>,
    tallies: Option<&'a Attached>,
}

impl HealthView<'_> {
    /// IDC `k`'s counts; `set` is the IDC's providers (for the fallback scan) and `param`
    /// the param-degraded set.
    #[inline]
    pub fn idc(&self, k: usize, set: &ProviderSet, param: &BitSet) -> Counts {
        if let Some(within) = self.within {
            return counts_within(within, self.live, set, param);
        }
        let tally = self.tallies.map(|a| &*a.idcs);
        counts(&self.health.idcs, k, self.live, tally, set, param)
    }

    /// Region `r`'s counts (see [`HealthView::idc`]).
    #[inline]
    pub fn region(&self, r: usize, set: &ProviderSet, param: &BitSet) -> Counts {
        if let Some(within) = self.within {
            return counts_within(within, self.live, set, param);
        }
        let tally = self.tallies.map(|a| &*a.regions);
        counts(&self.health.regions, r, self.live, tally, set, param)
    }
}

/// The counts of `set`'s providers within `within`: a scan of their words.
fn counts_within(within: &BitSet, live: &DegradedSet, set: &ProviderSet, param: &BitSet) -> Counts {
    let (mut total, mut healthy) = (0u32, 0u32);
    for (w, &inside) in within.words().iter().enumerate() {
        let members = set.word(w) & inside;
        let usable = members & !param.words().get(w).copied().unwrap_or(0);
        total += members.count_ones();
        healthy += (usable & !live.word(w)).count_ones();
    }
    Counts { healthy, total }
}

#[inline]
fn counts(
    grouping: &Grouping,
    g: usize,
    live: &DegradedSet,
    tally: Option<&DegradedTally>,
    set: &ProviderSet,
    param: &BitSet,
) -> Counts {
    let total = grouping.total.get(g).copied().unwrap_or(0);
    let usable = grouping.usable.get(g).copied().unwrap_or(0);
    let degraded = match tally {
        Some(t) => t.count(g),
        None if !live.any() => 0,
        // Not the attached set: count by scanning this group's words.
        None => (0..live.len().div_ceil(64))
            .map(|w| {
                (set.word(w) & live.word(w) & !param.words().get(w).copied().unwrap_or(0))
                    .count_ones()
            })
            .sum(),
    };
    Counts {
        healthy: usable.saturating_sub(degraded),
        total,
    }
}

/// The spillover settings of a rule: the overprovisioning factor in thousandths.
pub(crate) type Overprovisioning = u32;

/// An IDC's weight after health: `weight × min(1, overprovisioning × healthy / total)` in
/// weight millionths ([`weighted::effective_weight`]).
#[inline]
pub(crate) fn effective_weight(weight: u32, counts: Counts, opf: Overprovisioning) -> u64 {
    weighted::effective_weight(
        u64::from(weight),
        weighted::availability(opf, u64::from(counts.healthy), u64::from(counts.total)),
    )
}

/// A second, independent hash from a sticky hash (for the IDC draw after the region draw,
/// so that users spilled to another region do not all sit at one end of its IDC split).
#[inline]
pub(crate) fn rehash(h: u64) -> u64 {
    routechain_core::mix64(h ^ 0x9e37_79b9_7f4a_7c15)
}

#[cfg(test)]
mod tests {
    use super::*;
    use routechain_core::weighted::UNIT;

    fn health(n: usize, param: &[usize]) -> (Health, BitSet, [ProviderSet; 2]) {
        // Providers 0..n/2 in IDC 0 (region 0), the rest in IDC 1 (region 0); the last has
        // no IDC.
        let idc_of: Box<[u32]> = (0..n)
            .map(|i| {
                if i == n - 1 {
                    DegradedTally::NONE
                } else {
                    u32::from(i >= n / 2)
                }
            })
            .collect();
        let region_of = vec![0; n].into_boxed_slice();
        let param = BitSet::from_indexes(n, param.iter().copied());
        let sets = [
            ProviderSet::from_bitset(BitSet::from_fn(n, |i| idc_of[i] == 0)),
            ProviderSet::from_bitset(BitSet::from_fn(n, |i| idc_of[i] == 1)),
        ];
        (Health::new(2, idc_of, 1, region_of, &param), param, sets)
    }

    #[test]
    fn counts_follow_live_health_with_and_without_the_tally() {
        let (h, param, sets) = health(200, &[0, 1, 150]);
        let attached = Arc::new(DegradedSet::new(200));
        let other = DegradedSet::new(200);
        h.attach(&attached, &param);
        for set in [&*attached, &other] {
            assert_eq!(
                h.view(set, None).idc(0, &sets[0], &param),
                Counts {
                    healthy: 98,
                    total: 100
                }
            );
            // Provider 1 is param-degraded already: marking it live changes nothing.
            set.mark(1);
            set.mark(2);
            set.mark(3);
            set.mark(120);
            set.mark(199); // no IDC
            assert_eq!(
                h.view(set, None).idc(0, &sets[0], &param),
                Counts {
                    healthy: 96,
                    total: 100
                }
            );
            assert_eq!(
                h.view(set, None).idc(1, &sets[1], &param),
                Counts {
                    healthy: 97,
                    total: 99
                }
            );
            let all = ProviderSet::from_bitset(BitSet::full(200));
            assert_eq!(
                h.view(set, None).region(0, &all, &param),
                Counts {
                    healthy: 193,
                    total: 200
                }
            );
            set.clear(2);
            assert_eq!(
                h.view(set, None).idc(0, &sets[0], &param),
                Counts {
                    healthy: 97,
                    total: 100
                }
            );
        }
        // Within every provider (a registry listing them all): the same counts, by a scan.
        let everyone = BitSet::full(200);
        for (k, set) in sets.iter().enumerate() {
            assert_eq!(
                h.view(&attached, Some(&everyone)).idc(k, set, &param),
                h.view(&attached, None).idc(k, set, &param)
            );
        }
        // Within no provider: nothing.
        let none = BitSet::empty(200);
        assert_eq!(
            h.view(&attached, Some(&none)).idc(0, &sets[0], &param),
            Counts {
                healthy: 0,
                total: 0
            }
        );
        // Unknown groups count nothing.
        assert_eq!(h.view(&attached, None).idc(7, &sets[0], &param).total, 0);
    }

    #[test]
    fn effective_weights_over_a_table_of_healthy_shares() {
        // (healthy of 10, weight) → effective weight in weight millionths, factor 1.4.
        for (healthy, want) in [
            (10, 50 * UNIT),
            (8, 50 * UNIT),
            (7, 49 * UNIT),
            (5, 35 * UNIT),
            (3, 21 * UNIT),
            (1, 7 * UNIT),
            (0, 0),
        ] {
            let c = Counts { healthy, total: 10 };
            assert_eq!(effective_weight(50, c, 1400), want, "{healthy}/10");
        }
        assert_eq!(
            effective_weight(
                50,
                Counts {
                    healthy: 5,
                    total: 10
                },
                1000
            ),
            25 * UNIT
        );
        assert_eq!(
            Counts {
                healthy: 1,
                total: 3
            }
            .percent(),
            33
        );
    }

    #[test]
    fn rehash_is_stable_and_differs() {
        assert_eq!(rehash(42), rehash(42));
        assert_ne!(rehash(42), 42);
        assert_ne!(rehash(1), rehash(2));
    }
}
