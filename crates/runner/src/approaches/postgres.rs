//! `postgres`: the `orm` suite on a PostgreSQL server on loopback (`quicklite bench --with-postgres`), through
//! one `tokio-postgres` connection with every statement prepared once — seed 003 set its SQLite figures beside a
//! local PostgreSQL's.
//!
//! Only the `orm` workload: the other workloads measure ways of using SQLite.

use std::collections::HashMap;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use quicklite_lab_core::orm::{
    ORM_ALBUMS_PER_ARTIST, ORM_ARTISTS, ORM_TRACKS_PER_ALBUM, artist_json,
};
use quicklite_lab_core::sql::pg;
use quicklite_lab_core::{Approach, Block, Cell, Environment, NewItem, OrmOp, Workload};
use tokio_postgres::{Client, GenericClient, NoTls, Statement};

use crate::sqlite::report::crate_versions;

/// One connection, the prepared statements.
pub struct Postgres {
    /// The connection; one operation at a time, as the suite runs them.
    client: tokio::sync::Mutex<Client>,
    /// Prepared statements by SQL text.
    statements: HashMap<&'static str, Statement>,
}

impl Postgres {
    /// Connects to the cell's server, creates and seeds the schema, prepares the statements, and describes the
    /// server into `env`.
    pub async fn open(cell: &Cell, workload: Workload, env: &mut Environment) -> Result<Self> {
        if workload != Workload::Orm {
            bail!("the postgres approach runs the orm workload only");
        }
        let url = cell.postgres_url.as_deref().context(
            "the postgres approach needs a server: run with --with-postgres or --postgres-url URL",
        )?;
        let (mut client, connection) = tokio_postgres::connect(url, NoTls)
            .await
            .with_context(|| format!("cannot connect to {url}"))?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                eprintln!("postgres connection: {e}");
            }
        });
        client
            .batch_execute(pg::SCHEMA)
            .await
            .context("cannot create the orm schema")?;
        seed(&mut client)
            .await
            .context("cannot seed the orm schema")?;
        let mut statements = HashMap::new();
        for sql in pg::PREPARED {
            let statement = client
                .prepare(sql)
                .await
                .with_context(|| format!("cannot prepare {sql}"))?;
            statements.insert(*sql, statement);
        }
        let version: String = client.query_one("SHOW server_version", &[]).await?.get(0);
        env.sqlite_version = format!("PostgreSQL {version}");
        env.compile_options = Vec::new();
        env.pragmas.clear();
        for setting in ["synchronous_commit", "fsync", "shared_buffers", "wal_level"] {
            let value: String = client
                .query_one(&format!("SHOW {setting}"), &[])
                .await?
                .get(0);
            env.pragmas.insert(setting.to_owned(), value);
        }
        env.crate_versions = crate_versions();
        env.memstatus = "not applicable (PostgreSQL)".to_owned();
        Ok(Self {
            client: tokio::sync::Mutex::new(client),
            statements,
        })
    }

    fn statement(&self, sql: &'static str) -> Result<&Statement> {
        self.statements
            .get(sql)
            .with_context(|| format!("not prepared: {sql}"))
    }
}

/// The same rows as the SQLite databases get, in one transaction.
async fn seed(client: &mut Client) -> Result<()> {
    let tx = client.transaction().await?;
    let artist = tx.prepare(pg::SEED_ARTIST).await?;
    let album = tx.prepare(pg::SEED_ALBUM).await?;
    let track = tx.prepare(pg::SEED_TRACK).await?;
    for id in 1..=ORM_ARTISTS {
        tx.execute(
            &artist,
            &[&id, &format!("artist-{}", id % 50), &artist_json(id)],
        )
        .await?;
    }
    for id in 1..=ORM_ARTISTS * ORM_ALBUMS_PER_ARTIST {
        let artist_id = (id - 1) / ORM_ALBUMS_PER_ARTIST + 1;
        tx.execute(&album, &[&id, &artist_id, &format!("album-{id}")])
            .await?;
    }
    for id in 1..=ORM_ARTISTS * ORM_ALBUMS_PER_ARTIST * ORM_TRACKS_PER_ALBUM {
        let album_id = (id - 1) / ORM_TRACKS_PER_ALBUM + 1;
        tx.execute(&track, &[&id, &album_id, &format!("track-{id}")])
            .await?;
    }
    tx.batch_execute(pg::RESTART_IDENTITIES).await?;
    tx.commit().await?;
    Ok(())
}

/// The ids of the rows of `statement` for `param`, every column read.
async fn load<C: GenericClient>(client: &C, statement: &Statement, param: i64) -> Result<Vec<i64>> {
    let rows = client.query(statement, &[&param]).await?;
    let mut ids = Vec::with_capacity(rows.len());
    for row in &rows {
        ids.push(row.try_get(0)?);
        for (i, column) in row.columns().iter().enumerate().skip(1) {
            match *column.type_() {
                tokio_postgres::types::Type::INT8 => {
                    let _: i64 = row.try_get(i)?;
                }
                _ => {
                    let _: String = row.try_get(i)?;
                }
            }
        }
    }
    Ok(ids)
}

