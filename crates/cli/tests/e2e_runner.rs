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

/// The two example workload files run end to end on the main runner's approaches and the ceiling: every cell
/// measured, the shop's writes counted, each transaction's figures under its name in the JSON, and the tables
/// in the Markdown summary.
#[test]
fn the_example_workload_files_run_through_every_format() {
    let Some(runner) = debug_runner() else {
        let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
        assert!(
            !ci,
            "quicklite-runner is not built; run `cargo build -p quicklite-runner` first"
        );
        eprintln!("\n*** SKIPPED: build quicklite-runner to run this test ***\n");
        return;
    };
    let examples = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/workloads");
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("run");
    Command::cargo_bin("quicklite")
        .unwrap()
        .arg("bench")
        .arg("--workload-file")
        .arg(examples.join("shop.toml"))
        .arg("--workload-file")
        .arg(examples.join("point-read-file.toml"))
        .args([
            "--approaches",
            "ceiling,direct-blocking,quicklite",
            "--concurrency",
            "8",
            "--duration",
            "0.3",
            "--warmup",
            "0.1",
            "--repeat",
            "1",
            "--no-build",
            "--runner",
        ])
        .arg(&runner)
        .arg("--output")
        .arg(&out)
        .assert()
        .success()
        .stdout(predicate::str::contains("shop").and(predicate::str::contains("point-read-file")));
    let json: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(json.len(), 6, "2 workloads × 3 approaches");
    for result in &json {
        assert!(result["failure"].is_null(), "{result}");
        assert_eq!(result["errors"], 0, "{result}");
        assert!(result["reads"]["ops"].as_u64() > Some(0), "{result}");
        let names: Vec<&str> = result["operations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|op| op["name"].as_str().unwrap())
            .collect();
        if result["cell"]["workload"] == "shop" {
            assert!(result["writes"]["ops"].as_u64() > Some(0), "{result}");
            assert_eq!(
                names,
                [
                    "product page",
                    "category listing",
                    "order history",
                    "checkout"
                ]
            );
        } else {
            assert_eq!(result["writes"]["ops"], 0, "{result}");
            assert_eq!(names, ["point read"]);
        }
    }
    let markdown = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(
        markdown.contains("shop") && markdown.contains("point-read-file"),
        "{markdown}"
    );
}

/// A small `long-read` run on the main runner's quicklite, with and without reads on the callers' threads, and
/// direct-blocking: every cell measured, and the table showing the short reads, the long ones, the slowest write and
/// the ticker's tail.
#[test]
fn long_reads_run_end_to_end_and_their_table_shows_the_tails() {
    let Some(runner) = debug_runner() else {
        let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
        assert!(
            !ci,
            "quicklite-runner is not built; run `cargo build -p quicklite-runner` first"
        );
        eprintln!("\n*** SKIPPED: build quicklite-runner to run this test ***\n");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("run");
    Command::cargo_bin("quicklite")
        .unwrap()
        .args([
            "bench",
            "--approaches",
            "quicklite,quicklite-no-inline,direct-blocking",
            "--long-read-every",
            "20",
            "--long-read-ms",
            "5-10",
            "--concurrency",
            "4",
            "--rows",
            "1000",
            "--duration",
            "0.4",
            "--warmup",
            "0.2",
            "--repeat",
            "1",
            "--no-build",
            "--runner",
        ])
        .arg(&runner)
        .arg("--output")
        .arg(&out)
        .assert()
        .success()
        .stdout(predicate::str::contains("long-read"));
    let json: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(json.len(), 3);
    for result in &json {
        assert!(result["failure"].is_null(), "{result}");
        assert_eq!(result["errors"], 0, "{result}");
        assert!(result["reads"]["ops"].as_u64() > Some(0), "{result}");
        assert!(result["writes"]["ops"].as_u64() > Some(0), "{result}");
        assert_eq!(result["operations"][0]["name"], "long read", "{result}");
        assert!(result["lateness"]["p999_us"].is_f64(), "{result}");
    }
    let markdown = std::fs::read_to_string(out.join("summary.md")).unwrap();
    for heading in [
        "reads/s",
        "long reads",
        "write p99",
        "write max",
        "lateness p99",
        "lateness p99.9",
        "lateness max",
    ] {
        assert!(
            markdown.contains(&format!("| {heading} |")),
            "{heading}: {markdown}"
        );
    }
}
