//! The tag router's incremental provider update ([`PreparedTag::edited`]): the state for a
//! snapshot derived by a [`SnapshotEdit`] from the state of the one before, reading only the
//! added providers' URLs (and, for `match` tags, the providers at an address that joins or
//! leaves a tag).
//!
//! - static tags: the [`ParamIndex`](routechain_core::ParamIndex) and the untagged set are
//!   carried;
//! - address tags: a provider's membership depends on its own address only, so each tag's
//!   set is carried and the rule's patterns are matched against the added providers;
//! - `match` tags: a tag holds every provider at the address of a provider its `match`
//!   entries select, so a change of one provider can move others. The state records each
//!   tag's matched providers and how many sit at each address; an edit updates the counts
//!   and, when an address starts or stops being matched, re-decides the providers at that
//!   address, found through a per-provider address hash (no URL of another provider read).
//! - the failover set is recomputed from the tag sets (their size in words).
//!
//! Two rare shapes prepare from scratch instead (`None`): a rule whose `match` tag shares
//! its name with another tag (which one wins depends on which matches anything), and an
//! edit that makes an address without a port start or stop being matched (such an address
//! names its whole host, any port, and no index by host is kept).

use std::collections::HashMap;
use std::sync::Arc;

use routechain_core::{ProviderSet, Snapshot, SnapshotEdit, Url, stable_hash};

use super::rule::ParamMatch;
use super::{Dynamic, HostIndex, HostPort, PreparedTag, TAG_KEY, TagLevels, TagRule, failover_of};

/// Matched addresses: host → each port with the number of matched providers there.
type Addresses = HashMap<Arc<str>, Ports>;

/// A host's matched ports with their counts: one port (nearly always) without a heap
/// allocation, so that copying the map for an edit allocates only for hosts with several.
#[derive(Debug, Clone)]
enum Ports {
    One([(u16, u32); 1]),
    Many(Vec<(u16, u32)>),
}

impl Ports {
    fn slice(&self) -> &[(u16, u32)] {
        match self {
            Ports::One(one) => one,
            Ports::Many(many) => many,
        }
    }

    fn slice_mut(&mut self) -> &mut [(u16, u32)] {
        match self {
            Ports::One(one) => one,
            Ports::Many(many) => many,
        }
    }
}

/// What an incremental update of a rule's `match` tags needs.
#[derive(Debug, Clone)]
pub(super) struct MatchTags {
    /// Each provider's address (host and port) hashed: finds the providers at an address
    /// that starts or stops being matched with a scan of this table, not of the URLs (a hit
    /// is checked against the provider's real address).
    address_hash: Box<[u32]>,
    /// One per `match` tag of the rule, in rule order.
    pub(super) tags: Vec<MatchTag>,
    /// False when a `match` tag shares its name with another tag: edits prepare from
    /// scratch.
    derivable: bool,
}

/// One `match` tag over a snapshot.
#[derive(Debug, Clone)]
pub(super) struct MatchTag {
    /// The tag's index in [`TagRule::tags`].
    pub(super) tag: usize,
    /// The providers every `match` entry selects, ascending by position.
    matched: Vec<(u32, Url)>,
    /// Their addresses, counted.
    addresses: Addresses,
}

/// The hash of an address in [`MatchTags::address_hash`] (the host's stable hash with the
/// port mixed in, folded to 32 bits; hits are verified, so its quality only matters for
/// speed).
fn address_hash(host: &str, port: u16) -> u32 {
    let h = stable_hash(host.as_bytes()) ^ u64::from(port);
    (h ^ (h >> 32)) as u32
}

/// True when `addresses` counts a matched provider at `host:port`.
fn has(addresses: &Addresses, host: &str, port: u16) -> bool {
    addresses
        .get(host)
        .is_some_and(|ports| ports.slice().iter().any(|&(p, _)| p == port))
}

/// Counts one more matched provider at `host:port`.
fn count(addresses: &mut Addresses, host: &str, port: u16) {
    let Some(ports) = addresses.get_mut(host) else {
        addresses.insert(Arc::from(host), Ports::One([(port, 1)]));
        return;
    };
    if let Some((_, n)) = ports.slice_mut().iter_mut().find(|(p, _)| *p == port) {
        *n += 1;
        return;
    }
    let mut many = ports.slice().to_vec();
    many.push((port, 1));
    *ports = Ports::Many(many);
}

