//! [`NamedSets`] carried over a [`SnapshotEdit`]: the survivors' memberships kept (shifted),
//! the added providers filed under their names, names left with no provider dropped, in
//! time proportional to the sets and names plus the added providers (no survivor's name is
//! read or hashed again).

use std::collections::HashMap;
use std::collections::hash_map::Entry;

use super::{NamedSets, ProviderSet, caseless_hash, member_of};
use crate::edit::SnapshotEdit;

/// An edit of [`NamedSets`] in progress ([`NamedSets::edit`]): file each added provider
/// with [`NamedSetsEdit::add`] or [`NamedSetsEdit::add_to`], in increasing position order,
/// then [`NamedSetsEdit::finish`].
///
/// The positions `add` returns are provisional: the old sets keep their old positions and
/// new names follow them in order of first appearance. `finish` says how they map to the
/// final positions (different only when a name other than a pinned one lost its last
/// provider and is dropped, as [`super::NamedSetsBuilder`] over the new snapshot would not
/// have it).
#[derive(Debug)]
pub struct NamedSetsEdit<'s> {
    base: &'s NamedSets,
    edit: &'s SnapshotEdit,
    /// Added providers per existing position, ascending.
    added: HashMap<usize, Vec<u32>>,
    /// New names (lower-cased) → index into `new_names`.
    new_index: HashMap<Box<str>, usize>,
    new_names: Vec<(Box<str>, Vec<u32>)>,
    lower: String,
}

impl NamedSets {
    /// Starts carrying these sets (over the snapshot before `edit`) to the snapshot after it.
    pub fn edit<'s>(&'s self, edit: &'s SnapshotEdit) -> NamedSetsEdit<'s> {
        NamedSetsEdit {
            base: self,
            edit,
            added: HashMap::new(),
            new_index: HashMap::new(),
            new_names: Vec::new(),
            lower: String::new(),
        }
    }
}

