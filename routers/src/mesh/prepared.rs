//! The mesh router's state for one snapshot (subsets as provider sets, per application) and
//! its per-call route (spec §6–§12): route and detail selection, the exact weighted draw,
//! fallback chains, the union over applications, empty protection or `empty: fail`.
//!
//! Per call: string compares of the matchers, at most one draw per application, bitset
//! `intersects`/`and` (and `or` into the call's scratch set when two or more applications
//! contribute). Nothing allocates unless an explain trace is recorded.

use std::collections::BTreeMap;
use std::sync::Arc;

use routechain_core::{
    Candidates, Evaluation, ProviderSet, RouteContext, Snapshot, StickyKey, Url,
};

use super::matchers::CallView;
use super::rule::{AppRule, Destinations, DubboRoute, RouteDetail, Subset};
use super::{AppRules, MeshRule, application_of, interface_of};

/// One application with a rule and providers in the snapshot.
#[derive(Debug)]
struct PreparedApp {
    name: Box<str>,
    rule: Arc<AppRule>,
    /// One set per [`AppRule::subsets`] entry, over the whole snapshot.
    subsets: Box<[ProviderSet]>,
    /// The route (VirtualService, dubbo index) for the chain's own service, precomputed.
    chain_route: Option<(usize, usize)>,
}

/// The mesh router's state for one snapshot and rule.
#[derive(Debug)]
pub struct PreparedMesh {
    /// In ascending name order (the order of the draws).
    apps: Box<[PreparedApp]>,
    /// The chain's service, reduced to its interface.
    chain_service: Option<Box<str>>,
    empty_fail: bool,
    /// The entry's `hash_key`: sticky weighted draws.
    hash_key: Option<StickyKey>,
}

/// What one application's rule decided for a call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AppDecision<'p> {
    /// The application.
    pub app: &'p str,
    /// The VirtualService, route and detail reached (indexes), if a route matched.
    pub route: Option<(usize, usize)>,
    /// The detail that matched, if any.
    pub detail: Option<usize>,
    /// The destination drawn (index into the detail's `route`), if a draw happened.
    pub drawn: Option<usize>,
    /// The destination used and the depth in its fallback chain (0: its own subset).
    pub used: Option<(usize, usize)>,
    /// The subset used (index into the rule's subsets).
    pub subset: Option<usize>,
    /// The draw used the request's stable hash (`hash_key`) rather than a random number.
    pub sticky: bool,
}

impl PreparedMesh {
    /// Prepares `rule` over `snapshot`; `service` is the chain's.
    pub fn build(rule: &MeshRule, snapshot: &Snapshot, service: Option<&str>) -> Self {
        let chain_service: Option<Box<str>> = service.map(|s| interface_of(s).into());
        let mut members: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
        for (i, p) in snapshot.providers().iter().enumerate() {
            // The entry governs each provider's application, or its `app` alone.
            let governed = |app: &&str| rule.options.app.as_deref().is_none_or(|a| a == *app);
            if let Some(app) = application_of(p).filter(governed) {
                members.entry(app).or_default().push(i as u32);
            }
        }
        let apps = members.into_iter().filter_map(|(app, indexes)| {
            let rule = rule_of(rule, app)?;
            let subsets = rule
                .subsets
                .iter()
                .map(|s| {
                    let inside = indexes
                        .iter()
                        .copied()
                        .filter(|&i| in_subset(s, &snapshot.providers()[i as usize]))
                        .collect();
                    ProviderSet::from_sorted(inside, snapshot.len())
                })
                .collect();
            let chain_route = find_route(&rule, chain_service.as_deref());
            Some(PreparedApp {
                name: app.into(),
                rule,
                subsets,
                chain_route,
            })
        });
        PreparedMesh {
            apps: apps.collect(),
            chain_service,
            empty_fail: rule.options.empty_fail,
            hash_key: rule.options.hash_key.clone(),
        }
    }

