//! Custom workloads: the user's own schema, seed data and weighted transactions, carried to runners in the cell.
//!
//! The lab reads a workload file, checks every statement against SQLite and classifies each transaction as a read
//! or a write before any cell runs; a runner receives the result here, seeds the tables from it and lets the
//! [`crate::driver`] draw transactions from it. An approach runs a transaction through
//! [`crate::Approach::custom`], given SQL and values, so any approach that can run arbitrary SQL can run any
//! custom workload.

use std::borrow::Cow;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::data::{Param, Statement};
use crate::rng::Rng;

/// A workload from a user's file, checked and classified.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CustomWorkload {
    /// The name in cells and reports.
    pub name: String,
    /// The schema, one statement per entry, run in order before the seed rows.
    pub schema: Vec<String>,
    /// Rows generated into tables before the warm-up, table after table.
    pub seed: Vec<SeedTable>,
    /// The transactions the client tasks draw, each with the chance of its weight.
    pub transactions: Vec<Transaction>,
}

/// Rows generated into one table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeedTable {
    /// The table.
    pub table: String,
    /// How many rows.
    pub rows: u64,
    /// Each column's values, in insertion order.
    pub columns: Vec<SeedColumn>,
}

/// One generated column of a seeded table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeedColumn {
    /// The column.
    pub name: String,
    /// Its values.
    pub values: Values,
}

/// One transaction of a custom workload: statements run in order, in one read snapshot or one write transaction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Transaction {
    /// The name in the per-transaction latencies.
    pub name: String,
    /// Its chance of being drawn, relative to the other transactions' weights.
    pub weight: u32,
    /// Whether any statement writes: a write transaction goes to an approach's writes, the others to its reads.
    pub writes: bool,
    /// The parameters, each drawn once per run of the transaction and shared by every statement that uses it.
    pub params: Vec<Values>,
    /// The statements, in order.
    pub statements: Vec<CustomStatement>,
}

/// A statement of a transaction, its SQLite parameters numbered in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CustomStatement {
    /// The SQL as written in the file (its parameters named, e.g. `:id`).
    pub sql: String,
    /// For SQLite parameter `k + 1` of the statement, the index of its value in [`Transaction::params`].
    pub binds: Vec<usize>,
}

/// How a column or parameter's values are drawn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Values {
    /// Consecutive integers from `start`; no two client tasks draw the same one (task `t` of `n` draws
    /// `start + t`, `start + t + n`, …), so inserted keys never collide.
    Sequence {
        /// The first value.
        start: i64,
    },
    /// Integers in `min..=max`, each as likely.
    Uniform {
        /// The smallest value.
        min: i64,
        /// The largest value.
        max: i64,
    },
    /// Integers in `min..=max` by Zipf's law: the `k`-th value (`min + k − 1`) drawn with a chance proportional to
    /// `1 / k^exponent`, so `min` is the hottest.
    Zipf {
        /// The smallest (hottest) value.
        min: i64,
        /// The largest value.
        max: i64,
        /// The skew: `0` is uniform, `1` is classic Zipf, larger is more skewed.
        exponent: f64,
    },
    /// Integers in `min..=max` by the power law of Anders Murphy's "100000 TPS over a billion rows" (its
    /// `rand-pareto`): with `x` uniform in `[0, 1)` and `a = ln(1 − p) / ln(p)`, the value is `min` plus
    /// `⌊n · (x^a + 1 − (1 − x)^(1/a)) / 2⌋` of the range's `n` values. With `p` near 1 the draws crowd at `min`:
    /// at `p = 0.9995` over a billion values, half of them fall below about 22,800 and nearly all below a few
    /// hundred thousand, the rest spread thinly over the range. `p = 0.5` is uniform.
    Pareto {
        /// The smallest (hottest, when `p > 0.5`) value.
        min: i64,
        /// The largest value.
        max: i64,
        /// The law's parameter, strictly between 0 and 1.
        p: f64,
    },
    /// Lowercase ASCII text of a length drawn in `min_len..=max_len`.
    Text {
        /// The shortest length.
        min_len: u32,
        /// The longest length.
        max_len: u32,
    },
    /// One of the texts, each as likely.
    Choice {
        /// The texts.
        options: Vec<String>,
    },
    /// Always this integer.
    Integer {
        /// The value.
        value: i64,
    },
}

