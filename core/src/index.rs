//! Per-snapshot indexes: provider sets and parameter value → provider set.
//!
//! Built when a snapshot or rule changes, read per call. A [`ProviderSet`] is dense (a
//! bitset) when it holds many providers and sparse (sorted indexes) when it holds few, so a
//! high-cardinality parameter (`host`, `address`) costs memory in proportion to the
//! providers, not to providers × values.
//!
//! - [`ValueIndex`]: one key's exact values → providers, and the providers without it,
//!   stored flat so that a key with a value per provider costs a few bytes per provider and
//!   a provider edit a few passes over arrays; its sets are read as [`SetRef`]s.
//! - [`NamedSets`]: names compared case-insensitively → providers, some names pinned at
//!   fixed positions (a rule's regions or datacenters), looked up without allocating;
//!   [`NamedSetsBuilder::with_names`] builds them again over an edited snapshot from each
//!   provider's position, kept by the router.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::hash::Hasher;

use crate::bitset::{BitSet, Candidates};

mod values;
pub use values::ValueIndex;

/// A set of providers of one snapshot, stored dense or sparse by size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderSet {
    /// A bitset over the snapshot.
    Dense(BitSet),
    /// Sorted provider indexes, with the snapshot length.
    Sparse {
        /// Sorted, distinct indexes.
        indexes: Box<[u32]>,
        /// The snapshot length.
        len: usize,
    },
}

impl ProviderSet {
    /// Stores `set` in the smaller of the two forms.
    pub fn from_bitset(set: BitSet) -> Self {
        if Self::sparse_is_smaller(set.count(), set.len()) {
            ProviderSet::Sparse {
                indexes: set.iter().map(|i| i as u32).collect(),
                len: set.len(),
            }
        } else {
            ProviderSet::Dense(set)
        }
    }

    /// Stores sorted, distinct provider indexes over `len` providers in the smaller of the
    /// two forms.
    pub fn from_sorted(indexes: Vec<u32>, len: usize) -> Self {
        debug_assert!(indexes.windows(2).all(|w| w[0] < w[1]));
        if Self::sparse_is_smaller(indexes.len(), len) {
            ProviderSet::Sparse {
                indexes: indexes.into_boxed_slice(),
                len,
            }
        } else {
            ProviderSet::Dense(BitSet::from_indexes(
                len,
                indexes.into_iter().map(|i| i as usize),
            ))
        }
    }

    /// A sparse index costs 4 bytes per member, a dense set 8 bytes per 64 providers.
    fn sparse_is_smaller(count: usize, len: usize) -> bool {
        count * 4 < len.div_ceil(64) * 8
    }

    /// The empty set over `len` providers.
    pub fn empty(len: usize) -> Self {
        ProviderSet::Sparse {
            indexes: Box::new([]),
            len,
        }
    }

    /// The number of members.
    #[inline]
    pub fn count(&self) -> usize {
        self.as_set_ref().count()
    }

    /// True when `i` is a member.
    #[inline]
    pub fn contains(&self, i: usize) -> bool {
        self.as_set_ref().contains(i)
    }

    /// True when the set and `candidates` share a member.
    #[inline]
    pub fn intersects(&self, candidates: &Candidates) -> bool {
        self.as_set_ref().intersects(candidates)
    }

    /// The number of members shared with `candidates`.
    #[inline]
    pub fn count_and(&self, candidates: &Candidates) -> usize {
        self.as_set_ref().count_and(candidates)
    }

    /// `candidates &= self`, without allocating.
    #[inline]
    pub fn and_into(&self, candidates: &mut Candidates) {
        self.as_set_ref().and_into(candidates);
    }

