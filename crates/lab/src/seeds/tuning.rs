//! Seed 003, tuning: SQLite's default PRAGMAs against the server ones, the default build against the tuned
//! one, and the ORM suite against PostgreSQL.

use quicklite_lab_core::{ApproachName, Cell, CellResult};

use super::Finding;
use super::pairing::comparisons;
use super::verdict::{effect, pair_text, verdict};
use crate::format;
use crate::repetitions::Spread;

/// Seed 003: PRAGMA tuning (and compile tuning) on the same work.
pub(super) fn tuning(results: &[&CellResult]) -> Finding {
    let seed_ratio = 13.5945 / 6.7886;
    let mut finding = Finding {
        seed: "003",
        claim: "SQLite's default PRAGMAs (rollback journal, synchronous=FULL) are tuned for 2004 desktops: a web \
                app's operations run about twice as fast with WAL and server PRAGMAs; compile tuning adds ~3%.",
        published: "13.59 s → 6.79 s (2.0×) for the ORM suite with tuned PRAGMAs; 6.79 s → 6.55 s (3.7%) with \
                    compile tuning; local PostgreSQL 11.46 s",
        machine: "Apple M1 Max, Ruby sqlite3 1.6.6, SQLite 3.43.1, ActiveRecord",
        measured: None,
        verdict: "not measured in this run (needs orm (or other) cells with --profiles server,sqlite-default, \
                  or --build-profiles tuned,default, e.g. --quick)"
            .to_owned(),
    };
    let mut profiles = comparisons(
        results,
        |c| c.profile == "server",
        |c| c.profile = "sqlite-default".to_owned(),
    );
    // The seed's figure is for its ORM suite: that workload first, when it ran.
    profiles.sort_by_key(|c| c.first().0.cell.workload != "orm");
    let mut builds = comparisons(
        results,
        |c| c.build_profile == "tuned",
        |c| c.build_profile = "default".to_owned(),
    );
    builds.truncate(3);
    let mut measured = Vec::new();
    let mut verdicts = Vec::new();
    // One comparison per workload: the suite is a mix of reads and writes.
    let mut seen: Vec<&str> = Vec::new();
    for c in &profiles {
        let (server, _) = c.first();
        if seen.contains(&server.cell.workload.as_str()) {
            continue;
        }
        seen.push(&server.cell.workload);
        measured.push(pair_text(
            &format!(
                "{} {}, sqlite-default → server PRAGMAs",
                server.cell.workload, server.cell.approach
            ),
            c,
        ));
        verdicts.push(format!(
            "PRAGMAs on {}: {}",
            server.cell.workload,
            verdict(&c.paired(), seed_ratio)
        ));
    }
    for c in &builds {
        let (tuned, _) = c.first();
        let memstatus = if tuned.cell.memstatus { "on" } else { "off" };
        measured.push(pair_text(
            &format!(
                "{} {} (memory statistics {memstatus} at run time), build default → tuned",
                tuned.cell.workload, tuned.cell.approach
            ),
            c,
        ));
        verdicts.push(format!(
            "compile tuning, {} {memstatus}: {}",
            tuned.cell.approach,
            verdict(&c.paired(), 6.7886 / 6.5462)
        ));
    }
    // The seed's local PostgreSQL: 11.46 s, against 6.55 s for fully tuned SQLite; medians over the repetitions.
    let suites = |keep: &dyn Fn(&Cell) -> bool| {
        let values: Vec<f64> = results
            .iter()
            .filter(|r| r.cell.workload == "orm" && keep(&r.cell))
            .filter_map(|r| crate::summary::orm_suite_us(r, false))
            .collect();
        Spread::of(&values).map(|s| s.median)
    };
    let postgres = suites(&|c| c.approach == ApproachName::Postgres);
    let sqlite = suites(&|c| {
        c.approach == ApproachName::DirectBlocking
            && c.profile == "server"
            && c.build_profile == "tuned"
    });
    let server_version = results
        .iter()
        .find(|r| r.cell.approach == ApproachName::Postgres && r.cell.workload == "orm")
        .map(|r| r.env.sqlite_version.clone())
        .unwrap_or_default();
    if let (Some(pg), Some(lite)) = (postgres, sqlite) {
        measured.push(format!(
            "orm suite: PostgreSQL {} ({server_version}), SQLite direct-blocking with server PRAGMAs {}",
            format::latency_us(pg),
            format::latency_us(lite)
        ));
        verdicts.push(format!(
            "PostgreSQL on loopback is {} than tuned SQLite here (the seed: 1.75× slower)",
            effect(lite / pg)
        ));
    }
    if !measured.is_empty() {
        finding.measured = Some(measured.join("; "));
        finding.verdict = verdicts.join("; ");
    }
    finding
}
