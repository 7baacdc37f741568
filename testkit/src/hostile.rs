//! The hostile-input shapes of the preparation benchmarks (`benches/hostile.rs`, criterion)
//! and of `benches/examples/hostile_prepare.rs` (wall and CPU time), generated in one place
//! so that both time exactly the same inputs.

use std::sync::Arc;

use routechain::core::Snapshot;

/// `n` providers `dubbo://10.a.b.c:20880/s?region=rI&env=eJ&dubbo.tag=tK` (10 regions, 3
/// envs, 7 tags).
pub fn providers(n: usize) -> Arc<Snapshot> {
    let text: String = (0..n)
        .map(|i| {
            format!(
                "dubbo://10.{}.{}.{}:20880/s?region=r{}&env=e{}&dubbo.tag=t{}\n",
                (i >> 16) & 255,
                (i >> 8) & 255,
                i & 255,
                i % 10,
                i % 3,
                i % 7
            )
        })
        .collect();
    Arc::new(Snapshot::parse_lines(1, &text).expect("generated providers parse"))
}

/// A chain of one condition router whose rule has the given `conditions` lines.
fn condition_chain(conditions: &str) -> String {
    format!("routers:\n  - type: condition\n    rule:\n      conditions:\n{conditions}")
}

/// One condition of `terms` `&` terms on each side, on keys no provider has
/// (`k0 = v0 & … => p0 = v0 & …`).
pub fn one_condition_terms(terms: usize) -> String {
    let when: Vec<String> = (0..terms).map(|i| format!("k{i} = v{i}")).collect();
    let then: Vec<String> = (0..terms).map(|i| format!("p{i} = v{i}")).collect();
    condition_chain(&format!(
        "        - \"{} => {}\"\n",
        when.join(" & "),
        then.join(" & ")
    ))
}

/// One condition of `terms` glob and range terms on keys every provider has (`host`,
/// `address`, `port`).
pub fn one_condition_glob_terms(terms: usize) -> String {
    let then: Vec<String> = (0..terms)
        .map(|i| match i % 4 {
            0 => format!("host != 10.0.{}.*", i % 256),
            1 => format!("address != *.{}:20880", i % 256),
            2 => format!("port != {}~{}", i, i + 10),
            _ => format!("host != 10.*.{}", i % 256),
        })
        .collect();
    condition_chain(&format!(
        "        - \"method = m => {}\"\n",
        then.join(" & ")
    ))
}

/// `n` conditions `method = mI => region = rJ & env != eK`.
pub fn conditions(n: usize) -> String {
    condition_chain(
        &(0..n)
            .map(|i| {
                format!(
                    "        - \"method = m{i} => region = r{} & env != e{}\"\n",
                    i % 10,
                    i % 3
                )
            })
            .collect::<String>(),
    )
}

/// `n` conditions of globs `method = mI => host = 10.J.*,10.*.J & address != *:P`.
pub fn glob_conditions(n: usize) -> String {
    condition_chain(
        &(0..n)
            .map(|i| {
                format!(
                    "        - \"method = m{i} => host = 10.{}.*,10.*.{} & address != *:{}\"\n",
                    i % 256,
                    i % 256,
                    20_000 + i
                )
            })
            .collect::<String>(),
    )
}

/// A chain of one tag router whose inline rule has `n` tags of two exact addresses each
/// (`{name: tagI, addresses: ["10.0.a.b:20880", "10.0.c.d"]}`), the shape of the 52 MB rule
/// of `benches/hostile_inputs.py` (725,092 tags) at any size: about 72 bytes per tag.
pub fn tag_rule_chain(n: usize) -> String {
    let mut out =
        String::from("routers:\n  - type: tag\n    rule:\n      force: false\n      tags:\n");
    for i in 0..n {
        let (a, b) = (i % 10_000, (i * 7) % 10_000);
        out.push_str(&format!(
            "        - {{name: tag{i}, addresses: [\"10.0.{}.{}:20880\", \"10.0.{}.{}\"]}}\n",
            (a >> 8) & 255,
            a & 255,
            (b >> 8) & 255,
            b & 255
        ));
    }
    out
}
