//! `quicklite bench` end to end against the shell mock runner of the lab's tests: every file written, one row
//! per cell, and a crashing cell recorded without stopping the run.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use predicates::prelude::*;

fn mock_runner() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../lab/tests/support/mock-runner.sh")
}

fn bench(out: &Path, approaches: &str) -> assert_cmd::assert::Assert {
    bench_repeated(out, approaches, 1)
}

fn bench_repeated(out: &Path, approaches: &str, repeat: u32) -> assert_cmd::assert::Assert {
    Command::cargo_bin("quicklite")
        .unwrap()
        .args([
            "bench",
            "--workloads",
            "point-read",
            "--duration",
            "0.1",
            "--warmup",
            "0",
            "--repeat",
        ])
        .arg(repeat.to_string())
        .arg("--approaches")
        .arg(approaches)
        .arg("--runner")
        .arg(mock_runner())
        .arg("--output")
        .arg(out)
        .assert()
}

#[test]
fn bench_writes_every_file_with_one_row_per_cell() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("run");
    bench(&out, "direct-blocking,quicklite")
        .success()
        .stdout(predicate::str::contains(
            "quicklite is 5.00× faster than direct-blocking",
        ));
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
    assert_eq!(csv.lines().count(), 3, "header + 2 rows:\n{csv}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(json.as_array().map(Vec::len), Some(2));
}

#[test]
fn repetitions_run_in_rounds_and_the_report_pairs_them() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("run");
    bench_repeated(&out, "direct-blocking,quicklite", 3)
        .success()
        .stdout(predicate::str::contains(
            "quicklite is 5.00× faster than direct-blocking (5.00–5.00× over 3 paired repetitions)",
        ))
        .stderr(predicate::str::contains(
            "Running 6 cells, each of 2 measured 3 times in interleaved rounds",
        ));
    let mut reader = csv::Reader::from_path(out.join("results.csv")).unwrap();
    let header = reader.headers().unwrap().clone();
    let column = |name: &str| header.iter().position(|h| h == name).unwrap();
    let order: Vec<String> = reader
        .records()
        .map(Result::unwrap)
        .map(|r| format!("{} {}", &r[column("approach")], &r[column("repetition")]))
        .collect();
    assert_eq!(
        order,
        [
            "direct-blocking 0",
            "quicklite 0",
            "direct-blocking 1",
            "quicklite 1",
            "direct-blocking 2",
            "quicklite 2"
        ]
    );
    let markdown = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(markdown.contains("Each cell ran 3 times"), "{markdown}");
    assert!(markdown.contains("| quicklite | 3: "), "{markdown}");
}

#[test]
fn a_crashing_cell_is_recorded_and_the_exit_code_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("run");
    bench(&out, "spawn-blocking,quicklite")
        .failure()
        .stderr(predicate::str::contains("1 of 2 cells failed"));
    let markdown = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(
        markdown.contains("spawn-blocking failed:** runner exited with exit status: 101"),
        "{markdown}"
    );
    let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
    assert_eq!(csv.lines().count(), 3);
}

#[test]
fn write_modes_and_total_readers_become_columns() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("run");
    Command::cargo_bin("quicklite")
        .unwrap()
        .args([
            "bench",
            "--workloads",
            "multi-db",
            "--approaches",
            "quicklite",
            "--num-databases",
            "1,1000",
            "--write-delays",
            "100",
            "--write-mode",
            "blocking,paced",
            "--total-readers",
            "8",
            "--duration",
            "0.1",
            "--warmup",
            "0",
            "--repeat",
            "1",
            "--runner",
        ])
        .arg(mock_runner())
        .arg("--output")
        .arg(&out)
        .assert()
        .success();
    let mut reader = csv::Reader::from_path(out.join("results.csv")).unwrap();
    let header = reader.headers().unwrap().clone();
    let column = |name: &str| header.iter().position(|h| h == name).unwrap();
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    let cells: Vec<(&str, &str, &str)> = rows
        .iter()
        .map(|r| {
            (
                &r[column("num_databases")],
                &r[column("write_mode")],
                &r[column("total_readers")],
            )
        })
        .collect();
    assert_eq!(
        cells,
        [
            ("1", "blocking", "8"),
            ("1", "paced", "8"),
            ("1000", "blocking", "8"),
            ("1000", "paced", "8"),
        ]
    );
    let markdown = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(markdown.contains("write mode paced"), "{markdown}");
    assert!(
        markdown.contains("readers 8 in all, random database per read"),
        "{markdown}"
    );
}

