//! The file source: write-and-rename, ConfigMap symlink swaps, refused edits.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use routechain::balance::Caller;
use routechain::core::Request;
use routechain::live::{FileConfig, FileSource, LiveChain, LiveOptions, Report};
use routechain::rules::ChainFile;
use routechain::rules::load;

use super::{wait_report, wait_route, watch};

struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("routechain-live-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Dir(dir)
    }
    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
    /// Writes like an editor: a temporary file renamed over the original.
    fn replace(&self, name: &str, text: &str) -> PathBuf {
        let tmp = self.0.join(format!(".{name}.swp"));
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, self.path(name)).unwrap();
        self.path(name)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const PROVIDERS: &str = "\
dubbo://10.0.0.1:20880/com.foo.BarService?region=hz
dubbo://10.0.0.2:20880/com.foo.BarService?region=bj
dubbo://10.0.0.3:20880/com.foo.BarService?region=hz
";

const CHAIN: &str = "\
routers:
  - type: condition
    rule_file: region.rule.yaml
";

fn region(r: &str) -> String {
    format!("conditions: ['=> region = {r}']\n")
}

fn start(chain: &Path, providers: &Path) -> Arc<LiveChain> {
    let file = ChainFile::load(chain).expect("chain loads");
    let snapshot = load::load_providers(providers, 1).expect("providers load");
    Arc::new(
        LiveChain::with_providers(
            file,
            routechain::registry(),
            LiveOptions::default(),
            snapshot,
        )
        .expect("chain builds"),
    )
}

#[test]
fn edits_by_rename_apply_a_bad_edit_is_refused_and_a_good_one_applies_after_it() {
    let d = Dir::new("rename");
    let chain = d.replace("chain.yaml", CHAIN);
    d.replace("region.rule.yaml", &region("hz"));
    let providers = d.replace("providers.txt", PROVIDERS);
    let live = start(&chain, &providers);
    let (_w, rx) = watch(
        &live,
        Box::new(FileSource::new(FileConfig::new(
            &chain,
            Some(providers.clone()),
        ))),
    );
    wait_route(&live, &["10.0.0.1:20880", "10.0.0.3:20880"]);

    // The rule file, replaced by rename.
    d.replace("region.rule.yaml", &region("bj"));
    wait_route(&live, &["10.0.0.2:20880"]);
    wait_report(
        &rx,
        "chain reload",
        |r| matches!(r, Report::Applied { change, .. } if change.starts_with("chain file")),
    );

    // A bad edit: refused with file:line:column, the previous rule keeps serving.
    d.replace("region.rule.yaml", "conditions: ['=> region = bj'\n");
    let report = wait_report(&rx, "refusal", |r| matches!(r, Report::Refused { .. }));
    let Report::Refused { reason, .. } = report else {
        unreachable!()
    };
    let rule_file = d.path("region.rule.yaml").display().to_string();
    assert!(reason.contains(&format!("{rule_file}:")), "{reason}");
    assert_eq!(live.stats().refused(), 1);
    wait_route(&live, &["10.0.0.2:20880"]);
    // A rule that parses but does not validate: refused too.
    d.replace(
        "region.rule.yaml",
        "configVersion: v9.9\nconditions: ['=> region = hz']\n",
    );
    let report = wait_report(&rx, "refusal", |r| matches!(r, Report::Refused { .. }));
    assert!(
        report.to_string().contains("unknown configVersion"),
        "{report}"
    );
    wait_route(&live, &["10.0.0.2:20880"]);

    // A good edit applies.
    d.replace("region.rule.yaml", &region("hz"));
    wait_route(&live, &["10.0.0.1:20880", "10.0.0.3:20880"]);

    // The providers file, written in place.
    std::fs::write(
        &providers,
        format!("{PROVIDERS}dubbo://10.0.0.4:20880/com.foo.BarService?region=hz\n"),
    )
    .unwrap();
    wait_route(
        &live,
        &["10.0.0.1:20880", "10.0.0.3:20880", "10.0.0.4:20880"],
    );
    // A bad provider line: skipped alone, located; the other lines apply.
    let good = format!("{PROVIDERS}dubbo://10.0.0.4:20880/com.foo.BarService?region=hz\n");
    d.replace(
        "providers.txt",
        &format!("{good}dubbo://10.0.0.9:x/com.foo.BarService?region=hz\n"),
    );
    let report = wait_report(&rx, "provider skipped", |r| {
        matches!(r, Report::Skipped { .. })
    });
    let line = good.lines().count() + 1;
    assert!(
        report
            .to_string()
            .contains(&format!("providers.txt:{line}:18: invalid provider URL")),
        "{report}"
    );
    assert!(
        report.to_string().starts_with("skipped provider "),
        "{report}"
    );
    wait_route(
        &live,
        &["10.0.0.1:20880", "10.0.0.3:20880", "10.0.0.4:20880"],
    );
    // The chain file itself: a second router follows another rule file, watched from now on.
    d.replace(
        "zone.rule.yaml",
        "conditions: ['=> address = 10.0.0.3:20880']\n",
    );
    d.replace(
        "chain.yaml",
        &format!("{CHAIN}  - type: condition\n    rule_file: zone.rule.yaml\n"),
    );
    wait_route(&live, &["10.0.0.3:20880"]);
    d.replace(
        "zone.rule.yaml",
        "conditions: ['=> address = 10.0.0.4:20880']\n",
    );
    wait_route(&live, &["10.0.0.4:20880"]);
}

