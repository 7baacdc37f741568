//! The tag router (Dubbo's `TagStateRouter`): static tags from the providers' `dubbo.tag`
//! parameter, and a dynamic rule (`<provider-app>.tag-router`) that names tagged providers by
//! address pattern or by parameter `match`.
//!
//! Everything the rule and the snapshot decide is precomputed in [`PreparedTag::build`]:
//! static tag → providers, the untagged providers, every dynamic tag → providers (its
//! address patterns resolved, its `match` entries resolved against the snapshot as Dubbo
//! does on notify), and the failover set (in no dynamic tag, no static tag). Per call the
//! router reads the request tag and force flag, makes one hash lookup by `&str` per tag
//! level tried, and narrows the candidates with bitset operations.
//!
//! The two forces are kept apart, as in Dubbo: the rule's `force` only refuses the fallback
//! when a dynamic tag's addresses match none of the candidates; the request's
//! `dubbo.force.tag` refuses every fallback (and hierarchical fallback `a|b|c` → `a|b` → `a`).

mod address;
mod rule;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use routechain_core::{
    BitSet, Candidates, Evaluation, PrepareContext, ProviderSet, RouteContext, RouterSpec,
    RuleError, SetRef, Snapshot, TypedRouter, Url, ValueIndex,
};

pub use self::address::{AddressPattern, HostPort, Segment};
use self::rule::ParamMatch;
pub use self::rule::{RawTagRule, TagRule};

/// The request tag: invocation attachment, else consumer URL parameter; the provider's static
/// tag parameter.
pub const TAG_KEY: &str = "dubbo.tag";
/// The request force flag: invocation attachment, else consumer URL parameter.
pub const FORCE_TAG_KEY: &str = "dubbo.force.tag";
/// Dubbo's order for the tag router.
pub const DEFAULT_PRIORITY: i32 = 100;
/// The separator of hierarchical tags.
pub const TAG_SEPARATOR: char = '|';

/// The `tag` router type. An entry without a rule routes by static tags only.
#[derive(Debug, Clone, Copy, Default)]
pub struct TagRouter;

impl TypedRouter for TagRouter {
    type Raw = RawTagRule;
    type Rule = TagRule;
    type Prepared = PreparedTag;

    /// Compiled alike for every service: services of one chain configuration share it.
    fn reads_service(&self) -> bool {
        false
    }

    fn default_priority(&self, _rule: Option<&TagRule>) -> i32 {
        DEFAULT_PRIORITY
    }

    fn compile(&self, raw: RawTagRule, spec: &RouterSpec<'_>) -> Result<TagRule, Vec<RuleError>> {
        TagRule::compile(raw, spec.rule_path())
    }

    fn without_rule(&self, _spec: &RouterSpec<'_>) -> Result<Option<TagRule>, Vec<RuleError>> {
        Ok(Some(TagRule::static_only()))
    }

    fn prepare(rule: &Arc<TagRule>, cx: &PrepareContext<'_>) -> Result<PreparedTag, String> {
        let mut prepared = PreparedTag::build(cx.snapshot, Some(rule));
        prepared.consumer = ConsumerTag::of(cx.consumer);
        Ok(prepared)
    }

    fn route(
        prepared: &PreparedTag,
        cx: &mut RouteContext<'_>,
        candidates: &mut Candidates,
    ) -> Evaluation {
        prepared.route(cx, candidates)
    }

    /// The first router of a chain writes its set instead of ANDing into the full one.
    fn route_from_full(
        prepared: &PreparedTag,
        cx: &mut RouteContext<'_>,
        candidates: &mut Candidates,
    ) -> Evaluation {
        prepared.route_input(cx, candidates, Input::Full)
    }
}

/// The prepared consumer's `dubbo.tag` and `dubbo.force.tag` parameters, read once per
/// snapshot instead of per call (a call without a tag attachment falls back to them).
#[derive(Debug, Clone, Default)]
struct ConsumerTag {
    /// False when not read (a state built by [`PreparedTag::build`] alone): calls read the
    /// consumer URL.
    known: bool,
    /// The consumer's non-empty `dubbo.tag`.
    tag: Option<Box<str>>,
    /// The consumer's `dubbo.force.tag` is `true` (any case).
    force: bool,
}

