//! Provider lists as sources push them, turned into edits of the serving snapshot.
//!
//! A registry pushes the whole provider list on every change (ZooKeeper's children, a
//! providers file), while one provider came or went. This module keeps the cost of such an
//! update close to the size of the change:
//!
//! - [`TextCache`]: a line already parsed is reused by its text (the same shared URL), so a
//!   list that differs from the last by one line parses one URL; the cache is updated in
//!   place (the departed lines removed, the new ones inserted) and knows each text by a
//!   keyed 128-bit hash ([`TextKey`]), not by a copy of it.
//! - [`Registered`]: the registered providers in the live chain's *stable order* (the
//!   providers kept stay in their order, new ones are appended: see
//!   [`routechain_core::SnapshotEdit`]) and what the routers see of each one after the
//!   override rules. [`Registered::derive`] turns a new registered list into an edit of the
//!   serving snapshot: with the override rules unchanged, the rules are applied to the added
//!   providers only (the others keep their already-overridden URLs).
//! - [`AppCounts`]: the providers' applications counted as providers come and go (tag and
//!   mesh rules are read under them), so that a change does not look at every provider.

use std::collections::hash_map::Entry as Slot;
use std::sync::OnceLock;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicU32, AtomicUsize};

use routechain_core::{Snapshot, SnapshotEdit, Url, UrlError};
use routechain_rules::configurators::OverrideEntry;

use crate::overrides::{self, OverrideContext};
pub(crate) use apps::AppCounts;
pub(crate) use reclaim::drop_later;
pub(crate) use text_key::{KeyMap, TextKey};

mod apps;
mod reclaim;
mod text_key;
use crate::{ProviderText, Skipped};

struct Cached {
    url: Url,
    /// The last list (round) the text was in. Atomic so that the two threads resolving the
    /// stretches of a long list can mark it through a shared reference (plain relaxed loads
    /// and stores: see [`TextCache::resolve_part`]).
    round: AtomicU32,
}

/// Parsed provider URLs by their text (the text a source pushed, trimmed), kept from one
/// list to the next: see the module documentation. A text is known by its keyed 128-bit
/// hash ([`TextKey`]: no copy of the text is kept, 32 bytes per provider, and a look-up
/// compares 16 bytes; why a hash is an acceptable key is said there).
///
/// A pushed list is resolved in stretches ([`TextCache::resolve_part`], reading the cache
/// only), which are then merged in order ([`TextCache::merge`], inserting the new texts):
/// a long list (at least [`PARALLEL_TEXTS`] URLs or [`PARALLEL_BYTES`] of lines) in
/// stretches of [`STRETCH_TEXTS`] URLs or about [`STRETCH_BYTES`] of lines, taken in turn
/// by this thread and one more ([`resolve_shared`]), when the machine has two processors.
#[derive(Default)]
pub(crate) struct TextCache {
    urls: KeyMap<Cached>,
    round: u32,
    /// Distinct texts seen in the current round (a text listed in two stretches resolved at
    /// once on two threads may be counted twice: only the forgetting slack reads it).
    seen: usize,
}

/// A stretch of a pushed list resolved against the cache, which it only read (so that two
/// stretches can be resolved at once): see [`TextCache::resolve_part`].
struct Part<'t> {
    /// The stretch's URLs, in order: the cached ones, and the new ones parsed here.
    urls: Vec<Url>,
    /// The texts parsed here (not cached): their index in `urls` and their key, in order.
    new: Vec<(usize, TextKey)>,
    /// The entries that do not parse, in order.
    failed: Vec<(Entry<'t>, UrlError)>,
    /// Cached texts marked with the current round here.
    seen: usize,
}

impl TextCache {
    /// Starts a new list.
    fn begin(&mut self) {
        self.round = self.round.wrapping_add(1);
        self.seen = 0;
    }

