//! The service's index of providers by address, and the carry-over of per-address state
//! (health, degraded marks) from one snapshot to the next.
//!
//! The index is the snapshot's positions sorted by (address, position): 4 bytes per
//! provider, the addresses read through the snapshot, never copied. A report by address
//! finds its providers with a binary search ([`positions_of`]).
//!
//! A whole new provider list (a registry's full push, every provider redeployed) is matched
//! with the old one by a merge of the two sorted orders ([`join`]), each address read once
//! or twice, not by one binary search per provider: at 100,000 providers the searches read
//! 1.7 million addresses out of their URL blocks and took a third of the list's
//! replacement. The sort itself compares a 16-byte prefix key held in the sort's own array
//! and reads the addresses only to break ties (one host's ports), so it does not decode a
//! URL block per comparison either.

use std::sync::Arc;

use routechain_core::{Snapshot, SnapshotEdit};

/// Each provider's address, read once out of its URL block.
fn addresses(snapshot: &Snapshot) -> Vec<&str> {
    snapshot.providers().iter().map(|p| p.address()).collect()
}

/// The first 16 bytes of `s` as a big-endian number, zero-padded: when two strings' keys
/// differ, the strings compare as their keys do (a shorter string pads with the smallest
/// byte, as the byte-wise comparison ranks a prefix first). Equal keys leave the order to
/// the strings themselves.
fn prefix_key(s: &str) -> u128 {
    let mut bytes = [0u8; 16];
    let n = s.len().min(16);
    bytes[..n].copy_from_slice(&s.as_bytes()[..n]);
    u128::from_be_bytes(bytes)
}

/// Positions `0..addresses.len()` sorted by (address, position).
fn order(addresses: &[&str]) -> Vec<u32> {
    let mut keys: Vec<(u128, u32)> = addresses
        .iter()
        .enumerate()
        .map(|(i, a)| (prefix_key(a), i as u32))
        .collect();
    keys.sort_unstable();
    // Runs of one key (a host's ports, longer addresses sharing 16 bytes, duplicates) are
    // ordered by the whole address, then position.
    let mut start = 0;
    while start < keys.len() {
        let key = keys[start].0;
        let end = start + keys[start..].partition_point(|k| k.0 == key);
        if end - start > 1 {
            keys[start..end].sort_unstable_by(|a, b| {
                addresses[a.1 as usize]
                    .cmp(addresses[b.1 as usize])
                    .then(a.1.cmp(&b.1))
            });
        }
        start = end;
    }
    keys.into_iter().map(|(_, i)| i).collect()
}

/// The positions of `snapshot` sorted by (address, position).
pub(super) fn index(snapshot: &Snapshot) -> Arc<[u32]> {
    order(&addresses(snapshot)).into()
}

/// The positions in `index` (over `snapshot`) of the providers at `address`, in order.
pub(super) fn positions_of<'a>(
    index: &'a [u32],
    snapshot: &'a Snapshot,
    address: &'a str,
) -> impl Iterator<Item = usize> + 'a {
    let providers = snapshot.providers();
    let at = move |i: u32| providers.get(i as usize).map_or("", |p| p.address());
    let start = index.partition_point(|&i| at(i) < address);
    index[start..]
        .iter()
        .take_while(move |&&i| at(i) == address)
        .map(|&i| i as usize)
}

/// For every provider of `new` (whose index is `new_index`) that has an address among
/// `old`'s (whose index is `old_index`), calls `f(position in new, positions in old at
/// that address, in order)`. A merge of the two sorted orders: linear in both lists.
pub(super) fn join(
    old_index: &[u32],
    old: &Snapshot,
    new_index: &[u32],
    new: &Snapshot,
    mut f: impl FnMut(usize, &[u32]),
) {
    let old_at = |i: u32| old.providers().get(i as usize).map_or("", |p| p.address());
    let new_at = |i: u32| new.providers().get(i as usize).map_or("", |p| p.address());
    let (mut i, mut k) = (0, 0);
    while i < new_index.len() {
        let address = new_at(new_index[i]);
        let mut end = i + 1;
        while end < new_index.len() && new_at(new_index[end]) == address {
            end += 1;
        }
        while k < old_index.len() && old_at(old_index[k]) < address {
            k += 1;
        }
        let from = k;
        while k < old_index.len() && old_at(old_index[k]) == address {
            k += 1;
        }
        if k > from {
            for &n in &new_index[i..end] {
                f(n as usize, &old_index[from..k]);
            }
        }
        i = end;
    }
}