impl ConsumerTag {
    fn of(consumer: &routechain_core::Url) -> Self {
        ConsumerTag {
            known: true,
            tag: non_empty(consumer.param(TAG_KEY)).map(Box::from),
            force: consumer_forces(consumer),
        }
    }
}

/// The consumer URL's `dubbo.force.tag` is `true` (any case).
fn consumer_forces(consumer: &routechain_core::Url) -> bool {
    consumer
        .param(FORCE_TAG_KEY)
        .is_some_and(|v| v.eq_ignore_ascii_case("true"))
}

/// What the router narrows: the candidates as given, or every provider (their words then
/// unspecified: each path writes the whole set).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Input {
    Candidates,
    Full,
}

impl Input {
    /// Whether `set` has a candidate.
    #[inline]
    fn intersects<'s>(self, set: impl Into<SetRef<'s>>, candidates: &Candidates) -> bool {
        match (self, set.into()) {
            (Input::Candidates, set) => set.intersects(candidates),
            (Input::Full, SetRef::Dense(b)) => !b.is_empty(),
            (Input::Full, SetRef::Sparse(indexes)) => !indexes.is_empty(),
        }
    }

    /// `candidates &= set`.
    #[inline]
    fn keep<'s>(self, set: impl Into<SetRef<'s>>, candidates: &mut Candidates) {
        match (self, set.into()) {
            (Input::Candidates, set) => set.and_into(candidates),
            (Input::Full, SetRef::Dense(b)) => candidates.copy_from(b),
            (Input::Full, SetRef::Sparse(indexes)) => {
                candidates.clear();
                for &i in indexes {
                    candidates.insert(i as usize);
                }
            }
        }
    }
}

/// What an enabled dynamic rule resolved to over one snapshot.
#[derive(Debug, Clone)]
struct Dynamic {
    /// The rule's `force`.
    force: bool,
    /// Tag name → providers at its addresses (Dubbo's `tagnameToAddresses`, resolved), by
    /// tag level. A tag is present when it has addresses (or its `match` found providers),
    /// even when they match no provider of this snapshot.
    by_tag: TagLevels,
    /// Providers in no dynamic tag and with no static tag.
    failover: ProviderSet,
}

/// The tag router's state for one snapshot and rule.
#[derive(Debug, Clone)]
pub struct PreparedTag {
    /// Static tag value → providers.
    static_tags: ValueIndex,
    /// The length of the longest static tag value: a longer request tag is no static tag,
    /// known without hashing it.
    static_max_len: usize,
    /// Providers with no (or an empty) static tag.
    untagged: ProviderSet,
    dynamic: Option<Dynamic>,
    /// The prepared consumer's tag parameters.
    consumer: ConsumerTag,
}

