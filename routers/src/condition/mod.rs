//! The `condition` router: Dubbo's condition rules, v3.0 text (`when => then`) and v3.1
//! from/to with weighted destinations, exactly as Dubbo 3.3 routes them, with the
//! provider side precomputed.
//!
//! - [`ConditionRule`] is a compiled rule document (schema:
//!   [`routechain_rules::schema::condition`]); [`parser`] turns the condition texts into
//!   [`matcher::Term`]s and reports located errors.
//! - [`ConditionRouter`] prepares, per snapshot and consumer, every then-part and every v3.1
//!   `to.match` as a [`ProviderSet`]; `$name` references resolve against the prepared
//!   consumer; for a request that carries another consumer, each reference costs one
//!   [`ParamIndex`] lookup per evaluation of its then-part (a consumer value that is a glob
//!   is decided once per distinct provider value). When-parts that read nothing from the
//!   request are decided at prepare time (unless `runtime: true`), and the route is then
//!   reported [`Evaluation::Cached`].
//! - Per call: the when-part's string compares, bitset intersections, and for v3.1 one draw
//!   `rng().below(sum of weights)` over the non-empty destinations. Nothing allocates (the
//!   per-call form for another consumer works in the call's scratch bitset).
//! - [`ConditionFactory`] registers the type `condition` (default priority 140 for
//!   `scope: service`, 150 for `scope: application`).

pub mod matcher;
pub mod parser;

use std::collections::HashMap;
use std::sync::Arc;

use routechain_core::{
    BitSet, Candidates, Evaluation, ParamIndex, PrepareContext, PrepareError, PreparedRouter,
    ProviderSet, Request, RouteContext, Router, RouterFactory, RouterSpec, RuleDoc, RuleError,
    Snapshot, Url,
};
use routechain_rules::schema::condition::{
    ConditionRuleDef, ConditionsDef, ConfigVersion, Scope, TextField,
};

use self::matcher::{Key, Pattern, Term};
use self::parser::{Side, parse_match, parse_text_condition};

/// Dubbo's priority of a service-scope condition rule.
pub const SERVICE_PRIORITY: i32 = 140;
/// Dubbo's priority of an application-scope condition rule.
pub const APPLICATION_PRIORITY: i32 = 150;

/// What a condition does to the candidates once its when-part matched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// v3.0 with an empty or `false` then-part: no provider.
    Blocklist,
    /// v3.0: keep the providers matching every term (`force` decides an empty result).
    Then(Vec<Term>),
    /// v3.1 without `to` (or with an empty `to`): traffic disabled, no provider.
    TrafficDisabled,
    /// v3.1: one non-empty destination, picked with probability weight / sum.
    Destinations(Vec<Destination>),
}

/// A v3.1 destination: a provider subset and its weight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    /// The `to.match` terms (empty: every provider).
    pub terms: Vec<Term>,
    /// The weight (default 100); a zero weight is never picked.
    pub weight: u32,
}

/// One compiled condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    /// When-part terms (empty: every request).
    pub when: Vec<Term>,
    /// What happens when the when-part matches.
    pub action: Action,
}

impl Condition {
    /// True when the when-part reads the request (method, arguments, attachments).
    pub fn reads_request(&self) -> bool {
        self.when.iter().any(|t| t.key.reads_request())
    }
}

/// A compiled condition rule document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConditionRule {
    /// v3.0 or v3.1.
    pub version: ConfigVersion,
    /// Service or application.
    pub scope: Scope,
    /// `key`, if given.
    pub key: Option<String>,
    /// `enabled`.
    pub enabled: bool,
    /// `force`.
    pub force: bool,
    /// `runtime`: evaluate every when-part per call.
    pub runtime: bool,
    /// The conditions, applied one after another.
    pub conditions: Vec<Condition>,
}

impl ConditionRule {
    /// Compiles a rule document, reporting every problem (field errors and located errors
    /// inside condition texts) at once.
    pub fn from_doc(doc: &RuleDoc<'_>) -> Result<Self, Vec<RuleError>> {
        Self::from_def(&ConditionRuleDef::from_doc(doc)?)
    }

