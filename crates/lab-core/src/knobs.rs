//! The SQLite knobs of a cell, parsed once so every runner applies them the same way.

use std::borrow::Cow;
use std::fmt;

use anyhow::{Result, bail};

use crate::cell::Cell;

/// The PRAGMAs of the `server` profile, in the order they are applied.
///
/// `journal_mode` is stored in the database file; the others live on each connection and must be set again
/// on every connection opened (see [`Pragma::per_connection`]).
pub const SERVER_PRAGMAS: &[Pragma] = &[
    Pragma::file("journal_mode", "WAL"),
    Pragma::connection("synchronous", "NORMAL"),
    Pragma::connection("busy_timeout", "5000"),
    Pragma::connection("foreign_keys", "ON"),
    Pragma::connection("cache_size", "-32000"),
    Pragma::connection("mmap_size", "268435456"),
    Pragma::connection("temp_store", "MEMORY"),
    Pragma::connection("journal_size_limit", "67108864"),
];

/// The PRAGMAs every runner reads back and records in `Environment::pragmas`.
pub const REPORTED_PRAGMAS: &[&str] = &[
    "journal_mode",
    "synchronous",
    "busy_timeout",
    "foreign_keys",
    "cache_size",
    "mmap_size",
    "temp_store",
    "journal_size_limit",
];

/// One `PRAGMA name = value`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pragma {
    /// PRAGMA name, e.g. `synchronous`.
    pub name: &'static str,
    /// Value as written after `=`.
    pub value: Cow<'static, str>,
    /// Whether the setting belongs to the connection (set on every open) rather than to the file.
    pub per_connection: bool,
}

impl Pragma {
    const fn file(name: &'static str, value: &'static str) -> Self {
        Self {
            name,
            value: Cow::Borrowed(value),
            per_connection: false,
        }
    }

    const fn connection(name: &'static str, value: &'static str) -> Self {
        Self {
            name,
            value: Cow::Borrowed(value),
            per_connection: true,
        }
    }

    /// The statement text, `PRAGMA name = value`.
    pub fn sql(&self) -> String {
        format!("PRAGMA {} = {}", self.name, self.value)
    }
}

/// PRAGMA profile of a cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// WAL and tuned settings for a server ([`SERVER_PRAGMAS`]).
    Server,
    /// SQLite's own defaults: no PRAGMA is touched. The baseline.
    SqliteDefault,
}

impl Profile {
    /// Parses `server` or `sqlite-default`.
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "server" => Ok(Self::Server),
            "sqlite-default" => Ok(Self::SqliteDefault),
            other => bail!("unknown profile `{other}` (expected `server` or `sqlite-default`)"),
        }
    }
}

/// Connection mutex mode, i.e. SQLite's threading mode for one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MutexMode {
    /// `SQLITE_OPEN_NOMUTEX`: multi-thread mode, the caller guarantees one thread at a time per connection.
    NoMutex,
    /// `SQLITE_OPEN_FULLMUTEX`: serialized mode, every API call takes the connection's mutex.
    FullMutex,
}

impl MutexMode {
    /// Parses `nomutex` or `fullmutex`.
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "nomutex" => Ok(Self::NoMutex),
            "fullmutex" => Ok(Self::FullMutex),
            other => bail!("unknown mutex mode `{other}` (expected `nomutex` or `fullmutex`)"),
        }
    }
}

impl fmt::Display for MutexMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::NoMutex => "nomutex",
            Self::FullMutex => "fullmutex",
        })
    }
}

/// The SQLite settings of a cell, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Knobs {
    /// PRAGMA profile.
    pub profile: Profile,
    /// `synchronous` override, upper-cased (`OFF`, `NORMAL`, `FULL`, `EXTRA`).
    pub synchronous: Option<String>,
    /// `mmap_size` override in bytes.
    pub mmap_size: Option<u64>,
    /// Memory statistics requested on (`true`) or off.
    pub memstatus: bool,
    /// Connection mutex mode.
    pub mutex: MutexMode,
}

