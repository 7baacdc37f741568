//! The condition router's prepared state: per snapshot and consumer, every then-part and
//! v3.1 destination resolved to a provider set (`SetExpr`), with the per-call form for a
//! request that carries another consumer (`DynSet`), and each when-part's consumer terms
//! decided for the prepared consumer.

use std::collections::HashMap;
use std::sync::Arc;

use routechain_core::{
    BitSet, Candidates, PrepareContext, ProviderSet, Request, RouteContext, SetRef, Snapshot, Url,
    ValueIndex,
};

use super::matcher::{Key, Pattern, Term, glob_match};
use super::rule::{Action, ConditionRule};

/// A condition's action over the snapshot. A v3.0 then-part written alike in several
/// conditions is one compiled then-part (the parser shares it), resolved once: its set is
/// shared.
pub(super) enum PreparedAction {
    Blocklist,
    TrafficDisabled,
    Then(Arc<SetExpr>),
    Destinations(Vec<(SetExpr, u32)>),
}

/// One condition over the snapshot.
pub(super) struct PreparedCond {
    /// The when-part's consumer terms, decided for the prepared consumer.
    pub(super) consumer_ok: bool,
    pub(super) action: PreparedAction,
}

/// A condition rule prepared for one snapshot and consumer: one entry per condition of the
/// rule, in order.
pub struct PreparedCondition {
    pub(super) rule: Arc<ConditionRule>,
    pub(super) conditions: Vec<PreparedCond>,
}

impl PreparedCondition {
    /// Resolves every then-part and destination of `rule` over the snapshot, and decides the
    /// when-parts' consumer terms for the prepared consumer.
    pub fn build(rule: &Arc<ConditionRule>, cx: &PrepareContext<'_>) -> Self {
        let mut indexes = Indexes::new(cx.snapshot);
        let empty_request = Request::new();
        // Each distinct then-part once (by the address of its shared terms).
        let mut shared: HashMap<*const Term, Arc<SetExpr>> = HashMap::new();
        let mut then_set = |terms: &Arc<[Term]>, indexes: &mut Indexes<'_>| {
            shared
                .entry(terms.as_ptr())
                .or_insert_with(|| Arc::new(indexes.set_expr(terms, cx.consumer)))
                .clone()
        };
        let mut conditions = Vec::with_capacity(rule.conditions.len());
        conditions.extend(rule.conditions.iter().map(|c| {
            PreparedCond {
                consumer_ok: c
                    .when
                    .iter()
                    .filter(|t| !t.key.reads_request())
                    .all(|t| t.matches_when(&empty_request, cx.consumer)),
                action: match &c.action {
                    Action::Blocklist => PreparedAction::Blocklist,
                    Action::TrafficDisabled => PreparedAction::TrafficDisabled,
                    Action::Then(terms) => PreparedAction::Then(then_set(terms, &mut indexes)),
                    Action::Destinations(ds) => PreparedAction::Destinations(
                        ds.iter()
                            .map(|d| (indexes.set_expr(&d.terms, cx.consumer), d.weight))
                            .collect(),
                    ),
                },
            }
        }));
        drop(shared);
        PreparedCondition {
            rule: rule.clone(),
            conditions,
        }
    }
}

/// Parameter indexes of one snapshot, built once per key a rule reads that some provider
/// has. A key no provider has is known from one pass over the providers' parameter keys, so
/// a rule naming 100,000 keys costs its size plus the snapshot, not keys × providers.
struct Indexes<'a> {
    snapshot: &'a Snapshot,
    by_key: HashMap<Box<str>, KeyIndex>,
    /// Every parameter key some provider has (built on first use).
    keys: Option<std::collections::HashSet<&'a str>>,
    /// Bytes held by the decided-pattern caches of every key (bounded: [`CACHE_BYTES`]).
    cached_bytes: usize,
}

use routechain_core::DERIVED_KEYS;

/// The most bytes the decided glob and range patterns of one preparation keep for reuse.
const CACHE_BYTES: usize = 64 << 20;

/// One key's index and what every term on the key shares: the providers having the key,
/// its distinct values sorted (built on the first glob or range), and the glob and range
/// patterns decided already, so a rule repeating a pattern 10,000 times decides it once.
struct KeyIndex {
    /// Shared with the per-call terms on the key.
    ix: Arc<ValueIndex>,
    present: BitSet,
    sorted: Option<SortedValues>,
    decided: HashMap<PatternKey, ProviderSet>,
}

