//! [`ValueIndex`]: one key's values → providers, stored flat so that a provider edit costs
//! a few passes over flat arrays rather than a set per value.
//!
//! A [`super::ParamIndex`] holds a [`ProviderSet`] per value in a hash map: for a key with
//! a value per provider (`host`, `address`, `timestamp`), carrying it over an edit copies
//! 100,000 sets and their keys at 100,000 providers. Here the distinct values are
//! one dictionary (one text buffer, an open-addressing table of value numbers), shared by
//! the index of the next snapshot while no new value appears, and the members of every
//! value are one array of positions with an offset per value (value `k`'s providers are
//! `members[starts[k]..starts[k + 1]]`). An edit renumbers the members (positions shift down
//! over the removed ones: a binary search over the removed positions per member), appends
//! the added providers to their values (a hash look-up each, new values appended to the
//! dictionary), and builds the few dense sets again; no allocation per value, no string
//! copied or hashed but the added providers'. A value left with no provider stays in the
//! dictionary with an empty range (invisible to [`ValueIndex::get`] and
//! [`ValueIndex::values`]) until such values outnumber the live ones, when the dictionary is
//! compacted.
//!
//! Reads ([`ValueIndex::get`], per call) hash the value once and probe the table: no lock,
//! no allocation. A value held by many providers (at least 1/32 of them, where a bitset is
//! smaller than the positions) is also held as a bitset, so a call combines it by words as
//! it would a dense [`ProviderSet`].
//!
//! Hand-written because no map crate gives an immutable, shareable dictionary plus a flat
//! member array (persistent maps such as `im` share structure per entry and allocate per
//! changed node; this is two `memcpy`s and one pass).

use std::hash::BuildHasher;
use std::sync::Arc;

use super::{ProviderSet, SetRef, member_of};
use crate::bitset::BitSet;
use crate::edit::SnapshotEdit;
use crate::snapshot::{Provider, Snapshot};

/// The distinct values of an index, numbered in order of first appearance.
#[derive(Debug, Clone)]
struct Dict {
    hasher: foldhash::fast::RandomState,
    /// Every value's text, concatenated.
    text: String,
    /// Value `k`'s text ends at `ends[k]` and starts where value `k - 1`'s ends.
    ends: Vec<usize>,
    /// Open addressing, a power of two, at most half full: 0 empty, else value number + 1.
    table: Vec<u32>,
}

impl Dict {
    fn with_capacity(values: usize) -> Self {
        Dict {
            hasher: foldhash::fast::RandomState::default(),
            text: String::new(),
            ends: Vec::with_capacity(values),
            table: vec![0; (values * 2).next_power_of_two().max(16)],
        }
    }

    fn len(&self) -> usize {
        self.ends.len()
    }

    fn text(&self, k: usize) -> &str {
        let start = if k == 0 { 0 } else { self.ends[k - 1] };
        &self.text[start..self.ends[k]]
    }

    /// The number of `value`, if present.
    fn find(&self, value: &str) -> Option<usize> {
        let mask = self.table.len() - 1;
        let mut i = self.hasher.hash_one(value) as usize & mask;
        loop {
            match self.table[i] {
                0 => return None,
                slot => {
                    let k = slot as usize - 1;
                    if self.text(k) == value {
                        return Some(k);
                    }
                }
            }
            i = (i + 1) & mask;
        }
    }

    /// Adds `value` (absent) and returns its number.
    fn insert(&mut self, value: &str) -> usize {
        let k = self.ends.len();
        self.text.push_str(value);
        self.ends.push(self.text.len());
        if (k + 1) * 2 > self.table.len() {
            self.table = vec![0; self.table.len() * 2];
            for j in 0..=k {
                self.place(j);
            }
        } else {
            self.place(k);
        }
        k
    }

    fn place(&mut self, k: usize) {
        let mask = self.table.len() - 1;
        let mut i = self.hasher.hash_one(self.text(k)) as usize & mask;
        while self.table[i] != 0 {
            i = (i + 1) & mask;
        }
        self.table[i] = k as u32 + 1;
    }

    fn heap_bytes(&self) -> usize {
        self.text.capacity() + self.ends.capacity() * 8 + self.table.capacity() * 4
    }
}

/// One key's exact values → the providers having each, and the providers without the key,
/// over one snapshot; carried over a [`SnapshotEdit`] in a few flat passes (see the module
/// documentation). Answers as a [`super::ParamIndex`] of the same key would.
#[derive(Debug, Clone)]
pub struct ValueIndex {
    dict: Arc<Dict>,
    /// Value `k`'s providers: `members[starts[k]..starts[k + 1]]` (`dict.len() + 1` entries).
    starts: Vec<u32>,
    /// Positions, ascending within each value.
    members: Vec<u32>,
    /// The values also held as bitsets (many providers), by value number, ascending.
    dense: Vec<(u32, BitSet)>,
    missing: ProviderSet,
    len: usize,
    /// Values with at least one provider.
    live: usize,
}

