//! A test plugin that fails on purpose, to exercise the host's failure handling.
//!
//! Config: `{"fail": "panic" | "error", "in": "create" | "prepare" | "route"}` (defaults:
//! panic in route). Until it fails it keeps provider 0 only, so a host that ignored the
//! failure would show a narrowed set.

use routechain_plugin_abi::{
    CandidateWords, Explain, PluginPrepared, PluginRouter, RequestView, SnapshotView,
    export_router_plugin,
};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Fail {
    Panic,
    Error,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Stage {
    Create,
    Prepare,
    Route,
}

/// The faulty router.
pub struct Faulty {
    fail: Fail,
    stage: Stage,
}

fn fail(how: Fail, stage: &str) -> String {
    match how {
        Fail::Panic => panic!("faulty plugin panics in {stage}"),
        Fail::Error => format!("faulty plugin fails in {stage}"),
    }
}

impl Faulty {
    /// Parses the config.
    pub fn from_config(config: &str) -> Result<Self, String> {
        let v: serde_json::Value = serde_json::from_str(config).map_err(|e| e.to_string())?;
        let how = match v.get("fail").and_then(|f| f.as_str()).unwrap_or("panic") {
            "panic" => Fail::Panic,
            "error" => Fail::Error,
            other => return Err(format!("unknown `fail` {other:?}")),
        };
        let stage = match v.get("in").and_then(|f| f.as_str()).unwrap_or("route") {
            "create" => Stage::Create,
            "prepare" => Stage::Prepare,
            "route" => Stage::Route,
            other => return Err(format!("unknown `in` {other:?}")),
        };
        if stage == Stage::Create {
            return Err(fail(how, "create"));
        }
        Ok(Faulty { fail: how, stage })
    }
}

/// The prepared state.
pub struct FaultyPrepared {
    fail: Option<Fail>,
}

impl PluginRouter for Faulty {
    type Prepared = FaultyPrepared;
    fn prepare(&self, _: &SnapshotView<'_>) -> Result<FaultyPrepared, String> {
        if self.stage == Stage::Prepare {
            return Err(fail(self.fail, "prepare"));
        }
        Ok(FaultyPrepared {
            fail: (self.stage == Stage::Route).then_some(self.fail),
        })
    }
}

impl PluginPrepared for FaultyPrepared {
    fn route(
        &self,
        _: &RequestView<'_>,
        candidates: &mut CandidateWords<'_>,
        _: &mut Explain<'_>,
    ) -> Result<(), String> {
        // Narrow first, so a host that kept the plugin's half-done output would be caught.
        let first = candidates.words().first().copied().unwrap_or(0) & 1;
        candidates.clear();
        if let Some(w) = candidates.words_mut().first_mut() {
            *w = first;
        }
        match self.fail {
            Some(how) => Err(fail(how, "route")),
            None => Ok(()),
        }
    }
}

export_router_plugin! {
    "faulty" => Faulty::from_config,
}
