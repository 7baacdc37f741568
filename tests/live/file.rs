//! The file source: write-and-rename, ConfigMap symlink swaps, refused edits.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use routechain::live::{FileConfig, FileSource, LiveChain, LiveOptions, Report};
use routechain::load;
use routechain::rules::ChainFile;

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
    // A bad provider line: refused, the old list serves.
    d.replace(
        "providers.txt",
        "dubbo://10.0.0.9:x/com.foo.BarService?region=hz\n",
    );
    let report = wait_report(&rx, "provider refusal", |r| {
        matches!(r, Report::Refused { .. })
    });
    assert!(report.to_string().contains("providers.txt:1:"), "{report}");
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
