//! Several registries' providers in one chain, one registry chosen per call as Dubbo's
//! `ZoneAwareClusterInvoker.doInvoke` chooses among its registries' cluster invokers:
//!
//! 1. the first available registry with `preferred=true`;
//! 2. the zone of the call (its attachment `registry_zone`, else the consumer's configured
//!    zone, Dubbo's default `ZoneDetector`): the first available registry whose `zone` is
//!    it; none, with the attachment `registry_zone_force=true`: the call fails;
//! 3. a random draw among all the registries (by their `weight`, default 100, when the first
//!    one sets `weight`, as `RandomLoadBalance` weighs registry URLs; else uniform);
//! 4. a drawn registry that is not available: a draw among the available ones (Dubbo's
//!    `reselect`), which by the same rule is by weight when the first available one sets it.
//!
//! A registry is available while it lists a provider. The chain then routes the chosen
//! registry's providers alone ([`Registries::route`]: the set the routers start from, as
//! Dubbo's chosen registry invoker routes its own directory).
//!
//! A [`RegistryTable`] is what the source knows (the registries, the consumer's zone, which
//! registries list each address), given as [`super::ServiceConfig::registries`];
//! [`Registries`] is the table prepared over one snapshot (a bitset per registry), held in
//! the cluster's [`super::Published`] state next to the call parameters and rebuilt
//! whenever the providers or the table change. An address listed by several registries is
//! in each one's set, as in Dubbo it is in each registry's directory.

use std::collections::HashMap;
use std::sync::Arc;

use routechain_core::weighted::{self, Draw};
use routechain_core::{
    BitSet, CallState, ChainState, Evaluation, RandomSource, Request, Snapshot, Trace, TraceStep,
};

use super::{Published, SelectError, ServiceConfig};

/// The call attachment naming the call's zone (Dubbo's `REGISTRY_ZONE`).
pub const REGISTRY_ZONE: &str = "registry_zone";
/// The call attachment that, `true`, fails a call when no registry of its zone is
/// available (Dubbo's `REGISTRY_ZONE_FORCE`).
pub const REGISTRY_ZONE_FORCE: &str = "registry_zone_force";
/// At most this many registries are chosen among (a provider's registries are one word).
pub const MAX_REGISTRIES: usize = 64;

/// One registry's parameters in the choice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryInfo {
    /// The registry as messages name it (credentials masked).
    pub name: Arc<str>,
    /// `preferred=true`.
    pub preferred: bool,
    /// `zone`.
    pub zone: Option<Arc<str>>,
    /// `weight` (100 when not written).
    pub weight: u32,
    /// Whether `weight` was written: a draw is by weight only when the first registry of
    /// the list drawn from sets it.
    pub weighted: bool,
}

/// The registries of a chain and which of them lists each provider address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryTable {
    registries: Box<[RegistryInfo]>,
    zone: Option<Arc<str>>,
    /// Address → a bit per registry listing it.
    members: HashMap<Box<str>, u64>,
}

impl RegistryTable {
    /// A table of `registries` (at most [`MAX_REGISTRIES`]: the registry address refuses
    /// more; past it, the rest are left out with a warning), for a consumer in `zone` (the
    /// zone of a call without a `registry_zone` attachment).
    pub fn new(registries: Vec<RegistryInfo>, zone: Option<Arc<str>>) -> Self {
        let mut registries = registries;
        if registries.len() > MAX_REGISTRIES {
            tracing::warn!(
                registries = registries.len(),
                "only the first {MAX_REGISTRIES} registries are chosen among"
            );
            registries.truncate(MAX_REGISTRIES);
        }
        RegistryTable {
            registries: registries.into_boxed_slice(),
            zone,
            members: HashMap::new(),
        }
    }

    /// Records that registry `registry` lists a provider at `address`.
    pub fn insert(&mut self, address: &str, registry: usize) {
        if registry >= self.registries.len() {
            return;
        }
        let bit = 1u64 << registry;
        match self.members.get_mut(address) {
            Some(m) => *m |= bit,
            None => {
                self.members.insert(address.into(), bit);
            }
        }
    }

    /// The registries, in the order written.
    pub fn registries(&self) -> &[RegistryInfo] {
        &self.registries
    }

    /// The consumer's configured zone.
    pub fn zone(&self) -> Option<&str> {
        self.zone.as_deref()
    }

    /// The registries listing `address`, a bit each.
    pub fn registries_of(&self, address: &str) -> u64 {
        self.members.get(address).copied().unwrap_or(0)
    }
}

/// Why a registry was chosen for a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// The first available registry with `preferred=true`.
    Preferred,
    /// The first available registry of the call's `registry_zone` attachment.
    CallZone,
    /// The first available registry of the consumer's configured zone.
    ConsumerZone,
    /// Drawn among all the registries.
    Drawn,
    /// Drawn among the available ones, the first draw's registry having no provider.
    Redrawn,
}

