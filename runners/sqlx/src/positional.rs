//! A custom workload's SQL in the parameter form sqlx binds.
//!
//! A custom workload comes with each statement's values for SQLite's parameters `1..=n`, as SQLite numbers them:
//! a named parameter (`:id`, `@id`, `$id`) takes the number of its first appearance, or the next one; `?NNN` is
//! NNN; a bare `?` is the next number. sqlx's SQLite driver binds by its own reading of the text instead: it refuses
//! `:id` and `@id`, takes `$NNN` as value NNN whatever number SQLite gave it, and numbers bare `?` by counting them.
//! [`positional`] writes every parameter as `?k`, `k` the number SQLite gives it, so sqlx binds value `k` to the
//! parameter SQLite numbers `k`.

use std::collections::HashMap;
use std::fmt::Write as _;

/// `sql` with every parameter written `?k`, `k` its number in SQLite; string literals, quoted identifiers and
/// comments are copied as they are. Follows SQLite's tokenizer (`tokenize.c`) and its numbering of parameters
/// (`sqlite3ExprAssignVarNumber`).
pub fn positional(sql: &str) -> String {
    let bytes = sql.as_bytes();
    let len = bytes.len();
    let mut out = String::with_capacity(len + 8);
    // Named parameters (with their prefix: `:a` and `@a` are two) and their numbers.
    let mut names: HashMap<&str, u64> = HashMap::new();
    let mut highest: u64 = 0;
    // Bytes of `sql` before this offset are in `out` already.
    let mut copied = 0;
    let mut i = 0;
    while i < len {
        let start = i;
        let number = match bytes[i] {
            quote @ (b'\'' | b'"' | b'`') => {
                i = quoted_end(bytes, i + 1, quote);
                None
            }
            b'[' => {
                i = find(bytes, i + 1, b"]").map_or(len, |end| end + 1);
                None
            }
            b'-' if bytes.get(i + 1) == Some(&b'-') => {
                i = find(bytes, i + 2, b"\n").map_or(len, |end| end + 1);
                None
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                i = find(bytes, i + 2, b"*/").map_or(len, |end| end + 2);
                None
            }
            b'?' => {
                i += 1;
                while i < len && bytes[i].is_ascii_digit() {
                    i += 1;
                }
                let number = if i == start + 1 {
                    highest + 1
                } else {
                    // SQLite refuses a number out of range; the lab checked the statement against SQLite.
                    sql[start + 1..i].parse().unwrap_or(u64::MAX)
                };
                highest = highest.max(number);
                Some(number)
            }
            b':' | b'@' | b'$' | b'#' => match variable_end(bytes, i + 1) {
                Some(end) => {
                    i = end;
                    Some(*names.entry(&sql[start..end]).or_insert_with(|| {
                        highest += 1;
                        highest
                    }))
                }
                None => {
                    i += 1;
                    None
                }
            },
            byte if is_id_char(byte) => {
                // A whole identifier, keyword or number: a `$` inside one starts no parameter.
                while i < len && is_id_char(bytes[i]) {
                    i += 1;
                }
                None
            }
            _ => {
                i += 1;
                None
            }
        };
        if let Some(number) = number {
            out.push_str(&sql[copied..start]);
            write!(out, "?{number}").expect("writing to a String");
            copied = i;
        }
    }
    out.push_str(&sql[copied..]);
    out
}

/// The end of a literal or quoted identifier whose body starts at `from`, closed by `quote` (doubled inside it).
fn quoted_end(bytes: &[u8], from: usize, quote: u8) -> usize {
    let mut i = from;
    while i < bytes.len() {
        if bytes[i] == quote {
            if bytes.get(i + 1) == Some(&quote) {
                i += 2;
                continue;
            }
            return i + 1;
        }
        i += 1;
    }
    bytes.len()
}

/// The end of a named parameter whose name starts at `from` (after its prefix), or `None` if it has no name:
/// identifier characters, with `::` and a trailing `(…)` allowed as in Tcl's variables.
fn variable_end(bytes: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    let mut named = false;
    while i < bytes.len() {
        let byte = bytes[i];
        if is_id_char(byte) {
            named = true;
            i += 1;
        } else if byte == b'(' && named {
            while i < bytes.len() && !bytes[i].is_ascii_whitespace() && bytes[i] != b')' {
                i += 1;
            }
            if i < bytes.len() && bytes[i] == b')' {
                i += 1;
            }
            break;
        } else if byte == b':' && bytes.get(i + 1) == Some(&b':') {
            i += 2;
        } else {
            break;
        }
    }
    named.then_some(i)
}

