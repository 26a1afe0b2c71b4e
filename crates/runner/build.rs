//! Records the exact versions of the crates under test, as resolved in the workspace's `Cargo.lock`,
//! so every result says which code produced it. The peer runners under `runners/` use this same script
//! (`build = "../../crates/runner/build.rs"`), each reading its own workspace's lock file.

use std::path::{Path, PathBuf};

/// Crates whose resolved versions are reported in `Environment::crate_versions`.
/// A crate absent from a runner's lock file is simply not reported.
const REPORTED: &[&str] = &[
    "rusqlite",
    "libsqlite3-sys",
    "tokio",
    "quicklite",
    "async-sqlite",
    "tokio-rusqlite",
    "deadpool-sqlite",
    "deadpool",
    "sqlx",
    "sqlx-sqlite",
    "trailbase-sqlite",
    "turso",
    "turso_core",
    "tokio-postgres",
];

fn main() {
    let manifest_dir = PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    );
    let lock = find_lock(&manifest_dir);
    let text = lock
        .as_ref()
        .and_then(|p| std::fs::read_to_string(p).ok())
        .unwrap_or_default();
    if let Some(lock) = &lock {
        println!("cargo:rerun-if-changed={}", lock.display());
    }
    let versions = locked_versions(&text);
    let mut out = String::from("/// `(crate, version)` as resolved in Cargo.lock at build time.\n");
    out.push_str("pub const CRATE_VERSIONS: &[(&str, &str)] = &[\n");
    for (name, version) in versions {
        out.push_str(&format!("    ({name:?}, {version:?}),\n"));
    }
    out.push_str("];\n");
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    std::fs::write(out_dir.join("crate_versions.rs"), out).expect("OUT_DIR is writable");
}

/// The nearest `Cargo.lock` at or above `dir` (the workspace root's).
fn find_lock(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .map(|d| d.join("Cargo.lock"))
        .find(|p| p.is_file())
}

/// Versions of the [`REPORTED`] crates in a `Cargo.lock` (every version, if a crate is locked twice).
fn locked_versions(lock: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut name: Option<&str> = None;
    for line in lock.lines() {
        if line == "[[package]]" {
            name = None;
        } else if let Some(v) = line.strip_prefix("name = ") {
            name = Some(v.trim_matches('"'));
        } else if let (Some(n), Some(v)) = (name, line.strip_prefix("version = ")) {
            if REPORTED.contains(&n) {
                out.push((n.to_string(), v.trim_matches('"').to_string()));
            }
            name = None;
        }
    }
    out
}