/// The registry a call routes through, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Choice {
    /// Its position in [`RegistryTable::registries`].
    pub registry: usize,
    /// Why it was chosen.
    pub reason: Reason,
}

/// Why no registry could be chosen (see [`SelectError::ZoneForced`] and
/// [`SelectError::NoRegistry`] for the call's error).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoRegistry {
    /// `registry_zone_force=true` and no available registry is in the call's zone.
    ZoneForced,
    /// No registry has a provider.
    NoneAvailable,
}

/// The zone a call is routed in: its `registry_zone` attachment, else `configured`; with
/// whether a missing registry of that zone fails the call (only the attachment forces).
pub fn call_zone<'a>(
    request: &'a Request,
    configured: Option<&'a str>,
) -> Option<(&'a str, Reason, bool)> {
    match request
        .attachments
        .get(REGISTRY_ZONE)
        .filter(|z| !z.is_empty())
    {
        Some(zone) => {
            let force = request
                .attachments
                .get(REGISTRY_ZONE_FORCE)
                .is_some_and(|f| f.eq_ignore_ascii_case("true"));
            Some((zone, Reason::CallZone, force))
        }
        None => configured.map(|z| (z, Reason::ConsumerZone, false)),
    }
}

/// Dubbo's choice among `registries` (see the module documentation): `available(i)` says
/// whether registry `i` has a provider, `zone` is [`call_zone`]'s answer, `rng` draws.
pub fn choose(
    registries: &[RegistryInfo],
    available: impl Fn(usize) -> bool,
    zone: Option<(&str, Reason, bool)>,
    rng: &mut dyn RandomSource,
) -> Result<Choice, NoRegistry> {
    let n = registries.len();
    let first = |reason, pred: &dyn Fn(&RegistryInfo) -> bool| {
        (0..n)
            .find(|&i| available(i) && pred(&registries[i]))
            .map(|registry| Choice { registry, reason })
    };
    if let Some(c) = first(Reason::Preferred, &|r| r.preferred) {
        return Ok(c);
    }
    if let Some((zone, reason, force)) = zone {
        if let Some(c) = first(reason, &|r| r.zone.as_deref() == Some(zone)) {
            return Ok(c);
        }
        if force {
            return Err(NoRegistry::ZoneForced);
        }
    }
    if n == 0 {
        return Err(NoRegistry::NoneAvailable);
    }
    let drawn = draw(registries, |_| true, rng);
    if available(drawn) {
        return Ok(Choice {
            registry: drawn,
            reason: Reason::Drawn,
        });
    }
    if !(0..n).any(&available) {
        return Err(NoRegistry::NoneAvailable);
    }
    Ok(Choice {
        registry: draw(registries, available, rng),
        reason: Reason::Redrawn,
    })
}

/// `RandomLoadBalance` over the registries `among` keeps (at least one): by `weight` when
/// the first of them sets `weight` and the weights sum above 0, else uniform.
fn draw(
    registries: &[RegistryInfo],
    among: impl Fn(usize) -> bool,
    rng: &mut dyn RandomSource,
) -> usize {
    let n = registries.len();
    let by_weight = (0..n)
        .find(|&i| among(i))
        .is_some_and(|i| registries[i].weighted);
    if by_weight {
        let weight = |i: usize| {
            if among(i) {
                u64::from(registries[i].weight)
            } else {
                0
            }
        };
        if let Some(p) = weighted::pick(n, weight, Draw::Random, rng) {
            return p.index;
        }
    }
    let kept = (0..n).filter(|&i| among(i)).count() as u64;
    let k = rng.below(kept) as usize;
    (0..n).filter(|&i| among(i)).nth(k).unwrap_or(0)
}

/// A [`RegistryTable`] prepared over one snapshot: each registry's providers as a set.
#[derive(Debug, Clone)]
pub struct Registries {
    table: Arc<RegistryTable>,
    sets: Box<[BitSet]>,
}

impl Registries {
    /// `table` over `snapshot`: one look-up per provider.
    pub fn prepare(table: Arc<RegistryTable>, snapshot: &Snapshot) -> Self {
        let n = snapshot.len();
        let mut sets: Vec<BitSet> = (0..table.registries.len())
            .map(|_| BitSet::empty(n))
            .collect();
        for (i, url) in snapshot.providers().iter().enumerate() {
            let mut bits = table.registries_of(url.address());
            while bits != 0 {
                sets[bits.trailing_zeros() as usize].insert(i);
                bits &= bits - 1;
            }
        }
        Registries {
            table,
            sets: sets.into_boxed_slice(),
        }
    }

    /// The table this was prepared from.
    pub fn table(&self) -> &Arc<RegistryTable> {
        &self.table
    }

    /// Registry `i`'s providers.
    pub fn set(&self, i: usize) -> &BitSet {
        &self.sets[i]
    }

    /// The registry `request` routes through ([`choose`] with the call's zone).
    pub fn choose(
        &self,
        request: &Request,
        rng: &mut dyn RandomSource,
    ) -> Result<Choice, NoRegistry> {
        choose(
            &self.table.registries,
            |i| !self.sets[i].is_empty(),
            call_zone(request, self.table.zone()),
            rng,
        )
    }