impl Knobs {
    /// Validates the knobs of `cell`, with a clear message for a bad value.
    pub fn from_cell(cell: &Cell) -> Result<Self> {
        let synchronous = match cell.synchronous.as_deref() {
            None => None,
            Some(s) => {
                let upper = s.to_ascii_uppercase();
                if !["OFF", "NORMAL", "FULL", "EXTRA"].contains(&upper.as_str()) {
                    bail!("unknown synchronous `{s}` (expected off, normal, full or extra)");
                }
                Some(upper)
            }
        };
        Ok(Self {
            profile: Profile::parse(&cell.profile)?,
            synchronous,
            mmap_size: cell.mmap_size,
            memstatus: cell.memstatus,
            mutex: MutexMode::parse(&cell.mutex)?,
        })
    }

    /// Every PRAGMA to apply, profile first and overrides after, as `(name, value)`; empty for
    /// `sqlite-default` without overrides.
    pub fn pragmas(&self) -> Vec<Pragma> {
        let mut out: Vec<Pragma> = match self.profile {
            Profile::Server => SERVER_PRAGMAS.to_vec(),
            Profile::SqliteDefault => Vec::new(),
        };
        let mut set = |name: &'static str, value: String| {
            out.retain(|p| p.name != name);
            out.push(Pragma {
                name,
                value: Cow::Owned(value),
                per_connection: true,
            });
        };
        if let Some(sync) = &self.synchronous {
            set("synchronous", sync.clone());
        }
        if let Some(bytes) = self.mmap_size {
            set("mmap_size", bytes.to_string());
        }
        out
    }

    /// The PRAGMAs that must be set on every new connection (all but the file-level ones).
    pub fn connection_pragmas(&self) -> Vec<Pragma> {
        self.pragmas()
            .into_iter()
            .filter(|p| p.per_connection)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::sample_cell;

    #[test]
    fn server_profile_with_synchronous_override() {
        let mut cell = sample_cell("point-read", "quicklite");
        cell.synchronous = Some("full".into());
        let knobs = Knobs::from_cell(&cell).unwrap();
        let pragmas = knobs.pragmas();
        let sync: Vec<_> = pragmas.iter().filter(|p| p.name == "synchronous").collect();
        assert_eq!(sync.len(), 1);
        assert_eq!(sync[0].value, "FULL");
        assert!(
            pragmas
                .iter()
                .any(|p| p.name == "journal_mode" && !p.per_connection)
        );
        assert!(
            knobs
                .connection_pragmas()
                .iter()
                .all(|p| p.name != "journal_mode")
        );
    }

    #[test]
    fn mmap_override_replaces_the_profile_s_value_on_every_connection() {
        let mut cell = sample_cell("mixed", "quicklite");
        cell.mmap_size = Some(0);
        let pragmas = Knobs::from_cell(&cell).unwrap().connection_pragmas();
        let mmap: Vec<_> = pragmas.iter().filter(|p| p.name == "mmap_size").collect();
        assert_eq!(mmap.len(), 1);
        assert_eq!(mmap[0].sql(), "PRAGMA mmap_size = 0");
        // Under sqlite-default the override is the only PRAGMA touched.
        cell.profile = "sqlite-default".into();
        let pragmas = Knobs::from_cell(&cell).unwrap().pragmas();
        assert_eq!(
            pragmas.iter().map(Pragma::sql).collect::<Vec<_>>(),
            ["PRAGMA mmap_size = 0"]
        );
    }

    #[test]
    fn sqlite_default_touches_nothing() {
        let mut cell = sample_cell("point-read", "quicklite");
        cell.profile = "sqlite-default".into();
        assert!(Knobs::from_cell(&cell).unwrap().pragmas().is_empty());
    }

    #[test]
    fn bad_values_are_named_in_the_error() {
        let mut cell = sample_cell("point-read", "quicklite");
        cell.mutex = "sometimes".into();
        let err = Knobs::from_cell(&cell).unwrap_err().to_string();
        assert!(err.contains("sometimes"), "{err}");
        cell.mutex = "nomutex".into();
        cell.profile = "desktop".into();
        assert!(
            Knobs::from_cell(&cell)
                .unwrap_err()
                .to_string()
                .contains("desktop")
        );
        cell.profile = "server".into();
        cell.synchronous = Some("sometimes".into());
        assert!(Knobs::from_cell(&cell).is_err());
    }
}