    /// Resolves the texts of `entries`, in order, against the cache (read only): each
    /// cached text's URL is taken (and its entry marked with the current round), each
    /// other text parsed. [`TextCache::merge`] then inserts the new texts.
    ///
    /// In batches of [`BATCH`] texts, because at 100,000 providers the cost is memory,
    /// not computation: each look-up reads a random place of a 4 MB table, and each URL
    /// reused has its reference count incremented, a locked instruction that waits alone
    /// for its cache line. So a batch is hashed first, then its entries and reference
    /// counts are read with plain loads (which the processor overlaps), then the counts
    /// are incremented, now in the cache.
    ///
    /// The round is marked with a relaxed load and store, not a read-modify-write: the
    /// only race is a text listed in two stretches resolved at once on two threads, both of
    /// which may then count it in [`TextCache::seen`] (which only decides when stale
    /// texts are forgotten); the round itself is the same either way.
    fn resolve_part<'t>(
        &self,
        entries: impl Iterator<Item = Entry<'t>>,
        capacity: usize,
    ) -> Part<'t> {
        let mut part = Part {
            urls: Vec::with_capacity(capacity),
            new: Vec::new(),
            failed: Vec::new(),
            seen: 0,
        };
        let mut entries = entries.peekable();
        let mut batch = [Entry::default(); BATCH];
        let mut keys = [TextKey::default(); BATCH];
        while entries.peek().is_some() {
            let mut len = 0;
            for (slot, e) in batch.iter_mut().zip(entries.by_ref()) {
                *slot = e;
                len += 1;
            }
            for (k, e) in keys.iter_mut().zip(&batch[..len]) {
                *k = TextKey::of(e.text);
            }
            let mut found: [Option<&Cached>; BATCH] = [None; BATCH];
            for (f, k) in found.iter_mut().zip(&keys[..len]) {
                *f = self.urls.get(k);
            }
            for c in found[..len].iter().flatten() {
                std::hint::black_box(Url::strong_count(&c.url));
            }
            for ((e, k), f) in batch[..len].iter().zip(keys).zip(found) {
                match f {
                    Some(c) => {
                        if c.round.load(Relaxed) != self.round {
                            c.round.store(self.round, Relaxed);
                            part.seen += 1;
                        }
                        part.urls.push(c.url.clone());
                    }
                    None => match Url::parse(e.text) {
                        Ok(url) => {
                            part.new.push((part.urls.len(), k));
                            part.urls.push(url);
                        }
                        Err(err) => part.failed.push((*e, err)),
                    },
                }
            }
        }
        part
    }

    /// Appends the URLs of `part` (the next stretch of the list) to `out`, inserting its
    /// new texts (a text new to this list and already inserted from an earlier stretch,
    /// or earlier in this one, takes that URL: equal texts share one), and calls `failed`
    /// with each entry that does not parse, its line number moved by `line_base` (the
    /// lines before the stretch).
    fn merge<'t>(
        &mut self,
        mut part: Part<'t>,
        out: &mut Vec<Url>,
        line_base: usize,
        failed: &mut impl FnMut(&Entry<'t>, UrlError),
    ) {
        let base = out.len();
        if base == 0 && out.capacity() == 0 {
            std::mem::swap(out, &mut part.urls);
        } else {
            out.append(&mut part.urls);
        }
        for (i, key) in part.new {
            match self.urls.entry(key) {
                Slot::Occupied(c) => out[base + i] = c.get().url.clone(),
                Slot::Vacant(v) => {
                    v.insert(Cached {
                        url: out[base + i].clone(),
                        round: AtomicU32::new(self.round),
                    });
                    self.seen += 1;
                }
            }
        }
        self.seen += part.seen;
        for (e, err) in part.failed {
            let e = Entry {
                tag: e.tag + line_base,
                ..e
            };
            failed(&e, err);
        }
    }

    /// Ends the list. The texts it did not hold leave the cache once they are more than a
    /// small slack (1/64 of the cache, at least 8): removing them is a pass over the whole
    /// table (at 100,000 providers, 4 MB read: a fifth of an update pushed as text), so a
    /// provider gone is forgotten a few removals later, not at once. A text that leaves
    /// and comes back meanwhile is found again (the same URL, as it parses the same). The
    /// pass leaves every entry of the current round; a stale entry whose round the counter
    /// wraps around to (after 2³² lists) would stay one pass longer.
    fn end(&mut self) {
        let stale = self.urls.len().saturating_sub(self.seen);
        if stale > 8 + self.urls.len() / 64 {
            let round = self.round;
            self.urls.retain(|_, c| *c.round.get_mut() == round);
            if self.urls.capacity() > 4 * self.urls.len() + 16 {
                self.urls.shrink_to_fit();
            }
        }
    }

    /// The number of texts of the last list cached.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        let round = self.round;
        self.urls
            .values()
            .filter(|c| c.round.load(Relaxed) == round)
            .count()
    }

    /// The number of texts cached, those of earlier lists not yet forgotten included.
    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        self.urls.len()
    }
}

