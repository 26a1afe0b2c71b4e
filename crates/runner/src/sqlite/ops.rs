//! The workload statements run on one rusqlite connection; every approach calls these, wherever it runs them.

use std::time::{Duration, Instant};

use quicklite_lab_core::orm::{ORM_ARTISTS, artist_json};
use quicklite_lab_core::{Block, Bound, NewItem, NewJob, OrmOp, Param, sql};
use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{Connection, OptionalExtension, params, params_from_iter};

/// `point-read`: reads every column of the row; a missing row is an error (the driver only asks for
/// seeded ids).
pub fn point_read(conn: &Connection, id: i64) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare_cached(sql::POINT_READ)?;
    let (_id, _name, _value, _payload): (i64, String, i64, String) =
        stmt.query_row([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?;
    Ok(())
}

/// `long-read`'s read: the row's value once the statement's count has run to `count` (`1`: a short read); a
/// missing row is an error.
pub fn counted_read(conn: &Connection, id: i64, count: i64) -> rusqlite::Result<i64> {
    let mut stmt = conn.prepare_cached(sql::COUNTED_READ)?;
    stmt.query_row([id, count], |r| r.get(0))
}

/// `long-read`'s calibration: [`counted_read`], timed on the thread that runs it.
pub fn time_counted_read(conn: &Connection, id: i64, count: i64) -> rusqlite::Result<Duration> {
    let started = Instant::now();
    counted_read(conn, id, count)?;
    Ok(started.elapsed())
}

/// `insert`: one row, autocommit unless the caller opened a transaction.
pub fn insert(conn: &Connection, item: &NewItem) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare_cached(sql::INSERT_ITEM)?;
    stmt.execute(params![item.name, item.value, item.payload])?;
    Ok(())
}

/// `mixed`'s write: one update by primary key.
pub fn update(conn: &Connection, id: i64, delta: i64) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare_cached(sql::UPDATE_ITEM)?;
    stmt.execute([id, delta])?;
    Ok(())
}

/// `queue`'s publish: one unclaimed job, autocommit unless the caller opened a transaction.
pub fn publish(conn: &Connection, job: &NewJob) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare_cached(sql::PUBLISH)?;
    stmt.execute(params![&*job.payload, job.created_at])?;
    Ok(())
}

/// `queue`'s claim: the oldest unclaimed job, now claimed by `owner`; its id (the payload is read too, as a
/// worker would), or `None` when the queue is empty.
pub fn claim(conn: &Connection, owner: i64, now_ms: i64) -> rusqlite::Result<Option<i64>> {
    let mut stmt = conn.prepare_cached(sql::CLAIM)?;
    stmt.query_row([owner, now_ms], |r| {
        let id: i64 = r.get(0)?;
        let _payload: String = r.get(1)?;
        Ok(id)
    })
    .optional()
}

/// `queue`'s ack: deletes job `id`; an error unless exactly that job, claimed by `owner`, was deleted.
pub fn ack(conn: &Connection, id: i64, owner: i64) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare_cached(sql::ACK)?;
    match stmt.execute([id, owner])? {
        1 => Ok(()),
        n => Err(rusqlite::Error::StatementChangedRows(n)),
    }
}

/// `orm`: operation `op` on artist `key`, in a transaction of its own when `txn` is set (`BEGIN` … `COMMIT`;
/// otherwise each statement commits alone, as an ORM without a transaction block does).
pub fn orm(conn: &Connection, op: OrmOp, key: i64, txn: bool) -> rusqlite::Result<()> {
    if !txn {
        return orm_op(conn, op, key);
    }
    conn.execute_batch("BEGIN")?;
    match orm_op(conn, op, key) {
        Ok(()) => conn.execute_batch("COMMIT"),
        Err(e) => {
            // The transaction is being abandoned; its own error is the one worth reporting.
            let _ = conn.execute_batch("ROLLBACK");
            Err(e)
        }
    }
}

/// Reads every column of every row `sql` returns for `param`, as an ORM materializing records does.
fn load(conn: &Connection, sql: &str, param: i64) -> rusqlite::Result<Vec<i64>> {
    let mut stmt = conn.prepare_cached(sql)?;
    let columns = stmt.column_count();
    let mut rows = stmt.query([param])?;
    let mut ids = Vec::new();
    while let Some(row) = rows.next()? {
        ids.push(row.get(0)?);
        for i in 1..columns {
            let _value: rusqlite::types::Value = row.get(i)?;
        }
    }
    Ok(ids)
}

