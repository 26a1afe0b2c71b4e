//! What is stored in the database file itself, or next to it: journal mode, pages, the WAL, integrity.

use super::{DOC_CORRUPT, DOC_JOURNAL_SIZE_LIMIT, DOC_QUICK_CHECK, bytes, server};
use crate::doctor::finding::{Finding, Severity};
use crate::doctor::observed::{QUICK_CHECK_MAX, Reading};

const DOC_WAL: &str = "https://www.sqlite.org/wal.html";
const DOC_LITESTREAM: &str = "https://litestream.io/tips/";
const DOC_LOCKING: &str = "https://www.sqlite.org/lockingv3.html";
const DOC_JOURNAL_MODE: &str = "https://www.sqlite.org/pragma.html#pragma_journal_mode";
const DOC_PAGE_SIZE: &str = "https://www.sqlite.org/pragma.html#pragma_page_size";
const DOC_AUTO_VACUUM: &str = "https://www.sqlite.org/pragma.html#pragma_auto_vacuum";
const DOC_FREELIST: &str = "https://www.sqlite.org/pragma.html#pragma_freelist_count";
const DOC_VACUUM: &str = "https://www.sqlite.org/lang_vacuum.html";
const DOC_BIG_WAL: &str = "https://www.sqlite.org/wal.html#bigwal";
const DOC_CHECKPOINT: &str = "https://www.sqlite.org/wal.html#ckpt";
const DOC_USER_VERSION: &str = "https://www.sqlite.org/pragma.html#pragma_user_version";
const DOC_RECOVER: &str = "https://www.sqlite.org/recovery.html";
const DOC_READONLY_WAL: &str = "https://www.sqlite.org/wal.html#readonly";
const DOC_WAL_FORMAT: &str = "https://www.sqlite.org/walformat.html";

/// Above this share of free pages, giving the space back is worth suggesting.
pub(super) const FREE_PAGES_NOTE: f64 = 0.25;
/// A `-wal` larger than this is a sign checkpoints do not keep up; quicklite's Server profile caps it here after
/// each checkpoint (`journal_size_limit`).
pub(super) const WAL_WARNING_BYTES: u64 = 64 * 1024 * 1024;

/// The note for files SQLite had to create while doctor read the database (only ever `<db>-shm`).
pub fn created_files(names: &[String]) -> Finding {
    Finding::new("created files", Severity::Info, names.join(", "))
        .fix(
            "nothing to do: it holds no data, only the index of the -wal's frames, and any program opening the \
             database would have created it the same way; SQLite leaves it in place, and so does doctor",
        )
        .why(
            "SQLite reads the frames of a -wal through its wal-index, the -shm file. A read-only connection can \
             use an existing -shm without writing to it (doctor does), but when it is missing SQLite must create \
             one: a read-only WAL database opens only if its -shm and -wal exist, can be created, or the database \
             is immutable, and an immutable connection would ignore the -wal's content.",
            &[DOC_READONLY_WAL, DOC_WAL_FORMAT],
        )
}

/// `none`, `full`, `incremental`.
pub fn auto_vacuum_name(mode: i64) -> &'static str {
    match mode {
        0 => "none",
        1 => "full",
        2 => "incremental",
        _ => "unknown",
    }
}

pub(super) fn journal_mode(mode: &str) -> Finding {
    if mode.eq_ignore_ascii_case("wal") {
        Finding::new("journal_mode", Severity::Ok, "wal")
            .fix("keep WAL; it is stored in the database file, so every connection uses it")
            .why(
                "In WAL mode readers do not block the writer and the writer does not block readers: reading and \
                 writing proceed concurrently, and a commit appends to the -wal instead of rewriting pages in place.",
                &[DOC_WAL, DOC_JOURNAL_MODE],
            )
    } else {
        Finding::new(
            "journal_mode",
            Severity::Warning,
            format!("{mode} (rollback journal)"),
        )
        .fix(
            "switch to WAL once, on a read-write connection while nothing else uses the database: \
             PRAGMA journal_mode=WAL; it persists in the file (quicklite's Server profile sets it at open)",
        )
        .why(
            "In rollback-journal mode readers block the writer and the writer blocks readers: to commit, a writer \
             needs an EXCLUSIVE lock, which waits until every reader has released its SHARED lock and keeps new \
             readers out while pages are written. In WAL mode readers and the writer proceed concurrently.",
            &[DOC_WAL, DOC_LOCKING, DOC_JOURNAL_MODE],
        )
    }
}

