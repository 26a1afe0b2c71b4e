//! The runners in other languages through the lab: Go's three drivers and Node's on point-read, insert and the
//! queue, every cell measured, each in its table beside a Rust approach.
//!
//! `scripts/test.sh` builds them first (`runners/go/build.sh`, `runners/node/build.sh`) and sets
//! `QUICKLITE_OTHER_LANGUAGE_RUNNERS=required`, so that a runner missing there fails this test instead of
//! skipping it.

use std::path::{Path, PathBuf};
use std::process::Command as Process;

use assert_cmd::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The built runner programs, or why they are not there.
fn runners() -> Result<(PathBuf, PathBuf), String> {
    let go = repo().join("runners/go/target/runner-go");
    let node = repo().join("runners/node/runner-node");
    if !go.is_file() {
        return Err(format!(
            "{} is not built (bash runners/go/build.sh)",
            go.display()
        ));
    }
    if !repo()
        .join("runners/node/node_modules/better-sqlite3")
        .is_dir()
    {
        return Err("runners/node has no node_modules (bash runners/node/build.sh)".to_owned());
    }
    Ok((go, node))
}

fn approaches_of(program: &Path) -> Vec<String> {
    let out = Process::new(program).arg("--approaches").output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn go_and_node_drivers_fill_their_rows_in_the_lab_s_tables() {
    let (go, node) = match runners() {
        Ok(found) => found,
        Err(why) => {
            assert_ne!(
                std::env::var("QUICKLITE_OTHER_LANGUAGE_RUNNERS").as_deref(),
                Ok("required"),
                "{why}"
            );
            eprintln!("\n*** SKIPPED: {why} ***\n");
            return;
        }
    };
    let mut approaches = approaches_of(&go);
    assert_eq!(approaches, ["go-mattn", "go-modernc", "go-zombiezen"]);
    // node:sqlite needs a Node that has it (runners/node fetches one on Linux x64).
    approaches.extend(approaches_of(&node));
    assert!(approaches.iter().any(|a| a == "node-better-sqlite3"));
    let mut wanted = approaches.clone();
    wanted.push("direct-blocking".to_owned());
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("run");
    // The Rust row needs a quicklite runner: the release build when there is one, else the debug build `cargo test`
    // made beside this test (building a release one here would take minutes on a fresh clone).
    let quicklite_runner = ["release", "debug"]
        .map(|profile| repo().join("target").join(profile).join("quicklite-runner"))
        .into_iter()
        .find(|path| path.is_file());
    let mut bench = Command::cargo_bin("quicklite").unwrap();
    bench
        .args([
            "bench",
            "--workloads",
            "point-read,insert,queue",
            "--concurrency",
            "4",
            "--duration",
            "0.3",
            "--warmup",
            "0.1",
            "--rows",
            "1000",
            "--repeat",
            "1",
            "--approaches",
        ])
        .arg(wanted.join(","))
        .arg("--runner")
        .arg(&go)
        .arg("--runner")
        .arg(&node)
        .arg("--db-dir")
        .arg(tmp.path())
        .arg("--output")
        .arg(&out);
    // Without either, the lab builds it.
    if let Some(quicklite_runner) = &quicklite_runner {
        bench
            .arg("--runner")
            .arg(quicklite_runner)
            .arg("--no-build");
    }
    bench.assert().success();

    let results: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(results.len(), 3 * wanted.len());
    for result in &results {
        let cell = &result["cell"];
        let (workload, approach) = (
            cell["workload"].as_str().unwrap(),
            cell["approach"].as_str().unwrap(),
        );
        assert!(
            result["failure"].is_null(),
            "{workload} {approach}: {result}"
        );
        let ops = match workload {
            "point-read" => result["reads"]["ops"].as_u64(),
            "insert" => result["writes"]["ops"].as_u64(),
            _ => result["operations"]
                .as_array()
                .and_then(|ops| ops.iter().find(|o| o["name"] == "cycle"))
                .and_then(|cycle| cycle["stats"]["ops"].as_u64()),
        };
        assert!(ops > Some(0), "{workload} {approach}: {result}");
        assert!(
            !result["env"]["sqlite_version"]
                .as_str()
                .unwrap_or("")
                .is_empty(),
            "{result}"
        );
    }
    let summary = std::fs::read_to_string(out.join("summary.md")).unwrap();
    for approach in &approaches {
        assert!(
            summary.contains(&format!("| {approach} |")),
            "{approach} missing:\n{summary}"
        );
    }
}
