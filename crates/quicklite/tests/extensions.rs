//! A real SQLite extension (sqlite-vec, vector search) registered on every connection through
//! `Builder::on_connection`: its virtual table written through `write`, searched through `read`, on both backends,
//! and still there after a registry closes and reopens the database.

use std::ffi::{c_char, c_int};

use quicklite::rusqlite::{self, ffi};

mod common;

use common::both_backends;

/// Registers sqlite-vec's functions and virtual table on `conn`.
fn load_sqlite_vec(
    conn: &mut rusqlite::Connection,
    _role: quicklite::ConnectionRole,
) -> rusqlite::Result<()> {
    type Init = unsafe extern "C" fn(
        *mut ffi::sqlite3,
        *mut *mut c_char,
        *const ffi::sqlite3_api_routines,
    ) -> c_int;
    // SAFETY: sqlite-vec is compiled into this process (`SQLITE_CORE`) and declares its entry point without
    // arguments; its real signature is SQLite's extension entry point, which `Init` spells out. The handle is the
    // live connection's, used on the thread that owns it.
    let rc = unsafe {
        let init: Init = std::mem::transmute(sqlite_vec::sqlite3_vec_init as *const ());
        init(conn.handle(), std::ptr::null_mut(), std::ptr::null())
    };
    if rc == ffi::SQLITE_OK {
        Ok(())
    } else {
        Err(rusqlite::Error::SqliteFailure(
            ffi::Error::new(rc),
            Some("sqlite-vec did not load".into()),
        ))
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_vector_search_through_an_extension_on_every_connection(backend) {
        let db = common::open(backend, |b| b.on_connection(load_sqlite_vec)).await;
        let version: String = db.query_row("SELECT vec_version()", [], |r| r.get(0)).await.unwrap();
        assert!(version.starts_with('v'), "{version}");
        db.execute_batch("CREATE VIRTUAL TABLE items USING vec0(embedding float[3])").await.unwrap();
        db.transaction(|c| {
            let mut insert = c.prepare("INSERT INTO items (rowid, embedding) VALUES (?1, ?2)")?;
            for (id, v) in [(1, "[1.0, 0.0, 0.0]"), (2, "[0.0, 1.0, 0.0]"), (3, "[0.9, 0.1, 0.0]")] {
                insert.execute((id, v))?;
            }
            Ok(())
        })
        .await
        .unwrap();
        let nearest = || {
            db.query_all(
                "SELECT rowid FROM items WHERE embedding MATCH ?1 ORDER BY distance LIMIT 2",
                ("[1.0, 0.05, 0.0]",),
                |r| r.get::<_, i64>(0),
            )
        };
        assert_eq!(nearest().await.unwrap(), [1, 3]);
        // Registry: the connections close; the reopened ones have the extension again.
        db.evict().await;
        assert_eq!(nearest().await.unwrap(), [1, 3]);
        db.close().await;
    }
}

both_backends! {
    #[tokio::test]
    async fn an_extension_that_fails_to_load_fails_the_open_clearly(backend) {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("no_such_extension");
        let refused = common::try_open_in(backend, dir.path(), move |b| {
            let missing = missing.clone();
            b.on_connection(move |conn, _| {
                // SAFETY: loading extensions is turned on only for this call; the library does not exist, so no
                // code is loaded.
                unsafe {
                    let _guard = rusqlite::LoadExtensionGuard::new(conn)?;
                    conn.load_extension(&missing, None::<&str>)
                }
            })
        })
        .await;
        match refused {
            Err(quicklite::Error::Setup { stage: "connection set-up", connection: "writer", message }) => {
                assert!(message.contains("no_such_extension"), "{message}")
            }
            Err(other) => panic!("unexpected error: {other}"),
            Ok(_) => panic!("the open succeeded"),
        }
        // Nothing was left open: the database opens without it.
        let db = common::open_in(backend, dir.path(), |b| b).await;
        db.execute_batch("CREATE TABLE t (a)").await.unwrap();
        db.close().await;
    }
}
