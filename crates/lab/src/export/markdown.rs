//! The Markdown summary: per table its settings, rows ranked with "N× faster than", failures, environment.

use std::fmt::Write as _;

use quicklite_lab_core::{ApproachName, CellResult};

use super::Exporter;
use super::columns::{columns, settings_line};
use crate::environment::EnvSummary;
use crate::error::Result;
use crate::repetitions::RULE;
use crate::summary::{Summary, repetitions_note};

/// `summary.md`.
#[derive(Debug, Default, Clone, Copy)]
pub struct MarkdownExporter;

impl Exporter for MarkdownExporter {
    fn serialize(&self, results: &[CellResult], baseline: ApproachName) -> Result<Vec<u8>> {
        let summary = Summary::new(results, baseline);
        let mut out = String::new();
        // Writing to a String cannot fail; the results are ignored through `let _`.
        let _ = writeln!(out, "# quicklite bench\n");
        let _ = writeln!(
            out,
            "{} cells, {} failed. Throughput is reads + writes per second after the warm-up; ratios compare \
             throughput with `{baseline}` in the same table (or with the slowest row when `{baseline}` did not run). \
             The `ceiling` row runs the same statements with no async hand-off (one plain connection per core, reads \
             in a snapshot kept until a commit, writes grouped per commit); `of ceiling` is each row's share of it.\n",
            results.len(),
            results.iter().filter(|r| r.failure.is_some()).count(),
        );
        let _ = writeln!(out, "{}\n", repetitions_note(results));
        if let Some(note) = crate::summary::open_loop_note(results) {
            let _ = writeln!(out, "{note}\n");
        }
        if let Some(note) = crate::summary::wal_reset_note(results) {
            let _ = writeln!(out, "{note}\n");
        }
        for table in &summary.tables {
            let _ = writeln!(out, "## {}\n", table.title);
            let _ = writeln!(out, "Settings: {}\n", settings_line(table));
            if let Some(b) = table.baseline.as_ref().filter(|b| !b.requested) {
                let _ = writeln!(
                    out,
                    "`{baseline}` did not run here; ratios are against the slowest, `{}`.\n",
                    b.label
                );
            }
            if table.rows.is_empty() {
                let _ = writeln!(out, "No cell succeeded.\n");
            } else {
                let cols = columns(table);
                let _ = writeln!(out, "| {} |", cols.headers.join(" | "));
                let align: Vec<&str> = cols
                    .numeric
                    .iter()
                    .map(|&n| if n { "---:" } else { "---" })
                    .collect();
                let _ = writeln!(out, "|{}|", align.join("|"));
                for row in &cols.cells {
                    let cells: Vec<String> = row.iter().map(|c| escape(c)).collect();
                    let _ = writeln!(out, "| {} |", cells.join(" | "));
                }
                out.push('\n');
                if let Some(headline) = table.headline() {
                    let _ = writeln!(out, "**{}**\n", escape(&headline));
                }
                if table.is_orm {
                    orm_operations(&mut out, table);
                } else if table.is_long_read {
                    long_reads(&mut out, table);
                } else if !table.has_operations {
                    transactions(&mut out, table);
                }
            }
            for failure in &table.failures {
                let _ = writeln!(
                    out,
                    "- **{} failed:** {}",
                    escape(&failure.label),
                    escape(&failure.message)
                );
            }
            if !table.failures.is_empty() {
                out.push('\n');
            }
        }
        seeds(&mut out, results);
        environment(&mut out, &EnvSummary::new(results));
        Ok(out.into_bytes())
    }
}

/// The seeds section: each seed's claim and published figure beside this run's.
fn seeds(out: &mut String, results: &[CellResult]) {
    let env = EnvSummary::new(results);
    let _ = writeln!(out, "## Seeds\n");
    let _ = writeln!(
        out,
        "Each seed's claim, its published figure, and what this run measured on {} (computed from the cells \
         above; a seed whose cells did not run says so).\n",
        or_unknown(&env.cpus.join("; "))
    );
    let _ = writeln!(out, "{RULE}\n");
    let _ = writeln!(
        out,
        "| seed | claim | published (machine) | measured here | reproduces here? |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|");
    for f in crate::seeds::findings(results) {
        let _ = writeln!(
            out,
            "| {} | {} | {} ({}) | {} | {} |",
            f.seed,
            escape(f.claim),
            escape(f.published),
            escape(f.machine),
            escape(f.measured.as_deref().unwrap_or("not measured in this run")),
            escape(&f.verdict)
        );
    }
    out.push('\n');
}

/// A custom workload per transaction: each one's throughput and p99 latency (rows) for each approach (columns).
/// Nothing for a workload without named transactions.
fn transactions(out: &mut String, table: &crate::summary::Table) {
    if table.rows.iter().all(|r| r.result.operations.is_empty()) {
        return;
    }
    named_operations(
        out,
        table,
        "Per transaction, operations/s and p99 latency",
        "transaction",
        |o| {
            format!(
                "{}/s · {}",
                crate::format::ops(o.stats.ops_per_sec),
                crate::format::latency_us(o.stats.p99_us)
            )
        },
    );
}

/// `long-read`'s long reads: how many completed in the window, and their median and longest time, for each approach.
fn long_reads(out: &mut String, table: &crate::summary::Table) {
    named_operations(
        out,
        table,
        "Long reads completed in the window, p50 and max",
        "operation",
        |o| {
            format!(
                "{} · {} · {}",
                o.stats.ops,
                crate::format::latency_us(o.stats.p50_us),
                crate::format::latency_us(o.stats.max_us)
            )
        },
    );
}