/// Counts one matched provider fewer at `host:port`.
fn uncount(addresses: &mut Addresses, host: &str, port: u16) {
    let Some(ports) = addresses.get_mut(host) else {
        return;
    };
    let Some(k) = ports.slice().iter().position(|&(p, _)| p == port) else {
        return;
    };
    ports.slice_mut()[k].1 -= 1;
    if ports.slice()[k].1 > 0 {
        return;
    }
    match ports {
        Ports::Many(many) if many.len() > 1 => {
            many.swap_remove(k);
        }
        _ => {
            addresses.remove(host);
        }
    }
}

/// True when `provider` is in the tag whose matched addresses are `addresses`: its address
/// is matched, or its host is matched without a port (Dubbo's host-only address).
fn member(addresses: &Addresses, provider: &Url) -> bool {
    has(addresses, provider.host(), provider.port()) || has(addresses, provider.host(), 0)
}

/// True when every `match` entry selects `provider`.
fn selects(matches: &[ParamMatch], provider: &Url) -> bool {
    matches.iter().all(|m| m.is_match(provider.param(&m.key)))
}

impl MatchTags {
    /// The `match` tags of `rule` over `snapshot` (`at`: each provider's address); `None`
    /// when the rule has none in force.
    pub(super) fn build(rule: &TagRule, snapshot: &Snapshot, at: &[HostPort<'_>]) -> Option<Self> {
        if !rule.uses_match() {
            return None;
        }
        let mut tags = Vec::new();
        for (k, tag) in rule.tags.iter().enumerate() {
            let Some(matches) = tag.matches.as_deref().filter(|_| tag.addresses.is_empty()) else {
                continue;
            };
            let mut matched = Vec::new();
            let mut addresses = Addresses::new();
            for (i, p) in snapshot.providers().iter().enumerate() {
                if selects(matches, p) {
                    count(&mut addresses, p.host(), p.port());
                    matched.push((i as u32, p.clone()));
                }
            }
            tags.push(MatchTag {
                tag: k,
                matched,
                addresses,
            });
        }
        if tags.is_empty() {
            return None;
        }
        // Which of two tags of one name is set depends on what a `match` tag matches.
        let mut names: HashMap<&str, usize> = HashMap::new();
        for t in rule
            .tags
            .iter()
            .filter(|t| !t.addresses.is_empty() || t.matches.is_some())
        {
            *names.entry(&t.name).or_default() += 1;
        }
        let derivable = tags.iter().all(|t| names[&*rule.tags[t.tag].name] == 1);
        Some(MatchTags {
            address_hash: at.iter().map(|a| address_hash(a.host, a.port)).collect(),
            tags,
            derivable,
        })
    }
}

impl MatchTag {
    /// The tag's providers (`at`: each provider's address), or `None` when it matches no
    /// provider (the tag is then not set).
    pub(super) fn resolve(&self, at: &[HostPort<'_>], len: usize) -> Option<ProviderSet> {
        if self.matched.is_empty() {
            return None;
        }
        let has = |i: usize| {
            has(&self.addresses, at[i].host, at[i].port) || has(&self.addresses, at[i].host, 0)
        };
        let members = (0..len).filter(|&i| has(i)).map(|i| i as u32).collect();
        Some(ProviderSet::from_sorted(members, len))
    }
}

impl PreparedTag {
    /// The state for `snapshot`, which follows this state's snapshot by `edit`, for the
    /// same `rule`; routes exactly as [`PreparedTag::build`] over `snapshot`. `None` in the
    /// two rare shapes of the module documentation.
    pub(super) fn edited(
        &self,
        rule: &TagRule,
        edit: &SnapshotEdit,
        snapshot: &Snapshot,
    ) -> Option<Self> {
        let static_tags = self.static_tags.edited(edit, snapshot, |p| p.get(TAG_KEY));
        let static_max_len = static_tags
            .values()
            .map(|(v, _)| v.len())
            .max()
            .unwrap_or(0);
        let untagged = self.untagged.edited(edit, |i| {
            snapshot.providers()[i]
                .get(TAG_KEY)
                .is_none_or(str::is_empty)
        });
        let dynamic = match &self.dynamic {
            Some(d) => Some(d.edited(rule, edit, snapshot, &untagged)?),
            None => None,
        };
        Some(PreparedTag {
            static_tags,
            static_max_len,
            untagged,
            dynamic,
            // The consumer is the one this state was prepared for.
            consumer: self.consumer.clone(),
        })
    }
}

impl Dynamic {
    /// The dynamic tags carried over `edit` (see the module documentation).
    fn edited(
        &self,
        rule: &TagRule,
        edit: &SnapshotEdit,
        snapshot: &Snapshot,
        untagged: &ProviderSet,
    ) -> Option<Self> {
        if self.matching.as_ref().is_some_and(|m| !m.derivable) {
            return None;
        }
        let start = edit.added().start;
        let at_added: Vec<HostPort<'_>> = snapshot.providers()[edit.added()]
            .iter()
            .map(|p| HostPort::new(p.host(), p.port()))
            .collect();
        // Address tags: of several of one name, the last is the one set.
        let address_tags = || {
            rule.tags
                .iter()
                .enumerate()
                .filter(|(_, t)| !t.addresses.is_empty())
        };
        let mut last: HashMap<&str, usize> = HashMap::new();
        for (k, t) in address_tags() {
            last.insert(&t.name, k);
        }
        let hosts = HostIndex::build(&at_added, rule.tags.iter().flat_map(|t| &t.addresses));
        let mut by_tag = TagLevels::default();
        let mut members = Vec::new();
        for (k, tag) in address_tags() {
            if last[&*tag.name] != k {
                continue;
            }
            members.clear();
            for a in &tag.addresses {
                hosts.matching(a, &at_added, &mut members);
            }
            members.sort_unstable();
            let old = self.by_tag.get(&tag.name)?;
            let set = old.edited(edit, |i| {
                members.binary_search(&((i - start) as u32)).is_ok()
            });
            by_tag.insert(&tag.name, set);
        }
        let matching = match &self.matching {
            Some(m) => Some(m.edited(rule, edit, snapshot, &self.by_tag, &mut by_tag)?),
            None => None,
        };
        Some(Dynamic {
            force: self.force,
            failover: failover_of(untagged, &by_tag, edit.new_len()),
            by_tag,
            matching,
        })
    }
}

impl MatchTags {
    /// The `match` tags carried over `edit`; each tag's set (from `old` for the old
    /// snapshot) is inserted into `by_tag` when the tag matches a provider.
    fn edited(
        &self,
        rule: &TagRule,
        edit: &SnapshotEdit,
        snapshot: &Snapshot,
        old: &TagLevels,
        by_tag: &mut TagLevels,
    ) -> Option<Self> {
        let providers = snapshot.providers();
        let start = edit.added().start;
        let hashes = edit.table(&self.address_hash, |i| {
            address_hash(providers[i].host(), providers[i].port())
        });
        let mut tags = Vec::with_capacity(self.tags.len());
        for t in &self.tags {
            let spec = &rule.tags[t.tag];
            let matches = spec.matches.as_deref()?;
            let mut addresses = t.addresses.clone();
            let mut matched = Vec::with_capacity(t.matched.len() + edit.added().len());
            // The matched providers removed or added: their addresses' counts change.
            let mut touched: Vec<&Url> = Vec::new();
            for (pos, p) in &t.matched {
                match edit.new_index(*pos as usize) {
                    Some(n) => matched.push((n as u32, p.clone())),
                    None => {
                        uncount(&mut addresses, p.host(), p.port());
                        touched.push(p);
                    }
                }
            }
            for i in edit.added() {
                let p = &providers[i];
                if selects(matches, p) {
                    count(&mut addresses, p.host(), p.port());
                    matched.push((i as u32, p.clone()));
                    touched.push(p);
                }
            }
            // Addresses that start or stop being matched move the survivors there.
            let mut changed: Vec<u32> = Vec::new();
            for p in touched {
                let (host, port) = (p.host(), p.port());
                if has(&t.addresses, host, port) != has(&addresses, host, port) {
                    if port == 0 {
                        // A whole host, any port: no index by host (module documentation).
                        return None;
                    }
                    changed.push(address_hash(host, port));
                }
            }
            let carried = match old.get(&spec.name).filter(|_| !t.matched.is_empty()) {
                Some(set) => set.edited(edit, |i| member(&addresses, &providers[i])),
                None => ProviderSet::empty(edit.old_len())
                    .edited(edit, |i| member(&addresses, &providers[i])),
            };
            let set = if changed.is_empty() {
                carried
            } else {
                changed.sort_unstable();
                changed.dedup();
                let mut bits = carried.to_bitset();
                for (i, h) in hashes[..start].iter().enumerate() {
                    if changed.binary_search(h).is_ok() {
                        if member(&addresses, &providers[i]) {
                            bits.insert(i);
                        } else {
                            bits.remove(i);
                        }
                    }
                }
                ProviderSet::from_bitset(bits)
            };
            if !matched.is_empty() {
                by_tag.insert(&spec.name, set);
            }
            tags.push(MatchTag {
                tag: t.tag,
                matched,
                addresses,
            });
        }
        Some(MatchTags {
            address_hash: hashes.into_boxed_slice(),
            tags,
            derivable: self.derivable,
        })
    }
}