/// A statement to run with its values: what [`crate::Approach::custom`] receives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bound {
    /// The SQL text, shared by every run of the statement.
    pub sql: Arc<str>,
    /// The values of SQLite parameters `1..=n`, in order.
    pub params: Vec<Param>,
}

impl CustomWorkload {
    /// The statements that seed a database: the schema, then every seeded table's rows, drawn from `seed`.
    pub fn seed_statements(&self, seed: u64) -> impl Iterator<Item = Statement> + 'static {
        let schema = self.schema.clone().into_iter().map(|sql| Statement {
            sql: Cow::Owned(sql),
            params: Vec::new(),
        });
        let rows = self
            .seed
            .clone()
            .into_iter()
            .enumerate()
            .flat_map(move |(index, table)| {
                table.into_rows(Rng::derive(seed, u64::MAX - 1 - index as u64))
            });
        schema.chain(rows)
    }
}

impl CustomWorkload {
    /// Every transaction once, in order, its values drawn from `seed` as one client task of one draws them: for
    /// a trial run before a cell does the same.
    pub fn draw_each(&self, seed: u64) -> Vec<Vec<Bound>> {
        let mut rng = Rng::new(seed);
        self.transactions
            .iter()
            .map(|t| {
                let values: Vec<Param> = t
                    .params
                    .iter()
                    .map(|v| Draw::new(v, 0, 1).next(&mut rng))
                    .collect();
                t.statements
                    .iter()
                    .map(|s| Bound {
                        sql: Arc::from(s.sql.as_str()),
                        params: s.binds.iter().map(|&b| values[b].clone()).collect(),
                    })
                    .collect()
            })
            .collect()
    }
}

impl SeedTable {
    /// The `INSERT` statement of one row.
    pub fn insert_sql(&self) -> String {
        let names: Vec<String> = self.columns.iter().map(|c| quoted(&c.name)).collect();
        let slots: Vec<String> = (1..=names.len()).map(|k| format!("?{k}")).collect();
        format!(
            "INSERT INTO {} ({}) VALUES ({})",
            quoted(&self.table),
            names.join(", "),
            slots.join(", ")
        )
    }

    /// The table's rows, drawn from `rng`.
    fn into_rows(self, mut rng: Rng) -> impl Iterator<Item = Statement> {
        let sql: Cow<'static, str> = Cow::Owned(self.insert_sql());
        let mut draws: Vec<Draw> = self
            .columns
            .iter()
            .map(|c| Draw::new(&c.values, 0, 1))
            .collect();
        (0..self.rows).map(move |_| Statement {
            sql: sql.clone(),
            params: draws.iter_mut().map(|d| d.next(&mut rng)).collect(),
        })
    }
}

/// An identifier in double quotes, so any table or column name is taken as written.
fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// What one client task draws: a transaction by weight, then its parameters.
#[derive(Debug)]
pub(crate) struct Drawer {
    /// Each transaction's cumulative weight, for the draw.
    cumulative: Vec<u64>,
    /// Each transaction's name (kept for the whole run: the per-transaction statistics are named by it).
    pub(crate) names: Vec<&'static str>,
    /// Each transaction's statements, with their SQL shared.
    statements: Vec<Vec<(Arc<str>, Vec<usize>)>>,
    /// Each transaction's parameter streams.
    params: Vec<Vec<Draw>>,
    /// Whether each transaction writes.
    writes: Vec<bool>,
    /// Whether each transaction is one statement binding every value once, in order: its values are its
    /// statement's, moved rather than copied.
    direct: Vec<bool>,
}

/// One drawn transaction.
pub(crate) struct Drawn {
    /// Which transaction of the workload.
    pub(crate) index: usize,
    /// Whether it writes.
    pub(crate) writes: bool,
    /// Its statements with their values.
    pub(crate) statements: Vec<Bound>,
}