/// The lines of a text with their 0-based numbers, ending at `\n`, `\r\n` or a lone `\r`
/// as every other input does (`routechain_rules::located::lines`), so the line numbers of
/// skipped entries match what an editor shows; found with `memchr` (a pushed list is
/// 100,000 lines of ~330 characters: a search by `char` would be most of an update's cost).
struct NumberedLines<'t> {
    text: &'t str,
    /// Where the next line starts.
    at: usize,
    /// Lines read so far.
    read: usize,
}

/// The lines of `text` ([`NumberedLines`]).
fn numbered_lines(text: &str) -> NumberedLines<'_> {
    NumberedLines {
        text,
        at: 0,
        read: 0,
    }
}

impl<'t> Iterator for NumberedLines<'t> {
    type Item = (usize, &'t str);

    fn next(&mut self) -> Option<(usize, &'t str)> {
        let bytes = self.text.as_bytes();
        let start = self.at;
        if start >= bytes.len() {
            return None;
        }
        let end = memchr::memchr2(b'\n', b'\r', &bytes[start..]).map_or(bytes.len(), |i| start + i);
        self.at = if bytes.get(end) == Some(&b'\r') && bytes.get(end + 1) == Some(&b'\n') {
            end + 2
        } else {
            end + 1
        };
        self.read += 1;
        // Breaks are ASCII: `start` and `end` are character boundaries.
        Some((self.read - 1, &self.text[start..end]))
    }
}

/// Where `text` splits into two stretches of whole lines: just after the first line break
/// at or after byte `from` (a `\r\n` taken whole); `None` when there is none. The lines of
/// the two stretches, the second's numbered on from the first's count, are the lines of
/// `text`.
fn split_lines(text: &str, from: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    let i = from + memchr::memchr2(b'\n', b'\r', bytes.get(from..)?)?;
    Some(if bytes[i] == b'\r' && bytes.get(i + 1) == Some(&b'\n') {
        i + 2
    } else {
        i + 1
    })
}

/// The provider entry of line `n` (its indentation and trimmed text), unless it is blank
/// or a `#` comment.
fn line_entry((n, line): (usize, &str)) -> Option<Entry<'_>> {
    let trimmed = line.trim();
    if trimmed.is_empty() || trimmed.starts_with('#') {
        return None;
    }
    let indent = line.len() - line.trim_start().len();
    Some(Entry {
        tag: n,
        lead: &line[..indent],
        text: trimmed,
    })
}

/// A pushed text this long (bytes) is freed by [`drop_later`], off the update path.
const LARGE_TEXT: usize = 1 << 20;
/// A pushed list of this many URL strings is freed by [`drop_later`].
const LARGE_LIST: usize = 4096;

/// The texts resolved together by [`TextCache::resolve_part`].
const BATCH: usize = 16;

/// A list of at least this many URL strings is resolved on two threads at once.
const PARALLEL_TEXTS: usize = 8192;
/// A list of lines at least this long (bytes) is resolved on two threads at once.
const PARALLEL_BYTES: usize = 2 << 20;
/// The URL strings of a stretch, when a list is resolved on two threads.
const STRETCH_TEXTS: usize = 4096;
/// The bytes of a stretch of lines (about), when a list is resolved on two threads.
const STRETCH_BYTES: usize = 1 << 20;

/// Whether this machine runs two threads at once (asked once).
fn two_processors() -> bool {
    static TWO: OnceLock<bool> = OnceLock::new();
    *TWO.get_or_init(|| std::thread::available_parallelism().is_ok_and(|n| n.get() > 1))
}

