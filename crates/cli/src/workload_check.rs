//! The SQL of a workload file checked against SQLite before any cell runs: the schema created in memory, every
//! statement prepared, its parameters matched with the transaction's, each transaction classified as a read or a
//! write, and every transaction tried once on the seeded rows. A mistake is an error naming its line.

use std::ffi::CString;

use quicklite::rusqlite::types::{ToSqlOutput, ValueRef};
use quicklite::rusqlite::{self, Connection, ffi, params_from_iter};
use quicklite_lab::Result;
use quicklite_lab::workload_file::{Sql, WorkloadFile};
use quicklite_lab_core::{
    Bound, CustomStatement, CustomWorkload, Param, SeedColumn, SeedTable, Transaction,
};

/// Statements that manage transactions, which the lab does itself around each of the file's transactions.
const TRANSACTION_CONTROL: [&str; 6] =
    ["BEGIN", "COMMIT", "END", "ROLLBACK", "SAVEPOINT", "RELEASE"];

/// Checks `file`'s SQL and returns the workload a cell carries.
pub fn check(file: &WorkloadFile) -> Result<CustomWorkload> {
    let sqlite =
        |line: usize, what: &str, e: rusqlite::Error| file.error_at(line, format!("{what}: {e}"));
    let conn = Connection::open_in_memory().map_err(|e| sqlite(1, "cannot open SQLite", e))?;
    let mut schema = Vec::new();
    for (offset, statement) in split(&file.schema.text) {
        conn.execute_batch(statement).map_err(|e| {
            let line = error_line(&file.schema, offset, &e);
            sqlite(line, "the schema fails", e)
        })?;
        schema.push(statement.to_owned());
    }
    let mut seed = Vec::new();
    for spec in &file.seed {
        let table = SeedTable {
            table: spec.table.clone(),
            rows: spec.rows,
            columns: spec
                .columns
                .iter()
                .map(|(name, values)| SeedColumn {
                    name: name.clone(),
                    values: values.clone(),
                })
                .collect(),
        };
        conn.prepare(&table.insert_sql())
            .map_err(|e| sqlite(spec.line, &format!("cannot seed table `{}`", spec.table), e))?;
        seed.push(table);
    }
    let mut transactions = Vec::new();
    for spec in &file.transactions {
        let mut statements = Vec::new();
        let mut used = vec![false; spec.params.len()];
        let mut writes = false;
        for (offset, text) in split(&spec.sql.text) {
            let line = spec.sql.line_at(offset);
            if let Some(keyword) = transaction_control(text) {
                return Err(file.error_at(
                    line,
                    format!(
                        "`{keyword}` in transaction `{}`: the lab runs each transaction in a transaction of its own (its reads in one snapshot, its writes committed together), so leave out BEGIN, COMMIT and the like",
                        spec.name
                    ),
                ));
            }
            let stmt = conn.prepare(text).map_err(|e| {
                let line = error_line(&spec.sql, offset, &e);
                sqlite(line, &format!("transaction `{}` fails", spec.name), e)
            })?;
            let mut binds = Vec::new();
            for index in 1..=stmt.parameter_count() {
                let name = stmt.parameter_name(index).unwrap_or("?");
                let Some(bare) = name.strip_prefix([':', '@', '$']) else {
                    return Err(file.error_at(
                        line,
                        format!(
                            "`{name}` in transaction `{}`: name every parameter (`:id`) and give it values in `params`",
                            spec.name
                        ),
                    ));
                };
                let Some(k) = spec.params.iter().position(|(p, _, _)| p == bare) else {
                    return Err(file.error_at(
                        line,
                        format!(
                            "parameter `{name}` of transaction `{}` never gets a value: declare it in the transaction's `params`, e.g. `params.{bare} = {{ uniform = [1, 1000] }}`",
                            spec.name
                        ),
                    ));
                };
                used[k] = true;
                binds.push(k);
            }
            writes |= !stmt.readonly();
            statements.push(CustomStatement {
                sql: text.to_owned(),
                binds,
            });
        }
        if statements.is_empty() {
            return Err(file.error_at(
                spec.sql.line,
                format!("transaction `{}` has no statement", spec.name),
            ));
        }
        if let Some(k) = used.iter().position(|u| !u) {
            let (name, _, line) = &spec.params[k];
            return Err(file.error_at(
                *line,
                format!(
                    "parameter `{name}` of transaction `{}` is used by no statement",
                    spec.name
                ),
            ));
        }
        transactions.push(Transaction {
            name: spec.name.clone(),
            weight: spec.weight,
            writes,
            params: spec
                .params
                .iter()
                .map(|(_, values, _)| values.clone())
                .collect(),
            statements,
        });
    }
    let workload = CustomWorkload {
        name: file.name.clone(),
        schema,
        seed,
        transactions,
    };
    trial(file, &conn, &workload)?;
    Ok(workload)
}

