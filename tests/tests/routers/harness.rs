//! The harness: one case = a chain (or one router entry with its rule) over providers, a
//! request, the providers expected after routing and the exact explain texts. Every case is
//! also routed without a trace (the same providers), and that call is checked to allocate
//! nothing once the call state's buffers have grown.
//!
//! Every case is then run again on chains carried to its providers by incremental updates
//! (`ChainState::next`, each router's `prepare_edit`), which must give the same
//! result: prepared without one provider, then that provider added (it moves to the end,
//! so the expected indexes are mapped), and prepared with a copy of one provider in front,
//! then that copy removed (the case's own providers, in order).

use std::sync::Arc;

use routechain::core::{
    BitSet, CallState, ChainState, Change, Evaluation, NoProvider, Request, Snapshot, Trace, Url,
};
use routechain::rules::ChainFile;
use serde_json::{Value, json};

/// The type name of the router that narrows the input before the routers under test run.
const INPUT: &str = "harness-input";

/// One case.
#[derive(Debug, Clone)]
pub struct Case {
    /// Names the case in failures (`file: name`).
    pub id: String,
    /// The providers.
    pub snapshot: Arc<Snapshot>,
    /// The consumer the chain is prepared for (default: the chain file's, else none).
    pub consumer: Option<Url>,
    /// The chain file as a JSON value (`{routers: [...], ...}`).
    pub chain: Value,
    /// The candidates entering the chain (default: every provider).
    pub input: Option<Vec<usize>>,
    /// Providers marked degraded in the live degraded set.
    pub degraded: Vec<usize>,
    /// The call.
    pub request: Request,
    /// The seed of the call's random source.
    pub seed: u64,
    /// What must come out.
    pub expect: Expect,
}

/// The expected result of a case.
#[derive(Debug, Clone)]
pub struct Expect {
    /// The providers left.
    pub providers: Providers,
    /// The explain reason of every router under test, in the order they run (`None`: not
    /// checked, for cases transcribed from Dubbo, which has no explain texts).
    pub explain: Option<Vec<String>>,
    /// How every router under test answered, when given.
    pub evaluation: Option<Evaluation>,
}

/// The expected providers.
#[derive(Debug, Clone)]
pub enum Providers {
    /// Exactly these (empty: none left).
    Exactly(Vec<usize>),
    /// A weighted choice: every call gives one of these sets; with `all_seen`, each occurs
    /// within `trials` calls.
    OneOf {
        /// The possible sets.
        sets: Vec<Vec<usize>>,
        /// How many calls to make.
        trials: usize,
        /// Whether every set must occur.
        all_seen: bool,
    },
}

/// A chain of one router entry of `type_name` with `rule` (`None`: an entry without a rule).
pub fn single(type_name: &str, rule: Option<Value>) -> Value {
    let mut entry = json!({ "type": type_name });
    if let Some(rule) = rule {
        entry["rule"] = rule;
    }
    json!({ "routers": [entry] })
}

/// The routed providers of a call (empty when a router left none).
fn outcome(result: Result<(), NoProvider>, call: &CallState) -> Vec<usize> {
    match result {
        Ok(()) => call.candidates.iter().collect(),
        Err(NoProvider::EmptiedBy { .. } | NoProvider::EmptySnapshot) => Vec::new(),
    }
}

/// Builds the case's chain state: the default registry, plus the input router when the case
/// narrows the input.
fn state(case: &Case) -> ChainState {
    let state = prepare(case, case.snapshot.clone());
    for &i in &case.degraded {
        state.degraded().mark(i);
    }
    state
}

/// Prepares the case's chain over `snapshot` (the input router, if any, keeps the case's
/// input over the case's own providers).
fn prepare(case: &Case, snapshot: Arc<Snapshot>) -> ChainState {
    let mut registry = routechain::registry();
    let mut chain = case.chain.clone();
    if let Some(input) = &case.input {
        let keep = BitSet::from_indexes(case.snapshot.len(), input.iter().copied());
        registry.register_fn(INPUT, i32::MIN, move |_, c| c.and_assign(&keep));
        chain["routers"]
            .as_array_mut()
            .unwrap_or_else(|| panic!("{}: the chain has a `routers` list", case.id))
            .insert(0, json!({ "type": INPUT }));
    }
    let text = serde_json::to_string_pretty(&chain).expect("JSON");
    let file = ChainFile::parse(&format!("{}.chain.yaml", case.id), &text, None)
        .unwrap_or_else(|e| panic!("{}: the chain parses: {e:?}", case.id));
    routechain::rules::load::build_state(&file, &registry, snapshot, case.consumer.clone())
        .unwrap_or_else(|e| panic!("{}: the chain compiles and prepares: {e:?}", case.id))
}

