//! A local cache of what a live chain's sources last gave it, for a start while they
//! cannot be reached: Dubbo's registry `file-cache`, kept per reference, whatever source
//! (ZooKeeper, Nacos, several registries merged) delivered the state.
//!
//! With [`LiveOptions::cache`](crate::LiveOptions::cache), [`LiveChain::watch`] records after
//! each update is applied the config-center rule texts it carried (a refused one is not
//! recorded) and that the file is due. A writer thread of its own writes it, never the
//! applying thread: the rules recorded and the providers the chain has registered by then
//! (an empty list held back is not among them), at most once per
//! [`CacheOptions::interval`], so a burst of changes is one write of the latest state.
//! The file (`file.rs`) is written to a temporary file and renamed, and ends with a
//! checksum; a corrupt one, one of another format version or of another reference is
//! ignored with a report.
//!
//! At start, when the sources deliver no state within [`CacheOptions::wait`] (the registry
//! cannot be reached), the file is applied as one update from source `cache`, with a
//! report `serving N providers from the cache written at T`; with no usable file the report
//! says there is nothing to serve. The sources' first state replaces it: the rules the
//! cache held that this first state does not are cleared with it, in the same swap. A
//! source therefore delivers its first read as one update holding every node that exists
//! (the ZooKeeper source sends one batch).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::mpsc::UnboundedReceiver;

use crate::dubbo::ServiceKey;
use routechain_core::{Snapshot, Url};

use crate::{LiveChain, ProviderText, Report, RuleEvent, RuleKey, Update};

mod file;
#[cfg(test)]
mod tests;

use file::utc;
pub use file::{CacheError, Cached, FORMAT, read, write};

/// Where and how a live chain keeps its cache (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheOptions {
    /// The directory of the cache files, one per reference
    /// ([`CacheOptions::path_for`]); created when first written.
    pub dir: PathBuf,
    /// How long a start waits for the sources' first state before serving the cache.
    /// Default 2 s: longer than the ZooKeeper source takes to leave a server that does not
    /// answer and reach another (1.8 s at most, `zk/address.rs`).
    pub wait: Duration,
    /// The least time between two writes of a file (and at least ten times the last
    /// write's duration); the changes applied meanwhile make one write. Default 1 s.
    pub interval: Duration,
    /// Where the state comes from besides the reference, when one directory may hold the
    /// caches of several (`watch` gives its registry address, password masked): a file
    /// written under another scope has another name and, if found, is foreign. Default
    /// empty.
    pub scope: String,
}

impl CacheOptions {
    /// A cache in `dir`, with the default wait and interval.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        CacheOptions {
            dir: dir.into(),
            wait: Duration::from_secs(2),
            interval: Duration::from_secs(1),
            scope: String::new(),
        }
    }

    /// The default directory: `$XDG_CACHE_HOME/routechain`, else `~/.cache/routechain`;
    /// `None` when neither variable is set.
    pub fn default_dir() -> Option<PathBuf> {
        let non_empty = |v: &str| std::env::var_os(v).filter(|s| !s.is_empty());
        non_empty("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| non_empty("HOME").map(|h| PathBuf::from(h).join(".cache")))
            .map(|d| d.join("routechain"))
    }

    /// The file of `reference`: its `group/interface:version`, with every character other
    /// than a letter, a digit, `.`, `_` and `-` written `_`, then `-` and 8 hex digits of
    /// the scope's hash when there is a scope, then `.cache`.
    pub fn path_for(&self, reference: &ServiceKey) -> PathBuf {
        let mut name: String = reference_text(reference)
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        if !self.scope.is_empty() {
            let hash = xxhash_rust::xxh3::xxh3_64(self.scope.as_bytes());
            name.push_str(&format!("-{:08x}", hash >> 32));
        }
        self.dir.join(format!("{name}.cache"))
    }

    /// The reference as the file records it: `group/interface:version`, followed by
    /// ` from <scope>` when there is a scope.
    pub fn identity(&self, reference: &ServiceKey) -> String {
        match self.scope.as_str() {
            "" => reference_text(reference),
            scope => format!("{} from {scope}", reference_text(reference)),
        }
    }
}