/// Seeds every table as a cell will and runs every transaction once on the rows, so that a statement that cannot
/// run (a constraint its values break, a type its column refuses) fails here rather than in every cell.
fn trial(file: &WorkloadFile, conn: &Connection, workload: &CustomWorkload) -> Result<()> {
    let rows = CustomWorkload {
        schema: Vec::new(),
        ..workload.clone()
    };
    conn.execute_batch("BEGIN")
        .map_err(|e| file.error_at(1, format!("cannot seed: {e}")))?;
    for (row, statement) in rows.seed_statements(0).enumerate() {
        execute(conn, &statement.sql, &statement.params).map_err(|e| {
            let table = table_of_row(&rows, row);
            file.error_at(
                file.seed[table].line,
                format!("seeding table `{}` fails: {e}", file.seed[table].table),
            )
        })?;
    }
    conn.execute_batch("COMMIT")
        .map_err(|e| file.error_at(1, format!("cannot seed: {e}")))?;
    for ((spec, transaction), statements) in file
        .transactions
        .iter()
        .zip(&workload.transactions)
        .zip(workload.draw_each(0))
    {
        conn.execute_batch("SAVEPOINT trial")
            .map_err(|e| file.error_at(spec.line, format!("cannot try `{}`: {e}", spec.name)))?;
        let outcome = statements.iter().zip(split(&spec.sql.text)).try_for_each(
            |(bound, (offset, _)): (&Bound, (usize, &str))| {
                execute(conn, &bound.sql, &bound.params).map_err(|e| {
                    file.error_at(
                        spec.sql.line_at(offset),
                        format!(
                            "transaction `{}` fails on a trial run over the seeded rows: {e}",
                            transaction.name
                        ),
                    )
                })
            },
        );
        // The trial's writes are not kept: the next transaction tries against the seeded rows alone.
        let _ = conn.execute_batch("ROLLBACK TO trial; RELEASE trial");
        outcome?;
    }
    Ok(())
}

/// Which table of `workload` seed row `row` belongs to (rows come table after table).
fn table_of_row(workload: &CustomWorkload, row: usize) -> usize {
    let mut end = 0;
    for (k, table) in workload.seed.iter().enumerate() {
        end += table.rows as usize;
        if row < end {
            return k;
        }
    }
    workload.seed.len().saturating_sub(1)
}

/// Runs one statement with its values, reading every row it returns.
fn execute(conn: &Connection, sql: &str, params: &[Param]) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare_cached(sql)?;
    let mut rows = stmt.query(params_from_iter(params.iter().map(|p| {
        ToSqlOutput::Borrowed(match p {
            Param::Int(v) => ValueRef::Integer(*v),
            Param::Text(v) => ValueRef::Text(v.as_bytes()),
            Param::Blob(v) => ValueRef::Blob(v),
        })
    })))?;
    while rows.next()?.is_some() {}
    Ok(())
}

/// The file's line of an error in the statement at `offset` of `sql`: where SQLite says the error is, if it says.
fn error_line(sql: &Sql, offset: usize, e: &rusqlite::Error) -> usize {
    match e {
        rusqlite::Error::SqlInputError { offset: at, .. } if *at >= 0 => {
            sql.line_at(offset + *at as usize)
        }
        _ => sql.line_at(offset),
    }
}

/// The statements of `text`, each with the byte offset where it begins (after white space and comments). A
/// statement ends at a `;` that completes it — SQLite's own `sqlite3_complete` decides, which knows string
/// literals, comments and trigger bodies — and the last may leave out its `;`. Empty statements are skipped.
fn split(text: &str) -> Vec<(usize, &str)> {
    let mut statements = Vec::new();
    let mut start = 0;
    let mut push = |from: usize, to: usize| {
        let piece = &text[from..to];
        let body = after_blank(piece);
        if !after_blank(body.trim_end_matches(';')).is_empty() {
            statements.push((to - body.len(), body.trim_end()));
        }
    };
    for (at, _) in text.match_indices(';') {
        if complete(&text[start..=at]) {
            push(start, at + 1);
            start = at + 1;
        }
    }
    push(start, text.len());
    statements
}

