//! The file source: the chain file, the rule and override-rule files it names and a
//! providers file, watched with `notify`.
//!
//! The source watches the *directories* that hold the files, not the files: an editor that
//! writes a temporary file and renames it over the original, and a Kubernetes ConfigMap
//! whose `..data` symlink is swapped to a new directory, replace the inode a file watch
//! would follow. Any event in a watched directory starts a debounce window; when the
//! directory has been quiet for the window, every watched file is read again and compared
//! with what was last read. A changed chain file or rule file reloads the chain; a changed
//! providers file replaces the provider list; both at once make one update (one swap).

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use notify::{RecursiveMode, Watcher};
use routechain_rules::YamlDoc;

use crate::{ProviderText, Source, SourceError, SourceHandle, Update, UpdateSender};

/// What the file source watches.
#[derive(Debug, Clone)]
pub struct FileConfig {
    /// The chain file; the rule files it names are watched with it.
    pub chain: PathBuf,
    /// The providers file (one URL per line), if providers come from a file.
    pub providers: Option<PathBuf>,
    /// Quiet time that ends a burst of events (default 100 ms).
    pub debounce: Duration,
    /// The longest a burst is held before it is processed anyway (default 1 s).
    pub max_delay: Duration,
}

impl FileConfig {
    /// Watches `chain` and, when given, `providers`, with the default debounce.
    pub fn new(chain: impl Into<PathBuf>, providers: Option<PathBuf>) -> Self {
        FileConfig {
            chain: chain.into(),
            providers,
            debounce: Duration::from_millis(100),
            max_delay: Duration::from_secs(1),
        }
    }
}

/// The file [`Source`].
#[derive(Debug)]
pub struct FileSource {
    config: FileConfig,
}

impl FileSource {
    /// A source watching what `config` names.
    pub fn new(config: FileConfig) -> Self {
        FileSource { config }
    }
}

enum Msg {
    Event,
    Stop,
}

/// Contents last read, by path (`None`: missing or unreadable).
type Contents = HashMap<PathBuf, Option<String>>;

/// A watched file's text: only a regular file is read (a FIFO or device never blocks the
/// watcher); the loaders apply the size limit.
fn read(path: &Path) -> Option<String> {
    routechain_rules::input::read_text_with_limit(path, "", u64::MAX).ok()
}

/// The rule files and override-rule files (`overrides:`) the chain file names now,
/// whether or not they exist or parse (a bad file must stay watched so that its fix is
/// seen). `None` when the chain file itself cannot be read or parsed.
fn rule_files(chain: &Path) -> Option<Vec<PathBuf>> {
    let text = read(chain)?;
    let doc = YamlDoc::parse(chain.display().to_string(), &text).ok()?;
    let base = dir_of(chain);
    // The chain's own fields, its inline rules not built.
    let inline_rule = |p: &routechain_core::FieldPath| {
        use routechain_core::PathSegment::{Index, Key};
        matches!(p.0.as_slice(), [Key(r), Index(_), Key(k)] if r == "routers" && k == "rule")
    };
    let value = doc.value_eliding(&inline_rule, serde_json::Value::Bool(true));
    let mut files: Vec<PathBuf> = value
        .get("routers")
        .and_then(|r| r.as_array())
        .into_iter()
        .flatten()
        .filter_map(|r| r.get("rule_file")?.as_str())
        .map(|f| base.join(f))
        .collect();
    match value.get("overrides") {
        Some(serde_json::Value::String(f)) => files.push(base.join(f)),
        Some(serde_json::Value::Array(list)) => {
            files.extend(list.iter().filter_map(|f| f.as_str()).map(|f| base.join(f)))
        }
        _ => {}
    }
    Some(files)
}

fn dir_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

impl Source for FileSource {
    fn name(&self) -> &str {
        "file"
    }

