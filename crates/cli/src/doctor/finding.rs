//! One finding: what was checked, how much it matters, what was seen, what to do, and why (citing SQLite docs).

use serde::Serialize;

/// How much a finding matters. Only `Error` makes `doctor` exit non-zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// As recommended.
    Ok,
    /// Worth knowing; often a per-connection default an application should set when it opens connections.
    Info,
    /// Costs concurrency, speed or disk space; should be changed.
    Warning,
    /// The database is damaged or could not be read, or the linked SQLite has a bug that can damage it.
    Error,
}

/// One checked setting or fact.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    /// What was checked: a PRAGMA name (`journal_mode`) or a fact (`memory statistics`, `wal file`).
    pub check: &'static str,
    /// How much it matters.
    pub severity: Severity,
    /// What was observed, for people: `wal`, `NORMAL (1)`, `3 of 300 pages free (1.0%)`.
    pub value: String,
    /// SQLite keeps this per connection, not in the database file: the value is what a fresh connection gets,
    /// and an application changes it when it opens its connections.
    pub per_connection: bool,
    /// What to do, or to keep doing.
    pub recommendation: String,
    /// Why, according to SQLite's documentation.
    pub why: String,
    /// The SQLite documentation pages `why` is based on.
    pub docs: Vec<&'static str>,
}

impl Finding {
    /// A finding with its recommendation and reasons still to be filled in.
    pub fn new(check: &'static str, severity: Severity, value: impl Into<String>) -> Self {
        Finding {
            check,
            severity,
            value: value.into(),
            per_connection: false,
            recommendation: String::new(),
            why: String::new(),
            docs: Vec::new(),
        }
    }

    /// Marks a setting SQLite keeps per connection.
    pub fn per_connection(mut self) -> Self {
        self.per_connection = true;
        self
    }

    /// What to do.
    pub fn fix(mut self, recommendation: impl Into<String>) -> Self {
        self.recommendation = recommendation.into();
        self
    }

    /// Why, and the documentation that says so.
    pub fn why(mut self, why: impl Into<String>, docs: &[&'static str]) -> Self {
        self.why = why.into();
        self.docs = docs.to_vec();
        self
    }
}

/// Findings counted by severity, and the exit status they lead to.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Summary {
    /// Findings that are as recommended.
    pub ok: usize,
    /// Findings worth knowing.
    pub info: usize,
    /// Findings that should be changed.
    pub warning: usize,
    /// Damage, unreadable values, or a SQLite that can damage a database.
    pub error: usize,
    /// `doctor`'s exit status: 1 when a finding is an error, else 0.
    pub exit_status: u8,
}

impl Summary {
    /// Counts `findings`.
    pub fn of<'a>(findings: impl IntoIterator<Item = &'a Finding>) -> Self {
        let mut s = Summary::default();
        for f in findings {
            match f.severity {
                Severity::Ok => s.ok += 1,
                Severity::Info => s.info += 1,
                Severity::Warning => s.warning += 1,
                Severity::Error => s.error += 1,
            }
        }
        s.exit_status = u8::from(s.error > 0);
        s
    }
}
