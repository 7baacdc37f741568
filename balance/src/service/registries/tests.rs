use super::*;
use routechain_core::{FastRng, SequenceRng};

fn reg(name: &str, preferred: bool, zone: Option<&str>, weight: Option<u32>) -> RegistryInfo {
    RegistryInfo {
        name: name.into(),
        preferred,
        zone: zone.map(Arc::from),
        weight: weight.unwrap_or(100),
        weighted: weight.is_some(),
    }
}

/// A word whose `below(n)` is `k` (Lemire's multiply-shift: `word × n >> 64`).
fn word_for(k: u64, n: u64) -> u64 {
    ((u128::from(k) << 64) / u128::from(n) + 1) as u64
}

#[test]
fn the_choice_follows_dubbos_order() {
    let plain = reg("a", false, None, None);
    let pref = reg("p", true, None, None);
    let hz = reg("hz", false, Some("hz"), None);
    let sh = reg("sh", false, Some("sh"), None);
    let w20 = reg("w20", false, None, Some(20));
    let w80 = reg("w80", false, None, Some(80));
    let ok = |registry, reason| Ok(Choice { registry, reason });
    use Reason::*;
    // (registries, available, zone (value, reason, force), the draw's word, chosen)
    type Row<'a> = (
        Vec<&'a RegistryInfo>,
        &'a [bool],
        Option<(&'a str, Reason, bool)>,
        u64,
        Result<Choice, NoRegistry>,
    );
    let rows: Vec<Row<'_>> = vec![
        // 1. The first available preferred registry, whatever the zone.
        (
            vec![&plain, &pref],
            &[true, true],
            None,
            0,
            ok(1, Preferred),
        ),
        (
            vec![&pref, &pref],
            &[false, true],
            None,
            0,
            ok(1, Preferred),
        ),
        (
            vec![&hz, &pref],
            &[true, true],
            Some(("hz", CallZone, true)),
            0,
            ok(1, Preferred),
        ),
        // An unavailable preferred one is passed over.
        (
            vec![&pref, &hz],
            &[false, true],
            Some(("hz", CallZone, false)),
            0,
            ok(1, CallZone),
        ),
        // 2. The first available registry of the call's zone.
        (
            vec![&hz, &sh],
            &[true, true],
            Some(("sh", CallZone, false)),
            0,
            ok(1, CallZone),
        ),
        (
            vec![&sh, &hz, &sh],
            &[false, true, true],
            Some(("sh", ConsumerZone, false)),
            0,
            ok(2, ConsumerZone),
        ),
        // No registry of the zone: forced fails, not forced draws.
        (
            vec![&hz, &sh],
            &[true, true],
            Some(("bj", CallZone, true)),
            0,
            Err(NoRegistry::ZoneForced),
        ),
        (
            vec![&hz, &sh],
            &[true, false],
            Some(("sh", CallZone, true)),
            0,
            Err(NoRegistry::ZoneForced),
        ),
        (
            vec![&hz, &sh],
            &[true, true],
            Some(("bj", CallZone, false)),
            word_for(1, 2),
            ok(1, Drawn),
        ),
        // 3. Uniform without weights (the first registry sets none).
        (
            vec![&plain, &hz, &sh],
            &[true, true, true],
            None,
            word_for(0, 3),
            ok(0, Drawn),
        ),
        (
            vec![&plain, &hz, &sh],
            &[true, true, true],
            None,
            word_for(2, 3),
            ok(2, Drawn),
        ),
        (
            vec![&plain, &w80],
            &[true, true],
            None,
            word_for(1, 2),
            ok(1, Drawn),
        ),
        // By weight when the first one sets it: 20 + 80, point 19 → first, 20 → second.
        (
            vec![&w20, &w80],
            &[true, true],
            None,
            word_for(19, 100),
            ok(0, Drawn),
        ),
        (
            vec![&w20, &w80],
            &[true, true],
            None,
            word_for(20, 100),
            ok(1, Drawn),
        ),
        // The second registry's default weight counts (20 + 100).
        (
            vec![&w20, &plain],
            &[true, true],
            None,
            word_for(20, 120),
            ok(1, Drawn),
        ),
        // 4. Drawn but without providers: redrawn among those with providers (the same
        // word again: the first of the two available).
        (
            vec![&plain, &hz, &sh],
            &[false, true, true],
            None,
            word_for(0, 3),
            ok(1, Redrawn),
        ),
        (
            vec![&w20, &w80, &plain],
            &[true, false, false],
            None,
            word_for(50, 200),
            ok(0, Redrawn),
        ),
        // None available.
        (
            vec![&plain, &hz],
            &[false, false],
            None,
            0,
            Err(NoRegistry::NoneAvailable),
        ),
        (vec![], &[], None, 0, Err(NoRegistry::NoneAvailable)),
    ];
    for (i, (regs, available, zone, word, want)) in rows.into_iter().enumerate() {
        let regs: Vec<RegistryInfo> = regs.into_iter().cloned().collect();
        let mut rng = SequenceRng::new(vec![word]);
        let got = choose(&regs, |r| available[r], zone, &mut rng);
        assert_eq!(got, want, "row {i}");
    }
}