impl Drawer {
    /// The drawer of client task `task` of `tasks`, with the transaction names given once per run.
    pub(crate) fn new(
        workload: &CustomWorkload,
        names: &[&'static str],
        task: u64,
        tasks: u64,
    ) -> Self {
        let mut total = 0;
        let cumulative = workload
            .transactions
            .iter()
            .map(|t| {
                total += u64::from(t.weight);
                total
            })
            .collect();
        Self {
            cumulative,
            names: names.to_vec(),
            statements: workload
                .transactions
                .iter()
                .map(|t| {
                    t.statements
                        .iter()
                        .map(|s| (Arc::from(s.sql.as_str()), s.binds.clone()))
                        .collect()
                })
                .collect(),
            params: workload
                .transactions
                .iter()
                .map(|t| t.params.iter().map(|v| Draw::new(v, task, tasks)).collect())
                .collect(),
            writes: workload.transactions.iter().map(|t| t.writes).collect(),
            direct: workload
                .transactions
                .iter()
                .map(|t| matches!(&t.statements[..], [one] if one.binds.iter().copied().eq(0..t.params.len())))
                .collect(),
        }
    }

    /// The next transaction, drawn from `rng`.
    pub(crate) fn next(&mut self, rng: &mut Rng) -> Drawn {
        let total = self.cumulative.last().copied().unwrap_or(0).max(1);
        let pick = rng.below(total);
        let index = self
            .cumulative
            .partition_point(|&c| c <= pick)
            .min(self.cumulative.len() - 1);
        let values: Vec<Param> = self.params[index].iter_mut().map(|d| d.next(rng)).collect();
        if self.direct[index] {
            return Drawn {
                index,
                writes: self.writes[index],
                statements: vec![Bound {
                    sql: self.statements[index][0].0.clone(),
                    params: values,
                }],
            };
        }
        let statements = self.statements[index]
            .iter()
            .map(|(sql, binds)| Bound {
                sql: sql.clone(),
                params: binds.iter().map(|&b| values[b].clone()).collect(),
            })
            .collect();
        Drawn {
            index,
            writes: self.writes[index],
            statements,
        }
    }
}

/// The transaction names of `workload`, kept for the life of the process (a runner measures one cell).
pub(crate) fn leaked_names(workload: &CustomWorkload) -> Vec<&'static str> {
    workload
        .transactions
        .iter()
        .map(|t| &*Box::leak(t.name.clone().into_boxed_str()))
        .collect()
}

/// A stream of values of one column or parameter.
#[derive(Debug)]
enum Draw {
    Sequence { next: i64, step: i64 },
    Uniform { min: i64, max: i64 },
    Zipf { min: i64, sampler: Zipf },
    Pareto { min: i64, sampler: Pareto },
    Text { min_len: u32, max_len: u32 },
    Choice(Vec<String>),
    Integer(i64),
}

impl Draw {
    /// The stream of client task `task` of `tasks` (a seeded table is one task of one).
    fn new(values: &Values, task: u64, tasks: u64) -> Self {
        match values {
            Values::Sequence { start } => Self::Sequence {
                next: start.wrapping_add(task as i64),
                step: tasks.max(1) as i64,
            },
            &Values::Uniform { min, max } => Self::Uniform { min, max },
            &Values::Zipf { min, max, exponent } => Self::Zipf {
                min,
                sampler: Zipf::new(
                    max.saturating_sub(min).saturating_add(1).max(1) as u64,
                    exponent,
                ),
            },
            &Values::Pareto { min, max, p } => Self::Pareto {
                min,
                sampler: Pareto::new(max.saturating_sub(min).saturating_add(1).max(1) as u64, p),
            },
            &Values::Text { min_len, max_len } => Self::Text { min_len, max_len },
            Values::Choice { options } => Self::Choice(options.clone()),
            &Values::Integer { value } => Self::Integer(value),
        }
    }

    fn next(&mut self, rng: &mut Rng) -> Param {
        match self {
            Self::Sequence { next, step } => {
                let value = *next;
                *next = next.wrapping_add(*step);
                Param::Int(value)
            }
            Self::Uniform { min, max } => Param::Int(rng.between(*min, *max)),
            Self::Zipf { min, sampler } => {
                Param::Int(min.wrapping_add(sampler.sample(rng) as i64 - 1))
            }
            Self::Pareto { min, sampler } => {
                Param::Int(min.wrapping_add(sampler.sample(rng) as i64))
            }
            Self::Text { min_len, max_len } => {
                let len = rng.between(i64::from(*min_len), i64::from(*max_len));
                Param::Text(rng.text(len as usize))
            }
            Self::Choice(options) => {
                Param::Text(options[rng.below(options.len().max(1) as u64) as usize].clone())
            }
            Self::Integer(value) => Param::Int(*value),
        }
    }
}