#[test]
fn a_kubernetes_configmap_symlink_swap_is_seen() {
    // The ConfigMap layout: files are symlinks through `..data`, which points at a
    // timestamped directory; an update writes a new directory and renames a new `..data`
    // symlink over the old one.
    let d = Dir::new("configmap");
    let version = |name: &str, rule: &str| {
        let dir = d.path(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("chain.yaml"), CHAIN).unwrap();
        std::fs::write(dir.join("region.rule.yaml"), rule).unwrap();
        std::fs::write(dir.join("providers.txt"), PROVIDERS).unwrap();
    };
    version("..2026_01", &region("hz"));
    std::os::unix::fs::symlink("..2026_01", d.path("..data")).unwrap();
    for f in ["chain.yaml", "region.rule.yaml", "providers.txt"] {
        std::os::unix::fs::symlink(format!("..data/{f}"), d.path(f)).unwrap();
    }
    let (chain, providers) = (d.path("chain.yaml"), d.path("providers.txt"));
    let live = start(&chain, &providers);
    let (_w, _rx) = watch(
        &live,
        Box::new(FileSource::new(FileConfig::new(
            &chain,
            Some(providers.clone()),
        ))),
    );
    wait_route(&live, &["10.0.0.1:20880", "10.0.0.3:20880"]);
    version("..2026_02", &region("bj"));
    std::os::unix::fs::symlink("..2026_02", d.path("..data_tmp")).unwrap();
    std::fs::rename(d.path("..data_tmp"), d.path("..data")).unwrap();
    std::fs::remove_dir_all(d.path("..2026_01")).unwrap();
    wait_route(&live, &["10.0.0.2:20880"]);
}

#[test]
fn an_emptied_providers_file_is_held_back() {
    let d = Dir::new("empty");
    let chain = d.replace("chain.yaml", CHAIN);
    d.replace("region.rule.yaml", &region("hz"));
    let providers = d.replace("providers.txt", PROVIDERS);
    let live = start(&chain, &providers);
    let (_w, rx) = watch(
        &live,
        Box::new(FileSource::new(FileConfig::new(
            &chain,
            Some(providers.clone()),
        ))),
    );
    d.replace("providers.txt", "# all gone\n");
    let report = wait_report(&rx, "held back", |r| matches!(r, Report::HeldBack { .. }));
    assert!(
        matches!(report, Report::HeldBack { serving: 3, .. }),
        "{report:?}"
    );
    assert_eq!(live.stats().held_back(), 1);
    wait_route(&live, &["10.0.0.1:20880", "10.0.0.3:20880"]);
    d.replace(
        "providers.txt",
        "dubbo://10.0.0.5:20880/com.foo.BarService?region=hz\n",
    );
    wait_route(&live, &["10.0.0.5:20880"]);
}

