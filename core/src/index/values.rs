//! [`ValueIndex`]: one key's exact values → the providers having each, and the providers
//! without the key, over one snapshot: what the group, tag and affinity routers look a
//! request's value up in, and what the condition router's terms are resolved from.
//!
//! The distinct values are one dictionary (one text buffer, an open-addressing table of
//! value numbers), shared by the index of the next snapshot while no new value appears.
//! A value held by many providers (at least 1/32 of them, where a bitset is smaller than
//! the positions) is a bitset; the members of the other values are one array of positions
//! with an offset per value (value `k`'s providers are `members[starts[k]..starts[k + 1]]`),
//! so a key with a value per provider (`host`, `address`) costs a few bytes per provider and
//! no allocation per value.
//!
//! [`ValueIndex::edited`] carries the index over a provider edit: the members renumbered
//! (positions shift down over the removed ones), the bitsets carried by words, the added
//! providers appended to their values (a hash look-up each, new values appended to the
//! dictionary); no string copied or hashed but the added providers'. A value left with no
//! provider stays in the dictionary with an empty range (invisible to [`ValueIndex::get`]
//! and [`ValueIndex::values`]) until such values outnumber the live ones, when the
//! dictionary is compacted.
//!
//! Reads ([`ValueIndex::get`], per call) hash the value once and probe the table: no lock,
//! no allocation.
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
    /// Value `k`'s text is `text[bounds[k]..bounds[k + 1]]`.
    bounds: Vec<u32>,
    /// Open addressing, a power of two, at most half full: 0 empty, else value number + 1.
    table: Vec<u32>,
}

impl Dict {
    fn with_capacity(values: usize) -> Self {
        Dict {
            hasher: foldhash::fast::RandomState::default(),
            text: String::new(),
            bounds: {
                let mut b = Vec::with_capacity(values + 1);
                b.push(0);
                b
            },
            table: vec![0; (values * 2).next_power_of_two().max(16)],
        }
    }

    fn len(&self) -> usize {
        self.bounds.len() - 1
    }

    fn text(&self, k: usize) -> &str {
        &self.text[self.bounds[k] as usize..self.bounds[k + 1] as usize]
    }

    /// The number of `value`, if present (per call: inlined, bytes compared).
    #[inline]
    fn find(&self, value: &str) -> Option<usize> {
        let mask = self.table.len() - 1;
        let mut i = self.hasher.hash_one(value) as usize & mask;
        loop {
            let slot = self.table[i];
            if slot == 0 {
                return None;
            }
            let k = slot as usize - 1;
            let (start, end) = (self.bounds[k] as usize, self.bounds[k + 1] as usize);
            if self.text.as_bytes().get(start..end) == Some(value.as_bytes()) {
                return Some(k);
            }
            i = (i + 1) & mask;
        }
    }

    /// Adds `value` (absent) and returns its number.
    fn insert(&mut self, value: &str) -> usize {
        let k = self.len();
        self.text.push_str(value);
        self.bounds.push(self.text.len() as u32);
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

    /// The number of `value`, adding it when absent.
    fn find_or_insert(&mut self, value: &str) -> usize {
        match self.find(value) {
            Some(k) => k,
            None => self.insert(value),
        }
    }

    fn heap_bytes(&self) -> usize {
        self.text.capacity() + self.bounds.capacity() * 4 + self.table.capacity() * 4
    }
}

/// One key's exact values → the providers having each, and the providers without the key,
/// over one snapshot (see the module documentation).
#[derive(Debug, Clone)]
pub struct ValueIndex {
    dict: Arc<Dict>,
    /// Value `k`'s positions: `members[starts[k]..starts[k + 1]]` (`dict.len() + 1`
    /// entries); empty for a value held as a bitset.
    starts: Vec<u32>,
    /// Positions, ascending within each value.
    members: Vec<u32>,
    /// The values held as bitsets (many providers: at least 1/32 of them, so at most 32).
    dense: Vec<BitSet>,
    /// Per value, 0 when its members are in `members`, else `1 +` its place in `dense` (one
    /// byte per value: a call finds a dense value's set with one load).
    dense_at: Vec<u8>,
    missing: ProviderSet,
    len: usize,
    /// Values with at least one provider.
    live: usize,
}

/// Builds a [`ValueIndex`]'s sets value by value, in value number order.
struct Sets {
    len: usize,
    starts: Vec<u32>,
    members: Vec<u32>,
    dense: Vec<BitSet>,
    dense_at: Vec<u8>,
    live: usize,
}

impl Sets {
    fn new(values: usize, members: usize, len: usize) -> Self {
        let mut starts = Vec::with_capacity(values + 1);
        starts.push(0);
        Sets {
            len,
            starts,
            members: Vec::with_capacity(members),
            dense: Vec::new(),
            dense_at: Vec::with_capacity(values),
            live: 0,
        }
    }