/// SQLite's `IdChar`: a letter, a digit, `_`, `$` or any byte of a non-ASCII character.
fn is_id_char(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'$' || byte >= 0x80
}

/// The offset of the first `needle` in `bytes` at or after `from`.
fn find(bytes: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    bytes
        .get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|at| from + at)
}

#[cfg(test)]
mod tests {
    use std::ffi::{CString, c_int};

    use libsqlite3_sys as ffi;

    use super::positional;

    /// The row SQLite returns for `sql` (a `SELECT` of parameters) with value `k` bound to parameter `k`, and the
    /// number of parameters.
    fn row_of(sql: &str) -> (Vec<i64>, c_int) {
        let sql = CString::new(sql).unwrap();
        // SAFETY: a private in-memory database and statement, both finalized before returning; every index bound
        // or read is within the statement's parameter and column counts.
        unsafe {
            let mut db = std::ptr::null_mut();
            assert_eq!(
                ffi::sqlite3_open(c":memory:".as_ptr(), &mut db),
                ffi::SQLITE_OK
            );
            let mut stmt = std::ptr::null_mut();
            let rc = ffi::sqlite3_prepare_v2(db, sql.as_ptr(), -1, &mut stmt, std::ptr::null_mut());
            assert_eq!(rc, ffi::SQLITE_OK, "{sql:?}");
            let count = ffi::sqlite3_bind_parameter_count(stmt);
            for k in 1..=count {
                assert_eq!(
                    ffi::sqlite3_bind_int64(stmt, k, i64::from(k)),
                    ffi::SQLITE_OK
                );
            }
            assert_eq!(ffi::sqlite3_step(stmt), ffi::SQLITE_ROW);
            let row = (0..ffi::sqlite3_column_count(stmt))
                .map(|column| ffi::sqlite3_column_int64(stmt, column))
                .collect();
            ffi::sqlite3_finalize(stmt);
            ffi::sqlite3_close(db);
            (row, count)
        }
    }

    #[test]
    fn sqlite_binds_the_rewritten_text_as_the_original() {
        for sql in [
            "SELECT :a, :b, :a",
            "SELECT @x, $y, :x, @x, ?",
            "SELECT $2, $1, $2",
            "SELECT ?, ?5, ?, :a, ?2",
            "SELECT $a::b, $c(d), $a::b, ':e' = :e",
        ] {
            assert_eq!(row_of(&positional(sql)), row_of(sql), "{sql}");
        }
    }

    #[test]
    fn names_are_numbered_by_first_appearance() {
        assert_eq!(
            positional("UPDATE t SET a = :a WHERE id = :id AND b > :a"),
            "UPDATE t SET a = ?1 WHERE id = ?2 AND b > ?1"
        );
        assert_eq!(positional("SELECT @x, $y, :x, @x"), "SELECT ?1, ?2, ?3, ?1");
    }

    #[test]
    fn numbered_and_bare_parameters_keep_sqlite_s_numbers() {
        // `$2` is a name to SQLite (number 1 here), whatever sqlx would make of it.
        assert_eq!(positional("SELECT $2, $1, $2"), "SELECT ?1, ?2, ?1");
        assert_eq!(positional("SELECT ?, ?, ?"), "SELECT ?1, ?2, ?3");
        assert_eq!(positional("SELECT ?5, ?, :a"), "SELECT ?5, ?6, ?7");
        assert_eq!(positional("SELECT ?2, ?1, ?"), "SELECT ?2, ?1, ?3");
    }

    #[test]
    fn literals_identifiers_and_comments_are_left_alone() {
        assert_eq!(
            positional(
                "SELECT ':a', 'it''s :b', \"c:d\", `e:f`, [g:h], x'3a', a$b -- :i\n FROM t /* :j */ WHERE k = :k"
            ),
            "SELECT ':a', 'it''s :b', \"c:d\", `e:f`, [g:h], x'3a', a$b -- :i\n FROM t /* :j */ WHERE k = ?1"
        );
        assert_eq!(positional("SELECT 1 - -2, 6 / 3"), "SELECT 1 - -2, 6 / 3");
    }

    #[test]
    fn tcl_style_names_are_whole_parameters() {
        assert_eq!(
            positional("SELECT $a::b, $c(d), $a::b"),
            "SELECT ?1, ?2, ?1"
        );
    }

    #[test]
    fn text_without_parameters_is_unchanged() {
        let sql = "CREATE TABLE \"t\" (id INTEGER PRIMARY KEY, note TEXT DEFAULT 'n/a')";
        assert_eq!(positional(sql), sql);
    }
}
