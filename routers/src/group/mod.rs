//! The group-assign router (`type: group`): routes each call to the provider group(s) the
//! request names, so one consumer subscribed to every group of an interface can call one
//! chosen group per call.
//!
//! The group travels in the request (attribute, then attachment), never in a thread-local:
//! a call fanned out to many tasks routes each task by its own request.
//!
//! Per snapshot the router indexes provider param value → providers
//! ([`routechain_core::ValueIndex`]); per call it looks up the named group (or each group of
//! a comma list, iterated in place) and ANDs the candidates with it (a list is first ORed
//! into the call's scratch bitset). Nothing allocates per call.
//!
//! Semantics, in order:
//! 1. The request value: the attribute named `attribute`, else the attachment of that name,
//!    else `default_group`. A blank value counts as absent.
//! 2. No value, or a value naming `*` → every candidate passes.
//! 3. Otherwise the candidates in any named group are kept. A provider without the param
//!    belongs to no group: only `*` or "no group named" reach it.
//! 4. No candidate in the named group(s): `force: true` → empty result; `force: false` →
//!    the candidates are left unchanged.

mod rule;

use std::sync::Arc;

use routechain_core::{
    Candidates, Evaluation, PrepareContext, RouteContext, RouterSpec, RuleError, SetRef,
    SnapshotEdit, TypedRouter, UrlKey, ValueIndex,
};

pub use self::rule::{GroupRule, RawGroupRule, group_names};
use crate::trim;

/// The default priority of the group router: after Dubbo's tag (100) and condition
/// (service 140, application 150) routers, before the IDC-weight router (170).
pub const DEFAULT_PRIORITY: i32 = 160;

/// The `group` router type; an entry without a rule gets the rule's defaults
/// ([`GroupRule::default`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct GroupRouter;

impl TypedRouter for GroupRouter {
    type Raw = RawGroupRule;
    type Rule = GroupRule;
    type Prepared = PreparedGroup;

    /// Compiled alike for every service: services of one chain configuration share it.
    fn reads_service(&self) -> bool {
        false
    }

    fn default_priority(&self, _rule: Option<&GroupRule>) -> i32 {
        DEFAULT_PRIORITY
    }

    fn compile(
        &self,
        raw: RawGroupRule,
        spec: &RouterSpec<'_>,
    ) -> Result<GroupRule, Vec<RuleError>> {
        GroupRule::compile(raw, spec.rule_path())
    }

    fn without_rule(&self, _spec: &RouterSpec<'_>) -> Result<Option<GroupRule>, Vec<RuleError>> {
        Ok(Some(GroupRule::default()))
    }

    fn prepare(rule: &Arc<GroupRule>, cx: &PrepareContext<'_>) -> Result<PreparedGroup, String> {
        Ok(PreparedGroup {
            rule: rule.clone(),
            index: ValueIndex::build(cx.snapshot, &rule.provider_param),
        })
    }

    /// The index carried over the edit ([`ValueIndex::edited`]: the added providers' values
    /// read only): a push at 100,000 providers then costs tens of microseconds here instead
    /// of a preparation's few milliseconds, the largest of the full chain's routers after
    /// the two that derive anyway (`cargo run --release -p routechain-benches --example
    /// edit_table`).
    fn prepare_edit(
        prepared: &PreparedGroup,
        rule: &Arc<GroupRule>,
        edit: &SnapshotEdit,
        cx: &PrepareContext<'_>,
    ) -> Option<Result<PreparedGroup, String>> {
        let key = UrlKey::new(&rule.provider_param);
        let index = prepared
            .index
            .edited(edit, cx.snapshot, |p| p.get_key(&key));
        Some(Ok(PreparedGroup {
            rule: rule.clone(),
            index,
        }))
    }

    fn route(
        prepared: &PreparedGroup,
        cx: &mut RouteContext<'_>,
        candidates: &mut Candidates,
    ) -> Evaluation {
        prepared.route(cx, candidates)
    }
}

/// The group router prepared for one snapshot: group → providers.
#[derive(Debug, Clone)]
pub struct PreparedGroup {
    rule: Arc<GroupRule>,
    index: ValueIndex,
}

/// Where the call's group value came from.
#[derive(Clone, Copy)]
enum Source {
    Attribute,
    Attachment,
    Default,
}

impl Source {
    fn describe(self) -> &'static str {
        match self {
            Source::Attribute => "attribute",
            Source::Attachment => "attachment",
            Source::Default => "default_group",
        }
    }
}

fn non_blank(v: &str) -> Option<&str> {
    (!trim(v).is_empty()).then_some(v)
}

impl PreparedGroup {
    /// Routes one call.
    pub fn route(&self, cx: &mut RouteContext<'_>, candidates: &mut Candidates) -> Evaluation {
        let rule = &*self.rule;
        let request = cx.request();
        let attr = &*rule.attribute;
        let found = request
            .attributes
            .get(attr)
            .and_then(non_blank)
            .map(|v| (v, Source::Attribute))
            .or_else(|| {
                request
                    .attachments
                    .get(attr)
                    .and_then(non_blank)
                    .map(|v| (v, Source::Attachment))
            })
            .or_else(|| rule.default_group.as_deref().map(|v| (v, Source::Default)));
        let Some((value, source)) = found else {
            cx.explain(format_args!(
                "no group named (attribute/attachment `{attr}` absent, no default_group): every provider passes"
            ));
            return Evaluation::Runtime;
        };

        let matched = if !value.contains(',') {
            // One group: a lookup and an AND.
            let group = trim(value);
            if group == "*" {
                cx.explain(format_args!(
                    "group `*` ({}): every provider passes",
                    source.describe()
                ));
                return Evaluation::Runtime;
            }
            match self.index.get(group) {
                // With `force`, no candidate in the group leaves none: AND and test in one
                // pass (the empty result is the forced one).
                Some(SetRef::Dense(set)) if rule.force => candidates.and_assign_any(set),
                Some(set) if set.intersects(candidates) => {
                    set.and_into(candidates);
                    true
                }
                _ => false,
            }
        } else {
            // A list: OR each named group into the scratch set, then AND.
            let n = candidates.len();
            let scratch = cx.scratch();
            if scratch.len() != n {
                scratch.reset_full(n);
            }
            scratch.clear();
            let mut named = false;
            let mut all = false;
            for group in group_names(value) {
                if group == "*" {
                    all = true;
                    break;
                }
                named = true;
                if let Some(set) = self.index.get(group) {
                    set.or_into(scratch);
                }
            }
            if all || !named {
                cx.explain(format_args!(
                    "group list {value:?} ({}) {}: every provider passes",
                    source.describe(),
                    if all { "names `*`" } else { "names no group" }
                ));
                return Evaluation::Runtime;
            }
            if candidates.intersects(scratch) {
                candidates.and_assign(scratch);
                true
            } else {
                false
            }
        };

        if matched {
            if cx.explaining() {
                cx.explain(format_args!(
                    "group {value:?} ({}): kept {} provider(s) of the group",
                    source.describe(),
                    candidates.count()
                ));
            }
        } else if rule.force {
            candidates.clear();
            cx.note_fallback();
            cx.explain(format_args!(
                "group {value:?} ({}) has no provider among the candidates; force=true: none left",
                source.describe()
            ));
        } else {
            cx.note_fallback();
            cx.explain(format_args!(
                "group {value:?} ({}) has no provider among the candidates; force=false: candidates unchanged",
                source.describe()
            ));
        }
        Evaluation::Runtime
    }
}

#[cfg(test)]
mod tests;
