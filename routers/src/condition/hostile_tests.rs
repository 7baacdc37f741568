//! The condition router on an expensive input at a size where super-linear code could not
//! finish (a condition side of 100,000 keys: ~5·10⁹ key comparisons), checked for its
//! answer. Nothing is timed (speed is measured in `benches/hostile.rs`); super-linear code
//! would never end it, and CI's time limit would fail it.

use routechain_core::Request;

use crate::test_support::*;

/// One condition whose when- and then-parts name 100,000 keys each compiles, prepares and
/// routes: the keys are told apart through a map (not by comparing each with every earlier
/// one), and keys no provider has are known from one pass over the snapshot.
#[test]
fn a_condition_of_a_hundred_thousand_terms_compiles_and_prepares() {
    let providers = snapshot(&["dubbo://10.0.0.1:20880/s?p0=v0", "dubbo://10.0.0.2:20880/s"]);
    let n = 100_000;
    let when: Vec<String> = (0..n).map(|i| format!("k{i} = v{i}")).collect();
    let then: Vec<String> = (0..n).map(|i| format!("p{i} = v{i}")).collect();
    let chain = format!(
        "routers:\n  - type: condition\n    rule:\n      force: true\n      conditions:\n        - \"method = m & {} => {}\"\n",
        when.join(" & "),
        then.join(" & ")
    );
    let state = chain_state(&chain, providers);
    // The when-part does not hold (no such attachments): every provider stays.
    assert_eq!(
        route_state(&state, &Request::new().with_method("m")),
        vec![0, 1]
    );
}
