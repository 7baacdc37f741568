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
//! ```
//!
//! Region and IDC names compare case-insensitively (ASCII); the compiled [`IdcWeightRule`]
//! holds them lower-cased. Validation reports every problem at once, each at its field path
//! (`route_tables.beijing.mt`) and naming the region and IDC.

use std::collections::BTreeMap;
use std::ops::Range;

use routechain_core::{FieldPath, RuleDoc, RuleError};
use serde::Deserialize;
use serde_json::Value;

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
    #[serde(default)]
    pub local: Option<RawLocal>,
    /// Required: region → its known IDCs, in order (the order the hash fallback uses).
    pub idcs: BTreeMap<String, Vec<String>>,
    /// Region → IDC → integer weight; the weights of a region sum to exactly 100.
    #[serde(default)]
    pub route_tables: Option<BTreeMap<String, BTreeMap<String, Value>>>,
    /// Local IDC → the IDC of the same region it reads from instead.
    #[serde(default)]
    pub selected: Option<BTreeMap<String, String>>,
    /// Regions tried, in order, when the local region has no candidate.
    #[serde(default)]
    pub cross_region: Option<Vec<String>>,
    /// Providers whose param is `true` are dropped first. Default `degraded`.
    #[serde(default = "default_degraded_param")]
    pub degraded_param: String,
    /// When the chosen IDC has no provider: `true` → empty result, `false` (default) →
    /// fall back (the region, then every non-degraded provider, then the whole input).
    #[serde(default)]
    pub force: bool,
}

/// The `local` field as written.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawLocal {
    /// The caller's region.
    #[serde(default)]
    pub region: Option<String>,
    /// The caller's IDC.
    #[serde(default)]
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

/// A route table as cumulative weights (seed 001's `RouteTable`): entry `i` is chosen when
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

    /// (IDC index, weight) pairs with a non-zero weight.
    pub fn weights(&self) -> impl Iterator<Item = (usize, u32)> + '_ {
        let mut previous = 0;
        self.entries.iter().map(move |&(idc, cumulative)| {
            let w = cumulative - previous;
            previous = cumulative;
            (idc, w)
        })
    }
}

impl IdcWeightRule {
    /// The index of region `name` (case-insensitive).
    pub fn region_index(&self, name: &str) -> Option<usize> {
        self.regions
            .iter()
            .position(|r| r.name.eq_ignore_ascii_case(name))
    }
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

impl RawIdcWeightRule {
    /// Parses and validates a rule document.
    pub fn parse(doc: &RuleDoc<'_>) -> Result<IdcWeightRule, Vec<RuleError>> {
        let raw: RawIdcWeightRule = doc.parse().map_err(|e| vec![e])?;
        raw.validate(doc.path)
    }