/// `stretch(0)`, ..., `stretch(n - 1)`, in order, computed on this thread and one more (a
/// scoped thread, so `stretch` may borrow from here), each thread taking the next stretch
/// nobody took yet: when the other thread starts late or runs slower (the other processor
/// is busy), this one takes more stretches instead of waiting. All on this thread when no
/// thread can be started.
fn resolve_shared<R: Send + Sync>(n: usize, stretch: impl Fn(usize) -> R + Sync) -> Vec<R> {
    let done: Vec<OnceLock<R>> = (0..n).map(|_| OnceLock::new()).collect();
    let next = AtomicUsize::new(0);
    let work = || {
        loop {
            let i = next.fetch_add(1, Relaxed);
            if i >= n {
                break;
            }
            // Each index is taken once: the cell is empty.
            let _ = done[i].set(stretch(i));
        }
    };
    let work = &work;
    std::thread::scope(|s| {
        let other = std::thread::Builder::new()
            .name("routechain-live-texts".into())
            .spawn_scoped(s, work);
        work();
        match other {
            Ok(other) => {
                if let Err(panic) = other.join() {
                    std::panic::resume_unwind(panic);
                }
            }
            Err(e) => {
                tracing::debug!(target: "routechain::live", "texts resolved on one thread: {e}");
            }
        }
    });
    done.into_iter()
        .map(|d| {
            d.into_inner()
                .expect("every stretch resolved: both threads took stretches until none was left")
        })
        .collect()
}

/// The starts of stretches of whole lines of `text` of about `size` bytes each, after the
/// first (which starts at 0): just after the first line break at or past `size` bytes from
/// the last start ([`split_lines`]); ascending, each inside the text.
fn line_bounds(text: &str, size: usize) -> Vec<usize> {
    let mut bounds = Vec::new();
    let mut from = size;
    while let Some(at) = split_lines(text, from).filter(|&at| at < text.len()) {
        bounds.push(at);
        from = at + size;
    }
    bounds
}

/// A provider text of a pushed list, with what locates it.
#[derive(Debug, Clone, Copy, Default)]
struct Entry<'t> {
    /// The line's index (lines), unused for a list of URLs.
    tag: usize,
    /// The line's indentation (lines).
    lead: &'t str,
    /// The text (trimmed, for lines).
    text: &'t str,
}

/// Parses a provider list; an entry that does not parse is skipped alone and returned
/// with its location (`file:line:column`, or the registry entry).
pub fn parse_providers(origin: &str, text: ProviderText) -> (Vec<Url>, Vec<Skipped>) {
    parse_providers_reusing(origin, text, &mut TextCache::default())
}

/// [`parse_providers`], reusing the URLs of `cache` (the last list) and leaving the new
/// list's URLs in it: a list that differs from the last by one line parses one URL.
pub(crate) fn parse_providers_reusing(
    origin: &str,
    text: ProviderText,
    cache: &mut TextCache,
) -> (Vec<Url>, Vec<Skipped>) {
    let bounds = match &text {
        _ if !two_processors() => Vec::new(),
        ProviderText::Lines(t) if t.len() >= PARALLEL_BYTES => line_bounds(t, STRETCH_BYTES),
        ProviderText::Urls(u) if u.len() >= PARALLEL_TEXTS => (1..u.len().div_ceil(STRETCH_TEXTS))
            .map(|i| i * STRETCH_TEXTS)
            .collect(),
        _ => Vec::new(),
    };
    parse_split(origin, text, cache, &bounds)
}

/// A stretch of whole lines resolved ([`TextCache::resolve_part`]), and its number of
/// lines.
fn resolve_lines<'t>(cache: &TextCache, text: &'t str, capacity: usize) -> (Part<'t>, usize) {
    let mut lines = numbered_lines(text);
    let part = cache.resolve_part(lines.by_ref().filter_map(line_entry), capacity);
    (part, lines.read)
}

/// A stretch of a list of URLs resolved ([`TextCache::resolve_part`]).
fn resolve_urls<'t>(cache: &TextCache, urls: &'t [String], capacity: usize) -> Part<'t> {
    let entries = urls.iter().map(|u| Entry {
        tag: 0,
        lead: "",
        text: u,
    });
    cache.resolve_part(entries, capacity)
}

