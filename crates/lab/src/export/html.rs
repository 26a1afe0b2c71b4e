//! The HTML report: one self-contained page with inline CSS and inline SVG charts. It loads nothing: no script,
//! no font, no stylesheet from anywhere, so it opens the same offline, from a mail attachment, or in CI.

use std::fmt::Write as _;

use quicklite_lab_core::{ApproachName, CellResult};

use super::Exporter;
use super::columns::{columns, settings_line};
use super::svg::{Bar, BarRole, bar_chart, escape};
use crate::environment::EnvSummary;
use crate::error::Result;
use crate::format;
use crate::summary::{Row, Summary, Table};

/// `report.html`.
#[derive(Debug, Default, Clone, Copy)]
pub struct HtmlExporter;

const STYLE: &str = "
body { font-family: system-ui, -apple-system, 'Segoe UI', 'DejaVu Sans', sans-serif; margin: 2rem auto; max-width: 1100px; color: #1f2933; padding: 0 1rem; }
h1 { font-size: 1.8rem; } h2 { margin-top: 2.5rem; border-bottom: 1px solid #d9e2ec; padding-bottom: .3rem; }
.settings { color: #52606d; font-size: .9rem; }
table { border-collapse: collapse; margin: 1rem 0; font-size: .85rem; }
th, td { white-space: nowrap; padding: .3rem .6rem; border-bottom: 1px solid #e4e7eb; text-align: left; vertical-align: top; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.baseline td { background: #f0f4f8; }
td.wrap { white-space: normal; min-width: 12rem; }
.chart { display: block; margin: 1rem 0; max-width: 100%; height: auto; }
.chart-title { font-size: 15px; font-weight: 600; fill: #1f2933; }
.label, .value { font-size: 13px; fill: #323f4b; }
.bar { fill: #2680c2; } .bar.baseline { fill: #9aa5b1; } .bar.ceiling { fill: #8a63d2; }
.range { stroke: #102a43; stroke-width: 1.5; } .sample { fill: #f0b429; stroke: #102a43; stroke-width: 1; }
.failure { color: #ab091e; }
.headline { font-size: 1.1rem; font-weight: 600; }
code { background: #f0f4f8; padding: 0 .2rem; font-size: .8rem; word-break: break-all; }
";

impl Exporter for HtmlExporter {
    fn serialize(&self, results: &[CellResult], baseline: ApproachName) -> Result<Vec<u8>> {
        let summary = Summary::new(results, baseline);
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = write!(
            out,
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>quicklite bench</title><style>{STYLE}</style></head><body>\n"
        );
        let failed = results.iter().filter(|r| r.failure.is_some()).count();
        let _ = writeln!(
            out,
            "<h1>quicklite bench</h1><p>{} cells, {failed} failed. Throughput is reads + writes per second after the warm-up; \
             ratios compare throughput with <b>{}</b> in the same table (or with the slowest row when it did not run). \
             Grey bars mark the baseline, violet ones the ceiling. The <b>ceiling</b> row runs the same statements with no async hand-off (one \
             plain connection per core, reads in a snapshot kept until a commit, writes grouped per commit); \
             <i>of ceiling</i> is each row's share of it.</p>",
            results.len(),
            escape(baseline.as_str())
        );
        let _ = writeln!(
            out,
            "<p>{}</p>",
            inline_markup(&crate::summary::repetitions_note(results))
        );
        if let Some(note) = crate::summary::open_loop_note(results) {
            let _ = writeln!(out, "<p>{}</p>", inline_markup(&note));
        }
        if let Some(note) = crate::summary::wal_reset_note(results) {
            let _ = writeln!(out, "<p class=\"failure\">{}</p>", inline_markup(&note));
        }
        for table in &summary.tables {
            section(&mut out, table, baseline);
        }
        seeds(&mut out, results);
        environment(&mut out, &EnvSummary::new(results));
        out.push_str("</body></html>\n");
        Ok(out.into_bytes())
    }
}

/// The colour of `row`'s bars: the ceiling's own, the baseline's, or an approach's.
fn bar_role(row: &Row) -> BarRole {
    if row.is_ceiling {
        BarRole::Ceiling
    } else if row.is_baseline {
        BarRole::Baseline
    } else {
        BarRole::Approach
    }
}

fn section(out: &mut String, table: &Table, baseline: ApproachName) {
    let _ = writeln!(out, "<h2>{}</h2>", escape(&table.title));
    let _ = writeln!(
        out,
        "<p class=\"settings\">Settings: {}</p>",
        escape(&settings_line(table))
    );
    if let Some(b) = table.baseline.as_ref().filter(|b| !b.requested) {
        let _ = writeln!(
            out,
            "<p class=\"settings\">{} did not run here; ratios are against the slowest, {}.</p>",
            escape(baseline.as_str()),
            escape(&b.label)
        );
    }
    if !table.rows.is_empty() {
        let throughput: Vec<Bar> = table
            .rows
            .iter()
            .map(|r| Bar {
                label: r.label.clone(),
                value: r.throughput,
                text: format!("{}/s", format::ops(r.throughput)),
                role: bar_role(r),
                samples: if r.samples.len() > 1 {
                    r.samples.iter().map(crate::summary::throughput).collect()
                } else {
                    Vec::new()
                },
            })
            .collect();
        if let Some(headline) = table.headline() {
            let _ = writeln!(out, "<p class=\"headline\">{}</p>", escape(&headline));
        }
        let throughput_title = if table.is_orm {
            "ORM suites per second (higher is better)"
        } else if table.has_operations {
            "Throughput (queue cycles/s, higher is better)"
        } else {
            "Throughput (operations/s, higher is better)"
        };
        out.push_str(&bar_chart(throughput_title, &throughput));
        let (kind, pick): (&str, fn(&CellResult) -> f64) = if table.is_orm {
            ("ORM suite", |r| {
                crate::summary::orm_suite_us(r, false).unwrap_or(0.0)
            })
        } else if table.has_operations {
            ("cycle", |r| {
                r.operation("cycle").map_or(0.0, |o| o.stats.p99_us)
            })
        } else if table.has_reads {
            ("read", |r| r.reads.p99_us)
        } else {
            ("write", |r| r.writes.p99_us)
        };
        let latency: Vec<Bar> = table
            .rows
            .iter()
            .map(|r| Bar {
                label: r.label.clone(),
                value: pick(&r.result),
                text: format::latency_us(pick(&r.result)),
                role: bar_role(r),
                samples: if r.samples.len() > 1 {
                    r.samples.iter().map(pick).collect()
                } else {
                    Vec::new()
                },
            })
            .collect();
        let title = if table.is_orm {
            "ORM suite time, the sum of every operation's mean (lower is better)".to_owned()
        } else {
            format!("p99 {kind} latency (lower is better)")
        };
        out.push_str(&bar_chart(&title, &latency));
        if table.is_long_read {
            // What the long reads cost everything else: the slowest write, and the runtime's worst stall.
            let writes = tail_bars(table, |r| r.writes.max_us);
            out.push_str(&bar_chart(
                "Slowest write, from its due instant (lower is better)",
                &writes,
            ));
            let lateness = tail_bars(table, |r| r.lateness.map_or(0.0, |l| l.max_us));
            out.push_str(&bar_chart(
                "Runtime lateness, the ticker's latest tick (lower is better)",
                &lateness,
            ));
        }
        if table.has_completion {
            let completion: Vec<Bar> = table
                .rows
                .iter()
                .map(|r| {
                    let ratio = r.result.write_completion.as_ref().map_or(0.0, |c| c.ratio);
                    Bar {
                        label: r.label.clone(),
                        value: ratio,
                        text: format::percent(ratio),
                        role: bar_role(r),
                        samples: if r.samples.len() > 1 {
                            r.samples
                                .iter()
                                .map(|s| s.write_completion.as_ref().map_or(0.0, |c| c.ratio))
                                .collect()
                        } else {
                            Vec::new()
                        },
                    }
                })
                .collect();
            out.push_str(&bar_chart(
                "Write completion (paced writes done, higher is better)",
                &completion,
            ));
        }
        let cols = columns(table);
        out.push_str("<table><thead><tr>");
        for (h, &numeric) in cols.headers.iter().zip(&cols.numeric) {
            let _ = write!(out, "<th{}>{}</th>", num_class(numeric), escape(h));
        }
        out.push_str("</tr></thead><tbody>\n");
        for (row, cells) in table.rows.iter().zip(&cols.cells) {
            let class = if row.is_baseline {
                " class=\"baseline\""
            } else {
                ""
            };
            let _ = write!(out, "<tr{class}>");
            for (c, &numeric) in cells.iter().zip(&cols.numeric) {
                let _ = write!(out, "<td{}>{}</td>", num_class(numeric), escape(c));
            }
            out.push_str("</tr>\n");
        }
        out.push_str("</tbody></table>\n");
    } else {
        out.push_str("<p>No cell succeeded.</p>\n");
    }
    for failure in &table.failures {
        let _ = writeln!(
            out,
            "<p class=\"failure\"><b>{} failed:</b> {}</p>",
            escape(&failure.label),
            escape(&failure.message)
        );
    }
}

/// A bar per row of `table` for the latency `pick` takes from a result, with its repetitions.
fn tail_bars(table: &Table, pick: fn(&CellResult) -> f64) -> Vec<Bar> {
    table
        .rows
        .iter()
        .map(|r| Bar {
            label: r.label.clone(),
            value: pick(&r.result),
            text: format::latency_us(pick(&r.result)),
            role: bar_role(r),
            samples: if r.samples.len() > 1 {
                r.samples.iter().map(pick).collect()
            } else {
                Vec::new()
            },
        })
        .collect()
}

fn num_class(numeric: bool) -> &'static str {
    if numeric { " class=\"num\"" } else { "" }
}

/// The seeds section: each seed's claim and published figure beside this run's.
fn seeds(out: &mut String, results: &[CellResult]) {
    let env = EnvSummary::new(results);
    let machine = if env.cpus.is_empty() {
        "this machine".to_owned()
    } else {
        env.cpus.join("; ")
    };
    let _ = writeln!(
        out,
        "<h2 id=\"seeds\">Seeds</h2><p>Each seed's claim, its published figure, and what this run measured on {} \
         (computed from the cells above; a seed whose cells did not run says so).</p>",
        escape(&machine)
    );
    let _ = writeln!(out, "<p>{}</p>", inline_markup(crate::repetitions::RULE));
    out.push_str("<table><thead><tr><th>seed</th><th>claim</th><th>published (machine)</th><th>measured here</th><th>reproduces here?</th></tr></thead><tbody>\n");
    for f in crate::seeds::findings(results) {
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td class=\"wrap\">{}</td><td class=\"wrap\">{} ({})</td><td class=\"wrap\">{}</td><td class=\"wrap\">{}</td></tr>",
            escape(f.seed),
            escape(f.claim),
            escape(f.published),
            escape(f.machine),
            escape(f.measured.as_deref().unwrap_or("not measured in this run")),
            escape(&f.verdict)
        );
    }
    out.push_str("</tbody></table>\n");
}

/// Escapes `text` and turns its Markdown emphasis (`**bold**`) and code spans (`` `code` ``) into HTML.
fn inline_markup(text: &str) -> String {
    let mut out = String::new();
    let (mut bold, mut code) = (false, false);
    let escaped = escape(text);
    let mut rest = escaped.as_str();
    while let Some(i) = rest.find(['*', '`']) {
        out.push_str(&rest[..i]);
        if rest[i..].starts_with("**") {
            out.push_str(if bold { "</b>" } else { "<b>" });
            bold = !bold;
            rest = &rest[i + 2..];
        } else if rest[i..].starts_with('`') {
            out.push_str(if code { "</code>" } else { "<code>" });
            code = !code;
            rest = &rest[i + 1..];
        } else {
            out.push('*');
            rest = &rest[i + 1..];
        }
    }
    out.push_str(rest);
    out
}

fn environment(out: &mut String, env: &EnvSummary) {
    out.push_str("<h2>Environment</h2>\n<table>");
    let dates = match &env.dates {
        Some((a, b)) if a == b => a.clone(),
        Some((a, b)) => format!("{a} to {b}"),
        None => "unknown".to_owned(),
    };
    for (k, v) in [
        ("CPU", env.cpus.join("; ")),
        ("Kernel", env.kernels.join("; ")),
        ("Date", dates),
        (
            "Cross-core round trip",
            env.round_trip_text()
                .unwrap_or_else(|| "not measured".to_owned()),
        ),
    ] {
        let _ = write!(out, "<tr><th>{k}</th><td>{}</td></tr>", escape(&v));
    }
    out.push_str("</table>\n");
    if !env.runners.is_empty() {
        out.push_str("<h3>Runners</h3><table><thead><tr><th>runner</th><th>approaches</th><th>SQLite</th><th>crates</th><th>open-file limit</th><th>allocator</th><th>compile options</th></tr></thead><tbody>\n");
        for r in &env.runners {
            let crates: Vec<String> = r
                .crate_versions
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect();
            let _ = writeln!(
                out,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"wrap\">{}</td><td class=\"num\">{}</td><td class=\"wrap\">{}</td><td class=\"wrap\"><code>{}</code></td></tr>",
                escape(&r.runner),
                escape(&r.approaches.join(", ")),
                escape(
                    &r.sqlite_versions
                        .iter()
                        .map(|v| crate::wal_reset_bug::version_text(v))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                escape(&crates.join(", ")),
                escape(&r.open_files_text()),
                escape(&r.allocators.join("; ")),
                escape(&r.compile_options.join(" ")),
            );
        }
        out.push_str("</tbody></table>\n");
    }
    if !env.memstatus.is_empty() {
        out.push_str("<h3>Memory statistics, as the runners report them</h3><table><tbody>\n");
        for (approach, report) in &env.memstatus {
            let _ = writeln!(
                out,
                "<tr><td>{}</td><td class=\"wrap\">{}</td></tr>",
                escape(approach),
                escape(report)
            );
        }
        out.push_str("</tbody></table>\n");
    }
    for profile in &env.profiles {
        let _ = write!(
            out,
            "<h3>PRAGMAs, profile {}</h3><table><thead><tr><th>PRAGMA</th>",
            escape(&profile.profile)
        );
        for (approaches, _) in &profile.groups {
            let _ = write!(out, "<th>{}</th>", escape(&approaches.join(", ")));
        }
        out.push_str("</tr></thead><tbody>\n");
        let mut names: Vec<&String> = profile.groups.iter().flat_map(|(_, p)| p.keys()).collect();
        names.sort_unstable();
        names.dedup();
        for name in names {
            let _ = write!(out, "<tr><td>{}</td>", escape(name));
            for (_, pragmas) in &profile.groups {
                let value = pragmas.get(name).map(String::as_str).unwrap_or("");
                let _ = write!(out, "<td>{}</td>", escape(value));
            }
            out.push_str("</tr>\n");
        }
        out.push_str("</tbody></table>\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;

    #[test]
    fn markdown_emphasis_and_code_become_html() {
        assert_eq!(
            inline_markup("a **b** `c<d>` 2 * 3"),
            "a <b>b</b> <code>c&lt;d&gt;</code> 2 * 3"
        );
    }

    #[test]
    fn html_snapshot() {
        let bytes = HtmlExporter
            .serialize(&fixtures::results(), ApproachName::TokioRusqlite)
            .unwrap();
        insta::assert_snapshot!(String::from_utf8(bytes).unwrap());
    }
}