/// Zipf's law over ranks `1..=n` by rejection-inversion (W. Hörmann and G. Derflinger, "Rejection-inversion to
/// generate variates from monotone discrete distributions", 1996): constant time and memory per draw whatever `n`.
#[derive(Debug, Clone)]
struct Zipf {
    n: f64,
    exponent: f64,
    h_integral_x1: f64,
    h_integral_n: f64,
    s: f64,
}

impl Zipf {
    fn new(n: u64, exponent: f64) -> Self {
        let mut zipf = Self {
            n: n as f64,
            exponent,
            h_integral_x1: 0.0,
            h_integral_n: 0.0,
            s: 0.0,
        };
        zipf.h_integral_x1 = zipf.h_integral(1.5) - 1.0;
        zipf.h_integral_n = zipf.h_integral(zipf.n + 0.5);
        zipf.s = 2.0 - zipf.h_integral_inverse(zipf.h_integral(2.5) - zipf.h(2.0));
        zipf
    }

    /// A rank in `1..=n`.
    fn sample(&self, rng: &mut Rng) -> u64 {
        loop {
            let u = self.h_integral_n + unit(rng) * (self.h_integral_x1 - self.h_integral_n);
            let x = self.h_integral_inverse(u);
            let k = (x + 0.5).floor().clamp(1.0, self.n);
            if k - x <= self.s || u >= self.h_integral(k + 0.5) - self.h(k) {
                return k as u64;
            }
        }
    }

    fn h(&self, x: f64) -> f64 {
        (-self.exponent * x.ln()).exp()
    }

    fn h_integral(&self, x: f64) -> f64 {
        let log_x = x.ln();
        helper2((1.0 - self.exponent) * log_x) * log_x
    }

    fn h_integral_inverse(&self, x: f64) -> f64 {
        let t = (x * (1.0 - self.exponent)).max(-1.0);
        (helper1(t) * x).exp()
    }
}

/// The power law of Anders Murphy's `rand-pareto` over offsets `0..n` (see [`Values::Pareto`]): one uniform draw
/// and three powers per value, constant time and memory whatever `n`.
#[derive(Debug, Clone)]
struct Pareto {
    n: f64,
    a: f64,
}

impl Pareto {
    fn new(n: u64, p: f64) -> Self {
        Self {
            n: n as f64,
            a: (1.0 - p).ln() / p.ln(),
        }
    }

    /// An offset in `0..n`.
    fn sample(&self, rng: &mut Rng) -> u64 {
        let x = unit(rng);
        let y = (x.powf(self.a) + 1.0 - (1.0 - x).powf(1.0 / self.a)) / 2.0;
        // `y` is in [0, 1]; the product rounds down to an offset, the largest kept inside the range.
        ((self.n * y) as u64).min(self.n as u64 - 1)
    }
}

/// A uniform draw in `[0, 1)`: the top 53 bits of the next value.
fn unit(rng: &mut Rng) -> f64 {
    (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

/// `ln(1 + x) / x`, accurate near zero.
fn helper1(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.ln_1p() / x
    } else {
        1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x))
    }
}