impl PreparedTag {
    /// Precomputes every set `rule` (or static routing alone) needs over `snapshot`.
    pub fn build(snapshot: &Snapshot, rule: Option<&TagRule>) -> Self {
        let len = snapshot.len();
        let static_tags = ValueIndex::build(snapshot, TAG_KEY);
        let static_max_len = static_tags
            .values()
            .map(|(v, _)| v.len())
            .max()
            .unwrap_or(0);
        let untagged = {
            let mut b = static_tags.missing().to_bitset();
            if let Some(empty) = static_tags.get("") {
                empty.or_into(&mut b);
            }
            ProviderSet::from_bitset(b)
        };
        let dynamic = rule.filter(|r| r.enabled).map(|rule| {
            let at: Vec<HostPort<'_>> = snapshot
                .providers()
                .iter()
                .map(|p| HostPort::new(p.host(), p.port()))
                .collect();
            let hosts = HostIndex::build(&at, rule.tags.iter().flat_map(|t| &t.addresses));
            // Straight into the trie (no map of every tag beside it while it is built).
            let mut by_tag = TagLevels::default();
            // Tags with addresses, in order (a later tag of the same name replaces it).
            let mut members = Vec::new();
            for tag in rule.tags.iter().filter(|t| !t.addresses.is_empty()) {
                members.clear();
                for a in &tag.addresses {
                    hosts.matching(a, &at, &mut members);
                }
                by_tag.insert(&tag.name, provider_set(len, &mut members));
            }
            // Tags with `match` (v3.0 only): resolved against this snapshot to the addresses
            // of the providers they match; a tag matching nothing is not set.
            if rule.uses_match() {
                for tag in rule.tags.iter().filter(|t| t.addresses.is_empty()) {
                    let Some(matches) = tag.matches.as_deref() else {
                        continue;
                    };
                    if let Some(set) = match_tag(matches, snapshot.providers(), &at) {
                        by_tag.insert(&tag.name, set);
                    }
                }
            }
            Dynamic {
                force: rule.force,
                failover: failover_of(&untagged, &by_tag, len),
                by_tag,
            }
        });
        PreparedTag {
            static_tags,
            static_max_len,
            untagged,
            dynamic,
            consumer: ConsumerTag::default(),
        }
    }
}