    /// Compiles a validated rule definition.
    pub fn from_def(def: &ConditionRuleDef) -> Result<Self, Vec<RuleError>> {
        let mut errors = Vec::new();
        let mut conditions = Vec::new();
        match &def.conditions {
            ConditionsDef::Text(texts) => {
                for (i, t) in texts.iter().enumerate() {
                    match parse_text_condition(&t.text, &t.path, i) {
                        Ok(c) => conditions.push(Condition {
                            when: c.when,
                            action: match c.then {
                                None => Action::Blocklist,
                                Some(terms) => Action::Then(terms),
                            },
                        }),
                        Err(mut es) => errors.append(&mut es),
                    }
                }
            }
            ConditionsDef::MultiDest(items) => {
                for (i, item) in items.iter().enumerate() {
                    let mut parse = |text: &Option<TextField>, side| match text {
                        None => Vec::new(),
                        Some(t) => {
                            parse_match(&t.text, side, &t.path, i).unwrap_or_else(|mut es| {
                                errors.append(&mut es);
                                Vec::new()
                            })
                        }
                    };
                    let when = parse(&item.from, Side::When);
                    let action = match &item.to {
                        None => Action::TrafficDisabled,
                        Some(to) if to.is_empty() => Action::TrafficDisabled,
                        Some(to) => Action::Destinations(
                            to.iter()
                                .map(|d| Destination {
                                    terms: parse(&d.match_text, Side::Then),
                                    weight: d.weight,
                                })
                                .collect(),
                        ),
                    };
                    conditions.push(Condition { when, action });
                }
            }
        }
        if errors.is_empty() {
            Ok(ConditionRule {
                version: def.version,
                scope: def.scope,
                key: def.key.clone(),
                enabled: def.enabled,
                force: def.force,
                runtime: def.runtime,
                conditions,
            })
        } else {
            Err(errors)
        }
    }

    /// True when every when-part is decided without the request and `runtime` is off: the
    /// route is then answered from prepared state for the prepared consumer.
    pub fn cacheable(&self) -> bool {
        !self.runtime && !self.conditions.iter().any(Condition::reads_request)
    }
}

/// The `condition` router: a compiled rule (or none: every provider passes).
#[derive(Debug, Clone)]
pub struct ConditionRouter {
    rule: Option<Arc<ConditionRule>>,
}

impl ConditionRouter {
    /// A router for `rule`.
    pub fn new(rule: ConditionRule) -> Self {
        ConditionRouter {
            rule: Some(Arc::new(rule)),
        }
    }

    /// A router without a rule: every provider passes.
    pub fn passthrough() -> Self {
        ConditionRouter { rule: None }
    }

    /// Compiles a rule document into a router.
    pub fn from_doc(doc: &RuleDoc<'_>) -> Result<Self, Vec<RuleError>> {
        ConditionRule::from_doc(doc).map(Self::new)
    }

    /// The rule, if any.
    pub fn rule(&self) -> Option<&ConditionRule> {
        self.rule.as_deref()
    }
}

impl Router for ConditionRouter {
    /// `condition(service)` or `condition(application)`; `condition` without a rule.
    fn name(&self) -> &str {
        match self.rule.as_deref().map(|r| r.scope) {
            None => "condition",
            Some(Scope::Service) => "condition(service)",
            Some(Scope::Application) => "condition(application)",
        }
    }

    fn prepare(&self, cx: &PrepareContext<'_>) -> Result<Arc<dyn PreparedRouter>, PrepareError> {
        let Some(rule) = &self.rule else {
            return Ok(Arc::new(PreparedCondition {
                rule: None,
                conditions: Vec::new(),
            }));
        };
        let mut indexes = Indexes::new(cx.snapshot);
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
        Ok(Arc::new(PreparedCondition {
            rule: Some(rule.clone()),
            conditions,
        }))
    }
}