/// Whether `sql` ends a complete statement, by `sqlite3_complete`.
fn complete(sql: &str) -> bool {
    match CString::new(sql) {
        // SAFETY: a NUL-terminated string that lives across the call; sqlite3_complete only reads it.
        Ok(sql) => unsafe { ffi::sqlite3_complete(sql.as_ptr()) != 0 },
        Err(_) => false,
    }
}

/// `text` after its leading white space and comments.
fn after_blank(mut text: &str) -> &str {
    loop {
        text = text.trim_start();
        if let Some(rest) = text.strip_prefix("--") {
            text = rest.split_once('\n').map_or("", |(_, after)| after);
        } else if let Some(rest) = text.strip_prefix("/*") {
            text = rest.split_once("*/").map_or("", |(_, after)| after);
        } else {
            return text;
        }
    }
}

/// The transaction-control keyword `text` begins with, if it does.
fn transaction_control(text: &str) -> Option<&'static str> {
    let first: String = text
        .trim_start()
        .chars()
        .take_while(char::is_ascii_alphabetic)
        .collect::<String>()
        .to_ascii_uppercase();
    TRANSACTION_CONTROL.into_iter().find(|k| *k == first)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    const SHOP: &str = r#"schema = """
CREATE TABLE products (id INTEGER PRIMARY KEY, name TEXT NOT NULL, stock INTEGER NOT NULL);
CREATE TABLE orders (id INTEGER PRIMARY KEY, product INTEGER NOT NULL REFERENCES products, note TEXT);
-- Orders of a product, newest first.
CREATE INDEX orders_by_product ON orders (product, id);
CREATE TRIGGER sold AFTER INSERT ON orders BEGIN
    UPDATE products SET stock = stock - 1 WHERE id = new.product;
