//! The HTML report renders in headless Chromium, shows its charts, and fetches nothing.
//!
//! Chromium comes from Debian's packages (`scripts/install-test-deps.sh`). Without it the test is skipped with a
//! loud message on a developer's machine, and fails in CI (`CI` set), so a missing install step cannot pass.

use std::path::{Path, PathBuf};
use std::time::Duration;

use assert_cmd::Command;

/// The bar colour of the report's charts (`.bar { fill: #2680c2 }`).
const BAR_COLOUR: [u8; 3] = [0x26, 0x80, 0xc2];

/// The ceiling's bar colour (`.bar.ceiling { fill: #8a63d2 }`): a colour of its own, not an approach's.
const CEILING_COLOUR: [u8; 3] = [0x8a, 0x63, 0xd2];

fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| ["chromium", "chromium-browser"].map(|name| dir.join(name)))
        .find(|candidate| candidate.is_file())
}

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

/// Every `src`, `href`, `srcset`, `action`, `poster`, `data` attribute and CSS `url(...)` / `@import` that points
/// off the page.
fn remote_references(html: &str) -> Vec<String> {
    let lower = html.to_lowercase();
    let mut found = Vec::new();
    for attr in [
        "src=", "href=", "srcset=", "action=", "poster=", "data=", "url(", "@import",
    ] {
        let mut from = 0;
        while let Some(at) = lower[from..].find(attr) {
            let start = from + at + attr.len();
            let value = lower[start..].trim_start_matches([' ', '"', '\'']);
            if value.starts_with("http:") || value.starts_with("https:") || value.starts_with("//")
            {
                found.push(lower[from + at..(start + 40).min(lower.len())].to_owned());
            }
            from = start;
        }
    }
    for tag in ["<script", "<link", "<iframe", "<img", "<object", "<embed"] {
        if lower.contains(tag) {
            found.push(tag.to_owned());
        }
    }
    found
}

#[test]
fn the_html_report_has_no_remote_references() {
    let html = report_html(tempfile::tempdir().unwrap().path());
    assert_eq!(remote_references(&html), Vec::<String>::new());
    assert!(html.contains("<svg"));
}

#[test]
fn the_scan_catches_remote_references() {
    let html = r#"<img src="https://cdn.example/x.png"><a href='//x'>"#;
    assert_eq!(remote_references(html).len(), 3);
}

/// Chromium, or `None` (after saying so) where a developer has not installed it; in CI its absence fails.
fn chromium_or_skip() -> Option<PathBuf> {
    let found = chromium();
    if found.is_none() {
        if in_ci() {
            panic!("chromium is not installed; CI must run scripts/install-test-deps.sh first");
        }
        eprintln!(
            "\n*** SKIPPED: chromium not found; run scripts/install-test-deps.sh to render the report ***\n"
        );
    }
    found
}

/// Renders `page` in headless Chromium at 1280×2000 and returns its pixels; the screenshot is kept as `kept_as` in
/// the test's target directory, where a person can look at it after the test.
fn screenshot(chromium: &Path, page: &Path, kept_as: &str) -> Vec<[u8; 3]> {
    let tmp = tempfile::tempdir().unwrap();
    let png = tmp.path().join("report.png");
    let profile = tmp.path().join("chromium-profile");
    let url = format!("file://{}", page.display());
    let output = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--window-size=1280,2000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--screenshot={}", png.display()))
        .arg(&url)
        .timeout(Duration::from_secs(120))
        .output()
        .expect("chromium starts");
    assert!(
        png.is_file(),
        "no screenshot; chromium said: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let kept = Path::new(env!("CARGO_TARGET_TMPDIR")).join(kept_as);
    std::fs::copy(&png, &kept).unwrap();
    eprintln!("screenshot: {}", kept.display());
    let (width, height, pixels) = decode_rgb(&png);
    assert_eq!((width, height), (1280, 2000));
    pixels
}

#[test]
fn the_html_report_renders_in_headless_chromium() {
    let Some(chromium) = chromium_or_skip() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    report_html(tmp.path());
    let pixels = screenshot(
        &chromium,
        &tmp.path().join("report.html"),
        "report-screenshot.png",
    );
    let total = pixels.len() as f64;
    let ink = pixels.iter().filter(|p| p.iter().any(|&c| c < 200)).count() as f64;
    assert!(
        ink / total > 0.01,
        "the page looks blank ({:.3}% ink)",
        100.0 * ink / total
    );
    let bars = pixels.iter().filter(|p| **p == BAR_COLOUR).count();
    assert!(
        bars > 5_000,
        "the chart bars are missing ({bars} bar pixels)"
    );
    assert_eq!(
        pixels.iter().filter(|p| **p == CEILING_COLOUR).count(),
        0,
        "no ceiling ran: no bar in its colour"
    );
}

#[test]
fn the_ceiling_is_drawn_in_a_colour_of_its_own() {
    let Some(chromium) = chromium_or_skip() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    // The fixture with its point-read direct-blocking row standing for a ceiling row.
    let fixture = std::fs::read_to_string(fixture_csv()).unwrap();
    let csv = tmp.path().join("results.csv");
    std::fs::write(
        &csv,
        fixture.replacen("point-read,direct-blocking,", "point-read,ceiling,", 1),
    )
    .unwrap();
    Command::cargo_bin("quicklite")
        .unwrap()
        .arg("report")
        .arg(&csv)
        .assert()
        .success();
    let pixels = screenshot(
        &chromium,
        &tmp.path().join("report.html"),
        "report-with-ceiling-screenshot.png",
    );
    let count = |colour: [u8; 3]| pixels.iter().filter(|p| **p == colour).count();
    // Two charts of the point reads draw the ceiling's bar (throughput and p99 latency), the approaches beside it.
    assert!(
        count(CEILING_COLOUR) > 1_000,
        "no ceiling bar in its own colour ({} pixels)",
        count(CEILING_COLOUR)
    );
    assert!(
        count(BAR_COLOUR) > 5_000,
        "the approaches' bars are missing"
    );
}

/// The CLI's fixture of results, a CSV from an older lab.
fn fixture_csv() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/results.csv")
}

/// Writes the fixture's reports into `dir` with `quicklite report` and returns the HTML.
fn report_html(dir: &Path) -> String {
    Command::cargo_bin("quicklite")
        .unwrap()
        .arg("report")
        .arg(fixture_csv())
        .arg("--output")
        .arg(dir)
        .assert()
        .success();
    std::fs::read_to_string(dir.join("report.html")).unwrap()
}

/// The PNG as RGB triples.
fn decode_rgb(path: &Path) -> (u32, u32, Vec<[u8; 3]>) {
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(path).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    assert_eq!(info.bit_depth, png::BitDepth::Eight);
    let pixels = buf[..info.buffer_size()]
        .chunks(channels)
        .map(|p| match channels {
            1 | 2 => [p[0], p[0], p[0]],
            _ => [p[0], p[1], p[2]],
        })
        .collect();
    (info.width, info.height, pixels)
}