impl NamedSetsEdit<'_> {
    /// Files added provider `i` (a new position, in increasing order) under `name`
    /// (case-insensitive); returns the set's provisional position.
    pub fn add(&mut self, name: &str, i: usize) -> usize {
        if let Some(k) = self.base.find(name) {
            self.add_to(k, i);
            return k;
        }
        self.lower.clear();
        self.lower.push_str(name);
        self.lower.make_ascii_lowercase();
        let m = match self.new_index.get(self.lower.as_str()) {
            Some(&m) => m,
            None => {
                let m = self.new_names.len();
                self.new_index.insert(self.lower.as_str().into(), m);
                self.new_names
                    .push((self.lower.as_str().into(), Vec::new()));
                m
            }
        };
        self.new_names[m].1.push(i as u32);
        self.base.len() + m
    }

    /// Files added provider `i` under the existing set at position `k` (a pinned name, say).
    pub fn add_to(&mut self, k: usize, i: usize) {
        if k < self.base.len() {
            self.added.entry(k).or_default().push(i as u32);
        }
    }

    /// The sets over the new snapshot, and the map from provisional to final positions:
    /// `None` when they are equal, else the final position of each provisional one
    /// ([`crate::DegradedTally::NONE`], `u32::MAX`, for a dropped name, which no provider
    /// has). Pinned sets stay dense and at their positions; other sets are stored in the
    /// smaller form, as [`super::NamedSetsBuilder::finish`] stores them.
    pub fn finish(mut self) -> (NamedSets, Option<Vec<u32>>) {
        let base = self.base;
        let edit = self.edit;
        let len = edit.new_len();
        let mut sets = Vec::with_capacity(base.len() + self.new_names.len());
        let mut remap = Vec::with_capacity(base.len() + self.new_names.len());
        let mut dropped = false;
        for (k, (name, set)) in base.sets.iter().enumerate() {
            let extra = self.added.remove(&k).unwrap_or_default();
            if k < base.pinned {
                let set = match set {
                    ProviderSet::Dense(b) => edit.bitset(b, member_of(&extra)),
                    sparse => sparse.edited(edit, member_of(&extra)).to_bitset(),
                };
                remap.push(sets.len() as u32);
                sets.push((name.clone(), ProviderSet::Dense(set)));
                continue;
            }
            let set = set.edited(edit, member_of(&extra));
            if set.count() == 0 {
                remap.push(u32::MAX);
                dropped = true;
            } else {
                remap.push(sets.len() as u32);
                sets.push((name.clone(), set));
            }
        }
        let kept = sets.len();
        for (name, members) in self.new_names {
            remap.push(sets.len() as u32);
            sets.push((name, ProviderSet::from_sorted(members, len)));
        }
        // The hash map of the other names: the old entries moved, the new names hashed.
        let mut others = HashMap::with_capacity(sets.len() - base.pinned);
        let mut collided = Vec::new();
        for (&hash, &k) in &base.others {
            if remap[k] != u32::MAX {
                others.insert(hash, remap[k] as usize);
            }
        }
        let hashed = base
            .collided
            .iter()
            .filter(|&&k| remap[k] != u32::MAX)
            .map(|&k| (caseless_hash(&base.sets[k].0), remap[k] as usize));
        let added = (kept..sets.len()).map(|k| (caseless_hash(&sets[k].0), k));
        for (hash, k) in hashed.chain(added) {
            match others.entry(hash) {
                Entry::Vacant(e) => {
                    e.insert(k);
                }
                Entry::Occupied(_) => collided.push(k),
            }
        }
        collided.sort_unstable();
        let sets = NamedSets {
            sets,
            pinned: base.pinned,
            others,
            collided,
        };
        (sets, dropped.then_some(remap))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::super::NamedSetsBuilder;
    use super::*;

    /// The names of a snapshot: `None` for a provider filed under no name, `Some(j)` for
    /// `NAMES[j]` (pinned names first, in mixed case to test case-insensitivity).
    const NAMES: [&str; 7] = ["mt", "ZF", "sh", "Gz", "gz", "xx", "yY"];
    const PINNED: [&str; 2] = ["MT", "zf"];

    fn build(names: &[Option<usize>]) -> NamedSets {
        let mut b = NamedSetsBuilder::new(PINNED.into_iter(), names.len());
        for (i, n) in names.iter().enumerate() {
            if let Some(j) = n {
                b.add(NAMES[*j], i);
            }
        }
        b.finish()
    }

    /// Each name's members, by name (positions may differ; the sets may not).
    fn members(sets: &NamedSets) -> Vec<(String, Vec<usize>)> {
        let mut out: Vec<_> = (0..sets.len())
            .map(|k| {
                (
                    sets.name(k).to_ascii_lowercase(),
                    sets.set(k).to_bitset().iter().collect(),
                )
            })
            .collect();
        out.sort();
        out
    }

    proptest! {
        #[test]
        fn an_edit_files_providers_as_a_fresh_build(
            old in proptest::collection::vec(proptest::option::of(0usize..7), 0..150),
            removed in proptest::collection::vec(0u32..160, 0..60),
            added in proptest::collection::vec(proptest::option::of(0usize..7), 0..40),
        ) {
            let edit = SnapshotEdit::new(old.len(), removed, added.len());
            let before = build(&old);
            let survivors: Vec<Option<usize>> = (0..old.len())
                .filter(|&i| edit.new_index(i).is_some())
                .map(|i| old[i])
                .collect();
            let new: Vec<Option<usize>> = survivors.iter().chain(&added).copied().collect();
            let fresh = build(&new);
            let mut e = before.edit(&edit);
            let mut provisional = Vec::new();
            for (j, n) in added.iter().enumerate() {
                if let Some(n) = n {
                    provisional.push((e.add(NAMES[*n], edit.added().start + j), *n));
                }
            }
            let (after, remap) = e.finish();
            prop_assert_eq!(members(&after), members(&fresh));
            for k in 0..PINNED.len() {
                prop_assert_eq!(after.name(k), fresh.name(k));
                prop_assert!(matches!(after.set(k), ProviderSet::Dense(_)));
            }
            for name in NAMES.iter().chain(["none", "MT"].iter()) {
                let found = after.find(name).map(|k| after.name(k).to_ascii_lowercase());
                prop_assert_eq!(found, fresh.find(name).map(|k| fresh.name(k).to_ascii_lowercase()));
            }
            for (p, n) in provisional {
                let k = remap.as_ref().map_or(p, |r| r[p] as usize);
                prop_assert!(after.name(k).eq_ignore_ascii_case(NAMES[n]));
            }
        }
    }
}
