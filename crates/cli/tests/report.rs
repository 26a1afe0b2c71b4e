//! `quicklite report <csv>` redraws the three reports from a CSV alone.

use std::path::Path;

use assert_cmd::Command;
use predicates::prelude::*;

#[test]
fn report_regenerates_markdown_html_and_ascii_from_a_csv() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/results.csv");
    let out = tempfile::tempdir().unwrap();
    Command::cargo_bin("quicklite")
        .unwrap()
        .arg("report")
        .arg(&fixture)
        .arg("--output")
        .arg(out.path())
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "quicklite is 5.92× faster than tokio-rusqlite",
        ));
    let markdown = std::fs::read_to_string(out.path().join("summary.md")).unwrap();
    assert!(markdown.contains("| quicklite | 1.42M |"), "{markdown}");
    assert!(
        markdown.contains("SQLite"),
        "the environment comes from the CSV too"
    );
    assert!(
        markdown.contains("journal_mode"),
        "the PRAGMAs come from the CSV too"
    );
    // The CSV's tokio-rusqlite ran on SQLite 3.50.4, which has the WAL-reset bug: marked as a new run's would be.
    assert!(
        markdown.contains("| tokio-rusqlite ⚠ | 240k |"),
        "{markdown}"
    );
    assert!(
        markdown.contains("`tokio-rusqlite` (SQLite 3.50.4)")
            && markdown.contains("3.50.4 ⚠ WAL-reset bug"),
        "{markdown}"
    );
    let html = std::fs::read_to_string(out.path().join("report.html")).unwrap();
    assert!(html.contains("<svg"), "charts are inline");
    let ascii = std::fs::read_to_string(out.path().join("charts.txt")).unwrap();
    assert!(ascii.contains('█'));
    assert_eq!(std::fs::read_dir(out.path()).unwrap().count(), 3);
}