/// A glob or range pattern, as a cache key.
#[derive(PartialEq, Eq, Hash)]
enum PatternKey {
    Glob(Arc<str>),
    Range(Option<i64>, Option<i64>),
}

/// A key's distinct values sorted three ways, so a glob is decided over the values sharing
/// its literal prefix (or suffix), and a range over the values within its bounds, rather
/// than over every value: a rule of many patterns costs about its size times the values
/// each pattern matches (plus a binary search), not patterns × values. A glob with `*` at
/// both ends (`*a*`) has neither and is still decided over every value (once per distinct
/// pattern).
struct SortedValues {
    /// The distinct values, sorted by bytes.
    values: Vec<Box<str>>,
    /// Each value's bytes reversed, with its position in `values`, sorted.
    reversed: Vec<(Box<[u8]>, u32)>,
    /// The values that are integers (as a range reads them), with their positions, sorted.
    numbers: Vec<(i64, u32)>,
}

impl SortedValues {
    fn new(ix: &ValueIndex) -> Self {
        let mut values: Vec<Box<str>> = ix.values().map(|(v, _)| Box::from(v)).collect();
        values.sort_unstable();
        let mut reversed: Vec<(Box<[u8]>, u32)> = values
            .iter()
            .enumerate()
            .map(|(i, v)| (v.bytes().rev().collect(), i as u32))
            .collect();
        reversed.sort_unstable();
        let mut numbers: Vec<(i64, u32)> = values
            .iter()
            .enumerate()
            .filter_map(|(i, v)| Some((v.parse::<i64>().ok()?, i as u32)))
            .collect();
        numbers.sort_unstable();
        SortedValues {
            values,
            reversed,
            numbers,
        }
    }

    /// The positions (in `values`) of the values that may match glob `g`: those starting
    /// with its literal prefix or ending with its literal suffix, whichever are fewer.
    fn glob_candidates(&self, g: &str) -> Vec<u32> {
        let (Some(first), Some(last)) = (g.find('*'), g.rfind('*')) else {
            return (0..self.values.len() as u32).collect();
        };
        let (prefix, suffix) = (&g.as_bytes()[..first], &g.as_bytes()[last + 1..]);
        let by_prefix = prefix_range(&self.values, prefix, |v| v.as_bytes());
        let suffix_rev: Vec<u8> = suffix.iter().rev().copied().collect();
        let by_suffix = prefix_range(&self.reversed, &suffix_rev, |(r, _)| r);
        if by_prefix.len() <= by_suffix.len() {
            by_prefix.map(|i| i as u32).collect()
        } else {
            self.reversed[by_suffix].iter().map(|(_, i)| *i).collect()
        }
    }

    /// The positions of the integer values within the bounds.
    fn range_candidates(&self, low: Option<i64>, high: Option<i64>) -> Vec<u32> {
        let from = self
            .numbers
            .partition_point(|(n, _)| low.is_some_and(|l| *n < l));
        let to = self
            .numbers
            .partition_point(|(n, _)| high.is_none_or(|h| *n <= h));
        self.numbers[from..to.max(from)]
            .iter()
            .map(|(_, i)| *i)
            .collect()
    }
}

/// The range of `sorted` (sorted by `bytes`) whose items start with `prefix`.
fn prefix_range<T>(
    sorted: &[T],
    prefix: &[u8],
    bytes: impl Fn(&T) -> &[u8],
) -> std::ops::Range<usize> {
    let from = sorted.partition_point(|t| bytes(t) < prefix);
    let to = sorted.partition_point(|t| {
        let b = bytes(t);
        b < prefix || b.starts_with(prefix)
    });
    from..to.max(from)
}

impl<'a> Indexes<'a> {
    fn new(snapshot: &'a Snapshot) -> Self {
        Indexes {
            snapshot,
            by_key: HashMap::new(),
            keys: None,
            cached_bytes: 0,
        }
    }

