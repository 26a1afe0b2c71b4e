//! Migrations with a real runner (refinery) on `Builder::migrate`'s `&mut Connection`, on both backends: applied
//! before the first request, applied once, and all or nothing when one fails half-way.

use quicklite::Error;
use refinery::{Migration, Runner};

mod common;

use common::both_backends;

fn runner(steps: &[(&str, &str)]) -> Runner {
    let migrations: Vec<Migration> = steps
        .iter()
        .map(|(name, sql)| Migration::unapplied(name, sql).expect("a well-named migration"))
        .collect();
    // Grouped: every pending migration in one transaction, so a failure applies none of them.
    Runner::new(&migrations).set_grouped(true)
}

const V1: (&str, &str) = (
    "V1__item",
    "CREATE TABLE item (id INTEGER PRIMARY KEY, name TEXT NOT NULL);",
);
const V2: (&str, &str) = (
    "V2__item_price",
    "ALTER TABLE item ADD COLUMN cents INTEGER NOT NULL DEFAULT 0;",
);
const V3_BROKEN: (&str, &str) = ("V3__broken", "ALTER TABLE nowhere ADD COLUMN x INTEGER;");

both_backends! {
    #[tokio::test]
    async fn refinery_migrates_before_the_first_request_and_once(backend) {
        let dir = tempfile::tempdir().unwrap();
        let migrate = |b: quicklite::Builder| b.migrate(|conn| runner(&[V1, V2]).run(conn).map(|_| ()));
        let db = common::open_in(backend, dir.path(), migrate).await;
        db.execute("INSERT INTO item (name, cents) VALUES ('tea', 250)", ()).await.unwrap();
        db.close().await;
        // Opened again: nothing left to apply, the data is there.
        let db = common::open_in(backend, dir.path(), migrate).await;
        let applied: i64 = db
            .query_row("SELECT count(*) FROM refinery_schema_history", [], |r| r.get(0))
            .await
            .unwrap();
        assert_eq!(applied, 2);
        assert_eq!(common::count(&db, "item").await, 1);
        db.close().await;
    }
}

both_backends! {
    #[tokio::test]
    async fn a_migration_failing_half_way_applies_nothing_and_the_database_opens_once_fixed(backend) {
        let dir = tempfile::tempdir().unwrap();
        let refused = common::try_open_in(backend, dir.path(), |b| {
            b.migrate(|conn| runner(&[V1, V2, V3_BROKEN]).run(conn).map(|_| ()))
        })
        .await;
        match refused {
            Err(Error::Setup { stage: "migration", message, .. }) => {
                assert!(message.contains("V3__broken") || message.contains("nowhere"), "{message}")
            }
            Err(other) => panic!("unexpected error: {other}"),
            Ok(_) => panic!("the open succeeded"),
        }
        // Fixed: the good migrations apply from the start, as nothing of the failed run was kept.
        let db = common::open_in(backend, dir.path(), |b| {
            b.migrate(|conn| runner(&[V1, V2]).run(conn).map(|_| ()))
        })
        .await;
        db.execute("INSERT INTO item (name, cents) VALUES ('tea', 250)", ()).await.unwrap();
        let applied: i64 = db
            .query_row("SELECT count(*) FROM refinery_schema_history", [], |r| r.get(0))
            .await
            .unwrap();
        assert_eq!(applied, 2);
        db.close().await;
    }
}

/// A migration that stops half-way through its SQL: the last statement is cut short (the first, run in autocommit
/// mode as `execute_batch` runs it, stays).
fn cut_short(conn: &mut rusqlite::Connection) -> rusqlite::Result<()> {
    conn.execute_batch(
        "CREATE TABLE player (id INTEGER PRIMARY KEY); CREATE TABLE score (player INTEGER",
    )
}

/// A migration whose second statement breaks a constraint.
fn breaks_a_constraint(conn: &mut rusqlite::Connection) -> rusqlite::Result<()> {
    conn.execute_batch(
        "CREATE TABLE member (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
         INSERT INTO member (id, name) VALUES (1, NULL);",
    )
}

both_backends! {
    #[tokio::test]
    async fn a_failed_migration_is_named_with_the_last_statement_it_began(backend) {
        let dir = tempfile::tempdir().unwrap();
        let message = |refused: quicklite::Result<common::TestDb>| match refused {
            Err(Error::Setup { stage: "migration", message, .. }) => message,
            Err(other) => panic!("unexpected error: {other}"),
            Ok(_) => panic!("the open succeeded"),
        };
        let cut = message(common::try_open_in(backend, dir.path(), |b| b.migrate(cut_short)).await);
        assert!(cut.contains("cut_short failed: incomplete input"), "{cut}");
        assert!(
            cut.contains("the last statement it began: CREATE TABLE player (id INTEGER PRIMARY KEY)"),
            "{cut}"
        );
        let broke =
            message(common::try_open_in(backend, dir.path(), |b| b.migrate(breaks_a_constraint)).await);
        assert!(broke.contains("breaks_a_constraint failed: NOT NULL constraint failed: member.name"), "{broke}");
        assert!(
            broke.contains("the last statement it began: INSERT INTO member (id, name) VALUES (1, NULL)"),
            "{broke}"
        );
        // The statement profile is back after a migration: slow statements are still seen.
        let db = common::open_in(backend, dir.path(), |b| {
            b.migrate(|conn| conn.execute_batch("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY)"))
                .slow_statement_threshold(Some(std::time::Duration::ZERO))
        })
        .await;
        db.execute("INSERT INTO t (id) VALUES (1)", ()).await.unwrap();
        assert!(db.metrics().slow_statements > 0, "{:#?}", db.metrics());
        db.close().await;
    }
}
