//! Rows into the caller's types with serde (`query_row_as`, `query_all_as`), on both backends.

#![cfg(feature = "serde")]

use quicklite::Error;

mod common;

use common::both_backends;

/// Every SQLite type, and a column that may be NULL.
#[derive(Debug, PartialEq, serde::Deserialize)]
struct Item {
    id: i64,
    price: f64,
    name: String,
    payload: Vec<u8>,
    note: Option<String>,
    in_stock: bool,
}

both_backends! {
    #[tokio::test]
    async fn rows_deserialize_into_the_callers_types(backend) {
        let db = common::open(backend, |b| b).await;
        db.execute_batch(
            "CREATE TABLE item (id INTEGER PRIMARY KEY, price REAL, name TEXT, payload BLOB, note TEXT, in_stock INTEGER);
             INSERT INTO item VALUES (1, 2.5, 'tea', x'00ff', NULL, 1), (2, 4.0, 'cake', x'', 'fresh', 0);",
        )
        .await
        .unwrap();
        let first: Item = db
            .query_row_as("SELECT * FROM item WHERE id = ?1", (1,))
            .await
            .unwrap();
        assert_eq!(
            first,
            Item { id: 1, price: 2.5, name: "tea".into(), payload: vec![0, 255], note: None, in_stock: true }
        );
        let all: Vec<Item> = db.query_all_as("SELECT * FROM item ORDER BY id", ()).await.unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!(all[1].note.as_deref(), Some("fresh"));
        assert!(!all[1].in_stock);
        // Fields are matched by name: the column order does not matter.
        let reordered: Item = db
            .query_row_as("SELECT in_stock, note, payload, name, price, id FROM item WHERE id = 2", ())
            .await
            .unwrap();
        assert_eq!(reordered, all.into_iter().nth(1).unwrap());
        db.close().await;
    }
}

both_backends! {
    #[tokio::test]
    async fn a_value_that_does_not_fit_names_its_column(backend) {
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Strict {
            id: i64,
            price: i64,
        }
        let db = common::open(backend, |b| b).await;
        db.execute_batch("CREATE TABLE item (id INTEGER, price TEXT); INSERT INTO item VALUES (1, 'free')")
            .await
            .unwrap();
        let e = db.query_row_as::<Strict, _>("SELECT id, price FROM item", ()).await.unwrap_err();
        match &e {
            Error::Decode { column, .. } => assert_eq!(column.as_deref(), Some("price"), "{e}"),
            other => panic!("unexpected error: {other}"),
        }
        assert!(e.to_string().contains("price"), "{e}");
        // NULL into a field that is not an Option is refused the same way.
        db.execute("UPDATE item SET price = NULL", ()).await.unwrap();
        let e = db.query_row_as::<Strict, _>("SELECT id, price FROM item", ()).await.unwrap_err();
        assert!(matches!(&e, Error::Decode { column: Some(c), .. } if c == "price"), "{e}");
        // No row is rusqlite's error, as for `query_row`.
        let none = db.query_row_as::<Strict, _>("SELECT id, price FROM item WHERE id = 9", ()).await;
        assert!(
            matches!(none, Err(Error::Sqlite(quicklite::rusqlite::Error::QueryReturnedNoRows))),
            "{none:?}"
        );
        db.close().await;
    }
}