    /// The set as a [`SetRef`] (what [`ValueIndex`] gives): every read of a set is
    /// [`SetRef`]'s, for stored and borrowed sets alike.
    #[inline]
    pub fn as_set_ref(&self) -> SetRef<'_> {
        match self {
            ProviderSet::Dense(b) => SetRef::Dense(b),
            ProviderSet::Sparse { indexes, .. } => SetRef::Sparse(indexes),
        }
    }

    /// `dst |= self`, without allocating.
    pub fn or_into(&self, dst: &mut BitSet) {
        self.as_set_ref().or_into(dst);
    }

    /// Word `w` of the set as a bitset word (for combining in [`BitSet::and_with`]).
    /// Dense sets answer in O(1); sparse sets search their indexes.
    ///
    /// Inlined: routers call it once per word in their per-call loops, and an out-of-line
    /// call per word costs more than the word operation itself (callgrind over
    /// `benches/examples/call_path.rs`).
    #[inline]
    pub fn word(&self, w: usize) -> u64 {
        self.as_set_ref().word(w)
    }

    /// The set as a bitset.
    pub fn to_bitset(&self) -> BitSet {
        match self {
            ProviderSet::Dense(b) => b.clone(),
            ProviderSet::Sparse { indexes, len } => {
                BitSet::from_indexes(*len, indexes.iter().map(|&i| i as usize))
            }
        }
    }

    /// The set carried over `edit` to the new snapshot: removed members deleted, survivors
    /// renumbered, each added position `i` a member when `added(i)`; stored in the smaller
    /// form for its new size. Time: the set's size plus the added providers.
    pub fn edited(&self, edit: &crate::SnapshotEdit, added: impl FnMut(usize) -> bool) -> Self {
        match self {
            ProviderSet::Dense(b) => Self::from_bitset(edit.bitset(b, added)),
            ProviderSet::Sparse { indexes, .. } => {
                Self::from_sorted(edit.indexes(indexes, added), edit.new_len())
            }
        }
    }

    /// Approximate heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        match self {
            ProviderSet::Dense(b) => b.words().len() * 8,
            ProviderSet::Sparse { indexes, .. } => indexes.len() * 4,
        }
    }
}

/// `candidates &= {indexes}` (sorted positions): O(members) word updates plus clearing the
/// words between them (`fill`, a memset): no per-word search, so a set of a few providers
/// over a large snapshot costs little more than its members.
fn sparse_and_into(indexes: &[u32], candidates: &mut Candidates) {
    let words = candidates.words_mut();
    let mut cleared_to = 0;
    let mut k = 0;
    while let Some(&first) = indexes.get(k) {
        let w = first as usize / 64;
        if w >= words.len() {
            break;
        }
        let mut mask = 0u64;
        while let Some(&i) = indexes.get(k)
            && i as usize / 64 == w
        {
            mask |= 1 << (i % 64);
            k += 1;
        }
        words[cleared_to..w].fill(0);
        words[w] &= mask;
        cleared_to = w + 1;
    }
    words[cleared_to..].fill(0);
}

/// A borrowed set of providers: a bitset, or sorted positions. What a [`ValueIndex`] gives
/// for a value ([`ProviderSet::as_set_ref`] gives one for a stored set); read per call
/// without allocating.
#[derive(Debug, Clone, Copy)]
pub enum SetRef<'a> {
    /// A bitset over the snapshot.
    Dense(&'a BitSet),
    /// Sorted, distinct positions.
    Sparse(&'a [u32]),
}

impl<'a> From<&'a ProviderSet> for SetRef<'a> {
    fn from(set: &'a ProviderSet) -> Self {
        set.as_set_ref()
    }
}