    fn start(self: Box<Self>, tx: UpdateSender) -> Result<SourceHandle, SourceError> {
        let config = self.config;
        let (msg_tx, msg_rx) = mpsc::channel::<Msg>();
        let events = msg_tx.clone();
        let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
            // Reads (ours included) are access events: only changes count.
            if let Ok(event) = res
                && !matches!(event.kind, notify::EventKind::Access(_))
            {
                let _ = events.send(Msg::Event);
            }
        })
        .map_err(|e| SourceError::Watch {
            path: config.chain.display().to_string(),
            reason: e.to_string(),
        })?;
        let mut watched_dirs = BTreeSet::new();
        let mut contents = Contents::new();
        let mut rules = rule_files(&config.chain).unwrap_or_default();
        for path in std::iter::once(&config.chain)
            .chain(&rules)
            .chain(&config.providers)
        {
            contents.insert(path.clone(), read(path));
            watch_dir(&mut watcher, &mut watched_dirs, path)?;
        }
        let thread = std::thread::Builder::new()
            .name("routechain-file-watch".into())
            .spawn(move || {
                // The watcher lives as long as the thread.
                let mut watcher = watcher;
                loop {
                    match msg_rx.recv() {
                        Ok(Msg::Event) => {}
                        Ok(Msg::Stop) | Err(_) => return,
                    }
                    // Debounce: wait until the burst is over.
                    let start = Instant::now();
                    loop {
                        let left = config.max_delay.saturating_sub(start.elapsed());
                        match msg_rx.recv_timeout(config.debounce.min(left)) {
                            Ok(Msg::Event) if !left.is_zero() => continue,
                            Ok(Msg::Event) => break,
                            Ok(Msg::Stop) | Err(mpsc::RecvTimeoutError::Disconnected) => return,
                            Err(mpsc::RecvTimeoutError::Timeout) => break,
                        }
                    }
                    let mut updates = Vec::new();
                    let mut chain_changed = false;
                    for path in std::iter::once(&config.chain).chain(&rules) {
                        let now = read(path);
                        if contents.get(path) != Some(&now) {
                            chain_changed = true;
                            contents.insert(path.clone(), now);
                        }
                    }
                    if chain_changed {
                        updates.push(Update::ChainFile(config.chain.clone()));
                        // A chain file that does not parse keeps the previous rule files.
                        let new_rules = rule_files(&config.chain).unwrap_or_else(|| rules.clone());
                        for path in &new_rules {
                            if !contents.contains_key(path) {
                                contents.insert(path.clone(), read(path));
                            }
                            if let Err(e) = watch_dir(&mut watcher, &mut watched_dirs, path) {
                                tracing::warn!("{e}");
                            }
                        }
                        rules = new_rules;
                    }
                    if let Some(path) = &config.providers {
                        let now = read(path);
                        if contents.get(path) != Some(&now) {
                            contents.insert(path.clone(), now.clone());
                            updates.push(match now {
                                Some(text) => Update::Providers {
                                    origin: path.display().to_string(),
                                    text: ProviderText::Lines(text),
                                },
                                None => Update::Status {
                                    source: "file".into(),
                                    message: format!(
                                        "{} is missing or unreadable; the last good providers keep serving",
                                        path.display()
                                    ),
                                },
                            });
                        }
                    }
                    let update = match updates.len() {
                        0 => continue,
                        1 => updates.remove(0),
                        _ => Update::Batch(updates),
                    };
                    if tx.send(update).is_err() {
                        return;
                    }
                }
            })
            .map_err(|e| SourceError::Start {
                source_name: "file".into(),
                reason: e.to_string(),
            })?;
        Ok(SourceHandle::new(
            move || {
                let _ = msg_tx.send(Msg::Stop);
            },
            thread,
        ))
    }
}

fn watch_dir(
    watcher: &mut notify::RecommendedWatcher,
    watched: &mut BTreeSet<PathBuf>,
    file: &Path,
) -> Result<(), SourceError> {
    let dir = dir_of(file);
    if watched.contains(&dir) {
        return Ok(());
    }
    watcher
        .watch(&dir, RecursiveMode::NonRecursive)
        .map_err(|e| SourceError::Watch {
            path: dir.display().to_string(),
            reason: e.to_string(),
        })?;
    watched.insert(dir);
    Ok(())
}
