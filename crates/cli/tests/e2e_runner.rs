//! A tiny real run: `quicklite bench` with two approaches of the main workspace's runner (debug build),
//! point-read, a fraction of a second per cell. Every file is written with one row per cell.
//!
//! The runner comes from `cargo test --workspace` (which builds `quicklite-runner`) or
//! `cargo build -p quicklite-runner`. Without it the test is skipped loudly, and fails in CI.

use std::path::PathBuf;

use assert_cmd::Command;
use predicates::prelude::*;

/// `target/debug/quicklite-runner`, next to the `deps/` directory holding this test.
fn debug_runner() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let runner = exe.parent()?.parent()?.join("quicklite-runner");
    runner.is_file().then_some(runner)
}

#[test]
fn two_real_approaches_end_to_end() {
    let Some(runner) = debug_runner() else {
        let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
        assert!(
            !ci,
            "quicklite-runner is not built; run `cargo build -p quicklite-runner` first"
        );
        eprintln!(
            "\n*** SKIPPED: build quicklite-runner (cargo build -p quicklite-runner) to run this test ***\n"
        );
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("run");
    Command::cargo_bin("quicklite")
        .unwrap()
        .args([
            "bench",
            "--approaches",
            "direct-blocking,quicklite",
            "--workloads",
            "point-read",
            "--duration",
            "0.3",
            "--warmup",
            "0.1",
            "--rows",
            "1000",
            // The second round is recorded as such; the runner, which refuses unknown fields, is never told.
            "--repeat",
            "2",
            "--no-build",
            "--db-dir",
        ])
        .arg(tmp.path())
        .arg("--runner")
        .arg(&runner)
        .arg("--output")
        .arg(&out)
        .assert()
        .success()
        .stdout(predicate::str::contains("point-read"));
    for file in [
        "results.csv",
        "results.json",
        "summary.md",
        "report.html",
        "charts.txt",
    ] {
        assert!(out.join(file).is_file(), "{file} missing");
    }
    let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
    assert_eq!(
        csv.lines().count(),
        5,
        "header + 2 cells × 2 rounds:\n{csv}"
    );
    let json: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(json.len(), 4);
    let rounds: Vec<u64> = json
        .iter()
        .map(|r| r["cell"]["repetition"].as_u64().unwrap_or(0))
        .collect();
    assert_eq!(rounds, [0, 0, 1, 1]);
    for result in &json {
        assert!(result["failure"].is_null(), "{result}");
        assert!(result["reads"]["ops"].as_u64() > Some(0), "{result}");
        assert!(
            !result["env"]["sqlite_version"]
                .as_str()
                .unwrap_or("")
                .is_empty()
        );
    }
    let markdown = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(
        markdown.contains("| direct-blocking |") && markdown.contains("| quicklite |"),
        "{markdown}"
    );
    // Only the two cells' database directories were made under --db-dir, and both are gone.
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, vec![std::ffi::OsString::from("run")]);
}