/// The providers of a `match` tag (`at`: each provider's address): every provider at the
/// address of a provider all `matches` select, or at its host when that provider has no
/// port (Dubbo's host-only address); `None` when they select no provider (the tag is then
/// not set).
fn match_tag(
    matches: &[ParamMatch],
    providers: &[Url],
    at: &[HostPort<'_>],
) -> Option<ProviderSet> {
    let addresses: HashSet<(&str, u16)> = providers
        .iter()
        .zip(at)
        .filter(|(p, _)| matches.iter().all(|m| m.is_match(p.param(&m.key))))
        .map(|(_, a)| (a.host, a.port))
        .collect();
    if addresses.is_empty() {
        return None;
    }
    let members = at
        .iter()
        .enumerate()
        .filter(|(_, a)| addresses.contains(&(a.host, a.port)) || addresses.contains(&(a.host, 0)))
        .map(|(i, _)| i as u32)
        .collect();
    Some(ProviderSet::from_sorted(members, at.len()))
}

/// The providers in no dynamic tag of `by_tag` and in `untagged`.
fn failover_of(untagged: &ProviderSet, by_tag: &TagLevels, len: usize) -> ProviderSet {
    let mut any = BitSet::empty(len);
    for set in by_tag.nodes.iter().filter_map(|n| n.set.as_ref()) {
        set.or_into(&mut any);
    }
    let mut failover = untagged.to_bitset();
    failover.and_not_assign(&any);
    ProviderSet::from_bitset(failover)
}

/// The dynamic tag set for `tag`: the tag itself, or (unless forced) its nearest ancestor
/// level `a|b|c` → `a|b` → `a`. Returns the level found. One pass over the tag, whatever
/// its length or number of `|`.
fn select_level<'t, 's>(
    by_tag: &'s TagLevels,
    tag: &'t str,
    forced: bool,
) -> Option<(&'t str, &'s ProviderSet)> {
    (by_tag.deepest(tag)).filter(|(level, _)| !forced || level.len() == tag.len())
}

/// Dynamic tags by level: a trie over the `|`-separated segments of the tag names, so the
/// nearest level of a request tag is found in one pass over it. (Trying each `|` prefix
/// of the request tag with a hash lookup, as Dubbo does, costs the square of its length: a
/// tag of 400,000 `|` took seconds.) A segment longer than every segment of the rule is
/// known to match none without hashing it, so a request tag of megabytes costs no hash of
/// its bytes unless the rule has a segment as long.
#[derive(Debug, Clone)]
struct TagLevels {
    nodes: Vec<LevelNode>,
    /// The length of the longest segment of any tag name.
    max_segment: usize,
}

#[derive(Debug, Clone, Default)]
struct LevelNode {
    /// The set of the tag ending at this node, if a tag does.
    set: Option<ProviderSet>,
    /// The next segment → its node (boxed and absent on a leaf, as most nodes are: a rule
    /// of a million flat tags has a million leaves).
    // The box is the point: 8 bytes on each leaf instead of an empty map's 48.
    #[allow(clippy::box_collection)]
    children: Option<Box<HashMap<Box<str>, u32>>>,
}

impl LevelNode {
    fn child(&self, segment: &str) -> Option<usize> {
        self.children.as_ref()?.get(segment).map(|&i| i as usize)
    }

    #[cfg(test)]
    fn children(&self) -> impl Iterator<Item = (&str, usize)> {
        self.children
            .iter()
            .flat_map(|c| c.iter().map(|(k, &v)| (&**k, v as usize)))
    }
}

impl Default for TagLevels {
    fn default() -> Self {
        TagLevels {
            nodes: vec![LevelNode::default()],
            max_segment: 0,
        }
    }
}

impl TagLevels {
    /// Sets the providers of tag `name`.
    fn insert(&mut self, name: &str, set: ProviderSet) {
        let mut node = 0;
        for segment in name.split(TAG_SEPARATOR) {
            self.max_segment = self.max_segment.max(segment.len());
            node = match self.nodes[node].child(segment) {
                Some(next) => next,
                None => {
                    let next = self.nodes.len();
                    self.nodes.push(LevelNode::default());
                    self.nodes[node]
                        .children
                        .get_or_insert_default()
                        .insert(segment.into(), next as u32);
                    next
                }
            };
        }
        self.nodes[node].set = Some(set);
    }

    /// The longest of `tag` and its `|`-prefixes that is a tag, with its providers.
    fn deepest<'t>(&self, tag: &'t str) -> Option<(&'t str, &ProviderSet)> {
        let mut node = 0;
        let mut best = None;
        let mut end = 0;
        for (i, segment) in tag.split(TAG_SEPARATOR).enumerate() {
            if segment.len() > self.max_segment {
                break;
            }
            let Some(next) = self.nodes[node].child(segment) else {
                break;
            };
            node = next;
            end += segment.len() + usize::from(i > 0);
            if let Some(set) = &self.nodes[node].set {
                best = Some((&tag[..end], set));
            }
        }
        best
    }

    /// Every tag with its providers.
    #[cfg(test)]
    fn entries(&self) -> Vec<(String, &ProviderSet)> {
        let mut out = Vec::new();
        let mut stack: Vec<(usize, String)> = vec![(0, String::new())];
        while let Some((node, name)) = stack.pop() {
            if let Some(set) = &self.nodes[node].set {
                out.push((name.clone(), set));
            }
            for (segment, child) in self.nodes[node].children() {
                let child_name = if node == 0 {
                    segment.to_string()
                } else {
                    format!("{name}{TAG_SEPARATOR}{segment}")
                };
                stack.push((child, child_name));
            }
        }
        out
    }
}

/// Providers by exact host, so that a tag's exact addresses (`10.0.0.1`, `10.0.0.1:20880`,
/// `host.example`) resolve with a lookup instead of a scan of the snapshot: a rule of a
/// million exact addresses prepares in time proportional to its size plus the snapshot.
/// Only the hosts the rule names exactly are indexed (the index is the size of the rule and
/// of the providers it names, not of the snapshot: at a million providers an index of every
/// host would be most of the tag router's preparation time and memory). Wildcard, range and CIDR
/// patterns scan the snapshot.
struct HostIndex {
    by_ip: HashMap<std::net::IpAddr, Vec<u32>>,
    by_name: HashMap<String, Vec<u32>>,
}

/// The IPv4 address an all-exact `pattern` names (`10.0.0.1`, with or without a port).
fn exact_ipv4(pattern: &AddressPattern) -> Option<std::net::IpAddr> {
    let AddressPattern::V4 { segments, .. } = pattern else {
        return None;
    };
    let mut octets = [0u8; 4];
    let exact = segments.iter().zip(&mut octets).all(|(s, o)| match s {
        Segment::Exact(n) => u8::try_from(*n).map(|n| *o = n).is_ok(),
        _ => false,
    });
    exact.then(|| std::net::IpAddr::from(octets))
}