impl SetRef<'_> {
    /// The number of members.
    #[inline]
    pub fn count(&self) -> usize {
        match self {
            SetRef::Dense(b) => b.count(),
            SetRef::Sparse(ix) => ix.len(),
        }
    }

    /// True when `i` is a member.
    #[inline]
    pub fn contains(&self, i: usize) -> bool {
        match self {
            SetRef::Dense(b) => b.contains(i),
            SetRef::Sparse(ix) => ix.binary_search(&(i as u32)).is_ok(),
        }
    }

    /// True when the set and `candidates` share a member.
    #[inline]
    pub fn intersects(&self, candidates: &Candidates) -> bool {
        match self {
            SetRef::Dense(b) => b.intersects(candidates),
            SetRef::Sparse(ix) => ix.iter().any(|&i| candidates.contains(i as usize)),
        }
    }

    /// The number of members shared with `candidates`.
    pub fn count_and(&self, candidates: &Candidates) -> usize {
        match self {
            SetRef::Dense(b) => b.count_and(candidates),
            SetRef::Sparse(ix) => ix
                .iter()
                .filter(|&&i| candidates.contains(i as usize))
                .count(),
        }
    }

    /// `candidates &= self`, without allocating.
    #[inline]
    pub fn and_into(&self, candidates: &mut Candidates) {
        match self {
            SetRef::Dense(b) => candidates.and_assign(b),
            SetRef::Sparse(ix) => sparse_and_into(ix, candidates),
        }
    }

    /// `dst |= self`, without allocating.
    pub fn or_into(&self, dst: &mut BitSet) {
        match self {
            SetRef::Dense(b) => dst.or_assign(b),
            SetRef::Sparse(ix) => {
                for &i in ix.iter() {
                    dst.insert(i as usize);
                }
            }
        }
    }

    /// The set stored in the smaller form over `len` providers.
    pub fn to_provider_set(&self, len: usize) -> ProviderSet {
        match self {
            SetRef::Dense(b) => ProviderSet::Dense((*b).clone()),
            SetRef::Sparse(ix) => ProviderSet::from_sorted(ix.to_vec(), len),
        }
    }

    /// `candidates &= !self`, without allocating.
    #[inline]
    pub fn and_not_into(&self, candidates: &mut Candidates) {
        match self {
            SetRef::Dense(b) => candidates.and_not_assign(b),
            SetRef::Sparse(ix) => {
                for &i in ix.iter() {
                    candidates.remove(i as usize);
                }
            }
        }
    }

    /// Word `w` of the set as a bitset word (see [`ProviderSet::word`]).
    #[inline]
    pub fn word(&self, w: usize) -> u64 {
        match self {
            SetRef::Dense(b) => b.words().get(w).copied().unwrap_or(0),
            SetRef::Sparse(ix) => sparse_word(ix, w),
        }
    }

    /// The set as a bitset over `len` providers.
    pub fn to_bitset(&self, len: usize) -> BitSet {
        match self {
            SetRef::Dense(b) => (*b).clone(),
            SetRef::Sparse(ix) => BitSet::from_indexes(len, ix.iter().map(|&i| i as usize)),
        }
    }
}

/// Membership in a sorted list, asked in increasing position order (as the carry-over
/// functions of an edit ask about added positions): a cursor, no search.
fn member_of(list: &[u32]) -> impl FnMut(usize) -> bool + '_ {
    let mut k = 0;
    move |i| {
        while list.get(k).is_some_and(|&x| (x as usize) < i) {
            k += 1;
        }
        list.get(k) == Some(&(i as u32))
    }
}

/// Word `w` of a sparse set: a binary search for the word's first index, then its bits.
fn sparse_word(indexes: &[u32], w: usize) -> u64 {
    let lo = (w * 64) as u32;
    let start = indexes.partition_point(|&i| i < lo);
    indexes[start..]
        .iter()
        .take_while(|&&i| (i as usize) / 64 == w)
        .fold(0, |m, &i| m | 1 << (i % 64))
}

/// Names (regions, datacenters...) compared case-insensitively (ASCII) → provider sets over
/// one snapshot, each at a fixed position.
///
/// The pinned names (a rule's, say) come first, at the positions given to
/// [`NamedSetsBuilder::new`], as dense sets; the other names seen in the snapshot follow,
/// dense or sparse by size, stored lower-cased and found by a case-insensitive hash. So a
/// parameter with many distinct values (a misconfigured `idc_param: host`, say) costs memory
/// and time in proportion to the providers, and a lookup never allocates nor scans them.
/// Unlike [`ValueIndex`] (exact values, keyed by the value), a set is addressed by its
/// position, so a compiled rule can refer to its names by index.
#[derive(Debug, Clone)]
pub struct NamedSets {
    sets: Vec<(Box<str>, ProviderSet)>,
    pinned: usize,
    /// [`caseless_hash`] of each other name → its position.
    others: HashMap<u64, usize>,
    /// Other names whose hash an earlier name already has (practically none).
    collided: Vec<usize>,
}

/// A hash of `name` lower-cased (ASCII), computed without allocating.
fn caseless_hash(name: &str) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    for b in name.bytes() {
        h.write_u8(b.to_ascii_lowercase());
    }
    h.finish()
}