fn reference_text(reference: &ServiceKey) -> String {
    format!(
        "{}/{}:{}",
        reference.group.as_deref().unwrap_or(""),
        reference.interface,
        reference.version.as_deref().unwrap_or("")
    )
}

/// The providers as registered, taken from the live chain when a file is written.
pub(crate) enum Registered {
    /// The serving snapshot's (no override rule changes them).
    Serving(Arc<Snapshot>),
    /// A copy of the registered list.
    Copied(Vec<Url>),
}

impl Registered {
    fn urls(&self) -> &[Url] {
        match self {
            Registered::Serving(s) => s.providers(),
            Registered::Copied(v) => v,
        }
    }
}

/// What is written besides the providers: the last applied rule texts.
#[derive(Default)]
struct Recorded {
    rules: BTreeMap<RuleKey, Arc<str>>,
}

struct Slot {
    /// The state to write and its file, when it changed since the last write.
    pending: Option<(PathBuf, String)>,
    recorded: Recorded,
    stop: bool,
    /// A write failure not reported yet.
    error: Option<String>,
    /// Files written.
    writes: u64,
}

struct Shared {
    slot: Mutex<Slot>,
    wake: Condvar,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Slot> {
        self.slot.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The writer thread; dropping it writes what is pending and waits for it.
struct Writer {
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Writer {
    fn start(live: Arc<LiveChain>, interval: Duration) -> std::io::Result<Self> {
        let shared = Arc::new(Shared {
            slot: Mutex::new(Slot {
                pending: None,
                recorded: Recorded::default(),
                stop: false,
                error: None,
                writes: 0,
            }),
            wake: Condvar::new(),
        });
        let for_thread = shared.clone();
        let thread = std::thread::Builder::new()
            .name("routechain-cache".into())
            .spawn(move || write_loop(&live, &for_thread, interval))?;
        Ok(Writer {
            shared,
            thread: Some(thread),
        })
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.shared.lock().stop = true;
        self.shared.wake.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn write_loop(live: &LiveChain, shared: &Shared, interval: Duration) {
    let mut last: Option<(Instant, Duration)> = None;
    loop {
        let (path, reference, rules) = {
            let mut slot = shared.lock();
            while slot.pending.is_none() && !slot.stop {
                slot = shared.wake.wait(slot).unwrap_or_else(|p| p.into_inner());
            }
            // Coalesce: the changes applied until `interval` after the last write (or ten
            // times that write's duration, so that writing a large list takes a tenth of a
            // core at most) make one.
            if let Some((at, took)) = last {
                let until = at + interval.max(took * 10);
                while !slot.stop {
                    let now = Instant::now();
                    if now >= until {
                        break;
                    }
                    slot = shared
                        .wake
                        .wait_timeout(slot, until - now)
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                }
            }
            let Some((path, reference)) = slot.pending.take() else {
                return; // stopped with nothing to write
            };
            let rules: Vec<(RuleKey, Arc<str>)> = slot
                .recorded
                .rules
                .iter()
                .map(|(k, t)| (k.clone(), t.clone()))
                .collect();
            (path, reference, rules)
        };
        let started = Instant::now();
        // The providers applied by now, taken from the chain here, not on its update path.
        let providers = live.registered_providers();
        let rules: Vec<(&RuleKey, &str)> = rules.iter().map(|(k, t)| (k, &**t)).collect();
        let result = write(&path, &reference, now_ms(), providers.urls(), &rules);
        drop(providers);
        last = Some((started, started.elapsed()));
        match result {
            Ok(()) => {
                shared.lock().writes += 1;
                tracing::debug!(
                    path = %path.display(),
                    seconds = started.elapsed().as_secs_f64(),
                    "cache written"
                );
            }
            Err(e) => {
                tracing::warn!("cache not written: {e}");
                shared.lock().error = Some(e.to_string());
            }
        }
    }
}

/// What one update carried of the state: whether a provider list, and its rule events.
#[derive(Default)]
struct Carried {
    providers: bool,
    /// Each rule event, and the update item's description (what a refusal names).
    rules: Vec<(RuleKey, Option<String>, String)>,
}

impl Carried {
    fn of(update: &Update, out: &mut Carried) {
        match update {
            Update::Batch(items) => items.iter().for_each(|u| Carried::of(u, out)),
            Update::Providers { .. } => out.providers = true,
            Update::Rule { key, event, .. } => {
                let text = match event {
                    RuleEvent::Added(t) | RuleEvent::Modified(t) => Some(t.clone()),
                    RuleEvent::Deleted => None,
                };
                out.rules.push((key.clone(), text, update.describe()));
            }
            Update::ChainFile(_)
            | Update::Unreadable { .. }
            | Update::Status { .. }
            | Update::Registries(_) => {}
        }
    }

    fn is_state(&self) -> bool {
        self.providers || !self.rules.is_empty()
    }
}

/// The cache of one live chain while it is watched: records applied state and hands it to
/// the writer.
struct Recorder {
    options: CacheOptions,
    writer: Writer,
}

impl Recorder {
    /// The file and the reference it is written for; `None` when the chain has no
    /// reference (no registry providers to keep).
    fn target(&self, live: &LiveChain) -> Option<(PathBuf, String)> {
        live.reference()
            .map(|r| (self.options.path_for(&r), self.options.identity(&r)))
    }

    /// Records the rules `carried` brought that `reports` do not refuse, and has the file
    /// written (with the providers the chain then holds) if it carried any state.
    fn record(&self, live: &LiveChain, carried: Carried, reports: &[Report]) {
        if !carried.is_state() {
            return;
        }
        let refused = |described: &str| {
            reports.iter().any(|r| match r {
                Report::Refused { change, .. } => change.split(" + ").any(|c| c == described),
                _ => false,
            })
        };
        let mut changed = carried.providers;
        let mut slot = self.writer.shared.lock();
        for (key, text, described) in carried.rules {
            if refused(&described) {
                continue;
            }
            match text {
                Some(t) => slot.recorded.rules.insert(key, Arc::from(t)),
                None => slot.recorded.rules.remove(&key),
            };
            changed = true;
        }
        if changed && let Some(target) = self.target(live) {
            slot.pending = Some(target);
            drop(slot);
            self.writer.shared.wake.notify_all();
        }
    }

    fn take_error(&self) -> Option<String> {
        self.writer.shared.lock().error.take()
    }
}

fn status(message: String) -> Report {
    Report::Status {
        source: "cache".into(),
        message,
    }
}

/// Reads the cache of `live`'s reference for a cold start: the update that applies it and
/// its report, or the report of why nothing is served.
fn load(live: &LiveChain, options: &CacheOptions) -> Result<(Update, Cached, PathBuf), Report> {
    let Some(reference) = live.reference() else {
        return Err(status(
            "nothing to serve: the sources have not delivered a state and the chain has no \
             reference to keep a cache for"
                .into(),
        ));
    };
    let path = options.path_for(&reference);
    let nothing = |why: String| {
        status(format!(
            "nothing to serve: the sources have not delivered a state within {:.1} s and {why}; \
             routing nothing until they do",
            options.wait.as_secs_f64()
        ))
    };
    match read(&path, &options.identity(&reference)) {
        Ok(Some(cached)) => {
            let origin = format!("cache:{}", path.display());
            let mut items = vec![Update::Providers {
                origin: origin.clone(),
                text: ProviderText::Urls(cached.providers.clone()),
            }];
            items.extend(cached.rules.iter().map(|(key, text)| Update::Rule {
                key: key.clone(),
                event: RuleEvent::Added(text.clone()),
                origin: origin.clone(),
            }));
            Ok((Update::Batch(items), cached, path))
        }
        Ok(None) => Err(nothing(format!("there is no cache at {}", path.display()))),
        Err(e) => {
            tracing::warn!("cache ignored: {e}");
            Err(nothing(format!("the cache was ignored ({e})")))
        }
    }
}

/// The applier loop of [`LiveChain::watch`] with a cache: the cold start (the cache applied
/// when the sources deliver no state within the wait), then every update applied, reported
/// and recorded.
pub(crate) fn follow(
    live: &Arc<LiveChain>,
    source: &str,
    options: CacheOptions,
    mut rx: UnboundedReceiver<Update>,
    on_report: &mut dyn FnMut(&Report),
) {
    let recorder = match Writer::start(live.clone(), options.interval) {
        Ok(writer) => Recorder {
            options: options.clone(),
            writer,
        },
        Err(e) => {
            on_report(&status(format!("not kept: cannot start its writer: {e}")));
            while let Some(update) = rx.blocking_recv() {
                live.apply_from(source, update)
                    .iter()
                    .for_each(&mut *on_report);
            }
            return;
        }
    };
    let apply = |update: Update, on_report: &mut dyn FnMut(&Report)| -> bool {
        let mut carried = Carried::default();
        Carried::of(&update, &mut carried);
        let state = carried.is_state();
        let reports = live.apply_from(source, update);
        reports.iter().for_each(&mut *on_report);
        recorder.record(live, carried, &reports);
        if let Some(e) = recorder.take_error() {
            on_report(&status(format!("not written: {e}")));
        }
        state
    };
    // A cold start: a chain that has served nothing yet (a restarted source keeps what the
    // chain serves).
    let cold = live.stats().applied() == 0 && live.service().state().snapshot().is_empty();
    let mut replacing: Option<(BTreeSet<RuleKey>, String)> = None;
    if cold {
        let deadline = Instant::now() + options.wait;
        let mut delivered = false;
        while !delivered {
            match rx.try_recv() {
                Ok(update) => delivered = apply(update, on_report),
                Err(tokio::sync::mpsc::error::TryRecvError::Empty) => {
                    if Instant::now() >= deadline {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(tokio::sync::mpsc::error::TryRecvError::Disconnected) => return,
            }
        }
        if !delivered {
            match load(live, &options) {
                Ok((update, cached, path)) => {
                    on_report(&status(format!(
                        "serving {} provider(s) from the cache written at {} ({}); the \
                         sources' first state replaces it",
                        cached.providers.len(),
                        utc(cached.written_ms),
                        path.display()
                    )));
                    live.apply_from("cache", update)
                        .iter()
                        .for_each(&mut *on_report);
                    let keys = cached.rules.into_iter().map(|(k, _)| k).collect();
                    replacing = Some((keys, format!("cache:{}", path.display())));
                }
                Err(report) => on_report(&report),
            }
        }
    }
    while let Some(mut update) = rx.blocking_recv() {
        if let Some((keys, origin)) = &replacing {
            let mut carried = Carried::default();
            Carried::of(&update, &mut carried);
            if carried.is_state() {
                // The cached rules this first state does not hold are gone from the
                // registry: cleared in the same swap.
                let held: BTreeSet<&RuleKey> = carried.rules.iter().map(|(k, ..)| k).collect();
                let mut items = vec![update];
                items.extend(
                    keys.iter()
                        .filter(|k| !held.contains(k))
                        .map(|k| Update::Rule {
                            key: k.clone(),
                            event: RuleEvent::Deleted,
                            origin: origin.clone(),
                        }),
                );
                update = Update::Batch(items);
                on_report(&status(
                    "the sources' first state replaces the cache".to_string(),
                ));
                replacing = None;
            }
        }
        apply(update, on_report);
    }
}