impl HostIndex {
    /// Indexes the providers of `at` whose host one of `patterns` names exactly.
    fn build<'r>(at: &[HostPort<'_>], patterns: impl Iterator<Item = &'r AddressPattern>) -> Self {
        let mut by_ip: HashMap<std::net::IpAddr, Vec<u32>> = HashMap::new();
        let mut by_name: HashMap<String, Vec<u32>> = HashMap::new();
        for pattern in patterns {
            if let Some(ip) = exact_ipv4(pattern) {
                by_ip.entry(ip).or_default();
            } else if let AddressPattern::Host { name, .. } = pattern {
                by_name.entry(name.to_ascii_lowercase()).or_default();
            }
        }
        if by_ip.is_empty() && by_name.is_empty() {
            return HostIndex { by_ip, by_name };
        }
        // One buffer for hosts written with capitals (rare): no string per provider.
        let mut lower = String::new();
        for (i, hp) in at.iter().enumerate() {
            if let Some(ip) = hp.ip
                && let Some(found) = by_ip.get_mut(&ip)
            {
                found.push(i as u32);
            }
            if by_name.is_empty() {
                continue;
            }
            let host = if hp.host.bytes().any(|b| b.is_ascii_uppercase()) {
                lower.clear();
                lower.push_str(hp.host);
                lower.make_ascii_lowercase();
                lower.as_str()
            } else {
                hp.host
            };
            if let Some(found) = by_name.get_mut(host) {
                found.push(i as u32);
            }
        }
        HostIndex { by_ip, by_name }
    }

    /// Appends the providers `pattern` matches to `out`.
    fn matching(&self, pattern: &AddressPattern, at: &[HostPort<'_>], out: &mut Vec<u32>) {
        let candidates = match pattern {
            AddressPattern::V4 { .. } => exact_ipv4(pattern).map(|ip| self.by_ip.get(&ip)),
            AddressPattern::Host { name, .. } => Some(self.by_name.get(&name.to_ascii_lowercase())),
            _ => None,
        };
        match candidates {
            Some(found) => out.extend(
                found
                    .into_iter()
                    .flatten()
                    .filter(|&&i| pattern.matches(&at[i as usize])),
            ),
            None => out.extend((0..at.len() as u32).filter(|&i| pattern.matches(&at[i as usize]))),
        }
    }
}

/// The providers `members` (any order, repeats allowed) as a set over `len`.
fn provider_set(len: usize, members: &mut Vec<u32>) -> ProviderSet {
    members.sort_unstable();
    members.dedup();
    ProviderSet::from_bitset(BitSet::from_indexes(
        len,
        members.iter().map(|&i| i as usize),
    ))
}

/// A tag as a trace quotes it: whole up to [`SHORT_TAG_CHARS`] characters, else its first
/// ones, `…` and its length (Debug-formatted without allocating).
struct Short<'a>(&'a str);

/// The longest tag a trace quotes whole.
const SHORT_TAG_CHARS: usize = 64;

impl std::fmt::Debug for Short<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0.char_indices().nth(SHORT_TAG_CHARS) {
            None => write!(f, "{:?}", self.0),
            Some((end, _)) => write!(f, "{:?}… ({} bytes)", &self.0[..end], self.0.len()),
        }
    }
}

fn non_empty(v: Option<&str>) -> Option<&str> {
    v.filter(|s| !s.is_empty())
}

impl PreparedTag {
    /// Routes one call.
    pub fn route(&self, cx: &mut RouteContext<'_>, candidates: &mut Candidates) -> Evaluation {
        if candidates.is_empty() {
            return Evaluation::Runtime;
        }
        self.route_input(cx, candidates, Input::Candidates)
    }