impl Postgres {
    async fn op<C: GenericClient>(&self, c: &C, op: OrmOp, key: i64) -> Result<()> {
        let exec = |sql: &'static str| self.statement(sql);
        match op {
            OrmOp::Creation => {
                c.query_one(
                    exec(pg::INSERT_ARTIST)?,
                    &[&"new artist", &artist_json(key)],
                )
                .await?;
            }
            OrmOp::Select => {
                load(c, exec(pg::SELECT_ALL)?, ORM_ARTISTS).await?;
            }
            OrmOp::SelectByPk => {
                load(c, exec(pg::SELECT_BY_PK)?, key).await?;
            }
            OrmOp::SelectByAttr => {
                let rows = c
                    .query(
                        exec(pg::SELECT_BY_NAME)?,
                        &[&format!("artist-{}", key % 50)],
                    )
                    .await?;
                for row in &rows {
                    let (_id, _name, _data): (i64, String, String) =
                        (row.try_get(0)?, row.try_get(1)?, row.try_get(2)?);
                }
            }
            OrmOp::SelectAndSave => {
                load(c, exec(pg::SELECT_BY_PK)?, key).await?;
                c.execute(
                    exec(pg::UPDATE_NAME)?,
                    &[&key, &format!("artist-{}", key % 50)],
                )
                .await?;
            }
            OrmOp::Destruction => {
                let id: i64 = c
                    .query_one(exec(pg::INSERT_ARTIST)?, &[&"doomed", &artist_json(key)])
                    .await?
                    .get(0);
                c.execute(exec(pg::DELETE_ARTIST)?, &[&id]).await?;
            }
            OrmOp::CreationWithAssociated => {
                let id: i64 = c
                    .query_one(
                        exec(pg::INSERT_ARTIST)?,
                        &[&"new artist", &artist_json(key)],
                    )
                    .await?
                    .get(0);
                c.execute(exec(pg::INSERT_ALBUM)?, &[&id, &"first album"])
                    .await?;
            }
            OrmOp::EagerSingleQuery1N => {
                load(c, exec(pg::EAGER_1_N)?, key).await?;
            }
            OrmOp::EagerSingleQuery1NN => {
                load(c, exec(pg::EAGER_1_N_N)?, key).await?;
            }
            OrmOp::EagerQueryPerAssociation1N => {
                load(c, exec(pg::SELECT_BY_PK)?, key).await?;
                load(c, exec(pg::ALBUMS_OF)?, key).await?;
            }
            OrmOp::EagerQueryPerAssociation1NN => {
                load(c, exec(pg::SELECT_BY_PK)?, key).await?;
                load(c, exec(pg::ALBUMS_OF)?, key).await?;
                load(c, exec(pg::TRACKS_OF_ARTIST)?, key).await?;
            }
            OrmOp::Lazy11 => {
                let rows = c.query(exec(pg::TEN_ALBUMS)?, &[&key]).await?;
                for row in &rows {
                    let artist: i64 = row.try_get(1)?;
                    load(c, exec(pg::SELECT_BY_PK)?, artist).await?;
                }
            }
            OrmOp::Lazy1N => {
                for artist in load(c, exec(pg::TEN_ARTISTS)?, key.min(ORM_ARTISTS - 9)).await? {
                    load(c, exec(pg::ALBUMS_OF)?, artist).await?;
                }
            }
            OrmOp::SelectJsonNested => {
                let row = c.query_one(exec(pg::SELECT_JSON_NESTED)?, &[&key]).await?;
                let (_genre, _year): (String, i64) = (row.try_get(0)?, row.try_get(1)?);
            }
            OrmOp::UpdateJson => {
                c.execute(exec(pg::UPDATE_JSON)?, &[&key, &(key * 7)])
                    .await?;
            }
            OrmOp::UpdateJsonNested => {
                c.execute(exec(pg::UPDATE_JSON_NESTED)?, &[&key, &(1960 + key % 60)])
                    .await?;
            }
        }
        Ok(())
    }
}

/// The error of every workload but `orm`.
fn orm_only() -> anyhow::Error {
    anyhow::anyhow!("the postgres approach runs the orm workload only")
}

impl Approach for Postgres {
    async fn point_read(&self, _id: i64) -> Result<()> {
        Err(orm_only())
    }

    async fn insert(&self, _item: NewItem) -> Result<()> {
        Err(orm_only())
    }

    async fn update(&self, _id: i64, _delta: i64) -> Result<()> {
        Err(orm_only())
    }

    async fn join_read(&self, _db: usize, _account: i64) -> Result<()> {
        Err(orm_only())
    }

    async fn paced_write(&self, _db: usize, _block: Block, _delay: Duration) -> Result<()> {
        Err(orm_only())
    }

    async fn orm(&self, op: OrmOp, key: i64, txn: bool) -> Result<()> {
        let mut client = self.client.lock().await;
        if txn {
            let tx = client.transaction().await?;
            self.op(&tx, op, key).await?;
            tx.commit().await?;
            Ok(())
        } else {
            self.op(&*client, op, key).await
        }
    }
}
