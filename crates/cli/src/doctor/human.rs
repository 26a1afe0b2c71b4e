//! The report for people: per section, its facts, one aligned line per finding, then what to do and why for every
//! finding that is not `ok` (the JSON document carries the reasons for the `ok` ones too).

use std::fmt::Write;

use super::Report;
use super::finding::{Finding, Severity};
use super::rules::bytes;

/// Lines are wrapped to this width.
const WIDTH: usize = 100;
/// Where a finding's value starts: two spaces, the severity, the check.
const VALUE_COLUMN: usize = 2 + 9 + 21;
/// Where a finding's fix / why / see lines start.
const DETAIL_INDENT: usize = 2 + 9;

/// The whole report as text.
pub fn render(report: &Report) -> String {
    let mut out = String::new();
    let s = &report.sqlite;
    let _ = writeln!(out, "SQLite {} (linked into this binary)", s.version);
    field(&mut out, "source id", &s.source_id);
    field(&mut out, "set-up", &s.setup);
    field(&mut out, "compile options", &s.compile_options.join(" "));
    findings(&mut out, &s.findings);
    if let Some(db) = &report.database {
        let _ = writeln!(out, "Database {}", db.path);
        let size = format!("{} ({} bytes)", bytes(db.size_bytes), db.size_bytes);
        field(&mut out, "size", &size);
        field(&mut out, "opened", &db.opened_as);
        findings(&mut out, &db.findings);
    }
    if let Some(replica) = &report.replica {
        let _ = writeln!(out, "Replica {}", replica.url);
        field(&mut out, "read through", &replica.vfs);
        field(
            &mut out,
            "position",
            &format!("transaction {}", replica.position),
        );
        field(&mut out, "tables", &replica.tables.join(" "));
        findings(&mut out, &replica.findings);
    }
    let sum = &report.summary;
    let _ = write!(
        out,
        "Summary: {} ok, {} info, {} {}, {} {}",
        sum.ok,
        sum.info,
        sum.warning,
        plural(sum.warning, "warning"),
        sum.error,
        plural(sum.error, "error"),
    );
    out
}

/// `  label            value`, the value wrapped under itself.
fn field(out: &mut String, label: &str, value: &str) {
    let first = format!("  {label:<16} ");
    let rest = " ".repeat(first.len());
    wrap(out, &first, &rest, value);
}

/// One line per finding, then the details of those that are not `ok`.
fn findings(out: &mut String, findings: &[Finding]) {
    out.push('\n');
    for f in findings {
        let mut value = f.value.clone();
        if f.per_connection {
            value.push_str("  [per connection]");
        }
        let first = format!("  {:<8} {:<20} ", label(f.severity), f.check);
        wrap(out, &first, &" ".repeat(VALUE_COLUMN), &value);
    }
    out.push('\n');
    for f in findings.iter().filter(|f| f.severity != Severity::Ok) {
        let _ = writeln!(out, "  {:<8} {}", label(f.severity), f.check);
        let indent = " ".repeat(DETAIL_INDENT);
        let hanging = " ".repeat(DETAIL_INDENT + 5);
        wrap(out, &format!("{indent}fix: "), &hanging, &f.recommendation);
        wrap(out, &format!("{indent}why: "), &hanging, &f.why);
        if !f.docs.is_empty() {
            wrap(out, &format!("{indent}see: "), &hanging, &f.docs.join(" "));
        }
        out.push('\n');
    }
}

fn label(severity: Severity) -> &'static str {
    match severity {
        Severity::Ok => "ok",
        Severity::Info => "info",
        Severity::Warning => "WARNING",
        Severity::Error => "ERROR",
    }
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        word.to_string()
    } else {
        format!("{word}s")
    }
}

/// Appends `text` word-wrapped to [`WIDTH`]: the first line after `first`, the others after `rest`. A word longer
/// than a line (a URL) gets a line of its own.
fn wrap(out: &mut String, first: &str, rest: &str, text: &str) {
    let mut line = first.to_string();
    let mut empty = true;
    for word in text.split_whitespace() {
        if !empty && line.chars().count() + 1 + word.chars().count() > WIDTH {
            out.push_str(line.trim_end());
            out.push('\n');
            line = rest.to_string();
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        line.push_str(word);
        empty = false;
    }
    out.push_str(line.trim_end());
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapping_keeps_lines_within_the_width_and_hangs_the_rest() {
        let mut out = String::new();
        let text = "word ".repeat(60);
        wrap(&mut out, "  fix: ", "       ", &text);
        let lines: Vec<_> = out.lines().collect();
        assert!(lines.len() > 2);
        assert!(lines.iter().all(|l| l.chars().count() <= WIDTH));
        assert!(lines[0].starts_with("  fix: word"));
        assert!(lines[1].starts_with("       word"));
    }
}
