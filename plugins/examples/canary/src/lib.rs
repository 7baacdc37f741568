//! # router-canary
//!
//! A routechain router plugin: a stable percentage of callers go to canary providers.
//!
//! ```yaml
//! routers:
//!   - type: plugin
//!     path: ../../../target/release/librouter_canary.so
//!     config:
//!       percent: 5          # share of callers, 0..100
//!       header: x-user      # the attachment identifying the caller (or `attribute: user`)
//!       param: canary       # provider param marking canary providers (default `canary`)
//!       value: "true"       # its value on them (default `true`)
//!       force: false        # true: leave none when the caller's group has no provider
//! ```
//!
//! The decision lives in [`logic`] (no ABI types); this file adapts it to the plugin ABI.

pub mod logic;

use routechain_plugin_abi::{
    CandidateWords, Explain, PluginPrepared, PluginRouter, RequestView, SnapshotView,
    export_router_plugin,
};

use logic::{CanaryRule, CanarySets, KeySource, Outcome};

/// The plugin router: a compiled [`CanaryRule`].
pub struct CanaryRouter {
    rule: std::sync::Arc<CanaryRule>,
}

impl CanaryRouter {
    /// Builds the router from the chain entry's `config` (JSON text).
    pub fn from_config(config: &str) -> Result<Self, String> {
        Ok(CanaryRouter {
            rule: std::sync::Arc::new(CanaryRule::from_json(config)?),
        })
    }
}

/// The canary and stable sets of one snapshot.
pub struct CanaryPrepared {
    rule: std::sync::Arc<CanaryRule>,
    sets: CanarySets,
}

impl PluginRouter for CanaryRouter {
    type Prepared = CanaryPrepared;
    fn prepare(&self, snapshot: &SnapshotView<'_>) -> Result<CanaryPrepared, String> {
        Ok(CanaryPrepared {
            rule: self.rule.clone(),
            sets: self.rule.prepare(snapshot.len(), |i, k| snapshot.get(i, k)),
        })
    }
}

impl PluginPrepared for CanaryPrepared {
    fn route(
        &self,
        request: &RequestView<'_>,
        candidates: &mut CandidateWords<'_>,
        explain: &mut Explain<'_>,
    ) -> Result<(), String> {
        let rule = &*self.rule;
        let (key, value) = match &rule.key {
            KeySource::Attachment(k) => (k, request.attachment(k)),
            KeySource::Attribute(k) => (k, request.attribute(k)),
        };
        let canary = rule.is_canary_caller(value);
        let outcome = self.sets.route(canary, candidates.words_mut());
        if explain.is_on() {
            let group = if canary { "canary" } else { "stable" };
            let who = match value {
                Some(v) => format!("caller {key}={v}"),
                None => format!("caller without {key}"),
            };
            match outcome {
                Outcome::Narrowed { .. } => explain.write(format_args!(
                    "{who} is a {group} caller ({}%): {group} providers",
                    rule.percent
                )),
                Outcome::Kept { .. } => explain.write(format_args!(
                    "{who} is a {group} caller: no {group} provider among the candidates, kept"
                )),
                Outcome::Emptied { .. } => explain.write(format_args!(
                    "{who} is a {group} caller: no {group} provider, force leaves none"
                )),
            }
        }
        Ok(())
    }
}

export_router_plugin! {
    "canary" => CanaryRouter::from_config,
}
