//! Settings SQLite keeps per connection, not in the file: reported as a fresh connection gets them, with what to
//! set when opening connections.

use super::{DOC_JOURNAL_SIZE_LIMIT, bytes, server};
use crate::doctor::finding::{Finding, Severity};

const DOC_SYNCHRONOUS: &str = "https://www.sqlite.org/pragma.html#pragma_synchronous";
const DOC_BUSY_TIMEOUT: &str = "https://www.sqlite.org/pragma.html#pragma_busy_timeout";
const DOC_BUSY_HANDLER: &str = "https://www.sqlite.org/c3ref/busy_timeout.html";
const DOC_FOREIGN_KEYS: &str = "https://www.sqlite.org/foreignkeys.html#fk_enable";
const DOC_CACHE_SIZE: &str = "https://www.sqlite.org/pragma.html#pragma_cache_size";
const DOC_MMAP: &str = "https://www.sqlite.org/mmap.html";
const DOC_MMAP_SIZE: &str = "https://www.sqlite.org/pragma.html#pragma_mmap_size";

/// `busy_timeout` of a new SQLite connection: none (<https://www.sqlite.org/c3ref/busy_timeout.html>).
pub const FRESH_BUSY_TIMEOUT_MS: i64 = 0;
/// `cache_size` SQLite suggests by default: 2000 KiB (<https://www.sqlite.org/pragma.html#pragma_cache_size>).
const DEFAULT_CACHE_BYTES: i64 = 2000 * 1024;

pub(super) fn synchronous(level: i64, wal: bool) -> Finding {
    let name = match level {
        0 => "OFF",
        1 => "NORMAL",
        2 => "FULL",
        3 => "EXTRA",
        _ => "unknown",
    };
    let severity = if level == 0 {
        Severity::Warning
    } else {
        Severity::Info
    };
    let modes = if wal {
        "In WAL mode NORMAL is always consistent and committed transactions survive an application crash, but \
         the last transactions committed before a power loss or OS crash may roll back; FULL makes those durable \
         too, at the price of an fsync per commit."
    } else {
        "In rollback-journal mode FULL syncs at every commit; with NORMAL a power loss at the wrong moment could \
         corrupt the database on older file systems."
    };
    Finding::new("synchronous", severity, format!("{name} ({level})"))
        .per_connection()
        .fix(format!(
            "set it when opening each connection: synchronous={} with WAL for most services (quicklite's Server \
             profile), FULL where every acknowledged commit must survive a power cut (the Durable profile)",
            server("synchronous")
        ))
        .why(
            format!(
                "synchronous is not stored in the database file: each connection starts with this SQLite build's \
                 default and may change it. {modes} With OFF, an OS crash or power loss can corrupt the database."
            ),
            &[DOC_SYNCHRONOUS],
        )
}

pub(super) fn busy_timeout() -> Finding {
    Finding::new(
        "busy_timeout",
        Severity::Info,
        format!("{FRESH_BUSY_TIMEOUT_MS} ms (a new SQLite connection has no busy handler)"),
    )
    .per_connection()
    .fix(format!(
        "set it when opening each connection: PRAGMA busy_timeout={} (quicklite's Server profile; rusqlite also \
         sets 5000 ms when it opens a connection)",
        server("busy_timeout")
    ))
    .why(
        "busy_timeout is not stored in the database file. Without a busy handler, a statement that meets another \
         connection's lock fails at once with SQLITE_BUSY; with a timeout, SQLite sleeps and retries until the lock \
         is released or the time is up.",
        &[DOC_BUSY_TIMEOUT, DOC_BUSY_HANDLER],
    )
}

pub(super) fn foreign_keys(on: bool) -> Finding {
    let why = "Foreign key constraints are disabled by default, for backwards compatibility, and must be enabled \
               separately for each database connection: until then REFERENCES clauses are not enforced and ON \
               DELETE actions do not run.";
    if on {
        Finding::new(
            "foreign_keys",
            Severity::Ok,
            "on (1): this SQLite build enables them by default",
        )
        .per_connection()
        .fix("nothing to do")
        .why(why, &[DOC_FOREIGN_KEYS])
    } else {
        Finding::new("foreign_keys", Severity::Info, "off (0)")
            .per_connection()
            .fix(
                "PRAGMA foreign_keys=ON when opening each connection, outside any transaction (quicklite's Server \
                 profile does), if the schema declares foreign keys",
            )
            .why(why, &[DOC_FOREIGN_KEYS])
    }
}

