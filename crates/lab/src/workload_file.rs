//! Workload files (`quicklite bench --workload-file`): the user's schema, seed data and weighted transactions in
//! TOML, read with the line of every value so that a mistake is reported where it was made.
//!
//! This module checks the file's shape and values; the SQL itself is checked against SQLite by the caller (the
//! lab has no SQLite), which turns a [`WorkloadFile`] into a [`quicklite_lab_core::CustomWorkload`].
//!
//! ```toml
//! name = "shop"                       # optional: the file's stem
//! schema = """
//! CREATE TABLE products (id INTEGER PRIMARY KEY, name TEXT NOT NULL, stock INTEGER NOT NULL);
//! """
//!
//! [[seed]]
//! table = "products"
//! rows = 10_000
//! columns = { id = { sequence = 1 }, name = { text = [8, 24] }, stock = { uniform = [0, 500] } }
//!
//! [[transaction]]
//! name = "product page"
//! weight = 9                          # optional: 1
//! params = { id = { zipf = [1, 10_000] } }
//! sql = "SELECT * FROM products WHERE id = :id"
//! ```

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

use quicklite_lab_core::Values;
use serde::Deserialize;
use toml::Spanned;

use crate::error::{LabError, Result};

/// A workload file, read and checked but for its SQL.
#[derive(Debug, Clone)]
pub struct WorkloadFile {
    /// Where it was read from.
    pub path: PathBuf,
    /// The workload's name: the file's `name`, or its stem.
    pub name: String,
    /// The schema: SQL statements separated by `;`.
    pub schema: Sql,
    /// The tables to fill before the warm-up.
    pub seed: Vec<SeedSpec>,
    /// The transactions, in the file's order.
    pub transactions: Vec<TransactionSpec>,
}

/// SQL text from the file, with the line its text begins on.
#[derive(Debug, Clone, PartialEq)]
pub struct Sql {
    /// The text, as TOML decoded it.
    pub text: String,
    /// The file's line of the text's first character.
    pub line: usize,
}

impl Sql {
    /// The file's line of the text's byte `offset`.
    pub fn line_at(&self, offset: usize) -> usize {
        let before = &self.text.as_bytes()[..offset.min(self.text.len())];
        self.line + before.iter().filter(|&&b| b == b'\n').count()
    }
}

/// A table to fill, from a `[[seed]]` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct SeedSpec {
    /// The table.
    pub table: String,
    /// The line of the entry's `table`.
    pub line: usize,
    /// How many rows.
    pub rows: u64,
    /// Each column's values (in name order).
    pub columns: Vec<(String, Values)>,
}

/// A transaction, from a `[[transaction]]` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct TransactionSpec {
    /// Its name.
    pub name: String,
    /// The line of its `name`.
    pub line: usize,
    /// Its weight among the transactions.
    pub weight: u32,
    /// Its parameters by name (without the `:`), each with its values and the line it is declared on.
    pub params: Vec<(String, Values, usize)>,
    /// Its statements, separated by `;`.
    pub sql: Sql,
}

impl WorkloadFile {
    /// Reads and checks the file at `path`.
    pub fn read(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|source| LabError::Io {
            action: "reading the workload file",
            path: path.to_owned(),
            source,
        })?;
        Self::parse(path, &text)
    }

    /// Checks `text`, read from `path`.
    pub fn parse(path: &Path, text: &str) -> Result<Self> {
        let at =
            |span: Range<usize>, message: String| error(path, line_of(text, span.start), message);
        let raw: RawFile = toml::from_str(text).map_err(|e| {
            let line = e.span().map_or(1, |span| line_of(text, span.start));
            error(path, line, e.message().trim_end().to_owned())
        })?;
        let name = match raw.name {
            Some(name) => {
                let span = name.span();
                let name = name.into_inner();
                check_name(&name).map_err(|m| at(span, m))?;
                name
            }
            None => {
                let stem = path
                    .file_stem()
                    .and_then(|s| s.to_str())
                    .unwrap_or_default();
                check_name(stem)
                    .map_err(|m| error(path, 1, format!("{m}; give the workload a `name`")))?;
                stem.to_owned()
            }
        };
        let schema = sql(text, raw.schema);
        let mut seed = Vec::new();
        for entry in raw.seed {
            let line = line_of(text, entry.table.span().start);
            let rows = *entry.rows.get_ref();
            if entry.columns.is_empty() {
                return Err(error(
                    path,
                    line,
                    "a seeded table needs `columns`".to_owned(),
                ));
            }
            let mut columns = Vec::new();
            for (column, values) in entry.columns {
                let values = values_of(values).map_err(|(span, m)| at(span, m))?;
                columns.push((column.into_inner(), values));
            }
            seed.push(SeedSpec {
                table: entry.table.into_inner(),
                line,
                rows,
                columns,
            });
        }
        if raw.transaction.is_empty() {
            return Err(error(
                path,
                1,
                "no transaction: add at least one `[[transaction]]` with its `sql`".to_owned(),
            ));
        }
        let mut transactions: Vec<TransactionSpec> = Vec::new();
        for entry in raw.transaction {
            let line = line_of(text, entry.name.span().start);
            let name = entry.name.into_inner();
            if transactions.iter().any(|t| t.name == name) {
                return Err(error(
                    path,
                    line,
                    format!("a second transaction named `{name}`"),
                ));
            }
            let weight = match entry.weight {
                Some(weight) if *weight.get_ref() == 0 => {
                    return Err(at(
                        weight.span(),
                        format!(
                            "transaction `{name}` has a weight of 0: it would never run (leave it out, or give it a weight of 1 or more)"
                        ),
                    ));
                }
                Some(weight) => weight.into_inner(),
                None => 1,
            };
            let mut params = Vec::new();
            for (param, values) in entry.params {
                let param_line = line_of(text, param.span().start);
                let values = values_of(values).map_err(|(span, m)| at(span, m))?;
                params.push((param.into_inner(), values, param_line));
            }
            transactions.push(TransactionSpec {
                name,
                line,
                weight,
                params,
                sql: sql(text, entry.sql),
            });
        }
        Ok(Self {
            path: path.to_owned(),
            name,
            schema,
            seed,
            transactions,
        })
    }

    /// An error about line `line` of this file.
    pub fn error_at(&self, line: usize, message: impl Into<String>) -> LabError {
        error(&self.path, line, message.into())
    }
}

