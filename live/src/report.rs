//! What a [`crate::LiveChain`] reports and counts, and the options it runs with.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use routechain_balance::Clock;
use routechain_core::Url;

/// How a [`LiveChain`](crate::LiveChain) treats updates.
#[derive(Debug, Clone)]
pub struct LiveOptions {
    /// Empty-push protection: a provider list that becomes empty while the current one is
    /// not is held back (the current providers keep serving) instead of applied. Default on,
    /// as Dubbo's registries do; turn it off to let an empty list through.
    pub protect_empty: bool,
    /// The consumer the routers prepare for; default the chain file's `consumer`, else an
    /// empty URL.
    pub consumer: Option<Url>,
    /// The clock of the [`Cluster`](routechain_balance::Cluster)'s health tracker; default
    /// the system clock (tests inject a
    /// [`ManualClock`](routechain_balance::health::ManualClock)).
    pub clock: Option<Arc<dyn Clock>>,
    /// Count calls and routing decisions on the call path (sharded counters,
    /// [`routechain_core::ChainMetrics`]) for an exporter to read. Default on; off, the chain
    /// state carries none and nothing is counted per call
    /// (update counts are kept either way).
    pub metrics: bool,
    /// With `metrics`, also count picks per provider address
    /// (`routechain_provider_picks_total`): one series per provider address ever seen, so
    /// off by default.
    pub provider_picks: bool,
    /// A local cache of the last applied providers and rules, for a start while the
    /// registry cannot be reached ([`crate::cache`]); used by [`crate::LiveChain::watch`].
    /// Default none.
    pub cache: Option<crate::cache::CacheOptions>,
}

impl Default for LiveOptions {
    fn default() -> Self {
        LiveOptions {
            protect_empty: true,
            consumer: None,
            clock: None,
            metrics: true,
            provider_picks: false,
            cache: None,
        }
    }
}

/// Counters of what happened to updates, readable at any time without a lock (the totals;
/// [`LiveStats::by_source`] and [`LiveStats::apply_seconds`] take a short lock, off the
/// call path).
#[derive(Debug, Default)]
pub struct LiveStats {
    pub(crate) applied: AtomicU64,
    pub(crate) refused: AtomicU64,
    pub(crate) held_back: AtomicU64,
    pub(crate) skipped: AtomicU64,
    pub(crate) observed: crate::observe::Observed,
}

impl LiveStats {
    /// Swaps done (one per applied update or batch).
    pub fn applied(&self) -> u64 {
        self.applied.load(Ordering::Relaxed)
    }
    /// Changes refused because they did not parse, validate or prepare.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }
    /// Empty provider lists held back by empty-push protection.
    pub fn held_back(&self) -> u64 {
        self.held_back.load(Ordering::Relaxed)
    }
    /// Provider entries (registry nodes, providers-file lines) skipped because they could
    /// not be parsed; the rest of their list was applied.
    pub fn skipped(&self) -> u64 {
        self.skipped.load(Ordering::Relaxed)
    }
    /// The same outcomes by source (`file`, `zookeeper`, `api` for updates applied directly
    /// with [`crate::LiveChain::apply`]) and result, sorted.
    pub fn by_source(&self) -> Vec<crate::observe::SourceCount> {
        self.observed.by_source()
    }
    /// How long applied updates took to apply (parse, compile, prepare, swap), as
    /// histogram buckets.
    pub fn apply_seconds(&self) -> crate::observe::ApplyHistogram {
        self.observed.apply_seconds()
    }
}

/// What became of one update (or one part of a batch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Report {
    /// A new state is serving.
    Applied {
        /// The new state's generation.
        generation: u64,
        /// What changed.
        change: String,
        /// The number of providers in the new state.
        providers: usize,
    },
    /// The change was refused; the previous state keeps serving.
    Refused {
        /// What was refused.
        change: String,
        /// Why (every problem, located where possible).
        reason: String,
    },
    /// An empty provider list held back by empty-push protection.
    HeldBack {
        /// What was held back.
        change: String,
        /// The number of providers still serving.
        serving: usize,
    },
    /// The change changes nothing (same providers, or a rule no entry subscribes to).
    Ignored {
        /// What was ignored.
        change: String,
        /// Why.
        reason: String,
    },
    /// One provider entry that could not be parsed, skipped alone.
    Skipped {
        /// Where: the znode path, or `file:line:column`.
        location: String,
        /// Why.
        reason: String,
    },
    /// A source's status message (connected, disconnected...).
    Status {
        /// The source.
        source: String,
        /// The message.
        message: String,
    },
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Report::Applied {
                generation,
                change,
                providers,
            } => write!(
                f,
                "applied generation {generation}: {change} ({providers} provider(s))"
            ),
            Report::Refused { change, reason } => write!(f, "refused {change}: {reason}"),
            Report::HeldBack { change, serving } => write!(
                f,
                "held back {change}: an empty provider list would leave no provider \
                 (empty-push protection); {serving} provider(s) keep serving"
            ),
            Report::Ignored { change, reason } => write!(f, "ignored {change}: {reason}"),
            Report::Skipped { location, reason } => {
                write!(f, "skipped provider {location}: {reason}")
            }
            Report::Status { source, message } => write!(f, "{source}: {message}"),
        }
    }
}
