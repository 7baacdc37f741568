//! The harness: one case = a chain (or one router entry with its rule) over providers, a
//! request, the providers expected after routing and the exact explain texts. Every case is
//! also routed without a trace (the same providers), and that call is checked to allocate
//! nothing once the call state's buffers have grown.

use std::sync::Arc;

use routechain::core::{
    BitSet, CallState, ChainState, Evaluation, NoProvider, Request, Snapshot, Trace, Url,
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
    pub consumer: Option<Arc<Url>>,
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
    let state = routechain::rules::load::build_state(
        &file,
        &registry,
        case.snapshot.clone(),
        case.consumer.clone(),
    )
    .unwrap_or_else(|e| panic!("{}: the chain compiles and prepares: {e:?}", case.id));
    for &i in &case.degraded {
        state.degraded().mark(i);
    }
    state
}

/// Runs one case; panics with the case's id on any difference.
pub fn run(case: &Case) {
    let id = &case.id;
    let state = state(case);

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
