//! A runner that crashes, hangs or prints garbage becomes a failed result; the run goes on and every file stays
//! whole. Uses the shell mock runner in `tests/support/`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use quicklite_lab::{
    ApproachName, BenchOptions, CellResult, ExecOptions, ExportFormat, ResultStore, RunnerSetup,
    Runners, Silent, build_matrix, read_csv, run_all,
};

fn mock_runner() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/mock-runner.sh")
}

fn options(approaches: &[&str]) -> BenchOptions {
    BenchOptions {
        workloads: vec!["point-read".into()],
        approaches: approaches.iter().map(|a| a.parse().unwrap()).collect(),
        duration_ms: 100,
        warmup_ms: 0,
        repeat: 1,
        ..BenchOptions::default()
    }
}

fn runners(approaches: &[ApproachName]) -> Runners {
    let setup = RunnerSetup {
        programs: vec![mock_runner()],
        ..RunnerSetup::default()
    };
    Runners::resolve(approaches, &setup).expect("the mock runner provides every approach used here")
}

#[test]
fn crash_hang_and_garbage_are_recorded_and_the_run_continues() {
    let out = tempfile::tempdir().unwrap();
    let log = out.path().join("mock-runner.log");
    std::fs::write(&log, "").unwrap();
    let approaches = [
        "direct-blocking",
        "spawn-blocking",
        "per-request",
        "async-sqlite",
        "quicklite",
    ];
    let options = options(&approaches);
    let cells = build_matrix(&options).unwrap();
    let runners = runners(&options.approaches);
    let exec = ExecOptions {
        timeout: Some(Duration::from_secs(2)),
        db_root: Some(out.path().to_owned()),
    };
    let mut store =
        ResultStore::create(&out.path().join("run"), ApproachName::DirectBlocking).unwrap();
    run_all(&cells, &runners, &exec, &mut store, &mut Silent).unwrap();

    let results: Vec<CellResult> =
        serde_json::from_slice(&std::fs::read(store.path(ExportFormat::Json)).unwrap()).unwrap();
    assert_eq!(results.len(), 5);
    let failure = |approach: &str| {
        results
            .iter()
            .find(|r| r.cell.approach == approach)
            .and_then(|r| r.failure.clone())
    };
    assert_eq!(failure("direct-blocking"), None);
    assert_eq!(failure("quicklite"), None);
    let crash = failure("spawn-blocking").unwrap();
    assert!(
        crash.contains("exit status: 101") && crash.contains("mock crash"),
        "{crash}"
    );
    let hang = failure("per-request").unwrap();
    assert!(hang.contains("timed out after 2 s"), "{hang}");
    let garbage = failure("async-sqlite").unwrap();
    assert!(
        garbage.contains("not a cell result") && garbage.contains("this is not"),
        "{garbage}"
    );

    // The CSV holds the same five rows and reads back.
    assert_eq!(read_csv(&store.path(ExportFormat::Csv)).unwrap().len(), 5);
    // Every cell got its own directory, and none is left.
    let dirs = std::fs::read_to_string(&log).unwrap();
    let dirs: Vec<&str> = dirs.lines().collect();
    assert_eq!(dirs.len(), 5, "{dirs:?}");
    for dir in &dirs {
        assert!(!Path::new(dir).exists(), "{dir} was not removed");
    }
    let markdown = std::fs::read_to_string(store.path(ExportFormat::Markdown)).unwrap();
    assert!(
        markdown.contains("quicklite is 5.00× faster than direct-blocking"),
        "{markdown}"
    );
    assert!(
        markdown.contains("per-request failed:** timed out"),
        "{markdown}"
    );
}

#[test]
fn a_missing_runner_program_is_a_clear_error() {
    let setup = RunnerSetup {
        programs: vec![PathBuf::from("/nonexistent/runner")],
        ..RunnerSetup::default()
    };
    let err = Runners::resolve(&[ApproachName::Quicklite], &setup).unwrap_err();
    assert!(err.to_string().contains("cannot start it"), "{err}");
}

#[test]
fn a_runner_that_cannot_be_started_is_a_failed_cell() {
    let cells = build_matrix(&options(&["quicklite"])).unwrap();
    let result = quicklite_lab::run_cell(
        Path::new("/nonexistent/runner"),
        &cells[0],
        &ExecOptions::default(),
    );
    let failure = result.failure.unwrap();
    assert!(failure.contains("could not start runner"), "{failure}");
}
