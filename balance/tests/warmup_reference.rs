//! Dubbo's `calculateWarmupWeight` run by the JVM (`scripts/warmup_reference.java`, its
//! output in `tests/data/warmup_reference.txt`) against routechain's port, value for value:
//! Java's float arithmetic reproduced exactly, edges included.

use routechain_balance::lb::warmup::warmup_weight;

#[test]
fn warmup_weight_equals_dubbos_for_every_reference_row() {
    let table = include_str!("data/warmup_reference.txt");
    let mut rows = 0;
    for line in table.lines().filter(|l| !l.starts_with('#')) {
        let v: Vec<i32> = line
            .split(' ')
            .map(|x| x.parse().expect("a number"))
            .collect();
        let (uptime, warmup, weight, want) = (v[0], v[1], v[2], v[3]);
        assert_eq!(
            warmup_weight(uptime, warmup, weight),
            want,
            "calculateWarmupWeight({uptime}, {warmup}, {weight})"
        );
        rows += 1;
    }
    assert!(rows > 2000, "{rows} rows");
}