/// [`parse_providers_reusing`] with the list resolved in stretches starting at 0 and at
/// each of `bounds` (ascending; lines: the byte where a stretch starts, just after a line
/// break; URLs: the index of its first URL) on two threads ([`resolve_shared`]), or in one
/// stretch on this thread (`bounds` empty).
fn parse_split(
    origin: &str,
    text: ProviderText,
    cache: &mut TextCache,
    bounds: &[usize],
) -> (Vec<Url>, Vec<Skipped>) {
    let mut out = Vec::new();
    let mut skipped = Vec::new();
    match text {
        ProviderText::Lines(text) => {
            cache.begin();
            let mut failed = |e: &Entry<'_>, err: UrlError| {
                skipped.push(Skipped {
                    location: format!(
                        "{origin}:{}:{}",
                        e.tag + 1,
                        e.lead.chars().count() + err.column
                    ),
                    reason: format!("invalid provider URL: {}", err.reason),
                });
            };
            // About as many providers as the last list.
            let capacity = cache.urls.len() + cache.urls.len() / 64 + 16;
            let (c, t) = (&*cache, text.as_str());
            if bounds.is_empty() {
                let (part, _) = resolve_lines(c, t, capacity);
                cache.merge(part, &mut out, 0, &mut failed);
            } else {
                let start = |i: usize| if i == 0 { 0 } else { bounds[i - 1] };
                let end = |i: usize| bounds.get(i).copied().unwrap_or(t.len());
                // A stretch's share of the providers, by its share of the bytes.
                let bytes_each = (t.len() / capacity).max(1);
                let parts = resolve_shared(bounds.len() + 1, |i| {
                    let (a, b) = (start(i), end(i));
                    resolve_lines(c, &t[a..b], (b - a) / bytes_each + 16)
                });
                out.reserve(capacity);
                let mut lines = 0;
                for (part, read) in parts {
                    cache.merge(part, &mut out, lines, &mut failed);
                    lines += read;
                }
            }
            cache.end();
            if text.len() >= LARGE_TEXT {
                drop_later(text);
            }
        }
        ProviderText::Urls(urls) => {
            cache.begin();
            let mut failed = |e: &Entry<'_>, err: UrlError| {
                skipped.push(Skipped {
                    location: format!("{origin}: {:?} column {}", e.text, err.column),
                    reason: format!("invalid provider URL: {}", err.reason),
                });
            };
            let (c, us) = (&*cache, urls.as_slice());
            if bounds.is_empty() {
                let part = resolve_urls(c, us, us.len());
                cache.merge(part, &mut out, 0, &mut failed);
            } else {
                let start = |i: usize| if i == 0 { 0 } else { bounds[i - 1] };
                let end = |i: usize| bounds.get(i).copied().unwrap_or(us.len());
                let parts = resolve_shared(bounds.len() + 1, |i| {
                    let (a, b) = (start(i), end(i));
                    resolve_urls(c, &us[a..b], b - a)
                });
                out.reserve(us.len());
                for part in parts {
                    cache.merge(part, &mut out, 0, &mut failed);
                }
            }
            cache.end();
            if urls.len() >= LARGE_LIST {
                // 100,000 strings are 100,000 frees: not on the update path.
                drop_later(urls);
            }
        }
        ProviderText::Parsed {
            urls,
            skipped: mut s,
        } => {
            out = urls;
            skipped.append(&mut s);
        }
    }
    (out, skipped)
}

/// The registered providers, in the live chain's stable order, with what the routers see
/// of each one: see the module documentation.
///
/// Invariant: the serving snapshot is the `effective` providers that are served, in the
/// registered order (what [`Registered::derive`] keeps, and checks by length before an
/// edit).
#[derive(Debug, Clone, Default)]
pub(crate) struct Registered {
    /// As registered. `None`: the serving snapshot's providers, every one served as
    /// registered (no override rule changes any): the common case, which keeps no second
    /// list (one list less to copy and drop per update).
    list: Option<Snapshot>,
    /// Per registered provider, the provider the routers see (the override rules applied;
    /// `None`: disabled by them). `None` as a whole: every provider served as registered.
    effective: Option<Vec<Option<Url>>>,
    /// The applications of the registered providers.
    pub(crate) apps: AppCounts,
}

/// A new registered list and the serving snapshot that follows from it.
pub(crate) struct Derived {
    /// The new registered state.
    pub(crate) registered: Registered,
    /// The new serving snapshot.
    pub(crate) snapshot: Snapshot,
    /// How `snapshot` follows the serving one (`None`: it does not, prepare afresh).
    pub(crate) edit: Option<SnapshotEdit>,
}