impl NamedSets {
    /// The position of `name` (case-insensitive), without allocating: a short scan of the
    /// pinned names, then a hash lookup.
    pub fn find(&self, name: &str) -> Option<usize> {
        if let Some(i) = self.sets[..self.pinned]
            .iter()
            .position(|(k, _)| k.eq_ignore_ascii_case(name))
        {
            return Some(i);
        }
        if self.others.is_empty() {
            return None;
        }
        let is = |i: &usize| self.sets[*i].0.eq_ignore_ascii_case(name);
        let &first = self.others.get(&caseless_hash(name))?;
        if is(&first) {
            Some(first)
        } else {
            self.collided.iter().copied().find(is)
        }
    }
    /// The name at position `i` (pinned names as given, others lower-cased).
    pub fn name(&self, i: usize) -> &str {
        &self.sets[i].0
    }
    /// The providers at position `i`.
    pub fn set(&self, i: usize) -> &ProviderSet {
        &self.sets[i].1
    }
    /// The number of names.
    pub fn len(&self) -> usize {
        self.sets.len()
    }
    /// True when there is no name.
    pub fn is_empty(&self) -> bool {
        self.sets.is_empty()
    }
}

/// Builds [`NamedSets`] in one pass over a snapshot.
#[derive(Debug)]
pub struct NamedSetsBuilder {
    n: usize,
    pinned: Vec<(Box<str>, BitSet)>,
    /// Other names: lower-cased name → index into `members`.
    others: HashMap<Box<str>, usize>,
    /// Other names' members, in increasing provider order.
    members: Vec<(Box<str>, Vec<u32>)>,
    lower: String,
}

