//! The cache: the file written and read back (and refused when corrupt, foreign or of
//! another version), and a live chain writing it as it applies, serving it at a start
//! without the registry, and replacing it by the registry's first state.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use routechain_core::{Request, Url};
use routechain_rules::ChainFile;

use super::*;
use crate::{LiveOptions, Source, SourceError, SourceHandle, UpdateSender};

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "routechain-cache-{name}-{}-{}",
        std::process::id(),
        now_ms()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

const REFERENCE: &str = "g/com.foo.BarService:1.0.0";

fn rule_text() -> String {
    // Multi-line, with a line that looks like the checksum line and one like a rule line.
    "conditions:\n  - '=> host = 10.0.0.2'\n# checksum 0000000000000000\nrule 3 x y\n".into()
}

fn urls(texts: &[&str]) -> Vec<Url> {
    texts
        .iter()
        .map(|t| Url::parse_provider(t).unwrap())
        .collect()
}

fn sample(path: &Path) {
    let providers = urls(&[
        "dubbo://10.0.0.1:20880/com.foo.BarService?version=1.0.0&group=g",
        "dubbo://10.0.0.2:20880/com.foo.BarService?version=1.0.0&group=g",
    ]);
    let key = RuleKey::new("com.foo.BarService:1.0.0:g", "condition");
    let legacy = RuleKey::new("com.foo.BarService", RuleKey::LEGACY_OVERRIDES);
    let text = rule_text();
    write(
        path,
        REFERENCE,
        1_733_412_345_000,
        &providers,
        &[
            (&key, &text),
            (&legacy, "[\"override://0.0.0.0/x?weight=1\"]"),
        ],
    )
    .unwrap();
}

