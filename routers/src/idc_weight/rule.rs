//! The IDC-weight rule (`type: idc-weight`): the known IDCs (datacenters) of each region,
//! per-region route tables splitting traffic between IDCs by weight, a per-IDC failover
//! switch (`selected`), cross-region failover and degraded-provider filtering.
//!
//! ```yaml
//! region_param: region        # provider/consumer param naming the region (default "region")
//! idc_param: idc              # provider/consumer param naming the IDC (default "idc")
//! local: {region: beijing, idc: mt}    # optional; default: the consumer URL's params
//! idcs:                        # required: the known IDCs of each region
//!   beijing: [mt, zf]
//!   shanghai: [sh]
//! route_tables:                # optional, per region: integer weights summing to exactly 100
//!   beijing: {mt: 50, zf: 50}
//! selected: {mt: zf}           # optional, per local IDC: read from another IDC instead
//! cross_region: [shanghai]     # optional: further regions, in preference order
//! degraded_param: degraded     # providers whose param is "true" are dropped first
//! force: false                 # the chosen IDC has no provider → empty (true) or fallback
//! spillover: {overprovisioning: 1.4}   # optional: weights follow health (see `options`)
//! panic_threshold: 50          # optional: below 50% healthy, a set ignores health
//! hash_key: "attributes[user]" # optional: sticky draws
//! idc_cidrs: {mt: ["10.20.0.0/16"]}    # optional: IDC from the IP when the param is absent
//! ```
//!
//! Region and IDC names compare case-insensitively (ASCII); the compiled [`IdcWeightRule`]
//! holds them lower-cased. Validation reports every problem at once, each at its field path
//! (`route_tables.beijing.mt`) and naming the region and IDC.

use std::collections::BTreeMap;
use std::ops::Range;

use routechain_core::{FieldPath, RuleError};
use serde::Deserialize;
use serde_json::Value;

pub use super::options::{HealthOptions, RawSpillover};

/// The sum every route table's weights must have.
pub const ROUTE_TABLE_TOTAL: u32 = 100;

/// The IDC-weight rule as written.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawIdcWeightRule {
    /// Provider/consumer param naming the region. Default `region`.
    #[serde(default = "default_region_param")]
    pub region_param: String,
    /// Provider/consumer param naming the IDC. Default `idc`.
    #[serde(default = "default_idc_param")]
    pub idc_param: String,
    /// The caller's own region and IDC; each missing part comes from the consumer URL.
    pub local: Option<RawLocal>,
    /// Required: region → its known IDCs, in order (the order the hash fallback uses).
    pub idcs: BTreeMap<String, Vec<String>>,
    /// Region → IDC → integer weight; the weights of a region sum to exactly 100.
    pub route_tables: Option<BTreeMap<String, BTreeMap<String, Value>>>,
    /// Local IDC → the IDC of the same region it reads from instead.
    pub selected: Option<BTreeMap<String, String>>,
    /// Regions tried, in order, when the local region has no candidate.
    pub cross_region: Option<Vec<String>>,
    /// Providers whose param is `true` are dropped first. Default `degraded`.
    #[serde(default = "default_degraded_param")]
    pub degraded_param: String,
    /// When the chosen IDC has no provider: `true` → empty result, `false` (default) →
    /// fall back (the region, then every non-degraded provider, then the whole input).
    #[serde(default)]
    pub force: bool,
    /// Health-aware spillover (`{overprovisioning: 1.4}`); absent: an IDC keeps its whole
    /// weight however many of its providers are degraded.
    pub spillover: Option<RawSpillover>,
    /// Percent of healthy providers below which a set ignores health (absent or 0: never).
    pub panic_threshold: Option<Value>,
    /// Sticky draws on request values (`attributes[user]`, ..., or a list).
    pub hash_key: Option<Value>,
    /// IDC → subnets, for providers and consumers without the IDC param.
    pub idc_cidrs: Option<BTreeMap<String, Vec<String>>>,
}

/// The `local` field as written.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawLocal {
    /// The caller's region.
    pub region: Option<String>,
    /// The caller's IDC.
    pub idc: Option<String>,
}

fn default_region_param() -> String {
    "region".into()
}
fn default_idc_param() -> String {
    "idc".into()
}
fn default_degraded_param() -> String {
    "degraded".into()
}