    /// False when no provider has `key` (then every term on it matches no provider).
    fn any_has(&mut self, key: &str) -> bool {
        if DERIVED_KEYS.contains(&key) || self.by_key.contains_key(key) {
            return true;
        }
        let snapshot = self.snapshot;
        // Usually one of the first providers has the key: then the set of every key of every
        // provider (most of the preparation at 100,000 providers) is not built. A bounded
        // look, so that many absent keys still cost one pass over the snapshot.
        if self.keys.is_none()
            && snapshot
                .providers()
                .iter()
                .take(16)
                .any(|p| p.param(key).is_some())
        {
            return true;
        }
        self.keys
            .get_or_insert_with(|| {
                snapshot
                    .providers()
                    .iter()
                    .flat_map(|p| p.params().map(|(k, _)| k))
                    .collect()
            })
            .contains(key)
    }

    fn index(&mut self, key: &str) -> &mut KeyIndex {
        let snapshot = self.snapshot;
        self.by_key.entry(key.into()).or_insert_with(|| {
            let ix = Arc::new(ValueIndex::build(snapshot, key));
            let mut present = BitSet::full(snapshot.len());
            present.and_not_assign(&ix.missing().to_bitset());
            KeyIndex {
                ix,
                present,
                sorted: None,
                decided: HashMap::new(),
            }
        })
    }

    /// The providers matching every term (all providers for no term), for `consumer`,
    /// plus the per-call form when a term refers to the consumer.
    fn set_expr(&mut self, terms: &[Term], consumer: &Url) -> SetExpr {
        let len = self.snapshot.len();
        let mut set = BitSet::full(len);
        // The terms without `$name`, ANDed, and the terms with one, for another consumer.
        let mut fixed = BitSet::full(len);
        let mut dyn_terms = Vec::new();
        // A term no provider can match empties the set whatever the consumer.
        let mut never = false;
        for term in terms {
            let Key::Provider(name) = &term.key else {
                // A then-part key with no value on a provider: never matches.
                never = true;
                set.clear();
                continue;
            };
            let no_pattern = term.matches.is_empty() && term.mismatches.is_empty();
            if no_pattern || !self.any_has(name) {
                // No pattern, or no provider has the key: whatever the consumer, no provider
                // matches.
                never = true;
                set.clear();
                continue;
            }
            let mut cached_bytes = self.cached_bytes;
            let k = self.index(name);
            let mut pattern_set = |p: &Pattern| k.pattern_set(p, consumer, &mut cached_bytes);
            let mut t = if term.matches.is_empty() {
                None
            } else {
                Some(or_all(len, term.matches.iter().map(&mut pattern_set)))
            };
            let rejected = (!term.mismatches.is_empty())
                .then(|| or_all(len, term.mismatches.iter().map(&mut pattern_set)));
            let t = {
                let t = t.get_or_insert_with(|| k.present.clone());
                if let Some(r) = &rejected {
                    t.and_not_assign(r);
                }
                t.and_assign(&k.present);
                t
            };
            set.and_assign(t);
            if term.has_consumer_ref() {
                let mut dyn_pat = |p: &Pattern| match p {
                    Pattern::ConsumerRef(n) => DynPat::Ref(n.clone()),
                    other => DynPat::Fixed(ProviderSet::from_bitset(k.pattern_set(
                        other,
                        consumer,
                        &mut cached_bytes,
                    ))),
                };
                let matches = term.matches.iter().map(&mut dyn_pat).collect();
                let mismatches = term.mismatches.iter().map(&mut dyn_pat).collect();
                dyn_terms.push(DynTerm {
                    term: term.clone(),
                    matches,
                    mismatches,
                    present: ProviderSet::from_bitset(k.present.clone()),
                    index: k.ix.clone(),
                });
            } else {
                fixed.and_assign(t);
            }
            self.cached_bytes = cached_bytes;
        }
        SetExpr {
            prepared: ProviderSet::from_bitset(set),
            dynamic: (!never && !dyn_terms.is_empty()).then(|| DynSet {
                fixed: ProviderSet::from_bitset(fixed),
                terms: dyn_terms,
            }),
        }
    }
}

fn or_all(len: usize, sets: impl Iterator<Item = BitSet>) -> BitSet {
    let mut acc = BitSet::empty(len);
    for s in sets {
        acc.or_assign(&s);
    }
    acc
}

