//! A call's parameters where Dubbo takes them: `timeout`, `retries`, `loadbalance`,
//! `cluster`, `forks` and a method's own `weight`, each per method (`<method>.<key>`),
//! merged from the consumer's
//! settings (the chain file: [`ServiceConfig`]), the providers' URLs and the override rules,
//! in Dubbo's order (`DubboServiceAddressURL.getMethodParameter`), highest first:
//!
//! 1. a call attachment (`timeout`, `retries`: read by [`crate::Cluster::call`]);
//! 2. an override rule, method level (`<method>.<key>`);
//! 3. the consumer, method level (`methods.<method>.…`);
//! 4. the provider's URL, method level (only for a method its `methods` param lists:
//!    Dubbo's `getMethodParameterStrict`);
//! 5. an override rule, service level;
//! 6. the consumer, service level;
//! 7. the provider's URL, service level;
//! 8. Dubbo's default.
//!
//! Who may set what, as in Dubbo: `timeout` and `loadbalance` every layer; `retries` and
//! `forks` only the consumer and the override rules (Dubbo's cluster reads them from the
//! consumer's URL, never a provider's); `cluster` only the consumer (chosen when the
//! reference is made); `<method>.weight` the providers and the rules (the service-level
//! `weight` is the balancers' own table, [`crate::lb::Weights`]; a method with a weight of
//! its own gets a table of its own, [`CallParams::method_weight_tables`]).
//!
//! Override rules reach a consumer merged into the provider URLs (`routechain-live`); the
//! keys they set from the consumer side are told apart by the service's override layer
//! ([`ServiceConfig::overrides`], asked once per provider URL read), not by anything in the
//! URL, so a merged value is known to be the rule's and routers see only what the registry
//! and the rules give.
//!
//! Everything is resolved when providers or settings change: each provider's call
//! parameters are parsed once (a few [`Entry`] values, carried over a provider edit like the
//! weights), method names get small ids, and the consumer's values are a table by method
//! id. A call looks its method up once (a binary search among the method names the
//! service knows) and then reads the tables: for a value that varies by provider (the
//! selected provider's `timeout`) it scans that provider's few entries, comparing ids —
//! no string, no allocation.

use std::sync::Arc;
use std::time::Duration;

use routechain_core::{Provider, Snapshot, SnapshotEdit};

use super::config::{
    ClusterMode, DEFAULT_FORKS, DEFAULT_RETRIES, DEFAULT_TIMEOUT, OverrideLayer, ServiceConfig,
};
use crate::lb::warmup::{DEFAULT_WARMUP_MS, warm_params, weight_at};
use crate::lb::{BalanceConfig, DEFAULT_WEIGHT, LoadBalanceKind, WeightParam};

/// Where an effective call parameter came from, highest precedence first (Dubbo's order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Source {
    /// The call's attachment.
    Attachment,
    /// An override rule's `<method>.<key>`.
    OverrideMethod,
    /// The consumer's `methods.<method>` setting (chain file).
    ConsumerMethod,
    /// The provider URL's `<method>.<key>`.
    ProviderMethod,
    /// An override rule's `<key>`.
    OverrideService,
    /// The consumer's service setting (chain file).
    ConsumerService,
    /// The provider URL's `<key>`.
    ProviderService,
    /// Dubbo's default.
    Default,
}

impl Source {
    /// How `explain` and `simulate` name it.
    pub fn name(self) -> &'static str {
        match self {
            Source::Attachment => "attachment",
            Source::OverrideMethod => "override rule (method)",
            Source::ConsumerMethod => "consumer (method)",
            Source::ProviderMethod => "provider URL (method)",
            Source::OverrideService => "override rule",
            Source::ConsumerService => "consumer",
            Source::ProviderService => "provider URL",
            Source::Default => "default",
        }
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A call parameter read from provider URLs and override rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CallKey {
    /// `timeout`, milliseconds.
    Timeout,
    /// `retries`.
    Retries,
    /// `loadbalance`.
    LoadBalance,
    /// `forks`.
    Forks,
    /// `<method>.weight` (the service-level `weight` is the balancers' own table:
    /// [`crate::lb::Weights`]).
    Weight,
}

impl CallKey {
    const ALL: [CallKey; 5] = [
        CallKey::Timeout,
        CallKey::Retries,
        CallKey::LoadBalance,
        CallKey::Forks,
        CallKey::Weight,
    ];