/// A validated IDC-weight rule; names lower-cased, cross references resolved to indexes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdcWeightRule {
    /// Param naming the region.
    pub region_param: Box<str>,
    /// Param naming the IDC.
    pub idc_param: Box<str>,
    /// Param marking a provider degraded (`true`).
    pub degraded_param: Box<str>,
    /// The rule's `local.region`, lower-cased.
    pub local_region: Option<Box<str>>,
    /// The rule's `local.idc`, lower-cased.
    pub local_idc: Option<Box<str>>,
    /// The known regions (sorted by name).
    pub regions: Vec<Region>,
    /// Every known IDC, region by region in the order listed: region `r`'s IDCs are
    /// `idcs[regions[r].idcs]`.
    pub idcs: Vec<Idc>,
    /// `selected`: (local IDC index, IDC index read from instead), sorted.
    pub selected: Vec<(usize, usize)>,
    /// `cross_region`, as region indexes in preference order.
    pub cross_region: Vec<usize>,
    /// Empty result when the chosen IDC has no provider.
    pub force: bool,
    /// `spillover`, `panic_threshold`, `hash_key` and `idc_cidrs`.
    pub options: HealthOptions,
}

/// A known region.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Region {
    /// Its name, lower-cased.
    pub name: Box<str>,
    /// Its IDCs, as a range of [`IdcWeightRule::idcs`].
    pub idcs: Range<usize>,
    /// Its route table, if any.
    pub route_table: Option<RouteTable>,
}

/// A known IDC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Idc {
    /// Its name, lower-cased.
    pub name: Box<str>,
    /// Its region's index in [`IdcWeightRule::regions`].
    pub region: usize,
}

/// A route table as cumulative weights: entry `i` is chosen when
/// a draw `d` in `0..100` satisfies `cumulative[i-1] <= d < cumulative[i]`, so every IDC
/// gets exactly its weight's share of the draws. IDCs are in the order the region lists
/// them; zero-weight IDCs are left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteTable {
    entries: Box<[(usize, u32)]>,
}

impl RouteTable {
    /// A table from (IDC index, weight) pairs whose weights sum to 100.
    pub fn new(weights: impl IntoIterator<Item = (usize, u32)>) -> Option<Self> {
        let mut sum = 0u32;
        let mut entries = Vec::new();
        for (idc, w) in weights {
            if w == 0 {
                continue;
            }
            sum = sum.checked_add(w)?;
            entries.push((idc, sum));
        }
        (sum == ROUTE_TABLE_TOTAL).then(|| RouteTable {
            entries: entries.into_boxed_slice(),
        })
    }

    /// The number of IDCs with a non-zero weight.
    #[inline]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when no IDC has a weight (never for a validated table).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Entry `i`: (IDC index, weight), in the region's order.
    #[inline]
    pub fn entry(&self, i: usize) -> (usize, u32) {
        let previous = if i == 0 { 0 } else { self.entries[i - 1].1 };
        let (idc, cumulative) = self.entries[i];
        (idc, cumulative - previous)
    }

    /// The IDC index a draw in `0..100` selects (a short scan of the cumulative weights).
    #[inline]
    pub fn pick(&self, draw: u32) -> usize {
        for &(idc, cumulative) in self.entries.iter() {
            if draw < cumulative {
                return idc;
            }
        }
        // Unreachable for draws below 100: the last cumulative weight is 100.
        self.entries.last().map(|&(idc, _)| idc).unwrap_or(0)
    }
}

impl IdcWeightRule {
    /// The index of IDC `name` (case-insensitive).
    pub fn idc_index(&self, name: &str) -> Option<usize> {
        self.idcs
            .iter()
            .position(|i| i.name.eq_ignore_ascii_case(name))
    }
    /// The IDC that local IDC `idc` reads from per `selected`.
    pub fn selected_for(&self, idc: usize) -> Option<usize> {
        self.selected
            .binary_search_by_key(&idc, |&(from, _)| from)
            .ok()
            .map(|i| self.selected[i].1)
    }
}