END;
"""

[[seed]]
table = "products"
rows = 500
columns = { id = { sequence = 1 }, name = { text = [3, 9] }, stock = { uniform = [0, 50] } }

[[transaction]]
name = "page"
weight = 9
params = { id = { zipf = [1, 500] } }
sql = """
SELECT * FROM products WHERE id = :id;
SELECT id, note FROM orders WHERE product = :id ORDER BY id DESC LIMIT 5;
"""

[[transaction]]
name = "order"
params = { product = { uniform = [1, 500] }, note = { choice = ["gift; wrapped", "plain"] } }
sql = "INSERT INTO orders (product, note) VALUES (:product, :note)"
"#;

    fn checked(text: &str) -> Result<CustomWorkload> {
        check(&WorkloadFile::parse(Path::new("shop.toml"), text)?)
    }

    fn error_of(text: &str) -> String {
        checked(text).unwrap_err().to_string()
    }

    #[test]
    fn a_good_file_becomes_a_workload_with_its_reads_and_writes_told_apart() {
        let workload = checked(SHOP).unwrap();
        assert_eq!(workload.name, "shop");
        // The trigger's body keeps its `;`: four schema statements.
        assert_eq!(workload.schema.len(), 4);
        assert!(
            workload.schema[3].starts_with("CREATE TRIGGER")
                && workload.schema[3].ends_with("END;")
        );
        let [page, order] = &workload.transactions[..] else {
            panic!("{:?}", workload.transactions)
        };
        assert!(!page.writes && order.writes);
        assert_eq!(page.statements.len(), 2);
        // `:id` is the transaction's only parameter, bound in both statements.
        assert_eq!(page.statements[0].binds, [0]);
        assert_eq!(page.statements[1].binds, [0]);
        // Parameters in name order: note, product; the statement binds product first.
        assert_eq!(order.statements[0].binds, [1, 0]);
        assert_eq!(workload.seed[0].columns.len(), 3);
    }

    #[test]
    fn a_syntax_error_names_the_line_of_the_statement() {
        let err = error_of(&SHOP.replace("ORDER BY id DESC", "ORDER BY id DSC"));
        assert!(err.starts_with("shop.toml:22: "), "{err}");
        assert!(err.contains("transaction `page` fails"), "{err}");
    }

    #[test]
    fn a_schema_error_names_its_line() {
        let err = error_of(&SHOP.replace(
            "CREATE INDEX orders_by_product ON orders",
            "CREATE INDEX x ON missing",
        ));
        assert!(err.starts_with("shop.toml:5: "), "{err}");
        assert!(err.contains("no such table"), "{err}");
    }

    #[test]
    fn a_parameter_that_never_gets_a_value_is_named() {
        let err = error_of(&SHOP.replace("VALUES (:product, :note)", "VALUES (:product, :notes)"));
        assert!(err.starts_with("shop.toml:28: "), "{err}");
        assert!(
            err.contains("`:notes`") && err.contains("never gets a value"),
            "{err}"
        );
        let err = error_of(&SHOP.replace("VALUES (:product, :note)", "VALUES (:product, ?)"));
        assert!(err.contains("name every parameter"), "{err}");
    }

    #[test]
    fn a_parameter_no_statement_uses_is_named() {
        let err = error_of(&SHOP.replace(
            "params = { id = { zipf = [1, 500] } }",
            "params = { id = { zipf = [1, 500] }, other = { value = 1 } }",
        ));
        assert!(
            err.starts_with("shop.toml:19: ") && err.contains("`other`"),
            "{err}"
        );
    }

    #[test]
    fn transaction_control_is_refused() {
        let err = error_of(&SHOP.replace(
            "sql = \"INSERT INTO orders",
            "sql = \"BEGIN; INSERT INTO orders",
        ));
        assert!(
            err.contains("`BEGIN`") && err.contains("leave out"),
            "{err}"
        );
    }

    #[test]
    fn a_seed_of_an_unknown_column_and_a_failing_trial_are_errors_at_their_lines() {
        let err = error_of(&SHOP.replace("stock = { uniform", "stok = { uniform"));
        assert!(
            err.starts_with("shop.toml:12: ") && err.contains("stok"),
            "{err}"
        );
        // A value the column refuses fails the trial run, at the statement's line.
        let err = error_of(
            &SHOP
                .replace(
                    "VALUES (:product, :note)",
                    "VALUES (:product, CASE WHEN :note IS NULL THEN 1 ELSE NULL END)",
                )
                .replace("note TEXT)", "note TEXT NOT NULL)"),
        );
        assert!(
            err.starts_with("shop.toml:28: ") && err.contains("trial run"),
            "{err}"
        );
    }

    /// `examples/workloads/point-read-file.toml` is the built-in `point-read`: the same table, rows of the same
    /// sizes and ranges, the same statement, keys drawn from the same range, every operation a read.
    #[test]
    fn the_point_read_example_file_is_the_built_in_point_read() {
        use quicklite_lab_core::{ITEM_PAYLOAD_LEN, Values, Workload, sql};

        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../examples/workloads/point-read-file.toml");
        let file = check(&WorkloadFile::read(&path).unwrap()).unwrap();
        assert_eq!(file.schema, [Workload::PointRead.schema()]);
        let rows = 10_000;
        let [table] = &file.seed[..] else {
            panic!("{:?}", file.seed)
        };
        assert_eq!((table.table.as_str(), table.rows), ("items", rows));
        let [transaction] = &file.transactions[..] else {
            panic!("{:?}", file.transactions)
        };
        assert!(!transaction.writes);
        assert_eq!(
            transaction.params,
            [Values::Uniform {
                min: 1,
                max: rows as i64
            }]
        );
        assert_eq!(
            transaction.statements[0].sql,
            sql::POINT_READ.replace("?1", ":id")
        );
        // Row by row: the same ids, names of the built-in's lengths, values in its range, payloads of its size.
        let ours: Vec<_> = file.seed_statements(4).skip(1).collect();
        let theirs: Vec<_> = quicklite_lab_core::item_seed(rows, 4).collect();
        assert_eq!(ours.len(), theirs.len());
        let column = |statement: &quicklite_lab_core::Statement, name: &str| {
            let names = ["id", "name", "payload", "value"];
            statement.params[names.iter().position(|n| *n == name).unwrap()].clone()
        };
        for (ours, theirs) in ours.iter().zip(&theirs) {
            assert_eq!(column(ours, "id"), theirs.params[0]);
            let text_len = |p: Param| match p {
                Param::Text(t) => t.len(),
                other => panic!("{other:?}"),
            };
            let int = |p: Param| match p {
                Param::Int(v) => v,
                other => panic!("{other:?}"),
            };
            assert!((6..=10).contains(&text_len(column(ours, "name"))));
            assert!((6..=10).contains(&text_len(theirs.params[1].clone())));
            assert!((0..=1_000_000).contains(&int(column(ours, "value"))));
            assert_eq!(text_len(column(ours, "payload")), ITEM_PAYLOAD_LEN);
            assert_eq!(text_len(theirs.params[3].clone()), ITEM_PAYLOAD_LEN);
        }
    }

    #[test]
    fn statements_split_where_sqlite_says_they_end() {
        let text = "SELECT ';'; -- a comment; still one\n SELECT 2;\n/* only a comment */";
        let pieces: Vec<&str> = split(text).into_iter().map(|(_, s)| s).collect();
        assert_eq!(pieces, ["SELECT ';';", "SELECT 2;"]);
    }
}