/// `(e^x − 1) / x`, accurate near zero.
fn helper2(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.exp_m1() / x
    } else {
        1.0 + x * 0.5 * (1.0 + x / 3.0 * (1.0 + 0.25 * x))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::sample_custom as sample;

    #[test]
    fn the_seed_is_the_schema_then_every_row_with_its_values() {
        let workload = sample();
        let statements: Vec<Statement> = workload.seed_statements(7).collect();
        assert_eq!(statements.len(), 51);
        assert_eq!(statements[0].sql, workload.schema[0]);
        assert!(statements[0].params.is_empty());
        assert_eq!(
            statements[1].sql,
            r#"INSERT INTO "t" ("id", "name") VALUES (?1, ?2)"#
        );
        for (k, row) in statements[1..].iter().enumerate() {
            assert_eq!(row.params[0], Param::Int(k as i64 + 1));
            match &row.params[1] {
                Param::Text(text) => assert!((4..=8).contains(&text.len()), "{text}"),
                other => panic!("{other:?}"),
            }
        }
        // The same seed, the same rows.
        assert_eq!(statements, workload.seed_statements(7).collect::<Vec<_>>());
    }

    #[test]
    fn transactions_come_by_weight_with_their_parameters_bound_in_order() {
        let workload = sample();
        let names = leaked_names(&workload);
        let mut drawer = Drawer::new(&workload, &names, 1, 4);
        let mut rng = Rng::new(3);
        let mut counts = [0u32; 2];
        let mut inserted = Vec::new();
        for _ in 0..4_000 {
            let drawn = drawer.next(&mut rng);
            counts[drawn.index] += 1;
            assert_eq!(drawn.writes, drawn.index == 1);
            assert_eq!(drawn.statements.len(), 1);
            if drawn.index == 1 {
                assert_eq!(drawn.statements[0].params[1], Param::Text("a".into()));
                inserted.push(drawn.statements[0].params[0].clone());
            } else {
                assert!(matches!(drawn.statements[0].params[0], Param::Int(1..=50)));
            }
        }
        // 3 to 1, within a few percent.
        let share = f64::from(counts[0]) / 4_000.0;
        assert!((0.72..0.78).contains(&share), "{counts:?}");
        // Task 1 of 4 draws 1001, 1005, 1009, …: never a key another task draws.
        assert_eq!(inserted[0], Param::Int(1_001));
        assert_eq!(inserted[1], Param::Int(1_005));
    }

    #[test]
    fn zipf_favours_the_first_values_as_its_law_says() {
        let mut rng = Rng::new(11);
        let zipf = Zipf::new(1_000, 1.0);
        let mut counts = vec![0u32; 1_001];
        let draws = 200_000;
        for _ in 0..draws {
            let k = zipf.sample(&mut rng);
            assert!((1..=1_000).contains(&k));
            counts[k as usize] += 1;
        }
        // P(k) = (1/k) / H(1000), H(1000) ≈ 7.4855.
        let expected = |k: f64| draws as f64 / k / 7.4855;
        for k in [1usize, 2, 10] {
            let ratio = f64::from(counts[k]) / expected(k as f64);
            assert!(
                (0.9..1.1).contains(&ratio),
                "rank {k}: {} draws, ratio {ratio}",
                counts[k]
            );
        }
        // Exponent 0 is uniform.
        let flat = Zipf::new(10, 0.0);
        let mut counts = [0u32; 11];
        for _ in 0..100_000 {
            counts[flat.sample(&mut rng) as usize] += 1;
        }
        assert!(
            counts[1..].iter().all(|&c| (9_000..11_000).contains(&c)),
            "{counts:?}"
        );
    }

    #[test]
    fn pareto_draws_as_the_post_s_rand_pareto_does() {
        // The post's parameters: a billion accounts, p = 0.9995. Its `a` is ln(0.0005) / ln(0.9995) ≈ 15,198, so
        // nearly every draw is about an exponential variate times 10⁹ / 2a (median 10⁹ · ln 2 / 2a ≈ 22,804).
        let mut rng = Rng::new(5);
        let pareto = Pareto::new(1_000_000_000, 0.9995);
        let draws = 100_000;
        let mut values: Vec<u64> = (0..draws).map(|_| pareto.sample(&mut rng)).collect();
        assert!(values.iter().all(|&v| v < 1_000_000_000));
        values.sort_unstable();
        let median = values[draws / 2] as f64;
        assert!((21_500.0..24_100.0).contains(&median), "median {median}");
        // About 99.95% of the draws land in the first 0.05% of the accounts, as the post says: all but the
        // `x^a` tail, which reaches past 500,000 with a chance of about ln(1000) / a ≈ 0.045%.
        let hot = values.iter().filter(|&&v| v < 500_000).count();
        assert!(hot as f64 / draws as f64 >= 0.9993, "{hot} of {draws}");
        // p = 0.5 is uniform: a = 1, so y = x.
        let flat = Pareto::new(10, 0.5);
        let mut counts = [0u32; 10];
        for _ in 0..100_000 {
            counts[flat.sample(&mut rng) as usize] += 1;
        }
        assert!(
            counts.iter().all(|&c| (9_000..11_000).contains(&c)),
            "{counts:?}"
        );
        // A range of one value always draws it; `min` shifts the offsets.
        let mut one = Draw::new(
            &Values::Pareto {
                min: 7,
                max: 7,
                p: 0.9,
            },
            0,
            1,
        );
        assert_eq!(one.next(&mut rng), Param::Int(7));
    }

    #[test]
    fn a_workload_travels_in_a_cell_as_json() {
        let workload = sample();
        let json = serde_json::to_string(&workload).unwrap();
        assert_eq!(
            serde_json::from_str::<CustomWorkload>(&json).unwrap(),
            workload
        );
    }
}
