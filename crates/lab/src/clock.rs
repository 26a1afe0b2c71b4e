//! UTC timestamps: RFC 3339 for records, compact for directory names.

use std::time::SystemTime;

use time::OffsetDateTime;

/// Now, RFC 3339 (`2026-11-21T22:04:44Z`), as the runners date their records.
pub fn now_rfc3339() -> String {
    quicklite_lab_core::rfc3339_utc(SystemTime::now())
}

/// Now, for a results directory name (`20261121-220444`): sorts by time and needs no quoting.
pub fn now_compact() -> String {
    let format = time::macros::format_description!("[year][month][day]-[hour][minute][second]");
    OffsetDateTime::now_utc()
        .format(&format)
        .unwrap_or_default()
}