/// Five providers; the `hz` ones weigh 100, 300, 100 and 100.
const WEIGHTED: &str = "\
dubbo://10.0.0.1:20880/com.foo.BarService?region=hz&weight=100
dubbo://10.0.0.2:20880/com.foo.BarService?region=bj&weight=100
dubbo://10.0.0.3:20880/com.foo.BarService?region=hz&weight=300
dubbo://10.0.0.4:20880/com.foo.BarService?region=hz&weight=100
dubbo://10.0.0.5:20880/com.foo.BarService?region=hz&weight=100
";

/// A chain file with an inline condition rule and these service settings on top.
fn balanced_chain(settings: &str, condition: &str) -> String {
    format!(
        "{settings}routers:\n  - type: condition\n    rule:\n      conditions: ['{condition}']\n"
    )
}

/// The addresses `live`'s service selects for `n` calls of `request` (one call state).
fn picks(live: &LiveChain, request: &Request, call: &mut Caller, n: usize) -> Vec<String> {
    (0..n)
        .map(|_| {
            let s = live.service().select(request, &[], call).expect("selects");
            s.address().to_string()
        })
        .collect()
}

/// Dubbo's smooth weighted round robin over `(address, weight)` in order: every pick adds
/// each weight to its current weight, takes the first largest and subtracts the total.
fn smooth_round_robin(providers: &[(&str, i64)], n: usize) -> Vec<String> {
    let total: i64 = providers.iter().map(|p| p.1).sum();
    let mut current = vec![0i64; providers.len()];
    (0..n)
        .map(|_| {
            let mut best = 0;
            for (i, (_, w)) in providers.iter().enumerate() {
                current[i] += w;
                if current[i] > current[best] {
                    best = i;
                }
            }
            current[best] -= total;
            providers[best].0.to_string()
        })
        .collect()
}

#[test]
fn the_chain_files_service_settings_follow_its_edits_and_a_bad_one_is_refused_whole() {
    let d = Dir::new("balance");
    let chain = d.replace(
        "chain.yaml",
        &balanced_chain("load_balance: random\n", "=> region = hz"),
    );
    let providers = d.replace("providers.txt", WEIGHTED);
    let live = start(&chain, &providers);
    let (_w, rx) = watch(
        &live,
        Box::new(FileSource::new(FileConfig::new(
            &chain,
            Some(providers.clone()),
        ))),
    );
    let request = Request::new();
    let mut call = Caller::seeded(7);
    // Without a routing change, round robin over the routed `hz` providers but 10.0.0.5.
    let rr = smooth_round_robin(
        &[
            ("10.0.0.1:20880", 100),
            ("10.0.0.3:20880", 300),
            ("10.0.0.4:20880", 100),
        ],
        10,
    );
    assert_eq!(rr[..5], rr[5..], "one period of five picks");
    let random = picks(&live, &request, &mut call, 50);
    assert!(random.iter().any(|a| a == "10.0.0.5:20880"), "{random:?}");
    assert_ne!(random[..10], rr[..], "random does not round-robin");

    // One edit: round robin and a narrower rule, applied in one swap.
    d.replace(
        "chain.yaml",
        &balanced_chain(
            "load_balance: roundrobin\n",
            "=> region = hz & host != 10.0.0.5",
        ),
    );
    let report = wait_report(
        &rx,
        "settings applied",
        |r| matches!(r, Report::Applied { change, .. } if change.contains("service settings changed")),
    );
    let Report::Applied { generation, .. } = report else {
        unreachable!()
    };
    let first = live
        .service()
        .select(&request, &[], &mut call)
        .expect("selects");
    assert_eq!(first.generation(), generation);
    let mut seq = vec![first.address().to_string()];
    seq.extend(picks(&live, &request, &mut call, 9));
    assert_eq!(seq, rr);

    // A bad balancer: the whole file is refused with its location (the rule change in it
    // too), counted, and the previous routers and settings keep serving.
    d.replace(
        "chain.yaml",
        &balanced_chain("load_balance: fastest\n", "=> region = bj"),
    );
    let report = wait_report(&rx, "refusal", |r| matches!(r, Report::Refused { .. }));
    let Report::Refused { reason, .. } = &report else {
        unreachable!()
    };
    assert!(
        reason.contains(&format!("{}:1:15", chain.display())) && reason.contains("fastest"),
        "{reason}"
    );
    assert_eq!(live.stats().refused(), 1);
    assert_eq!(live.service().state().generation(), generation);
    assert_eq!(picks(&live, &request, &mut call, 10), rr);

    // A method override, retries and skip_degraded: all follow the next good edit.
    d.replace(
        "chain.yaml",
        &balanced_chain(
            "load_balance: roundrobin\nretries: 0\nskip_degraded: true\nmethods:\n  \
             pinned: {load_balance: consistenthash, hash_key: 'arguments[0]'}\n",
            "=> region = hz & host != 10.0.0.5",
        ),
    );
    wait_report(
        &rx,
        "override applied",
        |r| matches!(r, Report::Applied { change, .. } if change.contains("service settings changed")),
    );
    let config = live.service().config();
    assert_eq!((config.retries, config.skip_degraded), (Some(0), true));
    let pinned = |user: &str| {
        Request::new()
            .with_method("pinned")
            .with_argument(serde_json::json!(user))
    };
    let mut seen = std::collections::BTreeSet::new();
    for user in 0..30 {
        let user = format!("user-{user}");
        let got = picks(&live, &pinned(&user), &mut call, 5);
        assert!(got.iter().all(|a| *a == got[0]), "{user}: {got:?}");
        seen.insert(got[0].clone());
    }
    assert!(seen.len() > 1, "the hash spreads users: {seen:?}");
    // The default method still round-robins (its state starts afresh with the new settings).
    assert_eq!(picks(&live, &request, &mut call, 10), rr);
}