    /// Ends the next value, whose positions were pushed to `members` since the last one
    /// (`bits`: a bitset of further members), storing it in the smaller form.
    fn close(&mut self, bits: Option<BitSet>) {
        let from = *self.starts.last().unwrap_or(&0) as usize;
        let count = self.members.len() - from + bits.as_ref().map_or(0, BitSet::count);
        if count > 0 {
            self.live += 1;
        }
        if ProviderSet::sparse_is_smaller(count, self.len) {
            if let Some(b) = bits {
                let mut all: Vec<u32> = b.iter().map(|i| i as u32).collect();
                all.extend_from_slice(&self.members[from..]);
                all.sort_unstable();
                self.members.truncate(from);
                self.members.extend(all);
            }
            self.dense_at.push(0);
        } else {
            let mut b = bits.unwrap_or_else(|| BitSet::empty(self.len));
            for &i in &self.members[from..] {
                b.insert(i as usize);
            }
            self.members.truncate(from);
            self.dense.push(b);
            self.dense_at.push(self.dense.len() as u8);
        }
        self.starts.push(self.members.len() as u32);
    }

    fn finish(mut self, dict: Arc<Dict>, missing: ProviderSet) -> ValueIndex {
        // Reserved for every member; the dense values' went to bitsets.
        self.members.shrink_to_fit();
        ValueIndex {
            dict,
            starts: self.starts,
            members: self.members,
            dense: self.dense,
            dense_at: self.dense_at,
            missing,
            len: self.len,
            live: self.live,
        }
    }
}

impl ValueIndex {
    /// Indexes `key` (a parameter or a derived key, see [`crate::Url::get`]) over `snapshot`.
    pub fn build(snapshot: &Snapshot, key: &str) -> Self {
        let key = crate::UrlKey::new(key);
        Self::build_with(snapshot, |p| p.get_key(&key))
    }

    /// Indexes the value `value_of(provider)` over `snapshot` (e.g. lower-cased).
    pub(crate) fn build_with<'s>(
        snapshot: &'s Snapshot,
        mut value_of: impl FnMut(&'s Provider) -> Option<&'s str>,
    ) -> Self {
        let len = snapshot.len();
        let mut dict = Dict::with_capacity(16);
        let mut of = Vec::with_capacity(len);
        let mut missing = Vec::new();
        for (i, p) in snapshot.providers().iter().enumerate() {
            match value_of(p) {
                Some(v) => of.push((dict.find_or_insert(v) as u32, i as u32)),
                None => missing.push(i as u32),
            }
        }
        Self::assemble(dict, &of, ProviderSet::from_sorted(missing, len), len)
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
        let mut sorted = vec![0u32; of.len()];
        for &(k, i) in of {
            sorted[next[k as usize] as usize] = i;
            next[k as usize] += 1;
        }
        let mut sets = Sets::new(dict.len(), of.len(), len);
        for k in 0..dict.len() {
            sets.members
                .extend_from_slice(&sorted[starts[k] as usize..starts[k + 1] as usize]);
            sets.close(None);
        }
        sets.finish(Arc::new(dict), missing)
    }

    fn members_of(&self, k: usize) -> &[u32] {
        &self.members[self.starts[k] as usize..self.starts[k + 1] as usize]
    }

    #[inline]
    fn dense_of(&self, k: usize) -> Option<&BitSet> {
        let d = *self.dense_at.get(k)? as usize;
        d.checked_sub(1).map(|d| &self.dense[d])
    }

    /// Value `k`'s providers, `None` when it has none.
    #[inline]
    fn set(&self, k: usize) -> Option<SetRef<'_>> {
        let d = *self.dense_at.get(k)? as usize;
        if d > 0 {
            return Some(SetRef::Dense(&self.dense[d - 1]));
        }
        let m = self.members_of(k);
        (!m.is_empty()).then_some(SetRef::Sparse(m))
    }