impl Registered {
    /// The registered `list` (in its order) with `entries` applied, and the providers the
    /// routers see, in order.
    pub(crate) fn new(
        list: Snapshot,
        entries: &[&OverrideEntry],
        cx: &OverrideContext<'_>,
    ) -> (Self, Vec<Url>) {
        let apps = AppCounts::of(list.providers().iter());
        let effective: Vec<Option<Url>> = list
            .providers()
            .iter()
            .map(|p| overrides::apply_one(p, entries, cx))
            .collect();
        let served: Vec<Url> = effective.iter().flatten().cloned().collect();
        let effective = compress(&list, effective);
        let registered = Registered {
            list: effective.is_some().then_some(list),
            effective,
            apps,
        };
        (registered, served)
    }

    /// The registered list: its own, or the serving snapshot.
    pub(crate) fn list<'a>(&'a self, serving: &'a Snapshot) -> &'a Snapshot {
        self.list.as_ref().unwrap_or(serving)
    }

    /// The providers the routers see, in order (the serving snapshot's, by the invariant).
    #[cfg(test)]
    pub(crate) fn served(&self, serving: &Snapshot) -> Vec<Url> {
        match &self.effective {
            None => self.list(serving).providers().to_vec(),
            Some(v) => v.iter().flatten().cloned().collect(),
        }
    }

    fn served_len(&self, serving: &Snapshot) -> usize {
        match &self.effective {
            None => self.list(serving).len(),
            Some(v) => v.iter().flatten().count(),
        }
    }

    /// The registered state after `next` (the new list in stable order and its edit from
    /// this one, as [`follow`] makes them; `None`: the list is unchanged) with the override
    /// `entries` (changed since the last derivation when `rules_changed`), and the serving
    /// snapshot that follows from it as an edit of `serving` (which this state's served
    /// providers are).
    ///
    /// The rules are applied to the added providers only, unless they changed; then to
    /// every provider, and a provider whose result is unchanged (equal) keeps its URL, so
    /// that only the providers whose view changed leave the snapshot and are appended
    /// again. The registered order follows the snapshot's (those moved to the end), which
    /// keeps the invariant.
    pub(crate) fn derive(
        &self,
        next: Option<(Snapshot, SnapshotEdit, AppCounts)>,
        rules_changed: bool,
        entries: &[&OverrideEntry],
        cx: &OverrideContext<'_>,
        serving: &Snapshot,
        generation: u64,
    ) -> Derived {
        let old_list = self.list(serving);
        let (list, edit, apps) = next.unwrap_or_else(|| {
            let n = old_list.len();
            (
                Snapshot::from_shared(generation, old_list.providers()),
                SnapshotEdit::new(n, Vec::new(), 0),
                self.apps.clone(),
            )
        });
        if self.served_len(serving) != serving.len() {
            // Not what serves (changed behind the live chain's back): derive afresh.
            let (registered, served) = Registered::new(list, entries, cx);
            return Derived {
                registered,
                snapshot: Snapshot::from_shared(generation, served),
                edit: None,
            };
        }
        if entries.is_empty() && self.effective.is_none() {
            // Served as registered, and the registered list was the serving one: `list`
            // is the new serving snapshot, and `edit` its edit.
            let snapshot = if list.generation() == generation {
                list
            } else {
                Snapshot::from_shared(generation, list.providers())
            };
            return Derived {
                registered: Registered {
                    list: None,
                    effective: None,
                    apps,
                },
                snapshot,
                edit: Some(edit),
            };
        }
        let old = old_list.providers();
        let old_eff = |i: usize| match &self.effective {
            None => Some(&old[i]),
            Some(v) => v[i].as_ref(),
        };
        let removed = edit.removed();
        let mut front: (Vec<Url>, Vec<Option<Url>>) = (
            Vec::with_capacity(list.len()),
            Vec::with_capacity(list.len()),
        );
        let mut moved: (Vec<Url>, Vec<Option<Url>>) = Default::default();
        let mut removed_serving = Vec::new();
        let (mut rank, mut k) = (0u32, 0usize);
        for (i, reg) in old.iter().enumerate() {
            let was = old_eff(i);
            let at = was.map(|_| {
                rank += 1;
                rank - 1
            });
            if removed.get(k) == Some(&(i as u32)) {
                k += 1;
                removed_serving.extend(at);
                continue;
            }
            let now = if rules_changed {
                match (was, overrides::apply_one(reg, entries, cx)) {
                    (Some(w), Some(n)) if Url::ptr_eq(w, &n) || *w == n => Some(w.clone()),
                    (_, n) => n,
                }
            } else {
                was.cloned()
            };
            let same = match (was, &now) {
                (Some(w), Some(n)) => Url::ptr_eq(w, n),
                (None, None) => true,
                _ => false,
            };
            if !same {
                removed_serving.extend(at);
            }
            let to = if same { &mut front } else { &mut moved };
            to.0.push(reg.clone());
            to.1.push(now);
        }
        for p in &list.providers()[edit.added()] {
            moved.0.push(p.clone());
            moved.1.push(overrides::apply_one(p, entries, cx));
        }
        let added: Vec<Url> = moved.1.iter().flatten().cloned().collect();
        let (snapshot, edit) = serving.edited(generation, removed_serving, added);
        front.0.append(&mut moved.0);
        front.1.append(&mut moved.1);
        let list = Snapshot::from_shared(generation, front.0);
        let effective = compress(&list, front.1);
        Derived {
            registered: Registered {
                list: effective.is_some().then_some(list),
                effective,
                apps,
            },
            snapshot,
            edit: Some(edit),
        }
    }
}