/// The error of a file at a line.
fn error(path: &Path, line: usize, message: String) -> LabError {
    LabError::WorkloadFile {
        path: path.to_owned(),
        line,
        message,
    }
}

/// The 1-based line of byte `offset` of `text`.
fn line_of(text: &str, offset: usize) -> usize {
    1 + text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
}

/// A string value of `text` as SQL, with the line its content begins on: a multi-line string's content begins
/// on the next line when its opening quotes end their line (TOML drops that newline).
fn sql(text: &str, value: Spanned<String>) -> Sql {
    let span = value.span();
    let raw = &text[span.clone()];
    let quotes = if raw.starts_with("\"\"\"") || raw.starts_with("'''") {
        3
    } else {
        1
    };
    let after = &raw[quotes.min(raw.len())..];
    let skipped =
        usize::from(quotes == 3 && (after.starts_with('\n') || after.starts_with("\r\n")));
    Sql {
        text: value.into_inner(),
        line: line_of(text, span.start) + skipped,
    }
}

/// Refuses names that cannot be a workload's: empty, or with characters a report or a file name would mangle.
fn check_name(name: &str) -> std::result::Result<(), String> {
    let valid = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !valid {
        return Err(format!(
            "`{name}` cannot name a workload: use 1 to 64 letters, digits, `-` or `_`"
        ));
    }
    if crate::catalog::WORKLOADS.contains(&name) || name == "custom" {
        return Err(format!(
            "`{name}` is a built-in workload's name: give the file's workload another `name`"
        ));
    }
    Ok(())
}

/// A generator as the file writes it: one key naming how values are drawn.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawValues {
    /// `sequence = START`.
    sequence: Option<i64>,
    /// `uniform = [MIN, MAX]`.
    uniform: Option<[i64; 2]>,
    /// `zipf = [MIN, MAX]`, with `exponent` (1 unless given).
    zipf: Option<[i64; 2]>,
    exponent: Option<f64>,
    /// `pareto = [MIN, MAX]`, with `p` (required): the power law of Anders Murphy's "100000 TPS" post.
    pareto: Option<[i64; 2]>,
    p: Option<f64>,
    /// `text = LEN` or `text = [MIN, MAX]`.
    text: Option<TextLen>,
    /// `choice = ["a", "b"]`.
    choice: Option<Vec<String>>,
    /// `value = N`.
    value: Option<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum TextLen {
    Fixed(u32),
    Range([u32; 2]),
}