#[test]
fn write_ratios_make_a_mixed_table_each() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("run");
    Command::cargo_bin("quicklite")
        .unwrap()
        .args([
            "bench",
            "--workloads",
            "mixed,point-read",
            "--approaches",
            "direct-blocking,quicklite",
            "--write-ratio",
            "0,0.1%,0.01",
            "--duration",
            "0.1",
            "--warmup",
            "0",
            "--repeat",
            "1",
            "--runner",
        ])
        .arg(mock_runner())
        .arg("--output")
        .arg(&out)
        .assert()
        .success();
    let mut reader = csv::Reader::from_path(out.join("results.csv")).unwrap();
    let header = reader.headers().unwrap().clone();
    let column = |name: &str| header.iter().position(|h| h == name).unwrap();
    let cells: Vec<(String, String)> = reader
        .records()
        .map(Result::unwrap)
        .map(|r| {
            (
                r[column("workload")].to_owned(),
                r[column("write_ppm")].to_owned(),
            )
        })
        .collect();
    let mixed = |ppm: &str| ("mixed".to_owned(), ppm.to_owned());
    let reads = ("point-read".to_owned(), String::new());
    assert_eq!(
        cells,
        [
            mixed("0"),
            mixed("0"),
            mixed("1000"),
            mixed("1000"),
            mixed("10000"),
            mixed("10000"),
            reads.clone(),
            reads,
        ],
        "point reads have no share of writes"
    );
    let markdown = std::fs::read_to_string(out.join("summary.md")).unwrap();
    for title in [
        "## mixed · writes 0%\n",
        "## mixed · writes 0.1%\n",
        "## mixed · writes 1%\n",
        "## point-read\n",
    ] {
        assert!(markdown.contains(title), "{title}: {markdown}");
    }
}

#[test]
fn long_read_knobs_alone_run_the_workload_a_table_for_each_setting() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("run");
    Command::cargo_bin("quicklite")
        .unwrap()
        .args([
            "bench",
            "--approaches",
            "direct-blocking,quicklite",
            "--long-read-every",
            "1000,100",
            "--long-read-ms",
            "20-50",
            "--duration",
            "0.1",
            "--warmup",
            "0",
            "--repeat",
            "1",
            "--runner",
        ])
        .arg(mock_runner())
        .arg("--output")
        .arg(&out)
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "long-read · quicklite · 64 tasks · long reads one in 100, 20–50 ms",
        ));
    let mut reader = csv::Reader::from_path(out.join("results.csv")).unwrap();
    let header = reader.headers().unwrap().clone();
    let column = |name: &str| header.iter().position(|h| h == name).unwrap();
    let cells: Vec<(String, String, String, String)> = reader
        .records()
        .map(Result::unwrap)
        .map(|r| {
            (
                r[column("workload")].to_owned(),
                r[column("long_read_every")].to_owned(),
                r[column("long_read_min_ms")].to_owned(),
                r[column("long_read_max_ms")].to_owned(),
            )
        })
        .collect();
    let long = |every: &str| {
        (
            "long-read".to_owned(),
            every.to_owned(),
            "20".to_owned(),
            "50".to_owned(),
        )
    };
    assert_eq!(
        cells,
        [long("1000"), long("1000"), long("100"), long("100")],
        "only the long-read workload, a table per setting"
    );
    let markdown = std::fs::read_to_string(out.join("summary.md")).unwrap();
    for title in [
        "## long-read · long reads one in 1,000, 20–50 ms\n",
        "## long-read · long reads one in 100, 20–50 ms\n",
    ] {
        assert!(markdown.contains(title), "{title}: {markdown}");
    }
    assert!(
        markdown.contains("writes one insert due every 1 ms from one task"),
        "{markdown}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(
        json[0]["cell"]["long_reads"],
        serde_json::json!({"every": 1000, "min_ms": 20, "max_ms": 50})
    );
}
