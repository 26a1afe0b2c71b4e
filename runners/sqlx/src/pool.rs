//! `sqlx`: the real sqlx 0.9 `SqlitePool` with its default size (10 connections, each served by sqlx's own
//! worker thread), connect options set from the cell's profile.
//!
//! For `multi-db` each database gets its own pool; the writer shares it with the readers, as an application
//! using sqlx would. `held-tx`'s transaction is sqlx's own: a pooled connection's transaction, its statements
//! awaited one by one and its think awaited between them. A custom workload's statements run through `sqlx::query` with their parameters written as sqlx
//! binds them ([`crate::positional`]).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use quicklite_lab_core::{
    Approach, Block, Bound, Cell, Environment, Knobs, MutexMode, NewItem, Param, Profile,
    REPORTED_PRAGMAS, Workload, sql,
};
use sqlx::query::Query;
use sqlx::sqlite::{
    SqliteArguments, SqliteConnectOptions, SqliteConnection, SqlitePool, SqlitePoolOptions,
    SqliteRow,
};
use sqlx::{AssertSqlSafe, Row, SqlSafeStr, Sqlite};

use crate::ffi;
use crate::positional::positional;

/// One pool per database.
pub struct SqlxPool {
    /// Indexed by database.
    pools: Vec<SqlitePool>,
    /// A custom workload's statements, each in the parameter form sqlx binds ([`positional`]), by their SQL as
    /// written: rewritten once, before the warm-up.
    custom_sql: HashMap<String, Arc<str>>,
}

/// sqlx connect options for `path` carrying the cell's knobs.
///
/// sqlx has opinions of its own: it turns `foreign_keys` on and sets a 5 s busy timeout unless told otherwise.
/// For `sqlite-default` foreign keys go back to SQLite's default (off); the busy timeout stays, as rusqlite's
/// does for the other approaches (both are read back into the results).
pub fn connect_options(path: &Path, knobs: &Knobs) -> SqliteConnectOptions {
    let mut options = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .serialized(knobs.mutex == MutexMode::FullMutex);
    if knobs.profile == Profile::SqliteDefault {
        options = options.foreign_keys(false);
    }
    for pragma in knobs.pragmas() {
        options = match pragma.name {
            "busy_timeout" => match pragma.value.parse::<u64>() {
                Ok(ms) => options.busy_timeout(Duration::from_millis(ms)),
                Err(_) => options.pragma(pragma.name, pragma.value.clone()),
            },
            "foreign_keys" => options.foreign_keys(pragma.value.eq_ignore_ascii_case("ON")),
            _ => options.pragma(pragma.name, pragma.value.clone()),
        };
    }
    options
}

/// A sqlx query for one lab-core statement, parameters bound in order (to SQLite parameters `1..=n`).
pub fn bound(sql: impl SqlSafeStr, params: &[Param]) -> Query<'static, Sqlite, SqliteArguments> {
    params.iter().fold(sqlx::query(sql), |q, p| match p {
        Param::Int(v) => q.bind(*v),
        Param::Text(v) => q.bind(v.clone()),
        Param::Blob(v) => q.bind(v.clone()),
    })
}

impl SqlxPool {
    /// Opens a pool per database and describes database 0 into `env`.
    pub async fn open(
        cell: &Cell,
        workload: Workload,
        knobs: &Knobs,
        env: &mut Environment,
    ) -> Result<Self> {
        let mut pools = Vec::new();
        for db in 0..workload.databases(cell) {
            let path = workload.database_path(cell, db);
            let pool = SqlitePoolOptions::new()
                .after_connect(|conn, _meta| {
                    Box::pin(async move {
                        let mut handle = conn.lock_handle().await?;
                        // SAFETY: the locked handle is open and exclusively ours until it is dropped.
                        unsafe { ffi::register_sleep(handle.as_raw_handle()) }
                            .map_err(|e| sqlx::Error::Configuration(e.into()))
                    })
                })
                .connect_with(connect_options(&path, knobs))
                .await
                .with_context(|| format!("cannot open a sqlx pool on {}", path.display()))?;
            pools.push(pool);
        }
        describe(&pools[0], env).await?;
        let custom_sql = cell
            .custom
            .iter()
            .flat_map(|custom| &custom.transactions)
            .flat_map(|transaction| &transaction.statements)
            .map(|statement| (statement.sql.clone(), Arc::from(positional(&statement.sql))))
            .collect();
        Ok(Self { pools, custom_sql })
    }

    fn pool(&self, db: usize) -> Result<&SqlitePool> {
        self.pools
            .get(db)
            .with_context(|| format!("no database {db}"))
    }

    /// A custom transaction's statements in order on `conn`, inside whatever transaction the caller holds: each
    /// statement's values bound to its parameters `1..=n`, every column of every row it returns read.
    async fn custom_statements(
        &self,
        conn: &mut SqliteConnection,
        statements: Vec<Bound>,
    ) -> Result<()> {
        for statement in statements {
            let sql = match self.custom_sql.get(&*statement.sql) {
                Some(sql) => sql.clone(),
                None => Arc::from(positional(&statement.sql)),
            };
            let rows = bound(AssertSqlSafe(sql), &statement.params)
                .fetch_all(&mut *conn)
                .await?;
            for row in &rows {
                for column in 0..row.len() {
                    row.try_get_raw(column)?;
                }
            }
        }
        Ok(())
    }
}