/// The values a generator draws, or what is wrong with it, where.
fn values_of(raw: Spanned<RawValues>) -> std::result::Result<Values, (Range<usize>, String)> {
    let span = raw.span();
    let raw = raw.into_inner();
    let fail = |message: String| Err((span.clone(), message));
    let kinds = [
        raw.sequence.is_some(),
        raw.uniform.is_some(),
        raw.zipf.is_some(),
        raw.pareto.is_some(),
        raw.text.is_some(),
        raw.choice.is_some(),
        raw.value.is_some(),
    ];
    if kinds.iter().filter(|&&k| k).count() != 1 {
        return fail(
            "give exactly one of `sequence`, `uniform`, `zipf`, `pareto`, `text`, `choice` or `value`"
                .to_owned(),
        );
    }
    if raw.exponent.is_some() && raw.zipf.is_none() {
        return fail("`exponent` goes with `zipf` only".to_owned());
    }
    if raw.p.is_some() && raw.pareto.is_none() {
        return fail("`p` goes with `pareto` only".to_owned());
    }
    let range = |[min, max]: [i64; 2]| {
        if min > max {
            Err((
                span.clone(),
                format!("the range [{min}, {max}] is empty: the smaller value first"),
            ))
        } else {
            Ok((min, max))
        }
    };
    Ok(if let Some(start) = raw.sequence {
        Values::Sequence { start }
    } else if let Some(bounds) = raw.uniform {
        let (min, max) = range(bounds)?;
        Values::Uniform { min, max }
    } else if let Some(bounds) = raw.zipf {
        let (min, max) = range(bounds)?;
        let exponent = raw.exponent.unwrap_or(1.0);
        if !(exponent.is_finite() && exponent >= 0.0) {
            return fail(format!("a Zipf exponent is 0 or more, not {exponent}"));
        }
        Values::Zipf { min, max, exponent }
    } else if let Some(bounds) = raw.pareto {
        let (min, max) = range(bounds)?;
        let Some(p) = raw.p else {
            return fail(
                "`pareto` needs its `p`, strictly between 0 and 1 (the post's is 0.9995)"
                    .to_owned(),
            );
        };
        if !(p > 0.0 && p < 1.0) {
            return fail(format!("a Pareto `p` is strictly between 0 and 1, not {p}"));
        }
        Values::Pareto { min, max, p }
    } else if let Some(len) = raw.text {
        let (min_len, max_len) = match len {
            TextLen::Fixed(len) => (len, len),
            TextLen::Range([min, max]) if min <= max => (min, max),
            TextLen::Range([min, max]) => {
                return fail(format!(
                    "the lengths [{min}, {max}] are empty: the shorter first"
                ));
            }
        };
        Values::Text { min_len, max_len }
    } else if let Some(options) = raw.choice {
        if options.is_empty() {
            return fail("`choice` needs at least one text".to_owned());
        }
        Values::Choice { options }
    } else {
        Values::Integer {
            value: raw.value.unwrap_or_default(),
        }
    })
}