    /// The index carried over `edit` to `snapshot` (the new one), reading `value_of` for the
    /// added providers only: answers as a fresh build over `snapshot` ([`ValueIndex::build`]). Time:
    /// the members (a binary search over the removed positions each), the bitsets' words
    /// and the values' offsets, the dictionary copied only when a new value appears, plus
    /// the added providers.
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
        let mut sets = Sets::new(dict.len(), self.members.len() + added.len(), len);
        let mut a = 0;
        for k in 0..dict.len() {
            let from = a;
            while added.get(a).is_some_and(|&(j, _)| j as usize == k) {
                a += 1;
            }
            let new: Vec<u32> = added[from..a].iter().map(|&(_, i)| i).collect();
            let dense = (k < old_values).then(|| self.dense_of(k)).flatten();
            if let Some(old) = dense {
                sets.close(Some(edit.bitset(old, member_of(&new))));
                continue;
            }
            if k < old_values {
                for &m in self.members_of(k) {
                    let r = removed.partition_point(|&x| x < m);
                    if removed.get(r) != Some(&m) {
                        sets.members.push(m - r as u32);
                    }
                }
            }
            sets.members.extend_from_slice(&new);
            sets.close(None);
        }
        let missing = self.missing.edited(edit, member_of(&added_missing));
        let mut index = sets.finish(dict, missing);
        if index.dict.len() > 64 && index.dict.len() > 2 * index.live {
            index.compact();
        }
        index
    }

    /// Drops the values no provider has left (renumbering the others).
    fn compact(&mut self) {
        let mut dict = Dict::with_capacity(self.live);
        let mut of = Vec::with_capacity(self.len);
        for k in 0..self.dict.len() {
            if let Some(set) = self.set(k) {
                let j = dict.insert(self.dict.text(k)) as u32;
                match set {
                    SetRef::Dense(b) => of.extend(b.iter().map(|i| (j, i as u32))),
                    SetRef::Sparse(m) => of.extend(m.iter().map(|&i| (j, i))),
                }
            }
        }
        let missing = std::mem::replace(&mut self.missing, ProviderSet::empty(0));
        *self = Self::assemble(dict, &of, missing, self.len);
    }

    /// The providers whose value is `value` (`None`: no provider has it). No allocation.
    #[inline]
    pub fn get(&self, value: &str) -> Option<SetRef<'_>> {
        self.set(self.dict.find(value)?)
    }

    /// Every value some provider has, with its providers (in no particular order).
    pub fn values(&self) -> impl Iterator<Item = (&str, SetRef<'_>)> + '_ {
        (0..self.starts.len() - 1).filter_map(|k| Some((self.dict.text(k), self.set(k)?)))
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
                .map(|b| b.words().len() * 8 + 8)
                .sum::<usize>()
            + self.dense_at.capacity()
            + self.missing.heap_bytes()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

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

    /// What an index of `values` holds, computed the obvious way.
    fn model(values: &[Option<u8>]) -> (Vec<(String, Vec<usize>)>, Vec<usize>) {
        let mut by: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        let mut missing = Vec::new();
        for (i, v) in values.iter().enumerate() {
            match v {
                Some(v) => by.entry(format!("v{v}")).or_default().push(i),
                None => missing.push(i),
            }
        }
        (by.into_iter().collect(), missing)
    }

    #[test]
    fn groups_values_and_missing() {
        let s = Snapshot::parse_lines(
            1,
            "dubbo://10.0.0.0:1/s?g=a\ndubbo://10.0.0.1:1/s\ndubbo://10.0.0.2:1/s?g=b\n\
             dubbo://10.0.0.3:1/s?g=a\n",
        )
        .unwrap();
        let ix = ValueIndex::build(&s, "g");
        let members = |v: &str| ix.get(v).map(|s| s.to_bitset(4).iter().collect::<Vec<_>>());
        assert_eq!(members("a"), Some(vec![0, 3]));
        assert_eq!(ix.missing().to_bitset().iter().collect::<Vec<_>>(), [1]);
        assert!(ix.get("c").is_none());
        let hosts = ValueIndex::build(&s, "host");
        assert_eq!(hosts.get("10.0.0.2").unwrap().count(), 1);
    }

    proptest! {
        /// Built or carried over a series of edits (values from a small set, so some are
        /// dense, some change form and some leave and come back; or near unique), the
        /// index holds exactly each value's providers, and `get` answers alike for every
        /// value.
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
            let mut ix = ValueIndex::build_with(&s, |p| p.get("g"));
            prop_assert_eq!(contents(&ix), model(&values));
            for (removed, added) in edits {
                let edit = SnapshotEdit::new(values.len(), removed, added.len());
                values = (0..values.len())
                    .filter(|&i| edit.new_index(i).is_some())
                    .map(|i| values[i])
                    .chain(added.iter().copied())
                    .collect();
                s = snap(&values);
                ix = ix.edited(&edit, &s, |p| p.get("g"));
                let fresh = ValueIndex::build(&s, "g");
                prop_assert_eq!(contents(&ix), model(&values));
                prop_assert_eq!(contents(&fresh), model(&values));
                for v in 0u8..200 {
                    let v = format!("v{v}");
                    let got = ix.get(&v).map(|s| s.to_bitset(ix.len()));
                    prop_assert_eq!(got, fresh.get(&v).map(|s| s.to_bitset(fresh.len())));
                }
            }
        }
    }
}