impl IdcWeightRule {
    /// Compiles a rule as written; `base` is the rule document's path. Reports every
    /// problem at once, each at its field path.
    pub fn compile(raw: RawIdcWeightRule, base: &FieldPath) -> Result<Self, Vec<RuleError>> {
        let mut errors = Vec::new();
        let mut err = |path: FieldPath, message: String| errors.push(RuleError::new(path, message));
        raw.check_params(base, &mut err);
        let mut known = raw.known(base, &mut err);
        let (local_region, local_idc) = raw.check_local(base, &known, &mut err);
        let tables = raw.check_route_tables(base, &known, &mut err);
        let selected = raw.check_selected(base, &known, &mut err);
        let cross_region = raw.check_cross_region(base, &known, &mut err);
        let all_idcs = routechain_core::one_of(known.idcs.iter().map(|d| &*d.name));
        let options = HealthOptions::check(&raw, base, |n| known.idc_of(n), &all_idcs, &mut errors);
        if !errors.is_empty() {
            return Err(errors);
        }
        for (r, t) in tables {
            known.regions[r].route_table = Some(t);
        }
        Ok(IdcWeightRule {
            region_param: raw.region_param.trim().into(),
            idc_param: raw.idc_param.trim().into(),
            degraded_param: raw.degraded_param.trim().into(),
            local_region: local_region.map(|r| known.regions[r].name.clone()),
            local_idc: local_idc.map(|d| known.idcs[d].name.clone()),
            regions: known.regions,
            idcs: known.idcs,
            selected,
            cross_region,
            force: raw.force,
            options,
        })
    }
}

impl RawIdcWeightRule {
    fn check_params(&self, base: &FieldPath, err: &mut impl FnMut(FieldPath, String)) {
        for (field, value) in [
            ("region_param", &self.region_param),
            ("idc_param", &self.idc_param),
            ("degraded_param", &self.degraded_param),
        ] {
            if value.trim().is_empty() {
                err(
                    base.key(field),
                    format!("`{field}` must name a URL param, not be blank"),
                );
            }
        }
    }

