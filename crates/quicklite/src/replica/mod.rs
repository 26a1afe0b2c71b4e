//! Beyond one machine, on what Litestream keeps in object storage: read replicas, read through Litestream's VFS (a
//! SQLite extension that reads the replica's pages and polls it for new transactions), and a registry's tenants
//! restored from their replicas on another machine.

use std::ffi::{CStr, CString, c_char, c_int};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use rusqlite::{Connection, ffi};

mod pages;
mod program;
mod restore;
mod scratch;
mod state;

pub(crate) use program::{Failure, Stop};
pub(crate) use restore::Look;
pub use restore::Restore;
pub(crate) use scratch::remove_stale;
pub(crate) use state::local_position;

/// The name Litestream's VFS registers itself under.
const VFS_NAME: &CStr = c"litestream";

/// How often Litestream's VFS polls object storage unless told otherwise.
pub(crate) const VFS_POLL_INTERVAL: Duration = Duration::from_secs(1);

/// The extension's entry point (SQLite would guess it from the file name, which users rename).
const ENTRY_POINT: &CStr = c"sqlite3_litestreamvfs_init";

/// Where a read replica reads from: the replica Litestream writes to object storage, read through Litestream's VFS.
/// Given to [`Builder::replica`](crate::Builder::replica).
///
/// The VFS is Litestream's loadable SQLite extension (`cmd/litestream-vfs` in Litestream's repository, built with
/// `go build -buildmode=c-archive` and linked into a shared library; `scripts/install-litestream-vfs.sh` builds it).
/// It is loaded once per process; every replica of the process must name the same file. It logs to standard output
/// unless the `LITESTREAM_LOG_FILE` environment variable names a file, and finds S3 credentials as Litestream does
/// (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, …).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replica {
    extension: PathBuf,
    url: String,
    poll_interval: Option<Duration>,
    cache_size: Option<u64>,
}

impl Replica {
    /// The replica at `url`, as Litestream's replica URLs name it (`s3://bucket/path`, with `?endpoint=…` for an
    /// S3-compatible server; `file:///path` for a directory), read through the VFS in the shared library at
    /// `extension`.
    pub fn litestream(extension: impl Into<PathBuf>, url: impl Into<String>) -> Replica {
        Replica {
            extension: extension.into(),
            url: url.into(),
            poll_interval: None,
            cache_size: None,
        }
    }

    /// How often the replica's connection asks object storage for new transactions. By default, the VFS's own
    /// interval.
    pub fn poll_interval(mut self, every: Duration) -> Replica {
        self.poll_interval = Some(every);
        self
    }

    /// The bytes of pages the replica's connection keeps in memory. By default, the VFS's own size.
    pub fn cache_size(mut self, bytes: u64) -> Replica {
        self.cache_size = Some(bytes);
        self
    }

    /// The replica's URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// How often the connection polls object storage, if set; the VFS's default otherwise.
    pub(crate) fn poll_interval_or(&self, default: Duration) -> Duration {
        self.poll_interval.unwrap_or(default)
    }

    /// The URI that opens the replica through the VFS, under the local `name` (a label: nothing is written there).
    pub(crate) fn uri(&self, name: &Path) -> String {
        let mut uri = format!(
            "file:{}?vfs=litestream&replica_url={}",
            encode(name.as_os_str().as_bytes(), b"/"),
            encode(self.url.as_bytes(), b""),
        );
        if let Some(every) = self.poll_interval {
            uri.push_str(&format!("&poll_interval={}ms", every.as_millis().max(1)));
        }
        if let Some(bytes) = self.cache_size {
            uri.push_str(&format!("&cache_size={bytes}"));
        }
        uri
    }

    /// Loads the VFS into the process unless it is there already; the error says why it could not. Every replica
    /// of a process must use the same extension: the VFS has one name.
    pub(crate) fn load_vfs(&self) -> Result<(), String> {
        static LOADED: Mutex<Option<Loaded>> = Mutex::new(None);
        let mut loaded = crate::util::lock(&LOADED);
        match loaded.as_ref() {
            Some(Loaded { from, .. }) if *from == self.extension => return Ok(()),
            Some(Loaded { from, .. }) => {
                return Err(format!(
                    "Litestream's VFS is loaded from {} already; every replica of a process uses the same \
                     extension, not {}",
                    from.display(),
                    self.extension.display()
                ));
            }
            None => {}
        }
        if vfs_registered() {
            return Err(
                "a VFS named \"litestream\" is registered already, not by a replica of this process".into(),
            );
        }
        let fail = |message: &str| {
            format!(
                "Litestream's VFS could not be loaded from {}: {message}",
                self.extension.display()
            )
        };
        let conn = load_extension(&self.extension).map_err(|message| fail(&message))?;
        if !vfs_registered() {
            return Err(fail(
                "its entry point returned without registering a VFS named \"litestream\"",
            ));
        }
        *loaded = Some(Loaded {
            from: self.extension.clone(),
            _conn: conn,
        });
        Ok(())
    }
}

