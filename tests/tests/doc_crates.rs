//! The docs' crates built as a reader builds them: each test takes a page's `Cargo.toml`
//! lines and its Rust block (extracted from the page, so the page cannot drift from what is
//! built), writes them to a crate of its own in a temporary directory and runs
//! `cargo build --offline` on it.
//!
//! The pages depend on routechain by path, as a checkout next to the reader's crate:
//! `path = "../routechain"` (and `../routechain/tower`, `../routechain/plugins/abi`). The
//! test replaces that `../routechain` with this checkout's directory, and nothing else of
//! the lines. The workspace's `Cargo.lock` is copied in, so the crate resolves the versions
//! the workspace builds with (offline: from the local registry cache); the target directory
//! is the shared one (`CARGO_TARGET_DIR`, else the workspace's `target/`).
//!
//! The Rust blocks are also doc tests (`routechain-tower`'s for docs/embedding.md, the
//! facade's for docs/plugins.md); what this adds is the dependency lines: a block that
//! compiles in the workspace but needs a crate the page does not list fails here.

use std::path::{Path, PathBuf};
use std::process::Command;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ is inside the workspace")
        .to_path_buf()
}

/// The text of the first fenced block whose info string starts with `lang`, after the first
/// occurrence of `marker` in `page`. Lines rustdoc hides (`# ` or a lone `#`) are kept
/// without their marker, as rustdoc compiles them.
fn block_after(page: &str, marker: &str, lang: &str) -> String {
    let start = page
        .find(marker)
        .unwrap_or_else(|| panic!("the page has no {marker:?}"));
    let mut lines = page[start..].lines();
    lines
        .by_ref()
        .find(|l| {
            l.strip_prefix("```")
                .is_some_and(|info| info.starts_with(lang))
        })
        .unwrap_or_else(|| panic!("no ```{lang} block after {marker:?}"));
    let mut out = String::new();
    for line in lines.take_while(|l| !l.starts_with("```")) {
        let line = if lang == "rust" {
            match line.strip_prefix("# ") {
                Some(hidden) => hidden,
                None if line == "#" => "",
                None => line,
            }
        } else {
            line
        };
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// Builds a crate of `manifest` (the page's lines, after a `[package]` section when the page
/// has none) and `source` at `src/<file>`; panics with cargo's output when it fails.
fn build_crate(name: &str, manifest_lines: &str, file: &str, source: &str) {
    let root = workspace();
    let manifest_lines = manifest_lines.replace(
        "\"../routechain",
        &format!("\"{}", root.display().to_string().replace('\\', "/")),
    );
    assert!(
        manifest_lines.contains(&root.display().to_string()),
        "the page's lines name no path dependency on ../routechain:\n{manifest_lines}"
    );
    let package = if manifest_lines.contains("[package]") {
        String::new()
    } else {
        format!("[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n")
    };
    let dir = std::env::temp_dir().join(format!("routechain-doc-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("src")).unwrap();
    // A workspace of its own: not a member of whatever workspace the temp dir is in.
    let manifest = format!("{package}{manifest_lines}\n[workspace]\n");
    std::fs::write(dir.join("Cargo.toml"), &manifest).unwrap();
    std::fs::write(dir.join("src").join(file), source).unwrap();
    std::fs::copy(root.join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let output = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args(["build", "--offline", "--quiet"])
        .current_dir(&dir)
        .env("CARGO_TARGET_DIR", target)
        .output()
        .expect("cargo runs");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        output.status.success(),
        "the crate of the page's lines does not build:\n--- Cargo.toml\n{manifest}\n--- cargo\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn the_embedding_guides_service_builds_from_the_lines_the_page_shows() {
    let page = std::fs::read_to_string(workspace().join("docs/embedding.md")).unwrap();
    let manifest = block_after(&page, "## Cargo.toml", "toml");
    let service = block_after(&page, "## A tokio service that routes its calls", "rust");
    assert!(service.contains("async fn main()"), "{service}");
    build_crate("orders-service", &manifest, "main.rs", &service);
}

#[test]
fn the_plugin_guides_plugin_builds_from_the_lines_the_page_shows() {
    let page = std::fs::read_to_string(workspace().join("docs/plugins.md")).unwrap();
    let manifest = block_after(&page, "### Writing a plugin in Rust", "toml");
    let plugin = block_after(&page, "### Writing a plugin in Rust", "rust");
    assert!(plugin.contains("export_router_plugin!"), "{plugin}");
    build_crate("router-env", &manifest, "lib.rs", &plugin);
}

#[test]
fn a_block_is_read_as_the_page_shows_it() {
    let page = "# T\n```toml\nx = 1\n```\n## Here\ntext\n```rust,no_run\nfn a() {}\n# fn main() {}\n#\n```\n";
    assert_eq!(
        block_after(page, "## Here", "rust"),
        "fn a() {}\nfn main() {}\n\n"
    );
    assert_eq!(block_after(page, "# T", "toml"), "x = 1\n");
}