/// `list` (a registered list in stable order, whose applications are `apps`) followed by
/// `next` (a provider list sharing the kept providers' URLs, in any order): the new list in
/// stable order (generation `generation`), the edit from `list`, and the applications
/// counted by the edit (the changed providers only).
///
/// A source that keeps its own stable order (the ZooKeeper source; a list grown or cut at
/// its end) pushes the providers kept in `list`'s order: one pass comparing pointers finds
/// the edit, and `next` itself becomes the new list (no provider's reference count is
/// touched: at 100,000 providers each touch is a cache miss). Otherwise (a list in another
/// order, a provider inserted in the middle), or when that pass finds many more changes
/// than the lists' lengths differ by, the edit is computed by [`Snapshot::edit_to`] (a hash
/// of every pointer).
pub(crate) fn follow(
    list: &Snapshot,
    apps: &AppCounts,
    next: Vec<Url>,
    generation: u64,
) -> (Snapshot, SnapshotEdit, AppCounts) {
    let (new, edit) = match in_order(list.providers(), &next) {
        Some((removed, from)) => {
            // `next` is the kept providers in their order, then the added ones: the new
            // list as it is.
            let edit = SnapshotEdit::new(list.len(), removed, next.len() - from);
            (Snapshot::from_shared(generation, next), edit)
        }
        None => list.edit_to(generation, &next),
    };
    let mut apps = apps.clone();
    for &r in edit.removed() {
        apps.remove(&list.providers()[r as usize]);
    }
    for p in &new.providers()[edit.added()] {
        apps.add(p);
    }
    (new, edit, apps)
}

/// When `next` is `old` with some providers removed and others appended, the removed
/// positions and where the appended ones start; `None` when the greedy pass finds more
/// removals than a small budget over the lengths' difference (a list in another order).
fn in_order(old: &[Url], next: &[Url]) -> Option<(Vec<u32>, usize)> {
    let budget = old.len().saturating_sub(next.len()) + (old.len() / 16).min(64);
    let mut removed = Vec::new();
    let mut j = 0;
    for (i, p) in old.iter().enumerate() {
        if next.get(j).is_some_and(|q| Url::ptr_eq(p, q)) {
            j += 1;
        } else {
            removed.push(i as u32);
            if removed.len() > budget {
                return None;
            }
        }
    }
    Some((removed, j))
}

/// `None` when every provider is served as registered (the same URL).
fn compress(list: &Snapshot, effective: Vec<Option<Url>>) -> Option<Vec<Option<Url>>> {
    let identity = effective
        .iter()
        .zip(list.providers())
        .all(|(e, p)| e.as_ref().is_some_and(|e| Url::ptr_eq(e, p)));
    (!identity).then_some(effective)
}

#[cfg(test)]
mod tests;