/// Fills the SQLite fields of `env` from a pooled connection.
async fn describe(pool: &SqlitePool, env: &mut Environment) -> Result<()> {
    env.sqlite_version = sqlx::query_scalar("SELECT sqlite_version()")
        .fetch_one(pool)
        .await?;
    env.compile_options = sqlx::query_scalar("PRAGMA compile_options")
        .fetch_all(pool)
        .await?;
    // One connection for all PRAGMAs, so they describe the same connection.
    let mut conn = pool.acquire().await?;
    for name in REPORTED_PRAGMAS {
        let row: SqliteRow = sqlx::query(AssertSqlSafe(format!("PRAGMA {name}")))
            .fetch_one(&mut *conn)
            .await
            .with_context(|| format!("cannot read PRAGMA {name}"))?;
        let value = match row.try_get::<i64, _>(0) {
            Ok(i) => i.to_string(),
            Err(_) => row.try_get::<String, _>(0)?,
        };
        env.pragmas.insert((*name).to_string(), value);
    }
    Ok(())
}

impl Approach for SqlxPool {
    async fn point_read(&self, id: i64) -> Result<()> {
        let row = sqlx::query(sql::POINT_READ)
            .bind(id)
            .fetch_one(self.pool(0)?)
            .await?;
        let (_id, _name, _value, _payload): (i64, String, i64, String) = (
            row.try_get(0)?,
            row.try_get(1)?,
            row.try_get(2)?,
            row.try_get(3)?,
        );
        Ok(())
    }

    async fn insert(&self, item: NewItem) -> Result<()> {
        sqlx::query(sql::INSERT_ITEM)
            .bind(item.name)
            .bind(item.value)
            .bind(item.payload)
            .execute(self.pool(0)?)
            .await?;
        Ok(())
    }

    async fn update(&self, id: i64, delta: i64) -> Result<()> {
        sqlx::query(sql::UPDATE_ITEM)
            .bind(id)
            .bind(delta)
            .execute(self.pool(0)?)
            .await?;
        Ok(())
    }

    async fn join_read(&self, db: usize, account: i64) -> Result<()> {
        let rows = sqlx::query(sql::ACCOUNT_HISTORY)
            .bind(account)
            .fetch_all(self.pool(db)?)
            .await?;
        for row in rows {
            let _block: i64 = row.try_get(0)?;
            let _tx: i64 = row.try_get(1)?;
            let _to: i64 = row.try_get(2)?;
            let _amount: i64 = row.try_get(3)?;
            let _hash: Vec<u8> = row.try_get(4)?;
            let _timestamp: i64 = row.try_get(5)?;
            let _balance: Option<i64> = row.try_get(6)?;
        }
        Ok(())
    }

    async fn paced_write(&self, db: usize, block: Block, delay: Duration) -> Result<()> {
        let mut tx = self.pool(db)?.begin_with("BEGIN IMMEDIATE").await?;
        for statement in block.statements {
            bound(AssertSqlSafe(statement.sql), &statement.params)
                .execute(&mut *tx)
                .await?;
        }
        // The slow writer's delay, on sqlx's worker thread inside the transaction (see `ffi::register_sleep`);
        // none in the paced write mode.
        if !delay.is_zero() {
            sqlx::query("SELECT lab_sleep(?1)")
                .bind(delay.as_millis() as i64)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn held_transaction(&self, id: i64, delta: i64, think: Duration) -> Result<()> {
        // `begin_with("BEGIN IMMEDIATE")`, not `begin()`: `begin()` opens a deferred transaction, whose read takes a
        // snapshot that a write committed by another connection during the think makes stale, and its update then
        // fails with SQLITE_BUSY at once (no busy timeout waits that out). Taking the write lock first is what a
        // read-modify-write on sqlx must do; the other connections wait for it in SQLite's busy handler.
        let mut tx = self.pool(0)?.begin_with("BEGIN IMMEDIATE").await?;
        let row = sqlx::query(sql::POINT_READ)
            .bind(id)
            .fetch_one(&mut *tx)
            .await?;
        let (_id, _name, old, _payload): (i64, String, i64, String) = (
            row.try_get(0)?,
            row.try_get(1)?,
            row.try_get(2)?,
            row.try_get(3)?,
        );
        quicklite_lab_core::await_think(think).await;
        let new = old + delta;
        sqlx::query(sql::SET_ITEM_VALUE)
            .bind(id)
            .bind(new)
            .execute(&mut *tx)
            .await?;
        sqlx::query(sql::LOG_ITEM_CHANGE)
            .bind(id)
            .bind(old)
            .bind(new)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn check_item_log(&self) -> Result<(u64, u64)> {
        let (logged, lost): (i64, i64) = sqlx::query_as(sql::CHECK_ITEM_LOG)
            .fetch_one(self.pool(0)?)
            .await?;
        Ok((logged as u64, lost as u64))
    }

    async fn custom(&self, writes: bool, statements: Vec<Bound>) -> Result<()> {
        let pool = self.pool(0)?;
        if writes {
            // As the multi-db writer: the write lock taken up front, so a transaction that reads before it writes
            // waits for the lock (busy timeout) instead of failing to upgrade a stale snapshot.
            let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
            self.custom_statements(&mut tx, statements).await?;
            tx.commit().await?;
        } else if statements.len() > 1 {
            // One snapshot for all the statements.
            let mut tx = pool.begin().await?;
            self.custom_statements(&mut tx, statements).await?;
            tx.commit().await?;
        } else {
            self.custom_statements(&mut *pool.acquire().await?, statements)
                .await?;
        }
        Ok(())
    }

    fn open_databases(&self) -> Option<u64> {
        Some(self.pools.len() as u64)
    }
}
