//! The condition router's prepared state carried over a [`SnapshotEdit`]: every then-part
//! and destination set, the per-call forms' sets and value indexes and the key presence
//! carried with the core helpers, the compiled terms evaluated on the added providers only.
//!
//! A term's providers are exactly those whose value of the key satisfies
//! [`Term::matches_value`] (for the prepared consumer); the fresh preparation computes the
//! same sets from value indexes, glob groups and ranges over the distinct values, so an
//! edit evaluates each added provider directly and never touches those structures (they
//! are not kept). The one case that is not carried: a then-part that matched nothing
//! because no provider had one of its keys ([`SetExpr`]'s `never`, which also drops the
//! per-call form) and whose keys all have a provider after the edit: that set (alone) is
//! prepared over the new snapshot, in time linear in it. It happens once per key, when the
//! first provider having it registers.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use routechain_core::{PrepareContext, ProviderSet, SnapshotEdit, Url, UrlKey, ValueIndex};

use super::{
    DERIVED_KEYS, DynPat, DynSet, DynTerm, Indexes, PreparedAction, PreparedCond,
    PreparedCondition, SetExpr,
};
use crate::condition::matcher::{Key, Pattern, Term};
use crate::condition::rule::Action;

/// What every set of one edit shares.
struct EditCx<'e, 'a> {
    edit: &'e SnapshotEdit,
    cx: &'e PrepareContext<'a>,
    /// The keys some provider of the new snapshot has.
    present: HashSet<&'e str>,
    /// Value indexes already carried, by the old index's address (sets share an index per
    /// key, and keep sharing it).
    indexes: HashMap<*const ValueIndex, Arc<ValueIndex>>,
    /// Indexes over the new snapshot, for the sets prepared again (see the module docs).
    fresh: Option<Indexes<'a>>,
    /// The then-part sets carried already, by the old set's address (conditions with the
    /// same then-part share a set, and keep sharing it).
    then_sets: HashMap<*const SetExpr, Arc<SetExpr>>,
}

impl PreparedCondition {
    /// The state for `cx.snapshot`, which follows this state's snapshot by `edit` (see the
    /// module docs); `None` when the state does not fit the rule (then prepare afresh).
    pub(in crate::condition) fn edited(
        &self,
        edit: &SnapshotEdit,
        cx: &PrepareContext<'_>,
    ) -> Option<Self> {
        if self.conditions.len() != self.rule.conditions.len() {
            return None;
        }
        let providers = cx.snapshot.providers();
        let keys: HashMap<Box<str>, ProviderSet> = self
            .keys
            .iter()
            .map(|(k, set)| {
                let set = set.edited(edit, |i| providers[i].get(k).is_some());
                (k.clone(), set)
            })
            .collect();
        let mut ecx = EditCx {
            edit,
            cx,
            present: keys
                .iter()
                .filter(|(_, set)| set.count() > 0)
                .map(|(k, _)| &**k)
                .collect(),
            indexes: HashMap::new(),
            fresh: None,
            then_sets: HashMap::new(),
        };
        let mut conditions = Vec::with_capacity(self.conditions.len());
        for (c, old) in self.rule.conditions.iter().zip(&self.conditions) {
            let action = match (&c.action, &old.action) {
                (Action::Blocklist, PreparedAction::Blocklist) => PreparedAction::Blocklist,
                (Action::TrafficDisabled, PreparedAction::TrafficDisabled) => {
                    PreparedAction::TrafficDisabled
                }
                (Action::Then(terms), PreparedAction::Then(set)) => {
                    let carried = match ecx.then_sets.get(&Arc::as_ptr(set)) {
                        Some(carried) => carried.clone(),
                        None => Arc::new(set.edited(terms, &mut ecx)?),
                    };
                    ecx.then_sets.insert(Arc::as_ptr(set), carried.clone());
                    PreparedAction::Then(carried)
                }
                (Action::Destinations(ds), PreparedAction::Destinations(sets))
                    if ds.len() == sets.len() =>
                {
                    let mut out = Vec::with_capacity(sets.len());
                    for (d, (set, weight)) in ds.iter().zip(sets) {
                        out.push((set.edited(&d.terms, &mut ecx)?, *weight));
                    }
                    PreparedAction::Destinations(out)
                }
                _ => return None,
            };
            conditions.push(PreparedCond {
                consumer_ok: old.consumer_ok,
                action,
            });
        }
        drop(ecx);
        Some(PreparedCondition {
            rule: self.rule.clone(),
            conditions,
            keys,
        })
    }
}