/// The case moved to the providers an edit leads to (`map`: old index → new index), with
/// its chain prepared over `before` and carried to them by `removed` and `added`.
fn edited_case(
    case: &Case,
    label: &str,
    before: Vec<Url>,
    removed: Vec<u32>,
    added: Vec<Url>,
    map: impl Fn(usize) -> usize,
) -> (Case, ChainState) {
    let id = format!("{} ({label})", case.id);
    let map_all = |v: &[usize]| {
        let mut out: Vec<usize> = v.iter().map(|&i| map(i)).collect();
        out.sort_unstable();
        out
    };
    let mut moved = case.clone();
    moved.id = id.clone();
    moved.input = case.input.as_deref().map(map_all);
    moved.degraded = map_all(&case.degraded);
    moved.expect.providers = match &case.expect.providers {
        Providers::Exactly(v) => Providers::Exactly(map_all(v)),
        Providers::OneOf {
            sets,
            trials,
            all_seen,
        } => Providers::OneOf {
            sets: sets.iter().map(|s| map_all(s)).collect(),
            trials: *trials,
            all_seen: *all_seen,
        },
    };
    let before = Arc::new(Snapshot::from_shared(1, before));
    let (after, edit) = before.edited(2, removed, added);
    let after = Arc::new(after);
    moved.snapshot = after.clone();
    // The input router keeps the moved case's input (over the edited providers).
    let state = prepare(&moved, before);
    let state = state
        .next(&Change::<()>::edit(after, edit))
        .unwrap_or_else(|e| panic!("{id}: the edit prepares: {e}"));
    // The marks carried over by the edit are replaced by the moved case's.
    for i in 0..state.degraded().len() {
        state.degraded().clear(i);
    }
    for &i in &moved.degraded {
        state.degraded().mark(i);
    }
    (moved, state)
}

/// The edited variants of `case` (see the module documentation), for a few providers:
/// the first, the middle and the last.
fn edited_variants(case: &Case) -> Vec<(Case, ChainState)> {
    let providers = case.snapshot.providers();
    let n = providers.len();
    let mut picks = vec![0, n / 2, n.saturating_sub(1)];
    picks.dedup();
    let mut out = Vec::new();
    for k in picks.into_iter().filter(|&k| k < n) {
        let mut without = providers.to_vec();
        let moved = without.remove(k);
        out.push(edited_case(
            case,
            &format!("provider {k} removed, then added back at the end"),
            without,
            Vec::new(),
            vec![moved],
            |i| match i.cmp(&k) {
                std::cmp::Ordering::Less => i,
                std::cmp::Ordering::Equal => n - 1,
                std::cmp::Ordering::Greater => i - 1,
            },
        ));
        let mut with_copy = vec![providers[k].clone()];
        with_copy.extend(providers.iter().cloned());
        out.push(edited_case(
            case,
            &format!("a copy of provider {k} in front, then removed"),
            with_copy,
            vec![0],
            Vec::new(),
            |i| i,
        ));
    }
    out
}

/// Runs one case, then its edited variants; panics with the case's id on any difference.
pub fn run(case: &Case) {
    run_on(case, &state(case));
    for (moved, state) in edited_variants(case) {
        run_on(&moved, &state);
    }
}

/// Runs one case on `state` (prepared for its providers).
fn run_on(case: &Case, state: &ChainState) {
    let id = &case.id;

    // The traced call: providers, explain texts, evaluations.
    let mut call = CallState::seeded(case.seed);
    let mut trace = Trace::default();
    let result = state.route_traced(&case.request, &mut call, &mut trace);
    let traced = outcome(result, &call);
    let steps: Vec<_> = trace.steps.iter().filter(|s| s.router != INPUT).collect();
    if let Some(explain) = &case.expect.explain {
        let got: Vec<&str> = steps.iter().map(|s| s.reason.as_str()).collect();
        assert_eq!(got, *explain, "{id}: explain texts");
    }
    if let Some(evaluation) = case.expect.evaluation {
        for s in &steps {
            assert_eq!(s.evaluation, evaluation, "{id}: {} evaluation", s.router);
        }
    }

    // The same call untraced: the same providers, and no allocation per call.
    let mut quiet = CallState::seeded(case.seed);
    let warm = state.route(&case.request, &mut quiet);
    assert_eq!(
        outcome(warm, &quiet),
        traced,
        "{id}: traced and untraced calls agree"
    );
    let info = allocation_counter::measure(|| {
        let _ = state.route(&case.request, &mut quiet);
    });
    assert_eq!(info.count_total, 0, "{id}: routing allocated: {info:?}");

    match &case.expect.providers {
        Providers::Exactly(want) => {
            assert_eq!(&traced, want, "{id}: providers");
        }
        Providers::OneOf {
            sets,
            trials,
            all_seen,
        } => {
            let mut seen = vec![false; sets.len()];
            let mut call = CallState::seeded(case.seed);
            for _ in 0..*trials {
                let got = outcome(state.route(&case.request, &mut call), &call);
                let k = sets
                    .iter()
                    .position(|s| *s == got)
                    .unwrap_or_else(|| panic!("{id}: {got:?} is none of {sets:?}"));
                seen[k] = true;
            }
            if *all_seen {
                assert!(seen.iter().all(|s| *s), "{id}: outcomes seen {seen:?}");
            }
        }
    }
}