/// The second column of every row (an album's artist, for the lazy 1-1 load).
fn second_column(conn: &Connection, sql: &str, param: i64) -> rusqlite::Result<Vec<i64>> {
    let mut stmt = conn.prepare_cached(sql)?;
    let rows = stmt.query_map([param], |r| r.get(1))?;
    rows.collect()
}

fn orm_op(conn: &Connection, op: OrmOp, key: i64) -> rusqlite::Result<()> {
    let exec = |sql: &str, params: &[&dyn rusqlite::ToSql]| -> rusqlite::Result<usize> {
        conn.prepare_cached(sql)?.execute(params)
    };
    match op {
        OrmOp::Creation => {
            exec(sql::ORM_INSERT_ARTIST, &[&"new artist", &artist_json(key)])?;
        }
        OrmOp::Select => {
            load(conn, sql::ORM_SELECT_ALL, ORM_ARTISTS)?;
        }
        OrmOp::SelectByPk => {
            load(conn, sql::ORM_SELECT_BY_PK, key)?;
        }
        OrmOp::SelectByAttr => {
            let mut stmt = conn.prepare_cached(sql::ORM_SELECT_BY_NAME)?;
            let mut rows = stmt.query([format!("artist-{}", key % 50)])?;
            while let Some(row) = rows.next()? {
                let (_id, _name, _data): (i64, String, String) =
                    (row.get(0)?, row.get(1)?, row.get(2)?);
            }
        }
        OrmOp::SelectAndSave => {
            load(conn, sql::ORM_SELECT_BY_PK, key)?;
            exec(
                sql::ORM_UPDATE_NAME,
                &[&key, &format!("artist-{}", key % 50)],
            )?;
        }
        OrmOp::Destruction => {
            exec(sql::ORM_INSERT_ARTIST, &[&"doomed", &artist_json(key)])?;
            let id = conn.last_insert_rowid();
            exec(sql::ORM_DELETE_ARTIST, &[&id])?;
        }
        OrmOp::CreationWithAssociated => {
            exec(sql::ORM_INSERT_ARTIST, &[&"new artist", &artist_json(key)])?;
            let id = conn.last_insert_rowid();
            exec(sql::ORM_INSERT_ALBUM, &[&id, &"first album"])?;
        }
        OrmOp::EagerSingleQuery1N => {
            load(conn, sql::ORM_EAGER_1_N, key)?;
        }
        OrmOp::EagerSingleQuery1NN => {
            load(conn, sql::ORM_EAGER_1_N_N, key)?;
        }
        OrmOp::EagerQueryPerAssociation1N => {
            load(conn, sql::ORM_SELECT_BY_PK, key)?;
            load(conn, sql::ORM_ALBUMS_OF, key)?;
        }
        OrmOp::EagerQueryPerAssociation1NN => {
            load(conn, sql::ORM_SELECT_BY_PK, key)?;
            load(conn, sql::ORM_ALBUMS_OF, key)?;
            load(conn, sql::ORM_TRACKS_OF_ARTIST, key)?;
        }
        OrmOp::Lazy11 => {
            for artist in second_column(conn, sql::ORM_TEN_ALBUMS, key)? {
                load(conn, sql::ORM_SELECT_BY_PK, artist)?;
            }
        }
        OrmOp::Lazy1N => {
            for artist in load(conn, sql::ORM_TEN_ARTISTS, key.min(ORM_ARTISTS - 9))? {
                load(conn, sql::ORM_ALBUMS_OF, artist)?;
            }
        }
        OrmOp::SelectJsonNested => {
            let mut stmt = conn.prepare_cached(sql::ORM_SELECT_JSON_NESTED)?;
            let (_genre, _year): (String, i64) =
                stmt.query_row([key], |r| Ok((r.get(0)?, r.get(1)?)))?;
        }
        OrmOp::UpdateJson => {
            exec(sql::ORM_UPDATE_JSON, &[&key, &(key * 7)])?;
        }
        OrmOp::UpdateJsonNested => {
            exec(sql::ORM_UPDATE_JSON_NESTED, &[&key, &(1960 + key % 60)])?;
        }
    }
    Ok(())
}

/// `multi-db`'s read: the account-history JOIN, every row and column read.
pub fn join_read(conn: &Connection, account: i64) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare_cached(sql::ACCOUNT_HISTORY)?;
    let mut rows = stmt.query([account])?;
    while let Some(row) = rows.next()? {
        let _block: i64 = row.get(0)?;
        let _tx: i64 = row.get(1)?;
        let _to: i64 = row.get(2)?;
        let _amount: i64 = row.get(3)?;
        let _hash: Vec<u8> = row.get(4)?;
        let _timestamp: i64 = row.get(5)?;
        let _balance: Option<i64> = row.get(6)?;
    }
    Ok(())
}