/// Litestream's VFS as this process loaded it.
struct Loaded {
    /// The shared library it was loaded from.
    from: PathBuf,
    /// The connection that loaded it, kept open for the life of the process (in a static, never dropped). SQLite
    /// unloads (`dlclose`) an extension when the connection that loaded it closes, unless its entry point returned
    /// `SQLITE_OK_LOAD_PERMANENTLY`; Litestream's does today, but nothing checks it, and a VFS registered from a
    /// library that is unloaded leaves SQLite calling into unmapped code. Checking the VFS is registered after the
    /// load (`vfs_registered`) says the load worked; only keeping this connection makes sure the library stays
    /// mapped under it, whatever the entry point returns, for the price of one in-memory connection.
    _conn: Connection,
}

/// Whether a VFS named `litestream` is registered in the process.
fn vfs_registered() -> bool {
    // SAFETY: the name is a valid C string, which SQLite only reads; the pointer returned is only compared with null.
    !unsafe { ffi::sqlite3_vfs_find(VFS_NAME.as_ptr()) }.is_null()
}

/// A transaction of a replicated database as Litestream numbers it (its TXID): how far a replica has read, and what a
/// write on the primary reached object storage as ([`Litestream::sync`](crate::litestream::Litestream::sync)). Every
/// write Litestream replicated up to a position is in every later one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Position(u64);

impl Position {
    /// The position of Litestream's transaction `txid`.
    pub fn from_txid(txid: u64) -> Position {
        Position(txid)
    }

    /// Litestream's number of the transaction.
    pub fn txid(self) -> u64 {
        self.0
    }
}

impl std::fmt::Display for Position {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // As Litestream writes TXIDs.
        write!(f, "{:016x}", self.0)
    }
}

/// Where a replica's connection stands ([`Database::replica_status`](crate::Database::replica_status)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReplicaStatus {
    /// The last transaction it has.
    pub position: Position,
    /// How long since it last heard from object storage, in whole seconds as the VFS counts; `None` before its
    /// first poll answered.
    pub since_poll: Option<Duration>,
}

/// The position of the replica as `conn` sees it now, with the time since its last poll. Outside a read transaction
/// (it reads no table, so it takes none) it is the position the connection's next read transaction sees at least.
pub(crate) fn status(conn: &Connection) -> rusqlite::Result<ReplicaStatus> {
    conn.query_row("SELECT litestream_txid(), litestream_lag()", [], |row| {
        let txid: String = row.get(0)?;
        let lag: i64 = row.get(1)?;
        let txid = u64::from_str_radix(&txid, 16).map_err(|e| {
            rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, Box::new(e))
        })?;
        Ok(ReplicaStatus {
            position: Position(txid),
            since_poll: u64::try_from(lag).ok().map(Duration::from_secs),
        })
    })
}

/// Loads the extension at `path` through a connection of its own, returned: the extension stays loaded while it is
/// open ([`Loaded`]).
fn load_extension(path: &Path) -> Result<Connection, String> {
    let path = CString::new(path.as_os_str().as_bytes()).map_err(|e| e.to_string())?;
    let conn = Connection::open_in_memory().map_err(|e| e.to_string())?;
    // SAFETY: the handle is that of `conn`, open for the whole block; loading is turned on for this connection's C
    // API only (not SQL's `load_extension()`); the error message SQLite allocates is freed with `sqlite3_free`.
    unsafe {
        let db = conn.handle();
        let rc = ffi::sqlite3_db_config(
            db,
            ffi::SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION,
            1 as c_int,
            std::ptr::null_mut::<c_int>(),
        );
        if rc != ffi::SQLITE_OK {
            return Err(format!(
                "extension loading is not available (SQLite code {rc})"
            ));
        }
        let mut message: *mut c_char = std::ptr::null_mut();
        let rc = ffi::sqlite3_load_extension(db, path.as_ptr(), ENTRY_POINT.as_ptr(), &mut message);
        if rc != ffi::SQLITE_OK {
            let text = if message.is_null() {
                format!("SQLite code {rc}")
            } else {
                let text = CStr::from_ptr(message).to_string_lossy().into_owned();
                ffi::sqlite3_free(message.cast());
                text
            };
            return Err(text);
        }
    }
    Ok(conn)
}

/// Percent-encodes `bytes` for a SQLite URI, keeping letters, digits, `-._~` and the bytes in `keep`.
fn encode(bytes: &[u8], keep: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for &b in bytes {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) || keep.contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_uri_carries_the_replica_url_encoded() {
        let replica = Replica::litestream(
            "/x/vfs.so",
            "s3://bkt/app?endpoint=http://127.0.0.1:9000&region=us-east-1",
        )
        .poll_interval(Duration::from_millis(100));
        assert_eq!(
            replica.uri(Path::new("/srv/app replica.db")),
            "file:/srv/app%20replica.db?vfs=litestream&replica_url=s3%3A%2F%2Fbkt%2Fapp%3Fendpoint%3Dhttp%3A%2F%2F\
             127.0.0.1%3A9000%26region%3Dus-east-1&poll_interval=100ms"
        );
    }

    #[test]
    fn positions_print_as_litestream_writes_txids() {
        assert_eq!(Position::from_txid(0x2a).to_string(), "000000000000002a");
        assert!(Position::from_txid(3) < Position::from_txid(10));
    }
}
