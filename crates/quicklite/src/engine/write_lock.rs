//! The write lock held by another connection: how long a write waits for it, and who held it when a write gave up.
//!
//! quicklite has one writer per database, so a write that finds the write lock taken finds it held by another
//! connection: another process, or a connection of this process that the handle does not own. Litestream is the
//! usual one: before each `PASSIVE` checkpoint it takes the write lock as a barrier (an `INSERT` into
//! `_litestream_lock` it rolls back) and holds it while it copies the end of the WAL and checkpoints. Watching 3,000
//! databases on two busy cores, it held it for 3–5 s and more (`/proc/locks`: its pid's lock on byte 120 of the
//! `-shm` file, SQLite's WAL write lock, while the writer's busy handler gave up after the 5 s busy timeout). The
//! lock is held legitimately, so a write waits for it as long as the write itself allows: up to its deadline, or
//! `write_lock_wait` without one ([`gives_up_at`]). One that gives up is told who held the lock ([`held`]).

use std::time::{Duration, Instant};

use crate::request::WriteRequest;
use crate::{Error, RequestKind};

/// When `request`, whose wait for the write lock began at `since`, stops waiting: at its deadline if it has one
/// (then it fails with [`Error::Timeout`], as any write still waiting at its deadline), else `bound` after `since`
/// (then it fails with [`Error::WriteLockHeld`]).
pub(crate) fn gives_up_at(request: &WriteRequest, since: Instant, bound: Duration) -> Instant {
    request
        .deadline
        .map_or(since + bound, |deadline| deadline.at)
}

/// How long from `now` the writes of `group`, waiting since `since`, may wait for the lock: until the first of them
/// gives up ([`gives_up_at`]).
pub(crate) fn wait(
    group: &[WriteRequest],
    since: Instant,
    bound: Duration,
    now: Instant,
) -> Duration {
    group
        .iter()
        .map(|r| gives_up_at(r, since, bound))
        .min()
        .map_or(Duration::ZERO, |at| at.saturating_duration_since(now))
}

/// The error of `request`, which waited `waited` for the write lock of the database at `path` and gave up without
/// running: its deadline's timeout if that passed, else who held the lock ([`held`]).
pub(crate) fn gave_up(request: &WriteRequest, path: Option<&str>, waited: Duration) -> Error {
    match request.deadline {
        Some(deadline) if deadline.passed(Instant::now()) => {
            deadline.error(RequestKind::Write, false)
        }
        _ => held(path, waited),
    }
}

/// The error of a write that waited `waited` for the write lock of the database at `path` and gave up: it names
/// the process that holds the lock, if the system tells. Logged as a warning.
pub(crate) fn held(path: Option<&str>, waited: Duration) -> Error {
    // The kernel prints `/proc/locks` a page at a time from a list that other lock calls change meanwhile (the
    // readers' marks, taken and let go at every read), so one reading can miss a line: a few readings, a
    // millisecond apart, before saying the system did not tell.
    let pid = path.and_then(|p| {
        (0..LOOKS).find_map(|look| {
            if look > 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
            holder(std::path::Path::new(p))
        })
    });
    let program = pid.and_then(program);
    tracing::warn!(
        database = path.unwrap_or_default(),
        waited_ms = waited.as_millis() as u64,
        pid,
        program = program.as_deref().unwrap_or_default(),
        "a write gave up waiting for the write lock, which another connection held (Builder::write_lock_wait \
         bounds the wait)"
    );
    Error::WriteLockHeld {
        waited,
        pid,
        program,
    }
}

/// Readings of `/proc/locks` before a write that gave up says the system did not tell who held the lock.
const LOOKS: usize = 4;

/// Where SQLite keeps the write lock of a database: in WAL mode byte 120 of the `-shm` file (`WALINDEX_LOCK_OFFSET`
/// plus `WAL_WRITE_LOCK`); in rollback-journal mode the `RESERVED` byte of the database file, or its `PENDING`
/// byte and shared range for a writer about to commit.
const WAL_WRITE_LOCK_BYTE: u64 = 120;
const PENDING_BYTE: u64 = 0x4000_0000;
const SHARED_LAST_BYTE: u64 = PENDING_BYTE + 2 + 510 - 1;

/// The process holding the write lock of the database at `path`, as `/proc/locks` lists POSIX locks (SQLite's
/// locks on Unix). Read only when a write gives up, so its cost (a line per lock on the machine) is paid rarely.
#[cfg(target_os = "linux")]
fn holder(path: &std::path::Path) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;

    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    let mut shm = path.as_os_str().to_owned();
    shm.push("-shm");
    let file = |p: &std::path::Path| {
        std::fs::metadata(p)
            .ok()
            .map(|m| (dev_major(m.dev()), dev_minor(m.dev()), m.ino()))
    };
    let shm = file(std::path::Path::new(&shm));
    let db = file(path);
    locks.lines().find_map(|line| {
        let lock = Lock::parse(line)?;
        let held = if Some(lock.file) == shm {
            lock.covers(WAL_WRITE_LOCK_BYTE, WAL_WRITE_LOCK_BYTE)
        } else if Some(lock.file) == db {
            lock.covers(PENDING_BYTE, SHARED_LAST_BYTE)
        } else {
            false
        };
        held.then_some(lock.pid)
    })
}