    /// Validates the rule; `base` is the document's path. Reports every problem at once.
    pub fn validate(&self, base: &FieldPath) -> Result<IdcWeightRule, Vec<RuleError>> {
        let mut errors = Vec::new();
        let mut err = |path: FieldPath, message: String| errors.push(RuleError::new(path, message));
        self.check_params(base, &mut err);
        let mut known = self.known(base, &mut err);
        let (local_region, local_idc) = self.check_local(base, &known, &mut err);
        let tables = self.check_route_tables(base, &known, &mut err);
        let selected = self.check_selected(base, &known, &mut err);
        let cross_region = self.check_cross_region(base, &known, &mut err);
        if !errors.is_empty() {
            return Err(errors);
        }
        for (r, t) in tables {
            known.regions[r].route_table = Some(t);
        }
        Ok(IdcWeightRule {
            region_param: self.region_param.trim().into(),
            idc_param: self.idc_param.trim().into(),
            degraded_param: self.degraded_param.trim().into(),
            local_region: local_region.map(|r| known.regions[r].name.clone()),
            local_idc: local_idc.map(|d| known.idcs[d].name.clone()),
            regions: known.regions,
            idcs: known.idcs,
            selected,
            cross_region,
            force: self.force,
        })
    }

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
                            Value::Number(_) => "is not an integer",
                            _ => "is not a number",
                        };
                        err(
                            wpath.clone(),
                            format!(
                                "weight {weight} of IDC `{idc_name}` in the route table of region `{region_name}` {what}; weights are non-negative integers"
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
        self.region_keys
            .iter()
            .map(|k| k.trim())
            .collect::<Vec<_>>()
            .join(", ")
    }
    fn idc_list(&self, r: usize) -> String {
        self.idcs[self.regions[r].idcs.clone()]
            .iter()
            .map(|d| &*d.name)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(value: serde_json::Value) -> Result<IdcWeightRule, Vec<String>> {
        let base = FieldPath::root().key("rule");
        RawIdcWeightRule::parse(&RuleDoc::new(&value, &base))
            .map_err(|es| es.iter().map(ToString::to_string).collect())
    }

    #[test]
    fn defaults_and_compiled_indexes() {
        let r = check(json!({
            "idcs": {"Beijing": ["MT", "zf"], "shanghai": ["sh"]},
            "route_tables": {"beijing": {"zf": 20, "mt": 80}},
            "selected": {"mt": "ZF"},
            "cross_region": ["shanghai"],
        }))
        .unwrap();
        assert_eq!(&*r.region_param, "region");
        assert_eq!(&*r.idc_param, "idc");
        assert_eq!(&*r.degraded_param, "degraded");
        assert!(!r.force);
        assert_eq!(r.local_region, None);
        let names: Vec<&str> = r.idcs.iter().map(|d| &*d.name).collect();
        assert_eq!(names, ["mt", "zf", "sh"]);
        assert_eq!(&*r.regions[0].name, "beijing");
        assert_eq!(r.regions[0].idcs, 0..2);
        assert_eq!(r.regions[1].idcs, 2..3);
        // Ordered as the region lists its IDCs, not as the table is written.
        let table = r.regions[0].route_table.as_ref().unwrap();
        assert_eq!(table.weights().collect::<Vec<_>>(), [(0, 80), (1, 20)]);
        assert_eq!(r.selected, [(0, 1)]);
        assert_eq!(r.selected_for(0), Some(1));
        assert_eq!(r.selected_for(1), None);
        assert_eq!(r.cross_region, [1]);
        assert_eq!(r.region_index("SHANGHAI"), Some(1));
        assert_eq!(r.idc_index("Zf"), Some(1));
    }

    #[test]
    fn route_table_draws_have_exact_proportions() {
        type Weights = &'static [(usize, u32)];
        let cases: &[(Weights, Weights)] = &[
            (&[(0, 50), (1, 50)], &[(0, 50), (1, 50)]),
            (&[(0, 80), (1, 20)], &[(0, 80), (1, 20)]),
            (&[(0, 100), (1, 0)], &[(0, 100)]),
            (&[(0, 0), (1, 100)], &[(1, 100)]),
            (&[(0, 33), (1, 33), (2, 34)], &[(0, 33), (1, 33), (2, 34)]),
        ];
        for (weights, expected) in cases {
            let t = RouteTable::new(weights.iter().copied()).unwrap();
            let mut counts = [0u32; 3];
            for draw in 0..ROUTE_TABLE_TOTAL {
                counts[t.pick(draw)] += 1;
            }
            for &(idc, w) in *expected {
                assert_eq!(counts[idc], w, "{weights:?}");
            }
            assert_eq!(t.weights().collect::<Vec<_>>(), *expected);
        }
        assert!(RouteTable::new([(0, 50), (1, 49)]).is_none());
        assert!(RouteTable::new([(0, u32::MAX), (1, 2)]).is_none());
    }

    #[test]
    fn local_is_lower_cased() {
        let r = check(
            json!({"idcs": {"beijing": ["mt"]}, "local": {"region": "BeiJing", "idc": "MT"}}),
        )
        .unwrap();
        assert_eq!(r.local_region.as_deref(), Some("beijing"));
        assert_eq!(r.local_idc.as_deref(), Some("mt"));
        let r = check(json!({"idcs": {"beijing": ["mt"]}, "local": {"idc": "mt"},
                             "route_tables": null, "selected": null, "cross_region": null}))
        .unwrap();
        assert_eq!(r.local_region, None);
    }

    #[test]
    fn every_validation_error_names_region_and_idc() {
        let base = json!({"beijing": ["mt", "zf"], "shanghai": ["sh"]});
        let cases: Vec<(serde_json::Value, Vec<&str>)> = vec![
            (json!({}), vec!["rule: missing field `idcs`"]),
            (
                json!({"idcs": {}}),
                vec!["rule.idcs: `idcs` lists no region"],
            ),
            (
                json!({"idcs": {"beijing": [], " ": ["x"]}}),
                vec![
                    "rule.idcs. : blank region name",
                    "rule.idcs.beijing: region `beijing` lists no IDC",
                ],
            ),
            (
                json!({"idcs": {"beijing": ["mt"], "Beijing": ["x"]}}),
                vec![
                    "rule.idcs.beijing: region `beijing` is listed twice in `idcs` (as `Beijing` too",
                ],
            ),
            (
                json!({"idcs": {"beijing": ["mt", " ", "MT"], "shanghai": ["mt"]}}),
                vec![
                    "rule.idcs.beijing[1]: blank IDC name in region `beijing`",
                    "rule.idcs.beijing[2]: IDC `MT` of region `beijing` is already listed under region `beijing`",
                    "rule.idcs.shanghai[0]: IDC `mt` of region `shanghai` is already listed under region `beijing`",
                ],
            ),
            (
                json!({"idcs": base, "route_tables": {"beijing": {"mt": 50, "zf": 40}}}),
                vec![
                    "rule.route_tables.beijing: the weights of the route table of region `beijing` sum to 90; they must sum to exactly 100",
                ],
            ),
            (
                json!({"idcs": base, "route_tables": {"beijing": {"mt": 150, "zf": -50}}}),
                vec![
                    "rule.route_tables.beijing.zf: weight -50 of IDC `zf` in the route table of region `beijing` is negative",
                ],
            ),
            (
                json!({"idcs": base, "route_tables": {"beijing": {"mt": 50.5, "zf": "49.5"}}}),
                vec![
                    "rule.route_tables.beijing.mt: weight 50.5 of IDC `mt` in the route table of region `beijing` is not an integer",
                    "rule.route_tables.beijing.zf: weight \"49.5\" of IDC `zf` in the route table of region `beijing` is not a number",
                ],
            ),
            (
                json!({"idcs": base, "route_tables": {"beijing": {"mt": 50, "sh": 50}}}),
                vec![
                    "rule.route_tables.beijing.sh: IDC `sh` in the route table of region `beijing` belongs to region `shanghai`",
                ],
            ),
            (
                json!({"idcs": base, "route_tables": {"beijing": {"mt": 50, "gz": 50}}}),
                vec![
                    "rule.route_tables.beijing.gz: IDC `gz` in the route table of region `beijing` is not a known IDC of that region (known: mt, zf)",
                ],
            ),
            (
                json!({"idcs": base, "route_tables": {"beijing": {"mt": 50, " ": 50}}}),
                vec![
                    "rule.route_tables.beijing. : blank IDC name in the route table of region `beijing`",
                ],
            ),
            (
                json!({"idcs": base, "route_tables": {"beijing": {"mt": 50, "MT": 50}}}),
                vec![
                    "rule.route_tables.beijing.mt: IDC `mt` appears twice in the route table of region `beijing`",
                ],
            ),
            (
                json!({"idcs": base, "route_tables": {"guangzhou": {"gz": 100}}}),
                vec![
                    "rule.route_tables.guangzhou: route table of unknown region `guangzhou` (known regions: beijing, shanghai)",
                ],
            ),
            (
                json!({"idcs": base, "selected": {"gz": "mt", "mt": "xx", "zf": "sh", " ": " "}}),
                vec![
                    "rule.selected. : blank IDC name in `selected`",
                    "rule.selected. : blank IDC selected for local IDC ``",
                    "rule.selected.gz: `selected` names unknown local IDC `gz`",
                    "rule.selected.mt: IDC `xx` selected for local IDC `mt` is not an IDC of `idcs`",
                    "rule.selected.zf: IDC `sh` selected for local IDC `zf` is in region `shanghai`, not in `beijing`",
                ],
            ),
            (
                json!({"idcs": base, "cross_region": ["shanghai", "guangzhou", "SHANGHAI"]}),
                vec![
                    "rule.cross_region[1]: cross region `guangzhou` is not a region of `idcs` (known: beijing, shanghai)",
                    "rule.cross_region[2]: region `SHANGHAI` is listed twice in `cross_region`",
                ],
            ),
            (
                json!({"idcs": base, "local": {"region": "guangzhou", "idc": "gz"}}),
                vec![
                    "rule.local.region: local region `guangzhou` is not a region of `idcs` (known: beijing, shanghai)",
                    "rule.local.idc: local IDC `gz` is not an IDC of `idcs`",
                ],
            ),
            (
                json!({"idcs": base, "local": {"region": "beijing", "idc": "sh"}}),
                vec![
                    "rule.local.idc: local IDC `sh` belongs to region `shanghai`, not to the local region `beijing`",
                ],
            ),
            (
                json!({"idcs": base, "region_param": "", "idc_param": " ", "degraded_param": ""}),
                vec![
                    "rule.region_param: `region_param` must name a URL param",
                    "rule.idc_param: `idc_param` must name a URL param",
                    "rule.degraded_param: `degraded_param` must name a URL param",
                ],
            ),
            (
                json!({"idcs": base, "weights": {}}),
                vec!["rule.weights: unknown field `weights`"],
            ),
            (
                json!({"idcs": base, "local": {"zone": "x"}}),
                vec!["rule.local.zone: unknown field `zone`"],
            ),
            (
                json!({"idcs": base, "force": 1}),
                vec!["rule.force: invalid type"],
            ),
            (
                json!({"idcs": {"beijing": "mt"}}),
                vec!["rule.idcs.beijing: invalid type"],
            ),
        ];
        for (doc, expected) in cases {
            let mut errors = check(doc.clone()).unwrap_err();
            errors.sort();
            let mut expected = expected;
            expected.sort();
            assert_eq!(errors.len(), expected.len(), "{doc}: {errors:#?}");
            for (e, want) in errors.iter().zip(expected.iter()) {
                assert!(e.starts_with(want), "{doc}:\n  got  {e}\n  want {want}");
            }
        }
    }
}