/// `multi-db`'s write in its own transaction: `BEGIN IMMEDIATE`, the block's statements, the simulated slow
/// part (a blocking sleep of `delay` while holding the write lock, as seed 004's writer does), `COMMIT`.
pub fn paced_write(conn: &Connection, block: &Block, delay: Duration) -> rusqlite::Result<()> {
    immediate(conn, |c| append_block(c, block, delay))
}

/// `throughput`'s transaction: `BEGIN IMMEDIATE`, the rows, the think time (a blocking sleep holding the write
/// lock, the application's work inside its transaction), `COMMIT`.
pub fn insert_batch(conn: &Connection, items: &[NewItem], think: Duration) -> rusqlite::Result<()> {
    immediate(conn, |c| insert_rows(c, items, think))
}

/// `throughput`'s rows and think time, inside a transaction the caller manages (quicklite's write closure runs
/// inside the writer's transaction).
pub fn insert_rows(conn: &Connection, items: &[NewItem], think: Duration) -> rusqlite::Result<()> {
    for item in items {
        insert(conn, item)?;
    }
    if !think.is_zero() {
        std::thread::sleep(think);
    }
    Ok(())
}

/// The rows of the `items` table.
pub fn count_items(conn: &Connection) -> rusqlite::Result<u64> {
    let rows: i64 = conn.query_row("SELECT count(*) FROM items", [], |r| r.get(0))?;
    Ok(rows as u64)
}

/// A custom workload's transaction on `conn`: a write in `BEGIN IMMEDIATE … COMMIT`, a read of several statements
/// in one `BEGIN … COMMIT` snapshot (a lone read runs as it is).
pub fn custom(conn: &Connection, writes: bool, statements: &[Bound]) -> rusqlite::Result<()> {
    if writes {
        immediate(conn, |c| custom_statements(c, statements))
    } else if statements.len() > 1 {
        deferred(conn, |c| custom_statements(c, statements))
    } else {
        custom_statements(conn, statements)
    }
}

/// A custom transaction's statements in order, every column of every row read, inside a transaction the caller
/// manages (quicklite's closures run inside its reader's snapshot or its writer's transaction).
pub fn custom_statements(conn: &Connection, statements: &[Bound]) -> rusqlite::Result<()> {
    for statement in statements {
        let mut stmt = conn.prepare_cached(&statement.sql)?;
        let columns = stmt.column_count();
        let mut rows = stmt.query(params_from_iter(
            statement
                .params
                .iter()
                .map(|p| ToSqlOutput::Borrowed(value_ref(p))),
        ))?;
        while let Some(row) = rows.next()? {
            for column in 0..columns {
                row.get_ref(column)?;
            }
        }
    }
    Ok(())
}

/// Runs `f` in a `BEGIN … COMMIT` transaction (one read snapshot), rolled back if it fails.
fn deferred(
    conn: &Connection,
    f: impl FnOnce(&Connection) -> rusqlite::Result<()>,
) -> rusqlite::Result<()> {
    conn.execute_batch("BEGIN")?;
    match f(conn) {
        Ok(()) => conn.execute_batch("COMMIT"),
        Err(e) => {
            // The transaction is being abandoned; its own error is the one worth reporting.
            let _ = conn.execute_batch("ROLLBACK");
            Err(e)
        }
    }
}

/// Runs `f` in a `BEGIN IMMEDIATE … COMMIT` transaction, rolled back if it fails.
fn immediate(
    conn: &Connection,
    f: impl FnOnce(&Connection) -> rusqlite::Result<()>,
) -> rusqlite::Result<()> {
    conn.execute_batch("BEGIN IMMEDIATE")?;
    match f(conn) {
        Ok(()) => conn.execute_batch("COMMIT"),
        Err(e) => {
            // The transaction is being abandoned; its own error is the one worth reporting.
            let _ = conn.execute_batch("ROLLBACK");
            Err(e)
        }
    }
}

/// The block's statements and the blocking `delay` (none in the `paced` write mode, where it is zero), inside a
/// transaction the caller manages (quicklite's write closure runs inside the writer's transaction).
pub fn append_block(conn: &Connection, block: &Block, delay: Duration) -> rusqlite::Result<()> {
    for statement in &block.statements {
        execute(conn, &statement.sql, &statement.params)?;
    }
    if !delay.is_zero() {
        std::thread::sleep(delay);
    }
    Ok(())
}