/// True when provider `p` satisfies `term` (a then-part term) for `consumer`: exactly the
/// providers the preparation's set for the term holds.
fn holds(term: &Term, p: &Url, consumer: &Url) -> bool {
    match &term.key {
        Key::Provider(name) => term.matches_value(p.get(name), Some(consumer)),
        _ => false,
    }
}

/// True when provider `p`'s value of `key` matches `pattern` (no `$name` in it).
fn pattern_holds(pattern: &Pattern, key: &str, p: &Url) -> bool {
    p.get(key).is_some_and(|v| pattern.matches(v, None))
}

impl SetExpr {
    /// The set carried over the edit; `terms` are the ones it was prepared from.
    fn edited(&self, terms: &[Term], e: &mut EditCx<'_, '_>) -> Option<SetExpr> {
        let (edit, consumer) = (e.edit, e.cx.consumer);
        let providers = e.cx.snapshot.providers();
        let never = terms.iter().any(|t| match &t.key {
            Key::Provider(name) => {
                (t.matches.is_empty() && t.mismatches.is_empty())
                    || !(DERIVED_KEYS.contains(&&**name) || e.present.contains(&**name))
            }
            _ => true,
        });
        if never {
            return Some(SetExpr {
                never: true,
                prepared: ProviderSet::empty(edit.new_len()),
                dynamic: None,
            });
        }
        if self.never {
            // A key appeared for the first time: this set alone is prepared again.
            let snapshot = e.cx.snapshot;
            let fresh = e.fresh.get_or_insert_with(|| Indexes::new(snapshot));
            return Some(fresh.set_expr(terms, consumer));
        }
        let prepared = self.prepared.edited(edit, |i| {
            terms.iter().all(|t| holds(t, &providers[i], consumer))
        });
        let dynamic = match &self.dynamic {
            None => None,
            Some(d) => Some(d.edited(terms, e)?),
        };
        Some(SetExpr {
            never: false,
            prepared,
            dynamic,
        })
    }
}

impl DynSet {
    fn edited(&self, terms: &[Term], e: &mut EditCx<'_, '_>) -> Option<DynSet> {
        let (edit, consumer) = (e.edit, e.cx.consumer);
        let providers = e.cx.snapshot.providers();
        let fixed = self.fixed.edited(edit, |i| {
            terms
                .iter()
                .filter(|t| !t.has_consumer_ref())
                .all(|t| holds(t, &providers[i], consumer))
        });
        let mut dyn_terms = Vec::with_capacity(self.terms.len());
        for t in &self.terms {
            dyn_terms.push(t.edited(e)?);
        }
        Some(DynSet {
            fixed,
            terms: dyn_terms,
        })
    }
}

impl DynTerm {
    fn edited(&self, e: &mut EditCx<'_, '_>) -> Option<DynTerm> {
        let Key::Provider(name) = &self.term.key else {
            return None;
        };
        let (edit, snapshot) = (e.edit, e.cx.snapshot);
        let providers = snapshot.providers();
        let pats = |patterns: &[Pattern], sets: &[DynPat]| -> Option<Vec<DynPat>> {
            if patterns.len() != sets.len() {
                return None;
            }
            let carry = |(p, s): (&Pattern, &DynPat)| match s {
                DynPat::Ref(n) => DynPat::Ref(n.clone()),
                DynPat::Fixed(set) => {
                    DynPat::Fixed(set.edited(edit, |i| pattern_holds(p, name, &providers[i])))
                }
            };
            Some(patterns.iter().zip(sets).map(carry).collect())
        };
        let matches = pats(&self.term.matches, &self.matches)?;
        let mismatches = pats(&self.term.mismatches, &self.mismatches)?;
        let index = e
            .indexes
            .entry(Arc::as_ptr(&self.index))
            .or_insert_with(|| {
                let key = UrlKey::new(name);
                Arc::new(self.index.edited(edit, snapshot, |p| p.get_key(&key)))
            })
            .clone();
        Some(DynTerm {
            term: self.term.clone(),
            matches,
            mismatches,
            present: self
                .present
                .edited(edit, |i| providers[i].get(name).is_some()),
            index,
        })
    }
}

#[cfg(test)]
mod tests;