    /// Routes one call from `input` (every provider, or non-empty candidates).
    #[inline]
    fn route_input(
        &self,
        cx: &mut RouteContext<'_>,
        candidates: &mut Candidates,
        input: Input,
    ) -> Evaluation {
        let request = cx.request();
        let consumer = cx.consumer();
        // The prepared consumer's parameters were read once per snapshot.
        let prepared = (self.consumer.known && cx.consumer_is_prepared()).then_some(&self.consumer);
        let tag = non_empty(request.attachments.get(TAG_KEY)).or_else(|| match prepared {
            Some(c) => c.tag.as_deref(),
            None => non_empty(consumer.param(TAG_KEY)),
        });
        let Some(tag) = tag else {
            // An untagged request never reaches a tagged provider.
            match &self.dynamic {
                Some(d) => {
                    input.keep(&d.failover, candidates);
                    cx.explain(format_args!(
                        "no request tag: providers in no dynamic tag and with no static tag"
                    ));
                }
                None => {
                    input.keep(&self.untagged, candidates);
                    cx.explain(format_args!("no request tag: providers with no static tag"));
                }
            }
            return Evaluation::Runtime;
        };
        // In a trace, a tag of megabytes is quoted cut (formatted only when tracing).
        let shown = Short(tag);
        let forced = match non_empty(request.attachments.get(FORCE_TAG_KEY)) {
            Some(v) => v.eq_ignore_ascii_case("true"),
            None => match prepared {
                Some(c) => c.force,
                None => consumer_forces(consumer),
            },
        };
        let fallback = match &self.dynamic {
            Some(d) => {
                if let Some((level, set)) = select_level(&d.by_tag, tag, forced) {
                    let shown_level = Short(level);
                    if input.intersects(set, candidates) {
                        input.keep(set, candidates);
                        cx.explain(format_args!(
                            "tag {shown:?}: dynamic addresses of tag {shown_level:?}"
                        ));
                    } else if d.force || forced {
                        candidates.clear();
                        cx.note_fallback();
                        let why = if d.force {
                            "rule force=true"
                        } else {
                            "dubbo.force.tag=true"
                        };
                        cx.explain(format_args!(
                            "tag {shown:?}: forced: empty ({why} and the dynamic addresses of tag {shown_level:?} match no candidate)"
                        ));
                    } else {
                        input.keep(&d.failover, candidates);
                        cx.note_fallback();
                        cx.explain(format_args!(
                            "tag {shown:?}: dynamic addresses of tag {shown_level:?} match no candidate; FAILOVER to untagged (in no dynamic tag, no static tag)"
                        ));
                    }
                    return Evaluation::Runtime;
                }
                &d.failover
            }
            None => &self.untagged,
        };
        // A tag longer than every static tag is none of them: not hashed (a request tag of
        // megabytes is then read once, by the trie walk above, and hashed never).
        let static_set = (tag.len() <= self.static_max_len)
            .then(|| self.static_tags.get(tag))
            .flatten();
        match static_set {
            Some(set) if input.intersects(set, candidates) => {
                input.keep(set, candidates);
                cx.explain(format_args!("tag {shown:?}: static tag"));
            }
            _ if forced => {
                candidates.clear();
                cx.note_fallback();
                cx.explain(format_args!(
                    "tag {shown:?}: forced: empty (dubbo.force.tag=true and no candidate has the static tag)"
                ));
            }
            _ => {
                input.keep(fallback, candidates);
                cx.note_fallback();
                if self.dynamic.is_some() {
                    cx.explain(format_args!(
                        "tag {shown:?}: no candidate has the tag; FAILOVER to untagged (in no dynamic tag, no static tag)"
                    ));
                } else {
                    cx.explain(format_args!(
                        "tag {shown:?}: no candidate has the static tag; FAILOVER to untagged (no static tag)"
                    ));
                }
            }
        }
        Evaluation::Runtime
    }
}

#[cfg(test)]
mod chain_tests;
#[cfg(test)]
mod examples_tests;
#[cfg(test)]
mod hostile_tests;
#[cfg(test)]
mod tests;
