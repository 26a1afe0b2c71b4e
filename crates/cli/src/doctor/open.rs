//! Opening a database for inspection without writing to it, or next to it.
//!
//! `SQLITE_OPEN_READONLY` keeps SQLite from writing the database file, but not the files beside it. SQLite reads a
//! WAL database through its wal-index, the `<db>-shm` file, and a read-only connection still opens `<db>-shm` and
//! `<db>-wal` read-write, creating them when they are missing, and leaves them behind when it closes (checked
//! with SQLite 3.40 and this build: a clean WAL database gains an empty `-wal` and a 32 KiB `-shm`). SQLite's
//! documentation puts it as: a read-only WAL database can be opened "if the -shm and -wal files already exist or
//! those files can be created or the database is immutable" (<https://www.sqlite.org/wal.html#readonly>). Even an
//! existing `-shm` gets written: the first connection resets it and rebuilds the index. So the mode depends on
//! the header and on the files present:
//!
//! | database                               | opened with                  | files created or changed          |
//! |----------------------------------------|------------------------------|-----------------------------------|
//! | rollback journal, no `-wal`            | `mode=ro`                    | none (a reader only takes locks)  |
//! | `-wal` and `-shm` present              | `mode=ro&readonly_shm=1`     | none                              |
//! | WAL header, no `-wal`                  | `mode=ro&immutable=1`        | none                              |
//! | `-wal` present, no `-shm`              | `mode=ro`                    | SQLite creates `<db>-shm`         |
//!
//! `readonly_shm=1` makes the unix VFS map an existing `-shm` read-only instead of creating or writing it (SQLite's
//! `test/walro.test` and `walro2.test` cover it); when no writer holds the index, SQLite rebuilds it in private
//! memory from the `-wal` (`SQLITE_READONLY_CANTINIT`, <https://www.sqlite.org/rescode.html#readonly_cantinit>).
//! It needs an existing `-shm` (without one the open fails, "unable to open database file", after creating an
//! empty `-wal`), so the last row is the one case doctor cannot avoid creating a file: frames in a `-wal` can only
//! be read through an index, `immutable=1` would ignore them, and with no `-shm` SQLite must create one. That file
//! holds no data, any program opening the database would create it the same way, and the report lists it under
//! `created_files`.
//!
//! `immutable=1` (<https://www.sqlite.org/uri.html#uriimmutable>) skips locking: it is chosen only when there is no
//! `-wal`, so every page is in the main file and no connection has the database open in WAL mode. Because nothing
//! then stops another process from opening it while doctor reads, [`Opened::finish`] checks that the file and its
//! neighbours did not change during the inspection, and refuses the report if they did.

use std::fs::{File, Metadata};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::{Context, anyhow, bail};
use quicklite::rusqlite::{self, Connection, ErrorCode, OpenFlags, ffi};

/// How long a read waits for another connection's lock before doctor gives up and says it is locked.
pub const LOCK_WAIT: Duration = Duration::from_secs(2);

/// The first 16 bytes of every SQLite 3 database (<https://www.sqlite.org/fileformat2.html#magic_header_string>).
const MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// The files SQLite keeps next to a database (<https://www.sqlite.org/tempfiles.html>).
const NEIGHBOURS: [&str; 3] = ["-wal", "-shm", "-journal"];

/// How a database is opened, chosen from its header and the files next to it (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenMode {
    /// `mode=ro`: a rollback-journal database.
    ReadOnly,
    /// `mode=ro&readonly_shm=1`: a WAL database whose `-wal` and `-shm` exist; both are only read.
    ReadOnlyShm,
    /// `mode=ro&immutable=1`: a WAL database without a `-wal`: every page is in the main file.
    Immutable,
    /// `mode=ro` on a `-wal` without a `-shm`: SQLite creates the `-shm` it needs to read the `-wal`.
    CreatesShm,
}