/// Parameter indexes of one snapshot, built once per key a rule reads that some provider
/// has. A key no provider has is known from one pass over the providers' parameter keys, so
/// a rule naming 100,000 keys costs its size plus the snapshot, not keys × providers.
struct Indexes<'a> {
    snapshot: &'a Snapshot,
    by_key: HashMap<Box<str>, Arc<ParamIndex>>,
    /// Every parameter key some provider has (built on first use).
    keys: Option<std::collections::HashSet<&'a str>>,
}

/// The keys every URL answers without a parameter (see `Url::get`).
const DERIVED_KEYS: [&str; 5] = ["protocol", "host", "port", "path", "address"];

impl<'a> Indexes<'a> {
    fn new(snapshot: &'a Snapshot) -> Self {
        Indexes {
            snapshot,
            by_key: HashMap::new(),
            keys: None,
        }
    }

    /// False when no provider has `key` (then every term on it matches no provider).
    fn any_has(&mut self, key: &str) -> bool {
        if DERIVED_KEYS.contains(&key) || self.by_key.contains_key(key) {
            return true;
        }
        let snapshot = self.snapshot;
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
            if (term.matches.is_empty() && term.mismatches.is_empty()) || !self.any_has(name) {
                // No pattern, or no provider has the key: whatever the consumer, no provider
                // matches.
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
struct SetExpr {
    prepared: ProviderSet,
    dynamic: Option<DynSet>,
}

impl SetExpr {
    /// The per-call form, when this call's consumer is not the prepared one.
    fn dynamic(&self, cx: &RouteContext<'_>) -> Option<&DynSet> {
        self.dynamic.as_ref().filter(|_| !cx.consumer_is_prepared())
    }

    /// True when the set and `candidates` share a provider.
    fn intersects(&self, candidates: &Candidates, cx: &mut RouteContext<'_>) -> bool {
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
    fn and_into(&self, candidates: &mut Candidates, cx: &mut RouteContext<'_>) {
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
    fn narrow(&self, candidates: &mut Candidates, cx: &mut RouteContext<'_>) -> bool {
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

enum PreparedAction {
    Blocklist,
    TrafficDisabled,
    Then(SetExpr),
    Destinations(Vec<(SetExpr, u32)>),
}

struct PreparedCond {
    /// The when-part's consumer terms, decided for the prepared consumer.
    consumer_ok: bool,
    action: PreparedAction,
}

/// A condition rule prepared for one snapshot and consumer.
struct PreparedCondition {
    rule: Option<Arc<ConditionRule>>,
    conditions: Vec<PreparedCond>,
}

impl PreparedCondition {
    fn when_matches(
        &self,
        cond: &Condition,
        prepared: &PreparedCond,
        cx: &RouteContext<'_>,
        use_cache: bool,
    ) -> bool {
        let (request, consumer) = (cx.request(), cx.consumer());
        if use_cache {
            if !prepared.consumer_ok {
                return false;
            }
        } else if !cond
            .when
            .iter()
            .filter(|t| !t.key.reads_request())
            .all(|t| t.matches_when(request, consumer))
        {
            return false;
        }
        cond.when
            .iter()
            .filter(|t| t.key.reads_request())
            .all(|t| t.matches_when(request, consumer))
    }
}

impl PreparedRouter for PreparedCondition {
    fn route(&self, cx: &mut RouteContext<'_>, candidates: &mut Candidates) -> Evaluation {
        let Some(rule) = &self.rule else {
            cx.explain(format_args!("no condition rule: every provider passes"));
            return Evaluation::Cached;
        };
        if !rule.enabled {
            cx.explain(format_args!(
                "condition rule disabled: every provider passes"
            ));
            return Evaluation::Cached;
        }
        let use_cache = !rule.runtime && cx.consumer_is_prepared();
        let evaluation = if use_cache && rule.cacheable() {
            Evaluation::Cached
        } else {
            Evaluation::Runtime
        };
        for (i, (cond, prepared)) in rule.conditions.iter().zip(&self.conditions).enumerate() {
            if candidates.is_empty() {
                cx.explain(format_args!("condition #{i}: no provider left, skipped"));
                continue;
            }
            if !self.when_matches(cond, prepared, cx, use_cache) {
                cx.explain(format_args!("condition #{i}: when did not match"));
                continue;
            }
            match &prepared.action {
                PreparedAction::Blocklist => {
                    candidates.clear();
                    cx.explain(format_args!(
                        "condition #{i}: when matched, blocklist (empty then-part)"
                    ));
                }
                PreparedAction::TrafficDisabled => {
                    candidates.clear();
                    cx.explain(format_args!(
                        "condition #{i}: when matched, traffic disabled (no `to`)"
                    ));
                }
                PreparedAction::Then(set) => {
                    if set.narrow(candidates, cx) {
                        if cx.explaining() {
                            let n = candidates.count();
                            cx.explain(format_args!(
                                "condition #{i}: when matched, {n} providers by then-part"
                            ));
                        }
                    } else if rule.force {
                        candidates.clear();
                        cx.explain(format_args!(
                            "condition #{i}: then-part matched nothing and force=true: no provider"
                        ));
                    } else {
                        cx.explain(format_args!(
                            "condition #{i} ignored: then-part matched nothing and force=false"
                        ));
                    }
                }
                PreparedAction::Destinations(dests) => {
                    route_destinations(i, dests, rule.force, cx, candidates);
                }
            }
        }
        evaluation
    }
}

/// Picks one non-empty destination with probability weight / sum (two passes, no
/// allocation); none → `force` ? empty : unchanged.
fn route_destinations(
    i: usize,
    dests: &[(SetExpr, u32)],
    force: bool,
    cx: &mut RouteContext<'_>,
    candidates: &mut Candidates,
) {
    let mut sum = 0u64;
    let mut live = 0usize;
    let mut last = 0usize;
    // Which of the first 64 destinations are live, so the pick does not evaluate them again.
    let mut live_mask = 0u64;
    for (j, (set, weight)) in dests.iter().enumerate() {
        if *weight > 0 && set.intersects(candidates, cx) {
            sum += u64::from(*weight);
            live += 1;
            last = j;
            if j < 64 {
                live_mask |= 1 << j;
            }
        }
    }
    if live == 0 {
        if force {
            candidates.clear();
            cx.explain(format_args!(
                "condition #{i}: every destination is empty and force=true: no provider"
            ));
        } else {
            cx.explain(format_args!(
                "condition #{i} ignored: every destination is empty and force=false"
            ));
        }
        return;
    }
    let pick = if live == 1 {
        last
    } else {
        let mut r = cx.rng().below(sum);
        let mut pick = last;
        for (j, (set, weight)) in dests.iter().enumerate() {
            let weight = u64::from(*weight);
            let is_live = if j < 64 {
                live_mask & (1 << j) != 0
            } else {
                weight > 0 && set.intersects(candidates, cx)
            };
            if is_live {
                if r < weight {
                    pick = j;
                    break;
                }
                r -= weight;
            }
        }
        pick
    };
    if let Some((set, weight)) = dests.get(pick) {
        set.and_into(candidates, cx);
        if cx.explaining() {
            let n = candidates.count();
            cx.explain(format_args!(
                "condition #{i}: when matched, destination #{pick} (weight {weight} of {sum}), {n} providers"
            ));
        }
    }
}

/// The factory of the `condition` router type.
#[derive(Debug, Clone, Copy, Default)]
pub struct ConditionFactory;

impl RouterFactory for ConditionFactory {
    fn default_priority(&self, spec: &RouterSpec<'_>) -> i32 {
        crate::scope_priority(spec, SERVICE_PRIORITY, APPLICATION_PRIORITY)
    }

    fn build(&self, spec: &RouterSpec<'_>) -> Result<Arc<dyn Router>, Vec<RuleError>> {
        Ok(Arc::new(match &spec.rule {
            None => ConditionRouter::passthrough(),
            Some(doc) => ConditionRouter::from_doc(doc)?,
        }))
    }
}

#[cfg(test)]
mod tests;
