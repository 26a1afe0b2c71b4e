//! Encryption at rest with SQLCipher (`--features sqlcipher`): every connection gets the key first, so the file
//! is unreadable without it and readable with it, through both backends; a wrong key fails clearly; backups are
//! encrypted too.

#![cfg(feature = "sqlcipher")]

use std::path::Path;
use std::process::Command;

use quicklite::{Database, Error};

mod common;

use common::both_backends;

const KEY: &str = "correct horse battery staple";

/// What Python's sqlite3 (plain SQLite, another program) makes of the file.
fn python_reads(path: &Path) -> Result<String, String> {
    let out = Command::new("python3")
        .arg("-c")
        .arg("import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute('SELECT count(*) FROM secret').fetchone()[0])")
        .arg(path)
        .output()
        .expect("python3 runs");
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).to_string())
    }
}

both_backends! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_file_is_unreadable_without_the_key_and_readable_with_it(backend) {
        let dir = tempfile::tempdir().unwrap();
        let db = common::open_in(backend, dir.path(), |b| b.key(KEY)).await;
        db.execute_batch("CREATE TABLE secret (a TEXT); INSERT INTO secret VALUES ('the recipe')")
            .await
            .unwrap();
        assert_eq!(common::count(&db, "secret").await, 1);
        // Registry: the connections close and reopen with the key.
        db.evict().await;
        assert_eq!(common::count(&db, "secret").await, 1);
        let copy = dir.path().join("copy.db");
        db.backup(&copy).await.unwrap();
        let compact = dir.path().join("compact.db");
        db.vacuum_into(&compact).await.unwrap();
        let path = db.path().to_path_buf();
        db.close().await;

        // Another program with plain SQLite sees no database, in the file or its copies.
        for file in [&path, &copy, &compact] {
            let seen = python_reads(file);
            assert!(
                matches!(&seen, Err(e) if e.contains("file is not a database")),
                "{}: {seen:?}",
                file.display()
            );
        }
        // With the key, every one of them opens.
        for file in [&path, &copy, &compact] {
            let db = Database::builder(file).key(KEY).open().await.unwrap();
            assert_eq!(common::count(&db, "secret").await, 1, "{}", file.display());
            db.close().await.unwrap();
        }
    }
}

both_backends! {
    #[tokio::test]
    async fn a_wrong_key_fails_the_open_clearly(backend) {
        let dir = tempfile::tempdir().unwrap();
        {
            let db = common::open_in(backend, dir.path(), |b| b.key(KEY)).await;
            db.execute_batch("CREATE TABLE secret (a)").await.unwrap();
            db.close().await;
        }
        for wrong in [Some("not the key"), None] {
            let refused = common::try_open_in(backend, dir.path(), move |b| match wrong {
                Some(key) => b.key(key),
                None => b,
            })
            .await;
            match refused {
                Err(e @ Error::Sqlite(_)) => {
                    assert_eq!(e.sqlite_code(), Some(quicklite::rusqlite::ErrorCode::NotADatabase), "{e}")
                }
                Err(other) => panic!("unexpected error: {other}"),
                Ok(_) => panic!("opened with {wrong:?}"),
            }
        }
        // The right key still opens it: nothing was damaged.
        let db = common::open_in(backend, dir.path(), |b| b.key(KEY)).await;
        assert_eq!(common::count(&db, "secret").await, 0);
        db.close().await;
    }
}