    /// Dubbo's key.
    pub fn name(self) -> &'static str {
        match self {
            CallKey::Timeout => "timeout",
            CallKey::Retries => "retries",
            CallKey::LoadBalance => "loadbalance",
            CallKey::Forks => "forks",
            CallKey::Weight => "weight",
        }
    }

    /// True when a provider URL's own value counts (`retries` and `forks` never do).
    fn providers_may_set(self) -> bool {
        matches!(
            self,
            CallKey::Timeout | CallKey::LoadBalance | CallKey::Weight
        )
    }

    fn parse(key: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == key)
    }
}

/// True for a key this module reads from provider URLs: `timeout`, `retries`,
/// `loadbalance`, `forks`, `weight`, or one of them after `<method>.`; and `warmup`, which
/// [`CallParams::effective`] shows with its source.
pub fn is_call_key(key: &str) -> bool {
    key == "warmup"
        || CallKey::parse(key).is_some()
        || key
            .rsplit_once('.')
            .is_some_and(|(m, k)| !m.is_empty() && CallKey::parse(k).is_some())
}

/// No method: a service-level entry.
const SERVICE: u16 = u16::MAX;

/// One call parameter of one provider's URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Entry {
    method: u16,
    key: CallKey,
    /// Set by an override rule.
    overridden: bool,
    /// Milliseconds, a count, a weight, or a [`LoadBalanceKind`]'s position in
    /// [`LoadBalanceKind::ALL`].
    value: i64,
}

/// The method names a service knows, with small ids that stay the same for the life of the
/// service's published states (a name is only ever added), so the providers' entries
/// carried over an edit keep theirs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Names {
    /// By id.
    names: Vec<Arc<str>>,
    /// Ids sorted by name.
    sorted: Vec<u16>,
}

impl Names {
    fn id(&self, name: &str) -> Option<u16> {
        self.sorted
            .binary_search_by(|&i| (*self.names[i as usize]).cmp(name))
            .ok()
            .map(|k| self.sorted[k])
    }

    fn intern(&mut self, name: &str) -> u16 {
        match self
            .sorted
            .binary_search_by(|&i| (*self.names[i as usize]).cmp(name))
        {
            Ok(k) => self.sorted[k],
            Err(k) => {
                // Past 65,534 names a method shares the service's values.
                let Ok(id) = u16::try_from(self.names.len()) else {
                    return SERVICE;
                };
                if id == SERVICE {
                    return SERVICE;
                }
                self.names.push(name.into());
                self.sorted.insert(k, id);
                id
            }
        }
    }
}

/// The consumer's values of one method (or of the service), with their level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Consumer {
    timeout: Option<(i64, Source)>,
    retries: Option<(i64, Source)>,
    forks: Option<(i64, Source)>,
    loadbalance: Option<(i64, Source)>,
    cluster: (ClusterMode, Source),
    /// The balancer slot of the method.
    slot: usize,
    /// The method's weight table, when some provider or rule sets `<method>.weight`.
    weights: Option<u16>,
}

/// The resolved call parameters of a service's published state (see the module
/// documentation).
#[derive(Debug, Clone)]
pub struct CallParams {
    names: Names,
    /// Each provider's entries: an index into `lists` (0: no call parameter in its URL).
    /// Providers of one service mostly publish the same parameters, so a list is stored
    /// once and a provider edit copies indexes.
    providers: Box<[u32]>,
    /// The distinct entry lists, the empty one first.
    lists: Arc<Lists>,
    /// By method id; the service's values last.
    consumer: Box<[Consumer]>,
    /// The balancers: the consumer's, with a slot for each algorithm a provider names.
    balance: BalanceConfig,
    /// True when some provider names a `loadbalance`: the call resolves it then.
    any_loadbalance: bool,
    /// The methods with a weight of their own (`<method>.weight` in some provider's
    /// entries), increasing: weight table `k` is method `weighed[k]`'s.
    weighed: Box<[u16]>,
    /// The override layer the entries were read with.
    overrides: OverrideLayer,
}