pub(super) fn page_size(size: i64) -> Finding {
    Finding::new("page_size", Severity::Ok, format!("{size} bytes"))
        .fix("nothing to do")
        .why(
            "page_size is stored in the file; 4096 bytes has been the default since SQLite 3.12.0. It changes only \
             on an empty database, or through VACUUM when the database is not in WAL mode.",
            &[DOC_PAGE_SIZE],
        )
}

pub(super) fn auto_vacuum(mode: i64) -> Finding {
    Finding::new(
        "auto_vacuum",
        Severity::Ok,
        format!("{} ({mode})", auto_vacuum_name(mode)),
    )
    .fix("nothing to do (see free pages)")
    .why(
        "auto_vacuum is stored in the file. With none (the default) pages freed by deletes stay in the file for \
         reuse; full gives them back to the file system at every commit; incremental gives them back when PRAGMA \
         incremental_vacuum runs. Changing it from none on an existing database takes a VACUUM.",
        &[DOC_AUTO_VACUUM],
    )
}

pub(super) fn free_pages(free: i64, pages: i64, auto_vacuum: i64) -> Finding {
    let fraction = if pages > 0 {
        free as f64 / pages as f64
    } else {
        0.0
    };
    let value = format!("{free} of {pages} pages free ({:.1}%)", fraction * 100.0);
    let why = "Deleted content leaves free pages in the file. SQLite reuses them for new content but does not \
               shrink the file unless auto_vacuum or VACUUM does: the file stays larger than its data, and its \
               pages are scattered.";
    let docs = [DOC_FREELIST, DOC_VACUUM, DOC_AUTO_VACUUM];
    if fraction <= FREE_PAGES_NOTE {
        return Finding::new("free pages", Severity::Ok, value)
            .fix("nothing to do: SQLite reuses free pages for new content")
            .why(why, &docs);
    }
    let fix = if auto_vacuum == 2 {
        "run PRAGMA incremental_vacuum to give them back to the file system".to_string()
    } else {
        "VACUUM rebuilds the file without them (it takes an exclusive lock and up to twice the database's size in \
         free disk space); or, to give space back gradually from then on, PRAGMA auto_vacuum=INCREMENTAL followed \
         by one VACUUM, then PRAGMA incremental_vacuum from time to time"
            .to_string()
    };
    Finding::new("free pages", Severity::Info, value)
        .fix(fix)
        .why(why, &docs)
}

pub(super) fn wal_file(size: Option<u64>, frames: Option<u64>, journal_size_limit: i64) -> Finding {
    let why = "A WAL grows until a checkpoint has copied all of it back into the database and a writer starts it \
               over; after that the file keeps its size unless journal_size_limit truncates it. A checkpoint cannot \
               finish while readers still use the WAL (checkpoint starvation), automatic checkpoints can be turned \
               off, and one huge transaction fills it at once. Reads slow down as the WAL grows, since each reader \
               checks it for every page.";
    let docs = [DOC_BIG_WAL, DOC_CHECKPOINT, DOC_JOURNAL_SIZE_LIMIT];
    let Some(size) = size else {
        return Finding::new(
            "wal file",
            Severity::Ok,
            "absent (checkpointed and removed when the last connection closed)",
        )
        .fix("nothing to do")
        .why(why, &docs);
    };
    // What the WAL holds now, when SQLite can tell: the file keeps its size after a checkpoint that restarts it.
    let holds = frames.map_or_else(String::new, |frames| format!(", {frames} frames in use"));
    let over_limit = journal_size_limit > 0 && size > journal_size_limit as u64;
    if size > WAL_WARNING_BYTES || over_limit {
        Finding::new(
            "wal file",
            Severity::Warning,
            format!("{} ({size} bytes{holds})", bytes(size)),
        )
        .fix(format!(
            "find what keeps checkpoints from finishing: read transactions left open, wal_autocheckpoint=0, or \
             very large write transactions; when readers are idle, PRAGMA wal_checkpoint(TRUNCATE) copies the WAL \
             back and empties it; set journal_size_limit when opening connections (quicklite's Server profile: \
             {})",
            server("journal_size_limit")
        ))
        .why(why, &docs)
    } else {
        Finding::new("wal file", Severity::Ok, format!("{}{holds}", bytes(size)))
            .fix("nothing to do: checkpoints keep it in check")
            .why(why, &docs)
    }
}