/// The ORM suite per operation: mean time of each operation (rows) for each approach (columns).
fn orm_operations(out: &mut String, table: &crate::summary::Table) {
    named_operations(out, table, "Mean time per operation", "operation", |o| {
        crate::format::latency_us(o.stats.avg_us)
    });
}

/// A table of the first row's named operations (rows) for each approach (columns), each cell given by `figure`.
fn named_operations(
    out: &mut String,
    table: &crate::summary::Table,
    title: &str,
    what: &str,
    figure: impl Fn(&quicklite_lab_core::NamedOp) -> String,
) {
    let _ = writeln!(out, "{title}:\n");
    let labels: Vec<String> = table.rows.iter().map(|r| escape(&r.label)).collect();
    let _ = writeln!(out, "| {what} | {} |", labels.join(" | "));
    let _ = writeln!(out, "|---|{}|", vec!["---:"; labels.len()].join("|"));
    let Some(first) = table.rows.first() else {
        return;
    };
    for op in &first.result.operations {
        let cells: Vec<String> = table
            .rows
            .iter()
            .map(|r| {
                r.result
                    .operation(&op.name)
                    .map(&figure)
                    .unwrap_or_default()
            })
            .collect();
        let _ = writeln!(out, "| {} | {} |", escape(&op.name), cells.join(" | "));
    }
    out.push('\n');
}

fn environment(out: &mut String, env: &EnvSummary) {
    let _ = writeln!(out, "## Environment\n");
    let _ = writeln!(out, "- CPU: {}", or_unknown(&env.cpus.join("; ")));
    let _ = writeln!(out, "- Kernel: {}", or_unknown(&env.kernels.join("; ")));
    match &env.dates {
        Some((first, last)) if first == last => {
            let _ = writeln!(out, "- Date: {first}");
        }
        Some((first, last)) => {
            let _ = writeln!(out, "- Date: {first} to {last}");
        }
        None => {
            let _ = writeln!(out, "- Date: unknown");
        }
    }
    if let Some(text) = env.round_trip_text() {
        let _ = writeln!(out, "- Cross-core round trip: {}", escape(&text));
    }
    out.push('\n');
    if !env.runners.is_empty() {
        let _ = writeln!(out, "### Runners\n");
        let _ = writeln!(
            out,
            "| runner | approaches | SQLite | crates | open-file limit | allocator |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|---|");
        for r in &env.runners {
            let crates: Vec<String> = r
                .crate_versions
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect();
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} |",
                escape(&r.runner),
                r.approaches.join(", "),
                sqlite_versions(&r.sqlite_versions),
                escape(&crates.join(", ")),
                r.open_files_text(),
                escape(&r.allocators.join("; ")),
            );
        }
        out.push('\n');
        for r in &env.runners {
            let _ = writeln!(
                out,
                "Compile options of `{}`: `{}`\n",
                r.runner,
                r.compile_options.join(" ")
            );
        }
    }
    if !env.memstatus.is_empty() {
        let _ = writeln!(out, "### Memory statistics, as the runners report them\n");
        for (approach, report) in &env.memstatus {
            let _ = writeln!(out, "- `{approach}`: {}", escape(report));
        }
        out.push('\n');
    }
    for profile in &env.profiles {
        let _ = writeln!(out, "### PRAGMAs, profile `{}`\n", profile.profile);
        let mut names: Vec<&String> = profile.groups.iter().flat_map(|(_, p)| p.keys()).collect();
        names.sort_unstable();
        names.dedup();
        let heads: Vec<String> = profile.groups.iter().map(|(a, _)| a.join(", ")).collect();
        let _ = writeln!(out, "| PRAGMA | {} |", heads.join(" | "));
        let _ = writeln!(out, "|---|{}|", vec!["---"; heads.len()].join("|"));
        for name in names {
            let values: Vec<String> = profile
                .groups
                .iter()
                .map(|(_, p)| escape(p.get(name).map(String::as_str).unwrap_or("")))
                .collect();
            let _ = writeln!(out, "| {name} | {} |", values.join(" | "));
        }
        out.push('\n');
    }
}

/// The SQLite versions of a runner, those with the WAL-reset bug marked.
fn sqlite_versions(versions: &[String]) -> String {
    let texts: Vec<String> = versions
        .iter()
        .map(|v| crate::wal_reset_bug::version_text(v))
        .collect();
    texts.join(", ")
}

fn or_unknown(text: &str) -> &str {
    if text.is_empty() { "unknown" } else { text }
}

/// Keeps a cell on one line and its pipes from splitting it.
fn escape(text: &str) -> String {
    text.replace('|', "\\|").replace(['\n', '\r'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;

    #[test]
    fn repeated_cells_show_their_range_and_paired_ratios() {
        let text = String::from_utf8(
            MarkdownExporter
                .serialize(&fixtures::repeated(3), ApproachName::TokioRusqlite)
                .unwrap(),
        )
        .unwrap();
        assert!(text.contains("Each cell ran 3 times"), "{text}");
        assert!(text.contains("| approach | repetitions: range |"), "{text}");
        assert!(text.contains("| quicklite | 3: "), "{text}");
        assert!(text.contains("over 3 paired repetitions)**"), "{text}");
        assert!(text.contains("| 004 |"), "{text}");
        assert!(text.contains("10 databases: reproduces |"), "{text}");
    }

    #[test]
    fn markdown_snapshot() {
        let bytes = MarkdownExporter
            .serialize(&fixtures::results(), ApproachName::TokioRusqlite)
            .unwrap();
        insta::assert_snapshot!(String::from_utf8(bytes).unwrap());
    }
}