impl NamedSetsBuilder {
    /// A builder over `n` providers with `pinned` names at positions 0, 1, ...
    pub fn new<'a>(pinned: impl Iterator<Item = &'a str>, n: usize) -> Self {
        NamedSetsBuilder {
            n,
            pinned: pinned.map(|k| (k.into(), BitSet::empty(n))).collect(),
            others: HashMap::new(),
            members: Vec::new(),
            lower: String::new(),
        }
    }

    /// Adds provider `i` to the set of `name` (case-insensitive); returns the set's
    /// position. Providers must be added in increasing order.
    pub fn add(&mut self, name: &str, i: usize) -> usize {
        if let Some(k) = self
            .pinned
            .iter()
            .position(|(r, _)| r.eq_ignore_ascii_case(name))
        {
            self.pinned[k].1.insert(i);
            return k;
        }
        self.lower.clear();
        self.lower.push_str(name);
        self.lower.make_ascii_lowercase();
        let m = match self.others.get(self.lower.as_str()) {
            Some(&m) => m,
            None => {
                let m = self.members.len();
                self.others.insert(self.lower.as_str().into(), m);
                self.members.push((self.lower.as_str().into(), Vec::new()));
                m
            }
        };
        self.members[m].1.push(i as u32);
        self.pinned.len() + m
    }

    /// A builder over `n` providers with the names of `sets` at their positions (its pinned
    /// names pinned): what a preparation carried over a provider edit files the surviving
    /// providers into by position ([`NamedSetsBuilder::add_to`], from the table it kept)
    /// and the added ones by name.
    pub fn with_names(sets: &NamedSets, n: usize) -> Self {
        let mut builder = Self::new(sets.sets[..sets.pinned].iter().map(|(k, _)| &**k), n);
        for (m, (name, _)) in sets.sets[sets.pinned..].iter().enumerate() {
            builder.others.insert(name.clone(), m);
            builder.members.push((name.clone(), Vec::new()));
        }
        builder
    }

    /// Adds provider `i` to the set at position `k` (as [`NamedSetsBuilder::add`] does).
    pub fn add_to(&mut self, k: usize, i: usize) {
        match self.pinned.get_mut(k) {
            Some(p) => p.1.insert(i),
            None => self.members[k - self.pinned.len()].1.push(i as u32),
        }
    }

    /// The sets. A name other than a pinned one that no provider has (left from
    /// [`NamedSetsBuilder::with_names`]) is dropped and the positions after it move down:
    /// `table` (each provider's position, [`crate::DegradedTally::NONE`] for none) is
    /// renumbered to match.
    pub fn finish(mut self, table: &mut [u32]) -> NamedSets {
        let n = self.n;
        let pinned = self.pinned.len();
        if self.members.iter().any(|(_, m)| m.is_empty()) {
            let mut kept = pinned as u32;
            let remap: Vec<u32> = self
                .members
                .iter()
                .map(|(_, m)| {
                    kept += u32::from(!m.is_empty());
                    if m.is_empty() { u32::MAX } else { kept - 1 }
                })
                .collect();
            for k in table.iter_mut() {
                if let Some(&to) = (*k as usize).checked_sub(pinned).and_then(|m| remap.get(m)) {
                    *k = to;
                }
            }
            self.members.retain(|(_, m)| !m.is_empty());
        }
        let mut sets: Vec<(Box<str>, ProviderSet)> = self
            .pinned
            .into_iter()
            .map(|(k, b)| (k, ProviderSet::Dense(b)))
            .collect();
        for (name, members) in self.members {
            // Sorted and distinct: providers were added in increasing order.
            sets.push((name, ProviderSet::from_sorted(members, n)));
        }
        let mut others = HashMap::with_capacity(sets.len() - pinned);
        let mut collided = Vec::new();
        for (i, (name, _)) in sets.iter().enumerate().skip(pinned) {
            match others.entry(caseless_hash(name)) {
                Entry::Vacant(e) => {
                    e.insert(i);
                }
                Entry::Occupied(_) => collided.push(i),
            }
        }
        NamedSets {
            sets,
            pinned,
            others,
            collided,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::Snapshot;
    use proptest::prelude::*;

    fn snap(values: &[Option<&str>]) -> Snapshot {
        let text: String = values
            .iter()
            .enumerate()
            .map(|(i, v)| match v {
                Some(v) => format!("dubbo://10.0.0.{i}:1/s?g={v}\n"),
                None => format!("dubbo://10.0.0.{i}:1/s\n"),
            })
            .collect();
        Snapshot::parse_lines(1, &text).unwrap()
    }

    #[test]
    fn named_sets_pin_names_and_find_any_case() {
        let s = snap(&[Some("MT"), Some("zf"), None, Some("Sh"), Some("sh")]);
        let mut b = NamedSetsBuilder::new(["mt", "gone"].into_iter(), s.len());
        for (i, p) in s.providers().iter().enumerate() {
            if let Some(v) = p.get("g") {
                b.add(v, i);
            }
        }
        b.add_to(1, 2);
        let sets = b.finish(&mut []);
        assert_eq!(sets.len(), 4);
        assert_eq!(sets.find("Mt"), Some(0));
        assert_eq!(sets.find("GONE"), Some(1));
        assert_eq!(sets.find("ZF"), Some(2));
        assert_eq!(sets.find("sH"), Some(3));
        assert_eq!(sets.find("nope"), None);
        assert_eq!((sets.name(0), sets.name(3)), ("mt", "sh"));
        let members = |k: usize| sets.set(k).to_bitset().iter().collect::<Vec<_>>();
        assert_eq!(
            (members(0), members(1), members(3)),
            (vec![0], vec![2], vec![3, 4])
        );
    }

    /// The names of a snapshot for the builder tests: `None` for a provider filed under no
    /// name, `Some(j)` for `NAMES[j]` (pinned names first, in mixed case to test
    /// case-insensitivity).
    const NAMES: [&str; 7] = ["mt", "ZF", "sh", "Gz", "gz", "xx", "yY"];
    const PINNED: [&str; 2] = ["MT", "zf"];

    fn build_names(names: &[Option<usize>]) -> (NamedSets, Vec<u32>) {
        let mut b = NamedSetsBuilder::new(PINNED.into_iter(), names.len());
        let mut table: Vec<u32> = names
            .iter()
            .enumerate()
            .map(|(i, n)| n.map_or(crate::DegradedTally::NONE, |j| b.add(NAMES[j], i) as u32))
            .collect();
        (b.finish(&mut table), table)
    }

    /// Each name's members, by name (positions may differ; the sets may not).
    fn named_members(sets: &NamedSets) -> Vec<(String, Vec<usize>)> {
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
        /// Sets built again over an edited snapshot from the old names, the survivors'
        /// positions and the added providers' names hold what a fresh build holds (a name
        /// left with no provider dropped, pinned names kept dense at their positions), and
        /// the renumbered table names each provider's set.
        #[test]
        fn names_built_again_after_an_edit_file_providers_as_a_fresh_build(
            old in proptest::collection::vec(proptest::option::of(0usize..7), 0..150),
            removed in proptest::collection::vec(0u32..160, 0..60),
            added in proptest::collection::vec(proptest::option::of(0usize..7), 0..40),
        ) {
            let edit = crate::SnapshotEdit::new(old.len(), removed, added.len());
            let (before, table) = build_names(&old);
            let survivors: Vec<Option<usize>> = (0..old.len())
                .filter(|&i| edit.new_index(i).is_some())
                .map(|i| old[i])
                .collect();
            let new: Vec<Option<usize>> = survivors.iter().chain(&added).copied().collect();
            let (fresh, _) = build_names(&new);
            let mut b = NamedSetsBuilder::with_names(&before, new.len());
            let mut table = edit.table(&table, |_| crate::DegradedTally::NONE);
            for (i, k) in table.iter_mut().enumerate() {
                match new[i] {
                    Some(j) if i >= edit.added().start => *k = b.add(NAMES[j], i) as u32,
                    Some(_) => b.add_to(*k as usize, i),
                    None => {}
                }
            }
            let after = b.finish(&mut table);
            prop_assert_eq!(named_members(&after), named_members(&fresh));
            for k in 0..PINNED.len() {
                prop_assert_eq!(after.name(k), fresh.name(k));
                prop_assert!(matches!(after.set(k), ProviderSet::Dense(_)));
            }
            for name in NAMES.iter().chain(["none", "MT"].iter()) {
                let found = after.find(name).map(|k| after.name(k).to_ascii_lowercase());
                prop_assert_eq!(found, fresh.find(name).map(|k| fresh.name(k).to_ascii_lowercase()));
            }
            for (i, n) in new.iter().enumerate() {
                match n {
                    Some(j) => prop_assert!(after.name(table[i] as usize).eq_ignore_ascii_case(NAMES[*j])),
                    None => prop_assert_eq!(table[i], crate::DegradedTally::NONE),
                }
            }
        }
    }

    /// A key resolved once reads every URL as `Url::get` does: derived keys, present and
    /// absent parameters, a key never interned, a key first interned after the `UrlKey`
    /// was made, and URLs whose keys sit at different positions (the remembered position
    /// misses).
    #[test]
    fn a_url_key_reads_as_get() {
        let late = crate::UrlKey::new("late-key-of-the-url-key-test");
        let urls = [
            "dubbo://10.0.0.1:20880/s?a=1&b=2&g=x&weight=100",
            "dubbo://10.0.0.2/s?g=y&zz=3",
            "dubbo://[::1]:7/s?b=&late-key-of-the-url-key-test=v&weight=7",
            "tri://h/p",
            "dubbo://10.0.0.3:1/s?weight=5&a=%20x&g=x",
        ]
        .map(|u| crate::Url::parse(u).unwrap());
        let keys = [
            "protocol",
            "host",
            "port",
            "path",
            "address",
            "a",
            "b",
            "g",
            "zz",
            "weight",
            "never-a-key-anywhere",
            "late-key-of-the-url-key-test",
        ];
        for key in keys {
            let k = crate::UrlKey::new(key);
            for _ in 0..2 {
                for u in &urls {
                    assert_eq!(u.get_key(&k), u.get(key), "{key} of {u}");
                    assert_eq!(u.get_key(&late), u.get(late.as_str()), "{u}");
                }
            }
        }
    }

    proptest! {
        #[test]
        fn sparse_and_dense_agree(
            members in proptest::collection::btree_set(0usize..500, 0..60),
            cands in proptest::collection::btree_set(0usize..500, 0..400),
        ) {
            let set = BitSet::from_indexes(500, members.iter().copied());
            let sparse = ProviderSet::Sparse {
                indexes: members.iter().map(|&i| i as u32).collect(),
                len: 500,
            };
            let dense = ProviderSet::Dense(set.clone());
            let c = BitSet::from_indexes(500, cands.iter().copied());
            for s in [&sparse, &dense] {
                prop_assert_eq!(s.intersects(&c), set.intersects(&c));
                prop_assert_eq!(s.count_and(&c), set.count_and(&c));
                let mut a = c.clone();
                s.and_into(&mut a);
                let mut b = c.clone();
                b.and_assign(&set);
                prop_assert_eq!(&a, &b);
                let mut a = c.clone();
                s.or_into(&mut a);
                let mut b = c.clone();
                b.or_assign(&set);
                prop_assert_eq!(&a, &b);
                for w in 0..8 {
                    prop_assert_eq!(s.word(w), set.words()[w]);
                }
            }
            prop_assert_eq!(ProviderSet::from_bitset(set.clone()).to_bitset(), set);
        }
    }
}
