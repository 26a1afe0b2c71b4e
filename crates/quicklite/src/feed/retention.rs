//! Retention: the oldest changes deleted, and the last one deleted remembered, so that a cursor older than what is
//! kept is told apart from one that is only behind.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, OptionalExtension};

use crate::Result;
use crate::feed::tables::{CHANGES, STATE};

/// Most changes one pruning deletes: the rest are left for the next, so that a pruning never holds the writer long.
pub(crate) const PRUNE_BATCH: u64 = 10_000;

/// How many changes, and how old, the feed keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Retention {
    /// Changes older than this are pruned; `None`: whatever their age.
    pub(crate) max_age: Option<Duration>,
    /// Changes beyond this many (the oldest first) are pruned; `None`: however many.
    pub(crate) max_changes: Option<u64>,
}

/// Milliseconds since the Unix epoch at `at`.
pub(crate) fn millis(at: SystemTime) -> i64 {
    at.duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// How far retention would prune now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PrunePoint {
    /// The last change to delete.
    pub(crate) through: u64,
    /// Whether more will be left to delete after these ([`PRUNE_BATCH`] bounds one pruning).
    pub(crate) more: bool,
}

/// Where retention would prune through now, if it would delete anything: at most [`PRUNE_BATCH`] changes. Reads
/// only.
pub(crate) fn prune_point(
    conn: &Connection,
    retention: Retention,
    now: SystemTime,
) -> rusqlite::Result<Option<PrunePoint>> {
    let first: Option<i64> = conn
        .prepare_cached(&format!("SELECT min(seq) FROM {CHANGES}"))?
        .query_row([], |r| r.get(0))?;
    let Some(first) = first else {
        return Ok(None);
    };
    let mut through: Option<i64> = None;
    if let Some(max) = retention.max_changes {
        let past: Option<i64> = conn
            .prepare_cached(&format!(
                "SELECT seq FROM {CHANGES} ORDER BY seq DESC LIMIT 1 OFFSET ?1"
            ))?
            .query_row([i64::try_from(max).unwrap_or(i64::MAX)], |r| r.get(0))
            .optional()?;
        through = through.max(past);
    }
    if let Some(age) = retention.max_age {
        let cutoff = millis(now).saturating_sub(i64::try_from(age.as_millis()).unwrap_or(i64::MAX));
        // Changes are in commit order, and nearly in time order: the first one recent enough ends the old ones.
        let first_recent: Option<i64> = conn
            .prepare_cached(&format!(
                "SELECT seq FROM {CHANGES} WHERE at >= ?1 ORDER BY seq LIMIT 1"
            ))?
            .query_row([cutoff], |r| r.get(0))
            .optional()?;
        let old = match first_recent {
            Some(seq) => Some(seq - 1),
            None => conn
                .prepare_cached(&format!("SELECT max(seq) FROM {CHANGES}"))?
                .query_row([], |r| r.get(0))?,
        };
        through = through.max(old);
    }
    let bound = first.saturating_add(PRUNE_BATCH as i64 - 1);
    Ok(through.filter(|&t| t >= first).map(|t| PrunePoint {
        through: t.min(bound) as u64,
        more: t > bound,
    }))
}

/// Deletes the changes up to `through` and remembers it, inside the transaction open on `conn`.
pub(crate) fn prune_through(conn: &Connection, through: u64) -> rusqlite::Result<()> {
    let through = i64::try_from(through).unwrap_or(i64::MAX);
    conn.prepare_cached(&format!("DELETE FROM {CHANGES} WHERE seq <= ?1"))?
        .execute([through])?;
    conn.prepare_cached(&format!(
        "UPDATE {STATE} SET pruned_through = max(pruned_through, ?1) WHERE id = 1"
    ))?
    .execute([through])?;
    Ok(())
}

/// Prunes what retention says, inside the transaction open on `conn`, until nothing is left to prune; returns how
/// many changes were deleted.
pub(crate) fn prune(conn: &Connection, retention: Retention, now: SystemTime) -> Result<u64> {
    let mut deleted = 0;
    while let Some(point) = prune_point(conn, retention, now)? {
        let before = conn.total_changes();
        prune_through(conn, point.through)?;
        // The state's row counts one change.
        deleted += (conn.total_changes() - before).saturating_sub(1);
    }
    Ok(deleted)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;
    use crate::feed::tests::fed;
    use crate::feed::{Cursor, install, read_after};

    #[test]
    fn retention_prunes_by_count_and_age_and_remembers_where() {
        let conn = fed("CREATE TABLE t (id INTEGER PRIMARY KEY)");
        install(&conn, &["t".into()]).unwrap();
        for id in 1..=10 {
            conn.execute("INSERT INTO t VALUES (?1)", [id]).unwrap();
        }
        let by_count = Retention {
            max_age: None,
            max_changes: Some(4),
        };
        assert_eq!(prune(&conn, by_count, SystemTime::now()).unwrap(), 6);
        assert!(matches!(
            read_after(&conn, Cursor::new(5), 10),
            Err(Error::CursorPruned {
                cursor: 5,
                pruned_through: 6
            })
        ));
        assert_eq!(read_after(&conn, Cursor::new(6), 10).unwrap().len(), 4);
        let by_age = Retention {
            max_age: Some(Duration::from_secs(60)),
            max_changes: None,
        };
        let later = SystemTime::now() + Duration::from_secs(3600);
        assert_eq!(prune(&conn, by_age, later).unwrap(), 4);
        assert!(read_after(&conn, Cursor::new(10), 10).unwrap().is_empty());
        assert!(matches!(
            read_after(&conn, Cursor::new(9), 10),
            Err(Error::CursorPruned { .. })
        ));
        conn.execute("INSERT INTO t VALUES (11)", []).unwrap();
        let next = read_after(&conn, Cursor::new(10), 10).unwrap();
        assert_eq!(
            next[0].cursor,
            Cursor::new(11),
            "positions are never reused"
        );
    }
}