/// The distinct entry lists of a service's providers (see [`CallParams`]).
#[derive(Debug, Clone, Default)]
struct Lists {
    lists: Vec<Box<[Entry]>>,
    index: std::collections::HashMap<Box<[Entry]>, u32>,
}

impl Lists {
    fn new() -> Self {
        let mut l = Lists::default();
        l.lists.push(Box::new([]));
        l
    }

    fn intern(&mut self, entries: &[Entry]) -> u32 {
        if entries.is_empty() {
            return 0;
        }
        if let Some(&i) = self.index.get(entries) {
            return i;
        }
        let i = u32::try_from(self.lists.len()).unwrap_or(0);
        self.lists.push(entries.into());
        self.index.insert(entries.into(), i);
        i
    }

    fn get(&self, i: u32) -> &[Entry] {
        self.lists.get(i as usize).map_or(&[], |l| l)
    }
}

/// A method as a call resolves it: its id, or none (the service's values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MethodId(u16);

/// An effective value and where it came from.
pub type Effective<T> = (T, Source);

fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

impl CallParams {
    /// The parameters of `snapshot`'s providers under `config`.
    pub fn new(snapshot: &Snapshot, config: &ServiceConfig) -> Self {
        let mut names = Names::default();
        let mut lists = Lists::new();
        let mut reader = Reader::new(&config.overrides);
        let providers = snapshot
            .providers()
            .iter()
            .map(|p| lists.intern(reader.entries(p, &mut names)))
            .collect();
        Self::with(names, providers, Arc::new(lists), config)
    }

    /// The parameters of `snapshot`, derived from these (of the snapshot `edit` started
    /// from): the survivors' list indexes copied, only the added providers' URLs read.
    /// Under another override layer every provider is read again ([`CallParams::new`]).
    pub fn edited(&self, edit: &SnapshotEdit, snapshot: &Snapshot, config: &ServiceConfig) -> Self {
        if config.overrides != self.overrides {
            return Self::new(snapshot, config);
        }
        let mut names = self.names.clone();
        let list = snapshot.providers();
        let mut lists = None::<Lists>;
        let mut reader = Reader::new(&config.overrides);
        let providers = edit
            .table(&self.providers, |i| {
                let found = match list.get(i) {
                    Some(p) => reader.entries(p, &mut names),
                    None => &[],
                };
                if found.is_empty() {
                    return 0;
                }
                lists
                    .get_or_insert_with(|| (*self.lists).clone())
                    .intern(found)
            })
            .into_boxed_slice();
        let lists = lists.map_or_else(|| self.lists.clone(), Arc::new);
        Self::with(names, providers, lists, config)
    }

    /// The same providers' parameters under another `config` with the same override layer
    /// (under another one, read the providers again: [`CallParams::new`]).
    pub fn configured(&self, config: &ServiceConfig) -> Self {
        debug_assert!(config.overrides == self.overrides);
        Self::with(
            self.names.clone(),
            self.providers.clone(),
            self.lists.clone(),
            config,
        )
    }

