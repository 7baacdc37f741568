//! The consistent-hash balancer against Apache Dubbo's own algorithm: the ring points and
//! the picks in `tests/data/dubbo-consistent-hash.json`, computed by an independent script
//! (`scripts/dubbo_consistent_hash.py`) and cross-checked against Dubbo's Java code (the
//! file's `doc` says how). Nothing here is computed with routechain's MD5 helper.

use std::path::Path;

use routechain_balance::lb::Ring;
use routechain_balance::{BalanceConfig, BalancerSpec, LoadBalanceKind, SnapshotBalance};
use routechain_core::{BitSet, FastRng, KeyPart, Request, Snapshot};
use serde_json::Value;

fn data() -> Value {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/dubbo-consistent-hash.json");
    let text = std::fs::read_to_string(&path).expect("the reference data is readable");
    serde_json::from_str(&text).expect("the reference data is JSON")
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .expect("a list")
        .iter()
        .map(|s| s.as_str().expect("a string").to_string())
        .collect()
}

/// A snapshot of `addresses` in order (index = position).
fn snapshot(addresses: &[String]) -> Snapshot {
    let text: String = addresses
        .iter()
        .map(|a| format!("dubbo://{a}/com.foo.BarService\n"))
        .collect();
    Snapshot::parse_lines(1, &text).expect("providers")
}

/// Dubbo's `hash.arguments`: split on `\s*[,]+\s*` into argument indexes.
fn hash_key(hash_arguments: &str) -> Vec<KeyPart> {
    hash_arguments
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| KeyPart::Argument(p.parse().expect("an argument index")))
        .collect()
}

fn request(selection: &Value) -> Request {
    let mut request = Request::new().with_method("get");
    request.arguments = selection["args"].as_array().expect("args").clone();
    request
}

/// Every pick of `selections` over `snapshot` (every provider a candidate unless `without`)
/// must be Dubbo's: the expected address, and the key's hash the expected point.
fn check_picks(snapshot: &Snapshot, selections: &Value, without: Option<usize>) -> usize {
    let addresses: Vec<&str> = snapshot.providers().iter().map(|p| p.address()).collect();
    let mut candidates = BitSet::full(snapshot.len());
    if let Some(i) = without {
        candidates.remove(i);
    }
    let mut rng = FastRng::seeded(1);
    let mut checked = 0;
    for s in selections.as_array().expect("selections") {
        let mut spec = BalancerSpec::new(LoadBalanceKind::ConsistentHash);
        spec.hash_key = hash_key(s["hash_arguments"].as_str().expect("hash_arguments"));
        let config = BalanceConfig::new(spec.clone());
        let balance = SnapshotBalance::new(snapshot, &config);
        let request = request(s);
        let key = s["key"].as_str().expect("key");
        assert_eq!(
            u64::from(Ring::key_hash(&request, &spec.hash_key)),
            s["point"].as_u64().expect("point"),
            "the point of key {key:?}"
        );
        let picked = balance
            .pick(0, config.spec(0), &request, &candidates, &mut rng)
            .expect("a pick");
        assert_eq!(
            addresses[picked],
            s["address"].as_str().expect("address"),
            "the provider of key {key:?} (args {}, hash.arguments {})",
            s["args"],
            s["hash_arguments"]
        );
        checked += 1;
    }
    checked
}

#[test]
fn the_ring_has_dubbos_points() {
    let data = data();
    let addresses = strings(&data["addresses"]);
    let snapshot = snapshot(&addresses);
    let nodes = data["replica_number"].as_u64().expect("replica_number") as u32;
    let ring = Ring::new(&snapshot, nodes);
    assert_eq!(ring.len() as u64, data["ring_size"].as_u64().unwrap());
    let all = BitSet::full(snapshot.len());
    let mut checked = 0;
    for key in ["ring_first_20", "ring_last_5"] {
        for point in data[key].as_array().expect("points") {
            let hash = point["point"].as_u64().expect("point") as u32;
            let owner = ring.lookup(hash, &all).expect("an owner");
            assert_eq!(
                snapshot.providers()[owner].address(),
                point["address"].as_str().unwrap(),
                "the owner of ring point {hash}"
            );
            // The point is the first one clockwise from the hash just below it too.
            let owner = ring.lookup(hash - 1, &all).expect("an owner");
            assert_eq!(
                snapshot.providers()[owner].address(),
                point["address"].as_str().unwrap(),
                "the owner of ring point {hash}, reached from below"
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 25);
    // Past the last point the ring wraps to the first.
    let first = &data["ring_first_20"][0];
    let owner = ring.lookup(u32::MAX, &all).expect("an owner");
    assert_eq!(
        snapshot.providers()[owner].address(),
        first["address"].as_str().unwrap()
    );
}

#[test]
fn picks_are_dubbos() {
    let data = data();
    let snapshot = snapshot(&strings(&data["addresses"]));
    let checked = check_picks(&snapshot, &data["selections"], None);
    assert_eq!(checked, data["selections"].as_array().unwrap().len());
    assert!(checked >= 200, "{checked}");
}

#[test]
fn after_a_removal_picks_are_dubbos_on_a_rebuilt_ring_and_among_the_candidates() {
    let data = data();
    let addresses = strings(&data["addresses"]);
    let removed = data["removed_address"].as_str().expect("removed_address");
    let index = addresses
        .iter()
        .position(|a| a == removed)
        .expect("the removed address is listed");
    let selections = &data["selections_after_removal"];

    // Dubbo rebuilds the ring from the remaining providers.
    let remaining: Vec<String> = addresses
        .iter()
        .filter(|a| *a != removed)
        .cloned()
        .collect();
    let rebuilt = snapshot(&remaining);
    assert_eq!(
        Ring::new(&rebuilt, 160).len() as u64,
        data["ring_size_after_removal"].as_u64().unwrap()
    );
    check_picks(&rebuilt, selections, None);

    // routechain keeps one ring per snapshot and skips providers that are not candidates:
    // the same picks.
    let full = snapshot(&addresses);
    check_picks(&full, selections, Some(index));

    // The removal moved exactly the keys Dubbo says it moved.
    let before = data["selections"].as_array().unwrap();
    let after = selections.as_array().unwrap();
    let changed = before
        .iter()
        .zip(after)
        .filter(|(b, a)| b["address"] != a["address"])
        .count();
    assert_eq!(
        changed as u64,
        data["selections_changed_by_removal"].as_u64().unwrap()
    );
}