impl KeyIndex {
    /// The providers whose value of the key matches `p` (for `consumer`'s `$name`).
    fn pattern_set(&mut self, p: &Pattern, consumer: &Url, cached_bytes: &mut usize) -> BitSet {
        let len = self.present.len();
        let one = |v: &str| {
            self.ix
                .get(v)
                .map_or_else(|| BitSet::empty(len), |s| s.to_bitset(len))
        };
        match p {
            Pattern::Any => self.present.clone(),
            Pattern::Exact(e) => one(e),
            Pattern::ConsumerRef(name) => match consumer.get(name) {
                None => BitSet::empty(len),
                Some("*") => self.present.clone(),
                Some(v) if !v.contains('*') => one(v),
                Some(v) => self.decide(PatternKey::Glob(v.into()), cached_bytes),
            },
            Pattern::Glob(g) => self.decide(PatternKey::Glob(g.clone()), cached_bytes),
            Pattern::Range { low, high } => {
                self.decide(PatternKey::Range(*low, *high), cached_bytes)
            }
        }
    }

    /// A glob or range pattern's providers: from the cache, or decided over the candidate
    /// values (see [`SortedValues`]) and cached while the cache is within [`CACHE_BYTES`].
    fn decide(&mut self, key: PatternKey, cached_bytes: &mut usize) -> BitSet {
        if let Some(s) = self.decided.get(&key) {
            return s.to_bitset();
        }
        let sorted = self
            .sorted
            .get_or_insert_with(|| SortedValues::new(&self.ix));
        let (candidates, glob) = match &key {
            PatternKey::Glob(g) => (sorted.glob_candidates(g), Some(&**g)),
            PatternKey::Range(low, high) => (sorted.range_candidates(*low, *high), None),
        };
        let mut acc = BitSet::empty(self.present.len());
        for i in candidates {
            let v = &*sorted.values[i as usize];
            if glob.is_none_or(|g| glob_match(g, v))
                && let Some(s) = self.ix.get(v)
            {
                s.or_into(&mut acc);
            }
        }
        let set = ProviderSet::from_bitset(acc.clone());
        let bytes = set.heap_bytes() + std::mem::size_of::<PatternKey>() + 64;
        if *cached_bytes + bytes <= CACHE_BYTES {
            *cached_bytes += bytes;
            self.decided.insert(key, set);
        }
        acc
    }
}

/// A then-part (or `to.match`) over the snapshot: the set for the prepared consumer, and the
/// per-call form for another consumer when the terms refer to the consumer.
pub(super) struct SetExpr {
    prepared: ProviderSet,
    dynamic: Option<DynSet>,
}

impl SetExpr {
    /// The per-call form, when this call's consumer is not the prepared one.
    fn dynamic(&self, cx: &RouteContext<'_>) -> Option<&DynSet> {
        self.dynamic.as_ref().filter(|_| !cx.consumer_is_prepared())
    }

    /// True when the set and `candidates` share a provider.
    pub(super) fn intersects(&self, candidates: &Candidates, cx: &mut RouteContext<'_>) -> bool {
        match self.dynamic(cx) {
            Some(d) => {
                let consumer = cx.consumer();
                let acc = cx.scratch();
                d.intersect_into(candidates, consumer, acc);
                !acc.is_empty()
            }
            None => self.prepared.intersects(candidates),
        }
    }

    /// `candidates &= set`.
    pub(super) fn and_into(&self, candidates: &mut Candidates, cx: &mut RouteContext<'_>) {
        match self.dynamic(cx) {
            Some(d) => {
                let consumer = cx.consumer();
                let acc = cx.scratch();
                d.intersect_into(candidates, consumer, acc);
                candidates.copy_from(acc);
            }
            None => self.prepared.and_into(candidates),
        }
    }

    /// `candidates &= set` when they share a provider (true), else leaves them (false).
    pub(super) fn narrow(&self, candidates: &mut Candidates, cx: &mut RouteContext<'_>) -> bool {
        match self.dynamic(cx) {
            Some(d) => {
                let consumer = cx.consumer();
                let acc = cx.scratch();
                d.intersect_into(candidates, consumer, acc);
                let hit = !acc.is_empty();
                if hit {
                    candidates.copy_from(acc);
                }
                hit
            }
            None => {
                let hit = self.prepared.intersects(candidates);
                if hit {
                    self.prepared.and_into(candidates);
                }
                hit
            }
        }
    }
}