#[test]
fn override_rule_files_named_in_the_chain_file_apply_and_follow_their_edits() {
    let d = Dir::new("overrides");
    d.replace(
        "providers.txt",
        "dubbo://10.0.5.1:20880/com.acme.OrderService?application=orders\n\
         dubbo://10.0.5.2:20880/com.acme.OrderService?application=orders\n",
    );
    let weights = "configVersion: v2.7\nkey: com.acme.OrderService\nconfigs:\n- side: consumer\n  \
                   providerAddresses: [\"10.0.5.1:20880\"]\n  parameters: {weight: \"300\"}\n";
    d.replace("weights.yaml", weights);
    let chain = d.replace(
        "chain.yaml",
        "service: com.acme.OrderService\noverrides: weights.yaml\nload_balance: roundrobin\n\
         routers:\n  - type: condition\n",
    );
    let file = ChainFile::load(&chain).unwrap();
    let providers = load::load_providers(&d.path("providers.txt"), 1).unwrap();
    let live = Arc::new(
        LiveChain::with_providers(
            file,
            routechain::registry(),
            LiveOptions::default(),
            providers,
        )
        .unwrap(),
    );
    let weight = |live: &LiveChain, addr: &str| -> Option<String> {
        let state = live.service().state();
        state
            .snapshot()
            .providers()
            .iter()
            .find(|p| p.address() == addr)
            .map(|p| p.param("weight").unwrap_or("100").to_string())
    };
    assert_eq!(weight(&live, "10.0.5.1:20880").as_deref(), Some("300"));
    let (_watching, rx) = watch(
        &live,
        Box::new(FileSource::new(FileConfig::new(
            chain.clone(),
            Some(d.path("providers.txt")),
        ))),
    );
    // The override file is watched: a provider disabled.
    d.replace(
        "weights.yaml",
        &weights.replace("{weight: \"300\"}", "{disabled: \"true\"}"),
    );
    wait_route(&live, &["10.0.5.2:20880"]);
    // A bad edit: the chain file's reload is refused, located; the rules in force stay.
    d.replace(
        "weights.yaml",
        "key: com.acme.OrderService\nconfigs:\n- side: consumer\n",
    );
    let report = wait_report(&rx, "refused", |r| matches!(r, Report::Refused { .. }));
    assert!(
        report
            .to_string()
            .contains("weights.yaml:3:3: configs[0].parameters: an override item needs"),
        "{report}"
    );
    wait_route(&live, &["10.0.5.2:20880"]);
    d.replace("weights.yaml", weights);
    wait_route(&live, &["10.0.5.1:20880", "10.0.5.2:20880"]);
    assert_eq!(weight(&live, "10.0.5.1:20880").as_deref(), Some("300"));
}