    fn with(
        mut names: Names,
        providers: Box<[u32]>,
        lists: Arc<Lists>,
        config: &ServiceConfig,
    ) -> Self {
        for m in config.methods.keys() {
            names.intern(m);
        }
        for (m, _) in config.balance.methods() {
            names.intern(m);
        }
        // The algorithms the lists name (a list no provider uses any more still gets its
        // slot: harmless, and it saves a pass over the providers).
        let kinds: Vec<LoadBalanceKind> = lists
            .lists
            .iter()
            .flat_map(|e| e.iter())
            .filter(|e| e.key == CallKey::LoadBalance)
            .map(|e| LoadBalanceKind::ALL[e.value as usize])
            .collect();
        let any_loadbalance = !kinds.is_empty();
        let mut weighed: Vec<u16> = lists
            .lists
            .iter()
            .flat_map(|e| e.iter())
            .filter(|e| e.key == CallKey::Weight)
            .map(|e| e.method)
            .collect();
        weighed.sort_unstable();
        weighed.dedup();
        let mut balance = config.balance.clone().with_kinds(kinds);
        balance.timeout_ms = config.timeout.map(ms);
        let service = Consumer {
            timeout: config.timeout.map(|t| (ms(t), Source::ConsumerService)),
            retries: config
                .retries
                .map(|r| (i64::from(r), Source::ConsumerService)),
            forks: config
                .forks
                .map(|f| (i64::from(f), Source::ConsumerService)),
            loadbalance: balance
                .default_named
                .then(|| (kind_value(balance.default.kind), Source::ConsumerService)),
            cluster: config
                .cluster
                .map_or((ClusterMode::Failover, Source::Default), |c| {
                    (c, Source::ConsumerService)
                }),
            slot: 0,
            weights: None,
        };
        let consumer = names
            .names
            .iter()
            .map(|name| {
                let call = config.methods.get(&**name).copied().unwrap_or_default();
                let slot = balance.slot(Some(name));
                let own = |v: Option<i64>, up: Option<(i64, Source)>| {
                    v.map(|v| (v, Source::ConsumerMethod)).or(up)
                };
                Consumer {
                    timeout: own(call.timeout.map(ms), service.timeout),
                    retries: own(call.retries.map(i64::from), service.retries),
                    forks: own(call.forks.map(i64::from), service.forks),
                    loadbalance: if slot != 0 && balance.named(slot) {
                        Some((kind_value(balance.spec(slot).kind), Source::ConsumerMethod))
                    } else {
                        service.loadbalance
                    },
                    cluster: call
                        .cluster
                        .map_or(service.cluster, |c| (c, Source::ConsumerMethod)),
                    slot,
                    weights: None,
                }
            })
            .chain(std::iter::once(service))
            .collect::<Box<[Consumer]>>();
        let mut consumer = consumer;
        for (k, &m) in weighed.iter().enumerate() {
            if let (Some(c), Ok(k)) = (consumer.get_mut(usize::from(m)), u16::try_from(k)) {
                c.weights = Some(k);
            }
        }
        CallParams {
            names,
            providers,
            lists,
            consumer,
            balance,
            any_loadbalance,
            weighed: weighed.into_boxed_slice(),
            overrides: config.overrides.clone(),
        }
    }

    /// True when these were read with `config`'s override layer (else a new configuration
    /// needs [`CallParams::new`]).
    pub fn reads_overrides_of(&self, config: &ServiceConfig) -> bool {
        self.overrides == config.overrides
    }

    /// The balancers: the consumer's, with a slot for each algorithm providers name.
    pub fn balance(&self) -> &BalanceConfig {
        &self.balance
    }

    /// The id of `method` (a binary search among the names the service knows).
    #[inline]
    pub fn method(&self, method: Option<&str>) -> MethodId {
        MethodId(
            method
                .filter(|_| !self.names.names.is_empty())
                .and_then(|m| self.names.id(m))
                .unwrap_or(SERVICE),
        )
    }

    #[inline]
    fn consumer(&self, m: MethodId) -> &Consumer {
        let i = if m.0 == SERVICE {
            self.consumer.len() - 1
        } else {
            m.0 as usize
        };
        &self.consumer[i]
    }

    /// `key` for method `m` on provider `provider` (none: the consumer's and the
    /// defaults), before attachments: Dubbo's layers 2 to 8.
    fn resolve(&self, key: CallKey, m: MethodId, provider: Option<usize>) -> Option<(i64, Source)> {
        let entries: &[Entry] = provider
            .and_then(|i| self.providers.get(i))
            .map_or(&[], |&l| self.lists.get(l));
        let find = |method: u16, overridden: bool| {
            entries
                .iter()
                .find(|e| e.key == key && e.method == method && e.overridden == overridden)
                .map(|e| e.value)
        };
        let consumer = self.consumer(m);
        let mine = match key {
            CallKey::Timeout => consumer.timeout,
            CallKey::Retries => consumer.retries,
            CallKey::LoadBalance => consumer.loadbalance,
            CallKey::Forks => consumer.forks,
            CallKey::Weight => None,
        };
        if m.0 != SERVICE {
            if let Some(v) = find(m.0, true) {
                return Some((v, Source::OverrideMethod));
            }
            if let Some(c) = mine.filter(|(_, s)| *s == Source::ConsumerMethod) {
                return Some(c);
            }
            if key.providers_may_set()
                && let Some(v) = find(m.0, false)
            {
                return Some((v, Source::ProviderMethod));
            }
        }
        if let Some(v) = find(SERVICE, true) {
            return Some((v, Source::OverrideService));
        }
        if let Some(c) = mine.filter(|(_, s)| *s == Source::ConsumerService) {
            return Some(c);
        }
        if key.providers_may_set()
            && let Some(v) = find(SERVICE, false)
        {
            return Some((v, Source::ProviderService));
        }
        None
    }