pub(super) fn litestream() -> Finding {
    Finding::new(
        "replication",
        Severity::Info,
        "Litestream replicates this database (its tables _litestream_seq and _litestream_lock are in it)",
    )
    .fix(
        "open it with Checkpointing::External, so that Litestream alone checkpoints; keep Litestream running \
         whenever the database is written, since nothing else then bounds the WAL (quicklite warns past \
         Builder::wal_size_warning). quicklite's managed checkpoints find these tables and run only PASSIVE \
         checkpoints, which never wait for Litestream's read",
    )
    .why(
        "Litestream keeps a read transaction open on the database and checkpoints it itself: a checkpoint of \
         another program that waits for readers (RESTART, TRUNCATE) waits for that read, holding back every writer \
         meanwhile, and one that restarts the WAL under Litestream makes it take a new snapshot.",
        &[DOC_LITESTREAM, DOC_CHECKPOINT],
    )
}

pub(super) fn user_version(version: i64) -> Finding {
    Finding::new("user_version", Severity::Ok, version.to_string())
        .fix("nothing to do")
        .why(
            "user_version is an integer in the database header that SQLite itself does not use; applications keep \
             their schema version there for migrations.",
            &[DOC_USER_VERSION],
        )
}

pub(super) fn quick_check(reading: &Reading<Vec<String>>) -> Finding {
    let docs = [DOC_QUICK_CHECK, DOC_RECOVER, DOC_CORRUPT];
    let problems = match reading {
        Ok(rows) if rows.len() == 1 && rows[0] == "ok" => {
            return Finding::new("quick_check", Severity::Ok, "ok")
                .fix(
                    "nothing to do; PRAGMA integrity_check also verifies that indexes match their tables and \
                     UNIQUE constraints, in O(N log N) time",
                )
                .why(
                    "quick_check verifies the structure of every table and index b-tree, like integrity_check \
                     without the index-content and UNIQUE checks, in O(N) time.",
                    &docs,
                );
        }
        Ok(rows) => {
            let shown = rows.iter().take(3).cloned().collect::<Vec<_>>().join("; ");
            match rows.len() {
                n if n >= QUICK_CHECK_MAX => {
                    format!(
                        "{n} or more problems (quick_check stops at {QUICK_CHECK_MAX}), first: {shown} …"
                    )
                }
                n if n > 3 => format!("{n} problems, first: {shown} …"),
                1 => format!("1 problem: {shown}"),
                n => format!("{n} problems: {shown}"),
            }
        }
        Err(message) => format!("could not run: {message}"),
    };
    Finding::new("quick_check", Severity::Error, problems)
        .fix(
            "stop writing to it and keep a copy of the file (with its -wal, if any); restore from a backup, or \
             recover what is readable into a new database with the sqlite3 shell's .recover command",
        )
        .why(
            "quick_check found damage in the b-tree structure: reads of the damaged pages fail or miss rows, and \
             writes may spread the damage.",
            &docs,
        )
}