    /// `choice` in words, for traces: `zookeeper://zk-b:2181: preferred=true`.
    pub fn describe(&self, choice: Choice, request: &Request) -> String {
        let r = &self.table.registries[choice.registry];
        let zone = call_zone(request, self.table.zone()).map_or("", |z| z.0);
        let why = match choice.reason {
            Reason::Preferred => "preferred=true".to_string(),
            Reason::CallZone => format!("zone={zone}, the call's registry_zone"),
            Reason::ConsumerZone => format!("zone={zone}, the consumer's zone"),
            Reason::Drawn | Reason::Redrawn => {
                // Dubbo weighs the draw when the first registry drawn among sets `weight`.
                let redrawn = choice.reason == Reason::Redrawn;
                let among = |i: &usize| !redrawn || !self.sets[*i].is_empty();
                let regs = &self.table.registries;
                let first = (0..regs.len()).find(among);
                let mode = if redrawn {
                    "drawn among the registries with providers"
                } else {
                    "drawn among all registries"
                };
                if first.is_some_and(|i| regs[i].weighted) {
                    let total: u64 = (0..regs.len())
                        .filter(among)
                        .map(|i| u64::from(regs[i].weight))
                        .sum();
                    format!("{mode} by weight, {} of {total}", r.weight)
                } else {
                    format!("{mode}, uniformly")
                }
            }
        };
        format!("registry {}: {why}", r.name)
    }

    /// Routes `request` through `state` (the chain state this was prepared over): chooses
    /// the registry, then routes its providers alone ([`ChainState::route_within`]); with
    /// `trace`, the choice is its first step (`registries`). No allocation without a trace.
    pub fn route<R: RandomSource>(
        &self,
        state: &ChainState,
        request: &Request,
        call: &mut CallState<R>,
        trace: Option<&mut Trace>,
    ) -> Result<(), SelectError> {
        if state.snapshot().is_empty() {
            // No provider at all: the chain's own error.
            return Ok(state.route_within(request, call, None, trace)?);
        }
        let choice = match self.choose(request, &mut call.rng) {
            Ok(c) => c,
            Err(e) => return Err(self.no_registry(e, state, request)),
        };
        let set = &self.sets[choice.registry];
        let mut trace = trace;
        if let Some(trace) = trace.as_deref_mut() {
            trace.steps.push(TraceStep {
                router: "registries".to_string(),
                priority: i32::MIN,
                evaluation: Evaluation::Runtime,
                before: state.snapshot().len(),
                after: set.count(),
                reason: self.describe(choice, request),
            });
        }
        Ok(state.route_within(request, call, Some(set), trace)?)
    }

    #[cold]
    fn no_registry(&self, e: NoRegistry, state: &ChainState, request: &Request) -> SelectError {
        tracing::debug!(
            service = state.service().unwrap_or(""),
            generation = state.generation(),
            ?e,
            "no provider: no registry to route through"
        );
        match (e, call_zone(request, self.table.zone())) {
            (NoRegistry::ZoneForced, Some((zone, _, _))) => SelectError::ZoneForced {
                zone: self
                    .table
                    .registries()
                    .iter()
                    .find_map(|r| r.zone.clone().filter(|z| **z == *zone)),
            },
            _ => SelectError::NoRegistry,
        }
    }
}

/// `config`'s registries over `snapshot`: `kept` when it was prepared from the same table
/// over the same snapshot.
pub(super) fn prepared(
    config: &ServiceConfig,
    snapshot: &Arc<Snapshot>,
    kept: Option<(&Arc<Registries>, &Arc<Snapshot>)>,
) -> Option<Arc<Registries>> {
    let table = config.registries.as_ref()?;
    Some(match kept {
        Some((r, s)) if Arc::ptr_eq(r.table(), table) && Arc::ptr_eq(s, snapshot) => r.clone(),
        _ => Arc::new(Registries::prepare(table.clone(), snapshot)),
    })
}

impl Published {
    /// Routes `request` as a call does: through the registry chosen for it when the
    /// configuration has several ([`Registries::route`]), else through the chain state;
    /// with `trace`, records the choice and what every router did. No lock, and no
    /// allocation without a trace once `call`'s buffers have grown.
    pub fn route<R: RandomSource>(
        &self,
        request: &Request,
        call: &mut CallState<R>,
        trace: Option<&mut Trace>,
    ) -> Result<(), SelectError> {
        match (&self.registries, trace) {
            (Some(r), trace) => r.route(&self.state, request, call, trace),
            (None, None) => Ok(self.state.route(request, call)?),
            (None, Some(trace)) => Ok(self.state.route_traced(request, call, trace)?),
        }
    }

    /// The configuration's registries prepared over the snapshot, when there are several.
    pub fn registries(&self) -> Option<&Arc<Registries>> {
        self.registries.as_ref()
    }
}

#[cfg(test)]
mod tests;