    /// The timeout of an attempt of method `m` on provider `provider` (`None` in the
    /// value: no timeout, the consumer's `0`). A provider's or a rule's value that is not
    /// positive gives Dubbo's default (`getMethodPositiveParameter`).
    #[inline]
    pub fn timeout(&self, m: MethodId, provider: Option<usize>) -> Effective<Option<Duration>> {
        match self.resolve(CallKey::Timeout, m, provider) {
            Some((0, s @ (Source::ConsumerMethod | Source::ConsumerService))) => (None, s),
            Some((v, s)) if v > 0 => (Some(Duration::from_millis(v as u64)), s),
            _ => (Some(DEFAULT_TIMEOUT), Source::Default),
        }
    }

    /// The retries of a call of method `m` whose first attempt went to `provider` (the
    /// override rules reach the consumer through the provider URLs).
    #[inline]
    pub fn retries(&self, m: MethodId, provider: Option<usize>) -> Effective<u32> {
        match self.resolve(CallKey::Retries, m, provider) {
            // Dubbo: attempts = retries + 1, at least 1.
            Some((v, s)) => (u32::try_from(v.max(0)).unwrap_or(u32::MAX), s),
            None => (DEFAULT_RETRIES, Source::Default),
        }
    }

    /// The parallel calls of the `forking` mode for method `m`.
    #[inline]
    pub fn forks(&self, m: MethodId, provider: Option<usize>) -> Effective<u32> {
        match self.resolve(CallKey::Forks, m, provider) {
            Some((v, s)) => (u32::try_from(v.max(0)).unwrap_or(u32::MAX), s),
            None => (DEFAULT_FORKS, Source::Default),
        }
    }

    /// The cluster mode of method `m` (the consumer's only, as Dubbo's).
    #[inline]
    pub fn cluster(&self, m: MethodId) -> Effective<ClusterMode> {
        self.consumer(m).cluster
    }

    /// The balancer slot for method `m` when the routed set's first provider is `first()`
    /// (Dubbo reads `loadbalance` from the first invoker's URL; `first` is called only
    /// when some provider names one), and the algorithm's source.
    #[inline]
    pub fn slot(&self, m: MethodId, first: impl FnOnce() -> Option<usize>) -> (usize, Source) {
        let own = self.consumer(m).slot;
        if !self.any_loadbalance {
            let source = self
                .consumer(m)
                .loadbalance
                .map_or(Source::Default, |(_, s)| s);
            return (own, source);
        }
        match self.resolve(CallKey::LoadBalance, m, first()) {
            Some((_, s @ (Source::ConsumerMethod | Source::ConsumerService))) => (own, s),
            Some((v, s)) => {
                let kind = LoadBalanceKind::ALL[v as usize];
                (self.balance.kind_slot(kind).unwrap_or(own), s)
            }
            None => (own, Source::Default),
        }
    }

    /// The weight table of method `m` for [`crate::SnapshotBalance::pick_in`]: `None` (the
    /// service's weights) unless some provider or rule sets `<method>.weight`.
    #[inline]
    pub fn weight_table(&self, m: MethodId) -> Option<u16> {
        self.consumer(m).weights
    }