impl ValueIndex {
    /// The same index as `index` (a [`super::ParamIndex`]), without reading a provider.
    pub fn from_index(index: &super::ParamIndex) -> Self {
        let len = index.len();
        let mut dict = Dict::with_capacity(index.by_value.len());
        let mut of = Vec::new();
        for (v, set) in index.values() {
            let k = dict.insert(v) as u32;
            match set {
                ProviderSet::Dense(b) => of.extend(b.iter().map(|i| (k, i as u32))),
                ProviderSet::Sparse { indexes, .. } => of.extend(indexes.iter().map(|&i| (k, i))),
            }
        }
        Self::assemble(dict, &of, index.missing().clone(), len)
    }

    /// The index from `(value number, position)` pairs, positions ascending per value
    /// (counting sort by value: stable).
    fn assemble(dict: Dict, of: &[(u32, u32)], missing: ProviderSet, len: usize) -> Self {
        let mut starts = vec![0u32; dict.len() + 1];
        for &(k, _) in of {
            starts[k as usize + 1] += 1;
        }
        for k in 0..dict.len() {
            starts[k + 1] += starts[k];
        }
        let mut next = starts.clone();
        let mut members = vec![0u32; of.len()];
        for &(k, i) in of {
            members[next[k as usize] as usize] = i;
            next[k as usize] += 1;
        }
        let mut index = ValueIndex {
            dict: Arc::new(dict),
            starts,
            members,
            dense: Vec::new(),
            missing,
            len,
            live: 0,
        };
        index.finish();
        index
    }

    /// Counts the live values and builds the dense sets.
    fn finish(&mut self) {
        let mut live = 0;
        let mut dense = Vec::new();
        for k in 0..self.dict.len() {
            let m = self.members_of(k);
            if m.is_empty() {
                continue;
            }
            live += 1;
            if !ProviderSet::sparse_is_smaller(m.len(), self.len) {
                let set = BitSet::from_indexes(self.len, m.iter().map(|&i| i as usize));
                dense.push((k as u32, set));
            }
        }
        self.live = live;
        self.dense = dense;
    }

    fn members_of(&self, k: usize) -> &[u32] {
        &self.members[self.starts[k] as usize..self.starts[k + 1] as usize]
    }