#[test]
fn a_written_file_reads_back_whole() {
    let dir = temp_dir("roundtrip");
    let path = dir.join("a.cache");
    sample(&path);
    let cached = read(&path, REFERENCE).unwrap().expect("a cache file");
    assert_eq!(cached.reference, REFERENCE);
    assert_eq!(cached.written_ms, 1_733_412_345_000);
    assert_eq!(
        cached.providers,
        [
            "dubbo://10.0.0.1:20880/com.foo.BarService?version=1.0.0&group=g",
            "dubbo://10.0.0.2:20880/com.foo.BarService?version=1.0.0&group=g"
        ]
    );
    assert_eq!(
        cached.rules,
        [
            (
                RuleKey::new("com.foo.BarService:1.0.0:g", "condition"),
                rule_text()
            ),
            (
                RuleKey::new("com.foo.BarService", RuleKey::LEGACY_OVERRIDES),
                "[\"override://0.0.0.0/x?weight=1\"]".to_string()
            ),
        ]
    );
    // An empty list is a list.
    write(&path, REFERENCE, 1, &[], &[]).unwrap();
    assert!(
        read(&path, REFERENCE)
            .unwrap()
            .unwrap()
            .providers
            .is_empty()
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_write_replaces_the_file_by_rename_and_leaves_no_temporary_file() {
    let dir = temp_dir("atomic");
    let path = dir.join("sub").join("a.cache");
    sample(&path);
    let before = std::fs::metadata(&path).unwrap();
    // A reader holding the old file keeps reading the old content: the new one is another
    // inode, renamed over the name.
    let old = std::fs::File::open(&path).unwrap();
    write(&path, REFERENCE, 2, &[], &[]).unwrap();
    let after = std::fs::metadata(&path).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        assert_ne!(before.ino(), after.ino(), "replaced by a rename");
        assert_eq!(old.metadata().unwrap().len(), before.len());
    }
    drop(old);
    assert_eq!(read(&path, REFERENCE).unwrap().unwrap().written_ms, 2);
    let names: Vec<String> = std::fs::read_dir(dir.join("sub"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["a.cache"]);
    // A directory where the file should be: an error, and no temporary file left.
    let blocked = dir.join("blocked.cache");
    std::fs::create_dir_all(blocked.join("x")).unwrap();
    assert!(matches!(
        write(&blocked, REFERENCE, 3, &[], &[]),
        Err(CacheError::Io { .. })
    ));
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 2);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn corrupt_partial_and_foreign_files_are_refused_with_the_reason() {
    let dir = temp_dir("corrupt");
    let path = dir.join("a.cache");
    sample(&path);
    let good = std::fs::read(&path).unwrap();
    let check = |bytes: &[u8], reference: &str| -> String {
        std::fs::write(&path, bytes).unwrap();
        read(&path, reference).unwrap_err().to_string()
    };
    // One byte changed anywhere in the body, or the file cut short.
    for at in [30, good.len() / 2, good.len() - 30] {
        let mut bad = good.clone();
        bad[at] ^= 0x20;
        assert!(
            check(&bad, REFERENCE).contains("checksum mismatch"),
            "byte {at}"
        );
    }
    for len in [good.len() - 1, good.len() / 2, 20] {
        let msg = check(&good[..len], REFERENCE);
        assert!(msg.contains("checksum mismatch"), "cut at {len}: {msg}");
    }
    // Another reference's file, another format version, not a cache file at all.
    let msg = check(&good, "/com.foo.Other:");
    assert!(
        msg.contains("written for the reference g/com.foo.BarService:1.0.0, not /com.foo.Other:"),
        "{msg}"
    );
    let mut v2 = b"routechain-cache 2".to_vec();
    v2.extend_from_slice(&good[good.iter().position(|b| *b == b'\n').unwrap()..]);
    assert!(
        check(&v2, REFERENCE).contains("cache format version 2, this routechain reads version 1")
    );
    assert!(check(b"", REFERENCE).contains("not a routechain cache file"));
    assert!(check(b"#!/bin/sh\necho hi\n", REFERENCE).contains("not a routechain cache file"));
    // A missing file is no cache, not an error.
    std::fs::remove_file(&path).unwrap();
    assert_eq!(read(&path, REFERENCE).unwrap(), None);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn each_reference_has_its_own_file_name() {
    let options = CacheOptions::new("/var/cache/rc");
    let a = options.path_for(&ServiceKey::parse("com.foo.BarService"));
    let b = options.path_for(&ServiceKey::parse("g/com.foo.BarService:1.0.0"));
    let c = options.path_for(&ServiceKey::parse("com.foo.BarService:1.0.0:g"));
    assert_eq!(a, Path::new("/var/cache/rc/_com.foo.BarService_.cache"));
    assert_eq!(
        b,
        Path::new("/var/cache/rc/g_com.foo.BarService_1.0.0.cache")
    );
    assert_eq!(b, c, "two spellings of one reference");
    assert_ne!(
        options.path_for(&ServiceKey::parse("a,b/com.foo.BarService:*")),
        a
    );
    // With a scope (the registry): a name of its own, and another scope's file is foreign.
    let scoped = |scope: &str| CacheOptions {
        scope: scope.into(),
        ..CacheOptions::new("/var/cache/rc")
    };
    let key = ServiceKey::parse("com.foo.BarService");
    let staging = scoped("zookeeper:staging:2181").path_for(&key);
    let production = scoped("zookeeper:production:2181").path_for(&key);
    assert!(
        staging
            .to_str()
            .unwrap()
            .starts_with("/var/cache/rc/_com.foo.BarService_-")
    );
    assert_ne!(staging, production);
    assert_ne!(staging, a);
    assert_eq!(
        scoped("zookeeper:staging:2181").identity(&key),
        "/com.foo.BarService: from zookeeper:staging:2181"
    );
    let dir = temp_dir("scope");
    let path = dir.join("x.cache");
    let id = |scope: &str| scoped(scope).identity(&key);
    write(&path, &id("zookeeper:staging:2181"), 1, &[], &[]).unwrap();
    let err = read(&path, &id("zookeeper:production:2181"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("written for the reference /com.foo.BarService: from zookeeper:staging:2181"),
        "{err}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn times_are_shown_in_utc() {
    assert_eq!(utc(0), "1970-01-01T00:00:00Z");
    assert_eq!(utc(1_733_412_345_999), "2024-12-05T15:25:45Z");
    assert_eq!(utc(951_782_400_000), "2000-02-29T00:00:00Z");
}

/// A source whose updates the test sends by hand; stopping it ends the applier.
struct Manual(Arc<Mutex<Option<UpdateSender>>>);

impl Source for Manual {
    fn name(&self) -> &str {
        "zookeeper"
    }
    fn start(self: Box<Self>, tx: UpdateSender) -> Result<SourceHandle, SourceError> {
        *self.0.lock().unwrap() = Some(tx);
        let slot = self.0.clone();
        let thread = std::thread::spawn(|| {});
        Ok(SourceHandle::new(
            move || drop(slot.lock().unwrap().take()),
            thread,
        ))
    }
}

const CHAIN: &str =
    "service: com.foo.BarService\nversion: 1.0.0\ngroup: g\nrouters:\n  - type: condition\n";

fn live(dir: &Path) -> Arc<LiveChain> {
    let file = ChainFile::parse("c.yaml", CHAIN, None).unwrap();
    let mut options = LiveOptions {
        cache: Some(CacheOptions::new(dir)),
        ..LiveOptions::default()
    };
    if let Some(c) = options.cache.as_mut() {
        c.wait = Duration::from_millis(200);
        c.interval = Duration::from_millis(50);
    }
    Arc::new(LiveChain::new(file, routechain_routers::builtin_registry(), options).unwrap())
}

/// `chain` watching a [`Manual`] source, its reports collected in `reports`; the slot
/// holds the sender once the source has started.
fn watch_manual(
    chain: &Arc<LiveChain>,
    reports: &Arc<Mutex<Vec<String>>>,
) -> (crate::Watching, Arc<Mutex<Option<UpdateSender>>>) {
    let slot: Arc<Mutex<Option<UpdateSender>>> = Arc::default();
    let log = reports.clone();
    let watching = chain
        .watch(Box::new(Manual(Arc::clone(&slot))), move |r| {
            log.lock().unwrap().push(r.to_string())
        })
        .unwrap();
    (watching, slot)
}

fn routed(live: &LiveChain) -> Vec<String> {
    let state = live.service().state();
    let mut call = routechain_core::CallState::seeded(1);
    if state.route(&Request::new(), &mut call).is_err() {
        return Vec::new();
    }
    let mut out: Vec<String> = call
        .candidates
        .iter()
        .map(|i| state.snapshot().providers()[i].address().to_string())
        .collect();
    out.sort();
    out
}

fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < Duration::from_secs(30), "{what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn providers(hosts: &[u32]) -> Update {
    Update::Providers {
        origin: "zookeeper:/dubbo/com.foo.BarService/providers".into(),
        text: ProviderText::Urls(
            hosts
                .iter()
                .map(|k| {
                    format!("dubbo://10.0.0.{k}:20880/com.foo.BarService?version=1.0.0&group=g")
                })
                .collect(),
        ),
    }
}

fn rule(host: u32) -> Update {
    Update::Rule {
        key: RuleKey::new("com.foo.BarService:1.0.0:g", "condition"),
        event: RuleEvent::Added(format!("conditions: ['=> host = 10.0.0.{host}']\n")),
        origin: "zookeeper:/dubbo/config/dubbo/com.foo.BarService:1.0.0:g.condition-router".into(),
    }
}

#[test]
fn the_applied_state_is_written_then_served_at_a_start_without_the_registry_and_replaced() {
    let dir = temp_dir("follow");
    let path = CacheOptions::new(&dir).path_for(&ServiceKey::parse("g/com.foo.BarService:1.0.0"));
    let reports: Arc<Mutex<Vec<String>>> = Arc::default();
    let said = |text: &str| reports.lock().unwrap().iter().any(|r| r.contains(text));

    // 1. A chain with no registry and no cache: nothing to serve, said once.
    let chain = live(&dir);
    let (watching, slot) = watch_manual(&chain, &reports);
    eventually("nothing to serve", || said("cache: nothing to serve"));
    assert!(said(&format!("there is no cache at {}", path.display())));
    // The registry's state is applied and recorded; a refused rule is not recorded.
    let tx = slot.lock().unwrap().clone().unwrap();
    tx.send(Update::Batch(vec![providers(&[1, 2]), rule(2)]))
        .unwrap();
    tx.send(Update::Rule {
        key: RuleKey::new("com.foo.BarService:1.0.0:g", "condition"),
        event: RuleEvent::Modified("conditions: [".into()),
        origin: "zookeeper:x".into(),
    })
    .unwrap();
    eventually("the rule applies", || routed(&chain) == ["10.0.0.2:20880"]);
    eventually("the file holds the state", || {
        read(&path, "g/com.foo.BarService:1.0.0")
            .ok()
            .flatten()
            .is_some_and(|c| c.providers.len() == 2 && c.rules.len() == 1)
    });
    eventually("the bad rule refused", || said("refused rule"));
    let nothing = |r: &String| r.contains("cache: nothing to serve");
    assert_eq!(
        reports
            .lock()
            .unwrap()
            .iter()
            .filter(|r| nothing(r))
            .count(),
        1,
        "said once"
    );
    drop(tx);
    drop(watching);
    let cached = read(&path, "g/com.foo.BarService:1.0.0").unwrap().unwrap();
    assert_eq!(
        cached.rules[0].1, "conditions: ['=> host = 10.0.0.2']\n",
        "the refused text is not recorded"
    );

    // 2. A new chain whose registry delivers nothing: the cache serves, and says so.
    reports.lock().unwrap().clear();
    let chain = live(&dir);
    let (watching, slot) = watch_manual(&chain, &reports);
    eventually("served from the cache", || {
        routed(&chain) == ["10.0.0.2:20880"]
    });
    assert!(said(
        "cache: serving 2 provider(s) from the cache written at 20"
    ));
    assert_eq!(chain.service().state().snapshot().len(), 2);
    // The registry's first state replaces it: its providers, and the cached rule it does
    // not hold cleared in the same swap.
    let tx = slot.lock().unwrap().clone().unwrap();
    tx.send(providers(&[3])).unwrap();
    eventually("replaced", || routed(&chain) == ["10.0.0.3:20880"]);
    assert!(said("the sources' first state replaces the cache"));
    assert!(said(
        "rule com.foo.BarService:1.0.0:g.condition-router deleted"
    ));
    // Which the file then holds.
    eventually("the file follows", || {
        read(&path, "g/com.foo.BarService:1.0.0")
            .ok()
            .flatten()
            .is_some_and(|c| c.providers.len() == 1 && c.rules.is_empty())
    });
    drop(tx);
    drop(watching);

    // 3. A corrupt file is ignored with the reason.
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[40] ^= 1;
    std::fs::write(&path, bytes).unwrap();
    reports.lock().unwrap().clear();
    let chain = live(&dir);
    let (watching, _slot) = watch_manual(&chain, &reports);
    eventually("ignored", || said("the cache was ignored"));
    assert!(said("checksum mismatch"));
    assert!(chain.service().state().snapshot().is_empty());
    drop(watching);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_burst_of_changes_makes_few_writes() {
    let dir = temp_dir("burst");
    let path = CacheOptions::new(&dir).path_for(&ServiceKey::parse("g/com.foo.BarService:1.0.0"));
    let chain = live(&dir);
    let options = chain.options().cache.clone().unwrap();
    let recorder = Recorder {
        writer: Writer::start(chain.clone(), options.interval).unwrap(),
        options,
    };
    // 500 changes applied as fast as they come, each recorded (as `follow` does).
    for k in 1..=500u32 {
        let update = providers(&[1, k + 1]);
        let mut carried = Carried::default();
        Carried::of(&update, &mut carried);
        let reports = chain.apply(update);
        recorder.record(&chain, carried, &reports);
    }
    let shared = recorder.writer.shared.clone();
    drop(recorder); // writes what is pending
    let writes = shared.lock().writes;
    let cached = read(&path, "g/com.foo.BarService:1.0.0").unwrap().unwrap();
    assert!(
        cached.providers[1].contains("10.0.0.501:"),
        "the last list is written"
    );
    // One write per interval (50 ms here) at most, not one per change.
    assert!((1..50).contains(&writes), "{writes} writes for 500 changes");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn the_file_holds_the_registered_providers_not_a_held_back_list_nor_the_override_rules_changes() {
    let dir = temp_dir("registered");
    let path = CacheOptions::new(&dir).path_for(&ServiceKey::parse("g/com.foo.BarService:1.0.0"));
    let chain = live(&dir);
    let slot = Arc::default();
    let watching = chain
        .watch(Box::new(Manual(Arc::clone(&slot))), |_| {})
        .unwrap();
    let tx = slot.lock().unwrap().clone().unwrap();
    let disable = "configVersion: v2.7\nkey: com.foo.BarService\nconfigs:\n  - side: consumer\n    \
                   providerAddresses: ['10.0.0.1:20880']\n    parameters: {disabled: 'true'}\n";
    tx.send(Update::Batch(vec![
        providers(&[1, 2]),
        Update::Rule {
            key: RuleKey::new("com.foo.BarService:1.0.0:g", RuleKey::CONFIGURATORS),
            event: RuleEvent::Added(disable.into()),
            origin: "zookeeper:o".into(),
        },
    ]))
    .unwrap();
    eventually("10.0.0.1 disabled", || routed(&chain) == ["10.0.0.2:20880"]);
    // An empty list, held back by empty-push protection.
    tx.send(providers(&[])).unwrap();
    tx.send(rule(2)).unwrap();
    eventually("the rule written", || {
        read(&path, "g/com.foo.BarService:1.0.0")
            .ok()
            .flatten()
            .is_some_and(|c| c.rules.len() == 2)
    });
    let cached = read(&path, "g/com.foo.BarService:1.0.0").unwrap().unwrap();
    assert_eq!(
        cached.providers,
        [
            "dubbo://10.0.0.1:20880/com.foo.BarService?version=1.0.0&group=g",
            "dubbo://10.0.0.2:20880/com.foo.BarService?version=1.0.0&group=g"
        ],
        "as registered: the disabled one kept (its rule is cached too), the empty list held back"
    );
    assert_eq!(chain.service().state().snapshot().len(), 1);
    drop(tx);
    drop(watching);
    std::fs::remove_dir_all(dir).unwrap();
}
