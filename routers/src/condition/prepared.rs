//! The condition router's prepared state: per snapshot and consumer, every then-part and
//! v3.1 destination resolved to a provider set ([`SetExpr`]), with the per-call form for a
//! request that carries another consumer ([`DynSet`]), and each when-part's consumer terms
//! decided for the prepared consumer.

use std::collections::HashMap;
use std::sync::Arc;

use routechain_core::{
    BitSet, Candidates, ParamIndex, PrepareContext, ProviderSet, Request, RouteContext, Snapshot,
    Url,
};

use super::matcher::{Key, Pattern, Term};
use super::rule::{Action, ConditionRule};

/// A condition's action over the snapshot.
pub(super) enum PreparedAction {
    Blocklist,
    TrafficDisabled,
    Then(SetExpr),
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
        let mut indexes = Indexes {
            snapshot: cx.snapshot,
            by_key: HashMap::new(),
        };
        let empty_request = Request::new();
        let conditions = rule
            .conditions
            .iter()
            .map(|c| PreparedCond {
                consumer_ok: c
                    .when
                    .iter()
                    .filter(|t| !t.key.reads_request())
                    .all(|t| t.matches_when(&empty_request, cx.consumer)),
                action: match &c.action {
                    Action::Blocklist => PreparedAction::Blocklist,
                    Action::TrafficDisabled => PreparedAction::TrafficDisabled,
                    Action::Then(terms) => {
                        PreparedAction::Then(indexes.set_expr(terms, cx.consumer))
                    }
                    Action::Destinations(ds) => PreparedAction::Destinations(
                        ds.iter()
                            .map(|d| (indexes.set_expr(&d.terms, cx.consumer), d.weight))
                            .collect(),
                    ),
                },
            })
            .collect();
        PreparedCondition {
            rule: rule.clone(),
            conditions,
        }
    }
}

/// Parameter indexes of one snapshot, built once per key a rule reads.
struct Indexes<'a> {
    snapshot: &'a Snapshot,
    by_key: HashMap<Box<str>, Arc<ParamIndex>>,
}

impl Indexes<'_> {
    fn index(&mut self, key: &str) -> Arc<ParamIndex> {
        if let Some(ix) = self.by_key.get(key) {
            return ix.clone();
        }
        let ix = Arc::new(ParamIndex::build(self.snapshot, key));
        self.by_key.insert(key.into(), ix.clone());
        ix
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
            if term.matches.is_empty() && term.mismatches.is_empty() {
                never = true;
                set.clear();
                continue;
            }
            let ix = self.index(name);
            let mut present = BitSet::full(len);
            present.and_not_assign(&ix.missing().to_bitset());
            let pattern_set = |p: &Pattern| pattern_set(p, &ix, &present, consumer);
            let mut t = if term.matches.is_empty() {
                present.clone()
            } else {
                or_all(len, term.matches.iter().map(pattern_set))
            };
            t.and_not_assign(&or_all(len, term.mismatches.iter().map(pattern_set)));
            t.and_assign(&present);
            set.and_assign(&t);
            if term.has_consumer_ref() {
                let dyn_pat = |p: &Pattern| match p {
                    Pattern::ConsumerRef(n) => DynPat::Ref(n.clone()),
                    other => DynPat::Fixed(ProviderSet::from_bitset(pattern_set(other))),
                };
                dyn_terms.push(DynTerm {
                    term: term.clone(),
                    matches: term.matches.iter().map(dyn_pat).collect(),
                    mismatches: term.mismatches.iter().map(dyn_pat).collect(),
                    present: ProviderSet::from_bitset(present.clone()),
                    index: ix.clone(),
                });
            } else {
                fixed.and_assign(&t);
            }
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

/// The providers whose value of the index's key matches `p` (for `consumer`'s `$name`).
fn pattern_set(p: &Pattern, ix: &ParamIndex, present: &BitSet, consumer: &Url) -> BitSet {
    let len = present.len();
    let one = |v: &str| {
        ix.get(v)
            .map_or_else(|| BitSet::empty(len), ProviderSet::to_bitset)
    };
    match p {
        Pattern::Any => present.clone(),
        Pattern::Exact(e) => one(e),
        Pattern::ConsumerRef(name) => match consumer.get(name) {
            None => BitSet::empty(len),
            Some("*") => present.clone(),
            Some(v) if !v.contains('*') => one(v),
            Some(_) => values_matching(ix, len, |v| p.matches(v, Some(consumer))),
        },
        Pattern::Glob(_) | Pattern::Range { .. } => {
            values_matching(ix, len, |v| p.matches(v, Some(consumer)))
        }
    }
}

fn values_matching(ix: &ParamIndex, len: usize, pred: impl Fn(&str) -> bool) -> BitSet {
    let mut acc = BitSet::empty(len);
    for (v, s) in ix.values() {
        if pred(v) {
            s.or_into(&mut acc);
        }
    }
    acc
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
/// [`ParamIndex::get`]) and is then applied to the call's scratch set with word operations.
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
    index: Arc<ParamIndex>,
}

enum DynPat {
    /// A pattern without reference, resolved at prepare time.
    Fixed(ProviderSet),
    /// `$name`.
    Ref(Box<str>),
}

/// A pattern resolved for one call.
enum Resolved<'s> {
    /// No provider (the consumer has no such parameter, or no provider has its value).
    Nothing,
    /// Every provider having the key (a `*` value).
    Present,
    /// These providers.
    Set(&'s ProviderSet),
    /// The consumer's value is a glob: decided per distinct value.
    Glob,
}

/// How many `=` patterns of one term are combined word by word from the stack; a term with
/// more is decided per distinct value instead (same result).
const INLINE_PATTERNS: usize = 8;

impl DynTerm {
    fn resolve<'s>(&'s self, p: &'s DynPat, consumer: &Url) -> Resolved<'s> {
        match p {
            DynPat::Fixed(s) => Resolved::Set(s),
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
                Resolved::Set(s) => and_not_into(s, acc),
                Resolved::Glob => return self.apply_by_value(acc, consumer),
            }
        }
        if self.matches.is_empty() {
            return;
        }
        let mut sets = [&self.present; INLINE_PATTERNS];
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
                and_not_into(s, acc);
            }
        }
    }
}

/// `acc &= !set`, without allocating.
fn and_not_into(set: &ProviderSet, acc: &mut BitSet) {
    match set {
        ProviderSet::Dense(b) => acc.and_not_assign(b),
        ProviderSet::Sparse { indexes, .. } => {
            for &i in indexes.iter() {
                acc.remove(i as usize);
            }
        }
    }
}
