//! UTC timestamps: RFC 3339 for records, compact for directory names.

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// Now, RFC 3339 (`2026-11-21T22:04:44Z`).
pub fn now_rfc3339() -> String {
    let now = OffsetDateTime::now_utc()
        .replace_nanosecond(0)
        .unwrap_or_else(|_| OffsetDateTime::now_utc());
    now.format(&Rfc3339).unwrap_or_default()
}

/// Now, for a results directory name (`20261121-220444`): sorts by time and needs no quoting.
pub fn now_compact() -> String {
    let format = time::macros::format_description!("[year][month][day]-[hour][minute][second]");
    OffsetDateTime::now_utc()
        .format(&format)
        .unwrap_or_default()
}