impl OpenMode {
    fn uri_params(self) -> &'static str {
        match self {
            OpenMode::ReadOnly | OpenMode::CreatesShm => "mode=ro",
            OpenMode::ReadOnlyShm => "mode=ro&readonly_shm=1",
            OpenMode::Immutable => "mode=ro&immutable=1",
        }
    }

    /// How the database was opened, and why that way, in a sentence.
    pub fn describe(self) -> String {
        let why = match self {
            OpenMode::ReadOnly => "rollback journal: a reader only takes locks",
            OpenMode::ReadOnlyShm => "the -wal and -shm files are read, never written",
            OpenMode::Immutable => {
                "WAL database without a -wal file: every page is in the main file and no other connection has \
                 it open, so no -wal or -shm is created"
            }
            OpenMode::CreatesShm => {
                "a -wal file without its -shm: SQLite needs the -shm index to read the -wal and creates it"
            }
        };
        format!("read-only, {} ({why})", self.uri_params())
    }
}

/// What the database's 100-byte header says (<https://www.sqlite.org/fileformat2.html#the_database_header>).
#[derive(Debug, Clone, Copy)]
pub struct Header {
    /// Bytes 18 and 19, the file format write and read versions: 2 means WAL mode, which persists in the file.
    pub wal: bool,
}

/// A database opened read-only, with what is needed to check afterwards that nothing changed.
pub struct Opened {
    /// The read-only connection.
    pub conn: Connection,
    /// How it was opened.
    pub mode: OpenMode,
    /// What the header said before SQLite opened the file.
    pub header: Header,
    /// The file's size in bytes.
    pub size: u64,
    /// The size of `<db>-wal` before the inspection, if it existed.
    pub wal_size: Option<u64>,
    /// The database with symbolic links resolved: SQLite names `-wal` and `-shm` after it.
    path: PathBuf,
    /// The database's size and modification time, and which neighbours existed, before the inspection.
    before: Stamp,
}

/// Checks `path`, reads its header and opens it read-only. Every error says, in one line, why the file cannot
/// be inspected.
pub fn open(path: &Path) -> anyhow::Result<Opened> {
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => bail!("no such file"),
        Err(err) => return Err(err).context("cannot read its metadata"),
    };
    if meta.is_dir() {
        bail!("is a directory, not a database file");
    }
    if !meta.is_file() {
        bail!("is not a regular file");
    }
    let path = std::fs::canonicalize(path).context("cannot resolve the path")?;
    let header = read_header(&path, &meta)?;
    let before = Stamp::take(&path)?;
    let mode = match (before.has("-wal"), before.has("-shm"), header.wal) {
        (true, true, _) => OpenMode::ReadOnlyShm,
        (true, false, _) => OpenMode::CreatesShm,
        (false, _, true) => OpenMode::Immutable,
        // SQLite opens a -wal whenever one exists, whatever the header says; without one it uses no -shm either.
        (false, _, false) => OpenMode::ReadOnly,
    };
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
        | OpenFlags::SQLITE_OPEN_URI
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn =
        Connection::open_with_flags(uri(&path, mode.uri_params())?, flags).map_err(cannot_read)?;
    conn.busy_timeout(LOCK_WAIT).map_err(cannot_read)?;
    Ok(Opened {
        conn,
        mode,
        header,
        size: meta.len(),
        wal_size: before.size("-wal"),
        path,
        before,
    })
}

impl Opened {
    /// Closes the connection and returns the files SQLite created next to the database. Fails if, while an
    /// immutable (unlocked) connection read it, the database or its neighbours changed: its figures may then mix
    /// two states of the file.
    pub fn finish(self) -> anyhow::Result<Vec<String>> {
        let Opened {
            conn,
            mode,
            path,
            before,
            ..
        } = self;
        conn.close().map_err(|(_, err)| cannot_read(err))?;
        let after = Stamp::take(&path)?;
        if mode == OpenMode::Immutable && after != before {
            bail!(
                "another process opened or changed the database while doctor read it without locks (it had no \
                 -wal file, so doctor opened it immutable=1 to create none); run doctor again"
            );
        }
        // In the other modes SQLite creates nothing by construction; a neighbour that appears then is another
        // process's (a writer's -journal), not ours.
        let mut created = Vec::new();
        if mode == OpenMode::CreatesShm && after.has("-shm") && !before.has("-shm") {
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            created.push(format!("{name}-shm"));
        }
        Ok(created)
    }
}

