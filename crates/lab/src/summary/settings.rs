//! The settings a table's rows share, in reading order, as the reports write them.

use quicklite_lab_core::Cell;

use crate::row::on_off;
use crate::{catalog, format};

/// The settings a table's rows share, in reading order.
pub(super) fn settings(
    cell: &Cell,
    memstatus: bool,
    mutex: &str,
    mmap_size: Option<u64>,
    build_profile: &str,
) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut push = |k: &str, v: String| out.push((k.to_owned(), v));
    match &cell.multi_db {
        Some(m) => {
            push("databases", m.num_databases.to_string());
            match m.total_readers {
                Some(total) => push(
                    "readers",
                    format!("{total} in all, random database per read"),
                ),
                None => push("readers per database", m.readers.to_string()),
            }
            push("write mode", m.write_mode.to_string());
            push("write delay", format::duration_ms(m.write_delay_ms));
        }
        None if cell.rate.is_some() => push(
            "requests in flight",
            format!("at most {}", cell.concurrency),
        ),
        None => push("concurrency", format!("{} tasks", cell.concurrency)),
    }
    if let Some(rate) = cell.rate {
        push("offered load", format::rate(rate));
    }
    push("tokio worker threads", cell.worker_threads.to_string());
    push("profile", cell.profile.clone());
    push(
        "synchronous",
        cell.synchronous
            .clone()
            .unwrap_or_else(|| "profile's".to_owned()),
    );
    push("memory statistics", on_off(memstatus).to_owned());
    push("mutex", mutex.to_owned());
    push("memory map", mmap_text(mmap_size));
    push("SQLite build", build_profile.to_owned());
    if matches!(
        cell.workload.as_str(),
        "point-read" | "mixed" | "write-read" | catalog::LONG_READ
    ) {
        push("rows", cell.rows.to_string());
    }
    if let Some(long) = &cell.long_reads {
        // A run may measure several: each is a table, its title naming them (`long-read · long reads one in 100, …`).
        push("long reads", format::long_reads(long));
        push(
            "writes",
            format!(
                "one insert due every {} from one task, timed from its due instant",
                format::duration_ms(
                    u64::try_from(quicklite_lab_core::LONG_READ_WRITE_PERIOD.as_millis())
                        .unwrap_or(u64::MAX)
                )
            ),
        );
    }
    if cell.workload == catalog::MIXED {
        // A run may measure several shares: each is a table, its title naming the share (`mixed · writes 1%`).
        push("writes", format::share_ppm(cell.write_ppm));
    }
    if cell.workload == "queue" {
        push("backlog", format!("{} jobs", cell.rows));
    }
    let think = match cell.think_us {
        0 => "none".to_owned(),
        us => format::latency_us(us as f64),
    };
    if cell.workload == catalog::THROUGHPUT {
        push(
            "rows per transaction",
            quicklite_lab_core::THROUGHPUT_ROWS_PER_TRANSACTION.to_string(),
        );
        push("think time in each transaction", think);
    } else if cell.workload == catalog::HELD_TX {
        push("rows", cell.rows.to_string());
        push(
            "transaction",
            "read a row, think, write it back, log the change, commit".to_owned(),
        );
        push("think time between read and write", think);
    }
    push(
        "measured",
        format!(
            "{} after {} warm-up",
            format::duration_ms(cell.duration_ms),
            format::duration_ms(cell.warmup_ms)
        ),
    );
    push("seed", cell.seed.to_string());
    out
}

/// An `mmap_size` override as the reports write it: `0`, `256 MiB`, or `profile's`.
pub fn mmap_text(mmap_size: Option<u64>) -> String {
    match mmap_size {
        None => "profile's".to_owned(),
        Some(0) => "0".to_owned(),
        Some(bytes) => format::bytes(bytes),
    }
}
