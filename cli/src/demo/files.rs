//! The demo's files and the live chain's reports: the working copy of the demo directory,
//! the canary plugin entry, the IDC-weight route table read and rewritten in place, and the
//! wait for the file watcher's "applied" report.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use routechain::rules::YamlDoc;

use super::{DemoError, PLUGIN_PERCENT};

/// The example canary plugin's library (`router-canary`), when it has been built:
/// `$ROUTECHAIN_CANARY_PLUGIN`, else the workspace's `target/release`, else `target/debug`.
pub fn find_canary_plugin() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("ROUTECHAIN_CANARY_PLUGIN") {
        return Some(PathBuf::from(p)).filter(|p| p.is_file());
    }
    let name = format!(
        "{}router_canary{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    );
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target");
    ["release", "debug"]
        .iter()
        .map(|profile| root.join(profile).join(&name))
        .find(|p| p.is_file())
}

/// Appends the canary plugin entry to the (copied) chain file, whose `routers` list is its
/// last top-level key.
pub fn add_plugin_entry(chain: &Path, library: &Path) -> Result<(), DemoError> {
    let mut text = std::fs::read_to_string(chain)?;
    if !text.ends_with('\n') {
        text.push('\n');
    }
    let path = serde_json::to_string(&library.display().to_string())
        .map_err(|e| DemoError::Setup(e.to_string()))?;
    text.push_str(&format!(
        "  # Added by the demo: the example plugin, built as {path}.\n  - type: plugin\n    path: {path}\n    priority: 165\n    config: {{percent: {PLUGIN_PERCENT}, attribute: user}}\n"
    ));
    std::fs::write(chain, text)?;
    Ok(())
}

/// How long the demo waits for the file watcher to apply the rule change.
const WATCH_TIMEOUT: Duration = Duration::from_secs(10);

/// Waits for the live chain's next report (the file watcher's, or a provider update's); it
/// must say "applied".
pub async fn next_applied(
    reports: &std::sync::mpsc::Receiver<String>,
) -> Result<String, DemoError> {
    let deadline = Instant::now() + WATCH_TIMEOUT;
    loop {
        match reports.try_recv() {
            Ok(r) if r.starts_with("applied") => return Ok(r),
            Ok(r) => {
                return Err(DemoError::Setup(format!(
                    "the live chain did not apply the change: {r}"
                )));
            }
            Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                return Err(DemoError::Setup("the file watcher stopped".into()));
            }
            Err(std::sync::mpsc::TryRecvError::Empty) => {}
        }
        if Instant::now() > deadline {
            return Err(DemoError::Setup(format!(
                "the file watcher did not apply the change within {WATCH_TIMEOUT:?}"
            )));
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Beijing's route table as the rule file says.
pub fn read_route_table(rule: &Path) -> Result<BTreeMap<String, u32>, DemoError> {
    let text = std::fs::read_to_string(rule)?;
    let doc = YamlDoc::parse(rule.display().to_string(), &text)
        .map_err(|e| DemoError::Setup(e.render()))?;
    let table = doc
        .value()
        .pointer("/route_tables/beijing")
        .and_then(|v| v.as_object())
        .ok_or_else(|| DemoError::Setup(format!("{}: no route_tables.beijing", rule.display())))?;
    Ok(table
        .iter()
        .map(|(k, v)| (k.to_lowercase(), v.as_u64().unwrap_or(0) as u32))
        .collect())
}

/// Rewrites beijing's route table in the rule file, in place: the value on the line of
/// `route_tables.beijing` becomes a flow mapping of `table`.
pub fn write_route_table(rule: &Path, table: &[(&str, u32)]) -> Result<(), DemoError> {
    let text = std::fs::read_to_string(rule)?;
    let doc = YamlDoc::parse(rule.display().to_string(), &text)
        .map_err(|e| DemoError::Setup(e.render()))?;
    let path = routechain::core::FieldPath::root()
        .key("route_tables")
        .key("beijing");
    if doc.get(&path).is_none() {
        return Err(DemoError::Setup(format!(
            "{}: no route_tables.beijing to rewrite",
            rule.display()
        )));
    }
    let at = doc.locate(&path);
    let flow = table
        .iter()
        .map(|(idc, w)| format!("{idc}: {w}"))
        .collect::<Vec<_>>()
        .join(", ");
    let mut out = String::new();
    for (n, line) in text.lines().enumerate() {
        if n + 1 == at.line {
            let col = line
                .char_indices()
                .nth(at.column.saturating_sub(1))
                .map_or(line.len(), |(i, _)| i);
            out.push_str(&line[..col]);
            out.push_str(&format!("{{{flow}}}"));
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    std::fs::write(rule, out)?;
    Ok(())
}

/// A copy of the demo directory in a temporary directory, removed on drop.
pub struct WorkDir(pub PathBuf);

impl WorkDir {
    /// Copies the files of `dir` into a new temporary directory.
    pub fn copy_of(dir: &Path) -> Result<Self, DemoError> {
        let work = std::env::temp_dir().join(format!(
            "routechain-demo-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        ));
        std::fs::create_dir_all(&work)?;
        let w = WorkDir(work);
        for entry in std::fs::read_dir(dir).map_err(|e| {
            DemoError::Setup(format!(
                "cannot read the demo directory {}: {e}",
                dir.display()
            ))
        })? {
            let path = entry?.path();
            if path.is_file() {
                if let Some(name) = path.file_name() {
                    std::fs::copy(&path, w.0.join(name))?;
                }
            }
        }
        Ok(w)
    }

    /// The copy's directory.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::demo::NEW_TABLE;

    #[test]
    fn the_route_table_is_rewritten_in_place() {
        let dir = std::env::temp_dir().join(format!("routechain-demo-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let rule = dir.join("r.yaml");
        std::fs::write(
            &rule,
            "# comment\nidcs:\n  beijing: [mt, zf]\nroute_tables:\n  beijing: {mt: 90, zf: 10}\nforce: false\n",
        )
        .unwrap();
        assert_eq!(
            read_route_table(&rule).unwrap(),
            [("mt".to_string(), 90), ("zf".to_string(), 10)].into()
        );
        write_route_table(&rule, &NEW_TABLE).unwrap();
        let text = std::fs::read_to_string(&rule).unwrap();
        assert!(
            text.contains("  beijing: {mt: 50, zf: 50}\nforce: false"),
            "{text}"
        );
        assert_eq!(
            read_route_table(&rule).unwrap(),
            [("mt".to_string(), 50), ("zf".to_string(), 50)].into()
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