/// Turns an SQLite error met while opening or reading into the one-line reason the database cannot be inspected.
/// (Corruption is not one of them: it becomes an error finding.)
pub fn cannot_read(err: rusqlite::Error) -> anyhow::Error {
    let extended = match &err {
        rusqlite::Error::SqliteFailure(e, _) => e.extended_code,
        _ => 0,
    };
    match err.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => anyhow!(
            "the database is locked by another process (still locked after {} s); run doctor again when it is \
             released",
            LOCK_WAIT.as_secs()
        ),
        Some(ErrorCode::NotADatabase) => {
            anyhow!("SQLite cannot read it: {err} (the header is damaged)")
        }
        Some(ErrorCode::PermissionDenied) => anyhow!("permission denied: {err}"),
        Some(ErrorCode::ReadOnly) if extended == ffi::SQLITE_READONLY_ROLLBACK => anyhow!(
            "it has a hot journal (-journal) from an interrupted write, which only a read-write connection can \
             roll back; open it once with write access (e.g. the sqlite3 shell) first"
        ),
        Some(ErrorCode::ReadOnly) if extended == ffi::SQLITE_READONLY_RECOVERY => anyhow!(
            "its WAL needs recovery, which only a read-write connection can do; open it once with write access first"
        ),
        Some(ErrorCode::CannotOpen) => anyhow!(
            "SQLite cannot open it: {err} (a WAL database needs its -shm file, or a writable directory to create it)"
        ),
        _ => anyhow!("SQLite cannot read it: {err}"),
    }
}

fn read_header(path: &Path, meta: &Metadata) -> anyhow::Result<Header> {
    if meta.len() == 0 {
        bail!(
            "the file is empty (0 bytes): not an SQLite database yet (SQLite would treat it as a new, empty one)"
        );
    }
    let mut header = [0u8; 100];
    let mut file = File::open(path).context("cannot open it for reading")?;
    let mut read = 0;
    while read < header.len() {
        match file.read(&mut header[read..]) {
            Ok(0) => break,
            Ok(n) => read += n,
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
            Err(err) => return Err(err).context("cannot read its header"),
        }
    }
    if read < header.len() || &header[..16] != MAGIC {
        bail!("not an SQLite database (it does not start with the header \"SQLite format 3\")");
    }
    Ok(Header {
        wal: header[18] == 2 && header[19] == 2,
    })
}

/// A `file:` URI for `path` with query `params` (<https://www.sqlite.org/uri.html>): `%`, `?` and `#` are escaped.
fn uri(path: &Path, params: &str) -> anyhow::Result<String> {
    let path = path
        .to_str()
        .ok_or_else(|| anyhow!("the path is not valid UTF-8"))?;
    let mut uri = String::from("file:");
    for c in path.chars() {
        match c {
            '%' => uri.push_str("%25"),
            '?' => uri.push_str("%3f"),
            '#' => uri.push_str("%23"),
            c => uri.push(c),
        }
    }
    uri.push('?');
    uri.push_str(params);
    Ok(uri)
}

/// The database's size and modification time and its neighbours' sizes, to tell whether anything changed.
#[derive(Debug, PartialEq, Eq)]
struct Stamp {
    size: u64,
    modified: Option<SystemTime>,
    /// `(suffix, size)` of each neighbour that exists.
    neighbours: Vec<(&'static str, u64)>,
}

impl Stamp {
    fn take(db: &Path) -> anyhow::Result<Self> {
        let meta = std::fs::metadata(db).context("cannot read its metadata")?;
        let mut neighbours = Vec::new();
        for suffix in NEIGHBOURS {
            let mut name = db.as_os_str().to_owned();
            name.push(suffix);
            if let Ok(m) = std::fs::metadata(&name) {
                neighbours.push((suffix, m.len()));
            }
        }
        Ok(Stamp {
            size: meta.len(),
            modified: meta.modified().ok(),
            neighbours,
        })
    }

    fn size(&self, suffix: &str) -> Option<u64> {
        self.neighbours
            .iter()
            .find(|(s, _)| *s == suffix)
            .map(|&(_, size)| size)
    }

    fn has(&self, suffix: &str) -> bool {
        self.size(suffix).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_escape_what_sqlite_would_read_as_query_or_fragment() {
        assert_eq!(
            uri(Path::new("/data/a b%?#.db"), "mode=ro").unwrap(),
            "file:/data/a b%25%3f%23.db?mode=ro"
        );
    }
}