/// The address index of a snapshot that follows `old`'s by `edit`: the removed positions
/// dropped, the survivors renumbered (their order by address and position unchanged), the
/// added ones sorted and merged in (each after the survivors of its address: its position
/// is past theirs). Time: the index's length plus the added providers' look-ups, no
/// address compared for the survivors.
pub(super) fn index_edited(old: &[u32], edit: &SnapshotEdit, snapshot: &Snapshot) -> Arc<[u32]> {
    let providers = snapshot.providers();
    let at = |i: u32| providers[i as usize].address();
    let removed = edit.removed();
    let kept: Vec<u32> = if removed.is_empty() {
        old.to_vec()
    } else {
        old.iter()
            .filter_map(|&i| match removed.binary_search(&i) {
                Ok(_) => None,
                Err(before) => Some(i - before as u32),
            })
            .collect()
    };
    let mut added: Vec<u32> = edit.added().map(|i| i as u32).collect();
    added.sort_unstable_by(|&a, &b| at(a).cmp(at(b)).then(a.cmp(&b)));
    let mut out = Vec::with_capacity(edit.new_len());
    let mut from = 0;
    for a in added {
        let to = from + kept[from..].partition_point(|&k| at(k) <= at(a));
        out.extend_from_slice(&kept[from..to]);
        out.push(a);
        from = to;
    }
    out.extend_from_slice(&kept[from..]);
    out.into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use routechain_core::Url;

    /// A snapshot of providers at the given addresses (hosts and ports drawn from small
    /// sets so that addresses repeat, share 16-byte prefixes and differ in length).
    fn snapshot(addresses: &[String]) -> Snapshot {
        Snapshot::new(
            1,
            addresses
                .iter()
                .map(|a| Url::parse(&format!("dubbo://{a}/S")).expect("valid")),
        )
    }

    fn address() -> impl Strategy<Value = String> {
        (
            prop::sample::select(vec![
                "10.0.0.1",
                "10.0.0.12",
                "10.0.0.2",
                "192.168.100.200",
                "192.168.100.201",
                "a",
                "ab",
                "host-with-a-long-name.example",
                "host-with-a-long-name.example2",
            ]),
            prop::sample::select(vec![1u16, 20880, 20881, 8]),
        )
            .prop_map(|(h, p)| format!("{h}:{p}"))
    }

    proptest! {
        /// The index is the naive sort by (address, position).
        #[test]
        fn index_is_the_sort_by_address_then_position(
            list in prop::collection::vec(address(), 0..60),
        ) {
            let s = snapshot(&list);
            let mut naive: Vec<u32> = (0..list.len() as u32).collect();
            naive.sort_by(|&a, &b| list[a as usize].cmp(&list[b as usize]).then(a.cmp(&b)));
            prop_assert_eq!(&*index(&s), &naive[..]);
        }

        /// The merge finds for every new provider exactly what one search per provider
        /// finds.
        #[test]
        fn join_matches_a_search_per_provider(
            old in prop::collection::vec(address(), 0..40),
            new in prop::collection::vec(address(), 0..40),
        ) {
            let (old_s, new_s) = (snapshot(&old), snapshot(&new));
            let (old_i, new_i) = (index(&old_s), index(&new_s));
            let mut joined: Vec<(usize, Vec<u32>)> = Vec::new();
            join(&old_i, &old_s, &new_i, &new_s, |n, olds| joined.push((n, olds.to_vec())));
            joined.sort();
            let searched: Vec<(usize, Vec<u32>)> = new_s
                .providers()
                .iter()
                .enumerate()
                .filter_map(|(n, p)| {
                    let olds: Vec<u32> = positions_of(&old_i, &old_s, p.address())
                        .map(|j| j as u32)
                        .collect();
                    (!olds.is_empty()).then_some((n, olds))
                })
                .collect();
            prop_assert_eq!(joined, searched);
        }
    }

    #[test]
    fn a_prefix_key_orders_as_the_strings_do_when_it_differs() {
        for (a, b) in [
            ("10.0.0.1:20880", "10.0.0.12:20880"),
            ("a", "ab"),
            ("", "a"),
            ("192.168.100.200:1", "192.168.100.200:2"),
        ] {
            let (ka, kb) = (prefix_key(a), prefix_key(b));
            if ka != kb {
                assert_eq!(ka.cmp(&kb), a.cmp(b), "{a} vs {b}");
            }
        }
        assert_eq!(
            prefix_key("192.168.100.200:1"),
            prefix_key("192.168.100.200:2"),
            "past 16 bytes the key cannot tell"
        );
    }
}