    /// `idcs`: the known regions and IDCs.
    fn known(&self, base: &FieldPath, err: &mut impl FnMut(FieldPath, String)) -> Known<'_> {
        let mut regions: Vec<Region> = Vec::new();
        let mut idcs: Vec<Idc> = Vec::new();
        // Region key as written, per region index (for field paths).
        let mut region_keys: Vec<&str> = Vec::new();
        if self.idcs.is_empty() {
            err(
                base.key("idcs"),
                "`idcs` lists no region; give each region's known IDCs, e.g. `beijing: [mt, zf]`"
                    .into(),
            );
        }
        for (region_key, list) in &self.idcs {
            let path = base.key("idcs").key(region_key.as_str());
            let name = region_key.trim();
            if name.is_empty() {
                err(path.clone(), "blank region name in `idcs`".into());
                continue;
            }
            if let Some(r) = regions
                .iter()
                .position(|r| r.name.eq_ignore_ascii_case(name))
            {
                err(
                    path.clone(),
                    format!(
                        "region `{name}` is listed twice in `idcs` (as `{}` too; names compare case-insensitively)",
                        region_keys[r]
                    ),
                );
                continue;
            }
            if list.is_empty() {
                err(path.clone(), format!("region `{name}` lists no IDC"));
            }
            let region = regions.len();
            let start = idcs.len();
            for (i, idc) in list.iter().enumerate() {
                let idc_name = idc.trim();
                if idc_name.is_empty() {
                    err(path.index(i), format!("blank IDC name in region `{name}`"));
                    continue;
                }
                if let Some(other) = idcs.iter().find(|d| d.name.eq_ignore_ascii_case(idc_name)) {
                    let other_region = if other.region == region {
                        name
                    } else {
                        region_keys[other.region]
                    };
                    err(
                        path.index(i),
                        format!(
                            "IDC `{idc_name}` of region `{name}` is already listed under region `{other_region}`; an IDC belongs to one region (names compare case-insensitively)"
                        ),
                    );
                    continue;
                }
                idcs.push(Idc {
                    name: idc_name.to_ascii_lowercase().into(),
                    region,
                });
            }
            regions.push(Region {
                name: name.to_ascii_lowercase().into(),
                idcs: start..idcs.len(),
                route_table: None,
            });
            region_keys.push(region_key);
        }
        Known {
            regions,
            idcs,
            region_keys,
        }
    }

    /// `local`: (region index, IDC index).
    fn check_local(
        &self,
        base: &FieldPath,
        known: &Known<'_>,
        err: &mut impl FnMut(FieldPath, String),
    ) -> (Option<usize>, Option<usize>) {
        let mut local_region = None;
        let mut local_idc = None;
        if let Some(local) = &self.local {
            let path = base.key("local");
            if let Some(region) = &local.region {
                match known.region_of(region) {
                    Some(r) => local_region = Some(r),
                    None => err(
                        path.key("region"),
                        format!(
                            "local region `{}` is not a region of `idcs` (known: {})",
                            region.trim(),
                            known.region_list()
                        ),
                    ),
                }
            }
            if let Some(idc) = &local.idc {
                match known.idc_of(idc) {
                    Some(d) => {
                        local_idc = Some(d);
                        if let Some(r) = local_region
                            && known.idcs[d].region != r
                        {
                            err(
                                path.key("idc"),
                                format!(
                                    "local IDC `{}` belongs to region `{}`, not to the local region `{}`",
                                    idc.trim(),
                                    known.regions[known.idcs[d].region].name,
                                    known.regions[r].name
                                ),
                            );
                        }
                    }
                    None => err(
                        path.key("idc"),
                        format!("local IDC `{}` is not an IDC of `idcs`", idc.trim()),
                    ),
                }
            }
        }

        (local_region, local_idc)
    }

    /// `route_tables`: (region index, table).
    fn check_route_tables(
        &self,
        base: &FieldPath,
        known: &Known<'_>,
        err: &mut impl FnMut(FieldPath, String),
    ) -> Vec<(usize, RouteTable)> {
        let mut tables: Vec<(usize, RouteTable)> = Vec::new();
        for (region_key, table) in self.route_tables.iter().flatten() {
            let path = base.key("route_tables").key(region_key.as_str());
            let region = known.region_of(region_key);
            if region.is_none() {
                err(
                    path.clone(),
                    format!(
                        "route table of unknown region `{}` (known regions: {})",
                        region_key.trim(),
                        known.region_list()
                    ),
                );
            }
            let region_name = region_key.trim();
            let mut weights: Vec<(usize, u32)> = Vec::new();
            let mut seen: Vec<&str> = Vec::new();
            let mut sum: u64 = 0;
            let mut weights_ok = true;
            for (idc_key, weight) in table {
                let wpath = path.key(idc_key.as_str());
                let idc_name = idc_key.trim();
                let weight = match weight.as_u64() {
                    Some(w) => Some(w),
                    None => {
                        weights_ok = false;
                        let what = match weight {
                            Value::Number(n) if n.as_i64().is_some() => "is negative",
                            w if routechain_core::is_integer(w) => "is out of range",
                            Value::Number(_) => "is not an integer",
                            _ => "is not a number",
                        };
                        let shown = match weight {
                            Value::String(s) if routechain_core::is_integer(weight) => s.clone(),
                            w => w.to_string(),
                        };
                        err(
                            wpath.clone(),
                            format!(
                                "weight {shown} of IDC `{idc_name}` in the route table of region `{region_name}` {what}; weights are integers from 0 to {}",
                                u64::MAX
                            ),
                        );
                        None
                    }
                };
                sum = sum.saturating_add(weight.unwrap_or(0));
                if idc_name.is_empty() {
                    err(
                        wpath,
                        format!("blank IDC name in the route table of region `{region_name}`"),
                    );
                    continue;
                }
                if let Some(other) = seen.iter().find(|s| s.eq_ignore_ascii_case(idc_name)) {
                    err(
                        wpath,
                        format!(
                            "IDC `{idc_name}` appears twice in the route table of region `{region_name}` (as `{other}` too; names compare case-insensitively)"
                        ),
                    );
                    continue;
                }
                seen.push(idc_name);
                let Some(r) = region else { continue };
                match known.idc_of(idc_name) {
                    None => err(
                        wpath,
                        format!(
                            "IDC `{idc_name}` in the route table of region `{region_name}` is not a known IDC of that region (known: {})",
                            known.idc_list(r)
                        ),
                    ),
                    Some(d) if known.idcs[d].region != r => err(
                        wpath,
                        format!(
                            "IDC `{idc_name}` in the route table of region `{region_name}` belongs to region `{}`; a route table lists IDCs of its own region (known: {})",
                            known.regions[known.idcs[d].region].name,
                            known.idc_list(r)
                        ),
                    ),
                    Some(d) => {
                        if let Some(w) = weight {
                            // Weights above 100 make the sum wrong; cap for the table.
                            weights.push((d, u32::try_from(w).unwrap_or(u32::MAX)));
                        }
                    }
                }
            }
            if weights_ok && sum != u64::from(ROUTE_TABLE_TOTAL) {
                err(
                    path.clone(),
                    format!(
                        "the weights of the route table of region `{region_name}` sum to {sum}; they must sum to exactly {ROUTE_TABLE_TOTAL}"
                    ),
                );
            }
            if let Some(r) = region {
                // Order the table as the region lists its IDCs.
                weights.sort_by_key(|&(d, _)| d);
                if let Some(t) = RouteTable::new(weights) {
                    tables.push((r, t));
                }
            }
        }

        tables
    }

    /// `selected`: (local IDC index, selected IDC index), sorted.
    fn check_selected(
        &self,
        base: &FieldPath,
        known: &Known<'_>,
        err: &mut impl FnMut(FieldPath, String),
    ) -> Vec<(usize, usize)> {
        let mut selected = Vec::new();
        for (from_key, to) in self.selected.iter().flatten() {
            let path = base.key("selected").key(from_key.as_str());
            let from = known.idc_of(from_key);
            let to_idx = known.idc_of(to);
            if from_key.trim().is_empty() {
                err(path.clone(), "blank IDC name in `selected`".into());
            } else if from.is_none() {
                err(
                    path.clone(),
                    format!(
                        "`selected` names unknown local IDC `{}`; it must be an IDC of `idcs`",
                        from_key.trim()
                    ),
                );
            }
            if to.trim().is_empty() {
                err(
                    path.clone(),
                    format!("blank IDC selected for local IDC `{}`", from_key.trim()),
                );
            } else if to_idx.is_none() {
                err(
                    path.clone(),
                    format!(
                        "IDC `{}` selected for local IDC `{}` is not an IDC of `idcs`",
                        to.trim(),
                        from_key.trim()
                    ),
                );
            }
            if let (Some(f), Some(t)) = (from, to_idx) {
                if known.idcs[f].region != known.idcs[t].region {
                    err(
                        path.clone(),
                        format!(
                            "IDC `{}` selected for local IDC `{}` is in region `{}`, not in `{}`; `selected` switches between IDCs of one region (use `cross_region` across regions)",
                            to.trim(),
                            from_key.trim(),
                            known.regions[known.idcs[t].region].name,
                            known.regions[known.idcs[f].region].name
                        ),
                    );
                } else {
                    selected.push((f, t));
                }
            }
        }
        selected.sort_unstable();

        selected
    }

    /// `cross_region`: region indexes in preference order.
    fn check_cross_region(
        &self,
        base: &FieldPath,
        known: &Known<'_>,
        err: &mut impl FnMut(FieldPath, String),
    ) -> Vec<usize> {
        let mut cross_region: Vec<usize> = Vec::new();
        for (i, region) in self.cross_region.iter().flatten().enumerate() {
            let path = base.key("cross_region").index(i);
            match known.region_of(region) {
                None => err(
                    path,
                    format!(
                        "cross region `{}` is not a region of `idcs` (known: {})",
                        region.trim(),
                        known.region_list()
                    ),
                ),
                Some(r) if cross_region.contains(&r) => err(
                    path,
                    format!(
                        "region `{}` is listed twice in `cross_region`",
                        region.trim()
                    ),
                ),
                Some(r) => cross_region.push(r),
            }
        }

        cross_region
    }
}

/// The regions and IDCs of `idcs`, during validation.
struct Known<'a> {
    regions: Vec<Region>,
    idcs: Vec<Idc>,
    /// Each region's key as written.
    region_keys: Vec<&'a str>,
}

impl Known<'_> {
    fn region_of(&self, name: &str) -> Option<usize> {
        self.regions
            .iter()
            .position(|r| r.name.eq_ignore_ascii_case(name.trim()))
    }
    fn idc_of(&self, name: &str) -> Option<usize> {
        self.idcs
            .iter()
            .position(|d| d.name.eq_ignore_ascii_case(name.trim()))
    }
    fn region_list(&self) -> String {
        routechain_core::one_of(self.region_keys.iter().map(|k| k.trim()))
    }
    fn idc_list(&self, r: usize) -> String {
        routechain_core::one_of(
            self.idcs[self.regions[r].idcs.clone()]
                .iter()
                .map(|d| &*d.name),
        )
    }
}

#[cfg(test)]
mod tests;