pub(super) fn cache_size(setting: i64, page_size: i64) -> Finding {
    let bytes = if setting < 0 {
        setting.saturating_mul(-1024)
    } else {
        setting.saturating_mul(page_size)
    };
    let value = if setting < 0 {
        format!("{setting} ({})", self::bytes(bytes as u64))
    } else {
        format!("{setting} pages ({})", self::bytes(bytes as u64))
    };
    let why = "cache_size is not stored in the database file: it is the most memory each connection uses to keep \
               pages, and a change lasts only for the connection that makes it. SQLite's default is -2000, about \
               2 MB; pages that do not fit are read from the file again.";
    if bytes <= DEFAULT_CACHE_BYTES {
        Finding::new("cache_size", Severity::Info, value)
            .per_connection()
            .fix(format!(
                "if the working set is larger, give each connection more when opening it: PRAGMA cache_size={} \
                 (32 MiB, quicklite's Server profile)",
                server("cache_size")
            ))
            .why(why, &[DOC_CACHE_SIZE])
    } else {
        Finding::new("cache_size", Severity::Ok, value)
            .per_connection()
            .fix("nothing to do")
            .why(why, &[DOC_CACHE_SIZE])
    }
}

pub(super) fn mmap_size(size: i64) -> Finding {
    let why = "mmap_size is per connection and off by default. With memory-mapped I/O SQLite reads pages \
               straight from the mapping instead of copying them from the kernel: reads of a database larger than \
               the page cache get much cheaper, and memory is shared with the OS page cache. But a read \
               transaction that begins after another connection committed unmaps the connection's whole map \
               (SQLite cannot tell which pages changed), so beside a writer every read batch pays an munmap and \
               its page faults: there the map makes reads slower, not faster. quicklite's readers therefore drop \
               the map while the database is written and map again after a quiet second; the writer keeps it. An \
               I/O error on a mapped file becomes a signal that crashes the program instead of an error code.";
    if size <= 0 {
        Finding::new("mmap_size", Severity::Info, "0 (memory-mapped I/O off)")
            .per_connection()
            .fix(format!(
                "for databases read much more than written, set it when opening each connection: PRAGMA \
                 mmap_size={} (256 MiB, quicklite's Server profile, whose readers give it up while the database \
                 is written); with a pool of connections that all read beside a writer, leave it off",
                server("mmap_size")
            ))
            .why(why, &[DOC_MMAP, DOC_MMAP_SIZE])
    } else {
        Finding::new(
            "mmap_size",
            Severity::Ok,
            format!("{size} ({})", bytes(size as u64)),
        )
        .per_connection()
        .fix(
            "nothing to do through quicklite (its readers drop the map while the database is written); with \
             another pool whose connections read beside a writer, set it to 0 on them",
        )
        .why(why, &[DOC_MMAP, DOC_MMAP_SIZE])
    }
}

pub(super) fn journal_size_limit(limit: i64) -> Finding {
    let why = "journal_size_limit is per connection. In WAL mode the -wal is not truncated after a checkpoint but \
               reused, since overwriting is faster than appending; this limit truncates what is left on disk. The \
               default is -1, no limit: a WAL that grew for one large transaction keeps that size.";
    if limit < 0 {
        Finding::new("journal_size_limit", Severity::Info, format!("{limit} (no limit)"))
            .per_connection()
            .fix(format!(
                "set it when opening each connection: PRAGMA journal_size_limit={} (64 MiB, quicklite's Server \
                 profile)",
                server("journal_size_limit")
            ))
            .why(why, &[DOC_JOURNAL_SIZE_LIMIT])
    } else {
        Finding::new(
            "journal_size_limit",
            Severity::Ok,
            format!("{limit} ({})", bytes(limit as u64)),
        )
        .per_connection()
        .fix("nothing to do")
        .why(why, &[DOC_JOURNAL_SIZE_LIMIT])
    }
}