    /// The weight tables of the methods with weights of their own, in table order: for
    /// each provider, the weight Dubbo's `getWeight` reads with
    /// `getMethodParameter(method, "weight", 100)` — an override rule's `<method>.weight`,
    /// else the provider's own (for a method its `methods` lists), else `service[i]` (its
    /// service-level weight, an override rule's or its own). Warm-up applies on top.
    pub fn method_weight_tables<'a>(
        &'a self,
        service: &'a [u32],
    ) -> impl Iterator<Item = Box<[u32]>> + 'a {
        self.weighed.iter().map(move |&m| {
            self.providers
                .iter()
                .enumerate()
                .map(|(i, &l)| {
                    let entries = self.lists.get(l);
                    let find = |overridden: bool| {
                        entries.iter().find(|e| {
                            e.key == CallKey::Weight && e.method == m && e.overridden == overridden
                        })
                    };
                    match find(true).or_else(|| find(false)) {
                        Some(e) => u32::try_from(e.value).unwrap_or(0),
                        None => service.get(i).copied().unwrap_or(0),
                    }
                })
                .collect()
        })
    }

    /// Every effective call parameter of `method` on `provider` (its index and URL), as
    /// `explain` and `simulate` show them: `(key, value, source)`. `weight` is the one the
    /// balancers use for the method, with its warm-up weight at `now` (ms since the epoch)
    /// while the provider warms up; `warmup` is the provider's (Dubbo reads both from the
    /// provider's URL, which the override rules are merged into).
    pub fn effective(
        &self,
        method: Option<&str>,
        provider: Option<(usize, &Provider)>,
        now: i64,
    ) -> Vec<(&'static str, String, Source)> {
        let m = self.method(method);
        let index = provider.map(|(i, _)| i);
        let (timeout, ts) = self.timeout(m, index);
        let (retries, rs) = self.retries(m, index);
        let (slot, ls) = self.slot(m, || index);
        let (cluster, cs) = self.cluster(m);
        let (forks, fs) = self.forks(m, index);
        let mut rows = vec![
            (
                "timeout",
                timeout.map_or_else(|| "none".to_string(), |t| format!("{}ms", t.as_millis())),
                ts,
            ),
            ("retries", retries.to_string(), rs),
            ("loadbalance", self.balance.spec(slot).kind.to_string(), ls),
            ("cluster", cluster.to_string(), cs),
            ("forks", forks.to_string(), fs),
        ];
        let Some((_, p)) = provider else {
            rows.push(("weight", DEFAULT_WEIGHT.to_string(), Source::Default));
            rows.push(("warmup", format!("{DEFAULT_WARMUP_MS}ms"), Source::Default));
            return rows;
        };
        // The keys a consumer-side override rule set in this provider's URL.
        let mut overridden = Vec::new();
        if let Some(o) = self.overrides.get() {
            o.keys(p, &mut |k| overridden.push(k.to_string()));
        }
        let service_source = |key: &str, set: bool| {
            if overridden.iter().any(|k| k == key) {
                Source::OverrideService
            } else if set {
                Source::ProviderService
            } else {
                Source::Default
            }
        };
        let (weight, ws) = match self.resolve(CallKey::Weight, m, index) {
            Some((w, s)) => (u32::try_from(w).unwrap_or(0), s),
            None => {
                let set = p
                    .get("weight")
                    .map(crate::lb::parse_weight)
                    .is_some_and(|w| matches!(w, WeightParam::Weight(_) | WeightParam::Negative));
                (crate::lb::provider_weight(p), service_source("weight", set))
            }
        };
        let (timestamp, warmup) = warm_params(p.get("timestamp"), p.get("warmup"));
        let warm = weight_at(weight, timestamp, warmup, now);
        let weight_value = if warm == weight {
            weight.to_string()
        } else {
            format!("{weight} (warming up: {warm} now)")
        };
        let warmup_set = p.get("warmup").is_some_and(|w| w.parse::<i32>().is_ok());
        rows.push(("weight", weight_value, ws));
        rows.push((
            "warmup",
            format!("{warmup}ms"),
            service_source("warmup", warmup_set),
        ));
        rows
    }
}

fn kind_value(kind: LoadBalanceKind) -> i64 {
    LoadBalanceKind::ALL
        .iter()
        .position(|&k| k == kind)
        .unwrap_or(0) as i64
}

