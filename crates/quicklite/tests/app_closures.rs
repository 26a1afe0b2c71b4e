//! Closures as applications write them: returning their own error types (`read_and_then`, `write_and_then`), and
//! needing the connection itself (`with_write_connection_mut`). On both backends.

use quicklite::Error;
use quicklite::rusqlite::{self, TransactionBehavior};

mod common;

use common::both_backends;

/// An application's error type, as thiserror users write it.
#[derive(Debug, thiserror::Error)]
enum AppError {
    #[error(transparent)]
    Db(#[from] Error),
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    #[error("invalid order: {0}")]
    Invalid(String),
}

both_backends! {
    #[tokio::test]
    async fn a_closure_returns_the_applications_own_errors(backend) {
        let db = common::open(backend, |b| b).await;
        db.execute_batch("CREATE TABLE orders (id INTEGER PRIMARY KEY, qty INTEGER NOT NULL)")
            .await
            .unwrap();
        // The application's own error rolls back the closure's work and comes back as it was.
        let refused = db
            .write_and_then(|c| {
                c.execute("INSERT INTO orders (qty) VALUES (0)", [])?;
                Err::<(), _>(AppError::Invalid("a quantity of zero".into()))
            })
            .await;
        assert!(matches!(&refused, Err(AppError::Invalid(m)) if m == "a quantity of zero"), "{refused:?}");
        let id = db
            .write_and_then(|c| {
                c.execute("INSERT INTO orders (qty) VALUES (3)", [])?;
                Ok::<_, AppError>(c.last_insert_rowid())
            })
            .await
            .unwrap();
        assert_eq!(common::count(&db, "orders").await, 1, "only the valid order was committed");
        // `?` on rusqlite's errors inside the closure.
        let missing = db
            .read_and_then(|c| {
                let qty: i64 = c.query_row("SELECT qty FROM orders WHERE id = 99", [], |r| r.get(0))?;
                Ok::<_, AppError>(qty)
            })
            .await;
        assert!(
            matches!(missing, Err(AppError::Sqlite(rusqlite::Error::QueryReturnedNoRows))),
            "{missing:?}"
        );
        let qty = db
            .read_and_then(move |c| {
                Ok::<i64, AppError>(c.query_row("SELECT qty FROM orders WHERE id = ?1", [id], |r| r.get(0))?)
            })
            .await
            .unwrap();
        assert_eq!(qty, 3);
        // A panic is quicklite's to report: it arrives through `From<quicklite::Error>`.
        let panicked = db
            .read_and_then(|_| -> Result<(), AppError> { panic!("bug") })
            .await;
        assert!(matches!(panicked, Err(AppError::Db(Error::Panic { .. }))), "{panicked:?}");
        // So does a closed database.
        db.close().await;
        let closed = db.read_and_then(|_| Ok::<_, AppError>(())).await;
        assert!(matches!(closed, Err(AppError::Db(Error::Closed))), "{closed:?}");
    }
}

both_backends! {
    #[tokio::test]
    async fn anyhow_errors_pass_through(backend) {
        let db = common::open(backend, |b| b).await;
        let e = db
            .read_and_then(|_| -> anyhow::Result<()> { anyhow::bail!("no such customer") })
            .await
            .unwrap_err();
        assert_eq!(e.to_string(), "no such customer");
        assert!(e.downcast_ref::<Error>().is_none(), "the application's error, not quicklite's");
        db.close().await;
    }
}

both_backends! {
    #[tokio::test]
    async fn the_connection_itself_for_work_that_runs_alone(backend) {
        let db = common::open(backend, |b| b).await;
        db.execute_batch("CREATE TABLE t (a)").await.unwrap();
        // rusqlite's `Transaction` with a behaviour of its own needs `&mut Connection`.
        db.with_write_connection_mut(|c| {
            let tx = c.transaction_with_behavior(TransactionBehavior::Exclusive)?;
            tx.execute("INSERT INTO t VALUES (1)", [])?;
            tx.commit()
        })
        .await
        .unwrap();
        // Dropped without commit: rolled back by rusqlite, nothing left open.
        db.with_write_connection_mut(|c| {
            let tx = c.transaction()?;
            tx.execute("INSERT INTO t VALUES (2)", [])?;
            Ok(())
        })
        .await
        .unwrap();
        // Left open by hand: rolled back by the handle and reported.
        let left_open = db
            .with_write_connection_mut(|c| c.execute_batch("BEGIN; INSERT INTO t VALUES (3);"))
            .await;
        assert!(matches!(left_open, Err(Error::TransactionLeftOpen)), "{left_open:?}");
        assert_eq!(common::count(&db, "t").await, 1);
        // Its commits are visible to the next read (read-your-writes).
        db.with_write_connection_mut(|c| c.execute("INSERT INTO t VALUES (4)", []).map(|_| ()))
            .await
            .unwrap();
        assert_eq!(common::count(&db, "t").await, 2);
        db.close().await;
    }
}

#[tokio::test]
async fn a_temporary_database_works_like_a_file_and_leaves_nothing_behind() {
    let db = quicklite::Database::temporary().await.unwrap();
    let dir = db.path().parent().unwrap().to_path_buf();
    assert!(dir.is_dir());
    assert_eq!(
        db.pragmas()["journal_mode"],
        "wal",
        "a real file, in WAL mode"
    );
    db.execute_batch("CREATE TABLE t (a)").await.unwrap();
    // Concurrent writes commit together and the readers see them, as with any database.
    let writes: Vec<_> = (0..20)
        .map(|i| {
            let db = db.clone();
            tokio::spawn(async move { db.execute("INSERT INTO t VALUES (?1)", (i,)).await })
        })
        .collect();
    for w in writes {
        w.await.unwrap().unwrap();
    }
    assert_eq!(common::count(&db, "t").await, 20);
    db.close().await.unwrap();
    drop(db);
    assert!(!dir.exists(), "the directory went with the last handle");
}

#[tokio::test]
async fn a_temporary_registry_works_like_a_directory_and_leaves_nothing_behind() {
    let tenants = quicklite::Registry::temporary().await.unwrap();
    let dir = tenants.dir().to_path_buf();
    let acme = tenants.get("acme").await.unwrap();
    acme.execute_batch("CREATE TABLE t (a); INSERT INTO t VALUES (1)")
        .await
        .unwrap();
    assert!(dir.join("acme.db").exists());
    assert_eq!(common::count(&acme, "t").await, 1);
    tenants.close().await.unwrap();
    drop((acme, tenants));
    assert!(!dir.exists(), "the directory went with the registry");
}