#[test]
fn redrawing_among_the_available_ones_keeps_their_weights() {
    // The unavailable registry's share goes to the others in proportion: Dubbo's draw
    // then reselect splits as a draw among the available ones alone.
    let regs = [
        reg("a", false, None, Some(10)),
        reg("b", false, None, Some(60)),
        reg("c", false, None, Some(30)),
    ];
    let mut rng = FastRng::seeded(3);
    let mut counts = [0u32; 3];
    let n = 90_000;
    for _ in 0..n {
        let c = choose(&regs, |i| i != 1, None, &mut rng).unwrap();
        counts[c.registry] += 1;
    }
    assert_eq!(counts[1], 0);
    let share = f64::from(counts[0]) / f64::from(n);
    // 10 / (10 + 30) = 0.25; the standard deviation at 90,000 draws is 0.0014.
    assert!((share - 0.25).abs() < 0.01, "{share}");
}

#[test]
fn the_calls_zone_comes_from_its_attachments_else_the_consumers() {
    let r = Request::new();
    assert_eq!(call_zone(&r, None), None);
    assert_eq!(
        call_zone(&r, Some("hz")),
        Some(("hz", Reason::ConsumerZone, false))
    );
    let r = Request::new().with_attachment(REGISTRY_ZONE, "sh");
    assert_eq!(
        call_zone(&r, Some("hz")),
        Some(("sh", Reason::CallZone, false))
    );
    let r = r.with_attachment(REGISTRY_ZONE_FORCE, "TRUE");
    assert_eq!(call_zone(&r, None), Some(("sh", Reason::CallZone, true)));
    // Force alone forces nothing; an empty zone is no zone.
    let r = Request::new()
        .with_attachment(REGISTRY_ZONE, "")
        .with_attachment(REGISTRY_ZONE_FORCE, "true");
    assert_eq!(
        call_zone(&r, Some("hz")),
        Some(("hz", Reason::ConsumerZone, false))
    );
}

#[test]
fn prepared_sets_hold_each_registrys_providers() {
    let snapshot = Snapshot::parse_lines(
        1,
        "dubbo://10.0.0.1:20880/S\ndubbo://10.0.0.2:20880/S\ndubbo://10.0.0.3:20880/S\n",
    )
    .unwrap();
    let mut table = RegistryTable::new(
        vec![reg("a", false, None, None), reg("b", false, None, None)],
        None,
    );
    table.insert("10.0.0.1:20880", 0);
    table.insert("10.0.0.2:20880", 0);
    table.insert("10.0.0.2:20880", 1);
    table.insert("10.0.0.3:20880", 1);
    table.insert("10.0.0.9:20880", 7); // no such registry: ignored
    let prepared = Registries::prepare(Arc::new(table), &snapshot);
    let members = |i| prepared.set(i).iter().collect::<Vec<_>>();
    assert_eq!(members(0), [0, 1]);
    assert_eq!(members(1), [1, 2]);
}

#[test]
fn a_choice_is_described_with_its_reason() {
    let snapshot =
        Snapshot::parse_lines(1, "dubbo://10.0.0.1:20880/S\ndubbo://10.0.0.2:20880/S\n").unwrap();
    let prepare = |regs: Vec<RegistryInfo>, zone: Option<&str>| {
        let mut table = RegistryTable::new(regs, zone.map(Arc::from));
        table.insert("10.0.0.1:20880", 0);
        table.insert("10.0.0.2:20880", 2);
        Registries::prepare(Arc::new(table), &snapshot)
    };
    let at = |registry, reason| Choice { registry, reason };
    let weighted = prepare(
        vec![
            reg("zk-a", false, None, Some(20)),
            reg("zk-b", false, None, Some(30)),
            reg("zk-c", false, Some("hz"), None),
        ],
        Some("hz"),
    );
    let r = Request::new();
    // (prepared, choice, request, text)
    let rows = [
        (
            &weighted,
            at(2, Reason::Drawn),
            &r,
            "registry zk-c: drawn among all registries by weight, 100 of 150",
        ),
        (
            &weighted,
            at(0, Reason::Redrawn),
            &r,
            "registry zk-a: drawn among the registries with providers by weight, 20 of 120",
        ),
        (
            &weighted,
            at(2, Reason::ConsumerZone),
            &r,
            "registry zk-c: zone=hz, the consumer's zone",
        ),
    ];
    for (prepared, choice, request, want) in rows {
        assert_eq!(prepared.describe(choice, request), want);
    }
    let uniform = prepare(
        vec![
            reg("zk-a", true, None, None),
            reg("zk-b", false, None, Some(30)),
            reg("zk-c", false, Some("sh"), None),
        ],
        None,
    );
    let sh = Request::new().with_attachment(REGISTRY_ZONE, "sh");
    assert_eq!(
        uniform.describe(at(0, Reason::Preferred), &r),
        "registry zk-a: preferred=true"
    );
    assert_eq!(
        uniform.describe(at(2, Reason::CallZone), &sh),
        "registry zk-c: zone=sh, the call's registry_zone"
    );
    assert_eq!(
        uniform.describe(at(2, Reason::Drawn), &r),
        "registry zk-c: drawn among all registries, uniformly"
    );
}