    /// The applications with a rule and providers, in draw order.
    pub fn applications(&self) -> impl Iterator<Item = &str> + '_ {
        self.apps.iter().map(|a| &*a.name)
    }

    /// The members of `app`'s subset `name` (`None`: the nameless one), for tests and tools.
    pub fn subset_members(&self, app: &str, name: Option<&str>) -> Option<Vec<usize>> {
        let a = self.apps.iter().find(|a| &*a.name == app)?;
        let id = a
            .rule
            .subsets
            .iter()
            .position(|s| s.name.as_deref() == name)?;
        Some(a.subsets[id].to_bitset().iter().collect())
    }

    /// Routes one call: narrows `candidates` in place.
    pub fn route(&self, cx: &mut RouteContext<'_>, candidates: &mut Candidates) -> Evaluation {
        if self.apps.is_empty() {
            cx.explain(format_args!(
                "no mesh rule for the applications of the providers: input unchanged"
            ));
            return Evaluation::Cached;
        }
        let request = cx.request();
        let call = CallView {
            method: request.method.as_deref(),
            arguments: &request.arguments,
            parameter_types: &request.parameter_types,
            attachments: &request.attachments,
            consumer: cx.consumer(),
        };
        let requested = request.service.as_deref().map(interface_of);
        let cached_route = requested.is_none() || requested == self.chain_service.as_deref();
        let service = requested.or(self.chain_service.as_deref());
        // One stable hash per call, scaled onto each weighted draw's total.
        let sticky = match &self.hash_key {
            Some(key) => {
                let h = key.hash(request, cx.consumer());
                if h.is_none() && cx.explaining() {
                    cx.explain(format_args!(
                        "hash_key {key} has no value in the request: random draws"
                    ));
                }
                h
            }
            None => None,
        };
        let mut first: Option<&ProviderSet> = None;
        let mut union = false;
        let mut covered = false;
        for app in self.apps.iter() {
            let route = if cached_route {
                app.chain_route
            } else {
                find_route(&app.rule, service)
            };
            let mut decision = AppDecision {
                app: &app.name,
                route,
                ..Default::default()
            };
            if let Some((v, r)) = route {
                covered = true;
                let dubbo_route = &app.rule.virtual_services[v].routes[r];
                decision.detail = dubbo_route
                    .details
                    .iter()
                    .position(|d| d.matches.iter().all(|m| m.is_match(&call)));
                if let Some(route) = decision
                    .detail
                    .and_then(|d| dubbo_route.details[d].route.as_ref())
                {
                    pick(app, route, candidates, sticky, cx, &mut decision);
                    if let (Some((used, depth)), Some(drawn)) = (decision.used, decision.drawn)
                        && (depth > 0 || used != drawn)
                    {
                        cx.note_fallback();
                    }
                }
            }
            if cx.explaining() {
                explain_app(cx, app, service, &decision);
            }
            let Some(id) = decision.subset else { continue };
            let set = &app.subsets[id];
            match first {
                None => first = Some(set),
                Some(f) => {
                    let scratch = cx.scratch();
                    if !union {
                        scratch.reset_full(candidates.len());
                        scratch.clear();
                        f.or_into(scratch);
                        union = true;
                    }
                    set.or_into(scratch);
                }
            }
        }
        match first {
            None if self.empty_fail && covered => {
                candidates.clear();
                cx.note_fallback();
                cx.explain(format_args!("nothing selected, empty=fail: no provider"));
            }
            None => {
                if covered {
                    cx.note_fallback();
                }
                cx.explain(format_args!(
                    "nothing selected: empty protection, input unchanged"
                ))
            }
            Some(set) if !union => set.and_into(candidates),
            Some(_) => candidates.and_assign(cx.scratch()),
        }
        Evaluation::Runtime
    }
}

/// The rule of application `app`, if it has one.
fn rule_of(rule: &MeshRule, app: &str) -> Option<Arc<AppRule>> {
    match &rule.rules {
        AppRules::None => None,
        AppRules::Every(r) => Some(r.clone()),
        AppRules::PerApp(map) => map.get(app).cloned(),
    }
}

/// True when `provider` has every label of one of `subset`'s definitions.
fn in_subset(subset: &Subset, provider: &Url) -> bool {
    subset
        .label_sets
        .iter()
        .any(|labels| labels.iter().all(|(k, v)| provider.param(k) == Some(v)))
}

/// The first route, over the VirtualServices in order, whose `services` is empty or matches
/// `service`.
fn find_route(rule: &AppRule, service: Option<&str>) -> Option<(usize, usize)> {
    rule.virtual_services
        .iter()
        .enumerate()
        .find_map(|(v, vs)| {
            vs.routes
                .iter()
                .position(|r| {
                    r.services.is_empty() || r.services.iter().any(|m| m.is_match(service))
                })
                .map(|r| (v, r))
        })
}

