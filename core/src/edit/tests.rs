//! The edit's carry-over functions against the definition: the new snapshot's provider at
//! each position, computed naively.

use proptest::prelude::*;

use crate::{BitSet, ProviderSet, Snapshot, SnapshotEdit, Url, ValueIndex};

/// The old positions that survive `edit`, in order (the definition, by brute force).
fn survivors(edit: &SnapshotEdit) -> Vec<usize> {
    (0..edit.old_len())
        .filter(|i| !edit.removed().contains(&(*i as u32)))
        .collect()
}

fn snapshot(len: usize, salt: usize) -> Snapshot {
    Snapshot::new(
        1,
        (0..len).map(|i| {
            Url::parse(&format!(
                "dubbo://10.0.{}.{}:20880/svc?zone=z{}&tag={}",
                i / 250,
                i % 250,
                (i * 7 + salt) % 5,
                if (i + salt) % 3 == 0 { "gray" } else { "" }
            ))
            .unwrap()
        }),
    )
}

proptest! {
    #[test]
    fn bitsets_tables_and_index_lists_carry_over_as_defined(
        old_len in 0usize..300,
        removed in proptest::collection::vec(0u32..320, 0..40),
        added in 0usize..80,
        members in proptest::collection::vec(any::<bool>(), 380),
    ) {
        let edit = SnapshotEdit::new(old_len, removed, added);
        let keep = survivors(&edit);
        prop_assert_eq!(edit.new_len(), keep.len() + added);
        prop_assert_eq!(edit.added(), keep.len()..keep.len() + added);
        for old in 0..old_len + 5 {
            prop_assert_eq!(edit.new_index(old), keep.iter().position(|&k| k == old));
        }
        let old = BitSet::from_fn(old_len, |i| members[i]);
        let new = edit.bitset(&old, |i| members[i]);
        let want = BitSet::from_fn(edit.new_len(), |i| {
            if i < keep.len() { members[keep[i]] } else { members[i] }
        });
        prop_assert_eq!(&new, &want);
        let table: Vec<usize> = (0..old_len).collect();
        let carried = edit.table(&table, |i| 1000 + i);
        let want_table: Vec<usize> = keep.iter().copied().chain(edit.added().map(|i| 1000 + i)).collect();
        prop_assert_eq!(carried, want_table);
        let list: Vec<u32> = old.iter().map(|i| i as u32).collect();
        let carried = edit.indexes(&list, |i| members[i]);
        let want_list: Vec<u32> = want.iter().map(|i| i as u32).collect();
        prop_assert_eq!(&carried, &want_list);
        let sparse = ProviderSet::from_sorted(list, old_len);
        prop_assert_eq!(sparse.edited(&edit, |i| members[i]), ProviderSet::from_bitset(want));
    }

    #[test]
    fn a_snapshot_edited_to_a_list_holds_that_list_and_its_param_index_is_rebuilt_exactly(
        old_len in 0usize..200,
        removed in proptest::collection::vec(0u32..200, 0..30),
        added in 0usize..40,
        twice in 0usize..5,
    ) {
        let old = snapshot(old_len, 0);
        let fresh = snapshot(added, 1);
        // The new list: the survivors in a shuffled order, one repeated, and new ones.
        let mut next: Vec<Url> = old
            .providers()
            .iter()
            .enumerate()
            .filter(|(i, _)| !removed.contains(&(*i as u32)))
            .map(|(_, p)| p.clone())
            .rev()
            .collect();
        if let Some(p) = next.get(twice).cloned() {
            next.push(p);
        }
        next.extend(fresh.providers().iter().cloned());
        let (new, edit) = old.edit_to(2, &next);
        prop_assert_eq!(new.generation(), 2);
        prop_assert_eq!(new.len(), next.len());
        prop_assert_eq!(edit.old_len(), old.len());
        prop_assert_eq!(edit.new_len(), new.len());
        let mut want: Vec<usize> = next.iter().map(|p| p.block_addr()).collect();
        let mut got: Vec<usize> = new.providers().iter().map(|p| p.block_addr()).collect();
        want.sort_unstable();
        got.sort_unstable();
        prop_assert_eq!(want, got);
        // Survivors keep their order and their providers.
        for (i, p) in old.providers().iter().enumerate() {
            if let Some(j) = edit.new_index(i) {
                prop_assert!(Url::ptr_eq(p, &new.providers()[j]));
            }
        }
        for key in ["zone", "tag"] {
            let carried = ValueIndex::build(&old, key).edited(&edit, &new, |p| p.get(key));
            let built = ValueIndex::build(&new, key);
            let n = new.len();
            let mut a: Vec<_> = carried.values().map(|(v, s)| (v.to_string(), s.to_bitset(n))).collect();
            let mut b: Vec<_> = built.values().map(|(v, s)| (v.to_string(), s.to_bitset(n))).collect();
            a.sort_by(|x, y| x.0.cmp(&y.0));
            b.sort_by(|x, y| x.0.cmp(&y.0));
            prop_assert_eq!(a, b);
            prop_assert_eq!(carried.missing(), built.missing());
        }
    }
}

#[test]
fn an_edit_of_a_degraded_set_keeps_the_surviving_marks() {
    let set = crate::DegradedSet::new(130);
    for i in [0, 5, 64, 129] {
        set.mark(i);
    }
    let edit = SnapshotEdit::new(130, vec![5, 100], 3);
    let next = set.edited(&edit);
    assert_eq!(next.len(), 131);
    let marked: Vec<usize> = (0..next.len()).filter(|&i| next.contains(i)).collect();
    assert_eq!(marked, vec![0, 63, 127]);
    assert_eq!(next.count(), 3);
    assert!(next.any());
}