#[cfg(not(target_os = "linux"))]
fn holder(_path: &std::path::Path) -> Option<u32> {
    None
}

/// The program name of process `pid`.
fn program(pid: u32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .ok()
        .map(|comm| comm.trim_end().to_owned())
}

/// A write lock held, as one line of `/proc/locks` says it.
#[derive(Debug, PartialEq, Eq)]
struct Lock {
    pid: u32,
    /// Device major and minor number and inode of the locked file.
    file: (u64, u64, u64),
    start: u64,
    /// The last byte locked; `None` to the end of the file.
    end: Option<u64>,
}

impl Lock {
    /// A held POSIX write lock from a line such as `3: POSIX  ADVISORY  WRITE 4242 fe:00:1234 120 120`; `None` for
    /// any other (read locks, `flock` and open-file-description locks, a process blocked waiting: `3: -> POSIX …`).
    fn parse(line: &str) -> Option<Lock> {
        let mut fields = line.split_whitespace().skip(1);
        let (kind, _, mode) = (fields.next()?, fields.next()?, fields.next()?);
        if kind != "POSIX" || mode != "WRITE" {
            return None;
        }
        let pid = fields.next()?.parse().ok()?;
        let mut file = fields.next()?.split(':');
        let major = u64::from_str_radix(file.next()?, 16).ok()?;
        let minor = u64::from_str_radix(file.next()?, 16).ok()?;
        let inode = file.next()?.parse().ok()?;
        let start = fields.next()?.parse().ok()?;
        let end = match fields.next()? {
            "EOF" => None,
            end => Some(end.parse().ok()?),
        };
        Some(Lock {
            pid,
            file: (major, minor, inode),
            start,
            end,
        })
    }

    /// Whether the lock covers any byte from `first` to `last`.
    fn covers(&self, first: u64, last: u64) -> bool {
        self.start <= last && self.end.is_none_or(|end| end >= first)
    }
}

/// The major number of device `dev`, as glibc's `gnu_dev_major` splits it.
fn dev_major(dev: u64) -> u64 {
    ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff)
}

/// The minor number of device `dev`, as glibc's `gnu_dev_minor` splits it.
fn dev_minor(dev: u64) -> u64 {
    (dev & 0xff) | ((dev >> 12) & !0xff)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_held_posix_write_locks_are_read_from_proc_locks() {
        assert_eq!(
            Lock::parse("1: POSIX  ADVISORY  WRITE 4242 fe:01:10175308 120 120"),
            Some(Lock {
                pid: 4242,
                file: (0xfe, 1, 10175308),
                start: 120,
                end: Some(120),
            })
        );
        assert_eq!(
            Lock::parse("7: POSIX  ADVISORY  WRITE 17 08:10:99 1073741824 EOF").map(|l| l.end),
            Some(None)
        );
        for other in [
            "2: POSIX  ADVISORY  READ 4242 fe:00:10175308 128 128",
            "3: -> POSIX  ADVISORY  WRITE 4243 fe:00:10175308 120 120",
            "4: FLOCK  ADVISORY  WRITE 17290 fe:00:5693453 0 EOF",
            "5: OFDLCK ADVISORY  WRITE -1 fe:00:5693453 0 EOF",
            "",
        ] {
            assert_eq!(Lock::parse(other), None, "{other}");
        }
    }

    #[test]
    fn a_lock_covers_the_bytes_of_its_range() {
        let lock = |start, end| Lock {
            pid: 1,
            file: (0, 0, 0),
            start,
            end,
        };
        assert!(lock(120, Some(120)).covers(120, 120));
        assert!(!lock(121, Some(127)).covers(120, 120));
        assert!(
            lock(PENDING_BYTE + 1, Some(PENDING_BYTE + 1)).covers(PENDING_BYTE, SHARED_LAST_BYTE)
        );
        assert!(lock(0, None).covers(PENDING_BYTE, SHARED_LAST_BYTE));
        assert!(!lock(0, Some(PENDING_BYTE - 1)).covers(PENDING_BYTE, SHARED_LAST_BYTE));
    }

    #[test]
    fn device_numbers_split_as_the_kernel_prints_them() {
        // makedev(0xfe, 0x00) and makedev(259, 70000) as glibc builds them.
        assert_eq!((dev_major(0xfe00), dev_minor(0xfe00)), (0xfe, 0));
        let dev = ((259_u64 & 0xfff) << 8) | (70000_u64 & 0xff) | ((70000_u64 & !0xff) << 12);
        assert_eq!((dev_major(dev), dev_minor(dev)), (259, 70000));
    }
}