/// Executes one statement with lab-core parameters, through the statement cache.
pub fn execute(conn: &Connection, sql: &str, params: &[Param]) -> rusqlite::Result<usize> {
    let mut stmt = conn.prepare_cached(sql)?;
    stmt.execute(params_from_iter(
        params.iter().map(|p| ToSqlOutput::Borrowed(value_ref(p))),
    ))
}

/// A lab-core parameter as a rusqlite value.
pub fn value_ref(param: &Param) -> ValueRef<'_> {
    match param {
        Param::Int(v) => ValueRef::Integer(*v),
        Param::Text(v) => ValueRef::Text(v.as_bytes()),
        Param::Blob(v) => ValueRef::Blob(v),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(backlog: i64) -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(sql::QUEUE_SCHEMA).unwrap();
        for id in 1..=backlog {
            execute(
                &conn,
                sql::SEED_JOB,
                &[
                    Param::Int(id),
                    Param::Text(format!("job {id}")),
                    Param::Int(id),
                ],
            )
            .unwrap();
        }
        conn
    }

    /// Seed 002's claim took 388,600 ns, 50 times its publish: the shape of a table scan. The claim must find the
    /// oldest unclaimed job with an index search.
    #[test]
    fn claim_searches_the_index_instead_of_scanning() {
        let conn = queue(1_000);
        conn.execute_batch("ANALYZE").unwrap();
        let mut stmt = conn
            .prepare(&format!("EXPLAIN QUERY PLAN {}", sql::CLAIM))
            .unwrap();
        let plan: Vec<String> = stmt
            .query_map([1, 2], |r| r.get::<_, String>(3))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        let on_jobs: Vec<&String> = plan.iter().filter(|d| d.contains("jobs")).collect();
        assert_eq!(on_jobs.len(), 2, "{plan:?}");
        assert!(
            on_jobs.iter().all(|d| d.starts_with("SEARCH")),
            "a scan in {plan:?}"
        );
        assert!(
            on_jobs
                .iter()
                .any(|d| d.contains("COVERING INDEX jobs_unclaimed (claimed_by=?)")),
            "{plan:?}"
        );
    }

    #[test]
    fn every_orm_operation_runs_with_and_without_a_transaction() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(sql::ORM_SCHEMA).unwrap();
        for statement in quicklite_lab_core::orm::orm_seed() {
            execute(&conn, &statement.sql, &statement.params).unwrap();
        }
        let count = |table: &str| -> i64 {
            conn.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
                .unwrap()
        };
        for op in OrmOp::ALL {
            for txn in [false, true] {
                for key in [1, ORM_ARTISTS] {
                    orm(&conn, op, key, txn).unwrap_or_else(|e| panic!("{}: {e}", op.name()));
                }
            }
        }
        // Creations stayed; destructions removed their own rows only.
        assert_eq!(count("artists"), ORM_ARTISTS + 4 + 4);
        assert_eq!(count("albums"), 500 + 4);
        let year: i64 = conn
            .query_row(
                "SELECT json_extract(data, '$.tags.year') FROM artists WHERE id = 1",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(year, 1961);
        assert!(conn.is_autocommit(), "every transaction ended");
    }

    #[test]
    fn claim_takes_the_oldest_unclaimed_job_once_and_ack_deletes_it() {
        let conn = queue(3);
        assert_eq!(claim(&conn, 7, 100).unwrap(), Some(1));
        assert_eq!(claim(&conn, 8, 101).unwrap(), Some(2));
        let (by, at): (i64, i64) = conn
            .query_row(
                "SELECT claimed_by, claimed_at FROM jobs WHERE id = 2",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!((by, at), (8, 101));
        // Only the owner acknowledges.
        assert!(ack(&conn, 1, 8).is_err());
        ack(&conn, 1, 7).unwrap();
        assert!(ack(&conn, 1, 7).is_err(), "a job is deleted once");
        publish(
            &conn,
            &NewJob {
                payload: "new".into(),
                created_at: 5,
            },
        )
        .unwrap();
        assert_eq!(claim(&conn, 9, 102).unwrap(), Some(3));
        assert_eq!(claim(&conn, 9, 103).unwrap(), Some(4));
        assert_eq!(claim(&conn, 9, 104).unwrap(), None, "the queue is empty");
    }
}
