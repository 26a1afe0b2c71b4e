//! Named PRAGMA sets.

/// A named set of PRAGMAs applied to every connection of a database.
///
/// SQLite's defaults date from desktop applications of 2004: a rollback journal, a 2 MB page cache, temporary
/// tables on disk. A server that runs many short transactions concurrently wants WAL and fewer fsyncs.
/// Any PRAGMA of a profile can be overridden with [`Builder::pragma`](crate::Builder::pragma).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Profile {
    /// For services (the default): `journal_mode=WAL` (readers never block the writer), `synchronous=NORMAL`
    /// (in WAL mode: no fsync per commit, only at checkpoints — a power cut can lose the last commits but never
    /// corrupts the database), `busy_timeout=5000`, `foreign_keys=ON`, `cache_size=-32000` (32 MiB per connection),
    /// `mmap_size=268435456` (256 MiB), `temp_store=MEMORY`, `journal_size_limit=67108864` (64 MiB).
    ///
    /// Reader connections give their memory map up while the database is being written and map the file again
    /// once commits have stopped for a while: beside a writer, SQLite unmaps a reader's whole map at every read
    /// transaction that follows a commit, which costs more than the map saves. The writer keeps its map.
    #[default]
    Server,
    /// As [`Profile::Server`], with `synchronous=FULL`: every acknowledged commit survives a power cut, at the
    /// price of one fsync per commit (group commit shares it among all the writes of a batch).
    Durable,
    /// Touches no PRAGMA: SQLite's own defaults (rollback journal, `synchronous=FULL`, 2 MB cache). The baseline the
    /// lab compares against. Connections keep rusqlite's 5 s busy timeout, without which the readers and the writer
    /// would fail with `SQLITE_BUSY` whenever their locks meet in rollback-journal mode.
    SqliteDefault,
}

/// PRAGMAs that persist in the database file or apply to the whole database; set once, by the writer.
const DATABASE_WIDE: &[&str] = &["journal_mode", "auto_vacuum", "page_size", "application_id"];

impl Profile {
    /// The profile's PRAGMAs, in the order they are applied (`journal_mode` first: it needs no open transaction
    /// and changes how everything else behaves).
    pub fn pragmas(self) -> Vec<(&'static str, &'static str)> {
        let server = [
            ("journal_mode", "WAL"),
            ("synchronous", "NORMAL"),
            ("busy_timeout", "5000"),
            ("foreign_keys", "ON"),
            ("cache_size", "-32000"),
            ("mmap_size", "268435456"),
            ("temp_store", "MEMORY"),
            ("journal_size_limit", "67108864"),
        ];
        match self {
            Profile::Server => server.to_vec(),
            Profile::Durable => server
                .iter()
                .map(|&(k, v)| {
                    if k == "synchronous" {
                        (k, "FULL")
                    } else {
                        (k, v)
                    }
                })
                .collect(),
            Profile::SqliteDefault => Vec::new(),
        }
    }

    /// The profile's name as the lab and the reports spell it.
    pub fn name(self) -> &'static str {
        match self {
            Profile::Server => "server",
            Profile::Durable => "durable",
            Profile::SqliteDefault => "sqlite-default",
        }
    }
}

impl std::str::FromStr for Profile {
    type Err = crate::Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().replace('_', "-").as_str() {
            "server" => Ok(Profile::Server),
            "durable" => Ok(Profile::Durable),
            "sqlite-default" | "default" => Ok(Profile::SqliteDefault),
            other => Err(crate::Error::InvalidConfig(format!(
                "unknown profile {other:?}; expected one of server, durable, sqlite-default"
            ))),
        }
    }
}

/// Whether a PRAGMA is set once for the database (by the writer) rather than on every connection.
pub(crate) fn is_database_wide(name: &str) -> bool {
    DATABASE_WIDE.iter().any(|p| p.eq_ignore_ascii_case(name))
}

/// PRAGMAs read back from SQLite and reported by [`Database::pragmas`](crate::Database::pragmas), whatever the
/// profile, so a figure can always be tied to its settings.
pub(crate) const REPORTED: &[&str] = &[
    "journal_mode",
    "synchronous",
    "busy_timeout",
    "foreign_keys",
    "cache_size",
    "mmap_size",
    "temp_store",
    "journal_size_limit",
    "wal_autocheckpoint",
    "page_size",
    "locking_mode",
    "auto_vacuum",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durable_differs_from_server_only_in_synchronous() {
        let s = Profile::Server.pragmas();
        let d = Profile::Durable.pragmas();
        assert_eq!(s.len(), d.len());
        for (a, b) in s.iter().zip(&d) {
            assert_eq!(a.0, b.0);
            if a.0 == "synchronous" {
                assert_eq!((a.1, b.1), ("NORMAL", "FULL"));
            } else {
                assert_eq!(a.1, b.1);
            }
        }
        assert!(Profile::SqliteDefault.pragmas().is_empty());
    }

    #[test]
    fn parses_names() {
        assert_eq!("Server".parse::<Profile>().unwrap(), Profile::Server);
        assert_eq!(
            "sqlite_default".parse::<Profile>().unwrap(),
            Profile::SqliteDefault
        );
        assert!("fast".parse::<Profile>().is_err());
    }
}