    fn set(&self, k: usize) -> SetRef<'_> {
        if !self.dense.is_empty()
            && let Ok(d) = self.dense.binary_search_by_key(&(k as u32), |(j, _)| *j)
        {
            return SetRef::Dense(&self.dense[d].1);
        }
        SetRef::Sparse(self.members_of(k))
    }

    /// The index carried over `edit` to `snapshot` (the new one), reading `value_of` for the
    /// added providers only: answers as an index of `value_of` built over `snapshot`. Time:
    /// the members (a binary search over the removed positions each) and the values'
    /// offsets, the dictionary copied only when a new value appears, the dense sets built
    /// again, plus the added providers.
    pub fn edited<'s>(
        &self,
        edit: &SnapshotEdit,
        snapshot: &'s Snapshot,
        mut value_of: impl FnMut(&'s Provider) -> Option<&'s str>,
    ) -> Self {
        let len = edit.new_len();
        let mut grown: Option<Dict> = None;
        let mut added = Vec::with_capacity(edit.added().len());
        let mut added_missing = Vec::new();
        for i in edit.added() {
            match value_of(&snapshot.providers()[i]) {
                Some(v) => {
                    let k = match grown.as_ref().unwrap_or(&self.dict).find(v) {
                        Some(k) => k,
                        None => grown.get_or_insert_with(|| (*self.dict).clone()).insert(v),
                    };
                    added.push((k as u32, i as u32));
                }
                None => added_missing.push(i as u32),
            }
        }
        // By value; stable, so each value's positions stay ascending.
        added.sort_by_key(|&(k, _)| k);
        let dict = grown.map_or_else(|| self.dict.clone(), Arc::new);
        let removed = edit.removed();
        let old_values = self.starts.len() - 1;
        let mut starts = Vec::with_capacity(dict.len() + 1);
        let mut members = Vec::with_capacity(self.members.len() + added.len());
        starts.push(0u32);
        let mut a = 0;
        for k in 0..dict.len() {
            if k < old_values {
                let old = self.members_of(k);
                if removed.is_empty() {
                    members.extend_from_slice(old);
                } else {
                    for &m in old {
                        let r = removed.partition_point(|&x| x < m);
                        if removed.get(r) != Some(&m) {
                            members.push(m - r as u32);
                        }
                    }
                }
            }
            while let Some(&(j, i)) = added.get(a)
                && j as usize == k
            {
                members.push(i);
                a += 1;
            }
            starts.push(members.len() as u32);
        }
        let mut index = ValueIndex {
            dict,
            starts,
            members,
            dense: Vec::new(),
            missing: self.missing.edited(edit, member_of(&added_missing)),
            len,
            live: 0,
        };
        index.finish();
        if index.dict.len() > 64 && index.dict.len() > 2 * index.live {
            index.compact();
        }
        index
    }

    /// Drops the values no provider has left (renumbering the others).
    fn compact(&mut self) {
        let mut dict = Dict::with_capacity(self.live);
        let mut of = Vec::with_capacity(self.members.len());
        for k in 0..self.dict.len() {
            let m = self.members_of(k);
            if !m.is_empty() {
                let j = dict.insert(self.dict.text(k)) as u32;
                of.extend(m.iter().map(|&i| (j, i)));
            }
        }
        let missing = std::mem::replace(&mut self.missing, ProviderSet::empty(0));
        *self = Self::assemble(dict, &of, missing, self.len);
    }

    /// The providers whose value is `value` (`None`: no provider has it). No allocation.
    #[inline]
    pub fn get(&self, value: &str) -> Option<SetRef<'_>> {
        let k = self.dict.find(value)?;
        if k + 1 >= self.starts.len() || self.starts[k] == self.starts[k + 1] {
            return None;
        }
        Some(self.set(k))
    }

    /// Every value some provider has, with its providers (in no particular order).
    pub fn values(&self) -> impl Iterator<Item = (&str, SetRef<'_>)> + '_ {
        (0..self.starts.len() - 1)
            .filter(|&k| self.starts[k] != self.starts[k + 1])
            .map(|k| (self.dict.text(k), self.set(k)))
    }

    /// The providers without the key.
    pub fn missing(&self) -> &ProviderSet {
        &self.missing
    }

    /// The snapshot length.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the snapshot is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Approximate heap bytes held (the dictionary counted whole, though successive
    /// snapshots' indexes may share it).
    pub fn heap_bytes(&self) -> usize {
        self.dict.heap_bytes()
            + self.starts.capacity() * 4
            + self.members.capacity() * 4
            + self
                .dense
                .iter()
                .map(|(_, b)| b.words().len() * 8 + 8)
                .sum::<usize>()
            + self.missing.heap_bytes()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::super::ParamIndex;
    use super::*;

    fn snap(values: &[Option<u8>]) -> Snapshot {
        let text: String = values
            .iter()
            .enumerate()
            .map(|(i, v)| match v {
                Some(v) => format!("dubbo://10.0.{}.{}:1/s?g=v{v}\n", i / 250, i % 250),
                None => format!("dubbo://10.0.{}.{}:1/s\n", i / 250, i % 250),
            })
            .collect();
        Snapshot::parse_lines(1, &text).unwrap()
    }

    /// Every value's members, sorted by value, and the missing providers.
    fn contents(ix: &ValueIndex) -> (Vec<(String, Vec<usize>)>, Vec<usize>) {
        let mut values: Vec<(String, Vec<usize>)> = ix
            .values()
            .map(|(v, s)| (v.to_string(), s.to_bitset(ix.len()).iter().collect()))
            .collect();
        values.sort();
        (values, ix.missing().to_bitset().iter().collect())
    }

    fn param_contents(ix: &ParamIndex) -> (Vec<(String, Vec<usize>)>, Vec<usize>) {
        let mut values: Vec<(String, Vec<usize>)> = ix
            .values()
            .map(|(v, s)| (v.to_string(), s.to_bitset().iter().collect()))
            .collect();
        values.sort();
        (values, ix.missing().to_bitset().iter().collect())
    }

    proptest! {
        /// Converted from a `ParamIndex` or carried over a series of edits (values
        /// from a small set, so some are dense and some leave and come back; or near
        /// unique), the index holds exactly what a `ParamIndex` of the snapshot holds, and
        /// `get` answers alike for every value.
        #[test]
        fn an_edited_index_answers_as_a_fresh_one(
            base in proptest::collection::vec(proptest::option::of(0u8..40), 0..300),
            edits in proptest::collection::vec((
                proptest::collection::vec(0u32..320, 0..40),
                proptest::collection::vec(proptest::option::of(0u8..200), 0..40),
            ), 1..6),
        ) {
            let mut values = base;
            let mut s = snap(&values);
            let fresh = ParamIndex::build(&s, "g");
            let mut ix = ValueIndex::from_index(&fresh);
            prop_assert_eq!(contents(&ix), param_contents(&fresh));
            for (removed, added) in edits {
                let edit = SnapshotEdit::new(values.len(), removed, added.len());
                values = (0..values.len())
                    .filter(|&i| edit.new_index(i).is_some())
                    .map(|i| values[i])
                    .chain(added.iter().copied())
                    .collect();
                s = snap(&values);
                ix = ix.edited(&edit, &s, |p| p.get("g"));
                let fresh = ParamIndex::build(&s, "g");
                prop_assert_eq!(contents(&ix), param_contents(&fresh));
                for v in 0u8..200 {
                    let v = format!("v{v}");
                    let got = ix.get(&v).map(|s| s.to_bitset(ix.len()));
                    prop_assert_eq!(got, fresh.get(&v).map(ProviderSet::to_bitset));
                }
            }
        }
    }
}
