//! `select`, a test-only router type: rule `{key: K, value: V}` keeps the providers whose
//! `K` equals `V` (an empty result stays empty); no rule passes everything. Used to drive
//! live updates with rules whose effect identifies them.

use std::sync::Arc;

use routechain_core::{
    BitSet, Candidates, Evaluation, PrepareContext, PrepareError, PreparedRouter, Registry,
    RouteContext, Router, RouterFactory, RouterSpec, RuleError,
};

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSelect {
    key: String,
    value: String,
}

struct SelectFactory;

impl RouterFactory for SelectFactory {
    fn default_priority(&self, _spec: &RouterSpec<'_>) -> i32 {
        100
    }
    fn build(&self, spec: &RouterSpec<'_>) -> Result<Arc<dyn Router>, Vec<RuleError>> {
        let rule = match spec.rule {
            None => None,
            Some(doc) => {
                let raw: RawSelect = doc.parse().map_err(|e| vec![e])?;
                if raw.key.is_empty() {
                    return Err(vec![doc.error(
                        &routechain_core::FieldPath::root().key("key"),
                        "`key` must not be empty",
                    )]);
                }
                Some((raw.key, raw.value))
            }
        };
        Ok(Arc::new(Select { rule }))
    }
}

struct Select {
    rule: Option<(String, String)>,
}

impl Router for Select {
    fn name(&self) -> &str {
        "select"
    }
    fn prepare(&self, cx: &PrepareContext<'_>) -> Result<Arc<dyn PreparedRouter>, PrepareError> {
        let set = self.rule.as_ref().map(|(k, v)| {
            BitSet::from_fn(cx.snapshot.len(), |i| {
                cx.snapshot.providers()[i].get(k) == Some(v.as_str())
            })
        });
        Ok(Arc::new(PreparedSelect { set }))
    }
}

struct PreparedSelect {
    set: Option<BitSet>,
}

impl PreparedRouter for PreparedSelect {
    fn route(&self, _cx: &mut RouteContext<'_>, candidates: &mut Candidates) -> Evaluation {
        if let Some(set) = &self.set {
            candidates.and_assign(set);
        }
        Evaluation::Runtime
    }
}

/// routechain's registry plus the `select` type.
pub fn registry() -> Registry {
    let mut r = routechain::registry();
    r.register("select", Arc::new(SelectFactory));
    r
}
