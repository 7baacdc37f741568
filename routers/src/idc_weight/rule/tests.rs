//! Validation of IDC-weight rules: every problem located, route tables exact.

use super::*;
use routechain_core::RuleDoc;
use serde_json::json;

fn check(value: serde_json::Value) -> Result<IdcWeightRule, Vec<String>> {
    let base = FieldPath::root().key("rule");
    RuleDoc::new(&value, &base)
        .parse::<RawIdcWeightRule>()
        .map_err(|e| vec![e])
        .and_then(|raw| IdcWeightRule::compile(raw, &base))
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
    assert_eq!(
        (0..table.len()).map(|i| table.entry(i)).collect::<Vec<_>>(),
        [(0, 80), (1, 20)]
    );
    assert_eq!(r.selected, [(0, 1)]);
    assert_eq!(r.selected_for(0), Some(1));
    assert_eq!(r.selected_for(1), None);
    assert_eq!(r.cross_region, [1]);
    assert_eq!(&*r.regions[1].name, "shanghai");
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
        assert_eq!(
            (0..t.len()).map(|i| t.entry(i)).collect::<Vec<_>>(),
            *expected
        );
    }
    assert!(RouteTable::new([(0, 50), (1, 49)]).is_none());
    assert!(RouteTable::new([(0, u32::MAX), (1, 2)]).is_none());
}

#[test]
fn local_is_lower_cased() {
    let r =
        check(json!({"idcs": {"beijing": ["mt"]}, "local": {"region": "BeiJing", "idc": "MT"}}))
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
            vec!["rule.idcs.beijing: region `beijing` is listed twice in `idcs` (as `Beijing` too"],
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
                "rule.route_tables.beijing.gz: IDC `gz` in the route table of region `beijing` is not a known IDC of that region (known: `mt`, `zf`)",
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
                "rule.route_tables.guangzhou: route table of unknown region `guangzhou` (known regions: `beijing`, `shanghai`)",
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
                "rule.cross_region[1]: cross region `guangzhou` is not a region of `idcs` (known: `beijing`, `shanghai`)",
                "rule.cross_region[2]: region `SHANGHAI` is listed twice in `cross_region`",
            ],
        ),
        (
            json!({"idcs": base, "local": {"region": "guangzhou", "idc": "gz"}}),
            vec![
                "rule.local.region: local region `guangzhou` is not a region of `idcs` (known: `beijing`, `shanghai`)",
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