/// The key a call parameter's URL key ends with, told by its last byte first: most keys
/// are ruled out by one compare.
fn call_key_of(k: &str) -> Option<(Option<&str>, CallKey)> {
    let key = match k.as_bytes().last()? {
        b't' if k.ends_with("weight") => CallKey::Weight,
        b't' => CallKey::Timeout,
        b'e' => CallKey::LoadBalance,
        b's' if k.ends_with("forks") => CallKey::Forks,
        b's' => CallKey::Retries,
        _ => return None,
    };
    let name = key.name();
    let head = k.strip_suffix(name)?;
    match head {
        "" => Some((None, key)),
        _ => head
            .strip_suffix('.')
            .filter(|m| !m.is_empty())
            .map(|m| (Some(m), key)),
    }
}

/// Reads providers' call parameters (see the module documentation) with the override
/// layer's keys, reusing its buffers from one provider to the next.
struct Reader<'a> {
    overrides: Option<&'a dyn super::config::OverrideKeys>,
    /// The keys the layer gives for the provider being read, comma-separated.
    overridden: String,
    out: Vec<Entry>,
}

impl<'a> Reader<'a> {
    fn new(overrides: &'a OverrideLayer) -> Self {
        Reader {
            overrides: overrides.get(),
            overridden: String::new(),
            out: Vec::new(),
        }
    }

    /// The call parameters of provider `p`'s URL. Method names are given ids in `names`.
    /// One pass over the parameters: `methods` is picked up on the way, the call keys kept
    /// aside (up to [`FOUND`]; a URL with more is read a second time) until it is known.
    fn entries(&mut self, p: &Provider, names: &mut Names) -> &[Entry] {
        self.out.clear();
        self.overridden.clear();
        if let Some(o) = self.overrides {
            let overridden = &mut self.overridden;
            o.keys(p, &mut |k| {
                overridden.push_str(k);
                overridden.push(',');
            });
        }
        let (overridden, out) = (self.overridden.as_str(), &mut self.out);
        let mut methods = "";
        let mut found: [(&str, &str); FOUND] = [("", ""); FOUND];
        let mut n = 0;
        for (k, v) in p.params() {
            match k {
                "methods" => methods = v,
                _ if call_key_of(k).is_some() => {
                    if let Some(slot) = found.get_mut(n) {
                        *slot = (k, v);
                    }
                    n += 1;
                }
                _ => {}
            }
        }
        if n > FOUND {
            for (k, v) in p.params().filter(|(k, _)| call_key_of(k).is_some()) {
                add(k, v, overridden, methods, names, out);
            }
        } else {
            for &(k, v) in &found[..n] {
                add(k, v, overridden, methods, names, out);
            }
        }
        &self.out
    }
}

/// Call parameters kept aside while a provider URL is read once (four keys at service
/// level and for three methods).
const FOUND: usize = 16;

/// Adds the call parameter `k=v` of a provider URL with these `overridden` keys
/// (comma-separated) and `methods` to `out`, when Dubbo would read it.
fn add(k: &str, v: &str, overridden: &str, methods: &str, names: &mut Names, out: &mut Vec<Entry>) {
    let Some((method, key)) = call_key_of(k) else {
        return;
    };
    {
        let overridden = overridden.split(',').any(|o| o == k);
        if !overridden && !key.providers_may_set() {
            return; // a provider's own `retries` or `forks`: never read (Dubbo)
        }
        if let Some(m) = method
            && !overridden
            && !methods.split(',').any(|x| x == m)
        {
            return; // Dubbo's getMethodParameterStrict: a method the provider lists
        }
        let value = match key {
            CallKey::LoadBalance => match LoadBalanceKind::parse(v) {
                Some(kind) => kind_value(kind),
                None => return,
            },
            // The service-level weight is the balancers' table; a method's is Java's int
            // (negative: 0), and a value that is not one leaves the next layer to decide.
            CallKey::Weight => match (method, crate::lb::parse_weight(v)) {
                (None, _) => return,
                (_, WeightParam::Weight(w)) => i64::from(w),
                (_, WeightParam::Negative) => 0,
                _ => return,
            },
            _ => match v.trim().parse::<i64>() {
                Ok(n) => n,
                Err(_) => return,
            },
        };
        let method = method.map_or(SERVICE, |m| names.intern(m));
        if method == SERVICE && key == CallKey::Weight {
            return; // past the method ids: the service's weight
        }
        out.push(Entry {
            method,
            key,
            overridden,
            value,
        });
    }
}

#[cfg(test)]
mod tests;