/// The file as TOML gives it, every value that an error may point at with its position.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    name: Option<Spanned<String>>,
    schema: Spanned<String>,
    #[serde(default)]
    seed: Vec<RawSeed>,
    #[serde(default)]
    transaction: Vec<RawTransaction>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSeed {
    table: Spanned<String>,
    rows: Spanned<u64>,
    #[serde(default)]
    columns: BTreeMap<Spanned<String>, Spanned<RawValues>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTransaction {
    name: Spanned<String>,
    weight: Option<Spanned<u32>>,
    #[serde(default)]
    params: BTreeMap<Spanned<String>, Spanned<RawValues>>,
    sql: Spanned<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHOP: &str = r#"# A shop.
schema = """
CREATE TABLE products (id INTEGER PRIMARY KEY, name TEXT NOT NULL, stock INTEGER NOT NULL);
"""

[[seed]]
table = "products"
rows = 1_000
columns = { id = { sequence = 1 }, name = { text = [8, 24] }, stock = { uniform = [0, 500] } }

[[transaction]]
name = "product page"
weight = 9
params = { id = { zipf = [1, 1_000], exponent = 1.1 } }
sql = "SELECT * FROM products WHERE id = :id"

[[transaction]]
name = "restock"
params.id = { uniform = [1, 1_000] }
params.note = { choice = ["a", "b"] }
sql = """
UPDATE products SET stock = stock + 1 WHERE id = :id;
SELECT :note;
"""
"#;

    fn parse(text: &str) -> Result<WorkloadFile> {
        WorkloadFile::parse(Path::new("dir/shop.toml"), text)
    }

    fn error_of(text: &str) -> String {
        parse(text).unwrap_err().to_string()
    }

    #[test]
    fn a_file_gives_its_tables_and_transactions_with_their_lines() {
        let file = parse(SHOP).unwrap();
        assert_eq!(file.name, "shop");
        assert_eq!(file.schema.line, 3);
        assert!(file.schema.text.starts_with("CREATE TABLE products"));
        assert_eq!(file.seed.len(), 1);
        let seed = &file.seed[0];
        assert_eq!(
            (seed.table.as_str(), seed.rows, seed.line),
            ("products", 1_000, 7)
        );
        let names: Vec<&str> = seed.columns.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["id", "name", "stock"]);
        assert_eq!(
            seed.columns[1].1,
            Values::Text {
                min_len: 8,
                max_len: 24
            }
        );
        let [page, restock] = &file.transactions[..] else {
            panic!("{:?}", file.transactions)
        };
        assert_eq!(
            (page.name.as_str(), page.weight, page.line),
            ("product page", 9, 12)
        );
        assert_eq!(
            page.params,
            [(
                "id".to_owned(),
                Values::Zipf {
                    min: 1,
                    max: 1_000,
                    exponent: 1.1
                },
                14
            )]
        );
        assert_eq!(page.sql.line, 15);
        // Weight 1 unless given; dotted keys work as well as inline tables.
        assert_eq!(restock.weight, 1);
        assert_eq!(restock.params.len(), 2);
        // A multi-line string's text begins on the line after its quotes; its second statement is a line further.
        assert_eq!(restock.sql.line, 22);
        let second = restock.sql.text.find("SELECT").unwrap();
        assert_eq!(restock.sql.line_at(second), 23);
    }

    #[test]
    fn the_name_is_the_file_s_stem_unless_given_and_never_a_built_in_s() {
        let named = format!("name = \"shop-2\"\n{SHOP}");
        assert_eq!(parse(&named).unwrap().name, "shop-2");
        let err = error_of(&format!("name = \"point-read\"\n{SHOP}"));
        assert!(
            err.contains("shop.toml:1:") && err.contains("built-in"),
            "{err}"
        );
        let err = WorkloadFile::parse(Path::new("my shop.toml"), SHOP)
            .unwrap_err()
            .to_string();
        assert!(err.contains("cannot name a workload"), "{err}");
    }

    #[test]
    fn an_unknown_key_is_named_with_its_line() {
        let err = error_of(&SHOP.replace("weight = 9", "wieght = 9"));
        assert!(err.starts_with("dir/shop.toml:13: "), "{err}");
        assert!(err.contains("wieght"), "{err}");
    }

    #[test]
    fn a_weight_of_zero_is_refused_at_its_line() {
        let err = error_of(&SHOP.replace("weight = 9", "weight = 0"));
        assert!(err.starts_with("dir/shop.toml:13: "), "{err}");
        assert!(err.contains("weight of 0"), "{err}");
    }

    #[test]
    fn generators_must_say_one_thing_that_makes_sense() {
        for (bad, expected) in [
            ("{ uniform = [500, 0] }", "is empty"),
            ("{ uniform = [0, 5], text = 3 }", "exactly one"),
            ("{ text = 3, exponent = 2.0 }", "goes with `zipf`"),
            ("{ zipf = [1, 9], exponent = -1.0 }", "0 or more"),
            ("{ pareto = [0, 9] }", "needs its `p`"),
            ("{ pareto = [0, 9], p = 1.0 }", "strictly between 0 and 1"),
            ("{ pareto = [0, 9], p = 0.0 }", "strictly between 0 and 1"),
            ("{ pareto = [9, 0], p = 0.9 }", "is empty"),
            ("{ uniform = [0, 9], p = 0.9 }", "goes with `pareto`"),
            ("{ pareto = [0, 9], p = 0.9, zipf = [0, 9] }", "exactly one"),
            ("{ choice = [] }", "at least one"),
            ("{ gaussian = [1, 2] }", "gaussian"),
        ] {
            let err = error_of(&SHOP.replace("{ uniform = [0, 500] }", bad));
            assert!(err.starts_with("dir/shop.toml:9: "), "{bad}: {err}");
            assert!(err.contains(expected), "{bad}: {err}");
        }
    }

    #[test]
    fn a_pareto_generator_takes_its_range_and_p() {
        let file = parse(&SHOP.replace(
            "{ uniform = [0, 500] }",
            "{ pareto = [0, 999_999_999], p = 0.9995 }",
        ))
        .unwrap();
        assert_eq!(
            file.seed[0].columns[2].1,
            Values::Pareto {
                min: 0,
                max: 999_999_999,
                p: 0.9995
            }
        );
    }

    #[test]
    fn a_file_without_transactions_or_schema_says_what_is_missing() {
        let err = error_of("schema = \"CREATE TABLE t (x)\"\n");
        assert!(err.contains("no transaction"), "{err}");
        let err = error_of("[[transaction]]\nname = \"x\"\nsql = \"SELECT 1\"\n");
        assert!(err.contains("schema"), "{err}");
        let err = error_of("schema = \"CREATE TABLE t (x)\"\nnot toml");
        assert!(err.starts_with("dir/shop.toml:2: "), "{err}");
    }

    #[test]
    fn two_transactions_of_one_name_are_refused() {
        let err = error_of(&SHOP.replace("name = \"restock\"", "name = \"product page\""));
        assert!(
            err.starts_with("dir/shop.toml:18: ") && err.contains("second"),
            "{err}"
        );
    }
}