/// The terms of a [`SetExpr`] for a consumer other than the prepared one: the terms without
/// `$name` folded into one set, and the terms with one.
///
/// Per call, each term resolves its `$name` references once (a consumer lookup and one
/// [`ValueIndex::get`]) and is then applied to the call's scratch set with word operations.
/// A consumer value containing `*` is a glob (as in Dubbo, where the value is substituted
/// into the pattern): that term is decided once per distinct provider value of its key, and
/// the providers of the values that fail are removed; no provider URL is read.
struct DynSet {
    fixed: ProviderSet,
    terms: Vec<DynTerm>,
}

impl DynSet {
    /// `acc = candidates & set` for `consumer`, without allocating (`acc` keeps its buffer:
    /// it is the call's scratch set, sized to the snapshot).
    fn intersect_into(&self, candidates: &Candidates, consumer: &Url, acc: &mut BitSet) {
        acc.copy_from(candidates);
        self.fixed.and_into(acc);
        for t in &self.terms {
            if acc.is_empty() {
                return;
            }
            t.apply(acc, consumer);
        }
    }
}

/// A term with a `$name` reference, on a provider key.
struct DynTerm {
    /// The compiled term: decides a provider value when a reference resolves to a glob.
    term: Term,
    matches: Vec<DynPat>,
    mismatches: Vec<DynPat>,
    /// The providers having the key.
    present: ProviderSet,
    index: Arc<ValueIndex>,
}

enum DynPat {
    /// A pattern without reference, resolved at prepare time.
    Fixed(ProviderSet),
    /// `$name`.
    Ref(Arc<str>),
}

/// A pattern resolved for one call.
enum Resolved<'s> {
    /// No provider (the consumer has no such parameter, or no provider has its value).
    Nothing,
    /// Every provider having the key (a `*` value).
    Present,
    /// These providers.
    Set(SetRef<'s>),
    /// The consumer's value is a glob: decided per distinct value.
    Glob,
}

/// How many `=` patterns of one term are combined word by word from the stack; a term with
/// more is decided per distinct value instead (same result).
const INLINE_PATTERNS: usize = 8;

impl DynTerm {
    fn resolve<'s>(&'s self, p: &'s DynPat, consumer: &Url) -> Resolved<'s> {
        match p {
            DynPat::Fixed(s) => Resolved::Set(s.as_set_ref()),
            DynPat::Ref(name) => match consumer.get(name) {
                None => Resolved::Nothing,
                Some("*") => Resolved::Present,
                Some(v) if v.contains('*') => Resolved::Glob,
                Some(v) => self.index.get(v).map_or(Resolved::Nothing, Resolved::Set),
            },
        }
    }

    /// `acc &= term's providers` for `consumer`: (any `=` hit, or all with no `=`) and no
    /// `!=` hit, among the providers having the key.
    fn apply(&self, acc: &mut BitSet, consumer: &Url) {
        self.present.and_into(acc);
        // Removing providers the term rejects is exact whichever way the term is finished,
        // so a glob found halfway falls back to the per-value form.
        for p in &self.mismatches {
            match self.resolve(p, consumer) {
                Resolved::Nothing => {}
                Resolved::Present => {
                    acc.clear();
                    return;
                }
                Resolved::Set(s) => s.and_not_into(acc),
                Resolved::Glob => return self.apply_by_value(acc, consumer),
            }
        }
        if self.matches.is_empty() {
            return;
        }
        let mut sets = [self.present.as_set_ref(); INLINE_PATTERNS];
        let mut n = 0;
        for p in &self.matches {
            match self.resolve(p, consumer) {
                Resolved::Nothing => {}
                // `present` is applied already.
                Resolved::Present => return,
                Resolved::Set(s) if n < INLINE_PATTERNS => {
                    sets[n] = s;
                    n += 1;
                }
                Resolved::Set(_) | Resolved::Glob => return self.apply_by_value(acc, consumer),
            }
        }
        match &sets[..n] {
            [] => acc.clear(),
            [s] => s.and_into(acc),
            sets => acc.and_with(|w| sets.iter().fold(0, |m, s| m | s.word(w))),
        }
    }

    /// `acc &= term's providers`, deciding the term once per distinct value of the key: the
    /// value sets partition the providers having the key, so removing the sets of the
    /// values the term rejects (and the providers without the key) leaves exactly the rest.
    fn apply_by_value(&self, acc: &mut BitSet, consumer: &Url) {
        self.present.and_into(acc);
        for (v, s) in self.index.values() {
            if !self.term.matches_value(Some(v), Some(consumer)) {
                s.and_not_into(acc);
            }
        }
    }
}