/// Draws a destination and follows fallbacks and later destinations to the first subset
/// with a candidate (spec §9.2, §10).
/// With a `hash_key` value (`sticky`), the point is the hash scaled onto the total weight
/// (`weighted::scale`): a user keeps its place along the weights, so raising a weight moves
/// only the users at the margin.
fn pick(
    app: &PreparedApp,
    route: &Destinations,
    candidates: &Candidates,
    sticky: Option<u64>,
    cx: &mut RouteContext<'_>,
    decision: &mut AppDecision<'_>,
) {
    let n = route.eligible.len();
    if n == 0 {
        return;
    }
    let drawn = if n == 1 {
        0
    } else {
        let total = route.total();
        let r = match sticky {
            Some(h) => {
                decision.sticky = true;
                routechain_core::weighted::scale(h, total)
            }
            None => cx.rng().below(total),
        };
        route.cumulative.partition_point(|&c| c <= r)
    };
    decision.drawn = Some(route.eligible[drawn]);
    for k in 0..n {
        let d = route.eligible[(drawn + k) % n];
        for (depth, s) in route.list[d].chain.iter().enumerate() {
            if let Some(id) = s.id
                && app.subsets[id].intersects(candidates)
            {
                decision.used = Some((d, depth));
                decision.subset = Some(id);
                return;
            }
        }
    }
}

fn explain_app(
    cx: &mut RouteContext<'_>,
    app: &PreparedApp,
    service: Option<&str>,
    d: &AppDecision<'_>,
) {
    let Some((v, r)) = d.route else {
        cx.explain(format_args!(
            "app {}: no route for service {}",
            app.name,
            service.unwrap_or("(none)")
        ));
        return;
    };
    let vs = &app.rule.virtual_services[v];
    let route: &DubboRoute = &vs.routes[r];
    // A rule element's name, or `list[i]` when it has none.
    let name = |name: Option<&str>, list: &str, i: usize| {
        name.map_or_else(|| format!("{list}[{i}]"), |n| format!("{n:?}"))
    };
    let mut head = format!(
        "app {}: VirtualService {:?} {}",
        app.name,
        vs.name,
        name(route.name.as_deref(), "dubbo", r)
    );
    let Some(di) = d.detail else {
        cx.explain(format_args!("{head}: no detail matched"));
        return;
    };
    let detail: &RouteDetail = &route.details[di];
    head += &format!(
        " detail {}",
        name(detail.name.as_deref(), "routedetail", di)
    );
    let Some(dest) = detail.route.as_ref() else {
        cx.explain(format_args!("{head}: no route, nothing selected"));
        return;
    };
    let Some(drawn) = d.drawn else {
        let message = "every destination has weight 0, nothing selected";
        cx.explain(format_args!("{head}: {message}"));
        return;
    };
    let drawn_subset = dest.list[drawn].chain[0]
        .name
        .as_deref()
        .unwrap_or("(nameless)");
    let draw = if dest.eligible.len() == 1 {
        format!("single destination {drawn_subset:?}")
    } else {
        format!(
            "drew #{drawn} {drawn_subset:?} (weight {} of {}{})",
            dest.list[drawn].weight,
            dest.total(),
            if d.sticky { ", sticky" } else { "" }
        )
    };
    match (d.used, d.subset) {
        (Some((used, depth)), Some(id)) => {
            let subset = app.rule.subsets[id].name.as_deref().unwrap_or("(nameless)");
            let how = match (used == drawn, depth) {
                (true, 0) => String::new(),
                (true, k) => format!("; no candidate, fallback {k}"),
                (false, 0) => format!("; no candidate, next destination #{used}"),
                (false, k) => format!("; no candidate, next destination #{used} fallback {k}"),
            };
            let count = app.subsets[id].count();
            cx.explain(format_args!(
                "{head}: {draw}{how}: subset {subset:?} ({count} provider{})",
                if count == 1 { "" } else { "s" }
            ));
        }
        _ => cx.explain(format_args!(
            "{head}: {draw}: no destination or fallback has a candidate"
        )),
    }
}
